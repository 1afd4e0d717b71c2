// Reliability of every op (docs/reliability.md): exact serial results under 8 concurrent
// callers, inputs never modified, an output on an input refused even with empty work, and a
// workspace the system refuses named after the op that was called. Bitwise determinism across thread counts and ISA paths is a
// property of the generic op tester (test_ops.cc).
#include <cstring>
#include <iterator>
#include <limits>
#include <thread>
#include <utility>

#include "op_inputs.h"

namespace blockrnn {
namespace {

using testing::bitwise_equal;

class EveryOp : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryOp, ConcurrentCallsGiveSerialResults) {
  const OpDef& def = find_op(GetParam());
  std::mt19937_64 rng(22);
  std::vector<testing::OpCall> calls;
  std::vector<std::vector<Tensor>> serial(8), parallel(8);
  for (int k = 0; k < 8; ++k) {
    calls.push_back(testing::make_call(def, rng, 4, 16, 24, 32));
    serial[k] = run_op(def.name, calls[k].views(), calls[k].attrs);
  }
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 3; ++rep) {
        parallel[k] = run_op(def.name, calls[k].views(), calls[k].attrs);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < 8; ++k) {
    for (std::size_t j = 0; j < serial[k].size(); ++j) {
      EXPECT_TRUE(bitwise_equal(parallel[k][j], serial[k][j])) << def.name << " caller " << k;
    }
  }
}

TEST_P(EveryOp, InputsAreNeverModified) {
  std::mt19937_64 rng(23);
  const testing::OpCall call = testing::make_call(find_op(GetParam()), rng, 3, 4, 5, 6);
  std::vector<Tensor> copies;
  for (const Tensor& t : call.inputs) {
    Tensor c(t.dtype(), t.shape());
    std::memcpy(c.data(), t.data(), t.num_bytes());
    copies.push_back(std::move(c));
  }
  (void)run_op(call.op, call.views(), call.attrs);
  for (std::size_t k = 0; k < copies.size(); ++k) {
    EXPECT_TRUE(bitwise_equal(call.inputs[k], copies[k]))
        << GetParam() << " modified input " << find_op(GetParam()).inputs[k];
  }
}

// An output on top of an input is refused even when the call has no work to do (B = 0 or
// H = 0): such a call still zero-fills its outputs, and an output such as w_grad [I+H, 4H] is
// not empty when B is. Every non-empty output is placed on every input that can hold it; the
// call must fail naming both, and leave the input as it was. (The LSTM cell ops refuse an
// empty cs_prev first, as TensorFlow does, so they are skipped where validation refuses.)
TEST_P(EveryOp, OutputOnAnInputIsRefusedEvenWithEmptyWork) {
  const OpDef& def = find_op(GetParam());
  for (const auto& [B, H] : {std::pair<std::int64_t, std::int64_t>{0, 4}, {3, 0}}) {
    std::mt19937_64 rng(29);
    testing::OpCall call = testing::make_call(def, rng, 2, B, 5, H);
    OutputSpec spec;
    try {
      spec = infer_outputs(call.op, call.views(), call.attrs);
    } catch (const Error&) {
      continue;  // refused by validation (an empty cs_prev), nothing to place
    }
    std::vector<Tensor> outs;
    for (const Shape& s : spec.shapes) outs.emplace_back(spec.dtype, s);
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].num_bytes() == 0) continue;
      for (std::size_t j = 0; j < call.inputs.size(); ++j) {
        Tensor& in = call.inputs[j];
        if (in.dtype() != spec.dtype || in.num_bytes() < outs[k].num_bytes()) continue;
        Tensor before(in.dtype(), in.shape());
        std::memcpy(before.data(), in.data(), in.num_bytes());
        std::vector<MutableTensorView> views;
        for (Tensor& o : outs) views.push_back(o.mutable_view());
        views[k].data = in.data();
        const std::string what = " B = " + std::to_string(B) + ", H = " + std::to_string(H) +
                                 ": output " + def.outputs[k] + " on input " + def.inputs[j];
        try {
          run_op(call.op, call.views(), call.attrs, views);
          ADD_FAILURE() << def.name << what << ": accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
          const std::string needle =
              def.name + ": output " + def.outputs[k] + " overlaps input " + def.inputs[j];
          EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
              << what << ": " << e.what();
        }
        EXPECT_TRUE(bitwise_equal(in, before)) << def.name << what << ": the input changed";
      }
    }
  }
}

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

std::vector<std::string> all_ops() {
  std::vector<std::string> names;
  for (const OpDef& d : list_ops()) names.push_back(d.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Reliability, EveryOp, ::testing::ValuesIn(all_ops()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '.') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace blockrnn
