// Fast BlockGRU and BlockGRUGrad (docs/ops.md). Same math and signature as
// src/ref/block_gru.cc; the element-wise stages are the row kernels of src/cpu/gru_pointwise.h.
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max; the weights are split by
// rows into the x part and the h part (views, no copies):
//   w_ru_x = w_ru[0:I]  [I, 2H]    w_ru_h = w_ru[I:]  [H, 2H]
//   w_c_x  = w_c[0:I]   [I, H]     w_c_h  = w_c[I:]   [H, H]
//
// Forward. Before the loop, the input projections of all S steps (x viewed as [S·B, I]):
//   ru_x = x·w_ru_x  → workspace [S·B, 2H];   c_x = x·w_c_x → straight into the output c
// Per step (the GRU has two dependent recurrent products, hence two GEMMs and two passes):
//   ru[t] += h[t−1]·w_ru_h;  pass: r, u, hr = h[t−1]⊙r;  c[t] += hr·w_c_h;  pass: c, h
// The time loops are one parallel region each (sequence_common.h, TimeLoop): a thread owns the
// same hidden-unit columns of r, u and c for the whole sequence, runs its columns of each
// product and pass, and meets the others at a barrier after each pass that the next product
// reads whole (two per step, forward and backward).
//
// Backward. The carry d_h_prev lives in the output d_h_prev. Per step t = S−1 … 0:
//   pass: d_h = carry + d_h[t] (in place);  d_c_bar[t], d_u_bar[t]
//   d_hr = d_c_bar[t]·w_c_hᵀ
//   pass: d_r_bar[t];  hr[t] = h[t−1]⊙r[t] (kept for d_w_c);  carry = d_hr⊙r + d_h⊙u
//   carry += d_ru[t]·w_ru_hᵀ
// After the loop, one GEMM (or a pair over split row blocks) per gradient over all S·B rows, on
// d_ru and d_c_bar packed once each:
//   d_x = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ;  d_w_ru = [x, h_{t−1}]ᵀ·d_ru;
//   d_w_c = [x, hr]ᵀ·d_c_bar;  d_b_ru, d_b_c = column sums.
// TensorFlow's cell groups d_h_prev as (g + d_hr⊙r) + d_h⊙u; here the recurrent GEMM adds g
// last (beta = 1), a rounding-level difference (docs/tolerances.md).
//
// bfloat16 calls (bf16_products in the arguments, set by the op from the call's dtype): every
// product above takes bfloat16 operands with float32 sums (src/cpu/bf16_products.h): x, the
// weights and the forward's outputs are bfloat16 values already (exact); h[t−1] and hr are
// rounded for the forward's products, d_c_bar and d_ru for the backward's (the carried state,
// the element-wise math and the bias sums stay float32). The reference path computes a bfloat16
// call in float32, so the two differ by these roundings (docs/tolerances.md).
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "cpu/bf16_products.h"
#include "cpu/gru_pointwise.h"
#include "cpu/sequence_common.h"
#include "cpu/sequence_plan.h"
#include "gemm/gemm.h"
#include "kernel/block_gru.h"

