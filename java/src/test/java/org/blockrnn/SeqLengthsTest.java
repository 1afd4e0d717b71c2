package org.blockrnn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.blockrnn.op.nn.BlockGRU;
import org.blockrnn.op.nn.BlockGRUGrad;
import org.blockrnn.op.nn.BlockGRUResetAfter;
import org.blockrnn.op.nn.BlockGRUResetAfterGrad;
import org.blockrnn.op.nn.BlockLSTM;
import org.blockrnn.op.nn.BlockLSTMGrad;
import org.blockrnn.op.nn.BlockLSTMV1;
import org.junit.jupiter.api.Test;

/**
 * LongTensor and the sequence ops' optional per-example lengths {@code seq_lengths} (blockrnn's
 * extension, docs/ops.md). The oracle is the definition: example b with length L runs as if it
 * were alone in the batch with seq_len_max = L; all lengths T is the call without lengths.
 */
class SeqLengthsTest {
  static final int T = 4, B = 3, I = 2, H = 3;
  static final long[] LENGTHS = {4, 2, 0};

  static DoubleTensor random(java.util.Random rng, double scale, long... shape) {
    double[] v = new double[DoubleTensor.zeros(shape).size()];
    for (int k = 0; k < v.length; ++k) {
      v[k] = (rng.nextDouble() * 2 - 1) * scale;
    }
    return DoubleTensor.of(v, shape);
  }

  /** Example b of a [T, B, K] or [B, K] tensor, as [T, 1, K] or [1, K]. */
  static DoubleTensor example(DoubleTensor t, int b) {
    long[] shape = t.shape();
    int batchDim = shape.length - 2;
    int steps = batchDim == 1 ? (int) shape[0] : 1;
    int k = (int) shape[shape.length - 1];
    double[] all = t.data(), out = new double[steps * k];
    for (int s = 0; s < steps; ++s) {
      System.arraycopy(all, (s * (int) shape[batchDim] + b) * k, out, s * k, k);
    }
    shape[batchDim] = 1;
    return DoubleTensor.of(out, shape);
  }

  static void assertClose(DoubleTensor want, DoubleTensor got, String what) {
    assertArrayEquals(want.shape(), got.shape(), what + " shape");
    double[] w = want.data(), g = got.data();
    for (int k = 0; k < w.length; ++k) {
      double tol = 1e-12 * (1 + Math.abs(w[k]));
      assertTrue(Math.abs(w[k] - g[k]) <= tol, what + "[" + k + "] = " + g[k] + ", want " + w[k]);
    }
  }

  static DoubleTensor plus(DoubleTensor a, DoubleTensor b) {
    double[] x = a.data(), y = b.data();
    for (int k = 0; k < x.length; ++k) {
      x[k] += y[k];
    }
    return DoubleTensor.of(x, a.shape());
  }

  @Test
  void longTensor() {
    LongTensor t = LongTensor.of(new long[] {4, 2, 0}, 3);
    assertEquals("int64", t.dtype());
    assertEquals(2L, t.getLong(1));
    assertArrayEquals(new long[] {3}, t.shape());
    assertEquals(t, LongTensor.of(new long[] {4, 2, 0}, 3));
    assertTrue(!t.equals(LongTensor.zeros(3)));
    assertEquals(0L, LongTensor.zeros(2, 2).getLong(1, 1));
    assertThrows(IllegalArgumentException.class, () -> LongTensor.of(new long[2], 3));
  }

