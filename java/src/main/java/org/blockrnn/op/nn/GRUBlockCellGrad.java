package org.blockrnn.op.nn;

import java.util.Map;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;

/**
 * The GRU block cell's backward kernel: gradients with respect to x, hPrev and the gate pre-activations.
 *
 * <p>Runs the op {@code GRUBlockCellGrad} (docs/ops.md). Shaped like TF-Java's {@code org.tensorflow.op.nn.GRUBlockCellGrad}
 * without the {@code Scope}: the factory runs the op at once and the accessors return its outputs.
 *
 * @param <T> the tensor type of inputs and outputs ({@link org.blockrnn.FloatTensor} or
 *     {@link org.blockrnn.DoubleTensor})
 */
public final class GRUBlockCellGrad<T extends Tensor> {
  /** The name of the op this class runs. */
  public static final String OP_NAME = "GRUBlockCellGrad";

  private final T dX;
  private final T dHPrev;
  private final T dCBar;
  private final T dRBarUBar;

  @SuppressWarnings("unchecked")
  private GRUBlockCellGrad(Tensor[] outputs) {
    dX = (T) outputs[0];
    dHPrev = (T) outputs[1];
    dCBar = (T) outputs[2];
    dRBarUBar = (T) outputs[3];
  }

  /**
   * Runs {@code GRUBlockCellGrad}.
   *
   * @param x input {@code x}
   * @param hPrev input {@code h_prev}
   * @param wRu input {@code w_ru}
   * @param wC input {@code w_c}
   * @param bRu input {@code b_ru}
   * @param bC input {@code b_c}
   * @param r input {@code r}
   * @param u input {@code u}
   * @param c input {@code c}
   * @param dH input {@code d_h}
   * @param <T> the tensor type
   * @return the op with its outputs computed
   * @throws IllegalArgumentException when an input is null or has the wrong shape or type (the
   *     message names the argument)
   */
  public static <T extends Tensor> GRUBlockCellGrad<T> create(
      T x, T hPrev, T wRu, T wC, T bRu, T bC, T r, T u, T c, T dH) {
    Map<String, Object> attrs = Map.of();
    Tensor[] outputs =
        RawOps.run(OP_NAME, null, attrs, x, hPrev, wRu, wC, bRu, bC, r, u, c, dH);
    return new GRUBlockCellGrad<>(outputs);
  }

  /**
   * Output {@code d_x}.
   *
   * @return the tensor
   */
  public T dX() {
    return dX;
  }

  /**
   * Output {@code d_h_prev}.
   *
   * @return the tensor
   */
  public T dHPrev() {
    return dHPrev;
  }

  /**
   * Output {@code d_c_bar}.
   *
   * @return the tensor
   */
  public T dCBar() {
    return dCBar;
  }

  /**
   * Output {@code d_r_bar_u_bar}.
   *
   * @return the tensor
   */
  public T dRBarUBar() {
    return dRBarUBar;
  }
}
