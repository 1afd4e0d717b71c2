// The persistent BlockLSTM kernels and the persistent BlockGRU forward on a GPU
// (src/cuda/persistent_lstm_device.h), part of blockrnn_persistent_tests in a CUDA build: the
// same problems as test_persistent.cc and test_persistent_gru.cc, on the device, against the CPU
// reference (src/ref/block_lstm.cc, src/ref/block_gru.cc). Without a CUDA device every test of
// PersistentLSTMDevice and PersistentGRUDevice is skipped ("no CUDA device"), never passed;
// PersistentLSTMDeviceHost and PersistentGRUDeviceHost run everywhere (refusals that come before
// any device call). Also part of blockrnn_cuda_emu_tests: on the host emulation every test runs
// (the kernels on the host driver's threads) and also fails on a broken CUDA / cuBLAS rule and on
// device memory left allocated.
//
// Tolerances (abs + rel, elementwise), those of the other device tests (test_cuda.cc):
//   float64 1e-10: cuBLAS sums x·w_x, d_x and d_w in another order than the reference, and the
//            backward's d_h chain is a split-K in chunks of 64 gate columns; reordered sums of
//            n ≤ S·B = 850 terms of size ≤ 1 differ by ~√n·eps ≈ 3e-15 relative, and the scaled
//            weights keep the recurrence from amplifying it. A wrong term is ≥ 1e-3.
//   float32 2e-4: the same reordering at float32's eps (√850·6e-8 ≈ 2e-6) plus CUDA's
//            expf/tanhf (≤ 2 ulp) against libm, over the 50 steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "blockrnn/error.h"
#include "cuda/persistent_lstm_device.h"
#ifdef BLOCKRNN_CUDA_HOST_EMU
#include "cuda/emu/emu.h"
#endif
#include "persistent_case.h"
#include "persistent_gru_case.h"

namespace blockrnn {
namespace {

using cuda::detail::Ctx;
using persistent_test::BwdOut;
using persistent_test::Case;
using persistent_test::CaseShape;
using persistent_test::FwdOut;
using persistent_test::GRUBwdOut;
using persistent_test::GRUCase;
using persistent_test::GRUOut;
using persistent_test::GRUShape;
using persistent_test::kBwdNames;
using persistent_test::kFwdNames;
using persistent_test::kGRUBwdNames;

bool has_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Under the host emulation, checked when the test ends: no broken CUDA or cuBLAS rule reported
// and no device memory left allocated since the start. Nothing on a GPU.
class EmuChecks {
#ifdef BLOCKRNN_CUDA_HOST_EMU
 public:
  EmuChecks() : violations_(cuda_emu::violation_count()), live_(cuda_emu::live_allocations()) {}
  ~EmuChecks() {
    EXPECT_EQ(cuda_emu::violation_count(), violations_) << cuda_emu::last_violation();
    EXPECT_EQ(cuda_emu::live_allocations(), live_);
  }

