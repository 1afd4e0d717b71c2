package org.blockrnn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * org.blockrnn.Layer: for every kind, in float32 and float64, the handle's forward and backward
 * give bit for bit what the one-shot ops and their grads give through RawOps, over many calls on
 * one handle (new inputs every call, new weights every other call, seq_len_max and seq_lengths in
 * some); a handle with a caller's direct-buffer workspace gives the same bits; errors name the
 * layer and the argument; close().
 */
class LayerTest {
  static final int T = 5, B = 3, I = 4, H = 3;

  static Tensor random(java.util.Random rng, boolean dbl, double scale, long... shape) {
    int n = FloatTensor.zeros(shape).size();
    if (dbl) {
      double[] v = new double[n];
      for (int k = 0; k < n; ++k) {
        v[k] = (rng.nextDouble() * 2 - 1) * scale;
      }
      return DoubleTensor.of(v, shape);
    }
    float[] v = new float[n];
    for (int k = 0; k < n; ++k) {
      v[k] = (float) ((rng.nextDouble() * 2 - 1) * scale);
    }
    return FloatTensor.of(v, shape);
  }

  static Tensor zeros(boolean dbl, long... shape) {
    return dbl ? DoubleTensor.zeros(shape) : FloatTensor.zeros(shape);
  }

  static void checkKind(Layer.Kind kind, boolean dbl, boolean peephole) {
    boolean lstm = kind == Layer.Kind.LSTM || kind == Layer.Kind.LSTM_V2;
    java.util.Random rng = new java.util.Random(kind.ordinal() * 2 + (dbl ? 1 : 0));
    Layer.Options options = new Layer.Options(kind, I, H).max(T, B).doublePrecision(dbl);
    Map<String, Object> attrs = new HashMap<>();
    if (lstm) {
      options.usePeephole(peephole);
      attrs.put("use_peephole", peephole);
    }
    if (kind == Layer.Kind.LSTM) {
      options.forgetBias(0.75).cellClip(0.5);
    }
    Map<String, Object> fwdAttrs = new HashMap<>(attrs);
    if (kind == Layer.Kind.LSTM) {
      fwdAttrs.put("forget_bias", 0.75);
      fwdAttrs.put("cell_clip", 0.5);
    }
    String what = kind + (dbl ? " float64" : " float32");
    try (Layer layer = new Layer(options);
         Layer mine = new Layer(options.callerWorkspace(true))) {
      long[][] shapes = layer.paramShapes();
      Tensor[] params = new Tensor[shapes.length];
      LongTensor lengths = LongTensor.of(new long[] {T, 2, 0}, B);
      for (int step = 0; step < 6; ++step) {
        if (step % 2 == 0) {
          for (int k = 0; k < params.length; ++k) {
            params[k] = random(rng, dbl, 0.4, shapes[k]);
          }
          Tensor[] given = lstm && !peephole ? new Tensor[] {params[0], params[1]} : params;
          layer.setWeights(given);
          mine.setWeights(given);
        }
        Long seqLenMax = step % 3 == 1 ? Long.valueOf(T - 2) : null;
        LongTensor seqLengths = step % 3 == 2 ? lengths : null;
        Tensor x = random(rng, dbl, 1, T, B, I), hPrev = random(rng, dbl, 0.5, B, H),
               csPrev = lstm ? random(rng, dbl, 0.5, B, H) : null,
               hGrad = random(rng, dbl, 1, T, B, H),
               csGrad = lstm ? random(rng, dbl, 0.7, T, B, H) : null;

        // The one-shot ops' inputs, in their order.
        java.util.List<Tensor> in = new java.util.ArrayList<>();
        in.add(x);
        if (lstm) {
          in.add(csPrev);
        }
        in.add(hPrev);
        if (lstm) { // w, wci, wcf, wco, b
          Tensor zerosH = zeros(dbl, H);
          in.add(params[0]);
          in.add(peephole ? params[2] : zerosH);
          in.add(peephole ? params[3] : zerosH);
          in.add(peephole ? params[4] : zerosH);
          in.add(params[1]);
        } else {
          java.util.Collections.addAll(in, params);
        }
        int numFwdIn = in.size();
        if (seqLengths != null) {
          in.add(seqLengths);
        }
        long slm = seqLenMax != null ? seqLenMax : T;
        Tensor[] acts = RawOps.run(layer.forwardOp(), slm, fwdAttrs, in.toArray(new Tensor[0]));
        java.util.List<Tensor> gin = new java.util.ArrayList<>(in.subList(0, numFwdIn));
        java.util.Collections.addAll(gin, acts);
        if (lstm) {
          gin.add(csGrad);
        }
        gin.add(hGrad);
        if (seqLengths != null) {
          gin.add(seqLengths);
        }
        Tensor[] grads = RawOps.run(layer.gradOp(), slm, attrs, gin.toArray(new Tensor[0]));

        Tensor[] out = layer.forward(x, csPrev, hPrev, seqLenMax, seqLengths);
        assertArrayEquals(acts, out, what + " step " + step + ": forward bitwise the op's");
        Tensor[] g = layer.backward(x, csPrev, hPrev, seqLenMax, seqLengths, out, csGrad, hGrad);
        assertArrayEquals(grads, g, what + " step " + step + ": backward bitwise the grad op's");

        ByteBuffer ws = ByteBuffer.allocateDirect((int) mine.workspaceBytes(slm, B));
        Tensor[] out2 = mine.forward(x, csPrev, hPrev, seqLenMax, seqLengths, ws);
        assertArrayEquals(acts, out2, what + ": forward with the caller's workspace");
        Tensor[] g2 =
            mine.backward(x, csPrev, hPrev, seqLenMax, seqLengths, out2, csGrad, hGrad, ws);
        assertArrayEquals(grads, g2, what + ": backward with the caller's workspace");
      }
    }
  }

