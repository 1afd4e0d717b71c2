// One GEMM interface over the BLAS backends (oneDNN's sgemm and OpenBLAS, chosen per operand
// layout by measurement: gemm.cc, docs/performance.md). Row-major throughout:
//   C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C
// op(X) = X or Xᵀ. Degenerate sizes are handled here (M or N = 0: nothing; K = 0: C = beta*C),
// so callers never special-case empty tensors.
#pragma once

#include <cstdint>

namespace blockrnn::blas {

enum class Trans : bool { kNo = false, kYes = true };

template <typename T>
void gemm(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc);

// Threads the BLAS backend may use for one call.
void set_num_threads(int n);

// Name of the backend, e.g. "openblas".
const char* backend_name();

}  // namespace blockrnn::blas
