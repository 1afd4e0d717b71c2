// Fused float32 element-wise kernels of the avx512 path (see pointwise_table.h; CMakeLists.txt
// sets this file's instruction-set flags).
#include "cpu/pointwise_table.h"

namespace blockrnn::cpu {
namespace {
// This file's path: the tag of its kernels, compiled with this file's flags (internal linkage).
struct Avx512 {};
}  // namespace

constinit const PointwiseF32 kAvx512Pointwise = pointwise_table<Avx512>();

}  // namespace blockrnn::cpu
