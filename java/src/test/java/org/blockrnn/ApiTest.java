package org.blockrnn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.blockrnn.op.nn.BlockLSTM;
import org.blockrnn.op.nn.BlockLSTMGrad;
import org.blockrnn.op.nn.GRUBlockCell;
import org.blockrnn.op.nn.GRUBlockCellGrad;
import org.blockrnn.op.nn.LSTMBlockCell;
import org.blockrnn.op.nn.LSTMBlockCellGrad;
import org.junit.jupiter.api.Test;

/** Tensors, errors (bad input is an IllegalArgumentException naming the argument), float64. */
class ApiTest {
  static FloatTensor ramp(float scale, long... shape) {
    FloatTensor z = FloatTensor.zeros(shape);
    float[] v = new float[z.size()];
    for (int k = 0; k < v.length; ++k) {
      v[k] = ((k * 7) % 11 - 5) * scale;
    }
    return FloatTensor.of(v, shape);
  }

  @Test
  void tensors() {
    FloatTensor t = FloatTensor.of(new float[] {1, 2, 3, 4, 5, 6}, 2, 3);
    assertArrayEquals(new long[] {2, 3}, t.shape());
    assertEquals(6f, t.getFloat(1, 2));
    assertEquals(2, t.rank());
    assertEquals("float", t.dtype());
    float[] d = t.data();
    d[0] = 99;
    assertEquals(1f, t.getFloat(0, 0), "data() is a copy");
    assertEquals(0.0, DoubleTensor.zeros(4).getDouble(3));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> FloatTensor.of(new float[5], 2, 3));
    assertTrue(e.getMessage().contains("needs 6"), e.getMessage());
    assertThrows(IndexOutOfBoundsException.class, () -> t.getFloat(2, 0));
    assertThrows(IllegalArgumentException.class, () -> FloatTensor.zeros(-1));
  }

  @Test
  void library() {
    assertTrue(RawOps.version().matches("\\d+\\.\\d+\\.\\d+"), RawOps.version());
    // The 12 ops of A1 (with gradients.*) + BlockGRUResetAfter(Grad), reachable by name.
    assertEquals(14, RawOps.opNames().length);
    assertTrue(java.util.Arrays.asList(RawOps.opNames()).contains("BlockGRUResetAfterGrad"));
    assertEquals("d_h", RawOps.inputNames("GRUBlockCellGrad")[9]);
    int n = RawOps.getNumThreads();
    RawOps.setNumThreads(1);
    assertEquals(1, RawOps.getNumThreads());
    RawOps.setNumThreads(n);
    assertThrows(IllegalArgumentException.class, () -> RawOps.setNumThreads(0));
    assertTrue(RawOps.maxThreads() >= 16);
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> RawOps.inputNames("NoSuchOp"));
    assertTrue(e.getMessage().contains("NoSuchOp"), e.getMessage());
  }

  @Test
  void badInputNamesTheArgument() {
    FloatTensor x = ramp(0.1f, 2, 3);
    FloatTensor hPrev = ramp(0.1f, 2, 4);
    FloatTensor wRu = ramp(0.05f, 7, 8);
    FloatTensor wC = ramp(0.05f, 7, 4);
    FloatTensor bRu = ramp(0.1f, 8);
    FloatTensor bC = ramp(0.1f, 4);
    GRUBlockCell<FloatTensor> fwd = GRUBlockCell.create(x, hPrev, wRu, wC, bRu, bC);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GRUBlockCellGrad.create(x, hPrev, wRu, wC, bRu, bC, fwd.r(), fwd.u(), fwd.c(),
            ramp(1f, 2, 3)));
    assertTrue(e.getMessage().contains("d_h"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GRUBlockCell.create(x, hPrev, ramp(0.05f, 7, 9), wC, bRu, bC));
    assertTrue(e.getMessage().contains("w_ru"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> GRUBlockCell.create(x, null, wRu, wC, bRu, bC));
    assertTrue(e.getMessage().contains("h_prev is null"), e.getMessage());
    // Mixed float32 / float64 inputs.
    e = assertThrows(IllegalArgumentException.class,
        () -> RawOps.run("GRUBlockCell", null, null, x, DoubleTensor.zeros(2, 4), wRu, wC, bRu,
            bC));
    assertTrue(e.getMessage().contains("h_prev"), e.getMessage());
    // The grads' use_peephole is required.
    FloatTensor p = FloatTensor.zeros(4);
    FloatTensor z = FloatTensor.zeros(2, 4);
    e = assertThrows(IllegalArgumentException.class,
        () -> LSTMBlockCellGrad.create(x, z, z, ramp(0.1f, 7, 16), p, p, p, ramp(0.1f, 16), z,
            z, z, z, z, z, z, z, null));
    assertTrue(e.getMessage().contains("use_peephole"), e.getMessage());
    // A sequence op with seq_len_max past T.
    e = assertThrows(IllegalArgumentException.class,
        () -> BlockLSTM.create(5, ramp(0.1f, 3, 2, 3), z, z, ramp(0.1f, 7, 16), p, p, p,
            ramp(0.1f, 16)));
    assertTrue(e.getMessage().contains("seq_len_max"), e.getMessage());
  }

  @Test
  void float64AndOptions() {
    DoubleTensor x = DoubleTensor.of(new double[] {0.5, -0.25}, 1, 2);
    DoubleTensor state = DoubleTensor.of(new double[] {0.1}, 1, 1);
    double[] w = new double[3 * 4];
    for (int k = 0; k < w.length; ++k) {
      w[k] = 0.1 * (k - 6);
    }
    DoubleTensor wt = DoubleTensor.of(w, 3, 4);
    DoubleTensor p = DoubleTensor.of(new double[] {0.3}, 1);
    DoubleTensor b = DoubleTensor.zeros(4);
    LSTMBlockCell<DoubleTensor> plain = LSTMBlockCell.create(x, state, state, wt, p, p, p, b);
    LSTMBlockCell<DoubleTensor> peep = LSTMBlockCell.create(x, state, state, wt, p, p, p, b,
        LSTMBlockCell.usePeephole(true).forgetBias(0f).cellClip(-1f));
    assertEquals("double", plain.h().dtype());
    assertTrue(plain.h().getDouble(0, 0) != peep.h().getDouble(0, 0));
    // h = o * tanh(cs) on the float64 path.
    assertEquals(plain.o().getDouble(0, 0) * Math.tanh(plain.cs().getDouble(0, 0)),
        plain.h().getDouble(0, 0), 1e-15);
    DoubleTensor seqX = DoubleTensor.of(new double[] {0.5, -0.25, 0.1, 0.2}, 2, 1, 2);
    BlockLSTM<DoubleTensor> seq = BlockLSTM.create(2, seqX, state, state, wt, p, p, p, b);
    DoubleTensor ones = DoubleTensor.of(new double[] {1, 1}, 2, 1, 1);
    BlockLSTMGrad<DoubleTensor> grad = BlockLSTMGrad.create(2L, seqX, state, state, wt, p, p, p,
        b, seq.i(), seq.cs(), seq.f(), seq.o(), seq.ci(), seq.co(), seq.h(),
        DoubleTensor.zeros(2, 1, 1), ones, false);
    assertArrayEquals(new long[] {3, 4}, grad.wGrad().shape());
    assertEquals(0.0, grad.wciGrad().getDouble(0), "no peephole gradient without peepholes");
  }
}
