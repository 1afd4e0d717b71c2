// BlockLSTM, BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2 (docs/ops.md): fast path vs reference,
// equality with stepping LSTMBlockCell, V1 ≡ V2 with reordered weights, seq_len_max semantics,
// finite differences in float64, empty shapes, float16, caller memory and validation.
#include <array>
#include <cstring>
#include <functional>

#include "sequence_case.h"

namespace blockrnn {
namespace {

using namespace testing;  // test_util.h

Tensor clone(const Tensor& t) {
  Tensor c(t.dtype(), t.shape());
  if (t.num_bytes() > 0) std::memcpy(c.data(), t.data(), t.num_bytes());
  return c;
}

struct BlockLSTMCase : SequenceSizes {
  Tensor x, cs_prev, h_prev, w, wci, wcf, wco, b;
  BlockLSTMCase(DType dt, std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_,
                std::mt19937_64& rng)
      : SequenceSizes{T_, B_, I_, H_} {
    draw("BlockLSTM", dt, rng, {&x, &cs_prev, &h_prev, &w, &wci, &wcf, &wco, &b});
  }
  BlockLSTMCase(const BlockLSTMCase& o)
      : SequenceSizes(o),
        x(clone(o.x)),
        cs_prev(clone(o.cs_prev)),
        h_prev(clone(o.h_prev)),
        w(clone(o.w)),
        wci(clone(o.wci)),
        wcf(clone(o.wcf)),
        wco(clone(o.wco)),
        b(clone(o.b)) {}
  BlockLSTMInputs inputs(std::int64_t S) const {
    return {S, x, cs_prev, h_prev, w, wci, wcf, wco, b};
  }
  BlockLSTMGradInputs grad_inputs(std::int64_t S, const BlockLSTMResult& f, const Tensor& cs_grad,
                                  const Tensor& h_grad) const {
    return {S,   x,    cs_prev, h_prev, w,    wci,  wcf, wco,     b,
            f.i, f.cs, f.f,     f.o,    f.ci, f.co, f.h, cs_grad, h_grad};
  }
};

// One op configuration: V1 (ICFO, forget_bias) or V2 (IFCO), clip and peepholes.
struct Config {
  bool v2;
  double forget_bias, cell_clip;
  bool peephole;
  std::string name() const {
    return std::string(v2 ? "V2" : "V1") + " fb=" + std::to_string(forget_bias) +
           " clip=" + std::to_string(cell_clip) + " peephole=" + std::to_string(peephole);
  }
};

BlockLSTMResult forward(const BlockLSTMCase& c, std::int64_t S, const Config& k) {
  if (k.v2) return block_lstm_v2(c.inputs(S), {k.cell_clip, k.peephole});
  return block_lstm(c.inputs(S), {k.forget_bias, k.cell_clip, k.peephole});
}

BlockLSTMGradResult backward(const BlockLSTMCase& c, std::int64_t S, const Config& k,
                             const BlockLSTMResult& f, const Tensor& cs_grad,
                             const Tensor& h_grad) {
  const BlockLSTMGradInputs in = c.grad_inputs(S, f, cs_grad, h_grad);
  return k.v2 ? block_lstm_grad_v2(in, k.peephole) : block_lstm_grad(in, k.peephole);
}

const Tensor& output(const BlockLSTMResult& r, int k) {
  const Tensor* o[] = {&r.i, &r.cs, &r.f, &r.o, &r.ci, &r.co, &r.h};
  return *o[k];
}

const Tensor& grad_output(const BlockLSTMGradResult& r, int k) {
  const Tensor* o[] = {&r.x_grad,   &r.cs_prev_grad, &r.h_prev_grad, &r.w_grad,
                       &r.wci_grad, &r.wcf_grad,     &r.wco_grad,    &r.b_grad};
  return *o[k];
}

const char* const kGradNames[] = {"x_grad",   "cs_prev_grad", "h_prev_grad", "w_grad",
                                  "wci_grad", "wcf_grad",     "wco_grad",    "b_grad"};

// docs/ops.md: BlockLSTM is LSTMBlockCell stepped over time (the recurrence carries the clipped
// cs). The clip is active here (cell_clip 0.3 with |cs| up to ~2).
TEST(BlockLSTM, EqualsSteppingTheCell) {
  on_both_paths([] {
    std::mt19937_64 rng(11);
    const std::int64_t T = 5, B = 3, I = 4, H = 6, S = 4;
    const BlockLSTMCase c(DType::kFloat64, T, B, I, H, rng);
    const BlockLSTMAttrs attrs{0.7, 0.3, true};
    const BlockLSTMResult f = block_lstm(c.inputs(S), attrs);
    std::vector<LSTMBlockCellResult> cells;
    for (std::int64_t t = 0; t < S; ++t) {
      const TensorView csp = t == 0 ? TensorView(c.cs_prev) : TensorView(cells.back().cs);
      const TensorView hp = t == 0 ? TensorView(c.h_prev) : TensorView(cells.back().h);
      cells.push_back(
          lstm_block_cell({step<double>(c.x, t), csp, hp, c.w, c.wci, c.wcf, c.wco, c.b},
                          {attrs.forget_bias, attrs.cell_clip, attrs.use_peephole}));
      const LSTMBlockCellResult& cell = cells.back();
      const Tensor* want[] = {&cell.i, &cell.cs, &cell.f, &cell.o, &cell.ci, &cell.co, &cell.h};
      for (int o = 0; o < 7; ++o) {
        for (std::int64_t e = 0; e < B * H; ++e) {
          EXPECT_NEAR(output(f, o).data_as<double>()[t * B * H + e], want[o]->data_as<double>()[e],
                      1e-13)
              << "output " << o << " step " << t;
        }
      }
    }
    for (int o = 0; o < 7; ++o) EXPECT_TRUE(all_zero(output(f, o), S * B * H));
  });
}

// ICFO → IFCO: swap column blocks 1 and 2 (docs/ops.md). Applies to w, b, w_grad and b_grad.
Tensor icfo_to_ifco(const Tensor& t, std::int64_t H) {
  Tensor out(t.dtype(), t.shape());
  const std::int64_t rows = t.shape().rank() == 2 ? t.shape()[0] : 1, G = 4 * H;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t k = 0; k < G; ++k) {
      const std::int64_t block = k / H, j = k % H;
      const std::int64_t src = (block == 1 ? 2 : block == 2 ? 1 : block) * H + j;
      testing::set(out, r * G + k, testing::get(t, r * G + src));
    }
  }
  return out;
}