namespace blockrnn::cpu {

using gemm::gemm;
using gemm::Trans;

namespace {

// The forward's time loop on the input projections already in ru (row stride R) and c: per step
// ru_product(t, m, h[t−1], own, ru[t]) adds h[t−1]·w_ru_h to the own columns of r and u over the
// first m rows, the gates pass, rounded(t, 0, own) (the bfloat16 products round the own columns
// of hr there), the barrier, c_product(t, m, own, c[t]) adds hr·w_c_h, the candidate pass, and
// rounded(t, 1, own) (the own columns of h[t]).
template <typename T, class RuProduct, class CProduct, class Rounded>
void gru_fwd_loop(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a, const ActiveRows& act, T* ru,
                  std::int64_t R, T* hr, std::int64_t panels, std::int64_t nr,
                  RuProduct&& ru_product, CProduct&& c_product, Rounded&& rounded) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max, BH = B * H;
  const TimeLoop loop{"BlockGRU", S, panels, nr, H, 3.0 * double(B) * H * H};
  loop.run([&](const UnitSplit& own, const auto& end_step) {
    const std::int64_t j0 = own.j0, w = own.j1 - own.j0;
    for (std::int64_t t = 0; t < S; ++t) {
      const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;
      T* const ru_t = ru + t * B * R;
      T* const r_t = a.r + t * BH;
      T* const u_t = a.u + t * BH;
      T* const c_t = a.c + t * BH;
      T* const h_t = a.h + t * BH;
      const std::int64_t m = act.gemm_rows(t);
      ru_product(t, m, hp, own, ru_t);
      act.for_rows(
          t,
          [&](std::int64_t n0, std::int64_t n1) {
            for (std::int64_t n = n0; n < n1; ++n) {
              const std::int64_t o = n * H + j0;
              gru_fwd_gates_row(w, H, ru_t + n * R + j0, a.b_ru + j0, hp + o, r_t + o, u_t + o,
                                hr + o);
            }
          },
          [&](std::int64_t n) {
            for (T* p : {r_t, u_t, hr}) zero(p + n * H + j0, w);
          });
      rounded(t, 0, own);
#pragma omp barrier
      c_product(t, m, own, c_t);
      act.for_rows(
          t,
          [&](std::int64_t n0, std::int64_t n1) {
            for (std::int64_t n = n0; n < n1; ++n) {
              const std::int64_t o = n * H + j0;
              gru_fwd_candidate_row(w, a.b_c + j0, u_t + o, hp + o, c_t + o, h_t + o);
            }
          },
          [&](std::int64_t n) {
            for (T* p : {c_t, h_t}) zero(p + n * H + j0, w);
          });
      rounded(t, 1, own);
      if (end_step(t)) break;
    }
  });
}

// The forward with bfloat16 products (bf16_products.h): the input projections on w_ru[0:I] and
// w_c[0:I] packed in bfloat16, each step's h[t−1]·w_ru_h with h[t−1] rounded (h_prev before
// the loop, h[t] by the owners of its columns at the end of step t) and hr·w_c_h with hr
// rounded by the owners of its columns before the step's middle barrier. One buffer each is
// enough: every write of a buffer is separated from the last read of its previous contents by
// a barrier (hr: the step's end; h: the next step's middle barrier).
void block_gru_fwd_bf16(const BlockGRUDims& d, const BlockGRUFwdArgs<float>& a,
                        const ActiveRows& act, float* ru, std::int64_t R, float* hr) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H;
  const GRUPlan<float>::Bf16* const p = bf16_packs(a.plan);
  gemm::PackedBBf16 now[5];
  const gemm::PackedBBf16& w_ru_x =
      bf16_weight(p ? &p->w_ru_x : nullptr, now[0], Trans::kNo, I, 2 * H, a.w_ru, 2 * H);
  const gemm::PackedBBf16& w_c_x =
      bf16_weight(p ? &p->w_c_x : nullptr, now[1], Trans::kNo, I, H, a.w_c, H);
  const gemm::PackedBBf16& w_r_h =
      bf16_weight(p ? &p->w_r_h : nullptr, now[2], Trans::kNo, H, H, a.w_ru + I * 2 * H, 2 * H);
  const gemm::PackedBBf16& w_u_h =
      bf16_weight(p ? &p->w_u_h : nullptr, now[3], Trans::kNo, H, H, a.w_ru + I * 2 * H + H, 2 * H);
  const gemm::PackedBBf16& w_c_h =
      bf16_weight(p ? &p->w_c_h : nullptr, now[4], Trans::kNo, H, H, a.w_c + I * H, H);
  // The operands in the caller's bf16_workspace when given (block_gru_bf16_fwd_workspace_floats:
  // x's rounding, used by both projections in turn, then hb's and hrb's buffers), else
  // allocated here.
  float* const x_scratch = a.bf16_workspace;
  float* const hb_scratch = past_input_projection_bf16(a.bf16_workspace, d.seq_len_max, B, I);
  float* const hrb_scratch = hb_scratch ? hb_scratch + Bf16Lhs::storage_floats(B, H) : nullptr;
  input_projection_bf16(act, w_ru_x, a.x, I, ru, R, x_scratch);
  input_projection_bf16(act, w_c_x, a.x, I, a.c, H, x_scratch);
  Bf16Lhs hb("BlockGRU", B, H, w_c_h.kernel(), hb_scratch),
      hrb("BlockGRU", B, H, w_c_h.kernel(), hrb_scratch);
  hb.round(0, 0, B, 0, H, a.h_prev, H);
  gru_fwd_loop(
      d, a, act, ru, R, hr, w_c_h.panels(), w_c_h.panel_width(),
      [&](std::int64_t, std::int64_t m, const float*, const UnitSplit& own, float* ru_t) {
        hb.product(0, m, w_r_h, own.p0, own.p1, 1.0f, ru_t, R);
        hb.product(0, m, w_u_h, own.p0, own.p1, 1.0f, ru_t + H, R);
      },
      [&](std::int64_t, std::int64_t m, const UnitSplit& own, float* c_t) {
        hrb.product(0, m, w_c_h, own.p0, own.p1, 1.0f, c_t, H);
      },
      [&](std::int64_t t, int which, const UnitSplit& own) {
        if (which == 0) {
          hrb.round(0, 0, B, own.j0, own.j1, hr, H);
        } else {
          hb.round(0, 0, B, own.j0, own.j1, a.h + t * BH, H);
        }
      });
}

}  // namespace

