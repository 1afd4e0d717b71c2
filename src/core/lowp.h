// The 16-bit floating storage dtypes, float16 and bfloat16: both are stored in 16 bits and
// computed in float32. These are the conversions the ops use for them: a whole array widened to
// float32 (exact) or rounded from float32 (to nearest, ties to even; NaN stays NaN), and one
// value rounded to the dtype's precision (the attrs an op converts to its dtype). bfloat16's
// rounding is core/bfloat16.h's, inline so that the array loops below vectorize.
#pragma once

#include <cstdint>

#include "blockrnn/tensor.h"
#include "core/bfloat16.h"

namespace blockrnn::core {

// float16 or bfloat16: stored in 16 bits, computed in float32.
inline bool is_16bit_float(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

// n elements of `src` (float16 or bfloat16, as `dtype`) widened to float32 into `dst`.
inline void widen_to_float(DType dtype, const void* src, float* dst, std::int64_t n) {
  if (dtype == DType::kBFloat16) {
    const BFloat16* s = static_cast<const BFloat16*>(src);
    for (std::int64_t e = 0; e < n; ++e) dst[e] = bf16_to_float(s[e].bits);
  } else {
    const Half* s = static_cast<const Half*>(src);
    for (std::int64_t e = 0; e < n; ++e) dst[e] = half_to_float(s[e]);
  }
}

// n float32 values of `src` rounded once to `dtype` (float16 or bfloat16) into `dst`.
inline void narrow_from_float(DType dtype, const float* src, void* dst, std::int64_t n) {
  if (dtype == DType::kBFloat16) {
    BFloat16* d = static_cast<BFloat16*>(dst);
    for (std::int64_t e = 0; e < n; ++e) d[e].bits = bf16_from_float(src[e]);
  } else {
    Half* d = static_cast<Half*>(dst);
    for (std::int64_t e = 0; e < n; ++e) d[e] = float_to_half(src[e]);
  }
}

// v rounded to `dtype`'s precision and widened back (float16 or bfloat16; v itself otherwise).
inline float round_to_dtype(DType dtype, float v) {
  if (dtype == DType::kFloat16) return half_to_float(float_to_half(v));
  if (dtype == DType::kBFloat16) return bf16_round(v);
  return v;
}

}  // namespace blockrnn::core