// docs/ops.md item 4: with forget_bias 0, V1 and V2 are the same function of reordered weights;
// their gradients agree after reordering (T > 1, where TensorFlow's autodiff of V2 is wrong).
TEST(BlockLSTM, V1EqualsV2WithReorderedWeights) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    for (bool peephole : {false, true}) {
      std::mt19937_64 rng(21 + peephole);
      const std::int64_t T = 6, B = 3, I = 5, H = 7, S = 5;
      const BlockLSTMCase v1(DType::kFloat64, T, B, I, H, rng);
      BlockLSTMCase v2 = v1;
      v2.w = icfo_to_ifco(v1.w, H);
      v2.b = icfo_to_ifco(v1.b, H);
      const double clip = peephole ? 0.5 : 0.0;
      const BlockLSTMResult f1 = block_lstm(v1.inputs(S), {0.0, clip, peephole});
      const BlockLSTMResult f2 = block_lstm_v2(v2.inputs(S), {clip, peephole});
      for (int o = 0; o < 7; ++o)
        EXPECT_TRUE(all_close(output(f1, o), output(f2, o), 1e-14, 1e-14));
      const Tensor cs_grad = random_tensor(DType::kFloat64, {T, B, H}, rng),
                   h_grad = random_tensor(DType::kFloat64, {T, B, H}, rng);
      const BlockLSTMGradResult g1 =
          block_lstm_grad(v1.grad_inputs(S, f1, cs_grad, h_grad), peephole);
      const BlockLSTMGradResult g2 =
          block_lstm_grad_v2(v2.grad_inputs(S, f2, cs_grad, h_grad), peephole);
      for (int o : {0, 1, 2, 4, 5, 6}) {
        EXPECT_TRUE(all_close(grad_output(g1, o), grad_output(g2, o), 1e-12, 1e-12))
            << kGradNames[o];
      }
      EXPECT_TRUE(all_close(icfo_to_ifco(g1.w_grad, H), g2.w_grad, 1e-12, 1e-12));
      EXPECT_TRUE(all_close(icfo_to_ifco(g1.b_grad, H), g2.b_grad, 1e-12, 1e-12));
    }
  }
}

