// GEMM kernels of the baseline path (see kernels_table.h; CMakeLists.txt sets this file's
// instruction-set flags).
#include <immintrin.h>

#include "gemm/kernels.h"
#include "gemm/kernels_table.h"

namespace blockrnn::gemm::detail {
namespace {
// This file's path: the tag of its kernels, compiled with this file's flags (internal linkage),
// and its vector operations and blocking.
struct Baseline {
  template <typename T>
  struct Vec;
};
// SSE2 has no fused multiply-add: the product is rounded, then added.
template <>
struct Baseline::Vec<float> {
  using V = __m128;
  static constexpr int kLanes = 4, kMR = 4, kNV = 2, kKC = 256, kMTMax = 64, kNTPanels = 8;
  static V zero() { return _mm_setzero_ps(); }
  static V load(const float* p) { return _mm_loadu_ps(p); }
  static void store(float* p, V v) { _mm_storeu_ps(p, v); }
  static V bcast(const float* p) { return _mm_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
  static V mul(V a, V b) { return _mm_mul_ps(a, b); }
};
template <>
struct Baseline::Vec<double> {
  using V = __m128d;
  static constexpr int kLanes = 2, kMR = 4, kNV = 2, kKC = 128, kMTMax = 64, kNTPanels = 8;
  static V zero() { return _mm_setzero_pd(); }
  static V load(const double* p) { return _mm_loadu_pd(p); }
  static void store(double* p, V v) { _mm_storeu_pd(p, v); }
  static V bcast(const double* p) { return _mm_set1_pd(*p); }
  static V fmadd(V a, V b, V c) { return _mm_add_pd(_mm_mul_pd(a, b), c); }
  static V mul(V a, V b) { return _mm_mul_pd(a, b); }
};
}  // namespace

constinit const Path kBaselinePath = gemm_path_table<Baseline>();

}  // namespace blockrnn::gemm::detail
