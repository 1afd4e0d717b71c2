// GEMM through OpenBLAS's CBLAS (see gemm.h).
#include "blas/gemm.h"

#include <cblas.h>

#include <limits>
#include <string>

#include "blockrnn/error.h"

namespace blockrnn::blas {
namespace {

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

}  // namespace

template <>
void gemm<float>(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                 const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
                 float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale(m, n, beta, c, ldc);
  for (std::int64_t v : {m, n, k, lda, ldb, ldc}) check_int(v);
  cblas_sgemm(CblasRowMajor, ta == Trans::kYes ? CblasTrans : CblasNoTrans,
              tb == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

template <>
void gemm<double>(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
                  const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
                  double* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale(m, n, beta, c, ldc);
  for (std::int64_t v : {m, n, k, lda, ldb, ldc}) check_int(v);
  cblas_dgemm(CblasRowMajor, ta == Trans::kYes ? CblasTrans : CblasNoTrans,
              tb == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void set_num_threads(int n) {
  openblas_set_num_threads(n);
}

const char* backend_name() {
  return "openblas";
}

}  // namespace blockrnn::blas
