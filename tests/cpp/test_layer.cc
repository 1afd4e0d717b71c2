// The layer objects and the RNN stack of blockrnn/layer.h:
//   - every layer's forward and backward equal the one-shot ops bit for bit (float32, float64,
//     float16 and bfloat16, the 16-bit ones on 1, 2 and 3 threads too; with and without
//     seq_lengths, seq_len_max < T, calls smaller than the planned maximum,
//     a caller's workspace, repeated calls, new weights);
//   - creation, set_weights and per-call validation name the layer and the argument;
//   - the stack: one layer, one direction is the op; bidirectional, multi-layer with dropout
//     masks and per-example lengths equals each example run alone through one-shot ops (bit
//     for bit), and its backward matches central differences in float64; in float16 and
//     bfloat16 its forward is the 16-bit ops layer by layer (bit for bit) and its backward is
//     within a derived tolerance of float64's.
// ctest runs this binary in reference mode and on each ISA path too.
#include <gtest/gtest.h>
#include <functional>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "core/isa.h"
#include "sequence_case.h"
#include "test_util.h"

namespace blockrnn::testing {
namespace {

bool bitwise(const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype || a.shape != b.shape) return false;
  const std::size_t n = static_cast<std::size_t>(a.shape.num_elements()) * dtype_size(a.dtype);
  return n == 0 || std::memcmp(a.data, b.data, n) == 0;
}

Tensor lengths_tensor(const std::vector<std::int64_t>& L) {
  Tensor t(DType::kInt64, Shape{static_cast<std::int64_t>(L.size())});
  std::copy(L.begin(), L.end(), t.data_as<std::int64_t>());
  return t;
}

struct Case {
  std::int64_t T, B;
  std::optional<std::int64_t> S;
  std::vector<std::int64_t> lengths;  // empty: none
};

const Case kCases[] = {{5, 3, std::nullopt, {}},
                       {1, 1, std::nullopt, {}},
                       {6, 4, 4, {}},
                       {5, 4, std::nullopt, {5, 3, 3, 0}},  // non-increasing: prefix path
                       {5, 3, std::nullopt, {2, 5, 4}},     // masked path
                       {0, 2, std::nullopt, {}}};

constexpr std::int64_t kI = 5, kH = 7;

// A struct of mutable views, in field order, onto t[K]...
template <typename S, std::size_t... K>
S views_of(std::vector<Tensor>& t, std::index_sequence<K...>) {
  return S{t[K].mutable_view()...};
}

// Poisoned tensors shaped like `like`, and the views a call writes them through.
std::vector<Tensor> poisoned_like(DType dt, const std::vector<const Tensor*>& like) {
  std::vector<Tensor> out;
  for (const Tensor* t : like) out.push_back(poisoned(dt, t->shape()));
  return out;
}

void expect_bitwise(const std::vector<Tensor>& got, const std::vector<const Tensor*>& want,
                    const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(bitwise(got[k], *want[k])) << what << " " << k;
  }
}

// The LSTM layer's per-call structs and the op's, whose fields are in the same order: the op's
// inputs are the layer's with the weights (w, wci, wcf, wco, b) after h_prev; the grad's inputs
// are the forward's, then its outputs, then cs_grad and h_grad.
BlockLSTMInputs op_inputs(const LSTMLayerInputs& l, const BlockLSTMInputs& w) {
  return {l.seq_len_max, l.x, l.cs_prev, l.h_prev, w.w, w.wci, w.wcf, w.wco, w.b, l.seq_lengths};
}
BlockLSTMGradInputs op_grad_inputs(const BlockLSTMInputs& in, const BlockLSTMResult& f,
                                   const Tensor& cs_grad, const Tensor& h_grad) {
  return {in.seq_len_max, in.x, in.cs_prev, in.h_prev, in.w,          in.wci, in.wcf,
          in.wco,         in.b, f.i,        f.cs,      f.f,           f.o,    f.ci,
          f.co,           f.h,  cs_grad,    h_grad,    in.seq_lengths};
}
LSTMLayerGradInputs layer_grad_inputs(const BlockLSTMGradInputs& g) {
  return {g.seq_len_max, g.x,  g.cs_prev, g.h_prev, g.i,       g.cs,     g.f,
          g.o,           g.ci, g.co,      g.h,      g.cs_grad, g.h_grad, g.seq_lengths};
}

// The LSTM layer (BlockLSTM with peepholes, BlockLSTMV2) equals its one-shot ops, bit for bit,
// on every case, over two sets of weights, half the backward calls on a caller's workspace.
void expect_lstm_layer_equals_ops(DType dt) {
  for (const bool v2 : {false, true}) {
    std::mt19937_64 rng(v2 ? 11 : 12);
    LSTMLayerAttrs attrs;
    attrs.v2 = v2;
    attrs.use_peephole = !v2;
    attrs.cell_clip = v2 ? 0.0 : 0.8;
    if (!v2) attrs.forget_bias = 0.7;
    LSTMLayer layer(
        {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = 6, .max_batch = 4}, attrs);
    for (int round = 0; round < 2; ++round) {  // new weights between rounds
      const Tensor w = random_tensor(dt, {kI + kH, 4 * kH}, rng);
      const Tensor b = random_tensor(dt, {4 * kH}, rng);
      const Tensor wci = random_tensor(dt, {kH}, rng), wcf = random_tensor(dt, {kH}, rng),
                   wco = random_tensor(dt, {kH}, rng);
      layer.set_weights(w, b, wci, wcf, wco);
      const BlockLSTMInputs weights{.w = w, .wci = wci, .wcf = wcf, .wco = wco, .b = b};
      for (const Case& c : kCases) {
        const Tensor x = random_tensor(dt, {c.T, c.B, kI}, rng);
        const Tensor cs0 = random_tensor(dt, {c.B, kH}, rng),
                     h0 = random_tensor(dt, {c.B, kH}, rng);
        const Tensor lens = lengths_tensor(c.lengths);
        const LSTMLayerInputs lin{.seq_len_max = c.S,
                                  .x = x,
                                  .cs_prev = cs0,
                                  .h_prev = h0,
                                  .seq_lengths = c.lengths.empty() ? TensorView() : lens.view()};
        const BlockLSTMInputs in = op_inputs(lin, weights);
        BlockLSTMResult want =
            v2 ? block_lstm_v2(in, {.cell_clip = 0.0, .use_peephole = false})
               : block_lstm(in, {.forget_bias = 0.7, .cell_clip = 0.8, .use_peephole = true});
        const std::vector<const Tensor*> fo = {&want.i,  &want.cs, &want.f, &want.o,
                                               &want.ci, &want.co, &want.h};
        std::vector<Tensor> got = poisoned_like(dt, fo);
        layer.forward(lin, views_of<BlockLSTMOutputs>(got, std::make_index_sequence<7>()));
        expect_bitwise(got, fo, "output");

        const Shape tbh{c.T, c.B, kH};
        const Tensor csg = random_tensor(dt, tbh, rng), hg = random_tensor(dt, tbh, rng);
        const BlockLSTMGradInputs gin = op_grad_inputs(in, want, csg, hg);
        BlockLSTMGradResult gw = v2 ? block_lstm_grad_v2(gin, false) : block_lstm_grad(gin, true);
        const std::vector<const Tensor*> go = {&gw.x_grad,   &gw.cs_prev_grad, &gw.h_prev_grad,
                                               &gw.w_grad,   &gw.wci_grad,     &gw.wcf_grad,
                                               &gw.wco_grad, &gw.b_grad};
        std::vector<Tensor> g = poisoned_like(dt, go);
        // Half the calls on a caller's workspace.
        std::vector<double> ws((layer.workspace_bytes(c.T, c.B) + 7) / 8 + 1);
        const LayerWorkspace lw =
            round == 1 ? LayerWorkspace{ws.data(), ws.size() * 8} : LayerWorkspace{};
        layer.backward(layer_grad_inputs(gin),
                       views_of<BlockLSTMGradOutputs>(g, std::make_index_sequence<8>()), lw);
        expect_bitwise(g, go, "gradient");
      }
    }
  }
}

class LayerTest : public ::testing::TestWithParam<DType> {};

TEST_P(LayerTest, LSTMEqualsOneShotOpsBitwise) {
  expect_lstm_layer_equals_ops(GetParam());
}

// The two GRU layers, for one test of both: the layer, its one-shot ops (sequence_case.h's
// variant: typed calls, outputs and gradients in OpDef order) and the layer's per-call structs,
// whose fields are in the same order (outputs; grad inputs: seq_len_max, x, h_prev, the forward's
// outputs, h_grad, seq_lengths).
template <typename V, typename L, typename Out, typename GradIn, typename OpGradIn,
          typename GradOut, std::size_t kOutputs>
struct GRUKind {
  using Variant = V;
  using Layer = L;
  using Outputs = Out;
  using GradInputs = GradIn;
  using OpGradInputs = OpGradIn;
  using GradOutputs = GradOut;
  static constexpr std::size_t kNumOutputs = kOutputs;
};
using GRUPlain = GRUKind<BlockGRUVariant, GRULayer, BlockGRUOutputs, GRULayerGradInputs,
                         BlockGRUGradInputs, BlockGRUGradOutputs, 4>;
using GRUResetAfter = GRUKind<BlockGRUResetAfterVariant, GRUResetAfterLayer,
                              BlockGRUResetAfterOutputs, GRUResetAfterLayerGradInputs,
                              BlockGRUResetAfterGradInputs, BlockGRUResetAfterGradOutputs, 5>;

// The layer's backward inputs: `in`, the forward's outputs f[K]... and h_grad.
template <typename S, std::size_t... K>
S grad_inputs_of(const GRULayerInputs& in, const std::vector<const Tensor*>& f,
                 const Tensor& h_grad, std::index_sequence<K...>) {
  return S{in.seq_len_max, in.x, in.h_prev, *f[K]..., h_grad, in.seq_lengths};
}

// A GRU layer's forward and backward equal its one-shot ops, bit for bit, on every case.
template <typename Kind>
void expect_gru_layer_equals_ops(DType dt, std::uint64_t seed) {
  using V = typename Kind::Variant;
  std::mt19937_64 rng(seed);
  typename Kind::Layer layer(
      {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = 6, .max_batch = 4});
  // The weights of one case drawn for the largest call; each case draws its own x and h_prev.
  const typename V::Case weights(dt, 6, 4, kI, kH, rng);
  auto op_in = weights.inputs(0);
  const std::vector<TensorView*> w = V::inputs(op_in);  // x, h_prev, then the four weights
  layer.set_weights(*w[2], *w[3], *w[4], *w[5]);
  for (const Case& c : kCases) {
    const Tensor x = random_tensor(dt, {c.T, c.B, kI}, rng), h0 = random_tensor(dt, {c.B, kH}, rng);
    const Tensor lens = lengths_tensor(c.lengths);
    const TensorView lv = c.lengths.empty() ? TensorView() : lens.view();
    op_in.seq_len_max = c.S.value_or(c.T);
    op_in.x = x;
    op_in.h_prev = h0;
    op_in.seq_lengths = lv;
    const auto want = V::forward(op_in);
    const GRULayerInputs in{.seq_len_max = c.S, .x = x, .h_prev = h0, .seq_lengths = lv};
    std::vector<Tensor> got = poisoned_like(dt, V::outputs(want));
    constexpr auto kOut = std::make_index_sequence<Kind::kNumOutputs>();
    layer.forward(in, views_of<typename Kind::Outputs>(got, kOut));
    expect_bitwise(got, V::outputs(want), "output");

    const Tensor hg = random_tensor(dt, {c.T, c.B, kH}, rng);
    // The grad's inputs: the forward's, then its outputs, then h_grad (OpDef order).
    typename Kind::OpGradInputs gin{};
    gin.seq_len_max = op_in.seq_len_max;
    gin.seq_lengths = lv;
    const std::vector<TensorView*> gv = V::inputs(gin), fv = V::inputs(op_in);
    const std::vector<const Tensor*> fo = V::outputs(want);
    ASSERT_EQ(gv.size(), fv.size() + fo.size() + 1);
    for (std::size_t k = 0; k < fv.size(); ++k) *gv[k] = *fv[k];
    for (std::size_t k = 0; k < fo.size(); ++k) *gv[fv.size() + k] = *fo[k];
    *gv.back() = hg;
    const auto gw = V::backward(gin);
    std::vector<Tensor> g = poisoned_like(dt, V::grads(gw));
    layer.backward(grad_inputs_of<typename Kind::GradInputs>(in, fo, hg, kOut),
                   views_of<typename Kind::GradOutputs>(g, std::make_index_sequence<6>()));
    expect_bitwise(g, V::grads(gw), "gradient");
  }
}

TEST_P(LayerTest, GRUEqualsOneShotOpsBitwise) {
  expect_gru_layer_equals_ops<GRUPlain>(GetParam(), 21);
}

TEST_P(LayerTest, GRUResetAfterEqualsOneShotOpsBitwise) {
  expect_gru_layer_equals_ops<GRUResetAfter>(GetParam(), 31);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LayerTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                           DType::kBFloat16));

// float16 and bfloat16 on 1, 2 and 3 threads: the layers stage through float32 as the ops do
// (and, for bfloat16, multiply bfloat16 operands where the op does), so each thread count gives
// the op's bits.
TEST(Layer, SixteenBitEqualsOneShotOpsOnEveryThreadCount) {
  const int before = get_num_threads();
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (const DType dt : {DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " on " + std::to_string(threads) + " threads");
      expect_lstm_layer_equals_ops(dt);
      expect_gru_layer_equals_ops<GRUPlain>(dt, 41 + threads);
      expect_gru_layer_equals_ops<GRUResetAfter>(dt, 51 + threads);
    }
  }
  set_num_threads(before);
}

