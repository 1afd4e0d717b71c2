package org.blockrnn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.blockrnn.op.nn.BlockGRU;
import org.blockrnn.op.nn.BlockGRUGrad;
import org.blockrnn.op.nn.BlockLSTM;
import org.blockrnn.op.nn.BlockLSTMGrad;
import org.blockrnn.op.nn.BlockLSTMGradV1;
import org.blockrnn.op.nn.BlockLSTMV1;
import org.blockrnn.op.nn.GRUBlockCell;
import org.blockrnn.op.nn.GRUBlockCellGrad;
import org.blockrnn.op.nn.LSTMBlockCell;
import org.blockrnn.op.nn.LSTMBlockCellGrad;
import org.junit.jupiter.api.Test;

/**
 * Every op class against TensorFlow: replays the float32 cases of the golden files written by
 * tools/make_golden.py with real TensorFlow (tests/golden, format in docs/golden-format.md;
 * directory from the system property blockrnn.golden) through the TF-Java-shaped classes.
 */
class GoldenTest {
  /** One tensor of a golden case. */
  static final class Named {
    String name;
    int dtype;
    long[] shape;
    double[] values;
    long int64;
  }

  /** One golden case. */
  static final class Case {
    String op;
    Map<String, Double> attrs = new LinkedHashMap<>();
    List<Named> inputs = new ArrayList<>();
    List<Named> outputs = new ArrayList<>();
  }

  private static String str(ByteBuffer b) {
    byte[] bytes = new byte[b.getInt()];
    b.get(bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static Named tensor(ByteBuffer b) {
    Named t = new Named();
    t.name = str(b);
    t.dtype = b.get();
    t.shape = new long[b.getInt()];
    long n = 1;
    for (int d = 0; d < t.shape.length; ++d) {
      t.shape[d] = b.getLong();
      n *= t.shape[d];
    }
    t.values = new double[(int) n];
    for (int k = 0; k < n; ++k) {
      switch (t.dtype) {
        case 0: // float16: kept for skipping only
          b.getShort();
          break;
        case 1:
          t.values[k] = b.getFloat();
          break;
        case 2:
          t.values[k] = b.getDouble();
          break;
        default:
          t.int64 = b.getLong();
      }
    }
    return t;
  }

  static List<Case> load(Path path) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(path)).order(ByteOrder.LITTLE_ENDIAN);
    byte[] magic = new byte[8];
    b.get(magic);
    assertEquals("BRNNGOLD", new String(magic, StandardCharsets.US_ASCII));
    assertEquals(1, b.getInt(), "golden format version");
    int n = b.getInt();
    List<Case> cases = new ArrayList<>();
    for (int c = 0; c < n; ++c) {
      Case k = new Case();
      k.op = str(b);
      int attrs = b.getInt();
      for (int a = 0; a < attrs; ++a) {
        String name = str(b);
        k.attrs.put(name, b.getDouble());
      }
      int ins = b.getInt();
      for (int i = 0; i < ins; ++i) {
        k.inputs.add(tensor(b));
      }
      int outs = b.getInt();
      for (int o = 0; o < outs; ++o) {
        k.outputs.add(tensor(b));
      }
      cases.add(k);
    }
    assertEquals(0, b.remaining(), "trailing bytes in " + path);
    return cases;
  }

  static FloatTensor f32(Named t) {
    float[] v = new float[t.values.length];
    for (int k = 0; k < v.length; ++k) {
      v[k] = (float) t.values[k];
    }
    return FloatTensor.of(v, t.shape);
  }

  private static Float attrF(Case c, String name) {
    Double v = c.attrs.get(name);
    return v == null ? null : v.floatValue();
  }

  private static Boolean attrB(Case c, String name) {
    Double v = c.attrs.get(name);
    return v == null ? null : v != 0.0;
  }

