// Persistent BlockGRU, the reset-before GRU (docs/cuda.md, "Persistent BlockGRU kernels"): the
// time loop of the forward and of the backward (gru_bwd_cta, below) as ONE grid of CTAs that stay
// resident for all steps, each CTA owning a contiguous slice of hidden units j (and their three
// gate columns: r and u of w_ru, c of w_c) with its slice of the recurrent weights loaded once
// into its shared memory.
//
// Like src/cuda/persistent_lstm.h (which says how a body is called, compiled twice and
// synchronised through `sync`), this header holds per-CTA bodies, for the cooperative kernels of
// src/cuda/persistent_lstm.cu and for the host driver of src/cuda/persistent_host.cpp.
//
// Semantics are the CPU reference's (src/ref/block_gru.cc, src/ref/gru_cell.cc), with its
// groupings and summation orders, so results are bitwise the same for any number of CTAs and
// threads. Forward, step t < S:
//   phase 1, for each (n, own r or u column col):
//     ru = (xw_ru[t][n, col] + Σ_{k = 0 … H−1} h[t−1][n, k]·w_ru[I + k, col]) + b_ru[col],
//     the sum in increasing k continuing x[t]·w_ru's sum over the x rows (the reference's one
//     product over [x, h]); r = σ(ru) or u = σ(ru); grid barrier (all of r[t] written);
//   phase 2, for each (n, own unit j):
//     c = tanh((xw_c[t][n, j] + Σ_k (h[t−1][n, k]·r[t][n, k])·w_c[I + k, j]) + b_c[j]),
//     h[t][n, j] = u·(h[t−1][n, j] − c) + c; grid barrier (h[t] complete).
// The reset-before GRU needs both barriers: the candidate's product reads r⊙h[t−1] of every
// unit, and the next step's gates read h[t] of every unit. x·w_ru and x·w_c for all steps are
// products computed before the loop by the caller (one GEMM each). No atomics.
//
// Shape letters: T time steps, B batch, I input size, H cell size, S = seq_len_max.
#pragma once

#include <cstdint>

#include "cuda/persistent_lstm.h"
#include "kernel/block_gru.h"

