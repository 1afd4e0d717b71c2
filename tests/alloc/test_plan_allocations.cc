// The plan objects' promise that a call after the first does no heap allocation: the layer
// objects' forward (every family, float32, float64, float16 and bfloat16: the 16-bit layers'
// float32 copies live in the workspace) counted through this binary's
// replacement of operator new (counting_new.h). A separate binary, so the replacement counts
// nothing else.
#include <gtest/gtest.h>

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

class PlanAllocations : public ::testing::TestWithParam<DType> {};

// A bfloat16 call may multiply bfloat16 operands, which the kernel packs at every call, as the
// one-shot op does (docs/design.md, the layer objects in 16 bits): BlockLSTM(V2) and BlockGRU
// today, BlockGRUResetAfter once its kernel takes bfloat16 products. float16 covers the staging
// through the workspace, the same code in every family.
bool packs_per_call(DType dt) {
  return dt == DType::kBFloat16 && !force_reference();
}

TEST_P(PlanAllocations, LSTMLayerForward) {
  const DType dt = GetParam();
  if (packs_per_call(dt)) GTEST_SKIP() << "bfloat16 products pack their operands per call";
  LSTMLayer layer(
      {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {kI + kH, 4 * kH}, 0.01), filled(dt, {4 * kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, kI}, 0.1), s = filled(dt, {kB, kH}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 7; ++k) o.emplace_back(dt, Shape{kT, kB, kH});
  const BlockLSTMOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                             o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                             o[6].mutable_view()};
  EXPECT_EQ(
      allocations_after_first([&] { layer.forward({.x = x, .cs_prev = s, .h_prev = s}, out); }), 0);
}

TEST_P(PlanAllocations, GRULayerForward) {
  const DType dt = GetParam();
  if (packs_per_call(dt)) GTEST_SKIP() << "bfloat16 products pack their operands per call";
  GRULayer layer(
      {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {kI + kH, 2 * kH}, 0.01), filled(dt, {kI + kH, kH}, 0.01),
                    filled(dt, {2 * kH}, 0.1), filled(dt, {kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, kI}, 0.1), h = filled(dt, {kB, kH}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 4; ++k) o.emplace_back(dt, Shape{kT, kB, kH});
  const BlockGRUOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                            o[3].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] { layer.forward({.x = x, .h_prev = h}, out); }), 0);
}

TEST_P(PlanAllocations, GRUResetAfterLayerForward) {
  const DType dt = GetParam();
  if (packs_per_call(dt)) GTEST_SKIP() << "bfloat16 products pack their operands per call";
  GRUResetAfterLayer layer(
      {.input_size = kI, .hidden_size = kH, .dtype = dt, .max_time = kT, .max_batch = kB});
  layer.set_weights(filled(dt, {kI, 3 * kH}, 0.01), filled(dt, {kH, 3 * kH}, 0.01),
                    filled(dt, {3 * kH}, 0.1), filled(dt, {3 * kH}, 0.1));
  const Tensor x = filled(dt, {kT, kB, kI}, 0.1), h = filled(dt, {kB, kH}, 0.1);
  std::vector<Tensor> o;
  for (int k = 0; k < 5; ++k) o.emplace_back(dt, Shape{kT, kB, kH});
  const BlockGRUResetAfterOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                      o[3].mutable_view(), o[4].mutable_view()};
  EXPECT_EQ(allocations_after_first([&] { layer.forward({.x = x, .h_prev = h}, out); }), 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PlanAllocations,
                         ::testing::Values(DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                           DType::kBFloat16));

}  // namespace
}  // namespace blockrnn
