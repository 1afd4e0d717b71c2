// Kernel interface of the LSTM block cell (LSTMBlockCell, LSTMBlockCellGrad and the full cell
// backward), shared by the reference (namespace ref) and the fast path (namespace cpu): the same
// signature, so tests and the reference switch can swap them. Also the gate layouts (docs/ops.md)
// that every LSTM kernel uses, the sequence ops included.
//
// Shape letters: B batch, I input size, H cell size. Pointers are dense row-major; shapes in the
// comments. Inputs are validated by the caller (src/ops/lstm_ops.cc).
//
//   gates = [x, h_prev]·w + b                                  [B, 4H], column blocks per layout
//   i  = σ(g_i [+ cs_prev⊙wci]);  ci = tanh(g_c);  f = σ((g_f + forget_bias) [+ cs_prev⊙wcf])
//   cs = clip(i⊙ci + f⊙cs_prev, cell_clip);  co = tanh(cs);  o = σ(g_o [+ cs⊙wco]);  h = o⊙co
// The equations of the backward are in src/ref/lstm_cell.cc and docs/ops.md.
#pragma once

#include <cstdint>

#include "kernel/dims.h"

namespace blockrnn {

// Column order of the four H-wide gate blocks of w, b and the gate gradient (docs/ops.md).
// ICFO: LSTMBlockCell(Grad), BlockLSTM(Grad). IFCO: BlockLSTMV2, BlockLSTMGradV2.
enum class LSTMLayout : std::uint8_t { kICFO, kIFCO };

// The sequence op a layout belongs to, for messages: ICFO is BlockLSTM(Grad), IFCO the V2 ops.
inline const char* block_lstm_op_name(LSTMLayout layout, bool grad) {
  if (layout == LSTMLayout::kIFCO) return grad ? "BlockLSTMGradV2" : "BlockLSTMV2";
  return grad ? "BlockLSTMGrad" : "BlockLSTM";
}

// Column block index (multiply by H for the column offset) of each gate in a layout.
struct LSTMGateBlocks {
  std::int64_t i, c, f, o;
};
constexpr LSTMGateBlocks lstm_gate_blocks(LSTMLayout layout) {
  return layout == LSTMLayout::kICFO ? LSTMGateBlocks{0, 1, 2, 3} : LSTMGateBlocks{0, 2, 1, 3};
}

using LSTMDims = CellDims;

// The weights packed once for many calls (kernel/dims.h): opaque here and to the reference,
// defined by the fast engine (src/cpu/cell_plan.h), the only engine that reads it.
template <typename T>
struct LSTMCellPlan;

template <typename T>
struct LSTMCellFwdArgs {
  const T* x;                       // [B, I]
  const T *cs_prev, *h_prev;        // [B, H] each
  const T* w;                       // [I+H, 4H]  rows: x then h_prev; column blocks per `layout`
  const T *wci, *wcf, *wco;         // [H] each (read only when use_peephole)
  const T* b;                       // [4H]  column blocks per `layout`
  T *i, *cs, *f, *o, *ci, *co, *h;  // [B, H] each
  T forget_bias = T(1);             // added to f's pre-activation after b
  T cell_clip = T(3);  // cs is clipped to [−cell_clip, cell_clip] only when cell_clip > 0
  bool use_peephole = false;
  LSTMLayout layout = LSTMLayout::kICFO;
  // Plan once, run many (kernel/dims.h): the packed w (LSTMCellPlan) and a workspace of
  // lstm_cell_workspace_elems(B, I, H) elements (src/cpu/cell_plan.h); nullptr: the call packs
  // and allocates its own, as the one-shot op does. The fast path only.
  const LSTMCellPlan<T>* plan = nullptr;
  T* workspace = nullptr;
};

template <typename T>
struct LSTMCellBwdArgs {
  const T* x;                         // [B, I]     (only for the parameter gradients)
  const T* cs_prev;                   // [B, H]
  const T* h_prev;                    // [B, H]     (only for the parameter gradients)
  const T* w;                         // [I+H, 4H]  (only for d_x / d_h_prev)
  const T *wci, *wcf, *wco;           // [H] each (read only when use_peephole)
  const T *i, *cs, *f, *o, *ci, *co;  // [B, H] each, forward outputs
  const T* d_cs;                      // [B, H], total ∂L/∂cs of this step
  const T* d_h;                       // [B, H], ∂L/∂h
  T* d_cs_prev;                       // [B, H]
  T* d_gates;                // [B, 4H], ∂L/∂gates in `layout` (TensorFlow's `dicfo` for ICFO)
  T *d_wci, *d_wcf, *d_wco;  // [H] each (zeros without peepholes)
  bool use_peephole = false;
  LSTMLayout layout = LSTMLayout::kICFO;
  // The full backward (docs/ops.md, gradients.LSTMBlockCell): when `full` is set, also the input
  // and parameter gradients below, overwritten (not accumulated); LSTMBlockCellGrad leaves it
  // unset. (A flag, not null pointers: an empty d_x, I = 0, may legitimately be null.)
  bool full = false;
  T* d_x = nullptr;       // [B, I]
  T* d_h_prev = nullptr;  // [B, H]
  T* d_w = nullptr;       // [I+H, 4H]
  T* d_b = nullptr;       // [4H]
  // Plan once, run many, as in LSTMCellFwdArgs (the workspace holds the packed d_gates of the
  // weight gradients' products).
  const LSTMCellPlan<T>* plan = nullptr;
  T* workspace = nullptr;
};

// The kernels, in both engines (the same signatures, so that the two cannot drift apart):
// the reference (src/ref, written to read like the spec) and the fast path (src/cpu).
// Each is defined for float and double.
namespace ref {
template <typename T>
void lstm_cell_fwd(const LSTMDims& d, const LSTMCellFwdArgs<T>& a);
template <typename T>
void lstm_cell_bwd(const LSTMDims& d, const LSTMCellBwdArgs<T>& a);
}  // namespace ref
namespace cpu {
template <typename T>
void lstm_cell_fwd(const LSTMDims& d, const LSTMCellFwdArgs<T>& a);
template <typename T>
void lstm_cell_bwd(const LSTMDims& d, const LSTMCellBwdArgs<T>& a);
}  // namespace cpu

}  // namespace blockrnn
