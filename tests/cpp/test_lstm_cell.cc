// LSTM block cell: fast path vs reference over shapes × attrs, the fused element-wise kernels
// shared with the sequence ops (both layouts), TensorFlow's golden two-layer values, finite
// differences in float64 of all eight gradients, the straight-through clip, validation, and
// float16. Shape letters: B batch, I input size, H cell size.
#include <array>
#include <cmath>

#include "cpu/cell_plan.h"
#include "cpu/lstm_pointwise.h"
#include "cpu/sequence_common.h"
#include "kernel/lstm_cell.h"
#include "test_util.h"

namespace blockrnn {
namespace {

using namespace testing;  // test_util.h

struct LSTMCase {
  Tensor x, cs_prev, h_prev, w, wci, wcf, wco, b;
  // cs_scale > 1 makes |cs| exceed a small cell_clip.
  LSTMCase(DType dt, std::int64_t B, std::int64_t I, std::int64_t H, std::mt19937_64& rng,
           double cs_scale = 1.0)
      : x(random_tensor(dt, {B, I}, rng)),
        cs_prev(random_tensor(dt, {B, H}, rng, -cs_scale, cs_scale)),
        h_prev(random_tensor(dt, {B, H}, rng)),
        w(random_tensor(dt, {I + H, 4 * H}, rng, -1 / std::sqrt(double(I + H)),
                        1 / std::sqrt(double(I + H)))),
        wci(random_tensor(dt, {H}, rng)),
        wcf(random_tensor(dt, {H}, rng)),
        wco(random_tensor(dt, {H}, rng)),
        b(random_tensor(dt, {4 * H}, rng)) {}
  LSTMBlockCellInputs inputs() const { return {x, cs_prev, h_prev, w, wci, wcf, wco, b}; }
  LSTMBlockCellGradInputs grad_inputs(const LSTMBlockCellResult& f, const Tensor& cs_grad,
                                      const Tensor& h_grad) const {
    return {x,   cs_prev, h_prev, w,   wci,  wcf,  wco,     b,
            f.i, f.cs,    f.f,    f.o, f.ci, f.co, cs_grad, h_grad};
  }
};

// The attr combinations of the conformance suite: defaults (clip at 3), peepholes, a forget
// bias other than 1, an active clip, and the clip disabled by −1 and by 0.
struct AttrCase {
  const char* name;
  LSTMBlockCellAttrs attrs;
  double cs_scale;
};
const std::array<AttrCase, 6> kAttrCases = {{
    {"defaults", {}, 1.0},
    {"peephole", {1.0, 3.0, true}, 1.0},
    {"forget_bias_0.3", {0.3, 3.0, false}, 1.0},
    {"clip_active_peephole", {1.0, 0.5, true}, 4.0},
    {"clip_off_negative", {1.0, -1.0, true}, 4.0},
    {"clip_off_zero", {-0.5, 0.0, false}, 4.0},
}};

template <typename Fn>
auto in_mode(bool reference, Fn&& fn) {
  testing::ReferenceMode mode(reference);
  return fn();
}

// docs/ops.md: TensorFlow's golden values. Two stacked LSTMBlockCell layers of size 2, every
// weight 0.5, bias 0, x = [[1, 1]], every state 0.1, forget_bias 1, no clip, no peepholes.
TEST(LSTMBlockCell, TensorFlowGoldenTwoLayerValues) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      auto fill = [dt](Shape s, double v) {
        Tensor t(dt, s);
        for (std::int64_t e = 0; e < t.num_elements(); ++e) testing::set(t, e, v);
        return t;
      };
      const Tensor x = fill({1, 2}, 1.0), state = fill({1, 2}, 0.1), w = fill({4, 8}, 0.5),
                   b = fill({8}, 0.0), peep = fill({2}, 0.0);
      const LSTMBlockCellAttrs attrs{1.0, -1.0, false};
      const LSTMBlockCellResult l1 =
          lstm_block_cell({x, state, state, w, peep, peep, peep, b}, attrs);
      const LSTMBlockCellResult l2 =
          lstm_block_cell({l1.h, state, state, w, peep, peep, peep, b}, attrs);
      // TensorFlow's float32 values, exact to about 1e-7.
      for (std::int64_t e = 0; e < 2; ++e) {
        EXPECT_NEAR(testing::get(l1.cs, e), 0.68967271, 2e-7);
        EXPECT_NEAR(testing::get(l1.h, e), 0.44848421, 2e-7);
        EXPECT_NEAR(testing::get(l2.cs, e), 0.39897051, 2e-7);
        EXPECT_NEAR(testing::get(l2.h, e), 0.24024698, 2e-7);
      }
    }
  }
}

