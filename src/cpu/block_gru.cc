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
#include <array>
#include <vector>

#include "core/parallel.h"
#include "cpu/gru_pointwise.h"
#include "cpu/sequence_common.h"
#include "cpu/sequence_plan.h"
#include "gemm/gemm.h"
#include "kernel/block_gru.h"

namespace blockrnn::cpu {

using gemm::gemm;
using gemm::Trans;

// The forward, with or without seq_lengths (sequence_common.h, ActiveRows; without lengths every
// row is active): each step's products over its active prefix (or all rows) and its passes on
// the active rows only; the inactive rows of r, u, c, h are zero.
template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H;
  for (T* out : {a.r, a.u, a.c, a.h}) zero(out + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  const ActiveRows act(d.lengths, S, B);
  const std::int64_t R = padded_ld(2 * H);
  Workspace<T> ws("BlockGRU", {S * B * R, BH}, a.workspace);
  T* const ru = ws.slice(0);
  T* const hr = ws.slice(1);
  // w_ru[I:] by gate column block [H, H]: r, u.
  const std::array<Packed<T>, 2> w_ru_h = {
      Packed<T>(a.plan ? &a.plan->w_r_h : nullptr, Trans::kNo, H, H, a.w_ru + I * 2 * H, 2 * H),
      Packed<T>(a.plan ? &a.plan->w_u_h : nullptr, Trans::kNo, H, H, a.w_ru + I * 2 * H + H,
                2 * H)};
  const Packed<T> w_c_h(a.plan ? &a.plan->w_c_h : nullptr, Trans::kNo, H, H, a.w_c + I * H, H);
  const std::int64_t panels = w_c_h->panels(), nr = w_c_h->panel_width();
  // The input projections x·w_ru[0:I] into ru and x·w_c[0:I] into the output c, which the steps
  // read; with prefix lengths only each step's active rows.
  input_projection(act, a.plan ? &a.plan->w_ru_x : nullptr, a.x, I, a.w_ru, 2 * H, 2 * H, ru, R);
  input_projection(act, a.plan ? &a.plan->w_c_x : nullptr, a.x, I, a.w_c, H, H, a.c, H);
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
      for (std::int64_t q = 0; q < 2; ++q) {
        gemm::gemm_panels(m, hp, H, *w_ru_h[q], own.p0, own.p1, T(1), ru_t + q * H, R);
      }
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
#pragma omp barrier
      gemm::gemm_panels(m, hr, H, *w_c_h, own.p0, own.p1, T(1), c_t, H);
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
      if (end_step(t)) break;
    }
  });
}

