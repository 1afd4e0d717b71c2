// The host emulation's own tests (docs/cuda.md, "Host emulation"): the stand-in runtime and
// cuBLAS refuse what the real ones refuse, poison what they allocate, compute a correct GEMM,
// and run every thread of a grid once. Only in blockrnn_cuda_emu_tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include "blockrnn/tensor.h"
#include "cuda/emu/emu.h"

namespace blockrnn::cuda_emu {
namespace {

// A device buffer of n values of T, freed at scope end.
template <typename T>
struct Dev {
  T* p = nullptr;
  explicit Dev(std::size_t n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(T) * n), cudaSuccess);
  }
  ~Dev() { EXPECT_EQ(cudaFree(p), cudaSuccess); }
};

// The stand-in cuBLAS runs no GEMM without a workspace (blockrnn's rule; cublas_v2.h).
constexpr std::size_t kWorkspaceBytes = 1024;

// Expects `call` to report one violation whose text contains `what`.
template <typename F>
void expect_violation(F&& call, const std::string& what) {
  const std::size_t before = violation_count();
  call();
  EXPECT_EQ(violation_count(), before + 1) << "expected a violation about " << what;
  EXPECT_NE(last_violation().find(what), std::string::npos) << last_violation();
}

TEST(CudaEmu, AllocationsArePoisonedWithNaN) {
  Dev<double> d(8);
  double host[8];
  ASSERT_EQ(cudaMemcpy(host, d.p, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  for (double v : host) EXPECT_TRUE(std::isnan(v));
  float f;
  std::memcpy(&f, host, sizeof f);
  EXPECT_TRUE(std::isnan(f));
  EXPECT_TRUE(std::isnan(__half2float(__half{0xFFFF})));
}

// Events time host work between their records; a destroyed or never-recorded event is refused.
// The default memory pool keeps the release threshold it is given (the timing tool sets it).
TEST(CudaEmu, EventsAndTheMemoryPool) {
  cudaEvent_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  float ms = -1;
  expect_violation([&] { EXPECT_NE(cudaEventElapsedTime(&ms, a, b), cudaSuccess); },
                   "never recorded");
  ASSERT_EQ(cudaEventRecord(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  ASSERT_EQ(cudaEventDestroy(a), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(b), cudaSuccess);
  expect_violation([&] { EXPECT_NE(cudaEventRecord(a, nullptr), cudaSuccess); },
                   "not a live event");

  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  std::uint64_t saved = 0, set = UINT64_MAX, got = 0;
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &saved), cudaSuccess);
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &set), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &got), cudaSuccess);
  EXPECT_EQ(got, UINT64_MAX);
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &saved), cudaSuccess);

  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_STREQ(prop.name, "blockrnn host emulation");
}

// Stream capture records the work instead of running it; the graph runs it at each launch, in
// order. A synchronisation or an allocation on a capturing stream is refused; the legacy default
// stream cannot capture.
TEST(CudaEmu, CaptureRecordsAndLaunchReplays) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Dev<unsigned char> d(4);
  ASSERT_EQ(cudaMemset(d.p, 0, 4), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d.p, 7, 2, s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d.p + 1, 9, 2, s), cudaSuccess);
  expect_violation([&] { EXPECT_NE(cudaStreamSynchronize(s), cudaSuccess); }, "captures a graph");
  void* p = nullptr;
  expect_violation([&] { EXPECT_NE(cudaMallocAsync(&p, 16, s), cudaSuccess); }, "captures a graph");
  unsigned char host[4] = {1, 1, 1, 1};
  ASSERT_EQ(cudaMemcpy(host, d.p, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0] + host[1] + host[2] + host[3], 0) << "captured work ran at capture";
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host, d.p, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], 7);
  EXPECT_EQ(host[1], 9);  // in order: the second memset last
  EXPECT_EQ(host[2], 9);
  EXPECT_EQ(host[3], 0);
  ASSERT_EQ(cudaMemset(d.p, 0, 4), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);  // again
  ASSERT_EQ(cudaMemcpy(host, d.p, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[1], 9);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  expect_violation(
      [&] { EXPECT_NE(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaSuccess); },
      "legacy default stream");
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(CudaEmu, MemoryRulesAreChecked) {
  Dev<float> d(4);
  float host[8] = {};
  expect_violation(
      [&] {
        EXPECT_NE(cudaMemcpy(d.p, host, 8 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      },
      "is not inside one device allocation");
  expect_violation(
      [&] {
        EXPECT_NE(cudaMemcpy(host, d.p, 4 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      },
      "src is device memory");
  expect_violation([&] { EXPECT_NE(cudaMemsetAsync(host, 0, 4, nullptr), cudaSuccess); },
                   "is not inside one device allocation");
  expect_violation([&] { EXPECT_NE(cudaFree(d.p + 1), cudaSuccess); },
                   "is not a live device allocation");
  expect_violation([&] { EXPECT_NE(cudaFree(host), cudaSuccess); },
                   "is not a live device allocation");
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read and reset, as the runtime's
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, d.p + 3), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, d.p + 4), cudaSuccess);  // one past the end
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, host), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);
}

