// The plan objects' promise that a call after the first does no heap allocation: the sequence
// layers' forward and backward (every family, float32, float64, float16 and bfloat16), on every
// CPU path, with and without seq_lengths (the 16-bit layers' float32 copies,
// the bfloat16 forward's product operands and the backward's packed gate gradients live in the
// workspace; the active-row index in buffers the layer keeps), and the cell layers' forward and
// backward (at an input size past one GEMM tile, where the one-shot op packs whole operands),
// counted through this binary's replacement of operator new (counting_new.h). A separate
// binary, so the replacement counts nothing else.
#include <gtest/gtest.h>

#include <initializer_list>
#include <tuple>

#include "blockrnn/blockrnn.h"
#include "counting_new.h"

namespace blockrnn {
namespace {

constexpr std::int64_t kT = 5, kB = 3, kI = 7, kH = 9;

Tensor filled(DType dt, Shape shape, double value) {
  Tensor t(dt, shape);
  const std::int64_t n = t.shape().num_elements();
  for (std::int64_t e = 0; e < n; ++e) {
    const float v = static_cast<float>(value * ((e % 7) - 3));
    if (dt == DType::kFloat32) {
      static_cast<float*>(t.data())[e] = v;
    } else if (dt == DType::kFloat16) {
      static_cast<Half*>(t.data())[e] = float_to_half(v);
    } else if (dt == DType::kBFloat16) {
      static_cast<BFloat16*>(t.data())[e] = float_to_bfloat16(v);
    } else {
      static_cast<double*>(t.data())[e] = value * ((e % 7) - 3);
    }
  }
  return t;
}

// Runs `call` once to warm up (the layer's own workspace is sized then), then counts the heap
// allocations of ten more calls.
template <typename F>
long allocations_after_first(F&& call) {
  call();
  const long before = alloc_counter::count();
  for (int k = 0; k < 10; ++k) call();
  return alloc_counter::count() - before;
}

// A sequence layer's call in one dtype on one CPU path ("" the default, then the fallbacks:
// bfloat16 products run on vdpbf16ps where the CPU has it and on the widened float32 engine
// elsewhere), without seq_lengths or with lengths {T, 2, 4} (the active-row index, kept by the
// layer, and the products over the active rows).
class SequenceCall : public ::testing::TestWithParam<std::tuple<DType, const char*, bool>> {
 protected:
  void SetUp() override { set_isa(std::get<1>(GetParam())); }
  void TearDown() override { set_isa(""); }
  static DType dtype() { return std::get<0>(GetParam()); }
  static TensorView seq_lengths() {
    static const Tensor lengths = [] {
      Tensor l(DType::kInt64, {kB});
      std::int64_t* p = l.data_as<std::int64_t>();
      p[0] = kT;
      p[1] = 2;
      p[2] = 4;
      return l;
    }();
    return std::get<2>(GetParam()) ? lengths.view() : TensorView();
  }
};

// The forward in every dtype.
class PlanAllocations : public SequenceCall {};

// bfloat16 runs the products on bfloat16 operands: the weights packed once (the plan), the
// rounded x and h in the workspace (the kernels' bf16_workspace). The 16-bit staging through the
// workspace is the same code in every family.

TEST_P(PlanAllocations, LSTMLayerForward) {
  const DType dt = dtype();
  LSTMLayer layer(
      {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {kI + kH, 4 * kH}, 0.01), filled(dt, {4 * kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, kI}, 0.1), s = filled(dt, {kB, kH}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 7; ++k) o.emplace_back(dt, Shape{kT, kB, kH});
  const BlockLSTMOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                             o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                             o[6].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] {
              layer.forward({.x = x, .cs_prev = s, .h_prev = s, .seq_lengths = seq_lengths()}, out);
            }),
            0);
}

TEST_P(PlanAllocations, GRULayerForward) {
  const DType dt = dtype();
  GRULayer layer(
      {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {kI + kH, 2 * kH}, 0.01), filled(dt, {kI + kH, kH}, 0.01),
                    filled(dt, {2 * kH}, 0.1), filled(dt, {kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, kI}, 0.1), h = filled(dt, {kB, kH}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 4; ++k) o.emplace_back(dt, Shape{kT, kB, kH});
  const BlockGRUOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                            o[3].mutable_view()};
  EXPECT_EQ(allocations_after_first(
                [&] { layer.forward({.x = x, .h_prev = h, .seq_lengths = seq_lengths()}, out); }),
            0);
}

