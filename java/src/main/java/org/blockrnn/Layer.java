package org.blockrnn;

import java.nio.ByteBuffer;

/**
 * One sequence op planned once and run many times (the C API's {@code blockrnn_layer} handle, on
 * the library's layer objects): {@code BlockLSTM}, {@code BlockLSTMV2}, {@code BlockGRU} or {@code
 * BlockGRUResetAfter} with its attrs and sizes fixed at creation and its weights copied and packed
 * by {@link #setWeights}, once and again whenever they change. {@link #forward} then returns the
 * op's outputs and {@link #backward} its grad op's, as often as needed, each call checking only
 * what changes per call; the results are bit for bit those of the one-shot ops ({@link
 * RawOps#run}) on the same inputs.
 *
 * <p>Outputs are in the ops' output order: {@link #forwardOp()}'s and {@link #gradOp()}'s ({@link
 * RawOps#outputNames}), e.g. {@code i, cs, f, o, ci, co, h} and {@code x_grad, cs_prev_grad,
 * h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad} for the LSTMs.
 *
 * <p>Workspace: the handle owns one, grown to the largest call, unless created with {@link
 * Options#callerWorkspace}; then every call passes a direct {@link ByteBuffer} of at least {@link
 * #workspaceBytes} bytes, which the library uses in place (a call without caller workspace may
 * pass one too).
 *
 * <p>The handle holds native memory: close it (try-with-resources). Calls on one handle are
 * serialised (the methods are synchronized: the handle has one workspace); different handles run
 * in parallel. Errors as {@link RawOps}: bad input is an {@link IllegalArgumentException} whose
 * message names the layer and the argument ("GRULayer.forward: x must have shape ..."); a closed
 * handle is an {@link IllegalStateException}.
 */
public final class Layer implements AutoCloseable {
  static {
    // The native library is loaded by RawOps' initialiser.
    RawOps.version();
  }

  /** The op a handle runs. */
  public enum Kind {
    /** BlockLSTM: gates ICFO, forget_bias, cell_clip and peepholes. */
    LSTM("BlockLSTM", "BlockLSTMGrad"),
    /** BlockLSTMV2: gates IFCO (torch.nn.LSTM's order). */
    LSTM_V2("BlockLSTMV2", "BlockLSTMGradV2"),
    /** BlockGRU: TensorFlow's GRU (reset before the product). */
    GRU("BlockGRU", "BlockGRUGrad"),
    /** BlockGRUResetAfter: torch.nn.GRU. */
    GRU_RESET_AFTER("BlockGRUResetAfter", "BlockGRUResetAfterGrad");

    final String op, gradOp;

    Kind(String op, String gradOp) {
      this.op = op;
      this.gradOp = gradOp;
    }
  }

  /** What a handle is created for; setters return {@code this}. */
  public static final class Options {
    final Kind kind;
    boolean doublePrecision = false, usePeephole = false, callerWorkspace = false;
    long inputSize, hiddenSize, maxTime = 1, maxBatch = 1;
    Double forgetBias, cellClip;

    /**
     * Options for a kind and sizes (float32, T = B = 1, the op's default attrs).
     *
     * @param kind the op
     * @param inputSize I, the features of x
     * @param hiddenSize H
     */
    public Options(Kind kind, long inputSize, long hiddenSize) {
      if (kind == null) {
        throw new IllegalArgumentException("Layer.Options: kind is null");
      }
      this.kind = kind;
      this.inputSize = inputSize;
      this.hiddenSize = hiddenSize;
    }

    /**
     * float64 ({@link DoubleTensor}) instead of float32 ({@link FloatTensor}).
     *
     * @param on whether the handle computes in float64
     * @return this
     */
    public Options doublePrecision(boolean on) {
      doublePrecision = on;
      return this;
    }

    /**
     * The largest time and batch of a call (each call is checked against them; nothing is
     * allocated for them).
     *
     * @param time the largest T
     * @param batch the largest B
     * @return this
     */
    public Options max(long time, long batch) {
      maxTime = time;
      maxBatch = batch;
      return this;
    }