// The forward, with or without seq_lengths (sequence_common.h, ActiveRows; without lengths every
// row is active): each step's products over its active prefix (or all rows) and its passes on
// the active rows only; the inactive rows of r, u, c, h are zero.
template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H;
  for (T* out : {a.r, a.u, a.c, a.h}) zero(out + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  const ActiveRows act(d.lengths, S, B, d.index);
  const std::int64_t R = padded_ld(2 * H);
  Workspace<T> ws("BlockGRU", {S * B * R, BH}, a.workspace);
  T* const ru = ws.slice(0);
  T* const hr = ws.slice(1);
  if constexpr (std::is_same_v<T, float>) {
    if (a.bf16_products) return block_gru_fwd_bf16(d, a, act, ru, R, hr);
  }
  // w_ru[I:] by gate column block [H, H]: r, u.
  const std::array<Packed<T>, 2> w_ru_h = {
      Packed<T>(a.plan ? &a.plan->w_r_h : nullptr, Trans::kNo, H, H, a.w_ru + I * 2 * H, 2 * H),
      Packed<T>(a.plan ? &a.plan->w_u_h : nullptr, Trans::kNo, H, H, a.w_ru + I * 2 * H + H,
                2 * H)};
  const Packed<T> w_c_h(a.plan ? &a.plan->w_c_h : nullptr, Trans::kNo, H, H, a.w_c + I * H, H);
  // The input projections x·w_ru[0:I] into ru and x·w_c[0:I] into the output c, which the steps
  // read; with prefix lengths only each step's active rows.
  input_projection(act, a.plan ? &a.plan->w_ru_x : nullptr, a.x, I, a.w_ru, 2 * H, 2 * H, ru, R);
  input_projection(act, a.plan ? &a.plan->w_c_x : nullptr, a.x, I, a.w_c, H, H, a.c, H);
  gru_fwd_loop(
      d, a, act, ru, R, hr, w_c_h->panels(), w_c_h->panel_width(),
      [&](std::int64_t, std::int64_t m, const T* hp, const UnitSplit& own, T* ru_t) {
        for (std::int64_t q = 0; q < 2; ++q) {
          gemm::gemm_panels(m, hp, H, *w_ru_h[q], own.p0, own.p1, T(1), ru_t + q * H, R);
        }
      },
      [&](std::int64_t, std::int64_t m, const UnitSplit& own, T* c_t) {
        gemm::gemm_panels(m, hr, H, *w_c_h, own.p0, own.p1, T(1), c_t, H);
      },
      [](std::int64_t, int, const UnitSplit&) {});
}

