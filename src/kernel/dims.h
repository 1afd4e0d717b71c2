// The sizes a kernel takes. Shape letters: T time steps, B batch, I input size, H cell size.
#pragma once

#include <cstdint>

namespace blockrnn {

// A cell kernel's sizes (GRUDims, LSTMDims).
struct CellDims {
  std::int64_t B, I, H;
};

// A sequence kernel's sizes (BlockLSTMDims, BlockGRUDims; BlockGRUResetAfter takes BlockGRUDims).
struct SequenceDims {
  std::int64_t T, B, I, H;
  std::int64_t seq_len_max;  // S, in [0, T]
  // seq_lengths [B] (blockrnn's extension): example b runs steps t < min(L_b, S) only; its
  // outputs past that are zero and its gradients there are ignored. nullptr: every example
  // runs S steps (the ops pass nullptr whenever no L_b < S).
  const std::int64_t* lengths = nullptr;
};

}  // namespace blockrnn
