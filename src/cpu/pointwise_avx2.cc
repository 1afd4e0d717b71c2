// Fused float32 element-wise kernels of the avx2 path (see pointwise_impl.inc; CMakeLists.txt
// sets this file's instruction-set flags).
#define BLOCKRNN_POINTWISE_PATH avx2
#define BLOCKRNN_POINTWISE_TABLE kAvx2Pointwise
#include "cpu/pointwise_impl.inc"