namespace {

// The backward's time loop: per step the first pass (d_c_bar[t], d_u_bar[t]), rounded(t, 0,
// own) (the bfloat16 products round the own columns of d_c_bar[t] there), the barrier,
// dhr_product(t, m, own): d_hr = d_c_bar[t]·w_c_hᵀ on the own columns, the second pass
// (d_r_bar[t], hr[t], the carry), rounded(t, 1, own) (the own columns of d_ru[t]), the step's
// barrier, carry_product(t, m, own): carry += d_ru[t]·w_ru_hᵀ on the own columns. Without a
// d_h_prev the last step's carry product, which only d_h_prev reads, is skipped.
template <typename T, class DhrProduct, class CarryProduct, class Rounded>
void gru_bwd_loop(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a, const ActiveRows& act,
                  T* d_ru, std::int64_t R, T* d_c, T* hr, T* d_hr, T* carry, std::int64_t panels,
                  std::int64_t nr, DhrProduct&& dhr_product, CarryProduct&& carry_product,
                  Rounded&& rounded) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max, BH = B * H;
  const TimeLoop loop{"BlockGRUGrad", S, panels, nr, H, 3.0 * double(B) * H * H};
  loop.run([&](const UnitSplit& own, const auto& end_step) {
    const std::int64_t j0 = own.j0, j1 = own.j1, w = j1 - j0;
    for (std::int64_t t = S - 1; t >= 0; --t) {
      const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;
      const T* r_t = a.r + t * BH;
      const T* u_t = a.u + t * BH;
      const T* c_t = a.c + t * BH;
      const T* hg_t = a.d_h + t * BH;
      T* const d_ru_t = d_ru + t * B * R;
      T* const d_c_t = d_c + t * BH;
      T* const hr_t = hr + t * BH;
      const std::int64_t m = act.gemm_rows(t);
      act.for_rows(
          t,
          [&](std::int64_t n0, std::int64_t n1) {
            for (std::int64_t n = n0; n < n1; ++n) {
              const std::int64_t o = n * H;
              T* const dh = carry + o;
              for (std::int64_t j = j0; j < j1; ++j) dh[j] += hg_t[o + j];
              gru_bwd_cu_row(w, u_t + o + j0, c_t + o + j0, hp + o + j0, dh + j0, d_c_t + o + j0,
                             d_ru_t + n * R + H + j0);
            }
          },
          [&](std::int64_t n) {
            // Not a step of example n: no gradient enters or leaves it.
            zero(d_ru_t + n * R + j0, w);
            zero(d_ru_t + n * R + H + j0, w);
            zero(d_c_t + n * H + j0, w);
            zero(hr_t + n * H + j0, w);
            zero(carry + n * H + j0, w);
          });
      rounded(t, 0, own);
#pragma omp barrier
      dhr_product(t, m, own);
      act.for_rows(
          t,
          [&](std::int64_t n0, std::int64_t n1) {
            for (std::int64_t n = n0; n < n1; ++n) {
              const std::int64_t o = n * H;
              gru_bwd_r_row(w, d_hr + o + j0, hp + o + j0, r_t + o + j0, d_ru_t + n * R + j0);
              T* const dh = carry + o;
              for (std::int64_t j = j0; j < j1; ++j) {
                hr_t[o + j] = hp[o + j] * r_t[o + j];
                dh[j] = d_hr[o + j] * r_t[o + j] + dh[j] * u_t[o + j];
              }
            }
          },
          [](std::int64_t) {});
      rounded(t, 1, own);
      if (end_step(S - 1 - t)) break;
      if (t > 0 || a.d_h_prev) carry_product(t, m, own);
    }
  });
}

