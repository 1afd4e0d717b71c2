// Kernel interface of BlockGRU and BlockGRUGrad (docs/ops.md), shared by the reference (namespace
// ref, src/ref/block_gru.cc) and the fast path (namespace cpu, src/cpu/block_gru.cc): the same
// signature, so tests and the reference switch can swap them.
//
// Shape letters: T time steps, B batch, I input size, H cell size, S = seq_len_max (0 ≤ S ≤ T).
// Step t < S is GRUBlockCell on x[t] with state h[t−1] (h_prev at t = 0); every output of a
// step t ≥ S is zero. The backward runs t = S−1 … 0 with d_h = carry + d_h[t] and sums the
// parameter gradients of docs/ops.md over the steps; d_x[t] = 0 for t ≥ S.
// Pointers are dense row-major; inputs are validated by the caller; outputs are overwritten.
#pragma once

#include "kernel/dims.h"
#include "kernel/seq_steps.h"

namespace blockrnn {

// The weights packed once for many calls (kernel/dims.h): opaque here and to the reference,
// defined by the fast engine (src/cpu/sequence_plan.h), the only engine that reads them.
template <typename T>
struct GRUPlan;
template <typename T>
struct GRUResetAfterPlan;

using BlockGRUDims = SequenceDims;

template <typename T>
struct BlockGRUFwdArgs {
  const T* x;           // [T, B, I]
  const T* h_prev;      // [B, H]
  const T *w_ru, *w_c;  // [I+H, 2H], [I+H, H]
  const T *b_ru, *b_c;  // [2H], [H]
  T *r, *u, *c, *h;     // [T, B, H] each
  // Plan once, run many (kernel/dims.h): GRUPlan, block_gru_workspace_elems.
  const GRUPlan<T>* plan = nullptr;
  T* workspace = nullptr;
  // The fast path of a bfloat16 call (float only; set by the op from the call's dtype): its
  // GEMMs take bfloat16 operands (src/cpu/bf16_products.h), the sums and everything else stay
  // float32; a `plan` packed by pack_bf16 (has_bf16) supplies the weights
  // packed for those products, any other plan is not read. The reference ignores it.
  bool bf16_products = false;
  // With bf16_products on the fast path: room for the products' bfloat16 operands
  // (cpu::block_gru_bf16_fwd_workspace_floats), a plan-once caller's, so that the call
  // allocates nothing; without it the call allocates them.
  float* bf16_workspace = nullptr;
};

template <typename T>
struct BlockGRUBwdArgs {
  const T* x;                          // [T, B, I]
  const T* h_prev;                     // [B, H]
  const T *w_ru, *w_c;                 // [I+H, 2H], [I+H, H]
  const T *r, *u, *c, *h;              // [T, B, H] each, forward outputs
  const T* d_h;                        // [T, B, H]  external ∂L/∂h[t]
  T* d_x;                              // [T, B, I]; null (T·B·I > 0): not computed
  T* d_h_prev;                         // [B, H]; null: not computed (fast path)
  T *d_w_ru, *d_w_c, *d_b_ru, *d_b_c;  // [I+H, 2H], [I+H, H], [2H], [H]
  // Plan once, run many (kernel/dims.h): GRUPlan, block_gru_workspace_elems.
  const GRUPlan<T>* plan = nullptr;
  T* workspace = nullptr;
  // The fast path of a bfloat16 call (float only; set by the op from the call's dtype): its
  // GEMMs take bfloat16 operands (src/cpu/bf16_products.h), the sums and everything else stay
  // float32; a `plan` packed by pack_bf16 (has_bf16) supplies the weights
  // packed for those products, any other plan is not read. The reference ignores it.
  bool bf16_products = false;
  // With bf16_products on the fast path: room for the products' bfloat16 operands
  // (cpu::block_gru_bf16_bwd_workspace_floats), a plan-once caller's, so that the call
  // allocates nothing; without it the call allocates them.
  float* bf16_workspace = nullptr;
};

// The kernels, in both engines (the same signatures, so that the two cannot drift apart):
// the reference (src/ref, written to read like the spec) and the fast path (src/cpu).
// Each is defined for float and double.
namespace ref {
template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a);
template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a);
}  // namespace ref
namespace cpu {
// The floats of a call's `bf16_workspace` (S steps, B examples, input size I, cell size H):
// the forward's (x rounded for the input projection, then the left operands of the recurrent
// products) and the backward's (the left operands of the recurrent products, the packed gate
// gradients, the bfloat16 [h_prev; h[0:S−1]] and the rounded left operands of the products
// after the loop). Without a bf16_workspace (the one-shot ops) the call allocates as much; the
// ops' memory check counts it before anything is allocated (ops/checks.h,
// with_bf16_operands).
std::int64_t block_gru_bf16_fwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                 std::int64_t H);
std::int64_t block_gru_bf16_bwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                 std::int64_t H);
template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a);
template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a);
}  // namespace cpu

}  // namespace blockrnn
