// The array conversions of core/lowp.h, split over the call's threads (core/parallel.h).
#include "core/lowp.h"

#include "core/parallel.h"

namespace blockrnn::core {

void widen_to_float(DType dtype, const void* src, float* dst, std::int64_t n) {
  parallel_for(n, 1, [&](std::int64_t e0, std::int64_t e1) {
    if (dtype == DType::kBFloat16) {
      const BFloat16* s = static_cast<const BFloat16*>(src);
      for (std::int64_t e = e0; e < e1; ++e) dst[e] = bf16_to_float(s[e].bits);
    } else {
      const Half* s = static_cast<const Half*>(src);
      for (std::int64_t e = e0; e < e1; ++e) dst[e] = half_to_float(s[e]);
    }
  });
}

void narrow_from_float(DType dtype, const float* src, void* dst, std::int64_t n) {
  parallel_for(n, 1, [&](std::int64_t e0, std::int64_t e1) {
    if (dtype == DType::kBFloat16) {
      BFloat16* d = static_cast<BFloat16*>(dst);
      for (std::int64_t e = e0; e < e1; ++e) d[e].bits = bf16_from_float(src[e]);
    } else {
      Half* d = static_cast<Half*>(dst);
      for (std::int64_t e = e0; e < e1; ++e) d[e] = float_to_half(src[e]);
    }
  });
}

}  // namespace blockrnn::core
