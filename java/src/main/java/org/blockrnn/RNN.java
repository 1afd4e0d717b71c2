package org.blockrnn;

/**
 * A stack of recurrent layers planned once and run many times (the C API's {@code blockrnn_rnn}
 * handle): torch.nn.LSTM / torch.nn.GRU's structure (layers, bidirectional, dropout between layers,
 * per-example lengths, initial states) on TensorFlow's block ops. Create it once for a mode, sizes
 * and the largest time and batch of a call; set each (layer, direction)'s weights once and again
 * whenever they change; then call {@link #forward} and {@link #backward} as often as needed, with
 * no re-validation or repacking of the weights. For one layer and one direction the results are
 * bit for bit those of the one-shot sequence ops ({@code BlockLSTMV2}, {@code BlockGRUResetAfter},
 * ... and their grads).
 *
 * <p>The handle holds native memory (packed weights, a workspace, the activations the backward
 * reads): close it (try-with-resources). Calls on one handle are serialised (the methods are
 * synchronized: the handle has one workspace); different handles run in parallel. {@link
 * #backward} differentiates the latest {@link #forward} of this handle and takes the same inputs.
 *
 * <p>Errors as {@link RawOps}: bad input is an {@link IllegalArgumentException} whose message
 * names the function and the argument; a closed handle is an {@link IllegalStateException}.
 */
public final class RNN implements AutoCloseable {
  static {
    // The native library is loaded by RawOps' initialiser.
    RawOps.version();
  }

  /** The cell of every layer. */
  public enum Mode {
    /** BlockLSTM: gates ICFO, forget_bias, cell_clip and peepholes. */
    LSTM,
    /** BlockLSTMV2: gates IFCO (torch.nn.LSTM's order). */
    LSTM_V2,
    /** BlockGRU: TensorFlow's GRU (reset before the product). */
    GRU,
    /** BlockGRUResetAfter: torch.nn.GRU. */
    GRU_RESET_AFTER
  }

  /** What a handle is created for; setters return {@code this}. */
  public static final class Options {
    Mode mode = Mode.LSTM_V2;
    boolean doublePrecision = false;
    long inputSize, hiddenSize, numLayers = 1, maxTime = 1, maxBatch = 1;
    boolean bidirectional = false, usePeephole = false, torchLayout = false;
    Double forgetBias, cellClip;

    /**
     * Options for a mode and sizes (one layer, one direction, float32, T = B = 1).
     *
     * @param mode the cell
     * @param inputSize I, the features of x
     * @param hiddenSize H
     */
    public Options(Mode mode, long inputSize, long hiddenSize) {
      if (mode == null) {
        throw new IllegalArgumentException("RNN.Options: mode is null");
      }
      this.mode = mode;
      this.inputSize = inputSize;
      this.hiddenSize = hiddenSize;
    }

    /**
     * The number of layers.
     *
     * @param n at least 1
     * @return this
     */
    public Options numLayers(long n) {
      numLayers = n;
      return this;
    }

    /**
     * Two directions (D = 2) instead of one.
     *
     * @param on whether the stack is bidirectional
     * @return this
     */
    public Options bidirectional(boolean on) {
      bidirectional = on;
      return this;
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
     * The LSTM modes' forget_bias (unset: the op's default).
     *
     * @param value the bias added to the forget gate
     * @return this
     */
    public Options forgetBias(double value) {
      forgetBias = value;
      return this;
    }

    /**
     * The LSTM modes' cell_clip (unset: the op's default).
     *
     * @param value the clip of the cell state (0 or less: none)
     * @return this
     */
    public Options cellClip(double value) {
      cellClip = value;
      return this;
    }

    /**
     * The LSTM modes' peepholes.
     *
     * @param on whether the layers use peepholes
     * @return this
     */
    public Options usePeephole(boolean on) {
      usePeephole = on;
      return this;
    }

