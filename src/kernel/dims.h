// The sizes a kernel takes. Shape letters: T time steps, B batch, I input size, H cell size.
//
// Every kernel has one signature in both engines, `void fn(const Dims& d, const Args<T>& a)`:
// the reference (namespace ref, src/ref) and the fast path (namespace cpu, src/cpu); each kernel
// header declares both, so that tests and the reference switch can swap them.
//
// Plan once, run many (src/layer, blockrnn/layer.h): the argument structs of the sequence and
// cell kernels end with
//   const XPlan<T>* plan = nullptr;  // the weights packed beforehand, whose matrices are
//                                    // used instead of packing the weight pointers' rows
//   T* workspace = nullptr;  // a caller's workspace of x_workspace_elems(S, B, I, H) elements
//                            // (cells: x_workspace_elems(B, I, H))
// The kernel header declares the plan type and leaves it opaque: the fast engine defines it, with
// the workspace size function, in src/cpu/sequence_plan.h (cells: src/cpu/cell_plan.h), so the
// interface depends on no engine.
// nullptr: the call packs and allocates its own. The fast path only: the reference ignores both.
#pragma once

#include <cstdint>

namespace blockrnn {

// A cell kernel's sizes (GRUDims, LSTMDims).
struct CellDims {
  std::int64_t B, I, H;
};

// The index of the active rows a fast sequence kernel builds from `lengths` (opaque here, like
// the plans: defined by the fast engine, src/cpu/sequence_common.h).
struct ActiveRowsIndex;

// A sequence kernel's sizes (BlockLSTMDims, BlockGRUDims; BlockGRUResetAfter takes BlockGRUDims).
struct SequenceDims {
  std::int64_t T, B, I, H;
  std::int64_t seq_len_max;  // S, in [0, T]
  // seq_lengths [B] (blockrnn's extension): example b runs steps t < min(L_b, S) only; its
  // outputs past that are zero and its gradients there are ignored. nullptr: every example
  // runs S steps (the ops pass nullptr whenever no L_b < S).
  const std::int64_t* lengths = nullptr;
  // Plan once, run many: a caller's storage for the index the fast path builds from `lengths`,
  // reused call after call (its buffers keep their capacity, so a call no larger than an earlier
  // one allocates nothing). nullptr: the call builds its own. The reference ignores it.
  ActiveRowsIndex* index = nullptr;
};

}  // namespace blockrnn
