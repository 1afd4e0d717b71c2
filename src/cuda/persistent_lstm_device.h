// The persistent BlockLSTM kernels on a GPU (src/cuda/persistent_lstm.cu; docs/cuda.md,
// "Persistent BlockLSTM kernels"): BlockLSTM(V2)'s forward and backward with the time loop as one
// cooperative kernel whose CTAs keep their slice of the recurrent weights in shared memory. Host
// code, like kernels.h: internal entry points taking the kernels' argument structs with device
// pointers, for a caller that has validated them (as src/cuda/api.cpp does for the other
// drivers); not yet behind the public API. All work is enqueued on ctx.stream.
#pragma once

#include <cstdint>

#include "cuda/kernels.h"

namespace blockrnn::cuda::detail {

// The split-K chunk of the backward's d_h chain over the 4H gate columns (persistent_lstm.h):
// fixed, so that results do not depend on the GPU's CTA count.
constexpr std::int64_t kPersistentKChunk = 64;

// Kernel semantics (kernel/block_lstm.h). Before anything is allocated or launched: seq_lengths
// (d.lengths) is refused with kUnimplemented, and so is a device without cooperative launch or
// whose shared memory cannot hold a CTA's slice of the recurrent weights (the message gives the
// bytes needed and available). The grid: one CTA per SM, at most one per hidden unit.
template <typename T>
void persistent_lstm_fwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a);
template <typename T>
void persistent_lstm_bwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a);

// BlockGRU's forward (kernel/block_gru.h; src/cuda/persistent_gru.h), with the same refusals and
// grid as persistent_lstm_fwd; a CTA's slice holds 3 gate columns per unit instead of 4.
template <typename T>
void persistent_gru_fwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a);
// BlockGRUGrad likewise: the time loop in the kernel, d_x, d_w_ru and d_w_c as cuBLAS products
// over all steps after it.
template <typename T>
void persistent_gru_bwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a);

}  // namespace blockrnn::cuda::detail
