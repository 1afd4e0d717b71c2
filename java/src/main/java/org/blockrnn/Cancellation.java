package org.blockrnn;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A flag that stops the long calls of the threads it is installed on ({@link
 * RawOps#setCancellation}): {@link #cancel()} may be called from any thread; a sequence op
 * running on a thread that watches this flag stops between two time steps (at most 20 ms later)
 * with a {@link java.util.concurrent.CancellationException}. The flag stays set until {@link
 * #reset()}: later calls on those threads stop too, at their first check.
 *
 * <p>The library reads the flag without calling back into Java (it lives in native memory), so
 * a check costs one memory read and needs no JNI.
 */
public final class Cancellation {
  private static final VarHandle FLAG =
      MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.nativeOrder());

  private final ByteBuffer flag = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder());

  /** Creates a flag that is not set. */
  public Cancellation() {}

  /** Sets the flag: the calls watching it stop. */
  public void cancel() {
    FLAG.setVolatile(flag, 0, 1);
  }

  /** Clears the flag: later calls run again. */
  public void reset() {
    FLAG.setVolatile(flag, 0, 0);
  }

  /**
   * Whether the flag is set.
   *
   * @return true after {@link #cancel()} (until {@link #reset()})
   */
  public boolean isCancelled() {
    return (int) FLAG.getVolatile(flag, 0) != 0;
  }

  /** The flag's memory, for the native code. */
  ByteBuffer flag() {
    return flag;
  }
}
