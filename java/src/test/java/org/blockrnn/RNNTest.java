package org.blockrnn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * org.blockrnn.RNN: a one-layer, one-direction handle gives bit for bit what the one-shot ops give
 * through RawOps (BlockLSTMV2, BlockGRUResetAfter and their grads), over many calls on one handle
 * with the weights set again in between; a bidirectional stack's shapes; errors and close().
 */
class RNNTest {
  static final int T = 4, B = 3, I = 2, H = 3;

  static FloatTensor random(java.util.Random rng, float scale, long... shape) {
    float[] v = new float[FloatTensor.zeros(shape).size()];
    for (int k = 0; k < v.length; ++k) {
      v[k] = (rng.nextFloat() * 2 - 1) * scale;
    }
    return FloatTensor.of(v, shape);
  }

  /** The last step of a [T, B, H] tensor as [1, B, H]. */
  static FloatTensor lastStep(Tensor t) {
    float[] all = ((FloatTensor) t).data();
    float[] last = new float[B * H];
    System.arraycopy(all, (T - 1) * B * H, last, 0, B * H);
    return FloatTensor.of(last, 1, B, H);
  }

  static FloatTensor asState(Tensor t) {
    return FloatTensor.of(((FloatTensor) t).data(), 1, B, H);
  }

  @Test
  void lstmV2MatchesTheOneShotOpsOverManyCalls() {
    java.util.Random rng = new java.util.Random(3);
    FloatTensor zerosH = FloatTensor.zeros(H), zerosTbh = FloatTensor.zeros(T, B, H);
    Map<String, Object> noPeephole = Map.of("use_peephole", false);
    try (RNN rnn = new RNN(new RNN.Options(RNN.Mode.LSTM_V2, I, H).max(T, B))) {
      assertEquals(5, rnn.paramsPerLayer());
      FloatTensor w = null, b = null;
      for (int step = 0; step < 5; ++step) {
        if (step % 2 == 0) { // new weights every other call
          w = random(rng, 0.5f, I + H, 4 * H);
          b = random(rng, 0.2f, 4 * H);
          rnn.setWeights(0, 0, w, b);
        }
        FloatTensor x = random(rng, 1, T, B, I), h0 = random(rng, 0.5f, B, H),
                    c0 = random(rng, 0.5f, B, H), yGrad = random(rng, 1, T, B, H);
        Tensor[] acts = RawOps.run("BlockLSTMV2", (long) T, noPeephole, x, c0, h0, w, zerosH,
            zerosH, zerosH, b); // i cs f o ci co h
        RNN.Outputs out = rnn.forward(x, asState(h0), asState(c0), null, null);
        assertEquals(acts[6], out.y, "y == h");
        assertEquals(lastStep(acts[6]), out.hN, "h_n == h[T-1]");
        assertEquals(lastStep(acts[1]), out.cN, "c_n == cs[T-1]");

        Tensor[] grads = RawOps.run("BlockLSTMGradV2", (long) T, noPeephole, x, c0, h0, w, zerosH,
            zerosH, zerosH, b, acts[0], acts[1], acts[2], acts[3], acts[4], acts[5], acts[6],
            zerosTbh, yGrad); // x_grad cs_prev_grad h_prev_grad w_grad wci wcf wco b_grad
        RNN.Gradients g =
            rnn.backward(x, asState(h0), asState(c0), null, null, yGrad, null, null);
        assertEquals(grads[0], g.xGrad, "x_grad");
        assertEquals(asState(grads[2]), g.h0Grad, "h0_grad == h_prev_grad");
        assertEquals(asState(grads[1]), g.c0Grad, "c0_grad == cs_prev_grad");
        assertEquals(5, g.params.length);
        assertEquals(grads[3], g.params[0], "w_grad");
        assertEquals(grads[7], g.params[1], "b_grad");
        assertEquals(grads[4], g.params[2], "wci_grad (zeros)");
      }
    }
  }

