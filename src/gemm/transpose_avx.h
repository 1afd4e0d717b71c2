// An 8 × 8 float transpose in AVX registers, for the packing of a transposed B
// (kernels_table.h, pack_block). Included only by the per-path files compiled with AVX2
// (kernels_avx2.cc, kernels_avx512.cc); `static inline`, so that each keeps its own copy
// compiled with its own flags (tests/cpp/check_isa_objects.sh).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace blockrnn::gemm::detail {

// dst[c·ldd + r] = src[r·lds + c] for r, c in [0, 8): rows of src become columns of dst.
static inline void transpose_8x8(const float* src, std::int64_t lds, float* dst, std::int64_t ldd) {
  __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds),
         r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds),
         r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
         r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
  // Pairs of rows interleaved (a0 b0 a1 b1 | a4 b4 a5 b5, …), then pairs of pairs, then the
  // 128-bit halves exchanged.
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(u0, u4, 0x20);
  r1 = _mm256_permute2f128_ps(u1, u5, 0x20);
  r2 = _mm256_permute2f128_ps(u2, u6, 0x20);
  r3 = _mm256_permute2f128_ps(u3, u7, 0x20);
  r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
  r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
  r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
  r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
  _mm256_storeu_ps(dst, r0);
  _mm256_storeu_ps(dst + ldd, r1);
  _mm256_storeu_ps(dst + 2 * ldd, r2);
  _mm256_storeu_ps(dst + 3 * ldd, r3);
  _mm256_storeu_ps(dst + 4 * ldd, r4);
  _mm256_storeu_ps(dst + 5 * ldd, r5);
  _mm256_storeu_ps(dst + 6 * ldd, r6);
  _mm256_storeu_ps(dst + 7 * ldd, r7);
}

}  // namespace blockrnn::gemm::detail
