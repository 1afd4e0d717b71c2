// Kernel interface of BlockGRU and BlockGRUGrad (SPEC A6), shared by the reference (namespace
// ref, src/ref/block_gru.cc) and the fast path (namespace cpu, src/cpu/block_gru.cc): the same
// signature, so tests and the reference switch can swap them.
//
// Shape letters: T time steps, B batch, I input size, H cell size, S = seq_len_max (0 ≤ S ≤ T).
// Step t < S is GRUBlockCell on x[t] with state h[t−1] (h_prev at t = 0); every output of a
// step t ≥ S is zero. The backward runs t = S−1 … 0 with d_h = carry + d_h[t] and sums the
// parameter gradients of SPEC §3.4 over the steps; d_x[t] = 0 for t ≥ S.
// Pointers are dense row-major; inputs are validated by the caller; outputs are overwritten.
#pragma once

#include <cstdint>

#include "kernel/declare.h"
#include "kernel/seq_steps.h"

namespace blockrnn {

namespace cpu {
template <typename T>
struct GRUPlan;  // src/cpu/sequence_plan.h
template <typename T>
struct GRUResetAfterPlan;
}  // namespace cpu

struct BlockGRUDims {
  std::int64_t T, B, I, H;
  std::int64_t seq_len_max;  // S, in [0, T]
  // seq_lengths [B] (blockrnn's extension): example b runs steps t < min(L_b, S) only; its
  // outputs past that are zero and its gradients there are ignored. nullptr: every example
  // runs S steps (the ops pass nullptr whenever no L_b < S).
  const std::int64_t* lengths = nullptr;
};

template <typename T>
struct BlockGRUFwdArgs {
  const T* x;       // [T, B, I]
  const T* h_prev;  // [B, H]
  const T* w_ru;    // [I+H, 2H]
  const T* w_c;     // [I+H, H]
  const T* b_ru;    // [2H]
  const T* b_c;     // [H]
  T* r;             // [T, B, H]
  T* u;             // [T, B, H]
  T* c;             // [T, B, H]
  T* h;             // [T, B, H]
  // Plan once, run many (src/layer, blockrnn/layer.h; the fast path only, the reference ignores
  // both): the weights packed beforehand (GRUPlan, whose matrices are used instead of packing
  // the weight pointers' rows here) and a caller's workspace of block_gru_workspace_elems(S, B, I,
  // H) elements (src/cpu/sequence_plan.h). nullptr: this call packs and allocates its own.
  const cpu::GRUPlan<T>* plan = nullptr;
  T* workspace = nullptr;
};

template <typename T>
struct BlockGRUBwdArgs {
  const T* x;       // [T, B, I]
  const T* h_prev;  // [B, H]
  const T* w_ru;    // [I+H, 2H]
  const T* w_c;     // [I+H, H]
  const T* r;       // [T, B, H]  forward outputs
  const T* u;       // [T, B, H]
  const T* c;       // [T, B, H]
  const T* h;       // [T, B, H]
  const T* d_h;  // [T, B, H]  external ∂L/∂h[t]
  T* d_x;        // [T, B, I]
  T* d_h_prev;   // [B, H]
  T* d_w_ru;     // [I+H, 2H]
  T* d_w_c;      // [I+H, H]
  T* d_b_ru;     // [2H]
  T* d_b_c;      // [H]
  // Plan once, run many (src/layer, blockrnn/layer.h; the fast path only, the reference ignores
  // both): the weights packed beforehand (GRUPlan, whose matrices are used instead of packing
  // the weight pointers' rows here) and a caller's workspace of block_gru_workspace_elems(S, B, I,
  // H) elements (src/cpu/sequence_plan.h). nullptr: this call packs and allocates its own.
  const cpu::GRUPlan<T>* plan = nullptr;
  T* workspace = nullptr;
};

BLOCKRNN_KERNEL(block_gru_fwd, BlockGRUDims, BlockGRUFwdArgs)
BLOCKRNN_KERNEL(block_gru_bwd, BlockGRUDims, BlockGRUBwdArgs)

}  // namespace blockrnn