TEST_P(PlanAllocations, GRUResetAfterLayerForward) {
  const DType dt = dtype();
  GRUResetAfterLayer layer(
      {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {kI, 3 * kH}, 0.01), filled(dt, {kH, 3 * kH}, 0.01),
                    filled(dt, {3 * kH}, 0.1), filled(dt, {3 * kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, kI}, 0.1), h = filled(dt, {kB, kH}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 5; ++k) o.emplace_back(dt, Shape{kT, kB, kH});
  const BlockGRUResetAfterOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                      o[3].mutable_view(), o[4].mutable_view()};
  EXPECT_EQ(allocations_after_first(
                [&] { layer.forward({.x = x, .h_prev = h, .seq_lengths = seq_lengths()}, out); }),
            0);
}

// The sequence layers' backward in every dtype on every CPU path: the gate gradients are packed
// into the workspace and the input weights' transposes are the plan's; bfloat16 products take
// every operand (the rounded gate gradients and their packs, [h_prev; h[0:S−1]], the rounded left
// operands) from the workspace too. The input size spans more than one GEMM tile.
class BackwardAllocations : public SequenceCall {
 protected:
  static constexpr std::int64_t I = 100;
  // Tensors of the given shapes.
  static std::vector<Tensor> tensors(DType dt, std::initializer_list<Shape> shapes) {
    std::vector<Tensor> t;
    for (const Shape& shape : shapes) t.push_back(filled(dt, shape, 0.05));
    return t;
  }
  // n per-step tensors [T, B, H] (the forward's outputs and the incoming gradients; their values
  // do not matter here).
  static std::vector<Tensor> steps(DType dt, int n) {
    std::vector<Tensor> t;
    for (int k = 0; k < n; ++k) t.push_back(filled(dt, {kT, kB, kH}, 0.01 * (k + 1)));
    return t;
  }
};

TEST_P(BackwardAllocations, LSTMLayer) {
  const DType dt = dtype();
  LSTMLayer layer(
      {.input_size = I, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB},
      {.use_peephole = true});
  layer.set_weights(filled(dt, {I + kH, 4 * kH}, 0.01), filled(dt, {4 * kH}, 0.1),
                    filled(dt, {kH}, 0.1), filled(dt, {kH}, 0.2), filled(dt, {kH}, 0.3));
  const Tensor x = filled(dt, {kT, kB, I}, 0.1), s = filled(dt, {kB, kH}, 0.1);
  const std::vector<Tensor> t = steps(dt, 9);  // i, cs, f, o, ci, co, h, cs_grad, h_grad
  std::vector<Tensor> g =
      tensors(dt, {{kT, kB, I}, {kB, kH}, {kB, kH}, {I + kH, 4 * kH}, {kH}, {kH}, {kH}, {4 * kH}});
  const BlockLSTMGradOutputs out{g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(),
                                 g[3].mutable_view(), g[4].mutable_view(), g[5].mutable_view(),
                                 g[6].mutable_view(), g[7].mutable_view()};
  const LSTMLayerGradInputs in{.x = x,
                               .cs_prev = s,
                               .h_prev = s,
                               .i = t[0],
                               .cs = t[1],
                               .f = t[2],
                               .o = t[3],
                               .ci = t[4],
                               .co = t[5],
                               .h = t[6],
                               .cs_grad = t[7],
                               .h_grad = t[8],
                               .seq_lengths = seq_lengths()};
  EXPECT_EQ(allocations_after_first([&] { layer.backward(in, out); }), 0);
}