  /**
   * Options.torchLayout: a torch.nn.LSTM layer's tensors as they are give the default layout's
   * bits (w = [weight_ihᵀ; weight_hhᵀ], b = bias_ih + bias_hh), and the gradients come back in
   * torch.nn's layout (the bias gradient twice); null biases are zeros, a null weight is refused.
   */
  @Test
  void torchLayoutTakesTorchNnTensorsAsTheyAre() {
    java.util.Random rng = new java.util.Random(9);
    final int g4 = 4 * H;
    FloatTensor wIh = random(rng, 0.5f, g4, I), wHh = random(rng, 0.5f, g4, H);
    FloatTensor bIh = random(rng, 0.2f, g4), bHh = random(rng, 0.2f, g4);
    float[] w = new float[(I + H) * g4], b = new float[g4];
    for (int g = 0; g < g4; ++g) {
      for (int i = 0; i < I + H; ++i) {
        w[i * g4 + g] = i < I ? wIh.data()[g * I + i] : wHh.data()[g * H + i - I];
      }
      b[g] = bIh.data()[g] + bHh.data()[g];
    }
    try (RNN ops = new RNN(new RNN.Options(RNN.Mode.LSTM_V2, I, H).max(T, B));
         RNN torch =
             new RNN(new RNN.Options(RNN.Mode.LSTM_V2, I, H).max(T, B).torchLayout(true))) {
      assertEquals(7, torch.paramsPerLayer());
      ops.setWeights(0, 0, FloatTensor.of(w, I + H, g4), FloatTensor.of(b, g4));
      torch.setWeights(0, 0, wIh, wHh, bIh, bHh);
      FloatTensor x = random(rng, 1, T, B, I), h0 = random(rng, 0.5f, 1, B, H),
                  c0 = random(rng, 0.5f, 1, B, H), yGrad = random(rng, 1, T, B, H);
      RNN.Outputs a = ops.forward(x, h0, c0, null, null);
      RNN.Outputs t = torch.forward(x, h0, c0, null, null);
      assertEquals(a.y, t.y, "y");
      assertEquals(a.cN, t.cN, "c_n");
      RNN.Gradients ga = ops.backward(x, h0, c0, null, null, yGrad, null, null);
      RNN.Gradients gt = torch.backward(x, h0, c0, null, null, yGrad, null, null);
      assertEquals(ga.xGrad, gt.xGrad, "x_grad");
      assertEquals(7, gt.params.length);
      float[] dw = ((FloatTensor) ga.params[0]).data();
      float[] dIh = new float[g4 * I], dHh = new float[g4 * H];
      for (int g = 0; g < g4; ++g) {
        for (int i = 0; i < I + H; ++i) {
          if (i < I) {
            dIh[g * I + i] = dw[i * g4 + g];
          } else {
            dHh[g * H + i - I] = dw[i * g4 + g];
          }
        }
      }
      assertEquals(FloatTensor.of(dIh, g4, I), gt.params[0], "weight_ih's gradient");
      assertEquals(FloatTensor.of(dHh, g4, H), gt.params[1], "weight_hh's gradient");
      assertEquals(ga.params[1], gt.params[2], "bias_ih's gradient");
      assertEquals(ga.params[1], gt.params[3], "bias_hh's gradient");

      ops.setWeights(0, 0, FloatTensor.of(w, I + H, g4), FloatTensor.zeros(g4));
      torch.setWeights(0, 0, wIh, wHh, null, null); // bias=False
      assertEquals(ops.forward(x, h0, c0, null, null).y, torch.forward(x, h0, c0, null, null).y,
          "y without biases");
      IllegalArgumentException e = assertThrows(
          IllegalArgumentException.class, () -> torch.setWeights(0, 0, wIh, null, bIh, bHh));
      assertTrue(e.getMessage().contains("params[1] is null"), e.getMessage());
    }
  }

  @Test
  void gruResetAfterMatchesTheOneShotOps() {
    java.util.Random rng = new java.util.Random(5);
    FloatTensor x = random(rng, 1, T, B, I), h0 = random(rng, 0.5f, B, H),
                wI = random(rng, 0.5f, I, 3 * H), wH = random(rng, 0.5f, H, 3 * H),
                bI = random(rng, 0.2f, 3 * H), bH = random(rng, 0.2f, 3 * H),
                yGrad = random(rng, 1, T, B, H);
    Tensor[] acts = RawOps.run("BlockGRUResetAfter", (long) T, null, x, h0, wI, wH, bI, bH);
    Tensor[] grads = RawOps.run("BlockGRUResetAfterGrad", (long) T, null, x, h0, wI, wH, bI, bH,
        acts[0], acts[1], acts[2], acts[3], acts[4], yGrad);
    try (RNN rnn = new RNN(new RNN.Options(RNN.Mode.GRU_RESET_AFTER, I, H).max(T, B))) {
      IllegalArgumentException e = assertThrows(
          IllegalArgumentException.class, () -> rnn.forward(x, asState(h0), null, null, null));
      assertTrue(e.getMessage().contains("set_weights has not been called"), e.getMessage());
      rnn.setWeights(0, 0, wI, wH, bI, bH);
      RNN.Outputs out = rnn.forward(x, asState(h0), null, null, null);
      assertEquals(acts[4], out.y, "y == h");
      assertEquals(lastStep(acts[4]), out.hN, "h_n == h[T-1]");
      assertNull(out.cN, "no cell state in a GRU mode");
      RNN.Gradients g = rnn.backward(x, asState(h0), null, null, null, yGrad, null, null);
      assertEquals(grads[0], g.xGrad, "x_grad");
      assertEquals(asState(grads[1]), g.h0Grad, "h0_grad");
      assertNull(g.c0Grad);
      for (int k = 0; k < 4; ++k) {
        assertEquals(grads[2 + k], g.params[k], "param gradient " + k);
      }
      // Without the gradient of x: none returned, every other gradient the same.
      RNN.Gradients noX = rnn.backward(x, asState(h0), null, null, null, yGrad, null, null, false);
      assertNull(noX.xGrad);
      assertEquals(asState(grads[1]), noX.h0Grad, "h0_grad without x_grad");
      for (int k = 0; k < 4; ++k) {
        assertEquals(grads[2 + k], noX.params[k], "param gradient " + k + " without x_grad");
      }
      // Without the gradients of x and h0: neither returned, the parameters' the same.
      RNN.Gradients onlyParams =
          rnn.backward(x, asState(h0), null, null, null, yGrad, null, null, false, false);
      assertNull(onlyParams.xGrad);
      assertNull(onlyParams.h0Grad);
      for (int k = 0; k < 4; ++k) {
        assertEquals(grads[2 + k], onlyParams.params[k], "param gradient " + k + " alone");
      }
      e = assertThrows(IllegalArgumentException.class,
          () -> rnn.forward(x, asState(h0), asState(h0), null, null));
      assertTrue(e.getMessage().contains("c0 must be absent"), e.getMessage());
    }
  }