    /**
     * Every call passes its workspace (the handle allocates none).
     *
     * @param on whether calls pass a workspace
     * @return this
     */
    public Options callerWorkspace(boolean on) {
      callerWorkspace = on;
      return this;
    }

    /**
     * The LSTM kinds' forget_bias (unset: the op's default).
     *
     * @param value the bias added to the forget gate
     * @return this
     */
    public Options forgetBias(double value) {
      forgetBias = value;
      return this;
    }

    /**
     * The LSTM kinds' cell_clip (unset: the op's default).
     *
     * @param value the clip of the cell state (0 or less: none)
     * @return this
     */
    public Options cellClip(double value) {
      cellClip = value;
      return this;
    }

    /**
     * The LSTM kinds' peepholes.
     *
     * @param on whether the layer uses peepholes
     * @return this
     */
    public Options usePeephole(boolean on) {
      usePeephole = on;
      return this;
    }
  }

  private long handle; // the native blockrnn_layer*, 0 once closed
  private final Kind kind;
  private final long hidden, maxTime, maxBatch;
  private final long[][] paramShapes; // set_weights' order
  private final int numOutputs, numGrads;

  /**
   * Creates a handle; every option is validated now.
   *
   * @param options the kind, sizes, dtype and LSTM attrs
   */
  public Layer(Options options) {
    if (options == null) {
      throw new IllegalArgumentException("Layer: options is null");
    }
    kind = options.kind;
    hidden = options.hiddenSize;
    maxTime = Math.max(options.maxTime, 0);
    maxBatch = Math.max(options.maxBatch, 0);
    numOutputs = RawOps.outputNames(kind.op).length;
    numGrads = RawOps.outputNames(kind.gradOp).length;
    handle = createNative(kind.ordinal(), options.doublePrecision, options.inputSize,
        options.hiddenSize, options.maxTime, options.maxBatch, options.callerWorkspace,
        options.forgetBias != null, options.forgetBias != null ? options.forgetBias : 0.0,
        options.cellClip != null, options.cellClip != null ? options.cellClip : 0.0,
        options.usePeephole);
    int n = numParamsNative(handle);
    paramShapes = new long[n][];
    for (int k = 0; k < n; ++k) {
      paramShapes[k] = paramShapeNative(handle, k);
    }
  }

  private long live() {
    if (handle == 0) {
      throw new IllegalStateException("Layer: the handle is closed");
    }
    return handle;
  }

  /**
   * The one-shot op this handle runs.
   *
   * @return e.g. "BlockLSTMV2"
   */
  public String forwardOp() {
    return kind.op;
  }

  /**
   * The one-shot grad op whose outputs {@link #backward} returns.
   *
   * @return e.g. "BlockLSTMGradV2"
   */
  public String gradOp() {
    return kind.gradOp;
  }

  /**
   * The parameters' shapes, in {@link #setWeights}' order: LSTM kinds w [I+H, 4H], b [4H], wci,
   * wcf, wco [H]; GRU w_ru [I+H, 2H], w_c [I+H, H], b_ru [2H], b_c [H]; GRU reset-after w_i [I,
   * 3H], w_h [H, 3H], b_i [3H], b_h [3H].
   *
   * @return one shape per parameter (copies)
   */
  public long[][] paramShapes() {
    long[][] out = new long[paramShapes.length][];
    for (int k = 0; k < out.length; ++k) {
      out[k] = paramShapes[k].clone();
    }
    return out;
  }

  /**
   * Copies, checks and packs the parameters in {@link #paramShapes()}' order (an LSTM without
   * peepholes passes only w and b).
   *
   * @param params the tensors, all of the handle's type
   */
  public synchronized void setWeights(Tensor... params) {
    long h = live();
    if (params == null) {
      throw new IllegalArgumentException("Layer.setWeights: params is null");
    }
    Tensor[] ps = params.clone();
    setWeightsNative(h, arrays(ps), shapes(ps));
  }

  /**
   * The workspace one call with T steps (its seq_len_max) and B examples needs.
   *
   * @param time T, in [0, max time]
   * @param batch B, in [0, max batch]
   * @return bytes
   */
  public synchronized long workspaceBytes(long time, long batch) {
    return workspaceBytesNative(live(), time, batch);
  }

