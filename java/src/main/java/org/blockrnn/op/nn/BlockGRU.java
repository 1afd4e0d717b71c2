package org.blockrnn.op.nn;

import java.util.Map;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;

/**
 * blockrnn's BlockGRU: GRUBlockCell over a whole sequence (x is [T, B, I]; outputs [T, B, H]).
 *
 * <p>Runs the op {@code BlockGRU} (docs/ops.md). Shaped like TF-Java's {@code org.tensorflow.op.nn.BlockLSTM}
 * without the {@code Scope}: the factory runs the op at once and the accessors return its outputs.
 *
 * @param <T> the tensor type of inputs and outputs ({@link org.blockrnn.FloatTensor} or
 *     {@link org.blockrnn.DoubleTensor})
 */
public final class BlockGRU<T extends Tensor> {
  /** The name of the op this class runs. */
  public static final String OP_NAME = "BlockGRU";

  private final T r;
  private final T u;
  private final T c;
  private final T h;

  @SuppressWarnings("unchecked")
  private BlockGRU(Tensor[] outputs) {
    r = (T) outputs[0];
    u = (T) outputs[1];
    c = (T) outputs[2];
    h = (T) outputs[3];
  }

  /**
   * Runs {@code BlockGRU}.
   *
   * @param seqLenMax the number of steps to run, in [0, T]; outputs past it are zero
   * @param x input {@code x}
   * @param hPrev input {@code h_prev}
   * @param wRu input {@code w_ru}
   * @param wC input {@code w_c}
   * @param bRu input {@code b_ru}
   * @param bC input {@code b_c}
   * @param <T> the tensor type
   * @return the op with its outputs computed
   * @throws IllegalArgumentException when an input is null or has the wrong shape or type (the
   *     message names the argument)
   */
  public static <T extends Tensor> BlockGRU<T> create(
      long seqLenMax, T x, T hPrev, T wRu, T wC, T bRu, T bC) {
    Map<String, Object> attrs = Map.of();
    Tensor[] outputs =
        RawOps.run(OP_NAME, seqLenMax, attrs, x, hPrev, wRu, wC, bRu, bC);
    return new BlockGRU<>(outputs);
  }

  /**
   * Output {@code r}.
   *
   * @return the tensor
   */
  public T r() {
    return r;
  }

  /**
   * Output {@code u}.
   *
   * @return the tensor
   */
  public T u() {
    return u;
  }

  /**
   * Output {@code c}.
   *
   * @return the tensor
   */
  public T c() {
    return c;
  }

  /**
   * Output {@code h}.
   *
   * @return the tensor
   */
  public T h() {
    return h;
  }
}