  @Test
  void bidirectionalStackInFloat64() {
    long L = 2, D = 2;
    try (RNN rnn = new RNN(new RNN.Options(RNN.Mode.LSTM, I, H)
                               .numLayers(L)
                               .bidirectional(true)
                               .doublePrecision(true)
                               .max(T, B)
                               .usePeephole(true))) {
      for (long l = 0; l < L; ++l) {
        long k = l == 0 ? I : D * H;
        for (long d = 0; d < D; ++d) {
          rnn.setWeights(l, d, DoubleTensor.zeros(k + H, 4 * H), DoubleTensor.zeros(4 * H),
              DoubleTensor.zeros(H), DoubleTensor.zeros(H), DoubleTensor.zeros(H));
        }
      }
      DoubleTensor x = DoubleTensor.zeros(T, B, I);
      LongTensor lengths = LongTensor.of(new long[] {4, 2, 0}, B);
      RNN.Outputs out = rnn.forward(x, null, null, lengths, null);
      assertArrayEquals(new long[] {T, B, D * H}, out.y.shape());
      assertArrayEquals(new long[] {L * D, B, H}, out.hN.shape());
      assertEquals("double", out.y.dtype());
      RNN.Gradients g = rnn.backward(
          x, null, null, lengths, null, DoubleTensor.zeros(T, B, D * H), null, null);
      assertEquals(L * D * 5, g.params.length);
      assertArrayEquals(new long[] {D * H + H, 4 * H}, g.params[10].shape(), "layer 1's w");
      assertArrayEquals(new long[] {T, B, I}, g.xGrad.shape());
    }
  }

  @Test
  void errorsAndClose() {
    IllegalArgumentException e = assertThrows(
        IllegalArgumentException.class, () -> new RNN(new RNN.Options(RNN.Mode.GRU, I, 0)));
    assertTrue(e.getMessage().contains("hidden_size"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> new RNN(null));
    RNN rnn = new RNN(new RNN.Options(RNN.Mode.GRU, I, H).max(T, B));
    e = assertThrows(IllegalArgumentException.class,
        () -> rnn.setWeights(0, 0, FloatTensor.zeros(I + H, 2 * H)));
    assertTrue(e.getMessage().contains("parameters"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> rnn.forward(FloatTensor.zeros(T + 1, B, I), null, null, null, null));
    assertTrue(e.getMessage().contains("x"), e.getMessage());
    // An x far past the handle's sizes is refused by the library, naming x: the binding sizes
    // the outputs it allocates before the call by the handle's sizes, not by x's.
    e = assertThrows(IllegalArgumentException.class,
        () -> rnn.forward(FloatTensor.zeros(Integer.MAX_VALUE / 2, B, 0), null, null, null, null));
    assertTrue(e.getMessage().contains("x"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> rnn.backward(FloatTensor.zeros(T, Integer.MAX_VALUE / 2, 0), null, null, null, null,
            FloatTensor.zeros(T, B, H), null, null));
    assertTrue(e.getMessage().contains("x"), e.getMessage());
    e = assertThrows(
        IllegalArgumentException.class, () -> rnn.forward(null, null, null, null, null));
    assertTrue(e.getMessage().contains("RNN.forward: x is null"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> rnn.setWeights(0, 0, FloatTensor.zeros(I + H, 2 * H), null));
    assertTrue(e.getMessage().contains("params[1] is null"), e.getMessage());
    rnn.close();
    rnn.close(); // idempotent
    IllegalStateException closed =
        assertThrows(IllegalStateException.class, () -> rnn.paramsPerLayer());
    assertTrue(closed.getMessage().contains("closed"), closed.getMessage());
  }
}
