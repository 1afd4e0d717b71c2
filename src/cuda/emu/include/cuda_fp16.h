// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the stand-in for the
// toolkit's half-precision header, with the two conversions the kernels use, written for the
// host (IEEE binary16, round to nearest even).
#pragma once

#include <cstdint>

struct __half {
  std::uint16_t bits;
};

float __half2float(__half h);
__half __float2half_rn(float f);
