package org.blockrnn;

import java.util.Map;

/**
 * Runs any blockrnn op by TensorFlow's name (the ops of {@code org.blockrnn.op.nn} are typed
 * wrappers of this), and reaches the library's settings. Backed by the native library
 * {@code libblockrnn_jni.so}, loaded from the first of: the system property {@code blockrnn.jni}
 * (the library's path), the environment variable {@code BLOCKRNN_JNI} (the same), or the
 * directories of {@code java.library.path} ({@code cmake --install} puts it in {@code
 * PREFIX/lib}). When it cannot be loaded, the first use of any op throws {@link
 * UnsatisfiedLinkError} saying what was tried and what to set.
 *
 * <p>Errors: bad input throws {@link IllegalArgumentException} with the library's message, which
 * names the op and the argument; an op that is not built throws {@link
 * UnsupportedOperationException}; a cancelled call {@link java.util.concurrent.CancellationException};
 * anything else {@link BlockrnnException} (the memory limit, {@link #setMemoryLimit}, included).
 * Every call is validated, and its memory checked, before its outputs are allocated.
 */
public final class RawOps {
  static {
    loadNativeLibrary();
  }

  // Loads libblockrnn_jni.so from the first place that is set (see the class comment); a
  // failure names that place, the loader's reason and the settings that choose the library.
  private static void loadNativeLibrary() {
    String property = System.getProperty("blockrnn.jni");
    String env = System.getenv("BLOCKRNN_JNI");
    boolean useProperty = property != null && !property.isEmpty();
    boolean useEnv = !useProperty && env != null && !env.isEmpty();
    String from = useProperty ? "the path in the system property blockrnn.jni (" + property + ")"
        : useEnv ? "the path in the environment variable BLOCKRNN_JNI (" + env + ")"
        : "java.library.path (" + System.getProperty("java.library.path") + ")";
    try {
      if (useProperty) {
        System.load(property);
      } else if (useEnv) {
        System.load(env);
      } else {
        System.loadLibrary("blockrnn_jni");
      }
    } catch (UnsatisfiedLinkError e) {
      UnsatisfiedLinkError error = new UnsatisfiedLinkError("blockrnn: cannot load the native"
          + " library libblockrnn_jni.so from " + from + ": " + e.getMessage()
          + ". To use blockrnn from Java, set -Dblockrnn.jni=/path/to/libblockrnn_jni.so, or the"
          + " environment variable BLOCKRNN_JNI=/path/to/libblockrnn_jni.so, or"
          + " -Djava.library.path to the directory holding libblockrnn_jni.so (PREFIX/lib of a"
          + " cmake --install, build/<preset>/java of a build tree).");
      error.initCause(e);
      throw error;
    }
  }

  private RawOps() {}

  /**
   * Runs an op.
   *
   * @param op TensorFlow's op name, e.g. "GRUBlockCellGrad", or "gradients.LSTMBlockCell"
   * @param seqLenMax the {@code seq_len_max} input of the sequence ops, null for the others
   * @param attrs attr values by TensorFlow's name (Float, Double or Boolean); missing ones take
   *     the op's default
   * @param inputs the tensor inputs in the op's order (after seq_len_max): {@link FloatTensor}s or
   *     {@link DoubleTensor}s, all of one type, and a {@link LongTensor} for the sequence ops'
   *     optional last input {@code seq_lengths} (omit it for none)
   * @return the outputs in the op's order, of the inputs' type
   */
  public static Tensor[] run(String op, Long seqLenMax, Map<String, Object> attrs,
      Tensor... inputs) {
    if (op == null) {
      throw new IllegalArgumentException("op is null");
    }
    if (inputs == null) {
      throw new IllegalArgumentException(op + ": inputs is null");
    }
    String[] names = inputNames(op);
    int first = seqLenMax != null ? 1 : 0;
    Object[] data = new Object[inputs.length];
    long[][] shapes = new long[inputs.length][];
    for (int k = 0; k < inputs.length; ++k) {
      if (inputs[k] == null) {
        String name = k + first < names.length ? names[k + first] : "input " + (k + first);
        throw new IllegalArgumentException(op + ": " + name + " is null");
      }
      data[k] = inputs[k].array();
      shapes[k] = inputs[k].shape();
    }
    int n = attrs == null ? 0 : attrs.size();
    String[] attrNames = new String[n];
    double[] attrValues = new double[n];
    boolean[] attrIsBool = new boolean[n];
    int a = 0;
    if (attrs != null) {
      for (Map.Entry<String, Object> e : attrs.entrySet()) {
        attrNames[a] = e.getKey();
        Object v = e.getValue();
        if (v instanceof Boolean) {
          attrIsBool[a] = true;
          attrValues[a] = ((Boolean) v) ? 1.0 : 0.0;
        } else if (v instanceof Number) {
          attrValues[a] = ((Number) v).doubleValue();
        } else {
          throw new IllegalArgumentException(
              op + ": attr " + e.getKey() + " must be a Float or a Boolean, got " + v);
        }
        ++a;
      }
    }
    long[][] outShapes = new long[outputCount(op)][];
    Object[] outs = runNative(op, seqLenMax != null, seqLenMax != null ? seqLenMax : 0L, data,
        shapes, attrNames, attrValues, attrIsBool, outShapes);
    Tensor[] result = new Tensor[outs.length];
    for (int k = 0; k < outs.length; ++k) {
      result[k] = outs[k] instanceof float[]
          ? FloatTensor.wrap((float[]) outs[k], outShapes[k])
          : DoubleTensor.wrap((double[]) outs[k], outShapes[k]);
    }
    return result;
  }

