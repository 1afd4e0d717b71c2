// The array conversions of core/lowp.h, split over the call's threads (core/parallel.h).
#include "core/lowp.h"

#include "core/isa.h"
#include "core/lowp_f16c.h"
#include "core/parallel.h"

namespace blockrnn::core {

bool has_f16c_conversions() {
  static const bool f16c = cpu_has_f16c();
  return f16c && active_isa() != Isa::kBaseline;
}

void widen_to_float(DType dtype, const void* src, float* dst, std::int64_t n) {
  const bool f16c = dtype == DType::kFloat16 && has_f16c_conversions();
  parallel_for(n, 1, [&](std::int64_t e0, std::int64_t e1) {
    if (dtype == DType::kBFloat16) {
      const BFloat16* s = static_cast<const BFloat16*>(src);
      for (std::int64_t e = e0; e < e1; ++e) dst[e] = bf16_to_float(s[e].bits);
    } else if (f16c) {
      widen_half_f16c(static_cast<const Half*>(src) + e0, dst + e0, e1 - e0);
    } else {
      const Half* s = static_cast<const Half*>(src);
      for (std::int64_t e = e0; e < e1; ++e) dst[e] = half_to_float(s[e]);
    }
  });
}

void narrow_from_float(DType dtype, const float* src, void* dst, std::int64_t n) {
  const bool f16c = dtype == DType::kFloat16 && has_f16c_conversions();
  parallel_for(n, 1, [&](std::int64_t e0, std::int64_t e1) {
    if (dtype == DType::kBFloat16) {
      BFloat16* d = static_cast<BFloat16*>(dst);
      for (std::int64_t e = e0; e < e1; ++e) d[e].bits = bf16_from_float(src[e]);
    } else if (f16c) {
      narrow_half_f16c(src + e0, static_cast<Half*>(dst) + e0, e1 - e0);
    } else {
      Half* d = static_cast<Half*>(dst);
      for (std::int64_t e = e0; e < e1; ++e) d[e] = float_to_half(src[e]);
    }
  });
}

}  // namespace blockrnn::core
