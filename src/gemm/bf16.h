// bfloat16 as raw bits: a std::uint16_t holding the upper half of an IEEE float32 (sign, 8-bit
// exponent, 7 stored mantissa bits). The same bits as ml_dtypes.bfloat16, torch.bfloat16 and
// Intel's __bf16, so buffers from any of them can be passed as `const std::uint16_t*`.
//
// Plain inline functions, no intrinsics: any file may include this header (it is not included
// by the per-instruction-set kernel files, which must define no shared inline code).
#pragma once

#include <bit>
#include <cstdint>

namespace blockrnn::gemm {

// float32 → bfloat16, rounded to nearest, ties to even (what TensorFlow, PyTorch and
// ml_dtypes do). Overflow rounds to ±inf as IEEE rounding does; subnormals are rounded, not
// flushed. A NaN stays a NaN: its sign and upper payload are kept and the quiet bit is set (a
// plain rounding could carry a NaN whose payload sits in the low half into ±inf).
inline std::uint16_t bf16_from_float(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// bfloat16 → float32: exact (the low 16 mantissa bits are zero).
inline float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// x rounded to the nearest bfloat16, as a float32.
inline float bf16_round(float x) {
  return bf16_to_float(bf16_from_float(x));
}

}  // namespace blockrnn::gemm
