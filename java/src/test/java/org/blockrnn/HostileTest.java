package org.blockrnn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Map;
import java.util.concurrent.CancellationException;
import org.blockrnn.op.nn.BlockGRU;
import org.blockrnn.op.nn.BlockLSTM;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Hostile calls from Java: the memory limit refuses a call before its outputs are allocated and
 * names the op that was called (BlockLSTMV2 for the V2 class), outputs too large for a Java array
 * are refused before anything is allocated, and a Cancellation stops a long call.
 */
class HostileTest {
  @AfterEach
  void restore() {
    RawOps.setMemoryLimit(0);
    RawOps.setCancellation(null);
  }

  /** The process's peak resident memory (VmHWM), in bytes. */
  static long peakResidentBytes() throws IOException {
    for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
      if (line.startsWith("VmHWM:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
      }
    }
    throw new IOException("no VmHWM in /proc/self/status");
  }

  /** BlockLSTM (the V2 op) over T steps of B examples, input size I, cell size H. */
  static BlockLSTM<FloatTensor> lstm(long t, long b, long i, long h) {
    return BlockLSTM.create(t, FloatTensor.zeros(t, b, i), FloatTensor.zeros(b, h),
        FloatTensor.zeros(b, h), ApiTest.ramp(0.01f, i + h, 4 * h), FloatTensor.zeros(h),
        FloatTensor.zeros(h), FloatTensor.zeros(h), FloatTensor.zeros(4 * h));
  }

  @Test
  void memoryLimitRoundTrips() {
    long machine = RawOps.getMemoryLimit();
    assertTrue(machine > 0, "the default limit is what the machine can hold: " + machine);
    RawOps.setMemoryLimit(12345);
    assertEquals(12345, RawOps.getMemoryLimit());
    RawOps.setMemoryLimit(0);
    assertEquals(machine, RawOps.getMemoryLimit(), "0 restores the default");
  }

  @Test
  void workspaceCacheLimitRoundTripsAndKeepsTheBits() {
    assertEquals(256L << 20, RawOps.getWorkspaceCacheLimit(), "the default");
    RawOps.setWorkspaceCacheLimit(0);
    assertEquals(0, RawOps.getWorkspaceCacheLimit());
    float[] uncached = rampLstm().h().data();
    RawOps.setWorkspaceCacheLimit(-1);
    assertEquals(256L << 20, RawOps.getWorkspaceCacheLimit(), "less than 0 restores the default");
    rampLstm();
    float[] cached = rampLstm().h().data();
    assertTrue(cached[cached.length - 1] != 0f, "a non-trivial output");
    assertArrayEquals(uncached, cached, "a kept workspace, the same bits");
  }

  static BlockLSTM<FloatTensor> rampLstm() {
    long t = 5, b = 3, i = 4, h = 6;
    return BlockLSTM.create(t, ApiTest.ramp(0.1f, t, b, i), FloatTensor.zeros(b, h),
        FloatTensor.zeros(b, h), ApiTest.ramp(0.01f, i + h, 4 * h), FloatTensor.zeros(h),
        FloatTensor.zeros(h), FloatTensor.zeros(h), ApiTest.ramp(0.02f, 4 * h));
  }

  @Test
  void memoryLimitRefusesBeforeAllocatingAndNamesTheV2Op() throws IOException {
    // T = 2048, B = 64, H = 64: 7 outputs of 32 MiB each (224 MiB), and as much again for their
    // Java arrays; the inputs are 4 MiB. Under a 64 MiB limit nothing of that may be allocated:
    // the peak resident memory may grow by the inputs and the JVM's own work, far less than one
    // output (the 32 MiB margin).
    RawOps.setMemoryLimit(64L << 20);
    long before = peakResidentBytes();
    BlockrnnException e = assertThrows(BlockrnnException.class, () -> lstm(2048, 64, 8, 64));
    long grew = peakResidentBytes() - before;
    assertEquals("ResourceExhausted", e.status());
    assertTrue(e.getMessage().contains("BlockLSTMV2: this call needs"), e.getMessage());
    assertFalse(e.getMessage().contains("BlockLSTM:"), e.getMessage());
    assertTrue(e.getMessage().contains("outputs"), e.getMessage());
    assertTrue(grew < (32L << 20), "the peak resident memory grew by " + grew + " bytes");
    // A call within the limit runs.
    assertEquals(16, lstm(16, 4, 8, 8).h().shape()[0]);
  }