 private:
  std::size_t violations_, live_;
#endif
};

void ok(cudaError_t e, const char* what) {
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
}

// A device copy of a host vector, read back with get().
template <typename T>
class DeviceVec {
 public:
  explicit DeviceVec(const std::vector<T>& host) : n_(host.size()) {
    if (n_ == 0) return;
    ok(cudaMalloc(&p_, n_ * sizeof(T)), "cudaMalloc");
    ok(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "H2D");
  }
  ~DeviceVec() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  std::vector<T> read() const {
    std::vector<T> v(n_);
    if (n_ > 0) ok(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
    return v;
  }

 private:
  std::size_t n_;
  void* p_ = nullptr;
};

// A non-blocking stream and a cuBLAS handle on it with a workspace of its own (as
// src/cuda/api.cpp gives every call): the Ctx of the internal entry points.
class DeviceCtx {
 public:
  explicit DeviceCtx(const char* op) {
    ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    ok(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc");
    EXPECT_EQ(cublasCreate(&blas_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSetStream(blas_, stream_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSetWorkspace(blas_, workspace_, kWorkspaceBytes), CUBLAS_STATUS_SUCCESS);
    ctx_ = Ctx{op, stream_, blas_, false};
  }
  ~DeviceCtx() {
    cublasDestroy(blas_);
    cudaFree(workspace_);
    cudaStreamDestroy(stream_);
  }
  const Ctx& ctx() const { return ctx_; }
  void sync() const { ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  static constexpr std::size_t kWorkspaceBytes = std::size_t(4) << 20;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Ctx ctx_{};
};

template <typename T>
double tolerance() {
  return sizeof(T) == 8 ? 1e-10 : 2e-4;
}

template <typename T>
void expect_near(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = tolerance<T>();
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double g = got[e], w = want[e];
    if (!(std::fabs(g - w) <= tol + tol * std::fabs(w))) {
      ADD_FAILURE() << what << "[" << e << "]: " << g << " vs reference " << w;
      return;
    }
  }
}

// The forward and the backward on the device (outputs NaN-filled first), read back.
template <typename T>
struct DeviceRun {
  FwdOut<T> f;
  BwdOut<T> b;
};

template <typename T>
DeviceRun<T> run_on_device(const Case<T>& c, const FwdOut<T>& fwd_for_bwd) {
  const CaseShape& s = c.s;
  DeviceRun<T> r{FwdOut<T>(s.T * s.B * s.H), BwdOut<T>(s.T, s.B, s.I, s.H)};
  DeviceVec<T> x(c.x), cs_prev(c.cs_prev), h_prev(c.h_prev), w(c.w), wci(c.wci), wcf(c.wcf),
      wco(c.wco), b(c.b), d_cs(c.d_cs), d_h(c.d_h);
  DeviceVec<T> i(r.f.i), cs(r.f.cs), f(r.f.f), o(r.f.o), ci(r.f.ci), co(r.f.co), h(r.f.h);
  DeviceCtx dc(block_lstm_op_name(s.layout, false));
  BlockLSTMFwdArgs<T> fa = c.fwd_args(r.f);
  fa.x = x.get();
  fa.cs_prev = cs_prev.get();
  fa.h_prev = h_prev.get();
  fa.w = w.get();
  fa.wci = wci.get();
  fa.wcf = wcf.get();
  fa.wco = wco.get();
  fa.b = b.get();
  fa.i = i.get();
  fa.cs = cs.get();
  fa.f = f.get();
  fa.o = o.get();
  fa.ci = ci.get();
  fa.co = co.get();
  fa.h = h.get();
  cuda::detail::persistent_lstm_fwd<T>(dc.ctx(), c.d, fa);
  dc.sync();
  r.f.i = i.read();
  r.f.cs = cs.read();
  r.f.f = f.read();
  r.f.o = o.read();
  r.f.ci = ci.read();
  r.f.co = co.read();
  r.f.h = h.read();
  // The backward from the given forward outputs (the reference's), so that its comparison does
  // not inherit the forward's differences.
  DeviceVec<T> fi(fwd_for_bwd.i), fcs(fwd_for_bwd.cs), ff(fwd_for_bwd.f), fo(fwd_for_bwd.o),
      fci(fwd_for_bwd.ci), fco(fwd_for_bwd.co), fh(fwd_for_bwd.h);
  DeviceVec<T> d_x(r.b.d_x), d_cs_prev(r.b.d_cs_prev), d_h_prev(r.b.d_h_prev), d_w(r.b.d_w),
      d_wci(r.b.d_wci), d_wcf(r.b.d_wcf), d_wco(r.b.d_wco), d_b(r.b.d_b);
  BlockLSTMBwdArgs<T> ba = c.bwd_args(fwd_for_bwd, r.b);
  ba.x = x.get();
  ba.cs_prev = cs_prev.get();
  ba.h_prev = h_prev.get();
  ba.w = w.get();
  ba.wci = wci.get();
  ba.wcf = wcf.get();
  ba.wco = wco.get();
  ba.i = fi.get();
  ba.cs = fcs.get();
  ba.f = ff.get();
  ba.o = fo.get();
  ba.ci = fci.get();
  ba.co = fco.get();
  ba.h = fh.get();
  ba.d_cs = d_cs.get();
  ba.d_h = d_h.get();
  ba.d_x = d_x.get();
  ba.d_cs_prev = d_cs_prev.get();
  ba.d_h_prev = d_h_prev.get();
  ba.d_w = d_w.get();
  ba.d_wci = d_wci.get();
  ba.d_wcf = d_wcf.get();
  ba.d_wco = d_wco.get();
  ba.d_b = d_b.get();
  DeviceCtx bc(block_lstm_op_name(s.layout, true));
  cuda::detail::persistent_lstm_bwd<T>(bc.ctx(), c.d, ba);
  bc.sync();
  r.b.d_x = d_x.read();
  r.b.d_cs_prev = d_cs_prev.read();
  r.b.d_h_prev = d_h_prev.read();
  r.b.d_w = d_w.read();
  r.b.d_wci = d_wci.read();
  r.b.d_wcf = d_wcf.read();
  r.b.d_wco = d_wco.read();
  r.b.d_b = d_b.read();
  // The inputs are unchanged.
  EXPECT_TRUE(x.read() == c.x);
  EXPECT_TRUE(w.read() == c.w);
  EXPECT_TRUE(d_h.read() == c.d_h);
  return r;
}

std::vector<CaseShape> device_shapes() {
  return {
      {9, 3, 5, 37, 9, true, LSTMLayout::kICFO, 1.0, 0.5, 21},
      {9, 3, 5, 37, 6, true, LSTMLayout::kIFCO, 0.0, 0.5, 22},
      {9, 3, 5, 37, 9, false, LSTMLayout::kIFCO, 1.0, 0.0, 23},
      // Every SM busy (H = 300 over up to 132 CTAs), 19 split-K chunks, B not a multiple of 8.
      {50, 17, 31, 300, 50, true, LSTMLayout::kICFO, 1.0, 3.0, 24},
      {5, 3, 4, 6, 0, true, LSTMLayout::kICFO, 1.0, 0.5, 25},  // seq_len_max = 0
  };
}

template <typename T>
class PersistentLSTMDevice : public ::testing::Test {};
using Types = ::testing::Types<double, float>;
TYPED_TEST_SUITE(PersistentLSTMDevice, Types);

TYPED_TEST(PersistentLSTMDevice, MatchesReference) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  using T = TypeParam;
  for (const CaseShape& s : device_shapes()) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " B=" + std::to_string(s.B) +
                 " H=" + std::to_string(s.H) + " S=" + std::to_string(s.S));
    const Case<T> c(s);
    const FwdOut<T> want_f = c.reference_fwd();
    const BwdOut<T> want_b = c.reference_bwd(want_f);
    const DeviceRun<T> got = run_on_device(c, want_f);
    for (int k = 0; k < 7; ++k) expect_near(*got.f.all()[k], *want_f.all()[k], kFwdNames[k]);
    const auto g = all(got.b), w = all(want_b);
    for (int k = 0; k < 8; ++k) expect_near(*g[k], *w[k], kBwdNames[k]);
  }
}

TYPED_TEST(PersistentLSTMDevice, BitwiseDeterministicRunToRun) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  using T = TypeParam;
  const Case<T> c(device_shapes()[3]);
  const FwdOut<T> ref_f = c.reference_fwd();
  const DeviceRun<T> a = run_on_device(c, ref_f), b = run_on_device(c, ref_f);
  for (int k = 0; k < 7; ++k) EXPECT_TRUE(*a.f.all()[k] == *b.f.all()[k]) << kFwdNames[k];
  const auto ga = all(a.b), gb = all(b.b);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(std::memcmp(ga[k]->data(), gb[k]->data(), ga[k]->size() * sizeof(T)), 0)
        << kBwdNames[k];
  }
}

// A weight slice that cannot fit in shared memory is refused before anything is allocated or
// launched (null data pointers: nothing may read them).
TEST(PersistentLSTMDevice, TooLargeASliceIsAClearError) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  DeviceCtx dc("BlockLSTM");
  const BlockLSTMDims d{4, 2, 3, 16384, 4, nullptr};
  BlockLSTMFwdArgs<double> a{};
  try {
    cuda::detail::persistent_lstm_fwd<double>(dc.ctx(), d, a);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("BlockLSTM (persistent kernel): a CTA's slice of the "
                                         "recurrent weights needs "),
              std::string::npos)
        << e.what();
  }
}