  /**
   * The names of all ops.
   *
   * @return TensorFlow's names, in the library's stable order
   */
  public static native String[] opNames();

  /**
   * An op's input names (TensorFlow's, in order; seq_len_max included).
   *
   * @param op the op's name
   * @return the names
   */
  public static native String[] inputNames(String op);

  /**
   * An op's output names (TensorFlow's, in order).
   *
   * @param op the op's name
   * @return the names
   */
  public static native String[] outputNames(String op);

  private static int outputCount(String op) {
    return outputNames(op).length;
  }

  /**
   * The library's version, "MAJOR.MINOR.PATCH".
   *
   * @return the version
   */
  public static native String version();

  /**
   * Sets the number of threads every op uses.
   *
   * @param n in [1, {@link #maxThreads()}]
   */
  public static native void setNumThreads(int n);

  /**
   * The number of threads every op uses.
   *
   * @return the thread count
   */
  public static native int getNumThreads();

  /**
   * The largest thread count accepted on this machine.
   *
   * @return the limit
   */
  public static native int maxThreads();

  /**
   * Sets the memory limit: a call whose outputs, workspace and copies (here: the native copies of
   * the inputs, the native outputs and the Java arrays they are copied into) need more bytes is
   * refused with a {@link BlockrnnException} of status "ResourceExhausted" that names the op,
   * before anything is allocated.
   *
   * @param bytes the limit; 0 or less restores the default (what the machine can hold)
   */
  public static native void setMemoryLimit(long bytes);

  /**
   * The memory limit of one call, in bytes.
   *
   * @return the limit
   */
  public static native long getMemoryLimit();

  /**
   * Sets the workspace cache limit: the most bytes of op workspace the calling threads keep
   * between calls, all together (each keeps at most one buffer for its next call, so that
   * repeated calls do not map and fault in tens of MB afresh). Lowering it frees this thread's
   * buffer when it no longer fits.
   *
   * @param bytes the limit; 0 keeps none, less than 0 restores the default (256 MiB)
   */
  public static native void setWorkspaceCacheLimit(long bytes);

  /**
   * The workspace cache limit, in bytes.
   *
   * @return the limit
   */
  public static native long getWorkspaceCacheLimit();

  private static final ThreadLocal<Cancellation> CANCELLATION = new ThreadLocal<>();

  /**
   * Installs a cancellation for the calls this thread makes from now on (null removes it). A
   * sequence op running on this thread looks at it between time steps (at most every 20 ms) and,
   * once it is cancelled, stops with a {@link java.util.concurrent.CancellationException} naming
   * the op and the steps done; the cell ops run to the end.
   *
   * @param cancellation the cancellation to watch, or null for none
   */
  public static void setCancellation(Cancellation cancellation) {
    // The thread-local reference keeps the flag's memory alive while the library may read it.
    setCancelFlag(cancellation == null ? null : cancellation.flag());
    if (cancellation == null) {
      CANCELLATION.remove();
    } else {
      CANCELLATION.set(cancellation);
    }
  }

  /**
   * The cancellation installed on this thread.
   *
   * @return it, or null when none is
   */
  public static Cancellation getCancellation() {
    return CANCELLATION.get();
  }

  private static native void setCancelFlag(java.nio.ByteBuffer flag);

  private static native Object[] runNative(String op, boolean hasSeqLenMax, long seqLenMax,
      Object[] data, long[][] shapes, String[] attrNames, double[] attrValues,
      boolean[] attrIsBool, long[][] outShapes);
}