  /**
   * Runs the op with the handle's own workspace; see {@link #forward(Tensor, Tensor, Tensor, Long,
   * LongTensor, ByteBuffer)}.
   *
   * @param x [T, B, I]
   * @param csPrev [B, H] for the LSTM kinds, null for the GRUs
   * @param hPrev [B, H]
   * @param seqLenMax the steps to run (null: T)
   * @param seqLengths [B] per-example lengths, or null
   * @return the op's outputs, each [T, B, H]
   */
  public Tensor[] forward(Tensor x, Tensor csPrev, Tensor hPrev, Long seqLenMax,
      LongTensor seqLengths) {
    return forward(x, csPrev, hPrev, seqLenMax, seqLengths, null);
  }

  /**
   * Runs the op: its outputs in {@link #forwardOp()}'s order, each [T, B, H].
   *
   * @param x [T, B, I], T at most the handle's max time, B at most its max batch
   * @param csPrev [B, H] for the LSTM kinds, null for the GRUs
   * @param hPrev [B, H]
   * @param seqLenMax the steps to run, in [0, T] (null: T)
   * @param seqLengths [B] per-example lengths in [0, T], or null: every example runs T steps
   * @param workspace a direct buffer of at least {@link #workspaceBytes} bytes, or null for the
   *     handle's own
   * @return the op's outputs
   */
  public synchronized Tensor[] forward(Tensor x, Tensor csPrev, Tensor hPrev, Long seqLenMax,
      LongTensor seqLengths, ByteBuffer workspace) {
    long h = live();
    Tensor[] in = {x, csPrev, hPrev, seqLengths};
    long[] step = stepShape(x);
    long[][] outShapes = new long[numOutputs][];
    for (int k = 0; k < numOutputs; ++k) {
      outShapes[k] = step;
    }
    Object[] out = forwardNative(h, arrays(in), shapes(in), seqLenMax != null,
        seqLenMax != null ? seqLenMax : 0, outShapes, workspace);
    return wrapAll(out, outShapes);
  }

  /**
   * The grad op with the handle's own workspace; see {@link #backward(Tensor, Tensor, Tensor,
   * Long, LongTensor, Tensor[], Tensor, Tensor, ByteBuffer)}.
   *
   * @param x as the forward
   * @param csPrev as the forward
   * @param hPrev as the forward
   * @param seqLenMax as the forward
   * @param seqLengths as the forward
   * @param outputs the forward's outputs, unchanged
   * @param csGrad [T, B, H] for the LSTM kinds, null for the GRUs
   * @param hGrad [T, B, H]
   * @return the grad op's outputs
   */
  public Tensor[] backward(Tensor x, Tensor csPrev, Tensor hPrev, Long seqLenMax,
      LongTensor seqLengths, Tensor[] outputs, Tensor csGrad, Tensor hGrad) {
    return backward(x, csPrev, hPrev, seqLenMax, seqLengths, outputs, csGrad, hGrad, null);
  }

