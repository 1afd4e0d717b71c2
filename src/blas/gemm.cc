// GEMM through two BLAS backends, chosen per call by measurement and by determinism (see
// gemm.h, docs/performance.md and docs/reliability.md):
//   float32 A·B (at least 8 rows) and Aᵀ·B  → oneDNN's dnnl_sgemm
//   every other product                      → OpenBLAS, reduction split into K-chunks
// Speed, measured on Zen 4, 2 threads, BlockLSTM/BlockGRU T=50 B=64 I=H=512
// (bench/bench_ops.cc, BLOCKRNN_GEMM=openblas vs default): oneDNN's sgemm makes the forward
// 15-20 % faster (the hoisted input projection and the [B, H]·[H, 4H] recurrent products).
// Determinism: results must not depend on the thread count. Checked over grids of shapes at
// 1, 2 and 4 threads: oneDNN's A·B and Aᵀ·B are thread-count independent except A·B with one
// row (its GEMV path splits the reduction), and its A·Bᵀ is not (K = 2048); OpenBLAS 0.3.21
// is independent for K ≤ 320 but not for larger K that are not multiples of 32 (its threaded
// driver halves the K blocks with a different rounding). So OpenBLAS gets at most kChunk
// values of K per call, accumulating the chunks in a fixed order with beta = 1.
// BLOCKRNN_GEMM=openblas|onednn forces one backend, unchunked, for speed comparisons only
// (determinism is then not guaranteed).
#include "blas/gemm.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <string>

#include "blockrnn/error.h"

namespace blockrnn::blas {
namespace {

std::atomic<int> g_threads{1};

enum class Backend { kAuto, kOpenBLAS, kOneDNN };

Backend backend_from_env() {
  const char* e = std::getenv("BLOCKRNN_GEMM");
  const std::string v = e ? e : "";
  if (v == "openblas") return Backend::kOpenBLAS;
  if (v == "onednn") return Backend::kOneDNN;
  return Backend::kAuto;
}

const Backend g_backend = backend_from_env();

void check_int(std::int64_t v) {
  if (v > std::numeric_limits<blasint>::max()) {
    throw Error(ErrorCode::kResourceExhausted,
                "gemm: dimension " + std::to_string(v) + " exceeds the BLAS integer range");
  }
}

template <typename T>
void scale(std::int64_t m, std::int64_t n, T beta, T* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (beta == T(0)) {
      for (std::int64_t j = 0; j < n; ++j) row[j] = T(0);
    } else {
      for (std::int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

// K-chunk of OpenBLAS calls (values per call); float64 kernels block K more finely.
template <typename T>
constexpr std::int64_t kChunk = sizeof(T) == 4 ? 256 : 128;

bool use_onednn(Trans ta, Trans tb, std::int64_t m) {
  switch (g_backend) {
    case Backend::kOpenBLAS:
      return false;
    case Backend::kOneDNN:
      return true;
    case Backend::kAuto:
      break;
  }
  if (tb != Trans::kNo) return false;  // A·Bᵀ: OpenBLAS
  return ta == Trans::kYes || m >= 8;  // Aᵀ·B; A·B unless a single (or very few) rows
}

// OpenBLAS over K-chunks: C = alpha·Σ_chunks op(A)[:, chunk]·op(B)[chunk, :] + beta·C, the
// chunks in increasing K order (beta applies to the first only).
template <typename T, typename Fn>
void openblas_chunked(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
                      const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                      std::int64_t ldc, Fn fn) {
  const bool single = g_backend == Backend::kOpenBLAS;  // unchunked, for comparisons only
  const std::int64_t step = single ? k : kChunk<T>;
  for (std::int64_t k0 = 0; k0 < k; k0 += step) {
    const std::int64_t kc = std::min(step, k - k0);
    // op(A)[:, k0:k0+kc] and op(B)[k0:k0+kc, :] in row-major storage.
    const T* ak = ta == Trans::kNo ? a + k0 : a + k0 * lda;
    const T* bk = tb == Trans::kNo ? b + k0 * ldb : b + k0;
    fn(CblasRowMajor, ta == Trans::kYes ? CblasTrans : CblasNoTrans,
       tb == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
       static_cast<blasint>(n), static_cast<blasint>(kc), alpha, ak, static_cast<blasint>(lda), bk,
       static_cast<blasint>(ldb), k0 == 0 ? beta : T(1), c, static_cast<blasint>(ldc));
  }
}

}  // namespace

template <>
void gemm<float>(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                 const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
                 float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale(m, n, beta, c, ldc);
  for (std::int64_t v : {m, n, k, lda, ldb, ldc}) check_int(v);
  if (use_onednn(ta, tb, m)) {
    // oneDNN's OpenMP runtime sizes its team from the calling thread's nthreads ICV.
    omp_set_num_threads(g_threads.load(std::memory_order_relaxed));
    const dnnl_status_t st =
        dnnl_sgemm(ta == Trans::kYes ? 'T' : 'N', tb == Trans::kYes ? 'T' : 'N', m, n, k, alpha, a,
                   lda, b, ldb, beta, c, ldc);
    if (st != dnnl_success) {
      throw Error(ErrorCode::kInternal,
                  "gemm: dnnl_sgemm failed with status " + std::to_string(static_cast<int>(st)));
    }
    return;
  }
  openblas_chunked<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, cblas_sgemm);
}

template <>
void gemm<double>(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
                  const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
                  double* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale(m, n, beta, c, ldc);
  for (std::int64_t v : {m, n, k, lda, ldb, ldc}) check_int(v);
  openblas_chunked<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, cblas_dgemm);
}

void set_num_threads(int n) {
  g_threads.store(n);
  openblas_set_num_threads(n);
}

const char* backend_name() {
  switch (g_backend) {
    case Backend::kOpenBLAS:
      return "openblas";
    case Backend::kOneDNN:
      return "onednn";
    case Backend::kAuto:
      break;
  }
  return "onednn (float32 A·B with >= 8 rows, Aᵀ·B) + openblas (K-chunked)";
}

}  // namespace blockrnn::blas