// With the clip active TensorFlow does not differentiate it (docs/ops.md): dcs passes straight
// through. With L = Σ cs_grad⊙cs and no peepholes, the true ∂L/∂cs_prev is 0 where the clip
// holds cs at ±cell_clip and cs_grad⊙f elsewhere; the op returns cs_grad⊙f everywhere.
TEST(LSTMBlockCell, ClipIsStraightThrough) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(99);
    const std::int64_t B = 4, I = 3, H = 6;
    const DType f64 = DType::kFloat64;
    LSTMCase c(f64, B, I, H, rng, 3.0);
    const LSTMBlockCellAttrs attrs{1.0, 0.8, false};
    const Tensor cs_grad = random_tensor(f64, {B, H}, rng), h_grad(f64, {B, H});  // h_grad = 0
    const LSTMBlockCellResult fwd = lstm_block_cell(c.inputs(), attrs);
    const LSTMBlockCellBackwardResult g =
        lstm_block_cell_backward(c.grad_inputs(fwd, cs_grad, h_grad), attrs);
    int clipped = 0, free = 0;
    for (std::int64_t e = 0; e < B * H; ++e) {
      const double cs = fwd.cs.data_as<double>()[e];
      const double straight = cs_grad.data_as<double>()[e] * fwd.f.data_as<double>()[e];
      EXPECT_NEAR(g.cs_prev.data_as<double>()[e], straight, 1e-15);
      double* v = c.cs_prev.data_as<double>() + e;
      const double saved = *v, eps = 1e-7;
      auto cs_at = [&](double value) {
        *v = value;
        return lstm_block_cell(c.inputs(), attrs).cs.data_as<double>()[e];
      };
      const double numeric =
          cs_grad.data_as<double>()[e] * (cs_at(saved + eps) - cs_at(saved - eps)) / (2 * eps);
      *v = saved;
      if (std::abs(cs) == 0.8) {
        ++clipped;
        EXPECT_EQ(numeric, 0.0);  // the true derivative through the clip
        EXPECT_NE(g.cs_prev.data_as<double>()[e], 0.0);
      } else {
        ++free;
        EXPECT_NEAR(numeric, straight, 1e-8);
      }
    }
    EXPECT_GT(clipped, 0);  // the inputs do exercise the clip …
    EXPECT_GT(free, 0);     // … and leave some elements inside it
  }
}

