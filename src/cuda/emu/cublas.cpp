// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the stand-in cuBLAS, with
// plain loops. Each call checks cuBLAS's documented argument rules first (include/cublas_v2.h
// lists them); a broken rule is reported (blockrnn::cuda_emu::report_violation) and returns the
// status cuBLAS gives for it. The GEMM sums each element's products in increasing k, in the
// compute precision (float32 for CUBLAS_COMPUTE_32F, float64 for CUBLAS_COMPUTE_64F); TF32 modes
// round every input element to TF32 (10 explicit mantissa bits, to nearest, ties away from zero,
// as the tensor cores' conversion) before the products. Also the half conversions of
// cuda_fp16.h.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include "cuda/emu/emu.h"

struct cublasContext {
  cudaStream_t stream;
  cublasMath_t math;
  // The workspace of cublasSetWorkspace, reset to none by cublasSetStream (as cuBLAS resets it
  // to its default pool).
  void* workspace;
  std::size_t workspace_bytes;
};

namespace blockrnn::cuda_emu {
namespace {

using i64 = std::int64_t;

std::mutex g_mu;
std::set<cublasHandle_t> g_handles;  // created and not destroyed
// Every handle object ever created, kept until exit: a destroyed handle's address is never
// reused, so a stale handle is always recognised.
std::vector<std::unique_ptr<cublasContext>> g_handle_objects;

bool is_live(cublasHandle_t h) {
  std::lock_guard<std::mutex> lock(g_mu);
  return h != nullptr && g_handles.count(h) > 0;
}

cublasStatus_t broken(cublasStatus_t status, const std::string& what) {
  report_violation(what);
  return status;
}

float to_tf32(float v) {
  if (!std::isfinite(v)) return v;
  std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
  bits = (bits + 0x1000u) & ~0x1FFFu;  // 23 − 10 = 13 mantissa bits dropped, ties away
  return std::bit_cast<float>(bits);
}

// Elements a column-major rows × cols matrix with leading dimension ld spans.
i64 extent(i64 rows, i64 cols, i64 ld) {
  return rows == 0 || cols == 0 ? 0 : ld * (cols - 1) + rows;
}

// C = alpha·op(A)·op(B) + beta·C (column-major). op(A) is copied into a column-major m × k panel
// and op(B) read column by column, so every C(i, j) = Σ_p op(A)(i, p)·op(B)(p, j) is summed in
// increasing p while the compiler may vectorise over i.
template <typename T>
void gemm_loops(bool ta, bool tb, i64 m, i64 n, i64 k, T alpha, const T* A, i64 lda, const T* B,
                i64 ldb, T beta, T* C, i64 ldc, bool tf32) {
  auto in = [tf32](T v) {
    if constexpr (std::is_same_v<T, float>) {
      if (tf32) return to_tf32(v);
    }
    return v;
  };
  std::vector<T> a(static_cast<std::size_t>(m * k)), acc(static_cast<std::size_t>(m));
  for (i64 p = 0; p < k; ++p) {
    for (i64 i = 0; i < m; ++i) a[p * m + i] = in(ta ? A[p + i * lda] : A[i + p * lda]);
  }
  for (i64 j = 0; j < n; ++j) {
    std::fill(acc.begin(), acc.end(), T(0));
    for (i64 p = 0; p < k; ++p) {
      const T b = in(tb ? B[j + p * ldb] : B[p + j * ldb]);
      const T* ap = a.data() + p * m;
      for (i64 i = 0; i < m; ++i) acc[i] += ap[i] * b;
    }
    T* c = C + j * ldc;
    for (i64 i = 0; i < m; ++i) c[i] = beta == T(0) ? alpha * acc[i] : alpha * acc[i] + beta * c[i];
  }
}

// Why `workspace` does not belong to the handle's stream, or "" when it does: a stream-ordered
// allocation (cudaMallocAsync) belongs to the stream it was made on, and work on another stream
// could run while that stream reuses or frees it.
std::string workspace_stream_mismatch(cublasHandle_t handle, const void* workspace) {
  cudaStream_t owner = nullptr;
  if (stream_of_allocation(workspace, &owner) && owner != handle->stream) {
    return "the workspace was allocated on another stream than the handle's";
  }
  return "";
}

bool overlap(const void* x, i64 x_bytes, const void* y, i64 y_bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(x), b = reinterpret_cast<std::uintptr_t>(y);
  return x_bytes > 0 && y_bytes > 0 && a < b + std::uintptr_t(y_bytes) &&
         b < a + std::uintptr_t(x_bytes);
}

}  // namespace
}  // namespace blockrnn::cuda_emu

