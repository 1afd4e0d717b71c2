// Plain-loop linear algebra of the reference kernels: the executable spec, so every product is
// the textbook triple loop, accumulated in T in increasing index order. Row-major, dense.
#pragma once

#include <cstdint>
#include <vector>

namespace blockrnn::ref {

// C[M,N] = Σ_k A(i,k)·B(k,j), with A(i,k) = A[i·a_i + k·a_k] and B(k,j) = B[k·b_k + j·b_j]:
// the one triple loop behind the three products below.
template <typename T>
void matmul_strided(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t a_i,
                    std::int64_t a_k, const T* B, std::int64_t b_k, std::int64_t b_j, T* C) {
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      T acc = T(0);
      for (std::int64_t k = 0; k < K; ++k) acc += A[i * a_i + k * a_k] * B[k * b_k + j * b_j];
      C[i * N + j] = acc;
    }
  }
}

// C[M,N] = A[M,K]·B[K,N]
template <typename T>
void matmul(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, const T* B, T* C) {
  matmul_strided(M, N, K, A, K, 1, B, N, 1, C);
}

// C[M,N] = A[M,K]·B[N,K]ᵀ
template <typename T>
void matmul_bt(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, const T* B, T* C) {
  matmul_strided(M, N, K, A, K, 1, B, 1, K, C);
}

// C[M,N] = A[K,M]ᵀ·B[K,N]
template <typename T>
void matmul_at(std::int64_t M, std::int64_t N, std::int64_t K, const T* A, const T* B, T* C) {
  matmul_strided(M, N, K, A, 1, M, B, N, 1, C);
}

// out[j] = Σ_r m[r, j] over a [rows, cols] matrix.
template <typename T>
void column_sums(std::int64_t rows, std::int64_t cols, const T* m, T* out) {
  for (std::int64_t j = 0; j < cols; ++j) {
    T acc = T(0);
    for (std::int64_t r = 0; r < rows; ++r) acc += m[r * cols + j];
    out[j] = acc;
  }
}

// [a, b] along columns: [B, Ia] and [B, Ib] -> [B, Ia+Ib]
template <typename T>
std::vector<T> concat_cols(std::int64_t B, std::int64_t Ia, const T* a, std::int64_t Ib,
                           const T* b) {
  std::vector<T> out(B * (Ia + Ib));
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t k = 0; k < Ia; ++k) out[n * (Ia + Ib) + k] = a[n * Ia + k];
    for (std::int64_t k = 0; k < Ib; ++k) out[n * (Ia + Ib) + Ia + k] = b[n * Ib + k];
  }
  return out;
}

}  // namespace blockrnn::ref