  @Test
  void lstmMatchesTheOneShotOps() {
    checkKind(Layer.Kind.LSTM, false, true);
    checkKind(Layer.Kind.LSTM, true, false);
  }

  @Test
  void lstmV2MatchesTheOneShotOps() {
    checkKind(Layer.Kind.LSTM_V2, false, false);
    checkKind(Layer.Kind.LSTM_V2, true, true);
  }

  @Test
  void gruMatchesTheOneShotOps() {
    checkKind(Layer.Kind.GRU, false, false);
    checkKind(Layer.Kind.GRU, true, false);
  }

  @Test
  void gruResetAfterMatchesTheOneShotOps() {
    checkKind(Layer.Kind.GRU_RESET_AFTER, false, false);
    checkKind(Layer.Kind.GRU_RESET_AFTER, true, false);
  }

  static void expectMessage(Class<? extends Throwable> type, String text,
      org.junit.jupiter.api.function.Executable call) {
    Throwable e = assertThrows(type, call);
    assertTrue(e.getMessage().contains(text), e.getMessage());
  }

  @Test
  void errorsAndClose() {
    expectMessage(IllegalArgumentException.class, "GRULayer.create: hidden_size must be >= 1",
        () -> new Layer(new Layer.Options(Layer.Kind.GRU, I, 0)));
    expectMessage(IllegalArgumentException.class, "Layer: options is null", () -> new Layer(null));
    expectMessage(BlockrnnException.class, "are too large",
        () -> new Layer(new Layer.Options(Layer.Kind.GRU, 1L << 40, 1L << 40)));
    expectMessage(IllegalArgumentException.class, "LSTMLayer(V2).create: forget_bias",
        () -> new Layer(new Layer.Options(Layer.Kind.LSTM_V2, I, H).forgetBias(1.0)));
    Layer layer = new Layer(new Layer.Options(Layer.Kind.GRU, I, H).max(T, B));
    FloatTensor x = FloatTensor.zeros(T, B, I), h = FloatTensor.zeros(B, H);
    expectMessage(IllegalArgumentException.class,
        "GRULayer.forward: set_weights has not been called",
        () -> layer.forward(x, null, h, null, null));
    long[][] s = layer.paramShapes();
    assertEquals(4, s.length);
    assertArrayEquals(new long[] {I + H, 2 * H}, s[0]);
    layer.setWeights(FloatTensor.zeros(s[0]), FloatTensor.zeros(s[1]), FloatTensor.zeros(s[2]),
        FloatTensor.zeros(s[3]));
    expectMessage(IllegalArgumentException.class, "GRULayer.set_weights: b_c must have shape",
        () -> layer.setWeights(FloatTensor.zeros(s[0]), FloatTensor.zeros(s[1]),
            FloatTensor.zeros(s[2])));
    expectMessage(IllegalArgumentException.class, "GRULayer.set_weights: w_ru must have dtype",
        () -> layer.setWeights(DoubleTensor.zeros(s[0]), FloatTensor.zeros(s[1]),
            FloatTensor.zeros(s[2]), FloatTensor.zeros(s[3])));
    expectMessage(IllegalArgumentException.class, "GRULayer.forward: x has 6 time steps",
        () -> layer.forward(FloatTensor.zeros(T + 1, B, I), null, h, null, null));
    // An x far past the handle's sizes is refused by the library, naming x: the binding sizes
    // the outputs it allocates before the call by the handle's sizes, not by x (by x, they would
    // be past what a Java array holds, and refused for that).
    expectMessage(IllegalArgumentException.class, "GRULayer.forward: x has 1073741823 time steps",
        () -> layer.forward(FloatTensor.zeros(Integer.MAX_VALUE / 2, B, 0), null, h, null, null));
    expectMessage(IllegalArgumentException.class, "GRULayer.forward: x must be rank 3, got rank 2",
        () -> layer.forward(FloatTensor.zeros(T, B), null, h, null, null));
    expectMessage(IllegalArgumentException.class, "GRULayer.forward: h_prev must have shape",
        () -> layer.forward(x, null, FloatTensor.zeros(B, H + 1), null, null));
    expectMessage(IllegalArgumentException.class, "cs_prev must be absent",
        () -> layer.forward(x, h, h, null, null));
    expectMessage(IllegalArgumentException.class, "GRULayer.forward: seq_len_max must be between",
        () -> layer.forward(x, null, h, (long) T + 1, null));
    expectMessage(IllegalArgumentException.class, "workspace must be a direct ByteBuffer",
        () -> layer.forward(x, null, h, null, null, ByteBuffer.allocate(1 << 16)));
    expectMessage(IllegalArgumentException.class, "GRULayer.forward: the workspace has 1 bytes",
        () -> layer.forward(x, null, h, null, null, ByteBuffer.allocateDirect(1)));
    Tensor[] out = layer.forward(x, null, h, null, null);
    assertEquals(4, out.length);
    expectMessage(IllegalArgumentException.class, "grads->num_outputs must be 4",
        () -> layer.backward(x, null, h, null, null, new Tensor[] {out[0]}, null, out[0]));
    expectMessage(IllegalArgumentException.class, "GRULayer.backward: h_grad must have shape",
        () -> layer.backward(x, null, h, null, null, out, null, h));
    layer.close();
    layer.close(); // idempotent
    expectMessage(IllegalStateException.class, "closed", () -> layer.forward(x, null, h, null, null));
  }
}