// The cell op is ICFO; the kernels also serve IFCO (BlockLSTMV2). Swapping column blocks 1 and 2
// of w and b turns one into the other (docs/ops.md), for the reference and the fast path.
TEST(LSTMKernels, IFCOIsICFOWithBlocksSwapped) {
  std::mt19937_64 rng(11);
  const std::int64_t B = 5, I = 7, H = 9, G = 4 * H;
  const LSTMCase c(DType::kFloat64, B, I, H, rng, 4.0);
  auto swap_blocks = [&](const Tensor& t, std::int64_t rows) {
    Tensor s(DType::kFloat64, t.shape());
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t k = 0; k < G; ++k) {
        const std::int64_t blk = k / H, j = k % H;
        const std::int64_t src = (blk == 1 ? 2 : blk == 2 ? 1 : blk) * H + j;
        s.data_as<double>()[r * G + k] = t.data_as<double>()[r * G + src];
      }
    }
    return s;
  };
  const Tensor w2 = swap_blocks(c.w, I + H), b2 = swap_blocks(c.b, 1);
  const LSTMDims d{B, I, H};
  for (bool peep : {false, true}) {
    std::array<Tensor, 7> o1, o2, o3;
    for (int k = 0; k < 7; ++k) {
      o1[k] = poisoned(DType::kFloat64, {B, H});
      o2[k] = poisoned(DType::kFloat64, {B, H});
      o3[k] = poisoned(DType::kFloat64, {B, H});
    }
    auto args = [&](std::array<Tensor, 7>& o, const Tensor& w, const Tensor& b, LSTMLayout l) {
      LSTMCellFwdArgs<double> a{
          c.x.data_as<double>(),   c.cs_prev.data_as<double>(), c.h_prev.data_as<double>(),
          w.data_as<double>(),     c.wci.data_as<double>(),     c.wcf.data_as<double>(),
          c.wco.data_as<double>(), b.data_as<double>(),         o[0].data_as<double>(),
          o[1].data_as<double>(),  o[2].data_as<double>(),      o[3].data_as<double>(),
          o[4].data_as<double>(),  o[5].data_as<double>(),      o[6].data_as<double>()};
      a.forget_bias = 0.7;
      a.cell_clip = 1.2;
      a.use_peephole = peep;
      a.layout = l;
      return a;
    };
    ref::lstm_cell_fwd<double>(d, args(o1, c.w, c.b, LSTMLayout::kICFO));
    ref::lstm_cell_fwd<double>(d, args(o2, w2, b2, LSTMLayout::kIFCO));
    cpu::lstm_cell_fwd<double>(d, args(o3, w2, b2, LSTMLayout::kIFCO));
    for (int k = 0; k < 7; ++k) {
      EXPECT_TRUE(all_close(o2[k], o1[k], 0, 0)) << k;  // same sums, same order
      EXPECT_TRUE(all_close(o3[k], o1[k], 1e-13, 1e-13)) << k;
    }
    // Backward: the IFCO gate gradient is the ICFO one with blocks 1 and 2 swapped.
    const Tensor cs_grad = random_tensor(DType::kFloat64, {B, H}, rng),
                 h_grad = random_tensor(DType::kFloat64, {B, H}, rng);
    struct Out {
      Tensor cpg, dg, wci, wcf, wco, xg, hg, wg, bg;
    };
    auto run_bwd = [&](bool fast, const Tensor& w, LSTMLayout l) {
      Out r{poisoned(DType::kFloat64, {B, H}), poisoned(DType::kFloat64, {B, G}),
            poisoned(DType::kFloat64, {H}),    poisoned(DType::kFloat64, {H}),
            poisoned(DType::kFloat64, {H}),    poisoned(DType::kFloat64, {B, I}),
            poisoned(DType::kFloat64, {B, H}), poisoned(DType::kFloat64, {I + H, G}),
            poisoned(DType::kFloat64, {G})};
      LSTMCellBwdArgs<double> a{};
      a.x = c.x.data_as<double>();
      a.cs_prev = c.cs_prev.data_as<double>();
      a.h_prev = c.h_prev.data_as<double>();
      a.w = w.data_as<double>();
      a.wci = c.wci.data_as<double>();
      a.wcf = c.wcf.data_as<double>();
      a.wco = c.wco.data_as<double>();
      a.i = o1[0].data_as<double>();
      a.cs = o1[1].data_as<double>();
      a.f = o1[2].data_as<double>();
      a.o = o1[3].data_as<double>();
      a.ci = o1[4].data_as<double>();
      a.co = o1[5].data_as<double>();
      a.d_cs = cs_grad.data_as<double>();
      a.d_h = h_grad.data_as<double>();
      a.d_cs_prev = r.cpg.data_as<double>();
      a.d_gates = r.dg.data_as<double>();
      a.d_wci = r.wci.data_as<double>();
      a.d_wcf = r.wcf.data_as<double>();
      a.d_wco = r.wco.data_as<double>();
      a.d_x = r.xg.data_as<double>();
      a.d_h_prev = r.hg.data_as<double>();
      a.d_w = r.wg.data_as<double>();
      a.d_b = r.bg.data_as<double>();
      a.use_peephole = peep;
      a.layout = l;
      a.full = true;
      if (fast) {
        cpu::lstm_cell_bwd<double>(d, a);
      } else {
        ref::lstm_cell_bwd<double>(d, a);
      }
      return r;
    };
    const Out r1 = run_bwd(false, c.w, LSTMLayout::kICFO);
    for (bool fast : {false, true}) {
      const Out r2 = run_bwd(fast, w2, LSTMLayout::kIFCO);
      const double tol = fast ? 1e-13 : 0;
      EXPECT_TRUE(all_close(r2.dg, swap_blocks(r1.dg, B), 0, 0));
      EXPECT_TRUE(all_close(r2.cpg, r1.cpg, 0, 0));
      EXPECT_TRUE(all_close(r2.wci, r1.wci, tol, tol));
      EXPECT_TRUE(all_close(r2.wcf, r1.wcf, tol, tol));
      EXPECT_TRUE(all_close(r2.wco, r1.wco, tol, tol));
      EXPECT_TRUE(all_close(r2.xg, r1.xg, 1e-13, 1e-13));
      EXPECT_TRUE(all_close(r2.hg, r1.hg, 1e-13, 1e-13));
      EXPECT_TRUE(all_close(r2.wg, swap_blocks(r1.wg, I + H), 1e-13, 1e-13));
      EXPECT_TRUE(all_close(r2.bg, swap_blocks(r1.bg, 1), 1e-13, 1e-13));
    }
  }
}

