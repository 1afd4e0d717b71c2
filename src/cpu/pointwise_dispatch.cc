// Run-time choice of the float32 element-wise kernels' ISA path (core/isa.h).
#include "cpu/pointwise_dispatch.h"

#include "core/isa.h"

namespace blockrnn::cpu {

const PointwiseF32& pointwise_f32() {
  switch (core::active_isa()) {
    case Isa::kAvx512:
      return kAvx512Pointwise;
    case Isa::kAvx2:
      return kAvx2Pointwise;
    case Isa::kBaseline:
      break;
  }
  return kBaselinePointwise;
}

}  // namespace blockrnn::cpu
