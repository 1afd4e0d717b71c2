// GEMM kernels of the avx512 path (see kernels_impl.inc; CMakeLists.txt sets this file's
// instruction-set flags).
#define BLOCKRNN_GEMM_PATH avx512
#define BLOCKRNN_GEMM_TABLE kAvx512Path
#define BLOCKRNN_GEMM_AVX512
#include "gemm/kernels_impl.inc"