// A bfloat16 layer multiplies on its plan: the weights packed once for bfloat16 products, the
// packs its op makes per call. On every path this CPU runs (the vdpbf16ps kernel on avx512 with
// AVX512_BF16, the widened float32 kernel on avx2 and baseline) and on 1, 2 and 3 threads, the
// op's bits.
TEST(Layer, BFloat16PlanEqualsOneShotOpsOnEveryPath) {
  const int before = get_num_threads();
  int paths = 0;
  for (const char* isa : {"avx512", "avx2", "baseline"}) {
    try {
      set_isa(isa);
    } catch (const Error&) {
      continue;  // the CPU lacks this path; baseline always runs
    }
    ++paths;
    for (const int threads : {1, 2, 3}) {
      set_num_threads(threads);
      SCOPED_TRACE(std::string(isa) + " on " + std::to_string(threads) + " threads");
      expect_lstm_layer_equals_ops(DType::kBFloat16);
      expect_gru_layer_equals_ops<GRUPlain>(DType::kBFloat16, 61 + threads);
      expect_gru_layer_equals_ops<GRUResetAfter>(DType::kBFloat16, 71 + threads);
    }
  }
  set_isa("");
  set_num_threads(before);
  EXPECT_GE(paths, 1);
}

// A bfloat16 layer whose weights were packed on one path and called on another repacks its plan
// for the new path (the fallback kernel's panels differ): the op's bits on that path.
TEST(Layer, BFloat16PlanRepacksWhenThePathChanges) {
  std::mt19937_64 rng(81);
  const DType dt = DType::kBFloat16;
  GRULayer layer({.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = 3, .max_batch = 2});
  const Tensor w_ru = random_tensor(dt, {kI + kH, 2 * kH}, rng),
               w_c = random_tensor(dt, {kI + kH, kH}, rng), b_ru = random_tensor(dt, {2 * kH}, rng),
               b_c = random_tensor(dt, {kH}, rng);
  layer.set_weights(w_ru, w_c, b_ru, b_c);  // packed on the default path
  const Tensor x = random_tensor(dt, {3, 2, kI}, rng), h0 = random_tensor(dt, {2, kH}, rng);
  for (const char* isa : {"baseline", ""}) {  // a fallback path, then the default again
    set_isa(isa);
    SCOPED_TRACE(std::string("path ") + get_isa());
    const BlockGRUResult want =
        block_gru({.x = x, .h_prev = h0, .w_ru = w_ru, .w_c = w_c, .b_ru = b_ru, .b_c = b_c});
    const std::vector<const Tensor*> fo = {&want.r, &want.u, &want.c, &want.h};
    std::vector<Tensor> got = poisoned_like(dt, fo);
    layer.forward({.x = x, .h_prev = h0},
                  views_of<BlockGRUOutputs>(got, std::make_index_sequence<4>()));
    expect_bitwise(got, fo, "output");
  }
  set_isa("");
}

TEST(Layer, ValidationNamesTheLayerAndTheArgument) {
  expect_invalid([] { GRULayer l({.input_size = 3, .hidden_size = 0}); },
                 "GRULayer.create: hidden_size must be >= 1");
  expect_invalid(
      [] { LSTMLayer l({.input_size = 3, .hidden_size = 2}, {.v2 = true, .forget_bias = 1.0}); },
      "LSTMLayer(V2).create: forget_bias");
  expect_invalid([] { GRULayer l({.input_size = 3, .hidden_size = 2, .dtype = DType::kInt64}); },
                 "GRULayer.create: dtype must be float16, bfloat16, float32 or float64, got int64");
  expect_invalid([] { RNN r({.input_size = 3, .hidden_size = 2, .dtype = DType::kInt64}); },
                 "RNN.create: dtype must be float16, bfloat16, float32 or float64, got int64");
  GRULayer layer({.input_size = 3, .hidden_size = 2, .max_time = 4, .max_batch = 2});
  const Tensor x(DType::kFloat32, {5, 2, 3}), h0(DType::kFloat32, {2, 2});
  Tensor o(DType::kFloat32, {5, 2, 2});
  const BlockGRUOutputs out{o.mutable_view(), o.mutable_view(), o.mutable_view(), o.mutable_view()};
  expect_invalid([&] { layer.forward({.x = x, .h_prev = h0}, out); },
                 "GRULayer.forward: set_weights has not been called");
  expect_invalid(
      [&] {
        layer.set_weights(Tensor(DType::kFloat32, {5, 5}), {}, {}, {});
      },
      "GRULayer.set_weights: w_ru must have shape [5, 4] (input_size + hidden_size, 2 * "
      "hidden_size), got [5, 5]");
  const Tensor w_ru(DType::kFloat32, {5, 4}), w_c(DType::kFloat32, {5, 2}),
      b_ru(DType::kFloat32, {4}), b_c(DType::kFloat32, {2});
  // Every weight's words are the creation arguments' names, written out.
  expect_invalid(
      [&] {
        layer.set_weights(w_ru, Tensor(DType::kFloat32, {5, 3}), b_ru, b_c);
      },
      "GRULayer.set_weights: w_c must have shape [5, 2] (input_size + hidden_size, "
      "hidden_size), got [5, 3]");
  expect_invalid(
      [] {
        LSTMLayer l({.input_size = 3, .hidden_size = 2});
        l.set_weights(Tensor(DType::kFloat32, {5, 7}), Tensor(DType::kFloat32, {8}));
      },
      "LSTMLayer.set_weights: w must have shape [5, 8] (input_size + hidden_size, 4 * "
      "hidden_size), got [5, 7]");
  layer.set_weights(w_ru, w_c, b_ru, b_c);
  expect_invalid([&] { layer.forward({.x = x, .h_prev = h0}, out); }, "max_time");
  const Tensor x4(DType::kFloat32, {4, 2, 3});
  Tensor o4(DType::kFloat32, {4, 2, 2});
  const BlockGRUOutputs out4{o4.mutable_view(), o4.mutable_view(), o4.mutable_view(),
                             o4.mutable_view()};
  expect_invalid([&] { layer.forward({.x = x4, .h_prev = x4}, out4); },
                 "GRULayer.forward: h_prev must have shape [2, 2]");
  const Tensor bad = lengths_tensor({1, 9});
  expect_invalid([&] { layer.forward({.x = x4, .h_prev = h0, .seq_lengths = bad}, out4); },
                 "seq_lengths[1] = 9");
  GRULayer mine(
      {.input_size = 3, .hidden_size = 2, .max_time = 4, .max_batch = 2, .caller_workspace = true});
  mine.set_weights(w_ru, w_c, b_ru, b_c);
  expect_invalid([&] { mine.forward({.x = x4, .h_prev = h0}, out4); }, "caller_workspace");
  std::vector<float> small(4);
  expect_invalid(
      [&] {
        mine.forward({.x = x4, .h_prev = h0}, out4, {small.data(), 16});
      },
      "workspace");
  // A call that needs no workspace (an empty batch: workspace_bytes(T, 0) = 0) may pass none;
  // its outputs are zeros (an RNN's layers take the stack's one workspace, empty here).
  ASSERT_EQ(mine.workspace_bytes(4, 0), 0u);
  const Tensor x_empty(DType::kFloat32, {4, 0, 3}), h_empty(DType::kFloat32, {0, 2});
  Tensor o_empty(DType::kFloat32, {4, 0, 2});
  const BlockGRUOutputs out_empty{o_empty.mutable_view(), o_empty.mutable_view(),
                                  o_empty.mutable_view(), o_empty.mutable_view()};
  EXPECT_NO_THROW(mine.forward({.x = x_empty, .h_prev = h_empty}, out_empty));
}

// ---- RNN ---------------------------------------------------------------------------------------

struct StackCase {
  RNNMode mode;
  std::int64_t layers;
  bool bidirectional;
  bool dropout;
  std::vector<std::int64_t> lengths;  // empty: none
};

// The stack's parameters of (l, d), random, in set_weights' order.
std::vector<Tensor> random_params(RNNMode mode, std::int64_t I, std::int64_t H,
                                  std::mt19937_64& rng) {
  const DType dt = DType::kFloat64;
  switch (mode) {
    case RNNMode::kLSTM:
    case RNNMode::kLSTMV2: {
      std::vector<Tensor> p;
      p.push_back(random_tensor(dt, {I + H, 4 * H}, rng, -0.5, 0.5));
      p.push_back(random_tensor(dt, {4 * H}, rng, -0.5, 0.5));
      for (int k = 0; k < 3; ++k) p.push_back(Tensor(dt, {H}));  // no peepholes: zeros
      return p;
    }
    case RNNMode::kGRU: {
      std::vector<Tensor> p;
      p.push_back(random_tensor(dt, {I + H, 2 * H}, rng, -0.5, 0.5));
      p.push_back(random_tensor(dt, {I + H, H}, rng, -0.5, 0.5));
      p.push_back(random_tensor(dt, {2 * H}, rng, -0.5, 0.5));
      p.push_back(random_tensor(dt, {H}, rng, -0.5, 0.5));
      return p;
    }
    case RNNMode::kGRUResetAfter: {
      std::vector<Tensor> p;
      p.push_back(random_tensor(dt, {I, 3 * H}, rng, -0.5, 0.5));
      p.push_back(random_tensor(dt, {H, 3 * H}, rng, -0.5, 0.5));
      p.push_back(random_tensor(dt, {3 * H}, rng, -0.5, 0.5));
      p.push_back(random_tensor(dt, {3 * H}, rng, -0.5, 0.5));
      return p;
    }
  }
  return {};
}

// One example (batch 1, T = its length) of one layer and direction through the one-shot ops:
// h [T, 1, H] and the final (h, c).
struct OneShot {
  Tensor h, h_n, c_n;
};
OneShot one_shot(RNNMode mode, const std::vector<Tensor>& p, const Tensor& x, const Tensor& h0,
                 const Tensor& c0) {
  const std::int64_t T = x.shape()[0], H = h0.shape()[1];
  OneShot r;
  if (mode == RNNMode::kLSTM || mode == RNNMode::kLSTMV2) {
    const BlockLSTMInputs in{.x = x, .cs_prev = c0, .h_prev = h0, .w = p[0], .b = p[1]};
    BlockLSTMResult o = mode == RNNMode::kLSTM ? block_lstm(in) : block_lstm_v2(in);
    r.h = std::move(o.h);
    r.c_n = Tensor(DType::kFloat64, {1, H});
    const double* cs = T > 0 ? o.cs.data_as<double>() + (T - 1) * H : c0.data_as<double>();
    std::copy(cs, cs + H, r.c_n.data_as<double>());
  } else if (mode == RNNMode::kGRU) {
    r.h = block_gru({.x = x, .h_prev = h0, .w_ru = p[0], .w_c = p[1], .b_ru = p[2], .b_c = p[3]}).h;
  } else {
    r.h = block_gru_reset_after({.seq_len_max = T,
                                 .x = x,
                                 .h_prev = h0,
                                 .w_i = p[0],
                                 .w_h = p[1],
                                 .b_i = p[2],
                                 .b_h = p[3]})
              .h;
  }
  r.h_n = Tensor(DType::kFloat64, {1, H});
  const double* h = T > 0 ? r.h.data_as<double>() + (T - 1) * H : h0.data_as<double>();
  std::copy(h, h + H, r.h_n.data_as<double>());
  return r;
}

const StackCase kStackCases[] = {
    {RNNMode::kLSTMV2, 2, true, true, {4, 2, 0}},
    {RNNMode::kLSTM, 1, true, false, {}},
    {RNNMode::kGRU, 2, false, true, {3, 4, 1}},
    {RNNMode::kGRUResetAfter, 3, true, true, {1, 4, 3}},
    {RNNMode::kGRUResetAfter, 1, false, false, {}},
};

bool is_lstm(RNNMode mode) {
  return mode == RNNMode::kLSTM || mode == RNNMode::kLSTMV2;
}

// The RNN of a stack case for inputs of I features, H units and dtype dt, created for calls of
// up to max_time steps and max_batch examples.
RNNOptions stack_options(const StackCase& c, std::int64_t I, std::int64_t H, DType dt,
                         std::int64_t max_time, std::int64_t max_batch) {
  return {.mode = c.mode,
          .input_size = I,
          .hidden_size = H,
          .num_layers = c.layers,
          .bidirectional = c.bidirectional,
          .dtype = dt,
          .max_time = max_time,
          .max_batch = max_batch};
}

// A dropout mask of the case's stack, [max(L − 1, 0), T, B, D·H] in dt: each element `kept` with
// probability 0.7, else 0.
Tensor dropout_mask(const StackCase& c, DType dt, std::int64_t T, std::int64_t B, std::int64_t H,
                    double kept, std::mt19937_64& rng) {
  const std::int64_t D = c.bidirectional ? 2 : 1;
  Tensor mask(dt, {std::max<std::int64_t>(c.layers - 1, 0), T, B, D * H});
  std::bernoulli_distribution keep(0.7);
  for (std::int64_t e = 0; e < mask.num_elements(); ++e) set(mask, e, keep(rng) ? kept : 0.0);
  return mask;
}

// The case's call on x, h0 and (LSTM) c0, with its lengths `lens` where it has lengths and the
// mask where it has dropout between layers.
RNNInputs stack_inputs(const StackCase& c, const Tensor& x, const Tensor& h0, const Tensor& c0,
                       const Tensor& lens, const Tensor& mask) {
  return {.x = x,
          .h0 = h0,
          .c0 = is_lstm(c.mode) ? c0.view() : TensorView(),
          .seq_lengths = c.lengths.empty() ? TensorView() : lens.view(),
          .dropout_mask = c.dropout && c.layers > 1 ? mask.view() : TensorView()};
}

// t's values in `dtype` (each rounded once).
Tensor converted(const Tensor& t, DType dtype) {
  Tensor r(dtype, t.shape());
  for (std::int64_t e = 0; e < t.num_elements(); ++e) set(r, e, get(t, e));
  return r;
}

