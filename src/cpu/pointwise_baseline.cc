// Fused float32 element-wise kernels of the baseline path (see pointwise_impl.inc; CMakeLists.txt
// sets this file's instruction-set flags).
#define BLOCKRNN_POINTWISE_PATH baseline
#define BLOCKRNN_POINTWISE_TABLE kBaselinePointwise
#include "cpu/pointwise_impl.inc"
