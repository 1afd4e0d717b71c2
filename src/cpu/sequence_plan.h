// Weights of the fast sequence kernels packed once for many calls ("plan once, run many",
// src/layer): the GEMM engine's panels of every weight matrix the kernels multiply by, in the
// layout the kernels of src/cpu/block_*.cc would otherwise pack at the start of every call.
// A kernel given a plan (the `plan` field of its argument struct) reads these instead of the
// weight pointers' rows for its products; the results are bit for bit those of the call without
// a plan (a GEMM's bits do not depend on when or how often B was packed, gemm/gemm.h).
//
// pack() allocates (PackedB); it runs when the weights are set, never inside forward/backward
// (pack_transposed, below, runs at a backward).
// The panels belong to the ISA path active at pack time: `isa` says which (a caller that sees
// get_isa() change repacks).
//
// The transposed packs (the members named *_t: the backward's d_x and carry products) are not made
// by pack() / pack_bf16(): pack_transposed() makes them, of the kind the plan holds, at the first
// backward that multiplies by them (the carry's at every backward, the input rows' only when d_x is
// wanted), and has_x_t / has_h_t say which the plan holds. A layer that only runs forward (a model
// loaded for inference) never holds them, which halves its packed panels; a stack's first layer,
// whose input needs no gradient, never packs its input rows transposed. A kernel reads a
// transposed pack only when its flag is set, and otherwise packs that operand per call (the same
// bits).
//
// A bfloat16 call (bf16_products) multiplies bfloat16 operands (cpu/bf16_products.h): its plan
// is packed by pack_bf16 instead (float only), the same matrices as PackedBBf16 in the `bf16`
// member, plus the input rows transposed for d_x (which the kernel without a plan multiplies by
// on the one-shot gemm_bf16: the same pack, so the same bits). `has_bf16` says which pack the
// plan holds; a kernel reads the member of its kind only.
#pragma once

#include <array>
#include <cstdint>

#include "blockrnn/context.h"
#include "gemm/gemm.h"
#include "gemm/gemm_bf16.h"

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
  gemm::PackedB<T> w_x_t;               // w[0:I]ᵀ        [4H, I]  (d_x = d_gates·w_xᵀ)
  struct Bf16 {
    gemm::PackedBBf16 w_x, w_h_t;          // as above
    std::array<gemm::PackedBBf16, 4> w_h;  // as above
    gemm::PackedBBf16 w_x_t;               // w[0:I]ᵀ [4H, I]  (d_x = d_gates·w_xᵀ)
  } bf16;
  bool has_bf16 = false;
  Isa isa = Isa::kBaseline;
  bool has_x_t = false, has_h_t = false;  // w_x_t, w_h_t (or bf16's) packed
  void pack(std::int64_t I, std::int64_t H, const T* w);
  void pack_bf16(std::int64_t I, std::int64_t H, const float* w);
  void pack_transposed(std::int64_t I, std::int64_t H, const T* w, bool x_t, bool h_t);
};

// BlockGRU: w_ru [I+H, 2H], w_c [I+H, H].
template <typename T>
struct GRUPlan {
  gemm::PackedB<T> w_ru_x, w_c_x;        // w_ru[0:I] [I, 2H], w_c[0:I] [I, H]
  gemm::PackedB<T> w_r_h, w_u_h, w_c_h;  // w_ru[I:, 0:H], w_ru[I:, H:2H], w_c[I:]  [H, H]
  gemm::PackedB<T> w_ru_h_t, w_c_h_t;    // w_ru[I:]ᵀ [2H, H], w_c[I:]ᵀ [H, H]
  gemm::PackedB<T> w_ru_x_t, w_c_x_t;    // w_ru[0:I]ᵀ [2H, I], w_c[0:I]ᵀ [H, I]  (d_x)
  struct Bf16 {
    gemm::PackedBBf16 w_ru_x, w_c_x, w_r_h, w_u_h, w_c_h, w_ru_h_t, w_c_h_t;  // as above
    gemm::PackedBBf16 w_ru_x_t, w_c_x_t;  // w_ru[0:I]ᵀ [2H, I], w_c[0:I]ᵀ [H, I]  (d_x)
  } bf16;
  bool has_bf16 = false;
  Isa isa = Isa::kBaseline;
  bool has_x_t = false, has_h_t = false;  // w_ru_x_t and w_c_x_t, w_ru_h_t and w_c_h_t packed
  void pack(std::int64_t I, std::int64_t H, const T* w_ru, const T* w_c);
  void pack_bf16(std::int64_t I, std::int64_t H, const float* w_ru, const float* w_c);
  void pack_transposed(std::int64_t I, std::int64_t H, const T* w_ru, const T* w_c, bool x_t,
                       bool h_t);
};

// BlockGRUResetAfter: w_i [I, 3H], w_h [H, 3H].
template <typename T>
struct GRUResetAfterPlan {
  gemm::PackedB<T> w_i;                  // [I, 3H]
  gemm::PackedB<T> w_h_r, w_h_z, w_h_n;  // w_h[:, 0:H], w_h[:, H:2H], w_h[:, 2H:3H]  [H, H]
  gemm::PackedB<T> w_h_t;                // w_hᵀ [3H, H]
  gemm::PackedB<T> w_i_t;                // w_iᵀ [3H, I]  (d_x = d_gi·w_iᵀ)
  struct Bf16 {
    gemm::PackedBBf16 w_i, w_h_r, w_h_z, w_h_n, w_h_t;  // as above
    gemm::PackedBBf16 w_i_t;                            // w_iᵀ [3H, I]  (d_x = d_gi·w_iᵀ)
  } bf16;
  bool has_bf16 = false;
  Isa isa = Isa::kBaseline;
  bool has_x_t = false, has_h_t = false;  // w_i_t, w_h_t (or bf16's) packed
  void pack(std::int64_t I, std::int64_t H, const T* w_i, const T* w_h);
  void pack_bf16(std::int64_t I, std::int64_t H, const float* w_i, const float* w_h);
  void pack_transposed(std::int64_t I, std::int64_t H, const T* w_i, const T* w_h, bool x_t,
                       bool h_t);
};

}  // namespace blockrnn

namespace blockrnn::cpu {

// The bfloat16 packs of a call's plan (LSTMPlan, GRUPlan or GRUResetAfterPlan), or nullptr when
// the call has no plan or its plan holds the float packs: the kernel then packs each bfloat16
// weight operand itself (bf16_weight, bf16_products.h), with the same bits.
template <typename Plan>
const typename Plan::Bf16* bf16_packs(const Plan* plan) {
  return plan != nullptr && plan->has_bf16 ? &plan->bf16 : nullptr;
}

// Workspace bounds (elements of T) of one call with S steps, B examples: enough for the forward
// and the backward, with or without seq_lengths. A plan-once caller allocates this once for its
// largest (S, B) and passes it as the `workspace` field of every call.
std::int64_t block_lstm_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                        std::int64_t H);
std::int64_t block_gru_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                       std::int64_t H);
std::int64_t block_gru_reset_after_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                                   std::int64_t H);

// The floats of a bfloat16 call's product operands (block_*_bf16_{fwd,bwd}_workspace_floats)
// are declared with the kernels (kernel/block_*.h): the ops' memory check and the layers read
// them.

}  // namespace blockrnn::cpu