  @Test
  void outputsLargerThanAJavaArrayAreRefusedBeforeAllocating() {
    // BlockGRU with T = 2^16, B = 2^10, I = 0, H = 64: each output has 2^32 elements.
    long t = 1L << 16;
    long b = 1L << 10;
    long h = 64;
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> BlockGRU.create(t, FloatTensor.zeros(t, b, 0), FloatTensor.zeros(b, h),
            FloatTensor.zeros(h, 2 * h), FloatTensor.zeros(h, h), FloatTensor.zeros(2 * h),
            FloatTensor.zeros(h)));
    assertTrue(e.getMessage().contains("BlockGRU: output r has more elements than a Java array"),
        e.getMessage());
  }

  @Test
  void cancellationStopsALongCall() {
    Cancellation cancellation = new Cancellation();
    RawOps.setCancellation(cancellation);
    assertTrue(RawOps.getCancellation() == cancellation);
    // 10^6 steps take well over the 20 ms between two checks of the flag (a step costs at least
    // tens of nanoseconds).
    cancellation.cancel();
    assertTrue(cancellation.isCancelled());
    CancellationException e =
        assertThrows(CancellationException.class, () -> lstm(1_000_000, 1, 1, 2));
    assertTrue(e.getMessage().contains("BlockLSTMV2: cancelled after"), e.getMessage());
    // Reset, the call runs to the end; removed, it does too.
    cancellation.reset();
    assertEquals(1_000_000, lstm(1_000_000, 1, 1, 2).h().shape()[0]);
    cancellation.cancel();
    RawOps.setCancellation(null);
    assertTrue(RawOps.getCancellation() == null);
    assertEquals(1_000_000, lstm(1_000_000, 1, 1, 2).h().shape()[0]);
  }

  @Test
  void cancellationFromAnotherThread() throws Exception {
    Cancellation cancellation = new Cancellation();
    Thread canceller = new Thread(() -> {
      try {
        Thread.sleep(50);
      } catch (InterruptedException ignored) {
        Thread.currentThread().interrupt();
      }
      cancellation.cancel();
    });
    RawOps.setCancellation(cancellation);
    canceller.start();
    // Far more steps than run in 50 ms.
    CancellationException e =
        assertThrows(CancellationException.class, () -> lstm(4_000_000, 1, 1, 1));
    canceller.join();
    assertTrue(e.getMessage().contains("BlockLSTMV2: cancelled after"), e.getMessage());
  }

  @Test
  void tooManyInputsAreRefusedBeforeReadingThem() {
    Tensor[] many = new Tensor[40];
    java.util.Arrays.fill(many, FloatTensor.zeros(1));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> RawOps.run("GRUBlockCell", null, null, many));
    assertTrue(e.getMessage().contains("GRUBlockCell: takes at most 6 tensor inputs, got 40"),
        e.getMessage());
  }

  @Test
  void badAttrsNameTheOp() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> RawOps.run("BlockLSTMV2", 1L, Map.of("forget_bias", 1.0f),
            FloatTensor.zeros(1, 1, 1), FloatTensor.zeros(1, 1), FloatTensor.zeros(1, 1),
            FloatTensor.zeros(2, 4), FloatTensor.zeros(1), FloatTensor.zeros(1),
            FloatTensor.zeros(1), FloatTensor.zeros(4)));
    assertTrue(e.getMessage().contains("BlockLSTMV2: unknown attr 'forget_bias'"), e.getMessage());
  }
}
