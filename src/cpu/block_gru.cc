// Fast BlockGRU and BlockGRUGrad (SPEC A6, A8). Same math and signature as
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
//
// Backward. The carry d_h_prev lives in the output h_prev_grad. Per step t = S−1 … 0:
//   pass: d_h = carry + h_grad[t] (in place);  d_c_bar[t], d_u_bar[t]
//   d_hr = d_c_bar[t]·w_c_hᵀ
//   pass: d_r_bar[t];  hr[t] = h[t−1]⊙r[t] (kept for d_w_c);  carry = d_hr⊙r + d_h⊙u
//   carry += d_ru[t]·w_ru_hᵀ
// After the loop, one GEMM (or a pair over split row blocks) per gradient over all S·B rows:
//   x_grad = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ;  w_ru_grad = [x, h_{t−1}]ᵀ·d_ru;
//   w_c_grad = [x, hr]ᵀ·d_c_bar;  b_ru_grad, b_c_grad = column sums.
// TensorFlow's cell groups d_h_prev as (g + d_hr⊙r) + d_h⊙u; here the recurrent GEMM adds g
// last (beta = 1), a rounding-level difference (SPEC A7).
#include <vector>

#include "core/parallel.h"
#include "cpu/gru_pointwise.h"
#include "cpu/sequence_common.h"
#include "gemm/gemm.h"
#include "ref/block_gru.h"

namespace blockrnn::cpu {

using gemm::gemm;
using gemm::Trans;

template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H;
  for (T* out : {a.r, a.u, a.c, a.h}) zero(out + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  const T* w_ru_x = a.w_ru;  // [I, 2H]
  const T* w_c_x = a.w_c;    // [I, H]
  // The gate workspace gets a padded row stride (padded_ld); the recurrent weights are packed
  // once per call for the S recurrent products.
  const std::int64_t R = padded_ld(2 * H);
  Workspace<T> ws("BlockGRU", {S * B * R, BH});
  T* const ru = ws.slice(0);  // [S, B, 2H] (row stride R)  pre-activations, no bias
  T* const hr = ws.slice(1);  // [B, H]      h[t−1]⊙r[t] of the current step
  gemm::PackedB<T> w_ru_h, w_c_h;
  w_ru_h.pack(Trans::kNo, H, 2 * H, a.w_ru + I * 2 * H, 2 * H);  // w_ru[I:]  [H, 2H]
  w_c_h.pack(Trans::kNo, H, H, a.w_c + I * H, H);                // w_c[I:]   [H, H]

  // ru = x·w_ru_x for all steps      [S·B, 2H] = [S·B, I]·[I, 2H]
  gemm<T>(Trans::kNo, Trans::kNo, S * B, 2 * H, I, a.x, I, w_ru_x, 2 * H, T(0), ru, R);
  // c = x·w_c_x for all steps        [S·B, H] = [S·B, I]·[I, H]   (pre-activation, in the output)
  gemm<T>(Trans::kNo, Trans::kNo, S * B, H, I, a.x, I, w_c_x, H, T(0), a.c, H);

  for (std::int64_t t = 0; t < S; ++t) {
    const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;  // [B, H]
    T* const ru_t = ru + t * B * R;
    T* const r_t = a.r + t * BH;
    T* const u_t = a.u + t * BH;
    T* const c_t = a.c + t * BH;
    T* const h_t = a.h + t * BH;
    // ru[t] += h[t−1]·w_ru_h      [B, 2H] += [B, H]·[H, 2H]
    gemm<T>(Trans::kNo, B, hp, H, w_ru_h, T(1), ru_t, R);
    core::parallel_for(B, 2 * H, [&](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t n = n0; n < n1; ++n) {
        gru_fwd_gates_row(H, ru_t + n * R, a.b_ru, hp + n * H, r_t + n * H, u_t + n * H,
                          hr + n * H);
      }
    });
    // c[t] += (h[t−1]⊙r[t])·w_c_h      [B, H] += [B, H]·[H, H]
    gemm<T>(Trans::kNo, B, hr, H, w_c_h, T(1), c_t, H);
    core::parallel_for(B, H, [&](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t n = n0; n < n1; ++n) {
        gru_fwd_candidate_row(H, a.b_c, u_t + n * H, hp + n * H, c_t + n * H, h_t + n * H);
      }
    });
  }
}

