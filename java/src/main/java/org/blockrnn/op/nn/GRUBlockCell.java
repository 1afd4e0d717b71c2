package org.blockrnn.op.nn;

import java.util.Map;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;

/**
 * One step of TensorFlow's GRU block cell (gate layout [r | u]).
 *
 * <p>Runs the op {@code GRUBlockCell} (docs/ops.md). Shaped like TF-Java's {@code org.tensorflow.op.nn.GRUBlockCell}
 * without the {@code Scope}: the factory runs the op at once and the accessors return its outputs.
 *
 * @param <T> the tensor type of inputs and outputs ({@link org.blockrnn.FloatTensor} or
 *     {@link org.blockrnn.DoubleTensor})
 */
public final class GRUBlockCell<T extends Tensor> {
  /** The name of the op this class runs. */
  public static final String OP_NAME = "GRUBlockCell";

  private final T r;
  private final T u;
  private final T c;
  private final T h;

  @SuppressWarnings("unchecked")
  private GRUBlockCell(Tensor[] outputs) {
    r = (T) outputs[0];
    u = (T) outputs[1];
    c = (T) outputs[2];
    h = (T) outputs[3];
  }

  /**
   * Runs {@code GRUBlockCell}.
   *
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
  public static <T extends Tensor> GRUBlockCell<T> create(
      T x, T hPrev, T wRu, T wC, T bRu, T bC) {
    Map<String, Object> attrs = Map.of();
    Tensor[] outputs =
        RawOps.run(OP_NAME, null, attrs, x, hPrev, wRu, wC, bRu, bC);
    return new GRUBlockCell<>(outputs);
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
