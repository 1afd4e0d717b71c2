// bfloat16 ↔ float32: the one definition of the rounding (docs/design.md, "bfloat16"). A
// bfloat16 is a std::uint16_t holding the upper half of an IEEE float32 (sign, 8-bit exponent,
// 7 stored mantissa bits): the same bits as ml_dtypes.bfloat16, torch.bfloat16 and Intel's
// __bf16. Every conversion in the library is these functions: the public float_to_bfloat16 and
// bfloat16_to_float (src/core/tensor.cc), the array conversions of the ops (core/lowp.h) and the
// bfloat16 GEMM's operand rounding (gemm/bf16.h; its AVX512_BF16 vector rounding,
// vcvtne2ps2bf16, gives the same bits and is tested against bf16_from_float).
//
// Plain inline functions, no intrinsics; not included by the per-instruction-set kernel files,
// which must define no shared inline code (tests/cpp/check_isa_objects.sh).
#pragma once

#include <bit>
#include <cstdint>

namespace blockrnn::core {

// float32 → bfloat16, rounded to nearest, ties to even (what TensorFlow, PyTorch and ml_dtypes
// do). Overflow rounds to ±inf as IEEE rounding does; subnormals are rounded, not flushed. A NaN
// stays a NaN: its sign and upper payload are kept and the quiet bit is set (a plain rounding
// could carry a NaN whose payload sits only in the dropped bits into ±inf).
inline std::uint16_t bf16_from_float(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  // Round the 16 dropped bits to nearest, ties to even: adding 0x7fff plus the lowest kept bit
  // carries into the kept bits exactly when the dropped part is above half, or half with an odd
  // kept part. A carry out of the significand is the correct result (the next binade, or
  // infinity past the largest finite value); subnormals round the same way.
  const std::uint32_t odd = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7fffu + odd) >> 16);
}

// bfloat16 → float32: exact (the low 16 mantissa bits are zero).
inline float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// x rounded to the nearest bfloat16, as a float32.
inline float bf16_round(float x) {
  return bf16_to_float(bf16_from_float(x));
}

}  // namespace blockrnn::core
