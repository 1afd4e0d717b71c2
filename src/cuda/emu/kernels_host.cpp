// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the real kernels and
// drivers of src/cuda/kernels.cu, compiled by the host compiler with BLOCKRNN_CUDA_HOST_EMU
// (kernels.cu then includes cuda/emu/emu.h for the kernel qualifiers and the built-in variables,
// and its launch helper runs the grid through blockrnn::cuda_emu::launch).
#include "cuda/kernels.cu"
