package org.blockrnn.op.nn;

import java.util.LinkedHashMap;
import java.util.Map;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;

/**
 * One step of TensorFlow's LSTM block cell. Gate layout of w and b: ICFO = [i | ci | f | o].
 *
 * <p>Runs the op {@code LSTMBlockCell} (docs/ops.md). Shaped like TF-Java's {@code org.tensorflow.op.nn.LSTMBlockCell}
 * without the {@code Scope}: the factory runs the op at once and the accessors return its outputs.
 *
 * @param <T> the tensor type of inputs and outputs ({@link org.blockrnn.FloatTensor} or
 *     {@link org.blockrnn.DoubleTensor})
 */
public final class LSTMBlockCell<T extends Tensor> {
  /** The name of the op this class runs. */
  public static final String OP_NAME = "LSTMBlockCell";

  private final T i;
  private final T cs;
  private final T f;
  private final T o;
  private final T ci;
  private final T co;
  private final T h;

  @SuppressWarnings("unchecked")
  private LSTMBlockCell(Tensor[] outputs) {
    i = (T) outputs[0];
    cs = (T) outputs[1];
    f = (T) outputs[2];
    o = (T) outputs[3];
    ci = (T) outputs[4];
    co = (T) outputs[5];
    h = (T) outputs[6];
  }

  /**
   * Runs {@code LSTMBlockCell}.
   *
   * @param x input {@code x}
   * @param csPrev input {@code cs_prev}
   * @param hPrev input {@code h_prev}
   * @param w input {@code w}
   * @param wci input {@code wci}
   * @param wcf input {@code wcf}
   * @param wco input {@code wco}
   * @param b input {@code b}
   * @param options optional attributes ({@link #forgetBias}), {@link #cellClip}, {@link #usePeephole}
   * @param <T> the tensor type
   * @return the op with its outputs computed
   * @throws IllegalArgumentException when an input is null or has the wrong shape or type (the
   *     message names the argument)
   */
  public static <T extends Tensor> LSTMBlockCell<T> create(
      T x, T csPrev, T hPrev, T w, T wci, T wcf, T wco, T b, Options... options) {
    Map<String, Object> attrs = new java.util.HashMap<>();
    if (options != null) {
      for (Options o : options) {
        if (o != null) {
          attrs.putAll(o.attrs);
        }
      }
    }
    Tensor[] outputs =
        RawOps.run(OP_NAME, null, attrs, x, csPrev, hPrev, w, wci, wcf, wco, b);
    return new LSTMBlockCell<>(outputs);
  }

  /**
   * Sets the {@code forget_bias} attr.
   *
   * @param forgetBias the value
   * @return a new Options holding it
   */
  public static Options forgetBias(Float forgetBias) {
    return new Options().forgetBias(forgetBias);
  }

  /**
   * Sets the {@code cell_clip} attr.
   *
   * @param cellClip the value
   * @return a new Options holding it
   */
  public static Options cellClip(Float cellClip) {
    return new Options().cellClip(cellClip);
  }

  /**
   * Sets the {@code use_peephole} attr.
   *
   * @param usePeephole the value
   * @return a new Options holding it
   */
  public static Options usePeephole(Boolean usePeephole) {
    return new Options().usePeephole(usePeephole);
  }

  /**
   * Output {@code i}.
   *
   * @return the tensor
   */
  public T i() {
    return i;
  }

  /**
   * Output {@code cs}.
   *
   * @return the tensor
   */
  public T cs() {
    return cs;
  }

  /**
   * Output {@code f}.
   *
   * @return the tensor
   */
  public T f() {
    return f;
  }

  /**
   * Output {@code o}.
   *
   * @return the tensor
   */
  public T o() {
    return o;
  }

  /**
   * Output {@code ci}.
   *
   * @return the tensor
   */
  public T ci() {
    return ci;
  }

  /**
   * Output {@code co}.
   *
   * @return the tensor
   */
  public T co() {
    return co;
  }

  /**
   * Output {@code h}.
   *
   * @return the tensor
   */
  public T h() {
    return h;
  }

  /** Optional attributes of {@link LSTMBlockCell}; unset ones take the op definition's default. */
  public static final class Options {
    private final Map<String, Object> attrs = new LinkedHashMap<>();

    private Options() {}

    /**
     * Sets the {@code forget_bias} attr.
     *
     * @param forgetBias the value (null leaves the default)
     * @return this Options instance
     */
    public Options forgetBias(Float forgetBias) {
      if (forgetBias == null) {
        attrs.remove("forget_bias");
      } else {
        attrs.put("forget_bias", forgetBias);
      }
      return this;
    }

    /**
     * Sets the {@code cell_clip} attr.
     *
     * @param cellClip the value (null leaves the default)
     * @return this Options instance
     */
    public Options cellClip(Float cellClip) {
      if (cellClip == null) {
        attrs.remove("cell_clip");
      } else {
        attrs.put("cell_clip", cellClip);
      }
      return this;
    }

    /**
     * Sets the {@code use_peephole} attr.
     *
     * @param usePeephole the value (null leaves the default)
     * @return this Options instance
     */
    public Options usePeephole(Boolean usePeephole) {
      if (usePeephole == null) {
        attrs.remove("use_peephole");
      } else {
        attrs.put("use_peephole", usePeephole);
      }
      return this;
    }
  }
}