// The parameter gradients and d_x after the loop, over all S·B rows in place or over the N
// active rows compacted (ws slices 4…8), float32 products (T = double too):
//   d_x = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ;  d_w_ru = [x, h_{t−1}]ᵀ·d_ru;
//   d_w_c = [x, hr]ᵀ·d_c_bar;  d_b_ru, d_b_c = column sums.
// d_ru and d_c_bar are packed into `ru_packed` and `c_packed` (workspace slices,
// pack_into_workspace); w_ru_xᵀ and w_c_xᵀ are the plan's when there is one.
template <typename T>
void gru_param_grads(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a, const ActiveRows& act,
                     const T* d_ru, std::int64_t R, const T* d_c, const T* hr, T* d_ruc, T* d_cc,
                     T* xc, T* hc, T* hrc, T* ru_packed, T* c_packed) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, N = act.total();
  const bool planned_x_t = a.plan && a.plan->has_x_t;
  const gemm::PackedB<T>* const w_ru_x_t = planned_x_t ? &a.plan->w_ru_x_t : nullptr;
  const gemm::PackedB<T>* const w_c_x_t = planned_x_t ? &a.plan->w_c_x_t : nullptr;
  if (act.all) {  // every row active: the products over all S·B rows, in place
    const std::int64_t SB = S * B;
    // d_x[0:S] = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ
    //   [S·B, I] = [S·B, 2H]·[I, 2H]ᵀ + [S·B, H]·[I, H]ᵀ
    if (a.d_x) {
      product_weight_t(w_ru_x_t, SB, I, 2 * H, d_ru, R, a.w_ru, 2 * H, T(0), a.d_x, I);
      product_weight_t(w_c_x_t, SB, I, H, d_c, H, a.w_c, H, T(1), a.d_x, I);
    }
    // d_ru and d_c_bar, each packed once for its two weight-gradient products.
    gemm::PackedB<T> d_ru_packed, d_c_packed;
    pack_into_workspace(d_ru_packed, SB, 2 * H, d_ru, R, ru_packed);
    pack_into_workspace(d_c_packed, SB, H, d_c, H, c_packed);
    // d_w_ru[0:I] = xᵀ·d_ru      [I, 2H] = [S·B, I]ᵀ·[S·B, 2H]
    gemm<T>(Trans::kYes, I, a.x, I, d_ru_packed, T(0), a.d_w_ru, 2 * H);
    // d_w_ru[I:] = [h_prev; h[0:S−1]]ᵀ·d_ru over two K ranges of the packed d_ru, so the
    // previous-h sequence is never copied:
    //   [H, 2H] = [B, H]ᵀ·d_ru[0:B] + [(S−1)·B, H]ᵀ·d_ru[B:]
    T* const w_ru_grad_h = a.d_w_ru + I * 2 * H;
    gemm<T>(Trans::kYes, H, a.h_prev, H, d_ru_packed, 0, B, T(0), w_ru_grad_h, 2 * H);
    gemm<T>(Trans::kYes, H, a.h, H, d_ru_packed, B, SB, T(1), w_ru_grad_h, 2 * H);
    // d_w_c[0:I] = xᵀ·d_c_bar      [I, H] = [S·B, I]ᵀ·[S·B, H]
    gemm<T>(Trans::kYes, I, a.x, I, d_c_packed, T(0), a.d_w_c, H);
    // d_w_c[I:] = hrᵀ·d_c_bar      [H, H] = [S·B, H]ᵀ·[S·B, H]
    gemm<T>(Trans::kYes, H, hr, H, d_c_packed, T(0), a.d_w_c + I * H, H);
    return;
  }
  gemm::PackedB<T> d_ru_packed, d_c_packed;
  pack_into_workspace(d_ru_packed, N, 2 * H, d_ruc, R, ru_packed);
  pack_into_workspace(d_c_packed, N, H, d_cc, H, c_packed);
  gemm<T>(Trans::kYes, I, xc, I, d_ru_packed, T(0), a.d_w_ru, 2 * H);
  gemm<T>(Trans::kYes, H, hc, H, d_ru_packed, T(0), a.d_w_ru + I * 2 * H, 2 * H);
  gemm<T>(Trans::kYes, I, xc, I, d_c_packed, T(0), a.d_w_c, H);
  gemm<T>(Trans::kYes, H, hrc, H, d_c_packed, T(0), a.d_w_c + I * H, H);
  // d_x of the active rows, compact (into xc), then scattered.
  if (a.d_x) {
    product_weight_t(w_ru_x_t, N, I, 2 * H, d_ruc, R, a.w_ru, 2 * H, T(0), xc, I);
    product_weight_t(w_c_x_t, N, I, H, d_cc, H, a.w_c, H, T(1), xc, I);
    scatter_rows(act.rows, xc, I, a.d_x);
  }
}

