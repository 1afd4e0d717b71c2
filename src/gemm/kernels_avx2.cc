// GEMM kernels of the avx2 path (see kernels_table.h; CMakeLists.txt sets this file's
// instruction-set flags).
#include <immintrin.h>

#include "gemm/kernels.h"
#include "gemm/kernels_table.h"
#include "gemm/transpose_avx.h"

namespace blockrnn::gemm::detail {
namespace {
// This file's path: the tag of its kernels, compiled with this file's flags (internal linkage),
// and its vector operations and blocking.
struct Avx2 {
  template <typename T>
  struct Vec;
};
// float's K block and output tile, measured on a Zen 3 core (docs/gemm.md): K blocks of 1024
// rows reload C a quarter as often as 256 did (the weight gradient, K = T·B = 3200: 76 → 88
// GFLOP/s), 144-row tiles pack a transposed A fewer times.
template <>
struct Avx2::Vec<float> {
  using V = __m256;
  static constexpr int kLanes = 8, kMR = 6, kNV = 2, kKC = 1024, kMTMax = 144, kNTPanels = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V bcast(const float* p) { return _mm256_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // The transposed B's packing (pack_block) moves 8 × 8 blocks through AVX registers.
  static void transpose8(const float* src, int64_t lds, float* dst, int64_t ldd) {
    transpose_8x8(src, lds, dst, ldd);
  }
};
template <>
struct Avx2::Vec<double> {
  using V = __m256d;
  static constexpr int kLanes = 4, kMR = 6, kNV = 2, kKC = 128, kMTMax = 96, kNTPanels = 8;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V bcast(const double* p) { return _mm256_set1_pd(*p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
};
}  // namespace

constinit const Path kAvx2Path = gemm_path_table<Avx2>();

}  // namespace blockrnn::gemm::detail