template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H;
  zero(a.x_grad + S * B * I, (d.T - S) * B * I);
  zero(a.h_prev_grad, BH);
  if (S == 0) {
    zero(a.w_ru_grad, K * 2 * H);
    zero(a.w_c_grad, K * H);
    zero(a.b_ru_grad, 2 * H);
    zero(a.b_c_grad, H);
    return;
  }
  const T* w_ru_x = a.w_ru;                 // [I, 2H]
  const T* w_c_x = a.w_c;                   // [I, H]
  const std::int64_t R = padded_ld(2 * H);  // padded row stride of d_ru
  Workspace<T> ws("BlockGRUGrad", {S * B * R, S * BH, S * BH, BH});
  // The transposed recurrent weights, packed once for the S recurrent products.
  gemm::PackedB<T> w_ru_h_t, w_c_h_t;
  w_ru_h_t.pack(Trans::kYes, 2 * H, H, a.w_ru + I * 2 * H, 2 * H);  // w_ru[I:]ᵀ  [2H, H]
  w_c_h_t.pack(Trans::kYes, H, H, a.w_c + I * H, H);                // w_c[I:]ᵀ   [H, H]
  T* const d_ru = ws.slice(0);     // [S, B, 2H] (row stride R)  [d_r_bar, d_u_bar] per step
  T* const d_c = ws.slice(1);      // [S, B, H]   d_c_bar of every step
  T* const hr = ws.slice(2);       // [S, B, H]   h[t−1]⊙r[t] of every step
  T* const d_hr = ws.slice(3);     // [B, H]      ∂L/∂(h[t−1]⊙r[t]) of the current step
  T* const carry = a.h_prev_grad;  // [B, H]   d_h_prev flowing from step t+1 into step t

  for (std::int64_t t = S - 1; t >= 0; --t) {
    const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;  // [B, H]
    const T* r_t = a.r + t * BH;
    const T* u_t = a.u + t * BH;
    const T* c_t = a.c + t * BH;
    const T* hg_t = a.h_grad + t * BH;
    T* const d_ru_t = d_ru + t * B * R;
    T* const d_c_t = d_c + t * BH;
    T* const hr_t = hr + t * BH;
    core::parallel_for(B, 2 * H, [&](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t n = n0; n < n1; ++n) {
        T* const dh = carry + n * H;  // becomes d_h = carry + h_grad[t]
        for (std::int64_t j = 0; j < H; ++j) dh[j] += hg_t[n * H + j];
        gru_bwd_cu_row(H, u_t + n * H, c_t + n * H, hp + n * H, dh, d_c_t + n * H,
                       d_ru_t + n * R + H);
      }
    });
    // d_hr = d_c_bar[t]·w_c_hᵀ      [B, H] = [B, H]·[H, H]ᵀ
    gemm<T>(Trans::kNo, B, d_c_t, H, w_c_h_t, T(0), d_hr, H);
    core::parallel_for(B, 3 * H, [&](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t n = n0; n < n1; ++n) {
        const std::int64_t o = n * H;
        gru_bwd_r_row(H, d_hr + o, hp + o, r_t + o, d_ru_t + n * R);
        T* const dh = carry + o;
        for (std::int64_t j = 0; j < H; ++j) {
          hr_t[o + j] = hp[o + j] * r_t[o + j];
          dh[j] = d_hr[o + j] * r_t[o + j] + dh[j] * u_t[o + j];
        }
      }
    });
    // carry += d_ru[t]·w_ru_hᵀ      [B, H] += [B, 2H]·[H, 2H]ᵀ
    gemm<T>(Trans::kNo, B, d_ru_t, R, w_ru_h_t, T(1), carry, H);
  }

  const std::int64_t SB = S * B;
  // x_grad[0:S] = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ
  //   [S·B, I] = [S·B, 2H]·[I, 2H]ᵀ + [S·B, H]·[I, H]ᵀ
  gemm<T>(Trans::kNo, Trans::kYes, SB, I, 2 * H, d_ru, R, w_ru_x, 2 * H, T(0), a.x_grad, I);
  gemm<T>(Trans::kNo, Trans::kYes, SB, I, H, d_c, H, w_c_x, H, T(1), a.x_grad, I);
  // w_ru_grad[0:I] = xᵀ·d_ru      [I, 2H] = [S·B, I]ᵀ·[S·B, 2H]
  gemm<T>(Trans::kYes, Trans::kNo, I, 2 * H, SB, a.x, I, d_ru, R, T(0), a.w_ru_grad, 2 * H);
  // w_ru_grad[I:] = [h_prev; h[0:S−1]]ᵀ·d_ru, as two GEMMs so the previous-h sequence is never
  // copied:  [H, 2H] = [B, H]ᵀ·[B, 2H] (t = 0) + [(S−1)·B, H]ᵀ·[(S−1)·B, 2H] (t ≥ 1)
  T* const w_ru_grad_h = a.w_ru_grad + I * 2 * H;
  gemm<T>(Trans::kYes, Trans::kNo, H, 2 * H, B, a.h_prev, H, d_ru, R, T(0), w_ru_grad_h, 2 * H);
  gemm<T>(Trans::kYes, Trans::kNo, H, 2 * H, (S - 1) * B, a.h, H, d_ru + B * R, R, T(1),
          w_ru_grad_h, 2 * H);
  // w_c_grad[0:I] = xᵀ·d_c_bar      [I, H] = [S·B, I]ᵀ·[S·B, H]
  gemm<T>(Trans::kYes, Trans::kNo, I, H, SB, a.x, I, d_c, H, T(0), a.w_c_grad, H);
  // w_c_grad[I:] = hrᵀ·d_c_bar      [H, H] = [S·B, H]ᵀ·[S·B, H]
  gemm<T>(Trans::kYes, Trans::kNo, H, H, SB, hr, H, d_c, H, T(0), a.w_c_grad + I * H, H);
  // b_ru_grad = Σ_rows d_ru [2H];  b_c_grad = Σ_rows d_c_bar [H]
  column_sums(SB, 2 * H, d_ru, R, a.b_ru_grad);
  column_sums(SB, H, d_c, H, a.b_c_grad);
}

template void block_gru_fwd<float>(const BlockGRUDims&, const BlockGRUFwdArgs<float>&);
template void block_gru_fwd<double>(const BlockGRUDims&, const BlockGRUFwdArgs<double>&);
template void block_gru_bwd<float>(const BlockGRUDims&, const BlockGRUBwdArgs<float>&);
template void block_gru_bwd<double>(const BlockGRUDims&, const BlockGRUBwdArgs<double>&);

}  // namespace blockrnn::cpu