// seq_lengths is refused before any device call: runs on every machine.
TEST(PersistentLSTMDeviceHost, SeqLengthsAreRefused) {
  const std::int64_t lengths[2] = {1, 2};
  const BlockLSTMDims d{4, 2, 3, 5, 4, lengths};
  const Ctx ctx{"BlockLSTMGrad", nullptr, nullptr, false};
  try {
    cuda::detail::persistent_lstm_bwd<float>(ctx, d, BlockLSTMBwdArgs<float>{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_STREQ(e.what(), "BlockLSTMGrad (persistent kernel): seq_lengths is not supported yet");
  }
}

// ---- the persistent BlockGRU forward (src/cuda/persistent_gru.h) ----

// The forward on the device (outputs NaN-filled first), read back; the inputs checked unchanged.
template <typename T>
GRUOut<T> run_gru_on_device(const GRUCase<T>& c) {
  const GRUShape& s = c.s;
  GRUOut<T> out(s.T * s.B * s.H);
  DeviceVec<T> x(c.x), h_prev(c.h_prev), w_ru(c.w_ru), w_c(c.w_c), b_ru(c.b_ru), b_c(c.b_c);
  DeviceVec<T> r(out.r), u(out.u), cand(out.c), h(out.h);
  DeviceCtx dc("BlockGRU");
  BlockGRUFwdArgs<T> a = c.args(out);
  a.x = x.get();
  a.h_prev = h_prev.get();
  a.w_ru = w_ru.get();
  a.w_c = w_c.get();
  a.b_ru = b_ru.get();
  a.b_c = b_c.get();
  a.r = r.get();
  a.u = u.get();
  a.c = cand.get();
  a.h = h.get();
  cuda::detail::persistent_gru_fwd<T>(dc.ctx(), c.d, a);
  dc.sync();
  out.r = r.read();
  out.u = u.read();
  out.c = cand.read();
  out.h = h.read();
  EXPECT_TRUE(x.read() == c.x);
  EXPECT_TRUE(h_prev.read() == c.h_prev);
  EXPECT_TRUE(w_ru.read() == c.w_ru);
  EXPECT_TRUE(w_c.read() == c.w_c);
  return out;
}

// The backward on the device from the given forward outputs (the reference's), read back.
template <typename T>
GRUBwdOut<T> run_gru_bwd_on_device(const GRUCase<T>& c, const GRUOut<T>& f) {
  const GRUShape& s = c.s;
  GRUBwdOut<T> out(s.T, s.B, s.I, s.H);
  DeviceVec<T> x(c.x), h_prev(c.h_prev), w_ru(c.w_ru), w_c(c.w_c), d_h(c.d_h);
  DeviceVec<T> r(f.r), u(f.u), cand(f.c), h(f.h);
  DeviceVec<T> d_x(out.d_x), d_h_prev(out.d_h_prev), d_w_ru(out.d_w_ru), d_w_c(out.d_w_c),
      d_b_ru(out.d_b_ru), d_b_c(out.d_b_c);
  DeviceCtx dc("BlockGRUGrad");
  BlockGRUBwdArgs<T> a = c.bwd_args(f, out);
  a.x = x.get();
  a.h_prev = h_prev.get();
  a.w_ru = w_ru.get();
  a.w_c = w_c.get();
  a.r = r.get();
  a.u = u.get();
  a.c = cand.get();
  a.h = h.get();
  a.d_h = d_h.get();
  a.d_x = d_x.get();
  a.d_h_prev = d_h_prev.get();
  a.d_w_ru = d_w_ru.get();
  a.d_w_c = d_w_c.get();
  a.d_b_ru = d_b_ru.get();
  a.d_b_c = d_b_c.get();
  cuda::detail::persistent_gru_bwd<T>(dc.ctx(), c.d, a);
  dc.sync();
  out.d_x = d_x.read();
  out.d_h_prev = d_h_prev.read();
  out.d_w_ru = d_w_ru.read();
  out.d_w_c = d_w_c.read();
  out.d_b_ru = d_b_ru.read();
  out.d_b_c = d_b_c.read();
  EXPECT_TRUE(d_h.read() == c.d_h);
  EXPECT_TRUE(h.read() == f.h);
  return out;
}

std::vector<GRUShape> gru_device_shapes() {
  return {
      {9, 3, 5, 37, 9, 41},
      {9, 3, 5, 37, 6, 42},
      // Every SM busy (H = 300 over up to 132 CTAs), B not a multiple of 8.
      {50, 17, 31, 300, 50, 43},
      {5, 3, 4, 6, 0, 44},  // seq_len_max = 0
  };
}

template <typename T>
class PersistentGRUDevice : public ::testing::Test {};
TYPED_TEST_SUITE(PersistentGRUDevice, Types);

// Tolerances: those of the LSTM's device tests above (cuBLAS's input projections in another
// order than the reference's sum, CUDA's expf/tanhf in float32).
TYPED_TEST(PersistentGRUDevice, MatchesReference) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  using T = TypeParam;
  for (const GRUShape& s : gru_device_shapes()) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " B=" + std::to_string(s.B) +
                 " H=" + std::to_string(s.H) + " S=" + std::to_string(s.S));
    const GRUCase<T> c(s);
    const GRUOut<T> want = c.reference();
    const GRUOut<T> got = run_gru_on_device(c);
    expect_near(got.r, want.r, "r");
    expect_near(got.u, want.u, "u");
    expect_near(got.c, want.c, "c");
    expect_near(got.h, want.h, "h");
  }
}

