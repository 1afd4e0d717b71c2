// Fused float32 element-wise kernels of the avx512 path (see pointwise_impl.inc; CMakeLists.txt
// sets this file's instruction-set flags).
#define BLOCKRNN_POINTWISE_PATH avx512
#define BLOCKRNN_POINTWISE_TABLE kAvx512Pointwise
#include "cpu/pointwise_impl.inc"