// A backward given a plan that holds no transposed packs (a cell layer packs them at its first
// backward only) multiplies by w's rows instead: every output has the bits of the backward
// without a plan and of one whose plan holds the transposes.
TEST(LSTMKernels, PlanWithoutTransposesGivesTheBitsOfOneWithThem) {
  std::mt19937_64 rng(13);
  const std::int64_t B = 5, I = 7, H = 9, G = 4 * H;
  const DType dt = DType::kFloat32;
  const LSTMCase c(dt, B, I, H, rng);
  const LSTMBlockCellResult f = lstm_block_cell(c.inputs(), {1.0, 3.0, true});
  const Tensor cs_grad = random_tensor(dt, {B, H}, rng), h_grad = random_tensor(dt, {B, H}, rng);
  const float* w = c.w.data_as<float>();
  LSTMCellPlan<float> forward_only, with_transposes;
  forward_only.pack(I, H, w);
  with_transposes.pack(I, H, w);
  with_transposes.pack_transposed(I, H, w);
  auto backward = [&](const LSTMCellPlan<float>* plan) {
    // d_cs_prev, d_gates, d_wci, d_wcf, d_wco, d_x, d_h_prev, d_w, d_b
    std::vector<Tensor> g =
        poisoned_each(dt, {{B, H}, {B, G}, {H}, {H}, {H}, {B, I}, {B, H}, {I + H, G}, {G}});
    auto out = [&](int k) { return g[k].data_as<float>(); };
    LSTMCellBwdArgs<float> a{};
    a.x = c.x.data_as<float>();
    a.cs_prev = c.cs_prev.data_as<float>();
    a.h_prev = c.h_prev.data_as<float>();
    a.w = w;
    a.wci = c.wci.data_as<float>();
    a.wcf = c.wcf.data_as<float>();
    a.wco = c.wco.data_as<float>();
    a.i = f.i.data_as<float>();
    a.cs = f.cs.data_as<float>();
    a.f = f.f.data_as<float>();
    a.o = f.o.data_as<float>();
    a.ci = f.ci.data_as<float>();
    a.co = f.co.data_as<float>();
    a.d_cs = cs_grad.data_as<float>();
    a.d_h = h_grad.data_as<float>();
    a.d_cs_prev = out(0);
    a.d_gates = out(1);
    a.d_wci = out(2);
    a.d_wcf = out(3);
    a.d_wco = out(4);
    a.use_peephole = true;
    a.full = true;
    a.d_x = out(5);
    a.d_h_prev = out(6);
    a.d_w = out(7);
    a.d_b = out(8);
    a.plan = plan;
    cpu::lstm_cell_bwd<float>(LSTMDims{B, I, H}, a);
    return g;
  };
  const std::vector<Tensor> none = backward(nullptr), lazy = backward(&forward_only),
                            full = backward(&with_transposes);
  expect_bitwise_equal(lazy, none);
  expect_bitwise_equal(full, none);
}

// The per-step interface of lstm_pointwise.h that the sequence ops use: carries are added to the
// external gradients, cs_prev_grad may overwrite the cs carry in place, rows can be split, a
// null bias means the bias is already in the gates, and the reductions accumulate.
TEST(LSTMKernels, PointwiseStepInterface) {
  std::mt19937_64 rng(12);
  const std::int64_t B = 6, H = 5, G = 4 * H;
  const DType f64 = DType::kFloat64;
  auto rnd = [&](Shape s) { return random_tensor(f64, s, rng, -2, 2); };
  auto p = [](const Tensor& t) { return t.data_as<double>(); };
  auto m = [](Tensor& t) { return t.data_as<double>(); };
  const Tensor gates = rnd({B, G}), b = rnd({G}), cs_prev = rnd({B, H}), wci = rnd({H}),
               wcf = rnd({H}), wco = rnd({H});
  for (LSTMLayout layout : {LSTMLayout::kICFO, LSTMLayout::kIFCO}) {
    // Bias given separately vs folded into the gates.
    Tensor folded(f64, {B, G});
    for (std::int64_t e = 0; e < B * G; ++e) m(folded)[e] = p(gates)[e] + p(b)[e % G];
    std::array<Tensor, 7> o1, o2;
    for (int k = 0; k < 7; ++k) {
      o1[k] = poisoned(f64, {B, H});
      o2[k] = poisoned(f64, {B, H});
    }
    cpu::LSTMFwdParams<double> fp{H, layout, 0.25, 1.5, true, p(b), p(wci), p(wcf), p(wco)};
    cpu::lstm_fwd_pointwise(fp,
                            {p(gates), p(cs_prev), m(o1[0]), m(o1[1]), m(o1[2]), m(o1[3]), m(o1[4]),
                             m(o1[5]), m(o1[6])},
                            B);
    fp.b = nullptr;
    const cpu::LSTMFwdStep<double> s2{p(folded), p(cs_prev), m(o2[0]), m(o2[1]), m(o2[2]),
                                      m(o2[3]),  m(o2[4]),   m(o2[5]), m(o2[6])};
    cpu::lstm_fwd_pointwise_rows(fp, s2, 0, 2);  // rows split by the caller
    cpu::lstm_fwd_pointwise_rows(fp, s2, 2, B);
    for (int k = 0; k < 7; ++k) EXPECT_TRUE(all_close(o2[k], o1[k], 0, 0)) << k;

    // Backward: external + carry vs their sum given as the external gradient.
    const Tensor csg = rnd({B, H}), hg = rnd({B, H}), csc = rnd({B, H}), hc = rnd({B, H});
    Tensor cs_sum(f64, {B, H}), h_sum(f64, {B, H});
    for (std::int64_t e = 0; e < B * H; ++e) {
      m(cs_sum)[e] = p(csg)[e] + p(csc)[e];
      m(h_sum)[e] = p(hg)[e] + p(hc)[e];
    }
    const cpu::LSTMBwdParams<double> bp{H, layout, true, p(wci), p(wcf), p(wco)};
    Tensor dg1 = poisoned(f64, {B, G}), dg2 = poisoned(f64, {B, G}), cpg1 = poisoned(f64, {B, H});
    Tensor carry(f64, {B, H});  // cs_prev_grad overwrites the carry it reads
    for (std::int64_t e = 0; e < B * H; ++e) m(carry)[e] = p(csc)[e];
    const cpu::LSTMBwdStep<double> b1{p(cs_prev), p(o1[0]), p(o1[1]),  p(o1[2]), p(o1[3]),
                                      p(o1[4]),   p(o1[5]), p(cs_sum), p(h_sum), nullptr,
                                      nullptr,    m(dg1),   m(cpg1)};
    cpu::lstm_bwd_pointwise(bp, b1, B);
    const cpu::LSTMBwdStep<double> b2{p(cs_prev), p(o1[0]), p(o1[1]), p(o1[2]), p(o1[3]),
                                      p(o1[4]),   p(o1[5]), p(csg),   p(hg),    p(carry),
                                      p(hc),      m(dg2),   m(carry)};
    cpu::lstm_bwd_pointwise(bp, b2, B);
    EXPECT_TRUE(all_close(dg2, dg1, 0, 0));
    EXPECT_TRUE(all_close(carry, cpg1, 0, 0));

    // Reductions: overwrite the (poisoned) outputs with the in-order sums over rows.
    Tensor wg[3] = {poisoned(f64, {H}), poisoned(f64, {H}), poisoned(f64, {H})};
    Tensor bg = poisoned(f64, {G});
    cpu::lstm_peephole_grads(bp, b1, B, m(wg[0]), m(wg[1]), m(wg[2]));
    cpu::column_sums<double, double>(B, G, p(dg1), G, m(bg));
    const LSTMGateBlocks blk = lstm_gate_blocks(layout);
    for (std::int64_t j = 0; j < H; ++j) {
      double si = 0, sf = 0, so = 0;
      for (std::int64_t n = 0; n < B; ++n) {
        si += p(dg1)[n * G + blk.i * H + j] * p(cs_prev)[n * H + j];
        sf += p(dg1)[n * G + blk.f * H + j] * p(cs_prev)[n * H + j];
        so += p(dg1)[n * G + blk.o * H + j] * p(o1[1])[n * H + j];
      }
      EXPECT_EQ(p(wg[0])[j], si);
      EXPECT_EQ(p(wg[1])[j], sf);
      EXPECT_EQ(p(wg[2])[j], so);
    }
    for (std::int64_t k = 0; k < G; ++k) {
      double s = 0;
      for (std::int64_t n = 0; n < B; ++n) s += p(dg1)[n * G + k];
      EXPECT_EQ(p(bg)[k], s);
    }
  }
}

