package org.blockrnn.op.nn;

import java.util.Map;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;

/**
 * The LSTM block cell's backward kernel (ICFO).
 *
 * <p>Runs the op {@code LSTMBlockCellGrad} (docs/ops.md). Shaped like TF-Java's {@code org.tensorflow.op.nn.LSTMBlockCellGrad}
 * without the {@code Scope}: the factory runs the op at once and the accessors return its outputs.
 *
 * @param <T> the tensor type of inputs and outputs ({@link org.blockrnn.FloatTensor} or
 *     {@link org.blockrnn.DoubleTensor})
 */
public final class LSTMBlockCellGrad<T extends Tensor> {
  /** The name of the op this class runs. */
  public static final String OP_NAME = "LSTMBlockCellGrad";

  private final T csPrevGrad;
  private final T dicfo;
  private final T wciGrad;
  private final T wcfGrad;
  private final T wcoGrad;

  @SuppressWarnings("unchecked")
  private LSTMBlockCellGrad(Tensor[] outputs) {
    csPrevGrad = (T) outputs[0];
    dicfo = (T) outputs[1];
    wciGrad = (T) outputs[2];
    wcfGrad = (T) outputs[3];
    wcoGrad = (T) outputs[4];
  }

  /**
   * Runs {@code LSTMBlockCellGrad}.
   *
   * @param x input {@code x}
   * @param csPrev input {@code cs_prev}
   * @param hPrev input {@code h_prev}
   * @param w input {@code w}
   * @param wci input {@code wci}
   * @param wcf input {@code wcf}
   * @param wco input {@code wco}
   * @param b input {@code b}
   * @param i input {@code i}
   * @param cs input {@code cs}
   * @param f input {@code f}
   * @param o input {@code o}
   * @param ci input {@code ci}
   * @param co input {@code co}
   * @param csGrad input {@code cs_grad}
   * @param hGrad input {@code h_grad}
   * @param usePeephole whether the forward op used peephole connections (required, as in TensorFlow)
   * @param <T> the tensor type
   * @return the op with its outputs computed
   * @throws IllegalArgumentException when an input is null or has the wrong shape or type (the
   *     message names the argument)
   */
  public static <T extends Tensor> LSTMBlockCellGrad<T> create(
      T x, T csPrev, T hPrev, T w, T wci, T wcf, T wco, T b, T i, T cs, T f, T o, T ci, T co, T csGrad, T hGrad, Boolean usePeephole) {
    Map<String, Object> attrs = new java.util.HashMap<>();
    if (usePeephole == null) {
      throw new IllegalArgumentException(OP_NAME + ": use_peephole is null (it is required)");
    }
    attrs.put("use_peephole", usePeephole);
    Tensor[] outputs =
        RawOps.run(OP_NAME, null, attrs, x, csPrev, hPrev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, csGrad, hGrad);
    return new LSTMBlockCellGrad<>(outputs);
  }

  /**
   * Output {@code cs_prev_grad}.
   *
   * @return the tensor
   */
  public T csPrevGrad() {
    return csPrevGrad;
  }

  /**
   * Output {@code dicfo}.
   *
   * @return the tensor
   */
  public T dicfo() {
    return dicfo;
  }

  /**
   * Output {@code wci_grad}.
   *
   * @return the tensor
   */
  public T wciGrad() {
    return wciGrad;
  }

  /**
   * Output {@code wcf_grad}.
   *
   * @return the tensor
   */
  public T wcfGrad() {
    return wcfGrad;
  }

  /**
   * Output {@code wco_grad}.
   *
   * @return the tensor
   */
  public T wcoGrad() {
    return wcoGrad;
  }
}
