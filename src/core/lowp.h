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

// n elements of `src` (float16 or bfloat16, as `dtype`) widened to float32 into `dst`, split
// over the call's threads (each element is converted alone: the bits do not depend on the
// split). Defined in lowp.cc, which is built with OpenMP (this header is also read by code
// that is not).
void widen_to_float(DType dtype, const void* src, float* dst, std::int64_t n);

// n float32 values of `src` rounded once to `dtype` (float16 or bfloat16) into `dst`, split over
// the call's threads as widen_to_float.
void narrow_from_float(DType dtype, const float* src, void* dst, std::int64_t n);

// Whether the float16 array conversions run on F16C now (core/lowp_f16c.h): the CPU has it and
// the active path is not baseline (which stays the plain C++ of every conversion).
bool has_f16c_conversions();

// v rounded to `dtype`'s precision and widened back (float16 or bfloat16; v itself otherwise).
inline float round_to_dtype(DType dtype, float v) {
  if (dtype == DType::kFloat16) return half_to_float(float_to_half(v));
  if (dtype == DType::kBFloat16) return bf16_round(v);
  return v;
}

}  // namespace blockrnn::core