    /**
     * Takes the parameters in torch.nn's layout (modes LSTM_V2 and GRU_RESET_AFTER only): a
     * torch.nn.LSTM / GRU layer's weight_ih [G, K], weight_hh [G, H], bias_ih, bias_hh [G]
     * (null for bias=False: zeros), then the LSTM's peepholes wci, wcf, wco [H]; the backward
     * returns their gradients in that layout. The values are those of the default layout, bit
     * for bit (the C API's BLOCKRNN_PARAMS_TORCH).
     *
     * @param on whether the handle takes torch.nn's layout
     * @return this
     */
    public Options torchLayout(boolean on) {
      torchLayout = on;
      return this;
    }
  }

  /** The forward's outputs. */
  public static final class Outputs {
    /** [T, B, D*H], both directions concatenated, forward first. */
    public final Tensor y;
    /** [L*D, B, H], the state at each example's last step. */
    public final Tensor hN;
    /** [L*D, B, H] in the LSTM modes, else null. */
    public final Tensor cN;

    Outputs(Tensor y, Tensor hN, Tensor cN) {
      this.y = y;
      this.hN = hN;
      this.cN = cN;
    }
  }

  /** The backward's outputs. */
  public static final class Gradients {
    /** [T, B, I], or null when not asked for. */
    public final Tensor xGrad;
    /** [L*D, B, H]. */
    public final Tensor h0Grad;
    /** [L*D, B, H] in the LSTM modes, else null. */
    public final Tensor c0Grad;
    /**
     * Every parameter's gradient, in {@link #setWeights}' order, layer-major then direction:
     * (l, d) holds {@link #paramsPerLayer()} tensors from (l*D + d) * paramsPerLayer().
     */
    public final Tensor[] params;

    Gradients(Tensor xGrad, Tensor h0Grad, Tensor c0Grad, Tensor[] params) {
      this.xGrad = xGrad;
      this.h0Grad = h0Grad;
      this.c0Grad = c0Grad;
      this.params = params;
    }
  }

  private long handle; // the native blockrnn_rnn*, 0 once closed
  private final boolean lstm;
  private final boolean torchLayout; // Options.torchLayout: null biases and peepholes allowed
  private final long states, hidden, directions, inputSize; // L*D, H, D, I
  private final long maxTime, maxBatch; // the handle's bounds of a call's T and B
  private final int numParams; // L * D * paramsPerLayer

  /**
   * Creates a handle; every option is validated now.
   *
   * @param options the mode, sizes, dtype and LSTM attrs
   */
  public RNN(Options options) {
    if (options == null) {
      throw new IllegalArgumentException("RNN: options is null");
    }
    lstm = options.mode == Mode.LSTM || options.mode == Mode.LSTM_V2;
    torchLayout = options.torchLayout;
    handle = createNative(options.mode.ordinal(), options.doublePrecision, options.inputSize,
        options.hiddenSize, options.numLayers, options.bidirectional, options.maxTime,
        options.maxBatch, options.forgetBias != null,
        options.forgetBias != null ? options.forgetBias : 0.0, options.cellClip != null,
        options.cellClip != null ? options.cellClip : 0.0, options.usePeephole,
        options.torchLayout);
    directions = options.bidirectional ? 2 : 1;
    states = options.numLayers * directions;
    hidden = options.hiddenSize;
    inputSize = options.inputSize;
    maxTime = Math.max(options.maxTime, 0);
    maxBatch = Math.max(options.maxBatch, 0);
    numParams = (int) states * paramsPerLayerNative(handle);
  }

  // T and B of a call, from x, capped at the handle's max time and batch: the outputs are
  // allocated here before the library validates the call, so a hostile x (a T or B past the
  // bounds) must not size them; the library then refuses it, naming x. (The library checks the
  // rest.)
  private long[] timeBatch(Tensor x, String fn) {
    if (x == null) {
      throw new IllegalArgumentException("RNN." + fn + ": x is null");
    }
    long[] shape = x.shape();
    if (shape.length != 3) {
      // The library's words for the same rule (core::Checker::rank).
      throw new IllegalArgumentException("RNN." + fn + ": x must be rank 3, got rank "
          + shape.length + " (shape " + java.util.Arrays.toString(shape) + ")");
    }
    return new long[] {Math.min(shape[0], maxTime), Math.min(shape[1], maxBatch)};
  }

  private long live() {
    if (handle == 0) {
      throw new IllegalStateException("RNN: the handle is closed");
    }
    return handle;
  }

