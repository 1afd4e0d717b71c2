package org.blockrnn;

import java.util.Arrays;

/**
 * A dense row-major tensor held in a Java array: the type every op of {@code org.blockrnn.op.nn}
 * takes and returns. Immutable: the factories copy their data and {@code data()} returns a copy.
 * The subclasses are {@link FloatTensor} (float32) and {@link DoubleTensor} (float64), the ops'
 * inputs and outputs, and {@link LongTensor} (int64), the sequence ops' optional per-example
 * lengths {@code seq_lengths}. They are generated from one template
 * (java/src/template/TypedTensor.java.in); all they share lives here.
 */
public abstract class Tensor {
  private final long[] shape;
  private final Object data; // float[], double[] or long[], never handed out

  Tensor(Object data, long[] shape) {
    int n = checkedSize(shape);
    int length = java.lang.reflect.Array.getLength(data);
    if (n != length) {
      throw new IllegalArgumentException(
          "data has " + length + " elements, shape " + Arrays.toString(shape) + " needs " + n);
    }
    this.shape = shape.clone();
    this.data = data;
  }

  static <A> A nonNull(A data) {
    if (data == null) {
      throw new IllegalArgumentException("data is null");
    }
    return data;
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
      n = d == 0 || n <= Integer.MAX_VALUE / d ? n * d : Long.MAX_VALUE;
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
  public int size() {
    return java.lang.reflect.Array.getLength(data);
  }

  /**
   * The element type, as TensorFlow names it.
   *
   * @return "float", "double" or "int64"
   */
  public abstract String dtype();

  /** The backing array (not copied), for the native code. */
  Object array() {
    return data;
  }

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
  public boolean equals(Object o) {
    return o != null && o.getClass() == getClass()
        && Arrays.equals(shape, ((Tensor) o).shape)
        && java.util.Objects.deepEquals(data, ((Tensor) o).data);
  }

  @Override
  public int hashCode() {
    return 31 * Arrays.hashCode(shape) + Arrays.deepHashCode(new Object[] {data});
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + Arrays.toString(shape);
  }
}