TEST(CudaEmu, StreamsMustBeLive) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Dev<float> d(4);
  EXPECT_EQ(cudaMemsetAsync(d.p, 0, 16, s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  expect_violation(
      [&] { EXPECT_EQ(cudaMemsetAsync(d.p, 0, 16, s), cudaErrorInvalidResourceHandle); },
      "is not a live stream");
  expect_violation([&] { EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle); },
                   "is not a live stream");
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  expect_violation([&] { EXPECT_EQ(cublasSetStream(h, s), CUBLAS_STATUS_INVALID_VALUE); },
                   "not a live stream");
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  cudaGetLastError();
}

TEST(CudaEmu, LaunchRunsEveryThreadOnceAndChecksTheConfiguration) {
  std::vector<int> hits(3 * 64, 0);
  launch("count", dim3(3), dim3(64), 0, nullptr,
         [&] { ++hits[blockIdx.x * blockDim.x + threadIdx.x]; });
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  for (int h : hits) EXPECT_EQ(h, 1);
  bool ran = false;
  expect_violation([&] { launch("big", dim3(1), dim3(2048), 0, nullptr, [&] { ran = true; }); },
                   "launch configuration");
  EXPECT_FALSE(ran);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

// Column-major op(X)(i, j) for the reference GEMM below.
double at(const std::vector<double>& x, bool trans, std::int64_t ld, std::int64_t i,
          std::int64_t j) {
  return trans ? x[j + i * ld] : x[i + j * ld];
}

TEST(CudaEmu, GemmIsAGemmInEveryTransposition) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  Dev<unsigned char> ws(kWorkspaceBytes);
  ASSERT_EQ(cublasSetWorkspace(h, ws.p, kWorkspaceBytes), CUBLAS_STATUS_SUCCESS);
  const std::int64_t m = 7, n = 5, k = 3, pad = 2;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (double beta : {0.0, 1.0}) {
        const std::int64_t lda = (ta ? k : m) + pad, ldb = (tb ? n : k) + pad, ldc = m + pad;
        std::vector<double> A(lda * (ta ? m : k)), B(ldb * (tb ? k : n)), C(ldc * n);
        for (auto* v : {&A, &B, &C})
          for (double& x : *v) x = u(rng);
        Dev<double> dA(A.size()), dB(B.size()), dC(C.size());
        cudaMemcpy(dA.p, A.data(), A.size() * 8, cudaMemcpyHostToDevice);
        cudaMemcpy(dB.p, B.data(), B.size() * 8, cudaMemcpyHostToDevice);
        if (beta != 0.0) cudaMemcpy(dC.p, C.data(), C.size() * 8, cudaMemcpyHostToDevice);
        // beta = 0: C stays poisoned (NaN) and must not be read.
        const double alpha = 1.0;
        ASSERT_EQ(
            cublasGemmEx_64(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n,
                            k, &alpha, dA.p, CUDA_R_64F, lda, dB.p, CUDA_R_64F, ldb, &beta, dC.p,
                            CUDA_R_64F, ldc, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
        std::vector<double> got(C.size());
        cudaMemcpy(got.data(), dC.p, C.size() * 8, cudaMemcpyDeviceToHost);
        for (std::int64_t j = 0; j < n; ++j) {
          for (std::int64_t i = 0; i < m; ++i) {
            double want = 0;
            for (std::int64_t p = 0; p < k; ++p)
              want += at(A, ta, lda, i, p) * at(B, tb, ldb, p, j);
            if (beta != 0.0) want += C[i + j * ldc];
            EXPECT_NEAR(got[i + j * ldc], want, 1e-14) << ta << tb << beta << " " << i << "," << j;
          }
        }
      }
    }
  }
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST(CudaEmu, GemmArgumentRulesAreChecked) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  Dev<unsigned char> ws(kWorkspaceBytes);
  ASSERT_EQ(cublasSetWorkspace(h, ws.p, kWorkspaceBytes), CUBLAS_STATUS_SUCCESS);
  Dev<float> A(64), B(64), C(64);
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](cublasHandle_t handle, cublasOperation_t ta, std::int64_t m, std::int64_t lda,
                  std::int64_t ldc, const float* a, float* c) {
    return cublasGemmEx_64(handle, ta, CUBLAS_OP_N, m, 4, 4, &one, a, CUDA_R_32F, lda, B.p,
                           CUDA_R_32F, 4, &zero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(gemm(h, CUBLAS_OP_N, 4, 4, 4, A.p, C.p), CUBLAS_STATUS_SUCCESS);
  expect_violation(
      [&] { EXPECT_EQ(gemm(h, CUBLAS_OP_N, 4, 3, 4, A.p, C.p), CUBLAS_STATUS_INVALID_VALUE); },
      "lda = 3 < max(1, 4)");
  // Transposed A is stored k × m: lda counts k rows.
  expect_violation(
      [&] { EXPECT_EQ(gemm(h, CUBLAS_OP_T, 6, 3, 6, A.p, C.p), CUBLAS_STATUS_INVALID_VALUE); },
      "lda = 3 < max(1, 4)");
  expect_violation(
      [&] { EXPECT_EQ(gemm(h, CUBLAS_OP_N, 4, 4, 3, A.p, C.p), CUBLAS_STATUS_INVALID_VALUE); },
      "ldc = 3 < max(1, m = 4)");
  expect_violation(
      [&] {
        EXPECT_EQ(gemm(nullptr, CUBLAS_OP_N, 4, 4, 4, A.p, C.p), CUBLAS_STATUS_NOT_INITIALIZED);
      },
      "no live handle");
  float host[64];
  expect_violation(
      [&] { EXPECT_EQ(gemm(h, CUBLAS_OP_N, 4, 4, 4, host, C.p), CUBLAS_STATUS_EXECUTION_FAILED); },
      "not inside one device allocation");
  // 4 columns 32 apart span 3·32 + 4 = 100 elements, past A's 64.
  expect_violation(
      [&] { EXPECT_EQ(gemm(h, CUBLAS_OP_N, 4, 32, 4, A.p, C.p), CUBLAS_STATUS_EXECUTION_FAILED); },
      "not inside one device allocation");
  expect_violation(
      [&] { EXPECT_EQ(gemm(h, CUBLAS_OP_N, 4, 4, 4, A.p, A.p), CUBLAS_STATUS_INVALID_VALUE); },
      "C overlaps A or B");
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  expect_violation(
      [&] { EXPECT_EQ(gemm(h, CUBLAS_OP_N, 4, 4, 4, A.p, C.p), CUBLAS_STATUS_NOT_INITIALIZED); },
      "no live handle");
}

// A GEMM runs with a workspace set after the handle's stream, belonging to that stream: without
// one cuBLAS would share its default pool across streams, and a stream-ordered workspace of
// another stream may be reused by that stream while the GEMM runs.
TEST(CudaEmu, CublasWorkspaceBelongsToTheHandlesStream) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
  Dev<float> A(4), B(4), C(4);
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&] {
    return cublasGemmEx_64(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A.p, CUDA_R_32F, 2, B.p,
                           CUDA_R_32F, 2, &zero, C.p, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT);
  };
  ASSERT_EQ(cublasSetStream(h, s1), CUBLAS_STATUS_SUCCESS);
  expect_violation([&] { EXPECT_EQ(gemm(), CUBLAS_STATUS_INVALID_VALUE); }, "no workspace set");
  void* ws1 = nullptr;
  ASSERT_EQ(cudaMallocAsync(&ws1, kWorkspaceBytes, s1), cudaSuccess);
  expect_violation(
      [&] {
        EXPECT_EQ(cublasSetWorkspace(h, static_cast<char*>(ws1) + 16, 512),
                  CUBLAS_STATUS_INVALID_VALUE);
      },
      "not 256-byte aligned");
  ASSERT_EQ(cublasSetWorkspace(h, ws1, kWorkspaceBytes), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(), CUBLAS_STATUS_SUCCESS);
  // cublasSetStream resets the workspace, and s1's workspace is not s2's.
  ASSERT_EQ(cublasSetStream(h, s2), CUBLAS_STATUS_SUCCESS);
  expect_violation([&] { EXPECT_EQ(gemm(), CUBLAS_STATUS_INVALID_VALUE); }, "no workspace set");
  expect_violation(
      [&] { EXPECT_EQ(cublasSetWorkspace(h, ws1, kWorkspaceBytes), CUBLAS_STATUS_INVALID_VALUE); },
      "allocated on another stream");
  // A workspace freed after it was set is refused by the next GEMM.
  ASSERT_EQ(cublasSetStream(h, s1), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetWorkspace(h, ws1, kWorkspaceBytes), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaFreeAsync(ws1, s1), cudaSuccess);
  expect_violation([&] { EXPECT_EQ(gemm(), CUBLAS_STATUS_INVALID_VALUE); },
                   "no longer a live device allocation");
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s2), cudaSuccess);
}