  @Test
  void lstmEachExampleAsIfAlone() {
    java.util.Random rng = new java.util.Random(7);
    DoubleTensor x = random(rng, 1, T, B, I), cs0 = random(rng, 1, B, H),
        h0 = random(rng, 1, B, H), w = random(rng, 0.5, I + H, 4 * H), wci = random(rng, 0.5, H),
        wcf = random(rng, 0.5, H), wco = random(rng, 0.5, H), b = random(rng, 0.5, 4 * H),
        csGrad = random(rng, 1, T, B, H), hGrad = random(rng, 1, T, B, H);
    LongTensor lengths = LongTensor.of(LENGTHS, B);
    BlockLSTM<DoubleTensor> fwd = BlockLSTM.create(T, x, cs0, h0, w, wci, wcf, wco, b, lengths,
        BlockLSTM.usePeephole(true));
    BlockLSTMGrad<DoubleTensor> grad = BlockLSTMGrad.create(T, x, cs0, h0, w, wci, wcf, wco, b,
        fwd.i(), fwd.cs(), fwd.f(), fwd.o(), fwd.ci(), fwd.co(), fwd.h(), csGrad, hGrad,
        lengths, true);
    DoubleTensor wGrad = DoubleTensor.zeros(I + H, 4 * H), bGrad = DoubleTensor.zeros(4 * H);
    DoubleTensor wciGrad = DoubleTensor.zeros(H);
    for (int e = 0; e < B; ++e) {
      DoubleTensor xe = example(x, e), cse = example(cs0, e), he = example(h0, e);
      BlockLSTM<DoubleTensor> alone = BlockLSTM.create(LENGTHS[e], xe, cse, he, w, wci, wcf, wco,
          b, BlockLSTM.usePeephole(true));
      assertClose(alone.h(), example(fwd.h(), e), "h of example " + e);
      assertClose(alone.cs(), example(fwd.cs(), e), "cs of example " + e);
      assertClose(alone.i(), example(fwd.i(), e), "i of example " + e);
      BlockLSTMGrad<DoubleTensor> g = BlockLSTMGrad.create(LENGTHS[e], xe, cse, he, w, wci, wcf,
          wco, b, alone.i(), alone.cs(), alone.f(), alone.o(), alone.ci(), alone.co(),
          alone.h(), example(csGrad, e), example(hGrad, e), true);
      assertClose(g.xGrad(), example(grad.xGrad(), e), "x_grad of example " + e);
      assertClose(g.csPrevGrad(), example(grad.csPrevGrad(), e), "cs_prev_grad of " + e);
      assertClose(g.hPrevGrad(), example(grad.hPrevGrad(), e), "h_prev_grad of " + e);
      wGrad = plus(wGrad, g.wGrad());
      bGrad = plus(bGrad, g.bGrad());
      wciGrad = plus(wciGrad, g.wciGrad());
    }
    assertClose(wGrad, grad.wGrad(), "w_grad (the sum over examples)");
    assertClose(bGrad, grad.bGrad(), "b_grad (the sum over examples)");
    assertClose(wciGrad, grad.wciGrad(), "wci_grad (the sum over examples)");
  }

  @Test
  void gruEachExampleAsIfAlone() {
    java.util.Random rng = new java.util.Random(8);
    DoubleTensor x = random(rng, 1, T, B, I), h0 = random(rng, 1, B, H),
        wRu = random(rng, 0.5, I + H, 2 * H), wC = random(rng, 0.5, I + H, H),
        bRu = random(rng, 0.5, 2 * H), bC = random(rng, 0.5, H),
        hGrad = random(rng, 1, T, B, H);
    LongTensor lengths = LongTensor.of(LENGTHS, B);
    BlockGRU<DoubleTensor> fwd = BlockGRU.create(T, x, h0, wRu, wC, bRu, bC, lengths);
    BlockGRUGrad<DoubleTensor> grad = BlockGRUGrad.create(T, x, h0, wRu, wC, bRu, bC, fwd.r(),
        fwd.u(), fwd.c(), fwd.h(), hGrad, lengths);
    DoubleTensor wRuGrad = DoubleTensor.zeros(I + H, 2 * H), bCGrad = DoubleTensor.zeros(H);
    for (int e = 0; e < B; ++e) {
      DoubleTensor xe = example(x, e), he = example(h0, e);
      BlockGRU<DoubleTensor> alone = BlockGRU.create(LENGTHS[e], xe, he, wRu, wC, bRu, bC);
      assertClose(alone.h(), example(fwd.h(), e), "h of example " + e);
      assertClose(alone.r(), example(fwd.r(), e), "r of example " + e);
      BlockGRUGrad<DoubleTensor> g = BlockGRUGrad.create(LENGTHS[e], xe, he, wRu, wC, bRu, bC,
          alone.r(), alone.u(), alone.c(), alone.h(), example(hGrad, e));
      assertClose(g.xGrad(), example(grad.xGrad(), e), "x_grad of example " + e);
      assertClose(g.hPrevGrad(), example(grad.hPrevGrad(), e), "h_prev_grad of " + e);
      wRuGrad = plus(wRuGrad, g.wRuGrad());
      bCGrad = plus(bCGrad, g.bCGrad());
    }
    assertClose(wRuGrad, grad.wRuGrad(), "w_ru_grad (the sum over examples)");
    assertClose(bCGrad, grad.bCGrad(), "b_c_grad (the sum over examples)");
  }