TEST(BlockLSTM, StepsPastSeqLenMaxAreZeroAndIgnored) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(3);
    const std::int64_t T = 6, B = 2, I = 3, H = 5;
    const BlockLSTMCase c(DType::kFloat32, T, B, I, H, rng);
    for (std::int64_t S : {0, 1, 5}) {
      for (bool v2 : {false, true}) {
        const Config k{v2, v2 ? 0.0 : 1.0, v2 ? 0.0 : 3.0, true};
        const BlockLSTMResult f = forward(c, S, k);
        for (int o = 0; o < 7; ++o) EXPECT_TRUE(all_zero(output(f, o), S * B * H));
        Tensor cs_grad = random_tensor(DType::kFloat32, {T, B, H}, rng),
               h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
        const BlockLSTMGradResult g1 = backward(c, S, k, f, cs_grad, h_grad);
        for (std::int64_t e = S * B * H; e < T * B * H; ++e) {
          cs_grad.data_as<float>()[e] = 1e3f;
          h_grad.data_as<float>()[e] = -1e3f;
        }
        const BlockLSTMGradResult g2 = backward(c, S, k, f, cs_grad, h_grad);
        for (int o = 0; o < 8; ++o) {
          EXPECT_TRUE(all_close(grad_output(g1, o), grad_output(g2, o), 0, 0)) << kGradNames[o];
        }
        EXPECT_TRUE(all_zero(g1.x_grad, S * B * I));
        if (S == 0) {
          for (int o = 0; o < 8; ++o) EXPECT_TRUE(all_zero(grad_output(g1, o))) << kGradNames[o];
        }
      }
    }
  }
}

// The typed API's defaults: seq_len_max unset runs all T steps; without peepholes the
// peephole vectors may be omitted. The name-based run_op keeps TensorFlow's contract.
TEST(BlockLSTM, TypedDefaultsSeqLenMaxIsT) {
  std::mt19937_64 rng(12);
  const std::int64_t T = 4, B = 2, I = 3, H = 5;
  const BlockLSTMCase c(DType::kFloat32, T, B, I, H, rng);
  const Tensor cs_grad = random_tensor(DType::kFloat32, {T, B, H}, rng),
               h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
  for (bool v2 : {false, true}) {
    SCOPED_TRACE(v2 ? "V2" : "V1");
    const Config k{v2, v2 ? 0.0 : 1.0, v2 ? 0.0 : 3.0, true};
    BlockLSTMInputs in = c.inputs(T);
    in.seq_len_max.reset();
    const BlockLSTMResult unset = v2 ? block_lstm_v2(in, {k.cell_clip, true})
                                     : block_lstm(in, {k.forget_bias, k.cell_clip, true});
    const BlockLSTMResult all = forward(c, T, k);
    for (int o = 0; o < 7; ++o) {
      EXPECT_TRUE(all_close(output(unset, o), output(all, o), 0, 0)) << o;
      EXPECT_FALSE(all_zero(output(unset, o), (T - 1) * B * H)) << "last step ran, output " << o;
    }
    BlockLSTMGradInputs gin = c.grad_inputs(T, all, cs_grad, h_grad);
    gin.seq_len_max = std::nullopt;
    const BlockLSTMGradResult g_unset =
        v2 ? block_lstm_grad_v2(gin, true) : block_lstm_grad(gin, true);
    const BlockLSTMGradResult g_all = backward(c, T, k, all, cs_grad, h_grad);
    for (int o = 0; o < 8; ++o) {
      EXPECT_TRUE(all_close(grad_output(g_unset, o), grad_output(g_all, o), 0, 0)) << kGradNames[o];
    }
    // An explicit 0 still means no step, as in TensorFlow.
    in.seq_len_max = 0;
    const BlockLSTMResult none = v2 ? block_lstm_v2(in) : block_lstm(in);
    for (int o = 0; o < 7; ++o) EXPECT_TRUE(all_zero(output(none, o))) << o;
  }
  // The unset default is T of x, so an x of the wrong rank is still reported as x.
  BlockLSTMInputs in = c.inputs(T);
  in.seq_len_max.reset();
  const Tensor x2 = random_tensor(DType::kFloat32, {B, I}, rng);
  in.x = x2;
  expect_invalid([&] { block_lstm(in); }, "BlockLSTM: x must be rank 3, got rank 2");
  // The name-based interface has no default: seq_len_max is an input like any other.
  const std::vector<TensorView> ins = {TensorView(), c.x,   c.cs_prev, c.h_prev, c.w,
                                       c.wci,        c.wcf, c.wco,     c.b};
  expect_invalid([&] { run_op("BlockLSTM", ins); },
                 "BlockLSTM: seq_len_max has 1 elements but no data (null pointer)");
  expect_invalid([&] { run_op("BlockLSTM", std::span(ins).subspan(1)); },
                 "BlockLSTM: expected 9 inputs, got 8");
}