  /**
   * Runs the grad op through a forward call: its outputs in {@link #gradOp()}'s order (x_grad
   * [T, B, I], the initial states' gradients [B, H], then the parameters' gradients).
   *
   * @param x as the forward
   * @param csPrev as the forward
   * @param hPrev as the forward
   * @param seqLenMax as the forward
   * @param seqLengths as the forward
   * @param outputs the forward's outputs, unchanged, in its order
   * @param csGrad [T, B, H] for the LSTM kinds (the gradient of cs), null for the GRUs
   * @param hGrad [T, B, H], the gradient of h
   * @param workspace a direct buffer of at least {@link #workspaceBytes} bytes, or null for the
   *     handle's own
   * @return the grad op's outputs
   */
  public synchronized Tensor[] backward(Tensor x, Tensor csPrev, Tensor hPrev, Long seqLenMax,
      LongTensor seqLengths, Tensor[] outputs, Tensor csGrad, Tensor hGrad,
      ByteBuffer workspace) {
    long h = live();
    if (outputs == null) {
      throw new IllegalArgumentException("Layer.backward: outputs is null");
    }
    Tensor[] in = new Tensor[6 + outputs.length];
    in[0] = x;
    in[1] = csPrev;
    in[2] = hPrev;
    in[3] = seqLengths;
    System.arraycopy(outputs, 0, in, 4, outputs.length);
    in[4 + outputs.length] = csGrad;
    in[5 + outputs.length] = hGrad;
    long[] step = stepShape(x);
    long[] state = {step[1], hidden};
    boolean lstm = kind == Kind.LSTM || kind == Kind.LSTM_V2;
    long[][] outShapes = new long[numGrads][];
    outShapes[0] = x != null ? x.shape() : new long[] {0};
    outShapes[1] = state;
    if (lstm) { // x_grad, cs_prev_grad, h_prev_grad, w_grad, wci, wcf, wco, b_grad
      outShapes[2] = state;
      outShapes[3] = paramShapes[0];
      outShapes[4] = paramShapes[2];
      outShapes[5] = paramShapes[3];
      outShapes[6] = paramShapes[4];
      outShapes[7] = paramShapes[1];
    } else { // x_grad, h_prev_grad, then the parameters' in their order
      for (int k = 0; k < paramShapes.length; ++k) {
        outShapes[2 + k] = paramShapes[k];
      }
    }
    Object[] out = backwardNative(h, arrays(in), shapes(in), outputs.length, seqLenMax != null,
        seqLenMax != null ? seqLenMax : 0, outShapes, workspace);
    return wrapAll(out, outShapes);
  }

  /** Frees the native handle; later calls throw {@link IllegalStateException}. Idempotent. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      freeNative(handle);
      handle = 0;
    }
  }

  // [T, B, H] from x's first two dimensions (0 where x has none), T and B capped at the sizes the
  // handle was created for: the outputs are allocated before the call, and an x past them is
  // refused by the library (which checks x before the outputs) whatever the outputs' shape, so a
  // hostile x never makes the binding allocate more than the largest valid call.
  private long[] stepShape(Tensor x) {
    long[] s = x != null ? x.shape() : new long[0];
    return new long[] {
        Math.min(s.length > 0 ? s[0] : 0, maxTime), Math.min(s.length > 1 ? s[1] : 0, maxBatch),
        hidden};
  }

  private static Object[] arrays(Tensor[] tensors) {
    Object[] data = new Object[tensors.length];
    for (int k = 0; k < tensors.length; ++k) {
      data[k] = tensors[k] == null ? null : tensors[k].array();
    }
    return data;
  }

  private static long[][] shapes(Tensor[] tensors) {
    long[][] shapes = new long[tensors.length][];
    for (int k = 0; k < tensors.length; ++k) {
      shapes[k] = tensors[k] == null ? null : tensors[k].shape();
    }
    return shapes;
  }

  private static Tensor[] wrapAll(Object[] data, long[][] shapes) {
    Tensor[] out = new Tensor[data.length];
    for (int k = 0; k < data.length; ++k) {
      out[k] = data[k] instanceof float[]
          ? FloatTensor.wrap((float[]) data[k], shapes[k])
          : DoubleTensor.wrap((double[]) data[k], shapes[k]);
    }
    return out;
  }

  private static native long createNative(int kind, boolean doublePrecision, long inputSize,
      long hiddenSize, long maxTime, long maxBatch, boolean callerWorkspace,
      boolean hasForgetBias, double forgetBias, boolean hasCellClip, double cellClip,
      boolean usePeephole);

  private static native void freeNative(long handle);

  private static native int numParamsNative(long handle);

  private static native long[] paramShapeNative(long handle, int k);

  private static native void setWeightsNative(long handle, Object[] data, long[][] shapes);

  private static native long workspaceBytesNative(long handle, long time, long batch);

  private static native Object[] forwardNative(long handle, Object[] data, long[][] shapes,
      boolean hasSeqLenMax, long seqLenMax, long[][] outShapes, ByteBuffer workspace);

  private static native Object[] backwardNative(long handle, Object[] data, long[][] shapes,
      int numForwardOutputs, boolean hasSeqLenMax, long seqLenMax, long[][] outShapes,
      ByteBuffer workspace);
}
