// float16 ⇄ float32 array conversions with F16C's vcvtph2ps / vcvtps2ph, eight values at a time
// (this file is compiled with -mavx2 -mf16c; core/lowp.cc calls it only on a CPU with F16C and
// a path other than baseline). They give the bits of the scalar half_to_float / float_to_half
// (blockrnn/tensor.h) for every input: tests/cpp/test_lowp.cc compares all 65536 halves and
// every float bit pattern class, with and without the host's flush-to-zero and
// denormals-are-zero modes. One place where the instruction alone would differ: vcvtph2ps
// quiets a signalling NaN, the scalar widening keeps its bits, so NaN lanes are widened with
// integer operations as the scalar code does. vcvtps2ph rounds as float_to_half does, NaNs
// included (made quiet, the payload truncated).
#include <immintrin.h>

#include "core/lowp_f16c.h"

namespace blockrnn::core {

void widen_half_f16c(const Half* src, float* dst, std::int64_t n) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7c00), mant_mask = _mm256_set1_epi32(0x3ff);
  const __m256i sign_mask = _mm256_set1_epi32(0x8000), inf_bits = _mm256_set1_epi32(0x7f800000);
  std::int64_t e = 0;
  for (; e + 8 <= n; e += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + e));
    const __m256 widened = _mm256_cvtph_ps(h);
    const __m256i h32 = _mm256_cvtepu16_epi32(h);
    const __m256i mant = _mm256_and_si256(h32, mant_mask);
    // NaN: exponent all ones and a mantissa; the scalar widening's bits, the payload kept.
    const __m256i is_nan =
        _mm256_andnot_si256(_mm256_cmpeq_epi32(mant, _mm256_setzero_si256()),
                            _mm256_cmpeq_epi32(_mm256_and_si256(h32, exp_mask), exp_mask));
    const __m256i nan_bits =
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(h32, sign_mask), 16),
                        _mm256_or_si256(inf_bits, _mm256_slli_epi32(mant, 13)));
    const __m256 out =
        _mm256_blendv_ps(widened, _mm256_castsi256_ps(nan_bits), _mm256_castsi256_ps(is_nan));
    _mm256_storeu_ps(dst + e, out);
  }
  for (; e < n; ++e) dst[e] = half_to_float(src[e]);
}

void narrow_half_f16c(const float* src, Half* dst, std::int64_t n) {
  std::int64_t e = 0;
  for (; e + 8 <= n; e += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + e), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + e), h);
  }
  for (; e < n; ++e) dst[e] = float_to_half(src[e]);
}

}  // namespace blockrnn::core