TEST(BlockLSTM, TypedDefaultsPeepholesOptionalWithoutUsePeephole) {
  std::mt19937_64 rng(13);
  const std::int64_t T = 3, B = 2, I = 3, H = 5;
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const BlockLSTMCase c(dt, T, B, I, H, rng);
    const Tensor zeros(dt, {H}), empty(dt, {0});
    const Tensor cs_grad = random_tensor(dt, {T, B, H}, rng),
                 h_grad = random_tensor(dt, {T, B, H}, rng);
    for (bool v2 : {false, true}) {
      SCOPED_TRACE(v2 ? "V2" : "V1");
      auto fwd = [&](const BlockLSTMInputs& in) { return v2 ? block_lstm_v2(in) : block_lstm(in); };
      auto bwd = [&](const BlockLSTMGradInputs& in) {
        return v2 ? block_lstm_grad_v2(in, false) : block_lstm_grad(in, false);
      };
      const BlockLSTMResult want =
          fwd({T, c.x, c.cs_prev, c.h_prev, c.w, zeros, zeros, zeros, c.b});
      const BlockLSTMGradResult want_g = bwd(c.grad_inputs(T, want, cs_grad, h_grad));
      // Omitted: default views, an empty [0], a null pointer with shape [H].
      const TensorView omitted[] = {TensorView(), empty, TensorView(nullptr, dt, Shape{H})};
      for (const TensorView& v : omitted) {
        SCOPED_TRACE("omitted " + v.shape.to_string());
        BlockLSTMInputs in = c.inputs(T);
        in.wci = in.wcf = in.wco = v;
        const BlockLSTMResult got = fwd(in);
        for (int o = 0; o < 7; ++o) EXPECT_TRUE(all_close(output(got, o), output(want, o), 0, 0));
        BlockLSTMGradInputs gin = c.grad_inputs(T, want, cs_grad, h_grad);
        gin.wcf = v;  // one at a time is fine too
        const BlockLSTMGradResult g = bwd(gin);
        for (int o = 0; o < 8; ++o) {
          EXPECT_TRUE(all_close(grad_output(g, o), grad_output(want_g, o), 0, 0)) << kGradNames[o];
        }
        EXPECT_EQ(g.wcf_grad.shape(), (Shape{H}));
        EXPECT_TRUE(all_zero(g.wcf_grad));
      }
    }
  }
  const DType f = DType::kFloat32;
  const BlockLSTMCase c(f, T, B, I, H, rng);
  // With use_peephole they are required, and the error names the missing one.
  for (const char* op : {"BlockLSTM", "BlockLSTMV2"}) {
    const std::string p = std::string(op) + ": ";
    const bool v2 = std::string(op) == "BlockLSTMV2";
    BlockLSTMInputs in = c.inputs(T);
    in.wcf = TensorView();
    expect_invalid(
        [&] {
          v2 ? (void)block_lstm_v2(in, {0.0, true}) : (void)block_lstm(in, {1.0, 3.0, true});
        },
        p + "wcf is missing (no data): use_peephole is true, so the forget gate's "
            "peephole weights [cell_size] are required");
    in = c.inputs(T);
    in.wco = TensorView(nullptr, f, Shape{H});
    expect_invalid(
        [&] {
          v2 ? (void)block_lstm_v2(in, {0.0, true}) : (void)block_lstm(in, {1.0, 3.0, true});
        },
        p + "wco is missing (no data)");
    // A present peephole vector is still checked without use_peephole (TensorFlow requires
    // [H]), and an omitted one does not hide an error of w.
    in = c.inputs(T);
    const Tensor h3 = random_tensor(f, {3}, rng), w_bad = random_tensor(f, {8, 19}, rng);
    in.wci = h3;
    expect_invalid([&] { v2 ? (void)block_lstm_v2(in) : (void)block_lstm(in); },
                   p + "wci must have shape [5] (cell_size), got [3]");
    in = c.inputs(T);
    in.wci = in.wcf = in.wco = TensorView();
    in.w = w_bad;
    expect_invalid([&] { v2 ? (void)block_lstm_v2(in) : (void)block_lstm(in); },
                   p + "w must have shape [8, 20]");
  }
  const BlockLSTMResult fwd = block_lstm(c.inputs(T));
  const Tensor g = random_tensor(f, {T, B, H}, rng);
  for (const char* op : {"BlockLSTMGrad", "BlockLSTMGradV2"}) {
    BlockLSTMGradInputs gin = c.grad_inputs(T, fwd, g, g);
    gin.wci = TensorView();
    expect_invalid(
        [&] {
          std::string(op) == "BlockLSTMGrad" ? (void)block_lstm_grad(gin, true)
                                             : (void)block_lstm_grad_v2(gin, true);
        },
        std::string(op) + ": wci is missing (no data): use_peephole is true");
  }
  // The name-based interface keeps TensorFlow's contract: the peephole vectors are required.
  const Tensor s = testing::scalar_int64(T);
  const std::vector<TensorView> ins = {s,     c.x,   c.cs_prev, c.h_prev, c.w, TensorView(),
                                       c.wcf, c.wco, c.b};
  expect_invalid([&] { run_op("BlockLSTM", ins); },
                 "BlockLSTM: wci has 1 elements but no data (null pointer)");
}