// One call of a StackCase in dt with random values (float64 values rounded to dt): x, h0, c0,
// the dropout mask (elements `kept` or 0) and the lengths, the RNNInputs on them, and the
// gradients of y, h_n and c_n a backward takes. Made in place: `in` views the tensors.
struct StackCall {
  StackCall(const StackCase& c, DType dt, std::int64_t T, std::int64_t B, std::int64_t I,
            std::int64_t H, double kept, std::mt19937_64& rng)
      : D(c.bidirectional ? 2 : 1),
        x(random_in(dt, {T, B, I}, rng)),
        h0(random_in(dt, {c.layers * D, B, H}, rng)),
        c0(random_in(dt, {c.layers * D, B, H}, rng)),
        mask(dropout_mask(c, dt, T, B, H, kept, rng)),
        lens(lengths_tensor(c.lengths)),
        in(stack_inputs(c, x, h0, c0, lens, mask)),
        gy(random_in(dt, {T, B, D * H}, rng)),
        g_h_n(random_in(dt, h0.shape(), rng)),
        g_c_n(random_in(dt, c0.shape(), rng)) {}
  StackCall(const StackCall&) = delete;
  StackCall& operator=(const StackCall&) = delete;
  static Tensor random_in(DType dt, const Shape& shape, std::mt19937_64& rng) {
    return converted(random_tensor(DType::kFloat64, shape, rng), dt);
  }
  const std::int64_t D;
  const Tensor x, h0, c0, mask, lens;
  const RNNInputs in;
  const Tensor gy, g_h_n, g_c_n;
};

class StackTest : public ::testing::TestWithParam<int> {};

TEST_P(StackTest, EqualsEachExampleThroughOneShotOpsAndFiniteDifferences) {
  const StackCase& c = kStackCases[GetParam()];
  const DType dt = DType::kFloat64;
  const std::int64_t T = 4, B = 3, I = 3, H = 4, D = c.bidirectional ? 2 : 1, L = c.layers;
  const bool lstm = is_lstm(c.mode);
  std::mt19937_64 rng(41 + GetParam());
  RNN rnn(stack_options(c, I, H, dt, T + 1, B + 1));
  std::vector<std::vector<Tensor>> params;
  for (std::int64_t l = 0; l < L; ++l) {
    for (std::int64_t d = 0; d < D; ++d) {
      params.push_back(random_params(c.mode, l == 0 ? I : D * H, H, rng));
    }
  }
  auto set_all = [&] {
    for (std::int64_t ld = 0; ld < L * D; ++ld) {
      std::vector<TensorView> v(params[ld].begin(), params[ld].end());
      rnn.set_weights(ld / D, ld % D, v);
    }
  };
  set_all();
  Tensor x = random_tensor(dt, {T, B, I}, rng), h0 = random_tensor(dt, {L * D, B, H}, rng),
         c0 = random_tensor(dt, {L * D, B, H}, rng);
  const Tensor mask = dropout_mask(c, dt, T, B, H, 1.0 / 0.7, rng);
  const Tensor lens = lengths_tensor(c.lengths);
  const RNNInputs in = stack_inputs(c, x, h0, c0, lens, mask);
  Tensor y = poisoned(dt, {T, B, D * H}), h_n = poisoned(dt, {L * D, B, H}),
         c_n = poisoned(dt, {L * D, B, H});
  // On a caller's reserve: another forward call (on the RNN's own) may come before its backward.
  Tensor reserve(dt, {rnn.reserve_elems(T, B)});
  rnn.forward(in, {y.mutable_view(), h_n.mutable_view(), c_n.mutable_view()},
              reserve.mutable_view());
  {
    const Tensor x2 = random_tensor(dt, {T, B, I}, rng);
    RNNInputs in2 = in;
    in2.x = x2;
    Tensor y2(dt, y.shape()), h2(dt, h_n.shape()), c2(dt, c_n.shape());
    rnn.forward(in2, {y2.mutable_view(), h2.mutable_view(), c2.mutable_view()});
  }

  // The oracle: each example alone, T = its length, layer by layer with one-shot ops.
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t Lb = c.lengths.empty() ? T : c.lengths[b];
    Tensor in_l(dt, {Lb, 1, I});
    for (std::int64_t t = 0; t < Lb; ++t) {
      std::copy_n(x.data_as<double>() + (t * B + b) * I, I, in_l.data_as<double>() + t * I);
    }
    for (std::int64_t l = 0; l < L; ++l) {
      const std::int64_t F = l == 0 ? I : D * H;
      Tensor y_l(dt, {Lb, 1, D * H});
      for (std::int64_t d = 0; d < D; ++d) {
        const std::int64_t ld = l * D + d;
        Tensor xs(dt, {Lb, 1, F});
        for (std::int64_t t = 0; t < Lb; ++t) {
          const std::int64_t ts = d == 1 ? Lb - 1 - t : t;
          std::copy_n(in_l.data_as<double>() + ts * F, F, xs.data_as<double>() + t * F);
        }
        Tensor s0(dt, {1, H}), sc0(dt, {1, H});
        std::copy_n(h0.data_as<double>() + (ld * B + b) * H, H, s0.data_as<double>());
        std::copy_n(c0.data_as<double>() + (ld * B + b) * H, H, sc0.data_as<double>());
        const OneShot o = one_shot(c.mode, params[ld], xs, s0, sc0);
        for (std::int64_t t = 0; t < Lb; ++t) {
          const std::int64_t ts = d == 1 ? Lb - 1 - t : t;
          std::copy_n(o.h.data_as<double>() + ts * H, H, y_l.data_as<double>() + t * D * H + d * H);
        }
        EXPECT_EQ(0, std::memcmp(o.h_n.data(), h_n.data_as<double>() + (ld * B + b) * H, H * 8))
            << "h_n l=" << l << " d=" << d << " b=" << b;
        if (lstm) {
          EXPECT_EQ(0, std::memcmp(o.c_n.data(), c_n.data_as<double>() + (ld * B + b) * H, H * 8))
              << "c_n l=" << l << " d=" << d << " b=" << b;
        }
      }
      if (l + 1 < L) {
        in_l = Tensor(dt, {Lb, 1, D * H});
        for (std::int64_t t = 0; t < Lb; ++t) {
          for (std::int64_t j = 0; j < D * H; ++j) {
            const double m =
                c.dropout ? mask.data_as<double>()[((l * T + t) * B + b) * D * H + j] : 1.0;
            in_l.data_as<double>()[t * D * H + j] = y_l.data_as<double>()[t * D * H + j] * m;
          }
        }
      } else {
        for (std::int64_t t = 0; t < T; ++t) {
          const double* got = y.data_as<double>() + (t * B + b) * D * H;
          for (std::int64_t j = 0; j < D * H; ++j) {
            const double want = t < Lb ? y_l.data_as<double>()[t * D * H + j] : 0.0;
            EXPECT_EQ(0, std::memcmp(&want, got + j, 8)) << "y t=" << t << " b=" << b;
          }
        }
      }
    }
  }

  // Backward against central differences of loss = Σ y⊙gy + Σ h_n⊙ghn + Σ c_n⊙gcn.
  const Tensor gy = random_tensor(dt, y.shape(), rng), ghn = random_tensor(dt, h_n.shape(), rng),
               gcn = random_tensor(dt, c_n.shape(), rng);
  Tensor gx = poisoned(dt, x.shape()), gh0 = poisoned(dt, h0.shape()),
         gc0 = poisoned(dt, c0.shape());
  std::vector<Tensor> gp;
  for (const auto& pl : params) {
    for (const auto& p : pl) gp.push_back(poisoned(dt, p.shape()));
  }
  std::vector<MutableTensorView> gpv;
  for (auto& g : gp) gpv.push_back(g.mutable_view());
  rnn.backward(in, {gy, ghn, lstm ? gcn.view() : TensorView()},
               {gx.mutable_view(), gh0.mutable_view(), gc0.mutable_view(), gpv}, reserve);
  // Every gradient element is written (the outputs were NaN-poisoned; central differences
  // alone would not see a NaN).
  auto all_finite = [](const Tensor& t) {
    for (std::int64_t e = 0; e < t.num_elements(); ++e) {
      if (!std::isfinite(get(t, e))) return false;
    }
    return true;
  };
  EXPECT_TRUE(all_finite(gx));
  EXPECT_TRUE(all_finite(gh0));
  if (lstm) EXPECT_TRUE(all_finite(gc0));
  for (const Tensor& g : gp) EXPECT_TRUE(all_finite(g));
  auto loss = [&] {
    Tensor yy(dt, y.shape()), hh(dt, h_n.shape()), cc(dt, c_n.shape());
    rnn.forward(in, {yy.mutable_view(), hh.mutable_view(), cc.mutable_view()});
    double s = 0;
    for (std::int64_t e = 0; e < yy.num_elements(); ++e) s += get(yy, e) * get(gy, e);
    for (std::int64_t e = 0; e < hh.num_elements(); ++e) s += get(hh, e) * get(ghn, e);
    if (lstm) {
      for (std::int64_t e = 0; e < cc.num_elements(); ++e) s += get(cc, e) * get(gcn, e);
    }
    return s;
  };
  EXPECT_TRUE(finite_difference(x, gx, loss).within(1e-6));
  EXPECT_TRUE(finite_difference(h0, gh0, loss).within(1e-6));
  if (lstm) EXPECT_TRUE(finite_difference(c0, gc0, loss).within(1e-6));
  std::size_t k = 0;
  for (std::int64_t ld = 0; ld < L * D; ++ld) {
    for (std::size_t q = 0; q < params[ld].size(); ++q, ++k) {
      if (lstm && q >= 2) continue;  // peepholes are off: their gradients are not the loss's
      auto loss_set = [&] {
        set_all();
        return loss();
      };
      EXPECT_TRUE(finite_difference(params[ld][q], gp[k], loss_set).within(1e-6))
          << "param " << q << " of (l, d) " << ld;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, StackTest, ::testing::Range(0, 5));

// ---- RNN in float16 and bfloat16 -------------------------------------------------------------

// Elements [from, from + n) of src copied into dst at `to` (the same dtype).
void copy_elems(const Tensor& src, std::int64_t from, Tensor& dst, std::int64_t to,
                std::int64_t n) {
  const std::size_t es = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.data()) + to * es,
              static_cast<const char*>(src.data()) + from * es, static_cast<std::size_t>(n) * es);
}

// One example of one layer and direction through the one-shot ops in the tensors' dtype: h
// [T, 1, H] and the final (h, c), as one_shot above.
OneShot one_shot_any(RNNMode mode, const std::vector<Tensor>& p, const Tensor& x, const Tensor& h0,
                     const Tensor& c0) {
  const DType dt = x.dtype();
  const std::int64_t T = x.shape()[0], H = h0.shape()[1];
  OneShot r;
  r.h_n = Tensor(dt, {1, H});
  r.c_n = Tensor(dt, {1, H});
  if (mode == RNNMode::kLSTM || mode == RNNMode::kLSTMV2) {
    const BlockLSTMInputs in{.x = x, .cs_prev = c0, .h_prev = h0, .w = p[0], .b = p[1]};
    BlockLSTMResult o = mode == RNNMode::kLSTM ? block_lstm(in) : block_lstm_v2(in);
    r.h = std::move(o.h);
    if (T > 0) {
      copy_elems(o.cs, (T - 1) * H, r.c_n, 0, H);
    } else {
      copy_elems(c0, 0, r.c_n, 0, H);
    }
  } else if (mode == RNNMode::kGRU) {
    r.h = block_gru({.x = x, .h_prev = h0, .w_ru = p[0], .w_c = p[1], .b_ru = p[2], .b_c = p[3]}).h;
  } else {
    r.h = block_gru_reset_after({.seq_len_max = T,
                                 .x = x,
                                 .h_prev = h0,
                                 .w_i = p[0],
                                 .w_h = p[1],
                                 .b_i = p[2],
                                 .b_h = p[3]})
              .h;
  }
  if (T > 0) {
    copy_elems(r.h, (T - 1) * H, r.h_n, 0, H);
  } else {
    copy_elems(h0, 0, r.h_n, 0, H);
  }
  return r;
}