TEST(LSTMBlockCell, ClipAndNaN) {
  // NaN propagates through the clip (min(max(NaN, −c), c) is NaN, as in TensorFlow's CPU
  // kernel); a NaN cell_clip disables clipping.
  std::mt19937_64 rng(13);
  const DType f32 = DType::kFloat32;
  LSTMCase c(f32, 2, 3, 4, rng, 5.0);
  c.cs_prev.data_as<float>()[0] = std::nanf("");
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    const LSTMBlockCellResult f = lstm_block_cell(c.inputs(), {1.0, 0.5, false});
    EXPECT_TRUE(std::isnan(f.cs.data_as<float>()[0]));
    for (std::int64_t e = 1; e < 8; ++e) EXPECT_LE(std::abs(f.cs.data_as<float>()[e]), 0.5f);
    const LSTMBlockCellResult n = lstm_block_cell(c.inputs(), {1.0, std::nan(""), false});
    const LSTMBlockCellResult off = lstm_block_cell(c.inputs(), {1.0, -1.0, false});
    for (std::int64_t e = 1; e < 8; ++e) {
      EXPECT_EQ(n.cs.data_as<float>()[e], off.cs.data_as<float>()[e]);
    }
    bool exceeds = false;
    for (std::int64_t e = 1; e < 8; ++e) exceeds |= std::abs(off.cs.data_as<float>()[e]) > 0.5f;
    EXPECT_TRUE(exceeds);
  }
}