  @Test
  void fullLengthsAreTheCallWithout() {
    java.util.Random rng = new java.util.Random(9);
    FloatTensor x = ApiTest.ramp(0.1f, T, B, I);
    DoubleTensor xd = random(rng, 1, T, B, I), h0 = random(rng, 1, B, H);
    DoubleTensor wI = random(rng, 0.5, I, 3 * H), wH = random(rng, 0.5, H, 3 * H),
        bI = random(rng, 0.5, 3 * H), bH = random(rng, 0.5, 3 * H);
    LongTensor full = LongTensor.of(new long[] {T, T, T}, B);
    BlockGRUResetAfter<DoubleTensor> with =
        BlockGRUResetAfter.create(T, xd, h0, wI, wH, bI, bH, full);
    BlockGRUResetAfter<DoubleTensor> without = BlockGRUResetAfter.create(T, xd, h0, wI, wH, bI, bH);
    assertEquals(without.h(), with.h(), "bitwise");
    assertEquals(without.hn(), with.hn(), "bitwise");
    DoubleTensor hGrad = random(rng, 1, T, B, H);
    BlockGRUResetAfterGrad<DoubleTensor> gradWith = BlockGRUResetAfterGrad.create(T, xd, h0, wI,
        wH, bI, bH, with.r(), with.u(), with.n(), with.hn(), with.h(), hGrad, full);
    BlockGRUResetAfterGrad<DoubleTensor> gradWithout = BlockGRUResetAfterGrad.create(T, xd, h0,
        wI, wH, bI, bH, with.r(), with.u(), with.n(), with.hn(), with.h(), hGrad);
    assertEquals(gradWithout.xGrad(), gradWith.xGrad(), "bitwise");
    assertEquals(gradWithout.wHGrad(), gradWith.wHGrad(), "bitwise");
    assertEquals(gradWithout.bIGrad(), gradWith.bIGrad(), "bitwise");
    FloatTensor z = FloatTensor.zeros(B, H), p = FloatTensor.zeros(H);
    FloatTensor w = ApiTest.ramp(0.05f, I + H, 4 * H);
    FloatTensor b = ApiTest.ramp(0.1f, 4 * H);
    BlockLSTMV1<FloatTensor> v1 = BlockLSTMV1.create(T, x, z, z, w, p, p, p, b, full,
        BlockLSTMV1.forgetBias(0f));
    assertEquals(BlockLSTMV1.create(T, x, z, z, w, p, p, p, b, BlockLSTMV1.forgetBias(0f)).h(),
        v1.h(), "bitwise");
  }

  @Test
  void badLengthsNameTheArgument() {
    DoubleTensor x = DoubleTensor.zeros(T, B, I), h0 = DoubleTensor.zeros(B, H);
    DoubleTensor wRu = DoubleTensor.zeros(I + H, 2 * H), wC = DoubleTensor.zeros(I + H, H);
    DoubleTensor bRu = DoubleTensor.zeros(2 * H), bC = DoubleTensor.zeros(H);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> BlockGRU.create(T, x, h0, wRu, wC, bRu, bC, LongTensor.of(new long[] {1, 5, 0}, B)));
    assertTrue(e.getMessage().contains("seq_lengths"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> BlockGRU.create(T, x, h0, wRu, wC, bRu, bC, LongTensor.zeros(B + 1)));
    assertTrue(e.getMessage().contains("seq_lengths"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> BlockGRU.create(T, x, h0, wRu, wC, bRu, bC, (LongTensor) null));
    assertTrue(e.getMessage().contains("seq_lengths is null"), e.getMessage());
  }
}