  /**
   * Parameters per (layer, direction): LSTM modes 5 (w, b, wci, wcf, wco), GRU 4 (w_ru, w_c,
   * b_ru, b_c), GRU reset-after 4 (w_i, w_h, b_i, b_h).
   *
   * @return the count
   */
  public synchronized int paramsPerLayer() {
    return paramsPerLayerNative(live());
  }

  /**
   * Copies and packs the parameters of (layer, direction), in {@link #paramsPerLayer()}' order
   * (an LSTM without peepholes may pass only w and b; with {@link Options#torchLayout} the four
   * weights and biases, and a null bias is zeros). Shapes as the C API's {@code
   * blockrnn_rnn_param_shape}, e.g. LSTM w [K+H, 4H] with K = I for layer 0, D*H above.
   *
   * @param layer in [0, numLayers)
   * @param direction 0 (forward) or 1 (reverse, when bidirectional)
   * @param params the tensors, all of the handle's type
   */
  public synchronized void setWeights(long layer, long direction, Tensor... params) {
    long h = live();
    if (params == null) {
      throw new IllegalArgumentException("RNN.setWeights: params is null");
    }
    Object[] data = new Object[params.length];
    long[][] shapes = new long[params.length][];
    for (int k = 0; k < params.length; ++k) {
      if (params[k] == null) {
        // torch.nn's layout: absent biases (bias=False) and peepholes; the library names a
        // weight that is required
        if (!torchLayout || k < 2) {
          throw new IllegalArgumentException("RNN.setWeights: params[" + k + "] is null");
        }
        continue;
      }
      data[k] = params[k].array();
      shapes[k] = params[k].shape();
    }
    setWeightsNative(h, layer, direction, data, shapes);
  }

  /**
   * Runs the stack on x from the initial states h0 (and c0) and returns y, h_n (and c_n).
   *
   * @param x [T, B, I], T at most the handle's max time, B at most its max batch
   * @param h0 [L*D, B, H], or null for zeros
   * @param c0 [L*D, B, H] in the LSTM modes, or null for zeros (must be null otherwise)
   * @param seqLengths [B] per-example lengths in [0, T], or null: every example runs T steps
   * @param dropoutMask [L-1, T, B, D*H] already scaled (0 or 1/(1-p)), or null: no dropout
   * @return y, h_n and c_n
   */
  public synchronized Outputs forward(Tensor x, Tensor h0, Tensor c0, LongTensor seqLengths,
      Tensor dropoutMask) {
    long h = live();
    long[] tb = timeBatch(x, "forward");
    Tensor[] in = {x, h0, c0, seqLengths, dropoutMask};
    long[] state = {states, tb[1], hidden};
    long[][] outShapes = {{tb[0], tb[1], directions * hidden}, state, lstm ? state : null};
    Object[] out = forwardNative(h, arrays(in), shapes(in), outShapes);
    return new Outputs(wrap(out[0], outShapes[0]), wrap(out[1], outShapes[1]),
        lstm ? wrap(out[2], outShapes[2]) : null);
  }

  /**
   * The gradients through the latest {@link #forward} of this handle, which these inputs must
   * repeat.
   *
   * @param x as the forward
   * @param h0 as the forward
   * @param c0 as the forward
   * @param seqLengths as the forward
   * @param dropoutMask as the forward
   * @param yGrad [T, B, D*H]
   * @param hNGrad [L*D, B, H], or null for zeros
   * @param cNGrad [L*D, B, H] in the LSTM modes, or null for zeros (must be null otherwise)
   * @return the gradients of x, the initial states and every parameter
   */
  public synchronized Gradients backward(Tensor x, Tensor h0, Tensor c0, LongTensor seqLengths,
      Tensor dropoutMask, Tensor yGrad, Tensor hNGrad, Tensor cNGrad) {
    return backward(x, h0, c0, seqLengths, dropoutMask, yGrad, hNGrad, cNGrad, true);
  }