// A cancelled call names its own op: the V2 ops (IFCO) share the V1 kernels but not their name.
TEST(BlockLSTM, CancelledCallNamesItsOp) {
  const int saved = get_num_threads();
  std::mt19937_64 rng(12);
  // ~8.5 M multiply-adds per step (B·(I+H)·4H): the fast path's 1000 steps take ~100 ms at two
  // threads, several times the 20 ms poll interval (300 steps at B = 4 finished inside it).
  const std::int64_t T = 1000, B = 8, I = 8, H = 512;
  const BlockLSTMCase c(DType::kFloat32, T, B, I, H, rng);
  BlockLSTMResult f1, f2;
  {
    testing::ReferenceMode fast(false);
    f1 = block_lstm(c.inputs(T));
    f2 = block_lstm_v2(c.inputs(T));
  }
  const Tensor g = random_tensor(DType::kFloat32, {T, B, H}, rng);
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    set_num_threads(2);
    set_cancel_check([](void*) { return true; }, nullptr);
    testing::expect_cancelled([&] { block_lstm(c.inputs(T)); }, "BlockLSTM");
    testing::expect_cancelled([&] { block_lstm_v2(c.inputs(T)); }, "BlockLSTMV2");
    testing::expect_cancelled([&] { block_lstm_grad(c.grad_inputs(T, f1, g, g), false); },
                              "BlockLSTMGrad");
    testing::expect_cancelled([&] { block_lstm_grad_v2(c.grad_inputs(T, f2, g, g), false); },
                              "BlockLSTMGradV2");
    set_cancel_check(nullptr, nullptr);
  }
  set_num_threads(saved);
}

