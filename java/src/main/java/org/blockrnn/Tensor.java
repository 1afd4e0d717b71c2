package org.blockrnn;

import java.util.Arrays;

/**
 * A dense row-major tensor held in a Java array: the type every op of {@code org.blockrnn.op.nn}
 * takes and returns. Immutable: the factories copy their data and {@code data()} returns a copy.
 * The subclasses are {@link FloatTensor} (float32) and {@link DoubleTensor} (float64).
 */
public abstract class Tensor {
  private final long[] shape;

  Tensor(long[] shape, int length) {
    if (shape == null) {
      throw new IllegalArgumentException("shape is null");
    }
    this.shape = shape.clone();
    long n = 1;
    for (int d = 0; d < shape.length; ++d) {
      if (shape[d] < 0) {
        throw new IllegalArgumentException(
            "shape " + Arrays.toString(shape) + " has a negative dimension");
      }
      n = Math.multiplyExact(n, shape[d]);
    }
    if (n != length) {
      throw new IllegalArgumentException(
          "data has " + length + " elements, shape " + Arrays.toString(shape) + " needs " + n);
    }
  }

  static int checkedSize(long[] shape) {
    if (shape == null) {
      throw new IllegalArgumentException("shape is null");
    }
    long n = 1;
    for (long d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException(
            "shape " + Arrays.toString(shape) + " has a negative dimension");
      }
      n = Math.multiplyExact(n, d);
    }
    if (n > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(
          "shape " + Arrays.toString(shape) + " has more elements than a Java array holds");
    }
    return (int) n;
  }

  /**
   * The dimensions.
   *
   * @return a copy of the shape
   */
  public long[] shape() {
    return shape.clone();
  }

  /**
   * The number of dimensions.
   *
   * @return the rank
   */
  public int rank() {
    return shape.length;
  }

  /**
   * The number of elements.
   *
   * @return the product of the dimensions
   */
  public abstract int size();

  /**
   * The element type, as TensorFlow names it.
   *
   * @return "float" or "double"
   */
  public abstract String dtype();

  /** The backing array (not copied), for the native code. */
  abstract Object array();

  /** The flat row-major offset of an index, checked. */
  int offset(long... indices) {
    if (indices == null || indices.length != shape.length) {
      throw new IllegalArgumentException(
          "index of rank " + (indices == null ? 0 : indices.length) + " for a tensor of shape "
              + Arrays.toString(shape));
    }
    long offset = 0;
    for (int d = 0; d < shape.length; ++d) {
      if (indices[d] < 0 || indices[d] >= shape[d]) {
        throw new IndexOutOfBoundsException(
            "index " + Arrays.toString(indices) + " is outside shape " + Arrays.toString(shape));
      }
      offset = offset * shape[d] + indices[d];
    }
    return (int) offset;
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + Arrays.toString(shape);
  }
}