  /**
   * The same, with or without the gradient of x: without it (x needs none, as a model's data)
   * the first layer's input-gradient products are skipped and {@link Gradients#xGrad} is null;
   * every other gradient is bit for bit the same.
   *
   * @param x as the forward
   * @param h0 as the forward
   * @param c0 as the forward
   * @param seqLengths as the forward
   * @param dropoutMask as the forward
   * @param yGrad [T, B, D*H]
   * @param hNGrad [L*D, B, H], or null for zeros
   * @param cNGrad [L*D, B, H] in the LSTM modes, or null for zeros (must be null otherwise)
   * @param withXGrad whether to compute the gradient of x
   * @return the gradients of x (or null), the initial states and every parameter
   */
  public synchronized Gradients backward(Tensor x, Tensor h0, Tensor c0, LongTensor seqLengths,
      Tensor dropoutMask, Tensor yGrad, Tensor hNGrad, Tensor cNGrad, boolean withXGrad) {
    return backward(x, h0, c0, seqLengths, dropoutMask, yGrad, hNGrad, cNGrad, withXGrad, true);
  }

  /**
   * The same, with or without the gradient of x and with or without the initial states'
   * gradients: without them (initial states that need none, as a training window's carried
   * state) the first step's recurrent products are skipped and {@link Gradients#h0Grad} and
   * {@link Gradients#c0Grad} are null; the parameters' gradients are bit for bit the same.
   *
   * @param x as the forward
   * @param h0 as the forward
   * @param c0 as the forward
   * @param seqLengths as the forward
   * @param dropoutMask as the forward
   * @param yGrad [T, B, D*H]
   * @param hNGrad [L*D, B, H], or null for zeros
   * @param cNGrad [L*D, B, H] in the LSTM modes, or null for zeros (must be null otherwise)
   * @param withXGrad whether to compute the gradient of x
   * @param withStateGrads whether to compute the gradients of h0 (and c0)
   * @return the gradients of x and of the initial states (or null), and of every parameter
   */
  public synchronized Gradients backward(Tensor x, Tensor h0, Tensor c0, LongTensor seqLengths,
      Tensor dropoutMask, Tensor yGrad, Tensor hNGrad, Tensor cNGrad, boolean withXGrad,
      boolean withStateGrads) {
    long h = live();
    long[] tb = timeBatch(x, "backward");
    Tensor[] in = {x, h0, c0, seqLengths, dropoutMask, yGrad, hNGrad, cNGrad};
    long[] state = {states, tb[1], hidden};
    long[][] outShapes = new long[3 + numParams][];
    outShapes[0] = withXGrad ? new long[] {tb[0], tb[1], inputSize} : null;
    outShapes[1] = withStateGrads ? state : null;
    outShapes[2] = lstm && withStateGrads ? state : null; // the parameters' by the native side
    Object[] out = backwardNative(h, directions, arrays(in), shapes(in), outShapes);
    Tensor[] params = new Tensor[numParams];
    for (int k = 0; k < numParams; ++k) {
      params[k] = wrap(out[3 + k], outShapes[3 + k]);
    }
    return new Gradients(wrap(out[0], outShapes[0]), wrap(out[1], outShapes[1]),
        wrap(out[2], outShapes[2]), params);
  }

  /** Frees the native handle; later calls throw {@link IllegalStateException}. Idempotent. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      freeNative(handle);
      handle = 0;
    }
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

  private static Tensor wrap(Object data, long[] shape) {
    if (data == null) {
      return null;
    }
    return data instanceof float[]
        ? FloatTensor.wrap((float[]) data, shape)
        : DoubleTensor.wrap((double[]) data, shape);
  }

  private static native long createNative(int mode, boolean doublePrecision, long inputSize,
      long hiddenSize, long numLayers, boolean bidirectional, long maxTime, long maxBatch,
      boolean hasForgetBias, double forgetBias, boolean hasCellClip, double cellClip,
      boolean usePeephole, boolean torchLayout);

  private static native void freeNative(long handle);

  private static native int paramsPerLayerNative(long handle);

  private static native void setWeightsNative(long handle, long layer, long direction,
      Object[] data, long[][] shapes);

  private static native Object[] forwardNative(long handle, Object[] data, long[][] shapes,
      long[][] outShapes);

  private static native Object[] backwardNative(long handle, long directions, Object[] data,
      long[][] shapes, long[][] outShapes);
}
