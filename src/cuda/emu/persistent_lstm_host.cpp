// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the persistent BlockLSTM
// entries of src/cuda/persistent_lstm.cu compiled by the host compiler with
// BLOCKRNN_CUDA_HOST_EMU, their cooperative launches run by the host driver of the bodies.
#include "cuda/persistent_lstm.cu"