namespace blockrnn::cuda::persistent {

// Elements of a GRU CTA's resident weight slice: H rows × 3 columns per owned unit.
__host__ __device__ inline i64 gru_resident_elems(i64 H, i64 ctas) {
  return 3 * H * max_units(H, ctas);
}

template <typename T>
struct GRUFwdParams {
  i64 S, B, I, H;
  const T *w_ru, *w_c;    // [I+H, 2H], [I+H, H]; rows I … I+H−1 are the recurrent weights
  const T *b_ru, *b_c;    // [2H], [H]
  const T* h_prev;        // [B, H]
  const T *xw_ru, *xw_c;  // [S, B, 2H], [S, B, H]: x[t]·w_ru[:I], x[t]·w_c[:I]
  T *r, *u, *c, *h;       // [T, B, H] each; steps t < S written here
};

// The forward's time loop, run by every thread of every CTA. `resident` is the CTA's own buffer
// of gru_resident_elems(H, ctas) elements (shared memory on a GPU).
template <typename T, typename Sync>
__host__ __device__ void gru_fwd_cta(const GRUFwdParams<T>& p, const CtaIndex& c, T* resident,
                                     Sync& sync) {
  const i64 B = p.B, I = p.I, H = p.H, BH = B * H;
  const UnitSlice s = unit_slice(H, c.ctas, c.cta);
  const i64 hp = s.count, cw = 3 * hp;  // owned units, owned gate columns
  // resident[k·cw + q·hp + jj]: q = 0 w_ru[I + k, begin + jj] (r), q = 1 w_ru[I + k, H + begin
  // + jj] (u), q = 2 w_c[I + k, begin + jj] (c).
  for (i64 e = c.tid; e < H * cw; e += c.threads) {
    const i64 k = e / cw, q = (e % cw) / hp, jj = e % hp;
    resident[e] =
        q < 2 ? p.w_ru[(I + k) * 2 * H + q * H + s.begin + jj] : p.w_c[(I + k) * H + s.begin + jj];
  }
  sync.cta();
  const i64 ru_cols = 2 * hp;
  for (i64 t = 0; t < p.S; ++t) {
    const T* hprev = t == 0 ? p.h_prev : p.h + (t - 1) * BH;
    const T* xru = p.xw_ru + t * B * 2 * H;
    const T* xc = p.xw_c + t * BH;
    T* r = p.r + t * BH;
    T* u = p.u + t * BH;
    // Phase 1: r and u of the own units.
    for (i64 e = c.tid; e < B * ru_cols; e += c.threads) {
      const i64 n = e / ru_cols, lc = e % ru_cols, q = lc / hp, j = s.begin + lc % hp;
      const i64 col = q * H + j;
      T acc = xru[n * 2 * H + col];
      for (i64 k = 0; k < H; ++k) acc += hprev[n * H + k] * resident[k * cw + lc];
      const T gate = act_sigmoid(acc + p.b_ru[col]);
      sync.jitter();
      (q == 0 ? r : u)[n * H + j] = gate;
    }
    sync.grid();  // r[t] complete: the candidate's product reads r⊙h[t−1] of every unit
    // Phase 2: the candidate and h[t] of the own units.
    for (i64 e = c.tid; e < B * hp; e += c.threads) {
      const i64 n = e / hp, jj = e % hp, j = s.begin + jj, x = n * H + j;
      T acc = xc[x];
      for (i64 k = 0; k < H; ++k) {
        acc += (hprev[n * H + k] * r[n * H + k]) * resident[k * cw + ru_cols + jj];
      }
      const T cand = act_tanh(acc + p.b_c[j]);
      p.c[t * BH + x] = cand;
      sync.jitter();
      p.h[t * BH + x] = u[x] * (hprev[x] - cand) + cand;
    }
    sync.grid();  // h[t] complete before any CTA starts step t + 1
  }
}

// ---- backward ----

template <typename T>
struct GRUBwdParams {
  i64 S, B, I, H;
  const T *w_ru, *w_c;     // [I+H, 2H], [I+H, H]
  const T* h_prev;         // [B, H]
  const T *r, *u, *c, *h;  // [T, B, H] each, forward outputs
  const T* d_h;            // [T, B, H]
  T* d_c_bar;              // [S, B, H] out: the candidate's pre-activation gradient
  T* d_ru;                 // [S, B, 2H] out: d_r_bar, d_u_bar
  T* hr;                   // [S, B, H] out: h[t−1]⊙r[t] (the rows of d_w_c's product)
  T* d_hr;                 // [B, H] workspace: the step's ∂L/∂(h[t−1]⊙r)
  T* carry;                // [B, H] out: d_h_prev
  T *d_b_ru, *d_b_c;       // [2H], [H] out
};

// The backward's time loop and the bias gradients, run by every thread of every CTA; `resident`
// holds gru_resident_elems(H, ctas) elements: resident[jj·3H + g] = w_ru[I + begin + jj, g] for
// g < 2H and w_c[I + begin + jj, g − 2H] for 2H ≤ g < 3H (the own units' rows). Step t = S−1 … 0:
//   phase A (own units): d_h = carry + d_h[t]; d_c_bar = (d_h·(1−u))·(1−c·c),
//     d_u_bar = ((d_h·(h[t−1]−c))·u)·(1−u), hr = h[t−1]·r; grid barrier (all of d_c_bar[t]);
//   phase B (own units): d_hr = Σ_{g < H} d_c_bar[n, g]·w_c[I + j, g] in increasing g,
//     d_r_bar = ((d_hr·h[t−1])·r)·(1−r); the own units' d_b_c += Σ_n d_c_bar; grid barrier (all
//     of d_r_bar[t]);
//   phase C (own units): carry = (Σ_{g < 2H} d_ru[n, g]·w_ru[I + j, g] + d_hr·r) + d_h·u, the
//     sum in increasing g; the own columns' d_b_ru += Σ_n d_ru.
// Each sum is the reference's (src/ref/gru_cell.cc) in its order, so with the products after
// the loop in the reference's order too, every output but d_w is bitwise the reference's.
// Phases A, B and C visit the same (n, unit) elements with the same thread mapping, so carry and
// d_hr need no CTA barrier between a phase C and the next step's phase A.
template <typename T, typename Sync>
__host__ __device__ void gru_bwd_cta(const GRUBwdParams<T>& p, const CtaIndex& c, T* resident,
                                     Sync& sync) {
  const i64 B = p.B, I = p.I, H = p.H, BH = B * H, H2 = 2 * H, H3 = 3 * H;
  const UnitSlice s = unit_slice(H, c.ctas, c.cta);
  const i64 hp = s.count;
  for (i64 e = c.tid; e < hp * H3; e += c.threads) {
    const i64 jj = e / H3, g = e % H3, row = I + s.begin + jj;
    resident[e] = g < H2 ? p.w_ru[row * H2 + g] : p.w_c[row * H + g - H2];
  }
  for (i64 e = c.tid; e < B * hp; e += c.threads) p.carry[(e / hp) * H + s.begin + e % hp] = T(0);
  for (i64 e = c.tid; e < hp; e += c.threads) p.d_b_c[s.begin + e] = T(0);
  for (i64 e = c.tid; e < 2 * hp; e += c.threads) p.d_b_ru[(e / hp) * H + s.begin + e % hp] = T(0);
  sync.cta();
  for (i64 t = p.S - 1; t >= 0; --t) {
    const i64 o0 = t * BH;
    const T* hprev = t == 0 ? p.h_prev : p.h + o0 - BH;
    T* dcb = p.d_c_bar + o0;
    T* dru = p.d_ru + t * B * H2;
    // Phase A.
    for (i64 e = c.tid; e < B * hp; e += c.threads) {
      const i64 n = e / hp, j = s.begin + e % hp, x = n * H + j;
      const T dh = p.carry[x] + p.d_h[o0 + x];
      const T u = p.u[o0 + x], cand = p.c[o0 + x];
      dcb[x] = (dh * (T(1) - u)) * (T(1) - cand * cand);
      sync.jitter();
      dru[n * H2 + H + j] = ((dh * (hprev[x] - cand)) * u) * (T(1) - u);
      p.hr[o0 + x] = hprev[x] * p.r[o0 + x];
    }
    sync.grid();  // d_c_bar[t] complete: phase B reads every unit's
    // Phase B.
    for (i64 e = c.tid; e < B * hp; e += c.threads) {
      const i64 n = e / hp, jj = e % hp, j = s.begin + jj, x = n * H + j;
      T acc = T(0);
      for (i64 g = 0; g < H; ++g) acc += dcb[n * H + g] * resident[jj * H3 + H2 + g];
      p.d_hr[x] = acc;
      const T r = p.r[o0 + x];
      sync.jitter();
      dru[n * H2 + j] = ((acc * hprev[x]) * r) * (T(1) - r);
    }
    for (i64 e = c.tid; e < hp; e += c.threads) {
      T sum = T(0);
      for (i64 n = 0; n < B; ++n) sum += dcb[n * H + s.begin + e];
      p.d_b_c[s.begin + e] += sum;
    }
    sync.grid();  // d_r_bar[t] complete: phase C reads every unit's
    // Phase C.
    for (i64 e = c.tid; e < B * hp; e += c.threads) {
      const i64 n = e / hp, jj = e % hp, j = s.begin + jj, x = n * H + j;
      T acc = T(0);
      for (i64 g = 0; g < H2; ++g) acc += dru[n * H2 + g] * resident[jj * H3 + g];
      const T dh = p.carry[x] + p.d_h[o0 + x];
      sync.jitter();
      p.carry[x] = (acc + p.d_hr[x] * p.r[o0 + x]) + dh * p.u[o0 + x];
    }
    for (i64 e = c.tid; e < 2 * hp; e += c.threads) {
      const i64 col = (e / hp) * H + s.begin + e % hp;
      T sum = T(0);
      for (i64 n = 0; n < B; ++n) sum += dru[n * H2 + col];
      p.d_b_ru[col] += sum;
    }
  }
}

// The body's parameters from the kernel arguments (host code). `xw_ru`, `xw_c`: [S, B, 2H] and
// [S, B, H] holding x[t]·w_ru[:I] and x[t]·w_c[:I] for t < S.
template <typename T>
GRUFwdParams<T> gru_fwd_params(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a, const T* xw_ru,
                               const T* xw_c) {
  GRUFwdParams<T> p{};
  p.S = d.seq_len_max;
  p.B = d.B;
  p.I = d.I;
  p.H = d.H;
  p.w_ru = a.w_ru;
  p.w_c = a.w_c;
  p.b_ru = a.b_ru;
  p.b_c = a.b_c;
  p.h_prev = a.h_prev;
  p.xw_ru = xw_ru;
  p.xw_c = xw_c;
  p.r = a.r;
  p.u = a.u;
  p.c = a.c;
  p.h = a.h;
  return p;
}

// `d_c_bar`, `hr`: [S, B, H]; `d_ru`: [S, B, 2H]; `d_hr`: [B, H]. The carried gradient is kept in
// the output d_h_prev.
template <typename T>
GRUBwdParams<T> gru_bwd_params(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a, T* d_c_bar,
                               T* d_ru, T* hr, T* d_hr) {
  GRUBwdParams<T> p{};
  p.S = d.seq_len_max;
  p.B = d.B;
  p.I = d.I;
  p.H = d.H;
  p.w_ru = a.w_ru;
  p.w_c = a.w_c;
  p.h_prev = a.h_prev;
  p.r = a.r;
  p.u = a.u;
  p.c = a.c;
  p.h = a.h;
  p.d_h = a.d_h;
  p.d_c_bar = d_c_bar;
  p.d_ru = d_ru;
  p.hr = hr;
  p.d_hr = d_hr;
  p.carry = a.d_h_prev;
  p.d_b_ru = a.d_b_ru;
  p.d_b_c = a.d_b_c;
  return p;
}

}  // namespace blockrnn::cuda::persistent