using namespace blockrnn::cuda_emu;

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return broken(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle is null");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_handle_objects.push_back(
      std::make_unique<cublasContext>(cublasContext{nullptr, CUBLAS_DEFAULT_MATH, nullptr, 0}));
  *handle = g_handle_objects.back().get();
  g_handles.insert(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_handles.erase(handle) == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!is_live(handle))
    return broken(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: no live handle");
  if (!is_valid_stream(stream)) {
    return broken(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream: not a live stream");
  }
  handle->stream = stream;
  handle->workspace = nullptr;
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, std::size_t bytes) {
  const std::string fn = "cublasSetWorkspace";
  if (!is_live(handle)) return broken(CUBLAS_STATUS_NOT_INITIALIZED, fn + ": no live handle");
  if (workspace == nullptr || bytes == 0) {
    return broken(CUBLAS_STATUS_INVALID_VALUE,
                  fn + ": no workspace (blockrnn always gives one: without it cuBLAS uses its "
                       "default pool, shared by every stream of the handle)");
  }
  if (reinterpret_cast<std::uintptr_t>(workspace) % 256 != 0) {
    return broken(CUBLAS_STATUS_INVALID_VALUE, fn + ": the workspace is not 256-byte aligned");
  }
  if (!is_device_range(workspace, bytes)) {
    return broken(CUBLAS_STATUS_INVALID_VALUE,
                  fn + ": the workspace is not inside one device allocation");
  }
  if (std::string why = workspace_stream_mismatch(handle, workspace); !why.empty()) {
    return broken(CUBLAS_STATUS_INVALID_VALUE, fn + ": " + why);
  }
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (!is_live(handle))
    return broken(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream: no live handle");
  if (stream == nullptr) return broken(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream: null stream");
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!is_live(handle)) {
    return broken(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode: no live handle");
  }
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TENSOR_OP_MATH &&
      mode != CUBLAS_PEDANTIC_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH) {
    return broken(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode: unknown mode");
  }
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!is_live(handle)) {
    return broken(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetMathMode: no live handle");
  }
  if (mode == nullptr) return broken(CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode: null mode");
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success"
                                         : "see the emulation's message on stderr (host emulation)";
}

cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa,
                               cublasOperation_t transb, std::int64_t m, std::int64_t n,
                               std::int64_t k, const void* alpha, const void* A,
                               cudaDataType_t Atype, std::int64_t lda, const void* B,
                               cudaDataType_t Btype, std::int64_t ldb, const void* beta, void* C,
                               cudaDataType_t Ctype, std::int64_t ldc,
                               cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  const std::string fn = "cublasGemmEx_64";
  if (!is_live(handle)) return broken(CUBLAS_STATUS_NOT_INITIALIZED, fn + ": no live handle");
  auto bad = [&](const std::string& what) {
    return broken(CUBLAS_STATUS_INVALID_VALUE, fn + ": " + what);
  };
  auto valid_op = [](cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
  };
  if (!valid_op(transa) || !valid_op(transb)) return bad("transa / transb is not N, T or C");
  if (m < 0 || n < 0 || k < 0) {
    return bad("m, n, k = " + std::to_string(m) + ", " + std::to_string(n) + ", " +
               std::to_string(k) + " (must be >= 0)");
  }
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  const i64 a_rows = ta ? k : m, a_cols = ta ? m : k;  // A as stored
  const i64 b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (lda < std::max<i64>(1, a_rows)) {
    return bad("lda = " + std::to_string(lda) + " < max(1, " + std::to_string(a_rows) + ")");
  }
  if (ldb < std::max<i64>(1, b_rows)) {
    return bad("ldb = " + std::to_string(ldb) + " < max(1, " + std::to_string(b_rows) + ")");
  }
  if (ldc < std::max<i64>(1, m)) {
    return bad("ldc = " + std::to_string(ldc) + " < max(1, m = " + std::to_string(m) + ")");
  }
  if (alpha == nullptr || beta == nullptr) return bad("alpha or beta is null");
  const bool f64 = Atype == CUDA_R_64F && computeType == CUBLAS_COMPUTE_64F;
  const bool f32 = Atype == CUDA_R_32F && (computeType == CUBLAS_COMPUTE_32F ||
                                           computeType == CUBLAS_COMPUTE_32F_FAST_TF32);
  if (Atype != Btype || Atype != Ctype || !(f64 || f32) ||
      (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)) {
    return broken(CUBLAS_STATUS_NOT_SUPPORTED,
                  fn + ": type / compute type / algorithm combination not emulated");
  }
  if (!is_valid_stream(handle->stream)) return bad("the handle's stream is no longer live");
  // blockrnn's rule, stricter than cuBLAS's: every GEMM runs with a workspace of its own stream
  // (cuBLAS is bitwise reproducible only with one stream per workspace), set after the stream.
  if (handle->workspace == nullptr) {
    return bad("no workspace set since the handle's stream was set (cublasSetStream resets it)");
  }
  if (!is_device_range(handle->workspace, handle->workspace_bytes)) {
    return bad("the handle's workspace is no longer a live device allocation");
  }
  if (std::string why = workspace_stream_mismatch(handle, handle->workspace); !why.empty()) {
    return bad(why);
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  // Memory: a GPU would fault on a matrix outside device memory; the emulation says so at once.
  const i64 size = f64 ? 8 : 4;
  const i64 a_bytes = extent(a_rows, a_cols, lda) * size;
  const i64 b_bytes = extent(b_rows, b_cols, ldb) * size;
  const i64 c_bytes = extent(m, n, ldc) * size;
  auto outside = [](const void* p, i64 bytes) {
    return bytes > 0 && !is_device_range(p, static_cast<std::size_t>(bytes));
  };
  if (outside(A, a_bytes) || outside(B, b_bytes) || outside(C, c_bytes)) {
    return broken(CUBLAS_STATUS_EXECUTION_FAILED,
                  fn + ": A, B or C is not inside one device allocation (m, n, k = " +
                      std::to_string(m) + ", " + std::to_string(n) + ", " + std::to_string(k) +
                      "; lda, ldb, ldc = " + std::to_string(lda) + ", " + std::to_string(ldb) +
                      ", " + std::to_string(ldc) + ")");
  }
  if (overlap(C, c_bytes, A, a_bytes) || overlap(C, c_bytes, B, b_bytes)) {
    return bad("C overlaps A or B");
  }
  const bool tf32 =
      computeType == CUBLAS_COMPUTE_32F_FAST_TF32 ||
      (computeType == CUBLAS_COMPUTE_32F && handle->math == CUBLAS_TF32_TENSOR_OP_MATH);
  // Run on the handle's stream: now, or when a graph captured from it is launched. alpha and
  // beta are read now (host pointer mode), as cuBLAS does.
  if (f64) {
    const double a = *static_cast<const double*>(alpha), b = *static_cast<const double*>(beta);
    const auto* pa = static_cast<const double*>(A);
    const auto* pb = static_cast<const double*>(B);
    auto* pc = static_cast<double*>(C);
    enqueue(handle->stream,
            [=] { gemm_loops(ta, tb, m, n, k, a, pa, lda, pb, ldb, b, pc, ldc, false); });
  } else {
    const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
    const auto* pa = static_cast<const float*>(A);
    const auto* pb = static_cast<const float*>(B);
    auto* pc = static_cast<float*>(C);
    enqueue(handle->stream,
            [=] { gemm_loops(ta, tb, m, n, k, a, pa, lda, pb, ldb, b, pc, ldc, tf32); });
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

// ---- cuda_fp16.h: IEEE binary16 <-> binary32 ----

float __half2float(__half h) {
  const std::uint32_t sign = std::uint32_t(h.bits & 0x8000u) << 16;
  const std::uint32_t exp = (h.bits >> 10) & 0x1Fu, mant = h.bits & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant · 2^−24, exact in float
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

__half __float2half_rn(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t mag = x & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) {  // inf, or NaN (kept quiet, top payload bits kept)
    return {static_cast<std::uint16_t>(
        sign | (mag > 0x7F800000u ? 0x7E00u | ((mag >> 13) & 0x3FFu) : 0x7C00u))};
  }
  if (mag >= 0x477FF000u) return {static_cast<std::uint16_t>(sign | 0x7C00u)};  // ≥ 65520: inf
  if (mag < 0x38800000u) {  // below 2^−14: a subnormal half, |f|·2^24 rounded to even
    const float scaled = std::bit_cast<float>(mag) * 16777216.0f;  // exact (power of two)
    return {static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)))};
  }
  // Normal: drop 13 mantissa bits, to nearest, ties to even; a carry bumps the exponent.
  const std::uint32_t rounded = mag + 0xFFFu + ((mag >> 13) & 1u);
  return {static_cast<std::uint16_t>(sign | ((rounded - ((127u - 15u) << 23)) >> 13))};
}
