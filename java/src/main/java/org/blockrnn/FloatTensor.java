package org.blockrnn;

import java.util.Arrays;

/** A float32 tensor (TensorFlow's {@code TFloat32}), dense and row-major. */
public final class FloatTensor extends Tensor {
  private final float[] data;

  private FloatTensor(float[] data, long[] shape) {
    super(shape, data.length);
    this.data = data;
  }

  /**
   * A tensor holding a copy of {@code data}, row-major.
   *
   * @param data the elements, row-major; its length must be the product of the shape
   * @param shape the dimensions (none for a scalar)
   * @return the tensor
   * @throws IllegalArgumentException when the data's length does not match the shape
   */
  public static FloatTensor of(float[] data, long... shape) {
    if (data == null) {
      throw new IllegalArgumentException("data is null");
    }
    return new FloatTensor(data.clone(), shape);
  }

  /**
   * A tensor of zeros.
   *
   * @param shape the dimensions
   * @return the tensor
   */
  public static FloatTensor zeros(long... shape) {
    return new FloatTensor(new float[checkedSize(shape)], shape);
  }

  /** Wraps an array the library made (not copied). */
  static FloatTensor wrap(float[] data, long[] shape) {
    return new FloatTensor(data, shape);
  }

  /**
   * The elements, row-major.
   *
   * @return a copy of the data
   */
  public float[] data() {
    return data.clone();
  }

  /**
   * One element.
   *
   * @param indices one index per dimension
   * @return the element
   */
  public float getFloat(long... indices) {
    return data[offset(indices)];
  }

  @Override
  public int size() {
    return data.length;
  }

  @Override
  public String dtype() {
    return "float";
  }

  @Override
  Object array() {
    return data;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof FloatTensor
        && Arrays.equals(shape(), ((FloatTensor) o).shape())
        && Arrays.equals(data, ((FloatTensor) o).data);
  }

  @Override
  public int hashCode() {
    return 31 * Arrays.hashCode(shape()) + Arrays.hashCode(data);
  }
}
