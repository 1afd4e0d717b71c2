// Fused float32 element-wise kernels of the avx2 path (see pointwise_table.h; CMakeLists.txt
// sets this file's instruction-set flags).
#include "cpu/pointwise_table.h"

namespace blockrnn::cpu {
namespace {
// This file's path: the tag of its kernels, compiled with this file's flags (internal linkage).
struct Avx2 {};
}  // namespace

constinit const PointwiseF32 kAvx2Pointwise = pointwise_table<Avx2>();

}  // namespace blockrnn::cpu
