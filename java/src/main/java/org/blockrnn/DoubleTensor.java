package org.blockrnn;

import java.util.Arrays;

/** A float64 tensor (TensorFlow's {@code TFloat64}), dense and row-major. */
public final class DoubleTensor extends Tensor {
  private final double[] data;

  private DoubleTensor(double[] data, long[] shape) {
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
  public static DoubleTensor of(double[] data, long... shape) {
    if (data == null) {
      throw new IllegalArgumentException("data is null");
    }
    return new DoubleTensor(data.clone(), shape);
  }

  /**
   * A tensor of zeros.
   *
   * @param shape the dimensions
   * @return the tensor
   */
  public static DoubleTensor zeros(long... shape) {
    return new DoubleTensor(new double[checkedSize(shape)], shape);
  }

  /** Wraps an array the library made (not copied). */
  static DoubleTensor wrap(double[] data, long[] shape) {
    return new DoubleTensor(data, shape);
  }

  /**
   * The elements, row-major.
   *
   * @return a copy of the data
   */
  public double[] data() {
    return data.clone();
  }

  /**
   * One element.
   *
   * @param indices one index per dimension
   * @return the element
   */
  public double getDouble(long... indices) {
    return data[offset(indices)];
  }

  @Override
  public int size() {
    return data.length;
  }

  @Override
  public String dtype() {
    return "double";
  }

  @Override
  Object array() {
    return data;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof DoubleTensor
        && Arrays.equals(shape(), ((DoubleTensor) o).shape())
        && Arrays.equals(data, ((DoubleTensor) o).data);
  }

  @Override
  public int hashCode() {
    return 31 * Arrays.hashCode(shape()) + Arrays.hashCode(data);
  }
}
