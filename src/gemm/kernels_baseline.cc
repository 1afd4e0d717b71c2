// GEMM kernels of the baseline path (see kernels_impl.inc; CMakeLists.txt sets this file's
// instruction-set flags).
#define BLOCKRNN_GEMM_PATH baseline
#define BLOCKRNN_GEMM_TABLE kBaselinePath
#define BLOCKRNN_GEMM_BASELINE
#include "gemm/kernels_impl.inc"