TEST_P(BackwardAllocations, GRULayer) {
  const DType dt = dtype();
  GRULayer layer(
      {.input_size = I, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {I + kH, 2 * kH}, 0.01), filled(dt, {I + kH, kH}, 0.01),
                    filled(dt, {2 * kH}, 0.1), filled(dt, {kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, I}, 0.1), h = filled(dt, {kB, kH}, 0.1);
  const std::vector<Tensor> t = steps(dt, 5);  // r, u, c, h, h_grad
  std::vector<Tensor> g =
      tensors(dt, {{kT, kB, I}, {kB, kH}, {I + kH, 2 * kH}, {I + kH, kH}, {2 * kH}, {kH}});
  const BlockGRUGradOutputs out{g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(),
                                g[3].mutable_view(), g[4].mutable_view(), g[5].mutable_view()};
  const GRULayerGradInputs in{.x = x,
                              .h_prev = h,
                              .r = t[0],
                              .u = t[1],
                              .c = t[2],
                              .h = t[3],
                              .h_grad = t[4],
                              .seq_lengths = seq_lengths()};
  EXPECT_EQ(allocations_after_first([&] { layer.backward(in, out); }), 0);
}

TEST_P(BackwardAllocations, GRUResetAfterLayer) {
  const DType dt = dtype();
  GRUResetAfterLayer layer(
      {.input_size = I, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {I, 3 * kH}, 0.01), filled(dt, {kH, 3 * kH}, 0.01),
                    filled(dt, {3 * kH}, 0.1), filled(dt, {3 * kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, I}, 0.1), h = filled(dt, {kB, kH}, 0.1);
  const std::vector<Tensor> t = steps(dt, 6);  // r, u, n, hn, h, h_grad
  std::vector<Tensor> g =
      tensors(dt, {{kT, kB, I}, {kB, kH}, {I, 3 * kH}, {kH, 3 * kH}, {3 * kH}, {3 * kH}});
  const BlockGRUResetAfterGradOutputs out{g[0].mutable_view(), g[1].mutable_view(),
                                          g[2].mutable_view(), g[3].mutable_view(),
                                          g[4].mutable_view(), g[5].mutable_view()};
  const GRUResetAfterLayerGradInputs in{.x = x,
                                        .h_prev = h,
                                        .r = t[0],
                                        .u = t[1],
                                        .n = t[2],
                                        .hn = t[3],
                                        .h = t[4],
                                        .h_grad = t[5],
                                        .seq_lengths = seq_lengths()};
  EXPECT_EQ(allocations_after_first([&] { layer.backward(in, out); }), 0);
}

// Weights set again with the same shapes (an optimiser step) reuse the layer's copies and packed
// panels: no allocation of their size, in every dtype (the largest allocation of ten more
// set_weights is the messages' strings, far below the weights' 40 KiB at this size). The same
// through the RNN in torch.nn's layout, whose staging of a layer's parameters is kept too; and
// its forward and backward allocate nothing after the first call.
class SetWeightsAllocations : public ::testing::TestWithParam<DType> {};

template <typename F>
std::size_t largest_allocation_after_first(F&& call) {
  call();
  alloc_counter::reset_largest();
  for (int k = 0; k < 10; ++k) call();
  return alloc_counter::largest();
}

TEST_P(SetWeightsAllocations, GRUResetAfterLayerAndTheRNNInTorchNnsLayout) {
  const DType dt = GetParam();
  constexpr std::int64_t I = 40, H = 32;
  GRUResetAfterLayer layer(
      {.input_size = I, .hidden_size = H, .dtype = dt, .max_time = kT, .max_batch = kB});
  const Tensor w_i = filled(dt, {I, 3 * H}, 0.01), w_h = filled(dt, {H, 3 * H}, 0.01),
               b = filled(dt, {3 * H}, 0.1);
  EXPECT_LT(largest_allocation_after_first([&] { layer.set_weights(w_i, w_h, b, b); }), 1024u);

  RNN rnn({.mode = RNNMode::kGRUResetAfter,
           .input_size = I,
           .hidden_size = H,
           .dtype = dt,
           .max_time = kT,
           .max_batch = kB,
           .param_layout = ParamLayout::kTorch});
  const Tensor w_ih = filled(dt, {3 * H, I}, 0.01), w_hh = filled(dt, {3 * H, H}, 0.01);
  const TensorView params[] = {w_ih, w_hh, b, b};
  EXPECT_LT(largest_allocation_after_first([&] { rnn.set_weights(0, 0, params); }), 1024u);
  const Tensor x = filled(dt, {kT, kB, I}, 0.1), gy = filled(dt, {kT, kB, H}, 0.1);
  std::vector<Tensor> g;  // y, h_n, x_grad, h0_grad, then the parameters' gradients
  for (const Shape& shape : {Shape{kT, kB, H}, Shape{1, kB, H}, Shape{kT, kB, I}, Shape{1, kB, H},
                             Shape{3 * H, I}, Shape{3 * H, H}, Shape{3 * H}, Shape{3 * H}}) {
    g.push_back(filled(dt, shape, 0.05));
  }
  const MutableTensorView grads[] = {g[4].mutable_view(), g[5].mutable_view(), g[6].mutable_view(),
                                     g[7].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] {
              rnn.forward({.x = x}, {g[0].mutable_view(), g[1].mutable_view(), {}});
              rnn.backward({.x = x}, {gy}, {g[2].mutable_view(), g[3].mutable_view(), {}, grads});
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SetWeightsAllocations,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                           DType::kBFloat16));

// The cell layers run float32 and float64.
class CellPlanAllocations : public ::testing::TestWithParam<DType> {};

// Input size past one 96-row GEMM tile: the weight gradient xᵀ·d_gates has M = I rows, which
// the one-shot op multiplies by a B operand it packs (and allocates) at every call.
constexpr std::int64_t kCellB = 5, kCellI = 100, kCellH = 9;

TEST_P(CellPlanAllocations, LSTMCellLayerForwardAndBackward) {
  const DType dt = GetParam();
  const std::int64_t B = kCellB, I = kCellI, H = kCellH;
  LSTMCellLayer layer({.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B},
                      {.use_peephole = true});
  layer.set_weights(filled(dt, {I + H, 4 * H}, 0.01), filled(dt, {4 * H}, 0.1),
                    filled(dt, {H}, 0.1), filled(dt, {H}, 0.2), filled(dt, {H}, 0.3));
  const Tensor x = filled(dt, {B, I}, 0.1), s = filled(dt, {B, H}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 7; ++k) o.emplace_back(dt, Shape{B, H});
  const LSTMBlockCellOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                 o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                                 o[6].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] { layer.forward({x, s, s}, out); }), 0);
  std::vector<Tensor> g;
  for (const Shape& shape : {Shape{B, I}, Shape{B, H}, Shape{B, H}, Shape{I + H, 4 * H}, Shape{H},
                             Shape{H}, Shape{H}, Shape{4 * H}}) {
    g.emplace_back(dt, shape);
  }
  const LSTMCellLayerGradOutputs grads{
      g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(), g[3].mutable_view(),
      g[4].mutable_view(), g[5].mutable_view(), g[6].mutable_view(), g[7].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] {
              layer.backward({x, s, s, o[0], o[1], o[2], o[3], o[4], o[5], s, s}, grads);
            }),
            0);
}