  /** Runs a case through the op's Java class; returns its outputs by TensorFlow's names. */
  static Map<String, Tensor> run(Case c) {
    List<FloatTensor> in = new ArrayList<>();
    long seq = -1;
    for (Named t : c.inputs) {
      if (t.dtype == 3) {
        seq = t.int64;
      } else {
        in.add(f32(t));
      }
    }
    FloatTensor[] a = in.toArray(new FloatTensor[0]);
    Map<String, Tensor> out = new LinkedHashMap<>();
    switch (c.op) {
      case "GRUBlockCell": {
        GRUBlockCell<FloatTensor> op = GRUBlockCell.create(a[0], a[1], a[2], a[3], a[4], a[5]);
        put(out, "r", op.r(), "u", op.u(), "c", op.c(), "h", op.h());
        break;
      }
      case "GRUBlockCellGrad": {
        GRUBlockCellGrad<FloatTensor> op =
            GRUBlockCellGrad.create(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
        put(out, "d_x", op.dX(), "d_h_prev", op.dHPrev(), "d_c_bar", op.dCBar(),
            "d_r_bar_u_bar", op.dRBarUBar());
        break;
      }
      case "LSTMBlockCell": {
        LSTMBlockCell<FloatTensor> op = LSTMBlockCell.create(a[0], a[1], a[2], a[3], a[4], a[5],
            a[6], a[7], LSTMBlockCell.forgetBias(attrF(c, "forget_bias"))
                .cellClip(attrF(c, "cell_clip"))
                .usePeephole(attrB(c, "use_peephole")));
        putGates(out, op.i(), op.cs(), op.f(), op.o(), op.ci(), op.co(), op.h());
        break;
      }
      case "LSTMBlockCellGrad": {
        LSTMBlockCellGrad<FloatTensor> op = LSTMBlockCellGrad.create(a[0], a[1], a[2], a[3],
            a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15],
            attrB(c, "use_peephole"));
        put(out, "cs_prev_grad", op.csPrevGrad(), "dicfo", op.dicfo(), "wci_grad", op.wciGrad(),
            "wcf_grad", op.wcfGrad());
        out.put("wco_grad", op.wcoGrad());
        break;
      }
      case "BlockLSTM": {
        BlockLSTMV1<FloatTensor> op = BlockLSTMV1.create(seq, a[0], a[1], a[2], a[3], a[4], a[5],
            a[6], a[7], BlockLSTMV1.forgetBias(attrF(c, "forget_bias")),
            BlockLSTMV1.cellClip(attrF(c, "cell_clip")),
            BlockLSTMV1.usePeephole(attrB(c, "use_peephole")));
        putGates(out, op.i(), op.cs(), op.f(), op.o(), op.ci(), op.co(), op.h());
        break;
      }
      case "BlockLSTMV2": {
        BlockLSTM<FloatTensor> op = BlockLSTM.create(seq, a[0], a[1], a[2], a[3], a[4], a[5],
            a[6], a[7], BlockLSTM.cellClip(attrF(c, "cell_clip"))
                .usePeephole(attrB(c, "use_peephole")));
        putGates(out, op.i(), op.cs(), op.f(), op.o(), op.ci(), op.co(), op.h());
        break;
      }
      case "BlockLSTMGrad": {
        BlockLSTMGradV1<FloatTensor> op = BlockLSTMGradV1.create(seq, a[0], a[1], a[2], a[3],
            a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16],
            attrB(c, "use_peephole"));
        putSeqGrads(out, op.xGrad(), op.csPrevGrad(), op.hPrevGrad(), op.wGrad(), op.wciGrad(),
            op.wcfGrad(), op.wcoGrad(), op.bGrad());
        break;
      }
      case "BlockLSTMGradV2": {
        BlockLSTMGrad<FloatTensor> op = BlockLSTMGrad.create(seq, a[0], a[1], a[2], a[3], a[4],
            a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16],
            attrB(c, "use_peephole"));
        putSeqGrads(out, op.xGrad(), op.csPrevGrad(), op.hPrevGrad(), op.wGrad(), op.wciGrad(),
            op.wcfGrad(), op.wcoGrad(), op.bGrad());
        break;
      }
      case "BlockGRU": {
        BlockGRU<FloatTensor> op = BlockGRU.create(seq, a[0], a[1], a[2], a[3], a[4], a[5]);
        put(out, "r", op.r(), "u", op.u(), "c", op.c(), "h", op.h());
        break;
      }
      case "BlockGRUGrad": {
        BlockGRUGrad<FloatTensor> op = BlockGRUGrad.create(seq, a[0], a[1], a[2], a[3], a[4],
            a[5], a[6], a[7], a[8], a[9], a[10]);
        put(out, "x_grad", op.xGrad(), "h_prev_grad", op.hPrevGrad(), "w_ru_grad", op.wRuGrad(),
            "w_c_grad", op.wCGrad());
        put(out, "b_ru_grad", op.bRuGrad(), "b_c_grad", op.bCGrad());
        break;
      }
      default: { // gradients.GRUBlockCell, gradients.LSTMBlockCell: through RawOps
        Map<String, Object> attrs = new LinkedHashMap<>();
        for (Map.Entry<String, Double> e : c.attrs.entrySet()) {
          attrs.put(e.getKey(), e.getKey().equals("use_peephole")
              ? (Object) (e.getValue() != 0.0) : (Object) e.getValue().floatValue());
        }
        Tensor[] t = RawOps.run(c.op, seq >= 0 ? Long.valueOf(seq) : null, attrs, a);
        String[] names = RawOps.outputNames(c.op);
        for (int k = 0; k < t.length; ++k) {
          out.put(names[k], t[k]);
        }
      }
    }
    return out;
  }

  private static void put(Map<String, Tensor> m, Object... kv) {
    for (int k = 0; k < kv.length; k += 2) {
      m.put((String) kv[k], (Tensor) kv[k + 1]);
    }
  }

  private static void putGates(Map<String, Tensor> m, Tensor... t) {
    String[] names = {"i", "cs", "f", "o", "ci", "co", "h"};
    for (int k = 0; k < names.length; ++k) {
      m.put(names[k], t[k]);
    }
  }

  private static void putSeqGrads(Map<String, Tensor> m, Tensor... t) {
    String[] names = {"x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad",
        "wco_grad", "b_grad"};
    for (int k = 0; k < names.length; ++k) {
      m.put(names[k], t[k]);
    }
  }

  static Path goldenDir() {
    return Paths.get(System.getProperty("blockrnn.golden", "tests/golden"));
  }

  @Test
  void everyOpMatchesTensorFlow() throws IOException {
    int compared = 0;
    java.util.Set<String> ops = new java.util.TreeSet<>();
    for (String file : new String[] {"gru_cell_v1.bin", "lstm_cell_v1.bin", "block_lstm_v1.bin",
             "block_gru_v1.bin"}) {
      List<Case> cases = load(goldenDir().resolve(file));
      for (int index = 0; index < cases.size(); ++index) {
        Case c = cases.get(index);
        if (c.inputs.get(c.inputs.size() - 1).dtype != 1) {
          continue; // float16: not in the Java binding
        }
        Map<String, Tensor> got = run(c);
        // docs/tolerances.md: cell ops within 1e-5, sequence ops within 1e-4 (float32).
        double tol = c.op.startsWith("Block") ? 1e-4 : 1e-5;
        for (Named want : c.outputs) {
          FloatTensor g = (FloatTensor) got.get(want.name);
          if (g == null) {
            fail(file + " case " + index + " " + c.op + ": no output " + want.name);
          }
          assertTrue(java.util.Arrays.equals(want.shape, g.shape()), want.name + " shape");
          float[] v = g.data();
          for (int k = 0; k < v.length; ++k) {
            double diff = Math.abs(v[k] - want.values[k]);
            if (!(diff <= tol + tol * Math.abs(want.values[k]))) {
              fail(file + " case " + index + " " + c.op + " output " + want.name + "[" + k
                  + "] = " + v[k] + ", TensorFlow " + want.values[k]);
            }
          }
          ++compared;
        }
        ops.add(c.op);
      }
    }
    assertEquals(java.util.Set.of("GRUBlockCell", "GRUBlockCellGrad", "gradients.GRUBlockCell",
        "LSTMBlockCell", "LSTMBlockCellGrad", "gradients.LSTMBlockCell", "BlockLSTM",
        "BlockLSTMGrad", "BlockLSTMV2", "BlockLSTMGradV2", "BlockGRU", "BlockGRUGrad"), ops);
    assertTrue(compared > 300, compared + " outputs compared");
  }
}