// ||got − want|| / ||want|| (Frobenius norms, in double).
double relative_error(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (std::int64_t e = 0; e < want.num_elements(); ++e) {
    const double d = get(got, e) - get(want, e);
    num += d * d;
    den += get(want, e) * get(want, e);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

class StackSixteenBitTest : public ::testing::TestWithParam<std::tuple<int, DType>> {};

// The stack in float16 and bfloat16 is its layers in that dtype: the forward equals each
// example run alone through the one-shot ops of the dtype layer by layer, the dropout product
// rounded once to the dtype (bit for bit); the backward is the float64 stack's on the same
// values within a norm-wise tolerance (below).
TEST_P(StackSixteenBitTest, ForwardIsTheOpsLayerByLayerAndBackwardIsNearFloat64) {
  const StackCase& c = kStackCases[std::get<0>(GetParam())];
  const DType dt = std::get<1>(GetParam());
  const std::int64_t T = 4, B = 3, I = 3, H = 4, D = c.bidirectional ? 2 : 1, L = c.layers;
  const bool lstm = is_lstm(c.mode);
  std::mt19937_64 rng(61 + std::get<0>(GetParam()));
  const RNNOptions options = stack_options(c, I, H, dt, T, B);
  RNN rnn(options);
  RNNOptions options64 = options;
  options64.dtype = DType::kFloat64;
  RNN rnn64(options64);
  // Every value is a value of dt: the float64 stack runs on the same numbers.
  std::vector<std::vector<Tensor>> params, params64;
  for (std::int64_t l = 0; l < L; ++l) {
    for (std::int64_t d = 0; d < D; ++d) {
      std::vector<Tensor>& p = params.emplace_back();
      std::vector<Tensor>& p64 = params64.emplace_back();
      for (const Tensor& t : random_params(c.mode, l == 0 ? I : D * H, H, rng)) {
        p.push_back(converted(t, dt));
        p64.push_back(converted(p.back(), DType::kFloat64));
      }
      std::vector<TensorView> v(p.begin(), p.end()), v64(p64.begin(), p64.end());
      rnn.set_weights(l, d, v);
      rnn64.set_weights(l, d, v64);
    }
  }
  const Tensor x = random_tensor(dt, {T, B, I}, rng), h0 = random_tensor(dt, {L * D, B, H}, rng),
               c0 = random_tensor(dt, {L * D, B, H}, rng);
  const Tensor mask = dropout_mask(c, dt, T, B, H, 1.0 / 0.7, rng);
  const Tensor x64 = converted(x, DType::kFloat64), h064 = converted(h0, DType::kFloat64),
               c064 = converted(c0, DType::kFloat64), mask64 = converted(mask, DType::kFloat64);
  const Tensor lens = lengths_tensor(c.lengths);
  const RNNInputs in = stack_inputs(c, x, h0, c0, lens, mask);
  const RNNInputs in64 = stack_inputs(c, x64, h064, c064, lens, mask64);
  Tensor y = poisoned(dt, {T, B, D * H}), h_n = poisoned(dt, {L * D, B, H}),
         c_n = poisoned(dt, {L * D, B, H});
  rnn.forward(in, {y.mutable_view(), h_n.mutable_view(), c_n.mutable_view()});

  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t Lb = c.lengths.empty() ? T : c.lengths[b];
    Tensor in_l(dt, {Lb, 1, I});
    for (std::int64_t t = 0; t < Lb; ++t) copy_elems(x, (t * B + b) * I, in_l, t * I, I);
    for (std::int64_t l = 0; l < L; ++l) {
      const std::int64_t F = l == 0 ? I : D * H;
      Tensor y_l(dt, {Lb, 1, D * H});
      for (std::int64_t d = 0; d < D; ++d) {
        const std::int64_t ld = l * D + d;
        Tensor xs(dt, {Lb, 1, F});
        for (std::int64_t t = 0; t < Lb; ++t) {
          copy_elems(in_l, (d == 1 ? Lb - 1 - t : t) * F, xs, t * F, F);
        }
        Tensor s0(dt, {1, H}), sc0(dt, {1, H});
        copy_elems(h0, (ld * B + b) * H, s0, 0, H);
        copy_elems(c0, (ld * B + b) * H, sc0, 0, H);
        const OneShot o = one_shot_any(c.mode, params[ld], xs, s0, sc0);
        for (std::int64_t t = 0; t < Lb; ++t) {
          copy_elems(o.h, (d == 1 ? Lb - 1 - t : t) * H, y_l, t * D * H + d * H, H);
        }
        const std::size_t es = dtype_size(dt);
        EXPECT_EQ(0,
                  std::memcmp(o.h_n.data(),
                              static_cast<const char*>(h_n.data()) + (ld * B + b) * H * es, H * es))
            << "h_n l=" << l << " d=" << d << " b=" << b;
        if (lstm) {
          EXPECT_EQ(
              0, std::memcmp(o.c_n.data(),
                             static_cast<const char*>(c_n.data()) + (ld * B + b) * H * es, H * es))
              << "c_n l=" << l << " d=" << d << " b=" << b;
        }
      }
      if (l + 1 < L) {
        in_l = Tensor(dt, {Lb, 1, D * H});
        for (std::int64_t t = 0; t < Lb; ++t) {
          for (std::int64_t j = 0; j < D * H; ++j) {
            // One float32 product (exact for two 16-bit values), rounded once to dt.
            const float m = c.dropout ? float(get(mask, ((l * T + t) * B + b) * D * H + j)) : 1.0f;
            set(in_l, t * D * H + j, double(float(get(y_l, t * D * H + j)) * m));
          }
        }
      } else {
        for (std::int64_t t = 0; t < T; ++t) {
          for (std::int64_t j = 0; j < D * H; ++j) {
            const double want = t < Lb ? get(y_l, t * D * H + j) : 0.0;
            const double got = get(y, (t * B + b) * D * H + j);
            EXPECT_TRUE(got == want && std::signbit(got) == std::signbit(want))
                << "y t=" << t << " b=" << b << " j=" << j << ": " << got << " vs " << want;
          }
        }
      }
    }
  }

  // The backward against float64's on the same values, with docs/tolerances.md's rule for a
  // 16-bit stack of L layers (test_bfloat16.py's): each layer rounds its outputs once to dt (unit
  // roundoff u: 2^-11 float16, 2^-8 bfloat16; in bfloat16 also the operands of its products) and
  // passes the rounding of the layer below on with gain ≤ 1 (weights in ±0.5, activation slopes
  // ≤ 1): y within 2L·u norm-wise; a layer's backward reads the stored activations and the
  // rounded upstream gradient and rounds its own outputs, and the layers chain: 4L·u. Measured
  // ≤ 1.8 u on every case and dtype; a wrong gradient is off by O(1), ≥ 256 u.
  const double u = dt == DType::kFloat16 ? 0x1p-11 : 0x1p-8;
  const double tol_y = 2.0 * double(L) * u, tol = 4.0 * double(L) * u;
  Tensor y64(DType::kFloat64, y.shape()), h_n64(DType::kFloat64, h_n.shape()),
      c_n64(DType::kFloat64, c_n.shape());
  rnn64.forward(in64, {y64.mutable_view(), h_n64.mutable_view(), c_n64.mutable_view()});
  EXPECT_LT(relative_error(y, y64), tol_y);
  const Tensor gy = random_tensor(dt, y.shape(), rng), ghn = random_tensor(dt, h_n.shape(), rng),
               gcn = random_tensor(dt, c_n.shape(), rng);
  const Tensor gy64 = converted(gy, DType::kFloat64), ghn64 = converted(ghn, DType::kFloat64),
               gcn64 = converted(gcn, DType::kFloat64);
  auto run_backward = [&](RNN& r, const RNNInputs& i, DType t, const Tensor& a, const Tensor& hb,
                          const Tensor& cb, const std::vector<std::vector<Tensor>>& ps) {
    std::vector<Tensor> g;
    g.push_back(poisoned(t, x.shape()));
    g.push_back(poisoned(t, h0.shape()));
    g.push_back(poisoned(t, c0.shape()));
    for (const auto& pl : ps) {
      for (const auto& p : pl) g.push_back(poisoned(t, p.shape()));
    }
    std::vector<MutableTensorView> gpv;
    for (std::size_t k = 3; k < g.size(); ++k) gpv.push_back(g[k].mutable_view());
    r.backward(i, {a, hb, lstm ? cb.view() : TensorView()},
               {g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(), gpv});
    return g;
  };
  const std::vector<Tensor> g = run_backward(rnn, in, dt, gy, ghn, gcn, params);
  const std::vector<Tensor> g64 =
      run_backward(rnn64, in64, DType::kFloat64, gy64, ghn64, gcn64, params64);
  for (std::size_t k = 0; k < g.size(); ++k) {
    if (k == 2 && !lstm) continue;  // c0_grad is not written without a cell state
    if (lstm && k >= 3 && (k - 3) % 5 >= 2) continue;  // the peepholes are off
    EXPECT_LT(relative_error(g[k], g64[k]), tol) << "gradient " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, StackSixteenBitTest,
                         ::testing::Combine(::testing::Range(0, 5),
                                            ::testing::Values(DType::kFloat16, DType::kBFloat16)));

// ---- Absent x_grad, h0_grad, c0_grad ----------------------------------------------------------

class StackWithoutSomeGradsTest : public ::testing::TestWithParam<std::tuple<int, DType>> {};

// A backward without x_grad (the caller's input needs no gradient) skips the first layer's
// input-gradient products; one without h0_grad (and c0_grad: initial states that need none)
// skips each layer's first-step recurrent products. Neither changes anything else: every
// gradient still asked for is bit for bit that of a backward with every output, in every dtype
// (bfloat16 with its own products), with and without lengths (an example of no steps among
// them), dropout and a reverse direction, on the fast path and the reference.
TEST_P(StackWithoutSomeGradsTest, GivesTheOtherGradientsBitForBit) {
  const StackCase& c = kStackCases[std::get<0>(GetParam())];
  const DType dt = std::get<1>(GetParam());
  const std::int64_t T = 4, B = 3, I = 24, H = 16, D = c.bidirectional ? 2 : 1, L = c.layers;
  const bool lstm = is_lstm(c.mode);
  std::mt19937_64 rng(71 + std::get<0>(GetParam()));
  RNN rnn(stack_options(c, I, H, dt, T, B));
  std::vector<Tensor> params;
  for (std::int64_t l = 0; l < L; ++l) {
    for (std::int64_t d = 0; d < D; ++d) {
      std::vector<TensorView> v;
      for (const Tensor& t : random_params(c.mode, l == 0 ? I : D * H, H, rng)) {
        v.push_back(params.emplace_back(converted(t, dt)));
      }
      rnn.set_weights(l, d, v);
    }
  }
  const StackCall call(c, dt, T, B, I, H, 2.0, rng);
  const RNNInputs& in = call.in;
  Tensor y(dt, {T, B, D * H}), h_n(dt, {L * D, B, H}), c_n(dt, {L * D, B, H});
  rnn.forward(in, {y.mutable_view(), h_n.mutable_view(), c_n.mutable_view()});
  struct Grads {
    Tensor x, h0, c0;
    std::vector<Tensor> params;
  };
  struct Wanted {
    bool x, h0, c0;
  };
  auto backward = [&](Wanted want) {
    Grads g{poisoned(dt, call.x.shape()),
            poisoned(dt, call.h0.shape()),
            poisoned(dt, call.c0.shape()),
            {}};
    std::vector<MutableTensorView> pv;
    for (const Tensor& p : params)
      pv.push_back(g.params.emplace_back(poisoned(dt, p.shape())).mutable_view());
    auto out = [](bool wanted, Tensor& t) {
      return wanted ? t.mutable_view() : MutableTensorView();
    };
    rnn.backward(in, {call.gy, call.g_h_n, lstm ? TensorView(call.g_c_n) : TensorView()},
                 {out(want.x, g.x), out(want.h0, g.h0), out(want.c0, g.c0), pv});
    return g;
  };
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    return std::memcmp(a.data(), b.data(), a.num_elements() * dtype_size(a.dtype())) == 0;
  };
  for (const bool reference : {false, true}) {
    const ReferenceMode mode(reference);
    const Grads all = backward({true, true, true});
    for (const Wanted want :
         {Wanted{false, true, true}, Wanted{true, false, false}, Wanted{false, false, false},
          Wanted{true, false, true}, Wanted{true, true, false}}) {
      SCOPED_TRACE(::testing::Message() << "reference " << reference << ", x_grad " << want.x
                                        << ", h0_grad " << want.h0 << ", c0_grad " << want.c0);
      const Grads some = backward(want);
      if (want.x) EXPECT_TRUE(same_bits(all.x, some.x));
      if (want.h0) EXPECT_TRUE(same_bits(all.h0, some.h0));
      if (lstm && want.c0) EXPECT_TRUE(same_bits(all.c0, some.c0));
      for (std::size_t k = 0; k < params.size(); ++k) {
        EXPECT_TRUE(same_bits(all.params[k], some.params[k])) << "param " << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, StackWithoutSomeGradsTest,
                         ::testing::Combine(::testing::Range(0, 5),
                                            ::testing::Values(DType::kFloat64, DType::kFloat32,
                                                              DType::kFloat16, DType::kBFloat16)));

// ---- RNN with torch.nn's parameter layout ----------------------------------------------------

// One (layer, direction)'s parameters in torch.nn's layout (weight_ih [G, I], weight_hh [G, H],
// bias_ih, bias_hh [G], and for an LSTM with peepholes wci, wcf, wco [H]), random in dt, the
// biases multiples of 1/64 so that their sum is exact in every dtype; and the same parameters in
// the ops' layout, built here one value at a time.
struct TorchParams {
  std::vector<Tensor> torch, ops;
};
TorchParams torch_params(bool lstm, bool peepholes, std::int64_t I, std::int64_t H, DType dt,
                         std::mt19937_64& rng) {
  const std::int64_t G = (lstm ? 4 : 3) * H;
  TorchParams p;
  p.torch.reserve(7);  // the references below stay valid
  auto random_in = [&](Shape shape, bool bias) {
    Tensor t = random_tensor(DType::kFloat64, shape, rng, -0.5, 0.5);
    if (bias) {
      for (std::int64_t e = 0; e < t.num_elements(); ++e)
        set(t, e, std::round(get(t, e) * 64) / 64);
    }
    return converted(t, dt);
  };
  const Tensor& w_ih = p.torch.emplace_back(random_in(Shape{G, I}, false));
  const Tensor& w_hh = p.torch.emplace_back(random_in(Shape{G, H}, false));
  const Tensor& b_ih = p.torch.emplace_back(random_in(Shape{G}, true));
  const Tensor& b_hh = p.torch.emplace_back(random_in(Shape{G}, true));
  for (int k = 0; lstm && peepholes && k < 3; ++k) p.torch.push_back(random_in(Shape{H}, false));
  // [weight_ihᵀ; weight_hhᵀ]: the LSTM's w, or the GRU's w_i and w_h.
  Tensor w(dt, Shape{I + H, G});
  for (std::int64_t r = 0; r < I + H; ++r) {
    for (std::int64_t g = 0; g < G; ++g) {
      set(w, r * G + g, r < I ? get(w_ih, g * I + r) : get(w_hh, g * H + r - I));
    }
  }
  if (lstm) {
    Tensor b(dt, Shape{G});
    for (std::int64_t g = 0; g < G; ++g) set(b, g, get(b_ih, g) + get(b_hh, g));
    p.ops.push_back(std::move(w));
    p.ops.push_back(std::move(b));
    for (int k = 0; k < 3; ++k)
      p.ops.push_back(peepholes ? converted(p.torch[4 + k], dt) : Tensor(dt, Shape{H}));
    return p;
  }
  Tensor w_i(dt, Shape{I, G}), w_h(dt, Shape{H, G});
  std::memcpy(w_i.data(), w.data(), w_i.num_bytes());
  std::memcpy(w_h.data(), static_cast<const char*>(w.data()) + w_i.num_bytes(), w_h.num_bytes());
  p.ops.push_back(std::move(w_i));
  p.ops.push_back(std::move(w_h));
  p.ops.push_back(converted(b_ih, dt));
  p.ops.push_back(converted(b_hh, dt));
  return p;
}

// The gradients of one (layer, direction) in the ops' layout, in torch.nn's (the order of
// torch_params' `torch`; an LSTM without peepholes: empty tensors for theirs), built here one
// value at a time.
std::vector<Tensor> ops_grads_in_torch_layout(bool lstm, bool peepholes, std::int64_t I,
                                              std::int64_t H, std::span<const Tensor> g) {
  const std::int64_t G = (lstm ? 4 : 3) * H;
  const DType dt = g[0].dtype();
  Tensor w_ih(dt, Shape{G, I}), w_hh(dt, Shape{G, H});
  for (std::int64_t gate = 0; gate < G; ++gate) {
    for (std::int64_t i = 0; i < I; ++i) set(w_ih, gate * I + i, get(g[0], i * G + gate));
    for (std::int64_t j = 0; j < H; ++j) {
      set(w_hh, gate * H + j, lstm ? get(g[0], (I + j) * G + gate) : get(g[1], j * G + gate));
    }
  }
  std::vector<Tensor> r;
  r.push_back(std::move(w_ih));
  r.push_back(std::move(w_hh));
  r.push_back(converted(g[lstm ? 1 : 2], dt));
  r.push_back(converted(g[lstm ? 1 : 3], dt));
  for (int k = 0; lstm && k < 3; ++k) r.push_back(peepholes ? converted(g[2 + k], dt) : Tensor());
  return r;
}

class StackTorchLayoutTest
    : public ::testing::TestWithParam<std::tuple<int, DType, bool /* bias */>> {};

// An RNN created with ParamLayout::kTorch and given torch.nn's tensors computes what the kOps
// RNN computes with the same parameters in the ops' layout, bit for bit: the forward's outputs,
// and every gradient (the weights' transposed back to torch.nn's layout, the LSTM's bias
// gradient twice), in every dtype, with lengths, dropout and a reverse direction, on the fast
// path and the reference; an LSTM with peepholes; without biases (bias=False: absent views,
// zeros), and with absent gradient views (not written, the others unchanged).
TEST_P(StackTorchLayoutTest, GivesTheOpsLayoutsBitsInTorchNnsLayout) {
  const StackCase& c = kStackCases[std::get<0>(GetParam())];
  const DType dt = std::get<1>(GetParam());
  const bool bias = std::get<2>(GetParam());
  const std::int64_t T = 4, B = 3, I = 20, H = 12, D = c.bidirectional ? 2 : 1, L = c.layers;
  const bool lstm = is_lstm(c.mode), peepholes = lstm && bias;  // without: the short form
  std::mt19937_64 rng(97 + std::get<0>(GetParam()));
  RNNOptions options = stack_options(c, I, H, dt, T, B);
  options.lstm.use_peephole = peepholes;
  RNN ops_rnn(options);
  options.param_layout = ParamLayout::kTorch;
  RNN torch_rnn(options);
  ASSERT_EQ(torch_rnn.params_per_layer(), lstm ? 7 : 4);
  std::vector<TorchParams> params;
  for (std::int64_t l = 0; l < L; ++l) {
    for (std::int64_t d = 0; d < D; ++d) {
      TorchParams& p =
          params.emplace_back(torch_params(lstm, peepholes, l == 0 ? I : D * H, H, dt, rng));
      if (!bias) {  // torch.nn's bias=False: no bias tensors, zeros in the ops' layout
        p.torch[2] = Tensor();
        p.torch[3] = Tensor();
        for (std::size_t k : lstm ? std::vector<std::size_t>{1} : std::vector<std::size_t>{2, 3}) {
          p.ops[k] = Tensor(dt, p.ops[k].shape());
        }
      }
      std::vector<TensorView> ops_views(p.ops.begin(), p.ops.end()), torch_views;
      for (const Tensor& t : p.torch)
        torch_views.push_back(t.num_elements() ? t.view() : TensorView());
      ops_rnn.set_weights(l, d, ops_views);
      torch_rnn.set_weights(l, d, torch_views);
    }
  }
  const StackCall call(c, dt, T, B, I, H, 2.0, rng);
  const RNNInputs& in = call.in;
  for (const bool reference : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "reference " << reference);
    const ReferenceMode mode(reference);
    std::vector<Tensor> outs;
    outs.reserve(6);  // the references below stay valid
    for (RNN* rnn : {&ops_rnn, &torch_rnn}) {
      Tensor& y = outs.emplace_back(poisoned(dt, {T, B, D * H}));
      Tensor& h_n = outs.emplace_back(poisoned(dt, {L * D, B, H}));
      Tensor& c_n = outs.emplace_back(poisoned(dt, {L * D, B, H}));
      rnn->forward(in, {y.mutable_view(), h_n.mutable_view(), c_n.mutable_view()});
    }
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(bitwise(outs[k], outs[3 + k])) << "output " << k;
    const TensorView g_c_n = lstm ? TensorView(call.g_c_n) : TensorView();
    // The kOps RNN's gradients, then converted to torch.nn's layout.
    Tensor x_grad = poisoned(dt, call.x.shape()), h0_grad = poisoned(dt, call.h0.shape());
    std::vector<Tensor> ops_grads;
    std::vector<MutableTensorView> ops_views;
    for (const TorchParams& p : params) {
      for (const Tensor& t : p.ops)
        ops_views.push_back(ops_grads.emplace_back(poisoned(dt, t.shape())).mutable_view());
    }
    ops_rnn.backward(in, {call.gy, call.g_h_n, g_c_n},
                     {x_grad.mutable_view(), h0_grad.mutable_view(), {}, ops_views});
    std::vector<Tensor> want;
    const std::size_t Q = lstm ? 5 : 4;
    for (std::size_t ld = 0; ld < params.size(); ++ld) {
      const std::int64_t I_l = ld < std::size_t(D) ? I : D * H;
      for (Tensor& t : ops_grads_in_torch_layout(
               lstm, peepholes, I_l, H, std::span<const Tensor>(ops_grads).subspan(ld * Q, Q))) {
        want.push_back(std::move(t));
      }
    }
    // The kTorch RNN's, every view given, then without the bias gradients.
    for (const bool bias_grads : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "bias gradients " << bias_grads);
      Tensor x_grad2 = poisoned(dt, call.x.shape()), h0_grad2 = poisoned(dt, call.h0.shape());
      std::vector<Tensor> got;
      std::vector<MutableTensorView> got_views;
      for (std::size_t k = 0; k < want.size(); ++k) {
        const bool is_bias = k % std::size_t(torch_rnn.params_per_layer()) - 2 < 2;
        got.push_back(poisoned(dt, want[k].shape()));
        const bool absent = (is_bias && !bias_grads) || want[k].num_elements() == 0;
        got_views.push_back(absent ? MutableTensorView() : got.back().mutable_view());
      }
      torch_rnn.backward(in, {call.gy, call.g_h_n, g_c_n},
                         {x_grad2.mutable_view(), h0_grad2.mutable_view(), {}, got_views});
      EXPECT_TRUE(bitwise(x_grad, x_grad2));
      EXPECT_TRUE(bitwise(h0_grad, h0_grad2));
      for (std::size_t k = 0; k < want.size(); ++k) {
        if (is_absent_input(got_views[k])) continue;
        EXPECT_TRUE(bitwise(want[k], got[k])) << "params[" << k << "]";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, StackTorchLayoutTest,
                         ::testing::Combine(::testing::Values(0, 3, 4),
                                            ::testing::Values(DType::kFloat64, DType::kFloat32,
                                                              DType::kFloat16, DType::kBFloat16),
                                            ::testing::Bool()));

TEST(RNNTorchLayout, RefusesByName) {
  expect_invalid(
      [] {
        RNN r({.mode = RNNMode::kGRU,
               .input_size = 3,
               .hidden_size = 2,
               .param_layout = ParamLayout::kTorch});
      },
      "RNN.create: param_layout kTorch (torch.nn's parameters) is for the torch.nn variants, "
      "modes kLSTMV2 and kGRUResetAfter; got mode kGRU");
  RNN rnn({.mode = RNNMode::kGRUResetAfter,
           .input_size = 3,
           .hidden_size = 2,
           .num_layers = 2,
           .bidirectional = true,
           .max_time = 2,
           .max_batch = 2,
           .param_layout = ParamLayout::kTorch});
  std::mt19937_64 rng(5);
  const TorchParams p = torch_params(false, false, 4, 2, DType::kFloat32, rng);
  std::vector<TensorView> v(p.torch.begin(), p.torch.end());
  // The ops' layout's w_h ([H, 3H]) where torch.nn's weight_hh ([3H, H]) belongs.
  std::vector<TensorView> ops_w_h = v;
  ops_w_h[1] = p.ops[1];
  expect_invalid([&] { rnn.set_weights(1, 1, ops_w_h); },
                 "RNN.set_weights: weight_hh_l1_reverse must have shape [6, 2] (3 * hidden_size, "
                 "hidden_size), got [2, 6]");
  std::vector<TensorView> no_w_ih = v;
  no_w_ih[0] = TensorView();
  expect_invalid([&] { rnn.set_weights(1, 0, no_w_ih); },
                 "RNN.set_weights: weight_ih_l1 is required");
  expect_invalid([&] { rnn.set_weights(1, 0, std::span(v).first(2)); },
                 "RNN.set_weights: BlockGRUResetAfter layers take 4 parameters, got 2");
  RNN lstm({.mode = RNNMode::kLSTMV2,
            .input_size = 3,
            .hidden_size = 2,
            .lstm = {.use_peephole = true},
            .param_layout = ParamLayout::kTorch});
  const TorchParams q = torch_params(true, true, 3, 2, DType::kFloat32, rng);
  std::vector<TensorView> no_wcf(q.torch.begin(), q.torch.end());
  no_wcf[5] = TensorView();
  expect_invalid([&] { lstm.set_weights(0, 0, no_wcf); },
                 "RNN.set_weights: wcf_l0 is required (the LSTM was created with use_peephole)");
  expect_invalid([&] { lstm.set_weights(0, 0, std::span(no_wcf).first(4)); },
                 "RNN.set_weights: wci_l0 is required (the LSTM was created with use_peephole), "
                 "got 4 parameters");
  // A gradient view of the ops' layout in the backward.
  for (std::int64_t l = 0; l < 2; ++l) {
    for (std::int64_t d = 0; d < 2; ++d) {
      const TorchParams first = torch_params(false, false, 3, 2, DType::kFloat32, rng);
      const TorchParams& pl = l == 0 ? first : p;
      rnn.set_weights(l, d, std::vector<TensorView>(pl.torch.begin(), pl.torch.end()));
    }
  }
  const Tensor x = random_tensor(DType::kFloat32, {2, 2, 3}, rng);
  Tensor y(DType::kFloat32, {2, 2, 4}), h_n(DType::kFloat32, {4, 2, 2});
  rnn.forward({.x = x}, {y.mutable_view(), h_n.mutable_view(), {}});
  std::vector<Tensor> grads;
  std::vector<MutableTensorView> gv;
  for (int k = 0; k < 16; ++k) gv.push_back(MutableTensorView());
  Tensor wrong(DType::kFloat32, {2, 6});
  gv[1] = wrong.mutable_view();
  expect_invalid(
      [&] {
        rnn.backward({.x = x}, {y}, {{}, {}, {}, gv});
      },
      "RNN.backward: output params[1] (weight_hh_l0) must have shape [6, 2], got [2, 6]");
}

class LazyTransposedPacksTest : public ::testing::TestWithParam<std::tuple<int, DType>> {};

// A layer packs its weights transposed (for the backward's d_x and carry products) only at the
// first backward that multiplies by them, and again after each set_weights. A backward without
// x_grad first, then one with every gradient, gives the bits of an RNN whose first backward
// wanted every gradient; so does a backward after set_weights replaced weights whose transposes
// were packed (a stale transposed pack would give the old weights' d_x and carries).
TEST_P(LazyTransposedPacksTest, GiveTheBitsOfPacksMadeUpFront) {
  const StackCase& c = kStackCases[std::get<0>(GetParam())];
  const DType dt = std::get<1>(GetParam());
  const std::int64_t T = 4, B = 3, I = 24, H = 16, D = c.bidirectional ? 2 : 1, L = c.layers;
  const bool lstm = is_lstm(c.mode);
  std::mt19937_64 rng(97 + std::get<0>(GetParam()));
  auto random_weights = [&] {
    std::vector<std::vector<Tensor>> w;
    for (std::int64_t k = 0; k < L * D; ++k) {
      w.emplace_back();
      for (const Tensor& t : random_params(c.mode, k / D == 0 ? I : D * H, H, rng)) {
        w.back().push_back(converted(t, dt));
      }
    }
    return w;
  };
  const std::vector<std::vector<Tensor>> first = random_weights(), second = random_weights();
  auto set = [&](RNN& rnn, const std::vector<std::vector<Tensor>>& w) {
    for (std::int64_t k = 0; k < L * D; ++k) {
      const std::vector<TensorView> v(w[k].begin(), w[k].end());
      rnn.set_weights(k / D, k % D, v);
    }
  };
  const StackCall call(c, dt, T, B, I, H, 2.0, rng);
  // forward, then backward with or without x_grad: every gradient computed, x_grad first
  auto grads = [&](RNN& rnn, bool with_x_grad) {
    Tensor y(dt, {T, B, D * H}), h_n(dt, {L * D, B, H}), c_n(dt, {L * D, B, H});
    rnn.forward(call.in, {y.mutable_view(), h_n.mutable_view(), c_n.mutable_view()});
    std::vector<Tensor> g;
    for (const Tensor* t : {&call.x, &call.h0, &call.c0}) g.push_back(poisoned(dt, t->shape()));
    std::vector<MutableTensorView> pv;
    for (const std::vector<Tensor>& w : first) {
      for (const Tensor& p : w)
        pv.push_back(g.emplace_back(poisoned(dt, p.shape())).mutable_view());
    }
    rnn.backward(call.in, {call.gy, call.g_h_n, lstm ? TensorView(call.g_c_n) : TensorView()},
                 {with_x_grad ? g[0].mutable_view() : MutableTensorView(), g[1].mutable_view(),
                  lstm ? g[2].mutable_view() : MutableTensorView(), pv});
    if (!lstm) g.erase(g.begin() + 2);  // no c0_grad
    return g;
  };
  RNN lazy(stack_options(c, I, H, dt, T, B)), upfront(stack_options(c, I, H, dt, T, B));
  set(lazy, first);
  set(upfront, first);
  grads(lazy, false);  // packs the carries' transposes, not the input rows'
  expect_bitwise_equal(grads(lazy, true), grads(upfront, true));
  set(lazy, second);  // the transposes of `first` must not survive
  RNN fresh(stack_options(c, I, H, dt, T, B));
  set(fresh, second);
  expect_bitwise_equal(grads(lazy, true), grads(fresh, true));
}

INSTANTIATE_TEST_SUITE_P(Cases, LazyTransposedPacksTest,
                         ::testing::Combine(::testing::Range(0, 5),
                                            ::testing::Values(DType::kFloat64, DType::kFloat32,
                                                              DType::kFloat16, DType::kBFloat16)));

TEST(RNN, OneLayerEqualsTheOpAndValidates) {
  std::mt19937_64 rng(5);
  const DType dt = DType::kFloat32;
  const std::int64_t T = 3, B = 2, I = 4, H = 5;
  RNN rnn({.mode = RNNMode::kLSTMV2,
           .input_size = I,
           .hidden_size = H,
           .dtype = dt,
           .max_time = T,
           .max_batch = B});
  const Tensor w = random_tensor(dt, {I + H, 4 * H}, rng), b = random_tensor(dt, {4 * H}, rng);
  const TensorView p[2] = {w, b};
  rnn.set_weights(0, 0, p);
  const Tensor x = random_tensor(dt, {T, B, I}, rng);
  Tensor y(dt, {T, B, H}), hn(dt, {1, B, H}), cn(dt, {1, B, H});
  rnn.forward({.x = x}, {y.mutable_view(), hn.mutable_view(), cn.mutable_view()});
  const Tensor z(dt, {B, H});
  const BlockLSTMResult want = block_lstm_v2({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b});
  EXPECT_TRUE(bitwise(y, want.h));
  expect_invalid([&] { rnn.set_weights(1, 0, p); }, "RNN.set_weights: (layer, direction)");
  const Tensor x_big(dt, {T + 1, B, I});
  Tensor y_big(dt, {T + 1, B, H});
  expect_invalid(
      [&] {
        rnn.forward({.x = x_big}, {y_big.mutable_view(), hn.mutable_view(), cn.mutable_view()});
      },
      "RNN.forward: x has shape");
}

// ---- Hostile input: overlap, memory, sizes, attrs, the backward's shapes ----------------------

// Expects `f` to throw blockrnn::Error(kResourceExhausted) whose message contains every needle.
template <typename F>
void expect_exhausted(F&& f, std::initializer_list<const char*> needles) {
  try {
    f();
    ADD_FAILURE() << "expected ResourceExhausted, nothing thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
    for (const char* n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
    }
  }
}

// The memory limit of one test; the previous one afterwards.
struct MemoryLimit {
  long long before = get_memory_limit();
  explicit MemoryLimit(long long bytes) { set_memory_limit(bytes); }
  ~MemoryLimit() { set_memory_limit(before); }
};

std::vector<char> bytes_of(const TensorView& t) {
  const char* p = static_cast<const char*>(t.data);
  return {p, p + t.shape.num_elements() * static_cast<std::int64_t>(dtype_size(t.dtype))};
}

// The seven [T, B, H] outputs of an LSTM forward.
struct LSTMOuts {
  std::vector<Tensor> t;
  LSTMOuts(DType dt, const Shape& tbh) {
    for (int k = 0; k < 7; ++k) t.push_back(Tensor(dt, tbh));
  }
  BlockLSTMOutputs views() { return views_of<BlockLSTMOutputs>(t, std::make_index_sequence<7>()); }
};

TEST(LayerHostile, OutputsOverlappingInputsOrEachOtherAreRefused) {
  const DType dt = DType::kFloat32;
  std::mt19937_64 rng(21);
  const std::int64_t T = 3, B = 2, N = 4;  // I = H = N: x and every output have one shape
  LSTMLayer layer({.input_size = N, .hidden_size = N, .max_time = T, .max_batch = B});
  const Tensor w = random_tensor(dt, {2 * N, 4 * N}, rng), b = random_tensor(dt, {4 * N}, rng);
  layer.set_weights(w, b);
  Tensor x = random_tensor(dt, {T, B, N}, rng);
  const Tensor cs0 = random_tensor(dt, {B, N}, rng);
  Tensor h0 = random_tensor(dt, {B, N}, rng);
  const std::vector<char> x_before = bytes_of(x), h0_before = bytes_of(h0);
  LSTMOuts outs(dt, {T, B, N});
  BlockLSTMOutputs out = outs.views();
  out.h = x.mutable_view();  // h on x: the forward would overwrite x
  expect_invalid([&] { layer.forward({.x = x, .cs_prev = cs0, .h_prev = h0}, out); },
                 "LSTMLayer.forward: output h overlaps input x");
  EXPECT_EQ(bytes_of(x), x_before);
  out = outs.views();
  out.cs = out.i;
  expect_invalid([&] { layer.forward({.x = x, .cs_prev = cs0, .h_prev = h0}, out); },
                 "LSTMLayer.forward: outputs i and cs overlap");

  // Empty work (T = 0) still writes the state gradients: h_prev_grad on h_prev is refused.
  const Tensor x0(dt, {0, B, N}), steps(dt, {0, B, N});
  Tensor x0_grad(dt, {0, B, N}), cs0_grad(dt, {B, N}), w_grad(dt, {2 * N, 4 * N}),
      b_grad(dt, {4 * N}), p_grad(dt, {N}), p2_grad(dt, {N}), p3_grad(dt, {N});
  const LSTMLayerGradInputs gin{.x = x0,
                                .cs_prev = cs0,
                                .h_prev = h0,
                                .i = steps,
                                .cs = steps,
                                .f = steps,
                                .o = steps,
                                .ci = steps,
                                .co = steps,
                                .h = steps,
                                .cs_grad = steps,
                                .h_grad = steps};
  const BlockLSTMGradOutputs gout{x0_grad.mutable_view(), cs0_grad.mutable_view(),
                                  h0.mutable_view(),      w_grad.mutable_view(),
                                  p_grad.mutable_view(),  p2_grad.mutable_view(),
                                  p3_grad.mutable_view(), b_grad.mutable_view()};
  expect_invalid([&] { layer.backward(gin, gout); },
                 "LSTMLayer.backward: output h_prev_grad overlaps input h_prev");
  EXPECT_EQ(bytes_of(h0), h0_before);

  // A caller's workspace on an output.
  GRUResetAfterLayer gru(
      {.input_size = N, .hidden_size = N, .max_time = T, .max_batch = B, .caller_workspace = true});
  gru.set_weights(random_tensor(dt, {N, 3 * N}, rng), random_tensor(dt, {N, 3 * N}, rng),
                  random_tensor(dt, {3 * N}, rng), random_tensor(dt, {3 * N}, rng));
  std::vector<Tensor> g;
  for (int k = 0; k < 5; ++k) g.push_back(Tensor(dt, {T, B, N}));
  const BlockGRUResetAfterOutputs gout5 =
      views_of<BlockGRUResetAfterOutputs>(g, std::make_index_sequence<5>());
  expect_invalid(
      [&] {
        gru.forward({.x = x, .h_prev = h0}, gout5, {g[4].data(), gru.workspace_bytes(T, B)});
      },
      "workspace");
  // h_prev inside the output h.
  std::vector<float> ws(gru.workspace_bytes(T, B) / sizeof(float));
  expect_invalid(
      [&] {
        gru.forward({.x = x, .h_prev = TensorView(g[4].data(), dt, {B, N})}, gout5,
                    {ws.data(), ws.size() * sizeof(float)});
      },
      "GRUResetAfterLayer.forward: output h overlaps input h_prev");
}

TEST(RNNHostile, OutputsOverlappingInputsAreRefused) {
  const DType dt = DType::kFloat32;
  std::mt19937_64 rng(22);
  const std::int64_t T = 3, B = 2, H = 3, I = 2 * H;  // y [T, B, 2H] has x's shape
  RNN rnn({.mode = RNNMode::kLSTMV2,
           .input_size = I,
           .hidden_size = H,
           .bidirectional = true,
           .dtype = dt,
           .max_time = T,
           .max_batch = B});
  std::vector<Tensor> params;  // w, b of each direction
  for (std::int64_t d = 0; d < 2; ++d) {
    params.push_back(random_tensor(dt, {I + H, 4 * H}, rng));
    params.push_back(random_tensor(dt, {4 * H}, rng));
    const TensorView p[2] = {params[2 * d], params[2 * d + 1]};
    rnn.set_weights(0, d, p);
  }
  Tensor x = random_tensor(dt, {T, B, I}, rng);
  const std::vector<char> x_before = bytes_of(x);
  Tensor hn(dt, {2, B, H}), cn(dt, {2, B, H});
  expect_invalid(
      [&] {
        rnn.forward({.x = x}, {x.mutable_view(), hn.mutable_view(), cn.mutable_view()});
      },
      "RNN.forward: output y overlaps input x");
  EXPECT_EQ(bytes_of(x), x_before);
  Tensor y(dt, {T, B, 2 * H});
  rnn.forward({.x = x}, {y.mutable_view(), hn.mutable_view(), cn.mutable_view()});
  // A weight gradient on y_grad: the reverse direction reads y_grad after the forward
  // direction's backward wrote its weight gradients. Both live in one buffer of the larger's
  // size (w_grad [I+H, 4H]), so the gradient overlaps y_grad and nothing else: a view past
  // y_grad's own allocation would reach whatever the heap put next (x, at times, which the
  // check names first).
  Tensor shared = random_tensor(dt, {(I + H) * 4 * H}, rng);
  const TensorView y_grad(shared.data(), dt, Shape{T, B, 2 * H});
  Tensor x_grad(dt, {T, B, I}), h0_grad(dt, {2, B, H}), c0_grad(dt, {2, B, H});
  std::vector<Tensor> pg;
  std::vector<MutableTensorView> pv;
  for (std::int64_t d = 0; d < 2; ++d) {
    for (const Shape& s : {Shape{I + H, 4 * H}, Shape{4 * H}, Shape{H}, Shape{H}, Shape{H}}) {
      pg.push_back(Tensor(dt, s));
    }
  }
  for (Tensor& t : pg) pv.push_back(t.mutable_view());
  pv[0] = MutableTensorView(shared.data(), dt, Shape{I + H, 4 * H});
  expect_invalid(
      [&] {
        rnn.backward({.x = x}, {.y_grad = y_grad},
                     {x_grad.mutable_view(), h0_grad.mutable_view(), c0_grad.mutable_view(), pv});
      },
      "RNN.backward: output params[0] overlaps input y_grad");
}

TEST(LayerHostile, WorkspaceAndReserveAreSizedToTheCallNotToMaxTimeTimesMaxBatch) {
  // A call of max_time steps and max_batch examples would need gigabytes; each call here needs
  // a few MiB. Under a limit far below the product, both calls run and equal the one-shot op.
  const MemoryLimit limit(256LL << 20);
  const DType dt = DType::kFloat32;
  std::mt19937_64 rng(23);
  const std::int64_t I = 16, H = 16, Tmax = 20000, Bmax = 512;
  LSTMLayer layer({.input_size = I, .hidden_size = H, .max_time = Tmax, .max_batch = Bmax});
  const Tensor w = random_tensor(dt, {I + H, 4 * H}, rng), b = random_tensor(dt, {4 * H}, rng);
  layer.set_weights(w, b);
  RNN rnn({.mode = RNNMode::kLSTM,
           .input_size = I,
           .hidden_size = H,
           .dtype = dt,
           .max_time = Tmax,
           .max_batch = Bmax});
  const TensorView p[2] = {w, b};
  rnn.set_weights(0, 0, p);
  for (const auto [T, B] : {std::pair<std::int64_t, std::int64_t>{Tmax, 1}, {10, Bmax}}) {
    const Tensor x = random_tensor(dt, {T, B, I}, rng);
    const Tensor z(dt, {B, H});
    LSTMOuts outs(dt, {T, B, H});
    layer.forward({.x = x, .cs_prev = z, .h_prev = z}, outs.views());
    const BlockLSTMResult want = block_lstm({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b});
    EXPECT_TRUE(bitwise(outs.t[6], want.h)) << T << " x " << B;
    Tensor y(dt, {T, B, H}), hn(dt, {1, B, H}), cn(dt, {1, B, H});
    rnn.forward({.x = x}, {y.mutable_view(), hn.mutable_view(), cn.mutable_view()});
    EXPECT_TRUE(bitwise(y, want.h)) << T << " x " << B;
  }
}

TEST(LayerHostile, TheMemoryLimitHoldsForLayersAndRNN) {
  const DType dt = DType::kFloat32;
  std::mt19937_64 rng(24);
  {
    const MemoryLimit limit(64LL << 20);
    // The weights' copies and packed panels alone (128 MiB of w) exceed the limit.
    expect_exhausted([] { LSTMLayer l({.input_size = 2048, .hidden_size = 2048}); },
                     {"LSTMLayer.create: this call needs", "the weights for input_size 2048",
                      "memory limit of 64.0 MiB"});
    expect_exhausted(
        [] {
          RNN r({.input_size = 1024, .hidden_size = 1024, .num_layers = 4, .bidirectional = true});
        },
        {"RNN.create: this call needs", "8 layer objects", "memory limit"});
  }
  // A call the one-shot op refuses under the limit is refused by the layer and the stack too.
  const std::int64_t T = 256, B = 64, I = 16, H = 16;
  LSTMLayer layer({.input_size = I, .hidden_size = H, .max_time = T, .max_batch = B});
  const Tensor w = random_tensor(dt, {I + H, 4 * H}, rng), b = random_tensor(dt, {4 * H}, rng);
  layer.set_weights(w, b);
  RNN rnn({.mode = RNNMode::kLSTM,
           .input_size = I,
           .hidden_size = H,
           .dtype = dt,
           .max_time = T,
           .max_batch = B});
  const TensorView p[2] = {w, b};
  rnn.set_weights(0, 0, p);
  const Tensor x = random_tensor(dt, {T, B, I}, rng), z(dt, {B, H});
  LSTMOuts outs(dt, {T, B, H});
  Tensor y(dt, {T, B, H}), hn(dt, {1, B, H}), cn(dt, {1, B, H});
  const MemoryLimit limit(4LL << 20);
  expect_exhausted(
      [&] { block_lstm({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b}, outs.views()); },
      {"BlockLSTM: this call needs"});
  expect_exhausted([&] { layer.forward({.x = x, .cs_prev = z, .h_prev = z}, outs.views()); },
                   {"LSTMLayer.forward: this call needs", "memory limit of 4.0 MiB"});
  expect_exhausted(
      [&] {
        rnn.forward({.x = x}, {y.mutable_view(), hn.mutable_view(), cn.mutable_view()});
      },
      {"RNN.forward: this call needs", "memory limit of 4.0 MiB"});
}

// A 16-bit layer's workspace holds the float32 copies of its call's views after the kernel's
// part: workspace_bytes (what the memory check counts and the workspace grows to) is the float32
// layer's plus the copies of the largest call, the backward's: x and x_grad [T, B, I], h_prev and
// h_prev_grad [B, H], r, u, c, h and h_grad [T, B, H], and the weight gradients. A bfloat16
// layer multiplies bfloat16 operands and holds the forward's after the copies: x rounded
// [T, B, I] and the two rounded-h operands (h and h·r), two buffers of [B, H] each.
TEST(LayerHostile, SixteenBitWorkspaceCountsTheFloat32Copies) {
  const std::int64_t T = 6, B = 4, I = 5, H = 7;
  const LayerShape f32{.input_size = I, .hidden_size = H, .max_time = T, .max_batch = B};
  const GRULayer l32(f32);
  for (const DType dt : {DType::kFloat16, DType::kBFloat16}) {
    LayerShape s = f32;
    s.dtype = dt;
    const GRULayer l16(s);
    const std::int64_t copies =
        2 * T * B * I + 2 * B * H + 5 * T * B * H + (I + H) * 3 * H + 3 * H;  // float32 elements
    // bfloat16 products (test_util.h, bf16_operand_floats, says how each is sized on the two
    // kernels): the larger of the forward's operands and the backward's.
    const bool dp = core::active_isa() == Isa::kAvx512 && core::cpu_has_avx512_bf16();
    const std::int64_t bf16_fwd = bf16_operand_floats("BlockGRU", T, B, I, H, dp);
    const std::int64_t bf16_bwd = bf16_operand_floats("BlockGRUGrad", T, B, I, H, dp);
    const std::int64_t bf16_operands = dt == DType::kBFloat16 ? std::max(bf16_fwd, bf16_bwd) : 0;
    EXPECT_EQ(l16.workspace_bytes(T, B),
              l32.workspace_bytes(T, B) + 4 * std::size_t(copies + bf16_operands))
        << dtype_name(dt);
  }
}

TEST(LayerHostile, HugeSizesAreRefusedByNameBeforeAnythingIsAllocated) {
  // max_time 2^20, max_batch = hidden_size = 2^10: creation allocates nothing for the product;
  // a call of that size is refused by the memory check before it allocates (its views are
  // never touched: addresses far apart, no data behind them).
  LSTMLayer layer(
      {.input_size = 0, .hidden_size = 1 << 10, .max_time = 1 << 20, .max_batch = 1 << 10});
  const Tensor w(DType::kFloat32, {1 << 10, 4 << 10}), b(DType::kFloat32, {4 << 10});
  layer.set_weights(w, b);
  const Shape tbh{1 << 20, 1 << 10, 1 << 10};
  const Tensor z(DType::kFloat32, {1 << 10, 1 << 10});
  std::vector<MutableTensorView> o;
  for (std::uintptr_t k = 0; k < 7; ++k) {
    o.emplace_back(reinterpret_cast<void*>((k + 1) << 44), DType::kFloat32, tbh);
  }
  const BlockLSTMOutputs out{o[0], o[1], o[2], o[3], o[4], o[5], o[6]};
  const TensorView x(reinterpret_cast<const void*>(std::uintptr_t(8) << 44), DType::kFloat32,
                     Shape{1 << 20, 1 << 10, 0});
  expect_exhausted([&] { layer.forward({.x = x, .cs_prev = z, .h_prev = z}, out); },
                   {"LSTMLayer.forward: this call needs", "TiB", "memory limit"});
  // Sizes whose byte counts cannot be addressed at all name the sizes.
  expect_exhausted(
      [] {
        GRULayer l(
            {.input_size = 1, .hidden_size = 1, .max_time = 1LL << 40, .max_batch = 1LL << 40});
      },
      {"GRULayer.create: max_time 1099511627776 and max_batch 1099511627776 are too large"});
  expect_exhausted([] { GRULayer l({.input_size = 1, .hidden_size = 1LL << 40}); },
                   {"GRULayer.create: input_size 1 and hidden_size 1099511627776 are too large"});
}

TEST(RNNHostile, HugeOrInvalidOptionsThrowOnlyBlockrnnErrors) {
  const auto start = std::chrono::steady_clock::now();
  expect_exhausted([] { RNN r({.input_size = 4, .hidden_size = 4, .num_layers = 1000000000}); },
                   {"RNN.create: this call needs", "1000000000 layer objects"});
  // Refused up front, not after creating layers until memory runs out.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  expect_exhausted(
      [] {
        RNN r({.input_size = 4,
               .hidden_size = 4,
               .num_layers = 1 << 20,
               .max_time = 1 << 20,
               .max_batch = 1 << 20});
      },
      {"RNN.create: num_layers 1048576, max_time 1048576 and max_batch 1048576 are too large"});
  // Products of the options before any bound on them (the RNN fuzzer's finds: they were
  // computed in int64 and overflowed).
  expect_exhausted(
      [] {
        RNN r({.input_size = 4,
               .hidden_size = 4,
               .num_layers = std::numeric_limits<std::int64_t>::max(),
               .bidirectional = true,
               .max_time = 0});
      },
      {"RNN.create: num_layers * directions = 9223372036854775807 * 2 overflows int64"});
  expect_exhausted(
      [] {
        RNN r({.input_size = 4,
               .hidden_size = std::numeric_limits<std::int64_t>::max(),
               .bidirectional = true});
      },
      {"RNN.create: 2 * hidden_size (the upper layers' input) = 2 * 9223372036854775807 "
       "overflows int64"});
  expect_invalid([] { RNN r({.mode = static_cast<RNNMode>(9), .hidden_size = 4}); },
                 "RNN.create: mode must be");
  expect_invalid([] { RNN r({.input_size = -1, .hidden_size = 4}); },
                 "RNN.create: input_size must be >= 0");
  // Sizes of a call past the bounds are errors, not overflowing arithmetic.
  const RNN rnn({.input_size = 4, .hidden_size = 4, .max_time = 8, .max_batch = 2});
  expect_invalid([&] { (void)rnn.reserve_elems(std::numeric_limits<std::int64_t>::max(), 2); },
                 "RNN.reserve_elems: T and B must be in [0, 8] and [0, 2]");
  const GRULayer layer({.input_size = 4, .hidden_size = 4, .max_time = 8, .max_batch = 2});
  expect_invalid([&] { (void)layer.workspace_bytes(-1, 1); },
                 "GRULayer.workspace_bytes: T and B must be in [0, 8] and [0, 2]");
}

TEST(LayerHostile, AttrsAcceptWhatTheRawOpAccepts) {
  const DType dt = DType::kFloat32;
  std::mt19937_64 rng(25);
  const std::int64_t T = 3, B = 2, I = 2, H = 3;
  const Tensor x = random_tensor(dt, {T, B, I}, rng), z = random_tensor(dt, {B, H}, rng);
  const Tensor w = random_tensor(dt, {I + H, 4 * H}, rng), b = random_tensor(dt, {4 * H}, rng);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // NaN and ±inf keep their meaning; 3.4028235e38 is float32's largest as numpy prints it.
  for (const double fb : {nan, inf, -inf, 3.4028235e38}) {
    for (const double clip : {0.5, nan, 3.4028235e38}) {
      LSTMLayer layer({.input_size = I, .hidden_size = H, .max_time = T, .max_batch = B},
                      {.forget_bias = fb, .cell_clip = clip});
      layer.set_weights(w, b);
      LSTMOuts outs(dt, {T, B, H});
      layer.forward({.x = x, .cs_prev = z, .h_prev = z}, outs.views());
      const BlockLSTMResult want = block_lstm({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b},
                                              {.forget_bias = fb, .cell_clip = clip});
      EXPECT_TRUE(bitwise(outs.t[6], want.h)) << fb << " " << clip;
      EXPECT_TRUE(bitwise(outs.t[1], want.cs)) << fb << " " << clip;
    }
  }
  const Tensor S = scalar_int64(T), zeros_h(dt, {H});
  const TensorView ins[] = {S, x, z, z, w, zeros_h, zeros_h, zeros_h, b};
  EXPECT_NO_THROW(
      run_op("BlockLSTM", ins, {{"forget_bias", 3.4028235e38}, {"cell_clip", 3.4028235e38}}));
  expect_invalid(
      [&] {
        run_op("BlockLSTM", ins, {{"cell_clip", 1e39}});
      },
      "BlockLSTM: attr cell_clip must round to a finite float32");
  expect_invalid([] { LSTMLayer l({.input_size = 1, .hidden_size = 1}, {.forget_bias = -1e39}); },
                 "LSTMLayer.create: attr forget_bias must round to a finite float32");
}

// The message of the InvalidArgument `f` throws, past its "<op or layer>: " prefix.
template <typename F>
std::string rule_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    const std::string m = e.what();
    const std::size_t colon = m.find(": ");
    return colon == std::string::npos ? m : m.substr(colon + 2);
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

// Each rule the one-shot ops and the layer objects share is written once (ops/checks.h): the same
// bad seq_len_max, seq_lengths or attr gets the same message from the op, its layer and the RNN,
// word for word after the name; and the typed op refuses the attrs its name-based call and its
// layers refuse.
TEST(LayerHostile, TheOpsAndTheLayersShareOneRuleAndMessage) {
  const DType dt = DType::kFloat32;
  std::mt19937_64 rng(27);
  const std::int64_t T = 3, B = 2, I = 2, H = 3;
  const Tensor x = random_tensor(dt, {T, B, I}, rng), z(dt, {B, H});
  const Tensor w = random_tensor(dt, {I + H, 4 * H}, rng), b = random_tensor(dt, {4 * H}, rng);
  LSTMLayer layer({.input_size = I, .hidden_size = H, .max_time = T, .max_batch = B});
  layer.set_weights(w, b);
  RNN rnn({.mode = RNNMode::kLSTM,
           .input_size = I,
           .hidden_size = H,
           .dtype = DType::kFloat64,
           .max_time = T,
           .max_batch = B});
  const std::vector<Tensor> params = random_params(RNNMode::kLSTM, I, H, rng);
  rnn.set_weights(0, 0, std::vector<TensorView>(params.begin(), params.end()));
  LSTMOuts outs(dt, {T, B, H});
  const Tensor x64 = random_tensor(DType::kFloat64, {T, B, I}, rng);
  Tensor y(DType::kFloat64, {T, B, H});

  const auto seq_lengths_rule = [&](const Tensor& L) {
    const std::string op = rule_message(
        [&] { block_lstm({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b, .seq_lengths = L}); });
    EXPECT_EQ(rule_message([&] {
                layer.forward({.x = x, .cs_prev = z, .h_prev = z, .seq_lengths = L}, outs.views());
              }),
              op);
    EXPECT_EQ(
        rule_message([&] { rnn.forward({.x = x64, .seq_lengths = L}, {.y = y.mutable_view()}); }),
        op);
    return op;
  };
  Tensor too_long = lengths_tensor({1, T + 1});
  EXPECT_EQ(seq_lengths_rule(too_long),
            "seq_lengths must be between 0 and 3 (time_len of x), got seq_lengths[1] = 4");
  EXPECT_NE(seq_lengths_rule(Tensor(DType::kFloat64, {B})).find("seq_lengths must be int64"),
            std::string::npos);
  EXPECT_NE(seq_lengths_rule(lengths_tensor({1, 2, 3})).find("seq_lengths must have shape [2]"),
            std::string::npos);
  EXPECT_NE(seq_lengths_rule(Tensor(DType::kInt64, {B, 1})).find("seq_lengths must be rank 1"),
            std::string::npos);

  const std::string S_op = rule_message([&] {
    block_lstm({.seq_len_max = T + 1, .x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b});
  });
  EXPECT_EQ(S_op, "seq_len_max must be between 0 and 3 (time_len of x), got 4");
  EXPECT_EQ(rule_message([&] {
              layer.forward({.seq_len_max = T + 1, .x = x, .cs_prev = z, .h_prev = z},
                            outs.views());
            }),
            S_op);

  // An initial state of the wrong shape.
  const Tensor z_bad(dt, {B, H + 1});
  const std::string state_op =
      rule_message([&] { block_lstm({.x = x, .cs_prev = z, .h_prev = z_bad, .w = w, .b = b}); });
  EXPECT_EQ(state_op, "h_prev must have shape [2, 3] (batch_size, cell_size), got [2, 4]");
  EXPECT_EQ(
      rule_message([&] { layer.forward({.x = x, .cs_prev = z, .h_prev = z_bad}, outs.views()); }),
      state_op);
  // The stack's states are shapes of its own, [num_layers * directions, B, H], in the words of its
  // options.
  const Tensor h0_bad(DType::kFloat64, {1, B, H + 1});
  EXPECT_EQ(
      rule_message([&] { rnn.forward({.x = x64, .h0 = h0_bad}, {.y = y.mutable_view()}); }),
      "h0 must have shape [1, 2, 3] (num_layers * directions, batch, hidden_size), got [1, 2, 4]");

  // A caller's output of the wrong shape, in the sequence and the cell layers.
  LSTMOuts bad_outs(dt, {T, B, H});
  bad_outs.t[6] = Tensor(dt, {T, B, H + 1});
  const std::string out_op = rule_message(
      [&] { block_lstm({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b}, bad_outs.views()); });
  EXPECT_EQ(out_op, "output h must have shape [3, 2, 3], got [3, 2, 4]");
  EXPECT_EQ(
      rule_message([&] { layer.forward({.x = x, .cs_prev = z, .h_prev = z}, bad_outs.views()); }),
      out_op);
  LSTMCellLayer cell({.input_size = I, .hidden_size = H, .max_batch = B});
  cell.set_weights(w, b);
  const Tensor x_cell = random_tensor(dt, {B, I}, rng);
  LSTMOuts cell_outs(dt, {B, H});
  cell_outs.t[0] = Tensor(DType::kFloat64, {B, H});
  const auto cell_views = [&] {
    const BlockLSTMOutputs o = cell_outs.views();
    return LSTMBlockCellOutputs{o.i, o.cs, o.f, o.o, o.ci, o.co, o.h};
  };
  const std::string cell_op = rule_message([&] {
    lstm_block_cell({.x = x_cell, .cs_prev = z, .h_prev = z, .w = w, .b = b}, cell_views());
  });
  EXPECT_EQ(cell_op, "output i must be float32, got float64");
  EXPECT_EQ(
      rule_message([&] { cell.forward({.x = x_cell, .cs_prev = z, .h_prev = z}, cell_views()); }),
      cell_op);

  // forget_bias and cell_clip: the name-based op, the typed op (which ran with an infinite attr
  // before) and the layers.
  const Tensor S = scalar_int64(T), zeros_h(dt, {H});
  const TensorView ins[] = {S, x, z, z, w, zeros_h, zeros_h, zeros_h, b};
  const std::string by_name = rule_message([&] {
    run_op("BlockLSTM", ins, {{"cell_clip", 1e39}});
  });
  EXPECT_EQ(by_name.rfind("attr cell_clip must round to a finite float32", 0), 0u) << by_name;
  EXPECT_EQ(rule_message([&] {
              block_lstm({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b}, {.cell_clip = 1e39});
            }),
            by_name);
  EXPECT_EQ(rule_message([&] {
              block_lstm_v2({.x = x, .cs_prev = z, .h_prev = z, .w = w, .b = b},
                            {.cell_clip = 1e39});
            }),
            by_name);
  EXPECT_EQ(
      rule_message([] { LSTMLayer l({.input_size = 1, .hidden_size = 1}, {.cell_clip = 1e39}); }),
      by_name);
  EXPECT_EQ(rule_message(
                [] { LSTMCellLayer l({.input_size = 1, .hidden_size = 1}, {.cell_clip = 1e39}); }),
            by_name);
  const Tensor x1 = random_tensor(dt, {B, I}, rng);
  EXPECT_EQ(rule_message([&] {
              lstm_block_cell({.x = x1, .cs_prev = z, .h_prev = z, .w = w, .b = b},
                              {.cell_clip = 1e39});
            }),
            by_name);
  EXPECT_EQ(rule_message([&] {
              lstm_block_cell({.x = x1, .cs_prev = z, .h_prev = z, .w = w, .b = b},
                              {.forget_bias = -1e39});
            }).rfind("attr forget_bias must round to a finite float32", 0),
            0u);
}

TEST(RNNHostile, BackwardMustRepeatTheForwardCallsShapes) {
  const DType dt = DType::kFloat64;
  std::mt19937_64 rng(26);
  const std::int64_t B = 2, I = 2, H = 3;
  RNN rnn({.mode = RNNMode::kGRU,
           .input_size = I,
           .hidden_size = H,
           .num_layers = 2,
           .dtype = dt,
           .max_time = 5,
           .max_batch = 4});
  for (std::int64_t l = 0; l < 2; ++l) {
    const std::vector<Tensor> p = random_params(RNNMode::kGRU, l == 0 ? I : H, H, rng);
    const TensorView v[4] = {p[0], p[1], p[2], p[3]};
    rnn.set_weights(l, 0, v);
  }
  const Tensor lens = lengths_tensor({3, 1});
  const Tensor x5 = random_tensor(dt, {5, B, I}, rng);
  Tensor y(dt, {5, B, H}), hn(dt, {2, B, H});
  rnn.forward({.x = x5, .seq_lengths = lens}, {y.mutable_view(), hn.mutable_view(), {}});
  const Tensor x3 = random_tensor(dt, {3, B, I}, rng), y3_grad = random_tensor(dt, {3, B, H}, rng);
  Tensor x_grad(dt, {3, B, I}), h0_grad(dt, {2, B, H});
  std::vector<Tensor> pg;
  for (std::int64_t l = 0; l < 2; ++l) {
    const std::int64_t Il = l == 0 ? I : H;
    for (const Shape& s : {Shape{Il + H, 2 * H}, Shape{Il + H, H}, Shape{2 * H}, Shape{H}}) {
      pg.push_back(Tensor(dt, s));
    }
  }
  std::vector<MutableTensorView> pv;
  for (Tensor& t : pg) pv.push_back(t.mutable_view());
  expect_invalid(
      [&] {
        rnn.backward({.x = x3, .seq_lengths = lens}, {.y_grad = y3_grad},
                     {x_grad.mutable_view(), h0_grad.mutable_view(), {}, pv});
      },
      "RNN.backward: x has 3 time steps and batch 2, the forward call the RNN's reserve holds "
      "had 5 and 2");
}

TEST(BlockGRUResetAfterDefaults, UnsetSeqLenMaxRunsEveryStep) {
  const DType dt = DType::kFloat64;
  std::mt19937_64 rng(27);
  const std::int64_t T = 4, B = 2, I = 3, H = 2;
  const Tensor x = random_tensor(dt, {T, B, I}, rng), h0 = random_tensor(dt, {B, H}, rng);
  const Tensor wi = random_tensor(dt, {I, 3 * H}, rng), wh = random_tensor(dt, {H, 3 * H}, rng);
  const Tensor bi = random_tensor(dt, {3 * H}, rng), bh = random_tensor(dt, {3 * H}, rng);
  BlockGRUResetAfterInputs in{.x = x, .h_prev = h0, .w_i = wi, .w_h = wh, .b_i = bi, .b_h = bh};
  const BlockGRUResetAfterResult unset = block_gru_reset_after(in);
  in.seq_len_max = T;
  const BlockGRUResetAfterResult all = block_gru_reset_after(in);
  EXPECT_TRUE(bitwise(unset.h, all.h));
  EXPECT_FALSE(all_zero(unset.h, (T - 1) * B * H));  // the last step ran
  const Tensor hg = random_tensor(dt, {T, B, H}, rng);
  BlockGRUResetAfterGradInputs gin{.x = x,
                                   .h_prev = h0,
                                   .w_i = wi,
                                   .w_h = wh,
                                   .b_i = bi,
                                   .b_h = bh,
                                   .r = all.r,
                                   .u = all.u,
                                   .n = all.n,
                                   .hn = all.hn,
                                   .h = all.h,
                                   .h_grad = hg};
  const BlockGRUResetAfterGradResult g_unset = block_gru_reset_after_grad(gin);
  gin.seq_len_max = T;
  const BlockGRUResetAfterGradResult g_all = block_gru_reset_after_grad(gin);
  EXPECT_TRUE(bitwise(g_unset.x_grad, g_all.x_grad));
  EXPECT_TRUE(bitwise(g_unset.w_h_grad, g_all.w_h_grad));
  EXPECT_FALSE(all_zero(g_unset.w_h_grad));
}

// One call at a time per layer object and RNN: a second call while one runs is refused by name
// (it would race on the object's workspace, weights and reserve). Made deterministic by making
// the second call from the first call's cancel check, which runs between its steps.
struct ReentrantCall {
  std::function<void()> call;
  std::string message;
  int asked = 0;
};

bool call_again(void* user) {
  auto* r = static_cast<ReentrantCall*>(user);
  if (r->asked++ == 0) {
    try {
      r->call();
      r->message = "accepted";
    } catch (const Error& e) {
      r->message = e.what();
    }
  }
  return false;  // never cancel the first call
}

TEST(LayerHostile, ASecondCallWhileOneRunsIsRefused) {
  const std::int64_t T = 300000, B = 1, I = 2, H = 4;
  std::mt19937_64 rng(3);
  GRULayer layer({.input_size = I, .hidden_size = H, .max_time = T, .max_batch = B});
  layer.set_weights(random_tensor(DType::kFloat32, {I + H, 2 * H}, rng),
                    random_tensor(DType::kFloat32, {I + H, H}, rng),
                    random_tensor(DType::kFloat32, {2 * H}, rng),
                    random_tensor(DType::kFloat32, {H}, rng));
  const Tensor x = random_tensor(DType::kFloat32, {T, B, I}, rng);
  const Tensor h0 = random_tensor(DType::kFloat32, {B, H}, rng);
  std::vector<Tensor> o;
  for (int k = 0; k < 4; ++k) o.emplace_back(DType::kFloat32, Shape{T, B, H});
  const BlockGRUOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                            o[3].mutable_view()};
  ReentrantCall again{[&] { layer.forward({.x = x, .h_prev = h0}, out); }};
  set_cancel_check(call_again, &again);
  EXPECT_NO_THROW(layer.forward({.x = x, .h_prev = h0}, out));
  set_cancel_check(nullptr, nullptr);
  ASSERT_GT(again.asked, 0) << "the call never asked its cancel check";
  EXPECT_EQ(again.message,
            "GRULayer.forward: another call on this object is running (one call at a time per "
            "object)");
  // The object is free again afterwards.
  EXPECT_NO_THROW(layer.forward({.x = x, .h_prev = h0}, out));
}

// A refused set_weights changes nothing: the layer keeps the weights it had (the old code
// replaced the first copy before checking the second, and its views pointed at the freed copy:
// a read after free that ASan reports). Through the RNN too.
class RefusedSetWeights : public ::testing::TestWithParam<bool> {};

TEST_P(RefusedSetWeights, KeepsTheWeightsTheLayerHad) {
  const ReferenceMode mode(GetParam());  // the reference kernels read the weight copies
  const std::int64_t T = 3, B = 2, I = 3, H = 4;
  std::mt19937_64 rng(11);
  auto weights = [&] {
    std::vector<Tensor> w;
    w.push_back(random_tensor(DType::kFloat32, {I + H, 2 * H}, rng));
    w.push_back(random_tensor(DType::kFloat32, {I + H, H}, rng));
    w.push_back(random_tensor(DType::kFloat32, {2 * H}, rng));
    w.push_back(random_tensor(DType::kFloat32, {H}, rng));
    return w;
  };
  const std::vector<Tensor> w = weights(), other = weights();
  const Tensor x = random_tensor(DType::kFloat32, {T, B, I}, rng);
  const Tensor h0 = random_tensor(DType::kFloat32, {B, H}, rng);
  const Tensor wrong = random_tensor(DType::kFloat32, {I + H, H + 1}, rng);
  auto run = [&](GRULayer& layer) {
    std::vector<Tensor> o;
    for (int k = 0; k < 4; ++k) o.emplace_back(DType::kFloat32, Shape{T, B, H});
    layer.forward({.x = x, .h_prev = h0}, {o[0].mutable_view(), o[1].mutable_view(),
                                           o[2].mutable_view(), o[3].mutable_view()});
    return o;
  };
  GRULayer layer({.input_size = I, .hidden_size = H, .max_time = T, .max_batch = B});
  layer.set_weights(w[0], w[1], w[2], w[3]);
  const std::vector<Tensor> want = run(layer);
  // The first weight is a valid, different one; the second has the wrong shape.
  expect_invalid([&] { layer.set_weights(other[0], wrong, other[2], other[3]); },
                 "GRULayer.set_weights: w_c must have shape");
  EXPECT_TRUE(layer.has_weights());
  const std::vector<Tensor> got = run(layer);
  for (std::size_t k = 0; k < want.size(); ++k) EXPECT_TRUE(bitwise_equal(got[k], want[k])) << k;

  RNN rnn({.mode = RNNMode::kGRU,
           .input_size = I,
           .hidden_size = H,
           .num_layers = 1,
           .max_time = T,
           .max_batch = B});
  const std::vector<TensorView> good{w[0], w[1], w[2], w[3]};
  const std::vector<TensorView> bad{other[0], wrong, other[2], other[3]};
  rnn.set_weights(0, 0, good);
  EXPECT_THROW(rnn.set_weights(0, 0, bad), Error);
  Tensor y(DType::kFloat32, Shape{T, B, H}), h_n(DType::kFloat32, Shape{1, B, H});
  rnn.forward({.x = x, .h0 = TensorView(h0.data(), DType::kFloat32, Shape{1, B, H})},
              {.y = y.mutable_view(), .h_n = h_n.mutable_view()});
  EXPECT_TRUE(bitwise_equal(y, want[3])) << "the RNN's layer lost its weights";
}
INSTANTIATE_TEST_SUITE_P(LayerHostile, RefusedSetWeights, ::testing::Bool());

}  // namespace
}  // namespace blockrnn::testing
