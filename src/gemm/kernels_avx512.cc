// GEMM kernels of the avx512 path (see kernels_table.h; CMakeLists.txt sets this file's
// instruction-set flags).
#include <immintrin.h>

#include "gemm/kernels.h"
#include "gemm/kernels_table.h"
#include "gemm/transpose_avx.h"

namespace blockrnn::gemm::detail {
namespace {
// This file's path: the tag of its kernels, compiled with this file's flags (internal linkage),
// and its vector operations and blocking.
struct Avx512 {
  template <typename T>
  struct Vec;
};
template <>
struct Avx512::Vec<float> {
  using V = __m512;
  static constexpr int kLanes = 16, kMR = 8, kNV = 2, kKC = 256, kMTMax = 96, kNTPanels = 4;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // The transposed B's packing (pack_block) moves 8 × 8 blocks through AVX registers.
  static void transpose8(const float* src, int64_t lds, float* dst, int64_t ldd) {
    transpose_8x8(src, lds, dst, ldd);
  }
};
template <>
struct Avx512::Vec<double> {
  using V = __m512d;
  static constexpr int kLanes = 8, kMR = 8, kNV = 2, kKC = 128, kMTMax = 96, kNTPanels = 4;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V bcast(const double* p) { return _mm512_set1_pd(*p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
};
}  // namespace

constinit const Path kAvx512Path = gemm_path_table<Avx512>();

}  // namespace blockrnn::gemm::detail
