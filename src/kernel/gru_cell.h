// Kernel interface of the GRU block cell, shared by the reference (namespace ref) and the fast
// path (namespace cpu): the same signature, so tests and the reference switch can swap them.
// Pointers are dense row-major; shapes in the comments. Inputs are validated by the caller.
#pragma once

#include "kernel/dims.h"

namespace blockrnn {

using GRUDims = CellDims;

// The weights packed once for many calls (kernel/dims.h): opaque here and to the reference,
// defined by the fast engine (src/cpu/cell_plan.h), the only engine that reads it.
template <typename T>
struct GRUCellPlan;

template <typename T>
struct GRUCellFwdArgs {
  const T* x;           // [B, I]
  const T* h_prev;      // [B, H]
  const T *w_ru, *w_c;  // [I+H, 2H], [I+H, H]
  const T *b_ru, *b_c;  // [2H], [H]
  T *r, *u, *c, *h;     // [B, H] each
  // Plan once, run many (kernel/dims.h): the packed w_ru, w_c (GRUCellPlan) and a workspace of
  // gru_cell_workspace_elems(B, I, H) elements (src/cpu/cell_plan.h); nullptr: the call packs
  // and allocates its own, as the one-shot op does. The fast path only.
  const GRUCellPlan<T>* plan = nullptr;
  T* workspace = nullptr;
};

template <typename T>
struct GRUCellBwdArgs {
  const T* x;             // [B, I]   (only for the parameter gradients)
  const T* h_prev;        // [B, H]
  const T *w_ru, *w_c;    // [I+H, 2H], [I+H, H]
  const T *r, *u, *c;     // [B, H] each
  const T* d_h;           // [B, H]
  T* d_x;                 // [B, I]
  T *d_h_prev, *d_c_bar;  // [B, H] each
  T* d_r_bar_u_bar;       // [B, 2H]
  // Optional parameter gradients (docs/ops.md); all null for GRUBlockCellGrad. When set they
  // are overwritten (not accumulated).
  // `full` asks for them explicitly: a null pointer is also what an empty output looks like.
  bool full = false;
  T* d_w_ru = nullptr;  // [I+H, 2H]
  T* d_w_c = nullptr;   // [I+H, H]
  T* d_b_ru = nullptr;  // [2H]
  T* d_b_c = nullptr;   // [H]
  // Plan once, run many, as in GRUCellFwdArgs.
  const GRUCellPlan<T>* plan = nullptr;
  T* workspace = nullptr;
};

// The kernels, in both engines (the same signatures, so that the two cannot drift apart):
// the reference (src/ref, written to read like the spec) and the fast path (src/cpu).
// Each is defined for float and double.
namespace ref {
template <typename T>
void gru_cell_fwd(const GRUDims& d, const GRUCellFwdArgs<T>& a);
template <typename T>
void gru_cell_bwd(const GRUDims& d, const GRUCellBwdArgs<T>& a);
}  // namespace ref
namespace cpu {
template <typename T>
void gru_cell_fwd(const GRUDims& d, const GRUCellFwdArgs<T>& a);
template <typename T>
void gru_cell_bwd(const GRUDims& d, const GRUCellBwdArgs<T>& a);
}  // namespace cpu

}  // namespace blockrnn
