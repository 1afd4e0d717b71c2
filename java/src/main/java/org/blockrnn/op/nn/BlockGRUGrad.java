package org.blockrnn.op.nn;

import java.util.Map;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;

/**
 * The gradient of {@link BlockGRU}.
 *
 * <p>Runs the op {@code BlockGRUGrad} (docs/ops.md). Shaped like TF-Java's {@code org.tensorflow.op.nn.BlockLSTM}
 * without the {@code Scope}: the factory runs the op at once and the accessors return its outputs.
 *
 * @param <T> the tensor type of inputs and outputs ({@link org.blockrnn.FloatTensor} or
 *     {@link org.blockrnn.DoubleTensor})
 */
public final class BlockGRUGrad<T extends Tensor> {
  /** The name of the op this class runs. */
  public static final String OP_NAME = "BlockGRUGrad";

  private final T xGrad;
  private final T hPrevGrad;
  private final T wRuGrad;
  private final T wCGrad;
  private final T bRuGrad;
  private final T bCGrad;

  @SuppressWarnings("unchecked")
  private BlockGRUGrad(Tensor[] outputs) {
    xGrad = (T) outputs[0];
    hPrevGrad = (T) outputs[1];
    wRuGrad = (T) outputs[2];
    wCGrad = (T) outputs[3];
    bRuGrad = (T) outputs[4];
    bCGrad = (T) outputs[5];
  }

  /**
   * Runs {@code BlockGRUGrad}.
   *
   * @param seqLenMax the number of steps to run, in [0, T]; outputs past it are zero
   * @param x input {@code x}
   * @param hPrev input {@code h_prev}
   * @param wRu input {@code w_ru}
   * @param wC input {@code w_c}
   * @param bRu input {@code b_ru}
   * @param bC input {@code b_c}
   * @param r input {@code r}
   * @param u input {@code u}
   * @param c input {@code c}
   * @param h input {@code h}
   * @param hGrad input {@code h_grad}
   * @param <T> the tensor type
   * @return the op with its outputs computed
   * @throws IllegalArgumentException when an input is null or has the wrong shape or type (the
   *     message names the argument)
   */
  public static <T extends Tensor> BlockGRUGrad<T> create(
      long seqLenMax, T x, T hPrev, T wRu, T wC, T bRu, T bC, T r, T u, T c, T h, T hGrad) {
    Map<String, Object> attrs = Map.of();
    Tensor[] outputs =
        RawOps.run(OP_NAME, seqLenMax, attrs, x, hPrev, wRu, wC, bRu, bC, r, u, c, h, hGrad);
    return new BlockGRUGrad<>(outputs);
  }

  /**
   * Output {@code x_grad}.
   *
   * @return the tensor
   */
  public T xGrad() {
    return xGrad;
  }

  /**
   * Output {@code h_prev_grad}.
   *
   * @return the tensor
   */
  public T hPrevGrad() {
    return hPrevGrad;
  }

  /**
   * Output {@code w_ru_grad}.
   *
   * @return the tensor
   */
  public T wRuGrad() {
    return wRuGrad;
  }

  /**
   * Output {@code w_c_grad}.
   *
   * @return the tensor
   */
  public T wCGrad() {
    return wCGrad;
  }

  /**
   * Output {@code b_ru_grad}.
   *
   * @return the tensor
   */
  public T bRuGrad() {
    return bRuGrad;
  }

  /**
   * Output {@code b_c_grad}.
   *
   * @return the tensor
   */
  public T bCGrad() {
    return bCGrad;
  }
}
