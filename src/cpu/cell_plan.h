// Weights of the fast cell kernels (src/cpu/lstm_cell.cc, src/cpu/gru_cell.cc) packed once for
// many calls (the cell layer objects of blockrnn/layer.h): the GEMM engine's panels of every
// weight matrix a cell call multiplies by, which the one-shot call packs again at every call.
// A kernel given a plan (the `plan` field of its argument struct) multiplies by these instead of
// the weight pointers' rows; the bits are those of the call without a plan (gemm/gemm.h: a
// product's bits do not depend on when or how B was packed, and a product over rows [k0, k1) of
// a packed B chained with beta = 1 is the product over the whole K).
//
// Shape letters: B batch, I input size, H cell size.
// pack() allocates (PackedB); it runs when the weights are set, never inside forward/backward.
// It packs what the forward multiplies by; pack_transposed() packs the transposes the backward
// multiplies by (d_x, d_h_prev), which the cell layers call at their first backward after
// set_weights, so that a layer that only runs forward never holds them. A backward given a plan
// reads its transposes only when has_transposed is set, and otherwise multiplies by the weight
// pointers' rows (the same bits), as the sequence kernels do with their plans.
// The panels belong to the ISA path active at pack time: `isa` says which (a caller that sees
// get_isa() change repacks).
#pragma once

#include <cstdint>

#include "blockrnn/context.h"
#include "gemm/gemm.h"

// The plan types are the kernel interface's (kernel/lstm_cell.h, kernel/gru_cell.h declare them
// in namespace blockrnn and the argument structs point at them); they are defined here, by the
// engine that reads them.
namespace blockrnn {

// LSTMBlockCell: w [I+H, 4H].
template <typename T>
struct LSTMCellPlan {
  gemm::PackedB<T> w;           // w [I+H, 4H]: gates = x·w[0:I] + h_prev·w[I:] (two row ranges)
  gemm::PackedB<T> w_x_t;       // w[0:I]ᵀ [4H, I]:  d_x = d_gates·w_xᵀ
  gemm::PackedB<T> w_h_t;       // w[I:]ᵀ  [4H, H]:  d_h_prev = d_gates·w_hᵀ
  bool has_transposed = false;  // w_x_t, w_h_t packed
  Isa isa = Isa::kBaseline;
  void pack(std::int64_t I, std::int64_t H, const T* w);
  void pack_transposed(std::int64_t I, std::int64_t H, const T* w);
};

// GRUBlockCell: w_ru [I+H, 2H], w_c [I+H, H].
template <typename T>
struct GRUCellPlan {
  gemm::PackedB<T> w_ru;        // [I+H, 2H]: ru_bar = x·w_ru[0:I] + h_prev·w_ru[I:]
  gemm::PackedB<T> w_c;         // [I+H, H]:  c_bar = x·w_c[0:I] + (h_prev⊙r)·w_c[I:]
  gemm::PackedB<T> w_ru_x_t;    // w_ru[0:I]ᵀ [2H, I]
  gemm::PackedB<T> w_ru_h_t;    // w_ru[I:]ᵀ  [2H, H]
  gemm::PackedB<T> w_c_x_t;     // w_c[0:I]ᵀ  [H, I]
  gemm::PackedB<T> w_c_h_t;     // w_c[I:]ᵀ   [H, H]
  bool has_transposed = false;  // the four transposes packed
  Isa isa = Isa::kBaseline;
  void pack(std::int64_t I, std::int64_t H, const T* w_ru, const T* w_c);
  void pack_transposed(std::int64_t I, std::int64_t H, const T* w_ru, const T* w_c);
};

}  // namespace blockrnn

namespace blockrnn::cpu {

// Workspace (elements of T) of one cell call of B examples given a plan: enough for the forward
// and the full backward on any ISA path. A plan-once caller allocates this once for its largest
// B and passes it as the `workspace` field of every call.
std::int64_t lstm_cell_workspace_elems(std::int64_t B, std::int64_t I, std::int64_t H);
std::int64_t gru_cell_workspace_elems(std::int64_t B, std::int64_t I, std::int64_t H);

}  // namespace blockrnn::cpu