// The typed API's default: without use_peephole the peephole vectors may be omitted
// (a default view, an empty one, or a null pointer) and stand for zeros [H]; with use_peephole
// a missing one is an error naming it. The name-based run_op keeps TensorFlow's contract.
TEST(LSTMBlockCell, TypedDefaultPeepholesOptionalWithoutUsePeephole) {
  std::mt19937_64 rng(12);
  const std::int64_t B = 3, I = 4, H = 5;
  for (DType dt : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const LSTMCase c(dt, B, I, H, rng);
    const Tensor zeros(dt, {H}), empty(dt, {0});
    const Tensor cs_grad = random_tensor(dt, {B, H}, rng), h_grad = random_tensor(dt, {B, H}, rng);
    LSTMBlockCellInputs zin = c.inputs();
    zin.wci = zin.wcf = zin.wco = zeros;
    const LSTMBlockCellResult want = lstm_block_cell(zin);
    LSTMBlockCellGradInputs zgin = c.grad_inputs(want, cs_grad, h_grad);
    zgin.wci = zgin.wcf = zgin.wco = zeros;
    const LSTMBlockCellGradResult want_g = lstm_block_cell_grad(zgin, false);
    const LSTMBlockCellBackwardResult want_b = lstm_block_cell_backward(zgin);
    const TensorView omitted[] = {TensorView(), empty, TensorView(nullptr, dt, Shape{H})};
    for (const TensorView& v : omitted) {
      SCOPED_TRACE("omitted " + v.shape.to_string());
      LSTMBlockCellInputs in = c.inputs();
      in.wci = in.wcf = in.wco = v;
      const LSTMBlockCellResult got = lstm_block_cell(in);
      EXPECT_TRUE(all_close(got.cs, want.cs, 0, 0));
      EXPECT_TRUE(all_close(got.h, want.h, 0, 0));
      // Into caller memory.
      std::vector<Tensor> outs;
      for (int k = 0; k < 7; ++k) outs.push_back(poisoned(dt, {B, H}));
      lstm_block_cell(in, {outs[0].mutable_view(), outs[1].mutable_view(), outs[2].mutable_view(),
                           outs[3].mutable_view(), outs[4].mutable_view(), outs[5].mutable_view(),
                           outs[6].mutable_view()});
      EXPECT_TRUE(all_close(outs[6], want.h, 0, 0));
      LSTMBlockCellGradInputs gin = c.grad_inputs(want, cs_grad, h_grad);
      gin.wci = gin.wcf = gin.wco = v;
      const LSTMBlockCellGradResult g = lstm_block_cell_grad(gin, false);
      EXPECT_TRUE(all_close(g.cs_prev_grad, want_g.cs_prev_grad, 0, 0));
      EXPECT_TRUE(all_close(g.dicfo, want_g.dicfo, 0, 0));
      EXPECT_EQ(g.wci_grad.shape(), (Shape{H}));
      const LSTMBlockCellBackwardResult bw = lstm_block_cell_backward(gin);
      EXPECT_TRUE(all_close(bw.x, want_b.x, 0, 0));
      EXPECT_TRUE(all_close(bw.w, want_b.w, 0, 0));
      EXPECT_EQ(bw.wco.shape(), (Shape{H}));
    }
  }
  const DType f = DType::kFloat32;
  const LSTMCase c(f, B, I, H, rng);
  LSTMBlockCellInputs in = c.inputs();
  in.wci = TensorView();
  expect_invalid(
      [&] {
        lstm_block_cell(in, {1.0, 3.0, true});
      },
      "LSTMBlockCell: wci is missing (no data): use_peephole is true, so the input "
      "gate's peephole weights [cell_size] are required (they may be omitted only when "
      "use_peephole is false)");
  const LSTMBlockCellResult fwd = lstm_block_cell(c.inputs());
  LSTMBlockCellGradInputs gin = c.grad_inputs(fwd, fwd.cs, fwd.h);
  gin.wco = TensorView(nullptr, f, Shape{H});
  expect_invalid([&] { lstm_block_cell_grad(gin, true); }, "LSTMBlockCellGrad: wco is missing");
  expect_invalid(
      [&] {
        lstm_block_cell_backward(gin, {1.0, 3.0, true});
      },
      "gradients.LSTMBlockCell: wco is missing");
  // An omitted vector does not hide the errors validation reports first.
  in = c.inputs();
  in.wci = in.wcf = in.wco = TensorView();
  const Tensor w_bad = random_tensor(f, {9, 21}, rng);
  in.w = w_bad;
  expect_invalid([&] { lstm_block_cell(in); }, "LSTMBlockCell: w must have shape [9, 20]");
  // A negative dimension is still reported, never taken for an omitted vector.
  in = c.inputs();
  in.wcf = TensorView(nullptr, f, Shape{-1});
  expect_invalid([&] { lstm_block_cell(in); },
                 "LSTMBlockCell: wcf: Shape [-1] has a negative dimension");
  // The name-based interface keeps TensorFlow's contract: the vectors are required.
  const std::vector<TensorView> ins = {c.x,   c.cs_prev,    c.h_prev, c.w,
                                       c.wci, TensorView(), c.wco,    c.b};
  expect_invalid([&] { run_op("LSTMBlockCell", ins); },
                 "LSTMBlockCell: wcf has 1 elements but no data (null pointer)");
}

