// Fused float32 element-wise kernels of the baseline path (see pointwise_table.h; CMakeLists.txt
// sets this file's instruction-set flags).
#include "cpu/pointwise_table.h"

namespace blockrnn::cpu {
namespace {
// This file's path: the tag of its kernels, compiled with this file's flags (internal linkage).
struct Baseline {};
}  // namespace

constinit const PointwiseF32 kBaselinePointwise = pointwise_table<Baseline>();

}  // namespace blockrnn::cpu