TEST(BlockLSTM, Validation) {
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const std::int64_t T = 5, B = 4, I = 3, H = 16;
  const BlockLSTMCase c(f, T, B, I, H, rng);
  const BlockLSTMInputs ok = c.inputs(T);
  const Tensor rank2 = random_tensor(f, {4, 3}, rng), rank1 = random_tensor(f, {4}, rng);
  const char* names[] = {"x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"};
  auto fwd_with = [&](const char* op, int k, const TensorView& v) {
    BlockLSTMInputs in = ok;
    TensorView* slots[] = {&in.x, &in.cs_prev, &in.h_prev, &in.w, &in.wci, &in.wcf, &in.wco, &in.b};
    *slots[k] = v;
    if (std::string(op) == "BlockLSTM") {
      block_lstm(in);
    } else {
      block_lstm_v2(in);
    }
  };
  for (const char* op : {"BlockLSTM", "BlockLSTMV2"}) {
    const std::string p = std::string(op) + ": ";
    expect_invalid([&] { fwd_with(op, 0, rank2); },
                   p + "x must be rank 3, got rank 2 (shape [4, 3])");
    for (int k : {1, 2, 3}) {
      expect_invalid([&] { fwd_with(op, k, rank1); }, p + names[k] + " must be rank 2");
    }
    for (int k : {4, 5, 6, 7}) {
      expect_invalid([&] { fwd_with(op, k, rank2); }, p + names[k] + " must be rank 1");
    }
    // H comes from cs_prev; h_prev must match it.
    const Tensor bh_bad_b = random_tensor(f, {5, 16}, rng),
                 bh_bad_h = random_tensor(f, {4, 15}, rng);
    expect_invalid([&] { fwd_with(op, 1, bh_bad_b); },
                   p + "cs_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]");
    expect_invalid([&] { fwd_with(op, 2, bh_bad_h); },
                   p + "h_prev must have shape [4, 16] (batch_size, cell_size), got [4, 15]");
    // w's rows must be input_size + cell_size with input_size from x: when only the rows are
    // off, x or w may be the wrong one and the message names both, x first.
    const Tensor w_bad = random_tensor(f, {18, 64}, rng), x_wide = random_tensor(f, {T, B, 7}, rng),
                 w_cols = random_tensor(f, {19, 60}, rng),
                 w_short = random_tensor(f, {15, 64}, rng);
    expect_invalid([&] { fwd_with(op, 3, w_bad); },
                   p + "x and w disagree on input_size: x has input_size 3 (its last dimension), "
                       "but w's 18 rows are input_size + cell_size for input_size 2 (cell_size "
                       "16): either x must be [5, 4, 2], or w must have shape [19, 64] "
                       "(input_size + cell_size, 4 * cell_size), got [18, 64]");
    expect_invalid([&] { fwd_with(op, 0, x_wide); },
                   p + "x and w disagree on input_size: x has input_size 7 (its last dimension), "
                       "but w's 19 rows are input_size + cell_size for input_size 3 (cell_size "
                       "16): either x must be [5, 4, 3], or w must have shape [23, 64]");
    // Wrong columns, or fewer rows than cell_size: w alone is wrong.
    expect_invalid([&] { fwd_with(op, 3, w_cols); },
                   p + "w must have shape [19, 64] (input_size + cell_size, 4 * cell_size), got "
                       "[19, 60]");
    expect_invalid([&] { fwd_with(op, 3, w_short); },
                   p + "w must have shape [19, 64] (input_size + cell_size, 4 * cell_size), got "
                       "[15, 64]");
    const Tensor h3 = random_tensor(f, {3}, rng);
    for (int k : {4, 5, 6}) {
      expect_invalid([&] { fwd_with(op, k, h3); },
                     p + names[k] + " must have shape [16] (cell_size), got [3]");
    }
    const Tensor b_long = random_tensor(f, {65}, rng);
    expect_invalid([&] { fwd_with(op, 7, b_long); },
                   p + "b must have shape [64] (4 * cell_size), got [65]");
    // seq_len_max: range through the typed call, scalar and int64 through the generic interface.
    expect_seq_len_max_checked(
        op, T,
        [&](std::int64_t S) {
          BlockLSTMInputs in = ok;
          in.seq_len_max = S;
          std::string(op) == "BlockLSTM" ? (void)block_lstm(in) : (void)block_lstm_v2(in);
        },
        {TensorView(), c.x, c.cs_prev, c.h_prev, c.w, c.wci, c.wcf, c.wco, c.b});
    const Tensor wco64 = random_tensor(DType::kFloat64, {H}, rng);
    expect_invalid([&] { fwd_with(op, 6, wco64); },
                   p + "wco must have the dtype of x (float32), got float64");
  }
  // Attrs: V1's forget_bias on V2 is unknown; use_peephole is required on the grads.
  const Tensor s_ok = testing::scalar_int64(T);
  std::vector<TensorView> fins = {s_ok, c.x, c.cs_prev, c.h_prev, c.w, c.wci, c.wcf, c.wco, c.b};
  expect_invalid(
      [&] {
        run_op("BlockLSTMV2", fins, {{"forget_bias", 1.0}});
      },
      "BlockLSTMV2: unknown attr 'forget_bias'");

  // Grads.
  const BlockLSTMResult fwd = block_lstm(ok);
  const Tensor cs_grad = random_tensor(f, {T, B, H}, rng),
               h_grad = random_tensor(f, {T, B, H}, rng);
  const BlockLSTMGradInputs gok = c.grad_inputs(T, fwd, cs_grad, h_grad);
  EXPECT_NO_THROW(block_lstm_grad(gok, true));
  const char* step_names[] = {"i", "cs", "f", "o", "ci", "co", "h", "cs_grad", "h_grad"};
  auto grad_with = [&](const char* op, std::function<void(BlockLSTMGradInputs&)> edit) {
    BlockLSTMGradInputs in = gok;
    edit(in);
    if (std::string(op) == "BlockLSTMGrad") {
      block_lstm_grad(in, true);
    } else {
      block_lstm_grad_v2(in, false);
    }
  };
  // Caller-provided outputs are checked like the inputs.
  {
    const BlockLSTMGradResult want = block_lstm_grad(gok, false);
    std::vector<Tensor> g;
    for (int o = 0; o < 8; ++o) g.push_back(Tensor(f, grad_output(want, o).shape()));
    Tensor small(f, {I + H, 4 * H - 1});
    const BlockLSTMGradOutputs gv{g[0].mutable_view(),  g[1].mutable_view(), g[2].mutable_view(),
                                  small.mutable_view(), g[4].mutable_view(), g[5].mutable_view(),
                                  g[6].mutable_view(),  g[7].mutable_view()};
    expect_invalid([&] { block_lstm_grad(gok, gv, false); },
                   "BlockLSTMGrad: output w_grad must have shape [19, 64], got [19, 63]");
  }
  for (const char* op : {"BlockLSTMGrad", "BlockLSTMGradV2"}) {
    const std::string p = std::string(op) + ": ";
    expect_step_inputs_checked(
        op, {step_names, step_names + 9}, f, T, B, H, [&](std::size_t k, const Tensor& v) {
          grad_with(op, [&](BlockLSTMGradInputs& in) {
            TensorView* s[] = {&in.i,  &in.cs, &in.f,       &in.o,     &in.ci,
                               &in.co, &in.h,  &in.cs_grad, &in.h_grad};
            *s[k] = v;
          });
        });
    // H comes from w: a positive multiple of 4 columns; then I + H rows.
    const Tensor w63 = random_tensor(f, {19, 63}, rng), w0 = random_tensor(f, {3, 0}, rng),
                 w_rows = random_tensor(f, {20, 64}, rng);
    expect_invalid(
        [&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.w = w63; }); },
        p + "w must have a positive multiple of 4 columns (4 * cell_size), got shape [19, 63]");
    expect_invalid([&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.w = w0; }); },
                   p + "w must have a positive multiple of 4 columns");
    expect_invalid([&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.w = w_rows; }); },
                   p + "x and w disagree on input_size: x has input_size 3 (its last dimension), "
                       "but w's 20 rows are input_size + cell_size for input_size 4 (cell_size "
                       "16): either x must be [5, 4, 4], or w must have shape [19, 64]");
    // The checks TensorFlow misses (docs/ops.md).
    const Tensor bh_bad = random_tensor(f, {B, H + 1}, rng), h3 = random_tensor(f, {3}, rng),
                 b_long = random_tensor(f, {4 * H + 3}, rng);
    expect_invalid([&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.cs_prev = bh_bad; }); },
                   p + "cs_prev must have shape [4, 16] (batch_size, cell_size), got [4, 17]");
    expect_invalid([&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.h_prev = bh_bad; }); },
                   p + "h_prev must have shape [4, 16]");
    expect_invalid([&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.wcf = h3; }); },
                   p + "wcf must have shape [16] (cell_size), got [3]");
    expect_invalid([&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.b = b_long; }); },
                   p + "b must have shape [64] (4 * cell_size), got [67]");
    expect_seq_len_max_checked(op, T, [&](std::int64_t S) {
      grad_with(op, [&](BlockLSTMGradInputs& in) { in.seq_len_max = S; });
    });
    expect_invalid([&] { grad_with(op, [&](BlockLSTMGradInputs& in) { in.x = rank2; }); },
                   p + "x must be rank 3");
    std::vector<TensorView> gins = {s_ok,  c.x,    c.cs_prev, c.h_prev, c.w,     c.wci,
                                    c.wcf, c.wco,  c.b,       fwd.i,    fwd.cs,  fwd.f,
                                    fwd.o, fwd.ci, fwd.co,    fwd.h,    cs_grad, h_grad};
    expect_invalid([&] { run_op(op, gins); }, p + "attr use_peephole is required");
  }
}

}  // namespace
}  // namespace blockrnn