// TF32 keeps 10 mantissa bits: 1 + 2^−12 becomes 1 in the products, exactly kept otherwise.
TEST(CudaEmu, Tf32RoundsTheInputs) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  Dev<unsigned char> ws(kWorkspaceBytes);
  ASSERT_EQ(cublasSetWorkspace(h, ws.p, kWorkspaceBytes), CUBLAS_STATUS_SUCCESS);
  Dev<float> A(1), B(1), C(1);
  const float a = 1.0f + std::ldexp(1.0f, -12), b = 1.0f, one = 1.0f, zero = 0.0f;
  cudaMemcpy(A.p, &a, 4, cudaMemcpyHostToDevice);
  cudaMemcpy(B.p, &b, 4, cudaMemcpyHostToDevice);
  for (cublasComputeType_t compute : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32}) {
    ASSERT_EQ(
        cublasGemmEx_64(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, A.p, CUDA_R_32F, 1, B.p,
                        CUDA_R_32F, 1, &zero, C.p, CUDA_R_32F, 1, compute, CUBLAS_GEMM_DEFAULT),
        CUBLAS_STATUS_SUCCESS);
    float c = 0;
    cudaMemcpy(&c, C.p, 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(c, compute == CUBLAS_COMPUTE_32F ? a : 1.0f);
  }
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

// The stand-in's half conversions agree with the CPU library's on every half value and on floats
// around every rounding boundary.
TEST(CudaEmu, HalfConversionsMatchTheLibrary) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    Half lib;
    std::memcpy(&lib, &h, 2);
    const float a = __half2float(__half{h}), b = half_to_float(lib);
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a));
      continue;
    }
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << std::hex << bits;
  }
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int n = 0; n < 200000; ++n) {
    std::uint32_t x = any(rng);
    if (n % 2 == 0) x = (x & 0xFFFFE000u) | 0x1000u;  // exact ties
    float f;
    std::memcpy(&f, &x, 4);
    if (std::isnan(f)) continue;
    const __half e = __float2half_rn(f);
    const Half lib = float_to_half(f);
    std::uint16_t lb;
    std::memcpy(&lb, &lib, 2);
    ASSERT_EQ(e.bits, lb) << std::hex << x;
  }
}

}  // namespace
}  // namespace blockrnn::cuda_emu
