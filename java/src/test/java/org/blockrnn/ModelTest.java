package org.blockrnn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * org.blockrnn.Model on a one-layer GRU (reset-after) model file written here: its sizes and
 * state names, its forward against the BlockGRUResetAfter op on the same weights (the same
 * kernels: equal bits), the final state at each example's last step, and the errors (a broken
 * file, a wrong dtype, a closed model). Files converted from Keras and PyTorch are compared
 * with the frameworks in tests/python/test_model_cpp.py, which runs them through this class
 * too (ModelRun).
 */
class ModelTest {
  static final int T = 4, B = 2, I = 2, H = 3;
  // The configuration under __metadata__.blockrnn, then b_h [9], b_i [9], w_h [3, 9], w_i [2, 9].
  static final String HEADER =
      "{\"__metadata__\":{\"blockrnn\":\"{\\\"format\\\":\\\"blockrnn-model\\\",\\\"version\\\""
      + ":1,\\\"dtype\\\":\\\"float32\\\",\\\"input_size\\\":2,\\\"return_sequences\\\":true,\\\""
      + "masking\\\":null,\\\"layers\\\":[{\\\"kind\\\":\\\"BlockGRUResetAfter\\\",\\\"hidden_siz"
      + "e\\\":3,\\\"directions\\\":1,\\\"merge\\\":null,\\\"go_backwards\\\":false,\\\"padded_ou"
      + "tput\\\":\\\"zero\\\"}],\\\"source\\\":{}}\"},\"layers.0.0.b_h\":{\"dtype\":\"F32\",\"sh"
      + "ape\":[9],\"data_offsets\":[0,36]},\"layers.0.0.b_i\":{\"dtype\":\"F32\",\"shape\":[9],\""
      + "data_offsets\":[36,72]},\"layers.0.0.w_h\":{\"dtype\":\"F32\",\"shape\":[3,9],\"data_off"
      + "sets\":[72,180]},\"layers.0.0.w_i\":{\"dtype\":\"F32\",\"shape\":[2,9],\"data_offsets\":"
      + "[180,252]}}";
  static final float[] WEIGHTS = new float[63];

  static {
    for (int k = 0; k < WEIGHTS.length; ++k) {
      WEIGHTS[k] = 0.037f * (k % 23) - 0.4f;
    }
  }

  static byte[] fileBytes() {
    byte[] header = HEADER.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(8 + header.length + 4 * WEIGHTS.length)
                       .order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(header.length).put(header);
    for (float w : WEIGHTS) {
      b.putFloat(w);
    }
    return b.array();
  }

  static Path write(byte[] bytes) throws IOException {
    Path p = Files.createTempFile("blockrnn-model", ".safetensors");
    p.toFile().deleteOnExit();
    Files.write(p, bytes);
    return p;
  }

  static FloatTensor slice(int from, int to, long... shape) {
    return FloatTensor.of(Arrays.copyOfRange(WEIGHTS, from, to), shape);
  }

  @Test
  void forwardMatchesTheOp() throws IOException {
    float[] xs = new float[T * B * I];
    for (int k = 0; k < xs.length; ++k) {
      xs[k] = 0.1f * (k % 7) - 0.3f;
    }
    float[] hs = new float[B * H];
    for (int k = 0; k < hs.length; ++k) {
      hs[k] = 0.2f * k - 0.5f;
    }
    FloatTensor x = FloatTensor.of(xs, T, B, I);
    FloatTensor h0 = FloatTensor.of(hs, B, H);
    LongTensor lengths = LongTensor.of(new long[] {4, 2}, B);
    Model model = Model.load(write(fileBytes()).toString());
    try {
      assertEquals("float", model.dtype());
      assertEquals(I, model.inputSize());
      assertEquals(H, model.outputSize());
      assertArrayEquals(new String[] {"states.0.0.h"}, model.stateNames());
      assertTrue(model.summary().contains("BlockGRUResetAfter H=3"), model.summary());
      Model.Result r = model.forward(x, lengths, new Tensor[] {h0});
      Tensor[] op = RawOps.run("BlockGRUResetAfter", (long) T, null, x, h0,
          slice(45, 63, I, 3 * H), slice(18, 45, H, 3 * H), slice(9, 18, 3 * H),
          slice(0, 9, 3 * H), lengths);
      FloatTensor h = (FloatTensor) op[4];
      assertEquals(h, r.output());
      FloatTensor last = (FloatTensor) r.states()[0];
      for (int j = 0; j < H; ++j) {
        assertEquals(h.getFloat(3, 0, j), last.getFloat(0, j));
        assertEquals(h.getFloat(1, 1, j), last.getFloat(1, j));
      }
      // Zero initial states and no lengths: the op with h_prev zero.
      Model.Result plain = model.forward(x);
      Tensor[] op0 = RawOps.run("BlockGRUResetAfter", (long) T, null, x, FloatTensor.zeros(B, H),
          slice(45, 63, I, 3 * H), slice(18, 45, H, 3 * H), slice(9, 18, 3 * H),
          slice(0, 9, 3 * H));
      assertEquals(op0[4], plain.output());

      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> model.forward(DoubleTensor.zeros(T, B, I)));
      assertTrue(e.getMessage().contains(
                     "Model.forward: x must have dtype float32 (the model's), got float64"),
          e.getMessage());
      e = assertThrows(IllegalArgumentException.class,
          () -> model.forward(x, LongTensor.of(new long[] {5, 0}, B), null));
      assertTrue(e.getMessage().contains("seq_lengths must be in [0, 4] (T)"), e.getMessage());
      model.close();
      assertThrows(IllegalStateException.class, () -> model.forward(x));
    } finally {
      model.close(); // a second close does nothing
    }
  }

  @Test
  void brokenFilesAreRefused() throws IOException {
    byte[] bytes = fileBytes();
    Path cut = write(Arrays.copyOf(bytes, bytes.length - 4));
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> Model.load(cut.toString()));
    assertTrue(e.getMessage().contains(cut + ": tensor 'layers.0.0.w_i'.data_offsets"),
        e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> Model.load("no/such/model"));
    assertTrue(e.getMessage().contains("no/such/model: cannot open"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> Model.load(null));
  }
}
