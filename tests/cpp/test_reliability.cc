// Reliability beyond the generic op tester's per-op properties (docs/reliability.md): empty
// outputs overlap nothing, the typed API's caller-owned outputs are checked with empty work, and
// a workspace the system refuses is named after the op that was called. Per op, test_ops.cc
// checks exact serial results under 8 concurrent callers, inputs never modified, an output on an
// input refused even with empty work, and bitwise determinism across thread counts and ISA paths.
#include <cstring>
#include <iterator>
#include <limits>
#include <utility>

#include "op_inputs.h"

namespace blockrnn {
namespace {

using testing::bitwise_equal;

// An empty output occupies no bytes: whatever its pointer (here one inside an input), it
// overlaps nothing, and the call runs.
TEST(Overlap, AnEmptyOutputOverlapsNothing) {
  std::mt19937_64 rng(31);
  const testing::OpCall call = testing::make_call(find_op("BlockLSTMGrad"), rng, 2, 0, 5, 4);
  const OutputSpec spec = infer_outputs(call.op, call.views(), call.attrs);
  std::vector<Tensor> outs;
  for (const Shape& s : spec.shapes) outs.emplace_back(spec.dtype, s);
  std::vector<MutableTensorView> views;
  for (Tensor& o : outs) views.push_back(o.mutable_view());
  ASSERT_EQ(outs[0].num_elements(), 0);                      // x_grad [T, 0, I]
  views[0].data = const_cast<void*>(call.inputs[4].data());  // inside w
  EXPECT_NO_THROW(run_op(call.op, call.views(), call.attrs, views));
}

// The typed API's caller-owned outputs: BlockLSTMGrad with B = 0 and w_grad on w.
TEST(Overlap, TypedCallerOutputsAreCheckedWithEmptyWork) {
  std::mt19937_64 rng(37);
  const std::int64_t T = 2, B = 0, I = 5, H = 4;
  const testing::OpCall call = testing::make_call(find_op("BlockLSTMGrad"), rng, T, B, I, H);
  BlockLSTMGradInputs in;
  in.seq_len_max = T;
  TensorView* fields[] = {&in.x,   &in.cs_prev, &in.h_prev, &in.w,       &in.wci,   &in.wcf,
                          &in.wco, &in.b,       &in.i,      &in.cs,      &in.f,     &in.o,
                          &in.ci,  &in.co,      &in.h,      &in.cs_grad, &in.h_grad};
  for (std::size_t k = 0; k < std::size(fields); ++k) *fields[k] = call.inputs[k + 1];
  Tensor w(DType::kFloat32, {I + H, 4 * H});
  std::memcpy(w.data(), in.w.data, w.num_bytes());
  in.w = w;
  Tensor x_grad(DType::kFloat32, {T, B, I}), cs_prev_grad(DType::kFloat32, {B, H}),
      h_prev_grad(DType::kFloat32, {B, H}), wci_grad(DType::kFloat32, {H}),
      wcf_grad(DType::kFloat32, {H}), wco_grad(DType::kFloat32, {H}),
      b_grad(DType::kFloat32, {4 * H});
  const BlockLSTMGradOutputs out{x_grad.mutable_view(),      cs_prev_grad.mutable_view(),
                                 h_prev_grad.mutable_view(), w.mutable_view(),
                                 wci_grad.mutable_view(),    wcf_grad.mutable_view(),
                                 wco_grad.mutable_view(),    b_grad.mutable_view()};
  const Tensor before = [&] {
    Tensor c(DType::kFloat32, w.shape());
    std::memcpy(c.data(), w.data(), w.num_bytes());
    return c;
  }();
  testing::expect_invalid([&] { block_lstm_grad(in, out, false); },
                          "BlockLSTMGrad: output w_grad overlaps input w");
  EXPECT_TRUE(bitwise_equal(w, before));
}

// A workspace the system cannot give is a ResourceExhausted error naming the op that was
// called: BlockLSTMV2, not BlockLSTM, whose kernel it shares. T = 2^44 steps of B = 1, I = 0,
// H = 1 pass the memory check under an unlimited limit, but the gates' workspace (2^48 bytes and
// more) exceeds the 47-bit address space, so its allocation fails before anything is written.
// The outputs are caller-owned views of addresses that are never mapped: nothing reaches them.
TEST(WorkspaceErrors, NameTheOpThatWasCalled) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan aborts on an allocation beyond its maximum instead of failing it";
#endif
  const std::int64_t T = std::int64_t{1} << 44;
  const Tensor state(DType::kFloat32, {1, 1}), w(DType::kFloat32, {1, 4}),
      peephole(DType::kFloat32, {1}), b(DType::kFloat32, {4});
  BlockLSTMInputs in;
  in.x = TensorView(b.data(), DType::kFloat32, {T, 1, 0});
  in.cs_prev = state;
  in.h_prev = state;
  in.w = w;
  in.wci = in.wcf = in.wco = peephole;
  in.b = b;
  const Shape out_shape{T, 1, 1};  // 2^46 bytes each, 2^47 apart
  auto out = [&](int k) {
    return MutableTensorView(reinterpret_cast<void*>((std::uintptr_t{2} + k) << 47),
                             DType::kFloat32, out_shape);
  };
  const BlockLSTMOutputs outs{out(0), out(1), out(2), out(3), out(4), out(5), out(6)};
  set_memory_limit(std::numeric_limits<long long>::max());
  // The workspace is the fast path's: the reference path (BLOCKRNN_FORCE_REFERENCE=1, the suite's
  // second run) has none and would write through the fake output pointers.
  const bool was_reference = force_reference();
  set_force_reference(false);
  auto message = [&](auto&& call) {
    try {
      call();
      return std::string("no error");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
      return std::string(e.what());
    }
  };
  const std::string v2 = message([&] { block_lstm_v2(in, outs); });
  const std::string v1 = message([&] { block_lstm(in, outs); });
  set_memory_limit(0);  // the default
  set_force_reference(was_reference);
  EXPECT_EQ(v2, "BlockLSTMV2: cannot allocate the workspace for this problem size");
  EXPECT_EQ(v1, "BlockLSTM: cannot allocate the workspace for this problem size");
}

}  // namespace
}  // namespace blockrnn