// The backward, with or without seq_lengths (ActiveRows; without lengths every row is active):
// the passes on the active rows (inactive rows of d_ru, d_c_bar, hr and the carry are zero) and
// the products over the step's prefix (or all rows); the parameter gradients and d_x as
// products over all S·B rows in place, or, with lengths, over the N active rows compacted.
template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H;
  zero(a.d_x, d.T * B * I);
  zero(a.d_h_prev, BH);
  zero(a.d_w_ru, K * 2 * H);
  zero(a.d_w_c, K * H);
  zero(a.d_b_ru, 2 * H);
  zero(a.d_b_c, H);
  const ActiveRows act(d.lengths, S, B);
  const std::int64_t N = act.total(), Nc = act.compacted();
  if (N == 0) return;  // S = 0 or no active rows: the gradients are the zeros above
  const std::int64_t R = padded_ld(2 * H);
  Workspace<T> ws("BlockGRUGrad",
                  {S * B * R, S * BH, S * BH, BH, Nc * R, Nc * H, Nc * I, Nc * H, Nc * H},
                  a.workspace);
  const Packed<T> w_ru_h_t(a.plan ? &a.plan->w_ru_h_t : nullptr, Trans::kYes, 2 * H, H,
                           a.w_ru + I * 2 * H, 2 * H);
  const Packed<T> w_c_h_t(a.plan ? &a.plan->w_c_h_t : nullptr, Trans::kYes, H, H, a.w_c + I * H, H);
  T* const d_ru = ws.slice(0);
  T* const d_c = ws.slice(1);
  T* const hr = ws.slice(2);
  T* const d_hr = ws.slice(3);
  T* const carry = a.d_h_prev;
  const std::int64_t panels = w_c_h_t->panels(), nr = w_c_h_t->panel_width();
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
#pragma omp barrier
      gemm::gemm_panels(m, d_c_t, H, *w_c_h_t, own.p0, own.p1, T(0), d_hr, H);
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
      if (end_step(S - 1 - t)) break;
      gemm::gemm_panels(m, d_ru_t, R, *w_ru_h_t, own.p0, own.p1, T(1), carry, H);
    }
  });

  if (act.all) {  // every row active: the products over all S·B rows, in place
    const std::int64_t SB = S * B;
    // d_x[0:S] = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ
    //   [S·B, I] = [S·B, 2H]·[I, 2H]ᵀ + [S·B, H]·[I, H]ᵀ
    gemm<T>(Trans::kNo, Trans::kYes, SB, I, 2 * H, d_ru, R, a.w_ru, 2 * H, T(0), a.d_x, I);
    gemm<T>(Trans::kNo, Trans::kYes, SB, I, H, d_c, H, a.w_c, H, T(1), a.d_x, I);
    // d_ru and d_c_bar, each packed once for its two weight-gradient products.
    gemm::PackedB<T> d_ru_packed, d_c_packed;
    d_ru_packed.pack(Trans::kNo, SB, 2 * H, d_ru, R);
    d_c_packed.pack(Trans::kNo, SB, H, d_c, H);
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
    // d_b_ru = Σ_rows d_ru [2H];  d_b_c = Σ_rows d_c_bar [H]
    column_sums(SB, 2 * H, d_ru, R, a.d_b_ru);
    column_sums(SB, H, d_c, H, a.d_b_c);
    return;
  }

  // The active rows, compacted.
  T* const d_ruc = ws.slice(4);  // [N, 2H] (row stride R)
  T* const d_cc = ws.slice(5);   // [N, H]
  T* const xc = ws.slice(6);     // [N, I]  x rows, then d_x rows
  T* const hc = ws.slice(7);     // [N, H]  h[t−1]
  T* const hrc = ws.slice(8);    // [N, H]  h[t−1]⊙r[t]
  gather_rows(act.rows, d_ru, R, 2 * H, d_ruc, R);
  gather_rows(act.rows, d_c, H, H, d_cc, H);
  gather_rows(act.rows, hr, H, H, hrc, H);
  gather_inputs(act.rows, B, I, H, a.x, a.h_prev, a.h, xc, hc);
  gemm::PackedB<T> d_ru_packed, d_c_packed;
  d_ru_packed.pack(Trans::kNo, N, 2 * H, d_ruc, R);
  d_c_packed.pack(Trans::kNo, N, H, d_cc, H);
  gemm<T>(Trans::kYes, I, xc, I, d_ru_packed, T(0), a.d_w_ru, 2 * H);
  gemm<T>(Trans::kYes, H, hc, H, d_ru_packed, T(0), a.d_w_ru + I * 2 * H, 2 * H);
  gemm<T>(Trans::kYes, I, xc, I, d_c_packed, T(0), a.d_w_c, H);
  gemm<T>(Trans::kYes, H, hrc, H, d_c_packed, T(0), a.d_w_c + I * H, H);
  column_sums(N, 2 * H, d_ruc, R, a.d_b_ru);
  column_sums(N, H, d_cc, H, a.d_b_c);
  // d_x of the active rows, compact (into xc), then scattered.
  gemm<T>(Trans::kNo, Trans::kYes, N, I, 2 * H, d_ruc, R, a.w_ru, 2 * H, T(0), xc, I);
  gemm<T>(Trans::kNo, Trans::kYes, N, I, H, d_cc, H, a.w_c, H, T(1), xc, I);
  scatter_rows(act.rows, xc, I, a.d_x);
}

template void block_gru_fwd<float>(const BlockGRUDims&, const BlockGRUFwdArgs<float>&);
template void block_gru_fwd<double>(const BlockGRUDims&, const BlockGRUFwdArgs<double>&);
template void block_gru_bwd<float>(const BlockGRUDims&, const BlockGRUBwdArgs<float>&);
template void block_gru_bwd<double>(const BlockGRUDims&, const BlockGRUBwdArgs<double>&);

}  // namespace blockrnn::cpu
