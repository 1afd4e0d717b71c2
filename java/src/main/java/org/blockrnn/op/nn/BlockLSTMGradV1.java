package org.blockrnn.op.nn;

import java.util.Map;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;

/**
 * The gradient of {@link BlockLSTMV1}: TensorFlow's BlockLSTMGrad (ICFO).
 *
 * <p>Runs the op {@code BlockLSTMGrad} (docs/ops.md). Shaped like TF-Java's {@code org.tensorflow.op.nn.BlockLSTM}
 * without the {@code Scope}: the factory runs the op at once and the accessors return its outputs.
 *
 * @param <T> the tensor type of inputs and outputs ({@link org.blockrnn.FloatTensor} or
 *     {@link org.blockrnn.DoubleTensor})
 */
public final class BlockLSTMGradV1<T extends Tensor> {
  /** The name of the op this class runs. */
  public static final String OP_NAME = "BlockLSTMGrad";

  private final T xGrad;
  private final T csPrevGrad;
  private final T hPrevGrad;
  private final T wGrad;
  private final T wciGrad;
  private final T wcfGrad;
  private final T wcoGrad;
  private final T bGrad;

  @SuppressWarnings("unchecked")
  private BlockLSTMGradV1(Tensor[] outputs) {
    xGrad = (T) outputs[0];
    csPrevGrad = (T) outputs[1];
    hPrevGrad = (T) outputs[2];
    wGrad = (T) outputs[3];
    wciGrad = (T) outputs[4];
    wcfGrad = (T) outputs[5];
    wcoGrad = (T) outputs[6];
    bGrad = (T) outputs[7];
  }

  /**
   * Runs {@code BlockLSTMGrad}.
   *
   * @param seqLenMax the number of steps to run, in [0, T]; outputs past it are zero
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
   * @param h input {@code h}
   * @param csGrad input {@code cs_grad}
   * @param hGrad input {@code h_grad}
   * @param usePeephole whether the forward op used peephole connections (required, as in TensorFlow)
   * @param <T> the tensor type
   * @return the op with its outputs computed
   * @throws IllegalArgumentException when an input is null or has the wrong shape or type (the
   *     message names the argument)
   */
  public static <T extends Tensor> BlockLSTMGradV1<T> create(
      long seqLenMax, T x, T csPrev, T hPrev, T w, T wci, T wcf, T wco, T b, T i, T cs, T f, T o, T ci, T co, T h, T csGrad, T hGrad, Boolean usePeephole) {
    Map<String, Object> attrs = new java.util.HashMap<>();
    if (usePeephole == null) {
      throw new IllegalArgumentException(OP_NAME + ": use_peephole is null (it is required)");
    }
    attrs.put("use_peephole", usePeephole);
    Tensor[] outputs =
        RawOps.run(OP_NAME, seqLenMax, attrs, x, csPrev, hPrev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h, csGrad, hGrad);
    return new BlockLSTMGradV1<>(outputs);
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
   * Output {@code cs_prev_grad}.
   *
   * @return the tensor
   */
  public T csPrevGrad() {
    return csPrevGrad;
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
   * Output {@code w_grad}.
   *
   * @return the tensor
   */
  public T wGrad() {
    return wGrad;
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

  /**
   * Output {@code b_grad}.
   *
   * @return the tensor
   */
  public T bGrad() {
    return bGrad;
  }
}
