// Kernel interface of BlockGRUResetAfter and BlockGRUResetAfterGrad (docs/ops.md, blockrnn's
// extension: the reset-after GRU of PyTorch nn.GRU, cuDNN and Keras reset_after=True), shared
// by the reference (namespace ref, src/ref/block_gru_reset_after.cc) and the fast path (namespace
// cpu, src/cpu/block_gru_reset_after.cc): the same signature, so tests and the reference switch
// can swap them.
//
// Shape letters: T time steps, B batch, I input size, H cell size, S = seq_len_max (0 ≤ S ≤ T).
// Gate column blocks of w_i, w_h, b_i, b_h are PyTorch's order [r | z | n]; u is the update gate
// (PyTorch's z). Step t < S, with hp = h[t−1] (h_prev at t = 0):
//   gi = x[t]·w_i + b_i      gh = hp·w_h + b_h                          [B, 3H] each
//   r = σ(gi_r + gh_r);  u = σ(gi_z + gh_z);  hn = gh_n;  n = tanh(gi_n + r⊙hn)
//   h = u⊙hp + (1−u)⊙n
// Every output of a step t ≥ S is zero. The backward runs t = S−1 … 0 with
// d_h = carry + d_h[t]:
//   d_n_bar = (d_h⊙(1−u))⊙(1−n⊙n)          d_u_bar = ((d_h⊙(hp−n))⊙u)⊙(1−u)
//   d_r_bar = ((d_n_bar⊙hn)⊙r)⊙(1−r)        d_hn = d_n_bar⊙r
//   d_gi = [d_r_bar, d_u_bar, d_n_bar]     d_gh = [d_r_bar, d_u_bar, d_hn]     [B, 3H]
//   d_x[t] = d_gi·w_iᵀ;  carry = d_h⊙u + d_gh·w_hᵀ
//   d_w_i += x[t]ᵀ·d_gi;  d_w_h += hpᵀ·d_gh;  d_b_i += Σ_b d_gi;  d_b_h += Σ_b d_gh
// and d_h_prev = carry, d_x[t] = 0 for t ≥ S, every gradient 0 when S = 0.
// Pointers are dense row-major; inputs are validated by the caller; outputs are overwritten.
#pragma once

#include "kernel/block_gru.h"  // BlockGRUDims, GRUResetAfterPlan
#include "kernel/dims.h"

namespace blockrnn {

template <typename T>
struct BlockGRUResetAfterFwdArgs {
  const T* x;             // [T, B, I]
  const T* h_prev;        // [B, H]
  const T *w_i, *w_h;     // [I, 3H], [H, 3H]  columns [r | z | n] each
  const T *b_i, *b_h;     // [3H] each
  T *r, *u, *n, *hn, *h;  // [T, B, H] each; hn = h[t−1]·w_h_n + b_h_n (read by the backward)
  // Plan once, run many (kernel/dims.h): GRUResetAfterPlan,
  // block_gru_reset_after_workspace_elems.
  const GRUResetAfterPlan<T>* plan = nullptr;
  T* workspace = nullptr;
  // The fast path of a bfloat16 call (float only; set by the op from the call's dtype): its
  // GEMMs take bfloat16 operands (src/cpu/bf16_products.h), the sums and everything else stay
  // float32; a `plan` packed by pack_bf16 (has_bf16) supplies the weights
  // packed for those products, any other plan is not read. The reference ignores it.
  bool bf16_products = false;
  // With bf16_products on the fast path: room for the products' bfloat16 operands
  // (cpu::block_gru_reset_after_bf16_fwd_workspace_floats), a plan-once caller's, so that the call
  // allocates nothing; without it the call allocates them.
  float* bf16_workspace = nullptr;
};

template <typename T>
struct BlockGRUResetAfterBwdArgs {
  const T* x;                        // [T, B, I]
  const T* h_prev;                   // [B, H]
  const T *w_i, *w_h;                // [I, 3H], [H, 3H]
  const T *r, *u, *n, *hn, *h;       // [T, B, H] each, forward outputs
  const T* d_h;                      // [T, B, H]  external ∂L/∂h[t]
  T* d_x;                            // [T, B, I]; null (T·B·I > 0): not computed
  T* d_h_prev;                       // [B, H]; null: not computed (fast path)
  T *d_w_i, *d_w_h, *d_b_i, *d_b_h;  // [I, 3H], [H, 3H], [3H], [3H]
  // Plan once, run many (kernel/dims.h): GRUResetAfterPlan,
  // block_gru_reset_after_workspace_elems.
  const GRUResetAfterPlan<T>* plan = nullptr;
  T* workspace = nullptr;
  // The fast path of a bfloat16 call (float only; set by the op from the call's dtype): its
  // GEMMs take bfloat16 operands (src/cpu/bf16_products.h), the sums and everything else stay
  // float32; a `plan` packed by pack_bf16 (has_bf16) supplies the weights
  // packed for those products, any other plan is not read. The reference ignores it.
  bool bf16_products = false;
  // With bf16_products on the fast path: room for the products' bfloat16 operands
  // (cpu::block_gru_reset_after_bf16_bwd_workspace_floats), a plan-once caller's, so that the call
  // allocates nothing; without it the call allocates them.
  float* bf16_workspace = nullptr;
};

// The kernels, in both engines (the same signatures, so that the two cannot drift apart):
// the reference (src/ref, written to read like the spec) and the fast path (src/cpu).
// Each is defined for float and double.
namespace ref {
template <typename T>
void block_gru_reset_after_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a);
template <typename T>
void block_gru_reset_after_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a);
}  // namespace ref
namespace cpu {
// The floats of a call's `bf16_workspace` (S steps, B examples, input size I, cell size H):
// the forward's (x rounded for the input projection, then the left operands of the recurrent
// products) and the backward's (the left operands of the recurrent products, the packed gate
// gradients, the bfloat16 [h_prev; h[0:S−1]] and the rounded left operands of the products
// after the loop). Without a bf16_workspace (the one-shot ops) the call allocates as much; the
// ops' memory check counts it before anything is allocated (ops/checks.h,
// with_bf16_operands).
std::int64_t block_gru_reset_after_bf16_fwd_workspace_floats(std::int64_t S, std::int64_t B,
                                                             std::int64_t I, std::int64_t H);
std::int64_t block_gru_reset_after_bf16_bwd_workspace_floats(std::int64_t S, std::int64_t B,
                                                             std::int64_t I, std::int64_t H);
template <typename T>
void block_gru_reset_after_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a);
template <typename T>
void block_gru_reset_after_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a);
}  // namespace cpu

}  // namespace blockrnn
