// blockrnn/cuda.h — the CUDA backend: every op on device memory, asynchronous on a CUDA stream.
//
// Built when CMake is configured with BLOCKRNN_CUDA=ON (the default where a CUDA compiler is
// found); link the target blockrnn::cuda (library blockrnn_cuda). docs/cuda.md has the design.
// Status: built and compiled in CI, NOT YET RUN ON A GPU (docs/status.md).
//
// The same typed structs as the CPU API (gru.h, lstm.h, sequence.h), whose TensorViews hold
// DEVICE pointers (cudaMalloc, cudaMallocAsync or managed memory); the same semantics, the same
// validation and the same error messages, which come first, on the host, before anything is
// launched or allocated. Validation reads no tensor data: seq_len_max is a host integer of the
// typed structs. A host pointer where device memory is expected is an Error(kInvalidArgument)
// naming the op and the argument.
//
// Streams: each call enqueues its work on `stream` (nullptr: the legacy default stream) and
// returns without waiting; the outputs are ready when the stream reaches that point. The inputs
// must stay valid and unchanged until then. Workspace is allocated with cudaMallocAsync on the
// same stream and freed (cudaFreeAsync) at the end of the call's work: stream-ordered, no
// synchronisation. Outputs are the caller's (caller-owned device memory, every element written;
// they must not alias the inputs or each other).
//
// float16 is computed in float32 (as the CPU path, docs/design.md): inputs are widened once per
// call into float32 workspace and each output is rounded to half once. float32 and float64 run
// natively. Matrix products use cuBLAS; the fp32 math mode is below.
//
// Errors: Error(kInvalidArgument) for bad input (as the CPU API); Error(kResourceExhausted) when
// device memory cannot be allocated; Error(kInternal) for any other CUDA or cuBLAS failure, with
// the CUDA error's name. An asynchronous failure of a kernel shows up at a later synchronisation,
// as always with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include "blockrnn/export.h"
#include "blockrnn/gru.h"
#include "blockrnn/lstm.h"
#include "blockrnn/ops.h"
#include "blockrnn/sequence.h"

namespace blockrnn::cuda {

// fp32 matrix products: kExactFP32 (the default) computes them in IEEE float32 (cuBLAS compute
// type CUBLAS_COMPUTE_32F); kTF32 lets cuBLAS use TF32 tensor cores (10-bit mantissa inputs,
// float32 accumulation: CUBLAS_COMPUTE_32F_FAST_TF32), as TensorFlow does by default on Ampere
// and later. Process-wide; float64 and the element-wise kernels are unaffected. (The
// environment variable NVIDIA_TF32_OVERRIDE=0 of the CUDA libraries still disables TF32.)
enum class MathMode { kExactFP32, kTF32 };
BLOCKRNN_API void set_math_mode(MathMode mode);
BLOCKRNN_API MathMode get_math_mode();

// Per-step loops as CUDA Graphs (default off): with it on, a sequence op's per-step loop (one
// recurrent GEMM and one element-wise kernel per step, two of each for BlockGRU) is captured
// into a CUDA Graph on its first call and replayed by later calls of the same op with the same
// sizes, pointers (inputs, outputs and workspace), stream and math mode, which removes the
// per-step launch overhead. Calling thread's cache of 16 graphs, oldest dropped first. Calls on
// the legacy default stream (nullptr) always launch directly (it cannot capture). Process-wide.
BLOCKRNN_API void set_step_graphs(bool on);
BLOCKRNN_API bool get_step_graphs();

// Number of CUDA devices this process sees; 0 when there is none or no driver (never throws).
BLOCKRNN_API int device_count() noexcept;

// ---- cells (gru.h, lstm.h) ----
BLOCKRNN_API void gru_block_cell(const GRUBlockCellInputs& in, const GRUBlockCellOutputs& out,
                                 cudaStream_t stream = nullptr);
BLOCKRNN_API void gru_block_cell_grad(const GRUBlockCellGradInputs& in,
                                      const GRUBlockCellGradOutputs& out,
                                      cudaStream_t stream = nullptr);
BLOCKRNN_API void gru_block_cell_backward(const GRUBlockCellBackwardInputs& in,
                                          const GRUBlockCellBackwardOutputs& out,
                                          cudaStream_t stream = nullptr);
BLOCKRNN_API void lstm_block_cell(const LSTMBlockCellInputs& in, const LSTMBlockCellOutputs& out,
                                  const LSTMBlockCellAttrs& attrs = {},
                                  cudaStream_t stream = nullptr);
BLOCKRNN_API void lstm_block_cell_grad(const LSTMBlockCellGradInputs& in,
                                       const LSTMBlockCellGradOutputs& out, bool use_peephole,
                                       cudaStream_t stream = nullptr);
BLOCKRNN_API void lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                                           const LSTMBlockCellBackwardOutputs& out,
                                           const LSTMBlockCellAttrs& attrs = {},
                                           cudaStream_t stream = nullptr);

// ---- sequences (sequence.h) ----
BLOCKRNN_API void block_lstm(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                             const BlockLSTMAttrs& attrs = {}, cudaStream_t stream = nullptr);
BLOCKRNN_API void block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                                const BlockLSTMV2Attrs& attrs = {}, cudaStream_t stream = nullptr);
BLOCKRNN_API void block_lstm_grad(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                                  bool use_peephole, cudaStream_t stream = nullptr);
BLOCKRNN_API void block_lstm_grad_v2(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                                     bool use_peephole, cudaStream_t stream = nullptr);
BLOCKRNN_API void block_gru(const BlockGRUInputs& in, const BlockGRUOutputs& out,
                            cudaStream_t stream = nullptr);
BLOCKRNN_API void block_gru_grad(const BlockGRUGradInputs& in, const BlockGRUGradOutputs& out,
                                 cudaStream_t stream = nullptr);
BLOCKRNN_API void block_gru_reset_after(const BlockGRUResetAfterInputs& in,
                                        const BlockGRUResetAfterOutputs& out,
                                        cudaStream_t stream = nullptr);
BLOCKRNN_API void block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in,
                                             const BlockGRUResetAfterGradOutputs& out,
                                             cudaStream_t stream = nullptr);

// ---- by name (ops.h) ----
// The name-based interface on device memory, for bindings (blockrnn's Python package): `op` is
// one of list_ops(), `inputs` its inputs in TensorFlow's order (device memory; seq_len_max a HOST
// int64 scalar, as TensorFlow's GPU kernels take it in host memory; an omitted or absent
// seq_lengths), `attrs` as ops.h's run_op, `outputs` caller-owned device memory of the shapes and
// dtype infer_outputs(op, inputs, attrs) gives. Validates as infer_outputs does, then calls the
// op's typed entry point above on `stream`, which validates again and checks the device memory.
BLOCKRNN_API void run_op(const OpDef& op, std::span<const TensorView> inputs, const AttrMap& attrs,
                         std::span<const MutableTensorView> outputs, cudaStream_t stream = nullptr);

}  // namespace blockrnn::cuda
