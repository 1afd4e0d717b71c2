// The float16 array conversions on F16C (lowp_avx2.cc, compiled with -mavx2 -mf16c), which
// widen_to_float / narrow_from_float (core/lowp.h) call where has_f16c_conversions(): the bits
// of the scalar half_to_float / float_to_half for every input. This header includes nothing with
// inline code, so that the per-path file that defines them defines no shared inline code
// (tests/cpp/check_isa_objects.sh).
#pragma once

#include <cstdint>

#include "blockrnn/tensor.h"

namespace blockrnn::core {

void widen_half_f16c(const Half* src, float* dst, std::int64_t n);
void narrow_half_f16c(const float* src, Half* dst, std::int64_t n);

}  // namespace blockrnn::core
