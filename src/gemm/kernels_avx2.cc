// GEMM kernels of the avx2 path (see kernels_impl.inc; CMakeLists.txt sets this file's
// instruction-set flags).
#define BLOCKRNN_GEMM_PATH avx2
#define BLOCKRNN_GEMM_TABLE kAvx2Path
#define BLOCKRNN_GEMM_AVX2
#include "gemm/kernels_impl.inc"
