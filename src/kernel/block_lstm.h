// Kernel interface of BlockLSTM(V2) and BlockLSTMGrad(V2) (docs/ops.md), shared by the
// reference (namespace ref, src/ref/block_lstm.cc) and the fast path (namespace cpu,
// src/cpu/block_lstm.cc): the same signature, so tests and the reference switch can swap them.
//
// Shape letters: T time steps, B batch, I input size, H cell size, S = seq_len_max (0 ≤ S ≤ T).
// Step t < S is LSTMBlockCell on x[t] with state (cs[t−1], h[t−1]) ((cs_prev, h_prev) at t = 0);
// the recurrence carries the clipped cs. Every output of a step t ≥ S is zero (docs/ops.md).
// The backward runs t = S−1 … 0 with
//   dcs_in = carry_cs + d_cs[t],  dh = carry_h + d_h[t]
//   (d_gates, carry_cs) = LSTMBlockCellGrad(…, dcs_in, dh);  carry_h = d_gates·w_hᵀ
//   d_x[t] = d_gates·w_xᵀ;  d_w += [x[t], h[t−1]]ᵀ·d_gates;  d_b += Σ_b d_gates;
//   peephole grads += Σ_b (docs/ops.md)
// and d_x[t] = 0 for t ≥ S; d_cs_prev = carry_cs, d_h_prev = carry_h.
// Pointers are dense row-major; inputs are validated by the caller; outputs are overwritten.
#pragma once

#include "kernel/dims.h"

#include "kernel/lstm_cell.h"
#include "kernel/seq_steps.h"

namespace blockrnn {

// The weights packed once for many calls (kernel/dims.h): opaque here and to the reference,
// defined by the fast engine (src/cpu/sequence_plan.h), the only engine that reads it.
template <typename T>
struct LSTMPlan;

using BlockLSTMDims = SequenceDims;

template <typename T>
struct BlockLSTMFwdArgs {
  const T* x;                       // [T, B, I]
  const T *cs_prev, *h_prev;        // [B, H] each
  const T* w;                       // [I+H, 4H]  rows: x then h; column blocks per `layout`
  const T *wci, *wcf, *wco;         // [H] each (read only when use_peephole)
  const T* b;                       // [4H]
  T *i, *cs, *f, *o, *ci, *co, *h;  // [T, B, H] each
  T forget_bias = T(0);             // BlockLSTM: the attr; BlockLSTMV2: 0
  T cell_clip = T(0);               // clip only when > 0
  bool use_peephole = false;
  LSTMLayout layout = LSTMLayout::kICFO;
  // Plan once, run many (kernel/dims.h): LSTMPlan, block_lstm_workspace_elems.
  const LSTMPlan<T>* plan = nullptr;
  T* workspace = nullptr;
  // The fast path of a bfloat16 call (float only; set by the op from the call's dtype): its
  // GEMMs take bfloat16 operands (src/cpu/bf16_products.h), the sums and everything else stay
  // float32; a `plan` packed by pack_bf16 (has_bf16) supplies the weights
  // packed for those products, any other plan is not read. The reference ignores it.
  bool bf16_products = false;
  // With bf16_products on the fast path: room for the products' bfloat16 operands
  // (cpu::block_lstm_bf16_fwd_workspace_floats), a plan-once caller's, so that the call
  // allocates nothing; without it the call allocates them.
  float* bf16_workspace = nullptr;
};

template <typename T>
struct BlockLSTMBwdArgs {
  const T* x;                             // [T, B, I]
  const T *cs_prev, *h_prev;              // [B, H] each
  const T* w;                             // [I+H, 4H]
  const T *wci, *wcf, *wco;               // [H] each (read only when use_peephole)
  const T *i, *cs, *f, *o, *ci, *co, *h;  // [T, B, H] each, forward outputs
  const T *d_cs, *d_h;                    // [T, B, H] each, external ∂L/∂cs[t], ∂L/∂h[t]
  T* d_x;                                 // [T, B, I]; null (T·B·I > 0): not computed
  T *d_cs_prev, *d_h_prev;                // [B, H] each; null: not computed (fast path)
  T* d_w;                                 // [I+H, 4H]  in `layout`
  T *d_wci, *d_wcf, *d_wco;               // [H] each (zeros without peepholes)
  T* d_b;                                 // [4H]  in `layout`
  bool use_peephole = false;
  LSTMLayout layout = LSTMLayout::kICFO;
  // Plan once, run many (kernel/dims.h): LSTMPlan, block_lstm_workspace_elems.
  const LSTMPlan<T>* plan = nullptr;
  T* workspace = nullptr;
  // The fast path of a bfloat16 call (float only; set by the op from the call's dtype): its
  // GEMMs take bfloat16 operands (src/cpu/bf16_products.h), the sums and everything else stay
  // float32; a `plan` packed by pack_bf16 (has_bf16) supplies the weights
  // packed for those products, any other plan is not read. The reference ignores it.
  bool bf16_products = false;
  // With bf16_products on the fast path: room for the products' bfloat16 operands
  // (cpu::block_lstm_bf16_bwd_workspace_floats), a plan-once caller's, so that the call
  // allocates nothing; without it the call allocates them.
  float* bf16_workspace = nullptr;
};

// Step t's slices of the sequence's forward tensors (`a`: BlockLSTMFwdArgs or BlockLSTMBwdArgs)
// in `s`, any struct that names them alike (the cell kernel's arguments, an engine's step
// struct): the cell state entering the step (cs[t−1], cs_prev at t = 0) and the step's gates,
// cs and co. BH = B·H, the size of one step of a [T, B, H] tensor.
template <typename Step, typename Args>
void lstm_step_state(Step& s, const Args& a, std::int64_t t, std::int64_t BH) {
  const std::int64_t o = t * BH;
  s.cs_prev = t == 0 ? a.cs_prev : a.cs + o - BH;
  s.i = a.i + o;
  s.cs = a.cs + o;
  s.f = a.f + o;
  s.o = a.o + o;
  s.ci = a.ci + o;
  s.co = a.co + o;
}

// The kernels, in both engines (the same signatures, so that the two cannot drift apart):
// the reference (src/ref, written to read like the spec) and the fast path (src/cpu).
// Each is defined for float and double.
namespace ref {
template <typename T>
void block_lstm_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a);
template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a);
}  // namespace ref
namespace cpu {
// The floats of a call's `bf16_workspace` (S steps, B examples, input size I, cell size H):
// the forward's (x rounded for the input projection, then the left operands of the recurrent
// products) and the backward's (the left operands of the recurrent products, the packed gate
// gradients, the bfloat16 [h_prev; h[0:S−1]] and the rounded left operands of the products
// after the loop). Without a bf16_workspace (the one-shot ops) the call allocates as much; the
// ops' memory check counts it before anything is allocated (ops/checks.h,
// with_bf16_operands).
std::int64_t block_lstm_bf16_fwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                  std::int64_t H);
std::int64_t block_lstm_bf16_bwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                  std::int64_t H);
template <typename T>
void block_lstm_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a);
template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a);
}  // namespace cpu

}  // namespace blockrnn
