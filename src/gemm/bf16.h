// bfloat16 as raw bits for the GEMM engine: a std::uint16_t holding the upper half of an IEEE
// float32 (core/bfloat16.h, the one definition of the rounding, brought into namespace gemm).
// Not included by the per-instruction-set kernel files, which must define no shared inline code.
#pragma once

#include "core/bfloat16.h"

namespace blockrnn::gemm {

using core::bf16_from_float;  // float32 → bfloat16, nearest even, NaN kept quiet
using core::bf16_round;       // float32 rounded to the nearest bfloat16, as float32
using core::bf16_to_float;    // bfloat16 → float32, exact

}  // namespace blockrnn::gemm
