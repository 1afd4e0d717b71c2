// The host driver of the persistent BlockLSTM bodies (src/cuda/persistent_lstm.h): runs every
// thread of every CTA as a std::thread, with a std::barrier per CTA (sync.cta) and one for the
// grid (sync.grid), and random yields and short sleeps at the bodies' jitter points so that a
// missing synchronisation shows up as a wrong result. The products over all steps that the GPU
// version does with cuBLAS (x·w_x before the forward's loop; d_x and d_w after the backward's)
// are plain loops here. CPU only, for the tests (docs/cuda.md, "Persistent BlockLSTM kernels"):
// it shows that the bodies and their synchronisation compute BlockLSTM, not how fast.
#pragma once

#include <cstdint>

#include "cuda/persistent_gru.h"
#include "cuda/persistent_lstm.h"
#include "kernel/block_gru.h"
#include "kernel/block_lstm.h"

namespace blockrnn::cuda::persistent {

struct HostGrid {
  std::int64_t ctas = 4;             // CTAs (≥ 1); the hidden units are split over them
  std::int64_t threads_per_cta = 3;  // threads of each CTA (≥ 1)
  std::int64_t k_chunk = 64;         // the backward's split-K chunk (≥ 1)
  std::uint64_t jitter_seed = 0;     // seed of the random yields; 0: no yields
};

// BlockLSTM(V2)'s forward and backward (kernel/block_lstm.h) through the persistent bodies.
// Throws blockrnn::Error for a grid it cannot run (ctas, threads_per_cta or k_chunk < 1) and
// for seq_lengths (kUnimplemented); shapes and pointers are the caller's to validate, as for
// every kernel.
template <typename T>
void lstm_fwd_host(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a, const HostGrid& grid);
template <typename T>
void lstm_bwd_host(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a, const HostGrid& grid);

// The bodies alone on the host grid (grid.k_chunk unused: the parameters carry theirs; `op`
// names the op in errors); the host emulation of the CUDA backend runs the device entries'
// kernels through these.
template <typename T>
void run_lstm_fwd_grid(const char* op, const FwdParams<T>& p, const HostGrid& grid);
template <typename T>
void run_lstm_bwd_grid(const char* op, const BwdParams<T>& p, const HostGrid& grid);

// BlockGRU's forward (kernel/block_gru.h) through the persistent body (src/cuda/persistent_gru.h),
// with the same errors as lstm_fwd_host (grid.k_chunk unused).
template <typename T>
void gru_fwd_host(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a, const HostGrid& grid);
// BlockGRUGrad (kernel/block_gru.h) likewise.
template <typename T>
void gru_bwd_host(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a, const HostGrid& grid);
// The bodies alone on the host grid, as run_lstm_fwd_grid.
template <typename T>
void run_gru_fwd_grid(const char* op, const GRUFwdParams<T>& p, const HostGrid& grid);
template <typename T>
void run_gru_bwd_grid(const char* op, const GRUBwdParams<T>& p, const HostGrid& grid);

}  // namespace blockrnn::cuda::persistent