TYPED_TEST(PersistentGRUDevice, BackwardMatchesReference) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  using T = TypeParam;
  for (const GRUShape& s : gru_device_shapes()) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " B=" + std::to_string(s.B) +
                 " H=" + std::to_string(s.H) + " S=" + std::to_string(s.S));
    const GRUCase<T> c(s);
    const GRUOut<T> f = c.reference();
    const GRUBwdOut<T> got = run_gru_bwd_on_device(c, f), want = c.reference_bwd(f);
    const auto g = got.all(), w = want.all();
    for (int k = 0; k < 6; ++k) expect_near(*g[k], *w[k], kGRUBwdNames[k]);
  }
}

TYPED_TEST(PersistentGRUDevice, BackwardBitwiseRunToRun) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  using T = TypeParam;
  const GRUCase<T> c(gru_device_shapes()[2]);
  const GRUOut<T> f = c.reference();
  const GRUBwdOut<T> a = run_gru_bwd_on_device(c, f), b = run_gru_bwd_on_device(c, f);
  const auto ga = a.all(), gb = b.all();
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(std::memcmp(ga[k]->data(), gb[k]->data(), ga[k]->size() * sizeof(T)), 0)
        << kGRUBwdNames[k];
  }
}

TYPED_TEST(PersistentGRUDevice, BitwiseDeterministicRunToRun) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  using T = TypeParam;
  const GRUCase<T> c(gru_device_shapes()[2]);
  const GRUOut<T> a = run_gru_on_device(c), b = run_gru_on_device(c);
  for (const auto& [x, y, name] : {std::tuple{&a.r, &b.r, "r"}, std::tuple{&a.u, &b.u, "u"},
                                   std::tuple{&a.c, &b.c, "c"}, std::tuple{&a.h, &b.h, "h"}}) {
    EXPECT_EQ(std::memcmp(x->data(), y->data(), x->size() * sizeof(T)), 0) << name;
  }
}

