package org.blockrnn;

/**
 * A blockrnn model file (docs/model-format.md): a trained recurrent stack, converted from Keras
 * or PyTorch by the Python package, run without TensorFlow. Loading checks the whole file (a bad
 * file is an {@link IllegalArgumentException} naming the file and the field) and packs the
 * weights once; {@link #close()} frees them. A model runs one call at a time: use one per
 * thread, or synchronise the calls.
 *
 * <pre>{@code
 * try (Model model = Model.load("model.safetensors")) {
 *   Model.Result r = model.forward(FloatTensor.of(x, T, B, model.inputSize()));
 *   FloatTensor y = (FloatTensor) r.output();   // [T, B, W], or [B, W] (last step only)
 * }
 * }</pre>
 */
public final class Model implements AutoCloseable {
  static {
    RawOps.version(); // RawOps' static initializer loads the native library
  }

  private long handle;
  private final String dtype;
  private final long inputSize;
  private final long outputSize;
  private final String[] stateNames;
  private final long[] stateSizes;

  private Model(long handle) {
    this.handle = handle;
    long[] info = nativeInfo(handle);
    this.dtype = info[0] == 1 ? "float" : "double";
    this.inputSize = info[1];
    this.outputSize = info[2];
    int n = (int) info[3];
    long[] states = nativeStates(handle);
    this.stateNames = new String[n];
    this.stateSizes = new long[n];
    for (int k = 0; k < n; ++k) {
      stateNames[k] = "states." + states[4 * k] + "." + states[4 * k + 1] + "."
          + (states[4 * k + 2] == 1 ? "cs" : "h");
      stateSizes[k] = states[4 * k + 3];
    }
  }

  /**
   * Reads a model file.
   *
   * @param path the file
   * @return the model; close it when done
   * @throws IllegalArgumentException when the file cannot be read or is not a valid model file
   */
  public static Model load(String path) {
    return new Model(nativeLoad(path));
  }

  /** The output and the final states of a forward call. */
  public static final class Result {
    private final Tensor output;
    private final Tensor[] states;

    Result(Tensor output, Tensor[] states) {
      this.output = output;
      this.states = states;
    }

    /**
     * The model's output: [T, B, W], or [B, W] when the model returns its last step only.
     *
     * @return a FloatTensor or DoubleTensor (the model's dtype)
     */
    public Tensor output() {
      return output;
    }

    /**
     * The final states, each [B, H], in the order of {@link Model#stateNames()}.
     *
     * @return a copy of the array of states
     */
    public Tensor[] states() {
      return states.clone();
    }
  }

  /**
   * Runs the model with every example T steps long (or, when the file has masking, the lengths
   * its mask gives) and zero initial states.
   *
   * @param x [T, B, I], a FloatTensor for a float32 model, a DoubleTensor for a float64 one
   * @return the output and the final states
   */
  public Result forward(Tensor x) {
    return forward(x, null, null);
  }

  /**
   * Runs the model (docs/model-format.md, "Semantics").
   *
   * @param x [T, B, I] in the model's dtype
   * @param seqLengths [B] lengths in [0, T], or null
   * @param initialStates null (zeros), or one tensor per state in the order of {@link
   *     #stateNames()}, each [B, H] in the model's dtype or null (zero)
   * @return the output and the final states
   * @throws IllegalArgumentException for arguments of the wrong dtype, shape or values
   */
  public Result forward(Tensor x, LongTensor seqLengths, Tensor[] initialStates) {
    if (x == null) {
      throw new IllegalArgumentException("Model.forward: x is null");
    }
    Object[] init = null;
    long[][] initShapes = null;
    if (initialStates != null) {
      init = new Object[initialStates.length];
      initShapes = new long[initialStates.length][];
      for (int k = 0; k < initialStates.length; ++k) {
        if (initialStates[k] != null) {
          init[k] = initialStates[k].array();
          initShapes[k] = initialStates[k].shape();
        }
      }
    }
    Object[] out = nativeForward(checkedHandle(), x.array(), x.shape(),
        seqLengths == null ? null : (long[]) seqLengths.array(),
        seqLengths == null ? null : seqLengths.shape(), init, initShapes);
    long[] yShape = (long[]) out[1];
    long batch = x.shape()[1];
    Tensor[] states = new Tensor[stateNames.length];
    for (int k = 0; k < states.length; ++k) {
      states[k] = wrap(out[2 + k], new long[] {batch, stateSizes[k]});
    }
    return new Result(wrap(out[0], yShape), states);
  }

  private static Tensor wrap(Object array, long[] shape) {
    return array instanceof float[]
        ? FloatTensor.wrap((float[]) array, shape)
        : DoubleTensor.wrap((double[]) array, shape);
  }

  /**
   * The model's element type.
   *
   * @return "float" (float32) or "double" (float64)
   */
  public String dtype() {
    return dtype;
  }

  /**
   * The input size I.
   *
   * @return I
   */
  public long inputSize() {
    return inputSize;
  }

  /**
   * The output width W.
   *
   * @return W
   */
  public long outputSize() {
    return outputSize;
  }

  /**
   * The states' names, {@code states.<layer>.<direction>.<cs|h>}: layer by layer, direction by
   * direction, an LSTM's cs then h, a GRU's h (the names {@code blockrnn run} uses).
   *
   * @return a copy of the names
   */
  public String[] stateNames() {
    return stateNames.clone();
  }

  /**
   * A few lines describing the model.
   *
   * @return the summary
   */
  public String summary() {
    return nativeSummary(checkedHandle());
  }

  private long checkedHandle() {
    if (handle == 0) {
      throw new IllegalStateException("Model: the model is closed");
    }
    return handle;
  }

  /** Frees the model's native memory; further calls throw IllegalStateException. */
  @Override
  public void close() {
    if (handle != 0) {
      nativeFree(handle);
      handle = 0;
    }
  }

  private static native long nativeLoad(String path);

  private static native void nativeFree(long handle);

  /** [dtype (blockrnn_dtype), input size, output size, number of states]. */
  private static native long[] nativeInfo(long handle);

  /** Per state: layer, direction, 1 for cs (0 for h), hidden size. */
  private static native long[] nativeStates(long handle);

  private static native String nativeSummary(long handle);

  /** [y array, y shape (long[]), final state arrays...]. */
  private static native Object[] nativeForward(long handle, Object x, long[] xShape,
      long[] seqLengths, long[] seqLengthsShape, Object[] initialStates,
      long[][] initialShapes);
}
