// Weights of the fast sequence kernels packed once for many calls ("plan once, run many",
// src/layer): the GEMM engine's panels of every weight matrix the kernels multiply by, in the
// layout the kernels of src/cpu/block_*.cc would otherwise pack at the start of every call.
// A kernel given a plan (the `plan` field of its argument struct) reads these instead of the
// weight pointers' rows for its products; the results are bit for bit those of the call without
// a plan (a GEMM's bits do not depend on when or how often B was packed, gemm/gemm.h).
//
// pack() allocates (PackedB); it runs when the weights are set, never inside forward/backward.
// The panels belong to the ISA path active at pack time: `isa` says which (a caller that sees
// get_isa() change repacks).
#pragma once

#include <array>
#include <cstdint>

#include "blockrnn/context.h"
#include "gemm/gemm.h"

// The plan types are the kernel interface's (kernel/block_lstm.h, kernel/block_gru.h declare them
// in namespace blockrnn and the argument structs point at them); they are defined here, by the
// engine that reads them.
namespace blockrnn {

// BlockLSTM(V2): w [I+H, 4H].
template <typename T>
struct LSTMPlan {
  gemm::PackedB<T> w_x;                 // w[0:I]          [I, 4H]  (gates = x·w_x)
  std::array<gemm::PackedB<T>, 4> w_h;  // w[I:, qH:(q+1)H] [H, H] per gate column block q
  gemm::PackedB<T> w_h_t;               // w[I:]ᵀ         [4H, H]  (carry_h = d_gates·w_hᵀ)
  Isa isa = Isa::kBaseline;
  void pack(std::int64_t I, std::int64_t H, const T* w);
};

// BlockGRU: w_ru [I+H, 2H], w_c [I+H, H].
template <typename T>
struct GRUPlan {
  gemm::PackedB<T> w_ru_x, w_c_x;        // w_ru[0:I] [I, 2H], w_c[0:I] [I, H]
  gemm::PackedB<T> w_r_h, w_u_h, w_c_h;  // w_ru[I:, 0:H], w_ru[I:, H:2H], w_c[I:]  [H, H]
  gemm::PackedB<T> w_ru_h_t, w_c_h_t;    // w_ru[I:]ᵀ [2H, H], w_c[I:]ᵀ [H, H]
  Isa isa = Isa::kBaseline;
  void pack(std::int64_t I, std::int64_t H, const T* w_ru, const T* w_c);
};

// BlockGRUResetAfter: w_i [I, 3H], w_h [H, 3H].
template <typename T>
struct GRUResetAfterPlan {
  gemm::PackedB<T> w_i;                  // [I, 3H]
  gemm::PackedB<T> w_h_r, w_h_z, w_h_n;  // w_h[:, 0:H], w_h[:, H:2H], w_h[:, 2H:3H]  [H, H]
  gemm::PackedB<T> w_h_t;                // w_hᵀ [3H, H]
  Isa isa = Isa::kBaseline;
  void pack(std::int64_t I, std::int64_t H, const T* w_i, const T* w_h);
};

}  // namespace blockrnn

namespace blockrnn::cpu {

// Workspace bounds (elements of T) of one call with S steps, B examples: enough for the forward
// and the backward, with or without seq_lengths. A plan-once caller allocates this once for its
// largest (S, B) and passes it as the `workspace` field of every call.
std::int64_t block_lstm_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                        std::int64_t H);
std::int64_t block_gru_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                       std::int64_t H);
std::int64_t block_gru_reset_after_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                                   std::int64_t H);

// The per-call bytes of a bfloat16 call's product operands (block_*_bf16_operand_bytes) are
// declared with the kernels (kernel/block_*.h): the ops' memory check reads them.

}  // namespace blockrnn::cpu