TEST(LSTMBlockCell, Validation) {
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const LSTMCase c(f, 4, 3, 16, rng);
  const Tensor rank1 = random_tensor(f, {4}, rng), m2 = random_tensor(f, {1, 2}, rng),
               bad2 = random_tensor(f, {4, 15}, rng);
  auto with = [&](int k, const TensorView& v) {
    LSTMBlockCellInputs in = c.inputs();
    TensorView* slots[] = {&in.x, &in.cs_prev, &in.h_prev, &in.w, &in.wci, &in.wcf, &in.wco, &in.b};
    *slots[k] = v;
    return in;
  };
  const char* names[] = {"x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"};
  // Ranks.
  for (int k = 0; k < 8; ++k) {
    const bool matrix = k < 4;
    const TensorView bad = matrix ? TensorView(rank1) : TensorView(m2);
    const std::string want =
        std::string("LSTMBlockCell: ") + names[k] + " must be rank " +
        (matrix ? "2, got rank 1 (shape [4])" : "1, got rank 2 (shape [1, 2])");
    expect_invalid([&] { lstm_block_cell(with(k, bad)); }, want);
  }
  // Ranks are checked before dimensions: a wrong rank anywhere wins over a wrong dimension.
  {
    LSTMBlockCellInputs in = with(2, bad2);
    in.b = m2;
    expect_invalid([&] { lstm_block_cell(in); }, "b must be rank 1");
  }
  // Dimensions.
  const Tensor cs_b5 = random_tensor(f, {5, 16}, rng), h_b5 = random_tensor(f, {5, 16}, rng),
               w_bad_rows = random_tensor(f, {18, 64}, rng),
               w_bad_cols = random_tensor(f, {19, 63}, rng), p15 = random_tensor(f, {15}, rng),
               p3 = random_tensor(f, {3}, rng), b_short = random_tensor(f, {63}, rng),
               b_long = random_tensor(f, {67}, rng);
  expect_invalid([&] { lstm_block_cell(with(1, cs_b5)); },
                 "LSTMBlockCell: cs_prev must have shape [4, 16] (batch_size, cell_size), got "
                 "[5, 16]");
  expect_invalid([&] { lstm_block_cell(with(2, h_b5)); },
                 "h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]");
  expect_invalid([&] { lstm_block_cell(with(2, bad2)); }, "h_prev must have shape [4, 16]");
  expect_invalid(
      [&] { lstm_block_cell(with(3, w_bad_rows)); },
      "w must have shape [19, 64] (input_size + cell_size, 4 * cell_size), got [18, 64]");
  expect_invalid([&] { lstm_block_cell(with(3, w_bad_cols)); }, "w must have shape [19, 64]");
  // An x of the wrong width: input_size comes from x, so x and w disagree and the message names
  // both, x first; the same from the grads.
  const Tensor x_wide = random_tensor(f, {4, 8}, rng);
  const std::string x_msg =
      "x and w disagree on input_size: x has input_size 8 (its last dimension), but w's 19 rows "
      "are input_size + cell_size for input_size 3 (cell_size 16): either x must be [4, 3], or w "
      "must have shape [24, 64] (input_size + cell_size, 4 * cell_size), got [19, 64]";
  expect_invalid([&] { lstm_block_cell(with(0, x_wide)); }, "LSTMBlockCell: " + x_msg);
  {
    const LSTMBlockCellResult fwd = lstm_block_cell(c.inputs());
    LSTMBlockCellGradInputs gin = c.grad_inputs(fwd, fwd.cs, fwd.h);
    gin.x = x_wide;
    expect_invalid([&] { lstm_block_cell_grad(gin, false); }, "LSTMBlockCellGrad: " + x_msg);
    expect_invalid([&] { lstm_block_cell_backward(gin); }, "gradients.LSTMBlockCell: " + x_msg);
  }
  for (int k = 4; k < 7; ++k) {
    // Peephole lengths are checked even when use_peephole is false (newer TensorFlow).
    for (const Tensor* p : {&p15, &p3}) {
      expect_invalid([&] { lstm_block_cell(with(k, *p)); },
                     std::string(names[k]) + " must have shape [16] (cell_size), got [" +
                         std::to_string(p->shape()[0]) + "]");
    }
  }
  // b must be exactly [4H] (TensorFlow's BlockLSTMGrad accepted 4H+1..4H+3).
  expect_invalid([&] { lstm_block_cell(with(7, b_short)); },
                 "b must have shape [64] (4 * cell_size), got [63]");
  expect_invalid([&] { lstm_block_cell(with(7, b_long)); }, "got [67]");
  // dtypes must agree and be floating.
  const LSTMCase d(DType::kFloat64, 4, 3, 16, rng);
  expect_invalid([&] { lstm_block_cell(with(5, d.wcf)); },
                 "wcf must have the dtype of x (float32), got float64");
  const Tensor ints(DType::kInt64, {4, 3});
  expect_invalid([&] { lstm_block_cell(with(0, ints)); },
                 "x must be float16, bfloat16, float32 or float64, got int64");
  // Attrs: bools must be 0/1; unknown attrs are refused; use_peephole is required on the grad.
  const TensorView fwd_in[] = {c.x, c.cs_prev, c.h_prev, c.w, c.wci, c.wcf, c.wco, c.b};
  expect_invalid(
      [&] {
        run_op("LSTMBlockCell", fwd_in, {{"use_peephole", 2.0}});
      },
      "attr use_peephole must be a bool");
  expect_invalid([&] { run_op("LSTMBlockCell", fwd_in, {{"clip", 1.0}}); }, "unknown attr 'clip'");

  // Grad: every gate tensor and both upstream gradients must be [B, H].
  const LSTMBlockCellResult fwd = lstm_block_cell(c.inputs());
  const LSTMBlockCellGradInputs ok = c.grad_inputs(fwd, fwd.cs, fwd.h);
  EXPECT_NO_THROW(lstm_block_cell_grad(ok, true));
  const std::vector<TensorView> grad_in = {ok.x,   ok.cs_prev, ok.h_prev,  ok.w,     ok.wci, ok.wcf,
                                           ok.wco, ok.b,       ok.i,       ok.cs,    ok.f,   ok.o,
                                           ok.ci,  ok.co,      ok.cs_grad, ok.h_grad};
  expect_invalid([&] { run_op("LSTMBlockCellGrad", grad_in, {}); },
                 "LSTMBlockCellGrad: attr use_peephole is required (it has no default)");
  EXPECT_NO_THROW(run_op("gradients.LSTMBlockCell", grad_in, {}));  // the forward's defaults
  const char* gate_names[] = {"i", "cs", "f", "o", "ci", "co", "cs_grad", "h_grad"};
  for (int k = 0; k < 8; ++k) {
    LSTMBlockCellGradInputs in = ok;
    TensorView* slots[] = {&in.i, &in.cs, &in.f, &in.o, &in.ci, &in.co, &in.cs_grad, &in.h_grad};
    *slots[k] = bad2;
    expect_invalid([&] { lstm_block_cell_grad(in, false); },
                   std::string("LSTMBlockCellGrad: ") + gate_names[k] +
                       " must have shape [4, 16] (batch_size, cell_size), got [4, 15]");
    *slots[k] = rank1;
    expect_invalid([&] { lstm_block_cell_backward(in); },
                   std::string("gradients.LSTMBlockCell: ") + gate_names[k] + " must be rank 2");
    // … and a wrong gate rank is reported before a wrong weight dimension.
    in.w = w_bad_rows;
    expect_invalid([&] { lstm_block_cell_grad(in, true); },
                   std::string(gate_names[k]) + " must be rank 2");
    *slots[k] = d.x;
    in.w = c.w;
    expect_invalid([&] { lstm_block_cell_grad(in, true); }, "must have shape [4, 16]");
  }
  {
    LSTMBlockCellGradInputs in = ok;
    in.h_grad = d.cs_prev;  // float64 among float32
    expect_invalid([&] { lstm_block_cell_grad(in, true); },
                   "h_grad must have the dtype of x (float32), got float64");
    in = ok;
    in.wco = p3;
    expect_invalid([&] { lstm_block_cell_backward(in); },
                   "gradients.LSTMBlockCell: wco must have shape [16] (cell_size), got [3]");
    in = ok;
    in.x = rank1;
    expect_invalid([&] { lstm_block_cell_grad(in, false); },
                   "LSTMBlockCellGrad: x must be rank 2, got rank 1");
  }
  // Caller-provided outputs are checked too.
  std::array<Tensor, 7> outs;
  for (Tensor& t : outs) t = Tensor(f, {4, 16});
  Tensor small(f, {4, 15});
  expect_invalid(
      [&] {
        lstm_block_cell(c.inputs(),
                        {outs[0].mutable_view(), outs[1].mutable_view(), outs[2].mutable_view(),
                         outs[3].mutable_view(), outs[4].mutable_view(), outs[5].mutable_view(),
                         small.mutable_view()});
      },
      "output h must have shape [4, 16], got [4, 15]");
  Tensor dicfo_small(f, {4, 63}), v16(f, {16}), v16b(f, {16}), v16c(f, {16});
  expect_invalid(
      [&] {
        lstm_block_cell_grad(ok,
                             {outs[0].mutable_view(), dicfo_small.mutable_view(),
                              v16.mutable_view(), v16b.mutable_view(), v16c.mutable_view()},
                             true);
      },
      "output dicfo must have shape [4, 64], got [4, 63]");
  // An output aliasing an input is refused.
  Tensor cs_copy(f, {4, 16});
  expect_invalid(
      [&] {
        lstm_block_cell({c.x, cs_copy, c.h_prev, c.w, c.wci, c.wcf, c.wco, c.b},
                        {outs[0].mutable_view(), cs_copy.mutable_view(), outs[2].mutable_view(),
                         outs[3].mutable_view(), outs[4].mutable_view(), outs[5].mutable_view(),
                         outs[6].mutable_view()});
      },
      "overlaps input cs_prev");
  // Null data with elements; negative dimensions.
  expect_invalid(
      [&] {
        lstm_block_cell(with(0, TensorView(static_cast<const float*>(nullptr), {4, 3})));
      },
      "x has 12 elements but no data");
  expect_invalid(
      [&] { lstm_block_cell(with(4, TensorView(static_cast<const float*>(nullptr), {-1}))); },
      "negative dimension");
}

}  // namespace
}  // namespace blockrnn