// The same with bfloat16 operands (bf16_products.h): d_ru, d_c_bar and hr rounded when packed,
// x, h and the weights rounded (exactly, for a bfloat16 call's inputs). [h_prev; h[0:S−1]] is
// one bfloat16 copy. The operands live in `scratch` (block_gru_bf16_bwd_workspace_floats counts
// what is taken here): the packed d_ru and d_c_bar, that copy, and one buffer for each
// product's rounded left operand in turn.
void gru_param_grads_bf16(const BlockGRUDims& d, const BlockGRUBwdArgs<float>& a,
                          const ActiveRows& act, const float* d_ru, std::int64_t R,
                          const float* d_c, const float* hr, const float* d_ruc, const float* d_cc,
                          float* xc, const float* hc, const float* hrc, Bf16Scratch& scratch) {
  using gemm::gemm_bf16;
  using gemm::PackedBBf16;
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max;
  const std::int64_t rows = act.all ? S * B : act.total();
  const GRUPlan<float>::Bf16* const p = bf16_packs(a.plan);
  const bool planned_x_t = p && a.plan->has_x_t;
  const gemm::PackedBBf16* const w_ru_x_t = planned_x_t ? &p->w_ru_x_t : nullptr;
  const gemm::PackedBBf16* const w_c_x_t = planned_x_t ? &p->w_c_x_t : nullptr;
  float* const a_scratch =
      scratch.take(lhs_scratch_floats({{rows, 2 * H}, {rows, H}, {I, rows}, {H, rows}}));
  PackedBBf16 d_ru_packed, d_c_packed;
  if (act.all) {
    if (a.d_x) {
      product_weight_t_bf16(w_ru_x_t, rows, I, 2 * H, d_ru, R, a.w_ru, 2 * H, 0.0f, a.d_x, I,
                            a_scratch);
      product_weight_t_bf16(w_c_x_t, rows, I, H, d_c, H, a.w_c, H, 1.0f, a.d_x, I, a_scratch);
    }
    scratch.pack(d_ru_packed, rows, 2 * H, d_ru, R);
    scratch.pack(d_c_packed, rows, H, d_c, H);
    gemm_bf16(Trans::kYes, I, a.x, I, d_ru_packed, 0.0f, a.d_w_ru, 2 * H, a_scratch);
    const std::uint16_t* const h_before =
        previous_h_bf16(S, B, H, a.h_prev, a.h, scratch.take(previous_h_bf16_floats(S, B, H)));
    gemm_bf16(Trans::kYes, H, h_before, H, d_ru_packed, 0.0f, a.d_w_ru + I * 2 * H, 2 * H,
              a_scratch);
    gemm_bf16(Trans::kYes, I, a.x, I, d_c_packed, 0.0f, a.d_w_c, H, a_scratch);
    gemm_bf16(Trans::kYes, H, hr, H, d_c_packed, 0.0f, a.d_w_c + I * H, H, a_scratch);
    return;
  }
  scratch.pack(d_ru_packed, rows, 2 * H, d_ruc, R);
  scratch.pack(d_c_packed, rows, H, d_cc, H);
  gemm_bf16(Trans::kYes, I, xc, I, d_ru_packed, 0.0f, a.d_w_ru, 2 * H, a_scratch);
  gemm_bf16(Trans::kYes, H, hc, H, d_ru_packed, 0.0f, a.d_w_ru + I * 2 * H, 2 * H, a_scratch);
  gemm_bf16(Trans::kYes, I, xc, I, d_c_packed, 0.0f, a.d_w_c, H, a_scratch);
  gemm_bf16(Trans::kYes, H, hrc, H, d_c_packed, 0.0f, a.d_w_c + I * H, H, a_scratch);
  // d_x of the active rows, compact (into xc, read above), then scattered.
  if (a.d_x) {
    product_weight_t_bf16(w_ru_x_t, rows, I, 2 * H, d_ruc, R, a.w_ru, 2 * H, 0.0f, xc, I,
                          a_scratch);
    product_weight_t_bf16(w_c_x_t, rows, I, H, d_cc, H, a.w_c, H, 1.0f, xc, I, a_scratch);
    scatter_rows(act.rows, xc, I, a.d_x);
  }
}

}  // namespace
// The backward, with or without seq_lengths (ActiveRows; without lengths every row is active):
// the passes on the active rows (inactive rows of d_ru, d_c_bar, hr and the carry are zero) and
// the products over the step's prefix (or all rows); the parameter gradients and d_x as
// products over all S·B rows in place, or, with lengths, over the N active rows compacted.
// With bf16_products, every product on bfloat16 operands: d_hr from d_c_bar[t] and the carry
// from d_ru[t], each rounded by the owners of its columns before the barrier that precedes its
// product (one buffer each: the next write to it follows a later barrier that every reader has
// passed).
template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H;
  if (a.d_h_prev) zero(a.d_h_prev, BH);
  const ActiveRows act(d.lengths, S, B, d.index);
  const std::int64_t N = act.total(), Nc = act.compacted();
  zero_unwritten_d_x(a.d_x, act, d.T, I);
  if (N == 0) {  // S = 0 or no active rows: the gradients are zeros
    zero(a.d_w_ru, K * 2 * H);
    zero(a.d_w_c, K * H);
    zero(a.d_b_ru, 2 * H);
    zero(a.d_b_c, H);
    return;
  }
  // Past here each parameter gradient is written whole by its product (beta = 0) or column sum.
  const std::int64_t R = padded_ld(2 * H);
  // bfloat16 products pack their own operands: no slice for the float packs.
  bool bf16 = false;
  if constexpr (std::is_same_v<T, float>) bf16 = a.bf16_products;
  Workspace<T> ws("BlockGRUGrad",
                  {S * B * R, S * BH, S * BH, BH, Nc * R, Nc * H, Nc * I, Nc * H, Nc * H,
                   bf16 ? 0 : gemm::packed_elems_bound(N, 2 * H),
                   bf16 ? 0 : gemm::packed_elems_bound(N, H), a.d_h_prev ? 0 : BH},
                  a.workspace);
  T* const d_ru = ws.slice(0);
  T* const d_c = ws.slice(1);
  T* const hr = ws.slice(2);
  T* const d_hr = ws.slice(3);
  // The carry lives in d_h_prev, or without one (no h_prev gradient wanted) in the workspace.
  T* const carry = carry_storage(a.d_h_prev, ws.slice(11), BH);
  // bfloat16 products: their operands in the caller's bf16_workspace, else allocated per call.
  std::optional<Bf16Scratch> scratch;
  if (bf16) {
    if constexpr (std::is_same_v<T, float>) {
      scratch.emplace("BlockGRUGrad", a.bf16_workspace,
                      block_gru_bf16_bwd_workspace_floats(S, B, I, H));
      const GRUPlan<float>::Bf16* const p = bf16_packs(a.plan);
      gemm::PackedBBf16 now[2];
      const bool planned_h_t = p && a.plan->has_h_t;
      const gemm::PackedBBf16& w_ru_h_t =
          bf16_weight(planned_h_t ? &p->w_ru_h_t : nullptr, now[0], Trans::kYes, 2 * H, H,
                      a.w_ru + I * 2 * H, 2 * H);
      const gemm::PackedBBf16& w_c_h_t = bf16_weight(planned_h_t ? &p->w_c_h_t : nullptr, now[1],
                                                     Trans::kYes, H, H, a.w_c + I * H, H);
      Bf16Lhs dcb("BlockGRUGrad", B, H, w_c_h_t.kernel(),
                  scratch->take(Bf16Lhs::storage_floats(B, H)));
      Bf16Lhs drb("BlockGRUGrad", B, 2 * H, w_c_h_t.kernel(),
                  scratch->take(Bf16Lhs::storage_floats(B, 2 * H)));
      gru_bwd_loop(
          d, a, act, d_ru, R, d_c, hr, d_hr, carry, w_c_h_t.panels(), w_c_h_t.panel_width(),
          [&](std::int64_t, std::int64_t m, const UnitSplit& own) {
            dcb.product(0, m, w_c_h_t, own.p0, own.p1, 0.0f, d_hr, H);
          },
          [&](std::int64_t, std::int64_t m, const UnitSplit& own) {
            drb.product(0, m, w_ru_h_t, own.p0, own.p1, 1.0f, carry, H);
          },
          [&](std::int64_t t, int which, const UnitSplit& own) {
            if (which == 0) {
              dcb.round(0, 0, B, own.j0, own.j1, d_c + t * BH, H);
            } else {
              float* const d_ru_t = d_ru + t * B * R;
              drb.round(0, 0, B, own.j0, own.j1, d_ru_t, R);
              drb.round(0, 0, B, H + own.j0, H + own.j1, d_ru_t, R);
            }
          });
    }
  } else {
    const bool planned_h_t = a.plan && a.plan->has_h_t;
    const Packed<T> w_ru_h_t(planned_h_t ? &a.plan->w_ru_h_t : nullptr, Trans::kYes, 2 * H, H,
                             a.w_ru + I * 2 * H, 2 * H);
    const Packed<T> w_c_h_t(planned_h_t ? &a.plan->w_c_h_t : nullptr, Trans::kYes, H, H,
                            a.w_c + I * H, H);
    gru_bwd_loop(
        d, a, act, d_ru, R, d_c, hr, d_hr, carry, w_c_h_t->panels(), w_c_h_t->panel_width(),
        [&](std::int64_t t, std::int64_t m, const UnitSplit& own) {
          gemm::gemm_panels(m, d_c + t * BH, H, *w_c_h_t, own.p0, own.p1, T(0), d_hr, H);
        },
        [&](std::int64_t t, std::int64_t m, const UnitSplit& own) {
          gemm::gemm_panels(m, d_ru + t * B * R, R, *w_ru_h_t, own.p0, own.p1, T(1), carry, H);
        },
        [](std::int64_t, int, const UnitSplit&) {});
  }

  // The active rows, compacted (with lengths only).
  T* const d_ruc = ws.slice(4);  // [N, 2H] (row stride R)
  T* const d_cc = ws.slice(5);   // [N, H]
  T* const xc = ws.slice(6);     // [N, I]  x rows, then d_x rows
  T* const hc = ws.slice(7);     // [N, H]  h[t−1]
  T* const hrc = ws.slice(8);    // [N, H]  h[t−1]⊙r[t]
  if (act.all) {
    // d_b_ru = Σ_rows d_ru [2H];  d_b_c = Σ_rows d_c_bar [H]
    column_sums(S * B, 2 * H, d_ru, R, a.d_b_ru);
    column_sums(S * B, H, d_c, H, a.d_b_c);
  } else {
    gather_rows(act.rows, d_ru, R, 2 * H, d_ruc, R);
    gather_rows(act.rows, d_c, H, H, d_cc, H);
    gather_rows(act.rows, hr, H, H, hrc, H);
    gather_inputs(act.rows, B, I, H, a.x, a.h_prev, a.h, xc, hc);
    column_sums(N, 2 * H, d_ruc, R, a.d_b_ru);
    column_sums(N, H, d_cc, H, a.d_b_c);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) {
      return gru_param_grads_bf16(d, a, act, d_ru, R, d_c, hr, d_ruc, d_cc, xc, hc, hrc, *scratch);
    }
  }
  gru_param_grads(d, a, act, d_ru, R, d_c, hr, d_ruc, d_cc, xc, hc, hrc, ws.slice(9), ws.slice(10));
}

std::int64_t block_gru_bf16_fwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                 std::int64_t H) {
  return input_projection_bf16_floats(S, B, I) + 2 * Bf16Lhs::storage_floats(B, H);
}

// Backward: dcb and drb, then gru_param_grads_bf16's (over at most S·B rows).
std::int64_t block_gru_bf16_bwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                 std::int64_t H) {
  const std::int64_t rows = S * B;
  return Bf16Lhs::storage_floats(B, H) + Bf16Lhs::storage_floats(B, 2 * H) +
         lhs_scratch_floats({{rows, 2 * H}, {rows, H}, {I, rows}, {H, rows}}) +
         packed_bf16_floats(rows, 2 * H) + packed_bf16_floats(rows, H) +
         previous_h_bf16_floats(S, B, H);
}

template void block_gru_fwd<float>(const BlockGRUDims&, const BlockGRUFwdArgs<float>&);
template void block_gru_fwd<double>(const BlockGRUDims&, const BlockGRUFwdArgs<double>&);
template void block_gru_bwd<float>(const BlockGRUDims&, const BlockGRUBwdArgs<float>&);
template void block_gru_bwd<double>(const BlockGRUDims&, const BlockGRUBwdArgs<double>&);

}  // namespace blockrnn::cpu
