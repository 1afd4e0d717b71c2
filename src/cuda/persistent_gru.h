// Persistent BlockGRU, the reset-before GRU (docs/cuda.md, "Persistent BlockGRU kernel"): the
// time loop of the forward as ONE grid of CTAs that stay resident for all steps, each CTA owning
// a contiguous slice of hidden units j (and their three gate columns: r and u of w_ru, c of w_c)
// with its slice of the recurrent weights loaded once into its shared memory.
//
// Like src/cuda/persistent_lstm.h (which says how a body is called, compiled twice and
// synchronised through `sync`), this header is the per-CTA body, for the cooperative kernel of
// src/cuda/persistent_lstm.cu and for the host driver of src/cuda/persistent_host.cpp.
//
// Semantics are the CPU reference's (src/ref/block_gru.cc, src/ref/gru_cell.cc), with its
// groupings and summation orders, so results are bitwise the same for any number of CTAs and
// threads. Step t < S:
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
BLOCKRNN_HD inline i64 gru_resident_elems(i64 H, i64 ctas) {
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
BLOCKRNN_HD void gru_fwd_cta(const GRUFwdParams<T>& p, const CtaIndex& c, T* resident, Sync& sync) {
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

}  // namespace blockrnn::cuda::persistent