TEST_P(CellPlanAllocations, GRUCellLayerForwardAndBackward) {
  const DType dt = GetParam();
  const std::int64_t B = kCellB, I = kCellI, H = kCellH;
  GRUCellLayer layer({.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B});
  layer.set_weights(filled(dt, {I + H, 2 * H}, 0.01), filled(dt, {I + H, H}, 0.01),
                    filled(dt, {2 * H}, 0.1), filled(dt, {H}, 0.1));
  const Tensor x = filled(dt, {B, I}, 0.1), h = filled(dt, {B, H}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 4; ++k) o.emplace_back(dt, Shape{B, H});
  const GRUBlockCellOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                o[3].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] { layer.forward({x, h}, out); }), 0);
  std::vector<Tensor> g;
  for (const Shape& shape :
       {Shape{B, I}, Shape{B, H}, Shape{I + H, 2 * H}, Shape{I + H, H}, Shape{2 * H}, Shape{H}}) {
    g.emplace_back(dt, shape);
  }
  const GRUCellLayerGradOutputs grads{g[0].mutable_view(), g[1].mutable_view(),
                                      g[2].mutable_view(), g[3].mutable_view(),
                                      g[4].mutable_view(), g[5].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] {
              layer.backward({x, h, o[0], o[1], o[2], h}, grads);
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PlanAllocations,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kFloat64,
                                                              DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values("", "avx2", "baseline"),
                                            ::testing::Bool()));
INSTANTIATE_TEST_SUITE_P(Dtypes, BackwardAllocations,
                         ::testing::Combine(::testing::Values(DType::kFloat32, DType::kFloat64,
                                                              DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values("", "avx2", "baseline"),
                                            ::testing::Bool()));
INSTANTIATE_TEST_SUITE_P(Dtypes, CellPlanAllocations,
                         ::testing::Values(DType::kFloat32, DType::kFloat64));

}  // namespace
}  // namespace blockrnn