// A slice too large for shared memory (3 columns per unit) is refused before any allocation.
TEST(PersistentGRUDevice, TooLargeASliceIsAClearError) {
  if (!has_device()) GTEST_SKIP() << "no CUDA device";
  const EmuChecks emu_checks;
  DeviceCtx dc("BlockGRU");
  const BlockGRUDims d{4, 2, 3, 16384, 4, nullptr};
  try {
    cuda::detail::persistent_gru_fwd<double>(dc.ctx(), d, BlockGRUFwdArgs<double>{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("BlockGRU (persistent kernel): a CTA's slice of the "
                                         "recurrent weights needs "),
              std::string::npos)
        << e.what();
  }
}

TEST(PersistentGRUDeviceHost, SeqLengthsAreRefused) {
  const std::int64_t lengths[2] = {1, 2};
  const BlockGRUDims d{4, 2, 3, 5, 4, lengths};
  const Ctx ctx{"BlockGRU", nullptr, nullptr, false};
  try {
    cuda::detail::persistent_gru_fwd<float>(ctx, d, BlockGRUFwdArgs<float>{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_STREQ(e.what(), "BlockGRU (persistent kernel): seq_lengths is not supported yet");
  }
  const Ctx grad_ctx{"BlockGRUGrad", nullptr, nullptr, false};
  try {
    cuda::detail::persistent_gru_bwd<double>(grad_ctx, d, BlockGRUBwdArgs<double>{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_STREQ(e.what(), "BlockGRUGrad (persistent kernel): seq_lengths is not supported yet");
  }
}

}  // namespace
}  // namespace blockrnn
