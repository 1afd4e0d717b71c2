// Persistent BlockLSTM (docs/cuda.md, "Persistent BlockLSTM kernels"): the time loop of the
// forward and of the backward as ONE grid of CTAs that stay resident for all steps, each CTA
// owning a contiguous slice of hidden units j (and their four gate columns) with its slice of the
// recurrent weights loaded once into its shared memory.
//
// This header is the per-CTA body, written once and compiled twice: by nvcc as __host__
// __device__ code that the cooperative kernels of src/cuda/persistent_lstm.cu call, and by the
// host compiler for the host driver (src/cuda/persistent_host.cpp), which runs every CTA's
// threads as std::threads. A body is called by every thread of every CTA with its CtaIndex; it
// synchronises through `sync`, whose three members are
//   sync.cta()     every thread of this CTA has arrived, and their memory writes are visible
//                  (__syncthreads on a GPU);
//   sync.grid()    every thread of every CTA has arrived, writes visible (a cooperative-groups
//                  grid sync on a GPU);
//   sync.jitter()  nothing on a GPU; the host driver may yield the thread there, so that a
//                  missing synchronisation shows as a wrong result rather than going unseen.
//
// Semantics are the CPU reference's (src/ref/block_lstm.cc, src/ref/lstm_cell.cc), with its
// groupings and summation orders wherever a CTA count could otherwise change them, so results
// are bitwise the same for any number of CTAs and threads:
//   forward, step t < S, for each (n, gate column) of the CTA's slice:
//     gate = (xw[t][n, col] + Σ_{k = 0 … H−1} h[t−1][n, k]·w[I + k, col]) + b[col],
//     the sum in increasing k continuing xw's sum over the x rows (an input projection
//     computed as Σ_{k < I} in increasing k from 0, as the reference's product over [x, h]
//     does), then the pointwise cell; one grid barrier per step (h[t] complete).
//   backward, step t = S−1 … 0:
//     phase A (own units): the cell's pointwise backward from carry + d_h[t], carry_cs + d_cs[t];
//       writes d_gates[t] (own columns) and the new carry_cs (own units); grid barrier;
//     phase B (own units): carry_h[n, j] = Σ_g d_gates[t][n, g]·w[I + j, g] as a split-K over
//       the 4H gate columns in chunks of `k_chunk` columns (each chunk summed in increasing g
//       from 0, the chunks' partials then added in increasing chunk order): an order set by H
//       and k_chunk only; with k_chunk ≥ 4H it is the reference's sequential sum. Also the
//       own columns' db += Σ_n d_gates[t][n, ·] and the own units' peephole gradients, each
//       step's batch sum (increasing n from 0) added into the total from the last step on: the
//       reference's order.
//   d_x and d_w are products over all steps, computed after the loop by the caller (one GEMM
//   each), as is the input projection xw before the forward's loop.
// No atomics anywhere: the only cross-CTA communication is through the grid barrier.
//
// Shape letters: T time steps, B batch, I input size, H cell size, S = seq_len_max, G = 4H.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/qualifiers.h"
#include "kernel/block_lstm.h"

namespace blockrnn::cuda::persistent {

using i64 = std::int64_t;

// Which CTA and thread is running: CTA `cta` of `ctas`, thread `tid` of `threads` in it.
struct CtaIndex {
  i64 cta, ctas, tid, threads;
};

// The hidden units of one CTA: [begin, begin + count), the slices of H units over `ctas` CTAs
// as even as integer division makes them (H = 37 over 4 CTAs: 9, 9, 9, 10 units).
struct UnitSlice {
  i64 begin, count;
};
__host__ __device__ inline UnitSlice unit_slice(i64 H, i64 ctas, i64 cta) {
  const i64 begin = cta * H / ctas, end = (cta + 1) * H / ctas;
  return {begin, end - begin};
}
// The most units any CTA owns: ⌈H / ctas⌉.
__host__ __device__ inline i64 max_units(i64 H, i64 ctas) {
  return (H + ctas - 1) / ctas;
}
// Elements of a CTA's resident weight slice, forward and backward alike: H rows × 4 columns per
// owned unit (the forward's w_h columns), or 4H columns × one row per owned unit (the backward's).
__host__ __device__ inline i64 resident_elems(i64 H, i64 ctas) {
  return 4 * H * max_units(H, ctas);
}
// Chunks of the backward's split-K over the 4H gate columns.
__host__ __device__ inline i64 k_chunks(i64 H, i64 k_chunk) {
  return (4 * H + k_chunk - 1) / k_chunk;
}

// The column-block index of each gate (multiply by H for its first column) in the layout
// (kernel/lstm_cell.h's LSTMGateBlocks: ICFO {0, 1, 2, 3}, IFCO {0, 2, 1, 3}); of(q) for the
// logical gate q = 0 (i), 1 (c), 2 (f), 3 (o). Named fields, not an array: a kernel parameter's
// array indexed at run time would be copied to local memory on a GPU.
struct GateCols {
  i64 i, c, f, o;
  __host__ __device__ i64 of(i64 q) const { return q == 0 ? i : (q == 1 ? c : (q == 2 ? f : o)); }
};

inline GateCols gate_cols(LSTMLayout layout) {
  const LSTMGateBlocks b = lstm_gate_blocks(layout);
  return {b.i, b.c, b.f, b.o};
}

// ---- scalar helpers: the reference's activations (src/core/activations.h) ----

__host__ __device__ inline float act_exp(float z) {
  return expf(z);
}
__host__ __device__ inline double act_exp(double z) {
  return exp(z);
}
__host__ __device__ inline float act_tanh(float z) {
  return tanhf(z);
}
__host__ __device__ inline double act_tanh(double z) {
  return tanh(z);
}
template <typename T>
__host__ __device__ inline T act_sigmoid(T z) {
  return T(1) / (T(1) + act_exp(-z));
}
// std::min(std::max(cs, −clip), clip), NaN behaviour included (a NaN cs stays NaN).
template <typename T>
__host__ __device__ inline T clip_cell(T cs, T clip) {
  const T lo = (cs < -clip) ? -clip : cs;
  return (clip < lo) ? clip : lo;
}

// ---- forward ----

template <typename T>
struct FwdParams {
  i64 S, B, I, H;
  const T* w;                       // [I+H, 4H]; rows I … I+H−1 are w_h
  const T* b;                       // [4H]
  const T *wci, *wcf, *wco;         // [H] each (read only when use_peephole)
  const T *cs_prev, *h_prev;        // [B, H]
  T* gates;                         // [S, B, 4H]: in, x[t]·w_x; overwritten with the gates
  T *i, *cs, *f, *o, *ci, *co, *h;  // [T, B, H] each; steps t < S written here
  T forget_bias, cell_clip;
  bool use_peephole;
  GateCols cols;
};

// The forward's time loop, run by every thread of every CTA. `resident` is the CTA's own
// buffer of resident_elems(H, ctas) elements (shared memory on a GPU).
template <typename T, typename Sync>
__host__ __device__ void lstm_fwd_cta(const FwdParams<T>& p, const CtaIndex& c, T* resident,
                                      Sync& sync) {
  const i64 B = p.B, I = p.I, H = p.H, G = 4 * H, BH = B * H;
  const UnitSlice u = unit_slice(H, c.ctas, c.cta);
  const i64 hp = u.count, cw = 4 * hp;  // owned units, owned gate columns
  // resident[k·cw + q·hp + jj] = w[I + k, block(q)·H + begin + jj]
  for (i64 e = c.tid; e < H * cw; e += c.threads) {
    const i64 k = e / cw, q = (e % cw) / hp, jj = e % hp;
    resident[e] = p.w[(I + k) * G + p.cols.of(q) * H + u.begin + jj];
  }
  sync.cta();
  const bool clip = p.cell_clip > T(0);
  for (i64 t = 0; t < p.S; ++t) {
    const T* hprev = t == 0 ? p.h_prev : p.h + (t - 1) * BH;
    const T* csprev = t == 0 ? p.cs_prev : p.cs + (t - 1) * BH;
    T* g = p.gates + t * B * G;
    // Gates of the own columns: continue x[t]·w_x's sum with the h[t−1] rows, then add b.
    for (i64 e = c.tid; e < B * cw; e += c.threads) {
      const i64 n = e / cw, lc = e % cw, q = lc / hp, jj = lc % hp;
      const i64 col = p.cols.of(q) * H + u.begin + jj;
      T acc = g[n * G + col];
      for (i64 k = 0; k < H; ++k) acc += hprev[n * H + k] * resident[k * cw + lc];
      g[n * G + col] = acc + p.b[col];
      sync.jitter();
    }
    sync.cta();  // a unit's four gates may come from four threads
    for (i64 e = c.tid; e < B * hp; e += c.threads) {
      const i64 n = e / hp, j = u.begin + e % hp, x = t * BH + n * H + j;
      const T* gn = g + n * G;
      const T g_i = gn[p.cols.i * H + j], g_c = gn[p.cols.c * H + j];
      const T g_f = gn[p.cols.f * H + j], g_o = gn[p.cols.o * H + j];
      const T csp = csprev[n * H + j];
      const T i = act_sigmoid(p.use_peephole ? g_i + csp * p.wci[j] : g_i);
      const T ci = act_tanh(g_c);
      const T f = act_sigmoid(p.use_peephole ? (g_f + p.forget_bias) + csp * p.wcf[j]
                                             : g_f + p.forget_bias);
      T cs = i * ci + f * csp;
      if (clip) cs = clip_cell(cs, p.cell_clip);
      const T co = act_tanh(cs);
      const T o = act_sigmoid(p.use_peephole ? g_o + cs * p.wco[j] : g_o);
      p.i[x] = i;
      p.cs[x] = cs;
      p.f[x] = f;
      p.o[x] = o;
      p.ci[x] = ci;
      p.co[x] = co;
      sync.jitter();
      p.h[x] = o * co;
    }
    sync.grid();  // h[t] and cs[t] complete before any CTA starts step t + 1
  }
}

// ---- backward ----

template <typename T>
struct BwdParams {
  i64 S, B, I, H;
  i64 k_chunk;                        // the split-K chunk over the 4H gate columns
  const T* w;                         // [I+H, 4H]
  const T *wci, *wcf, *wco;           // [H] each (read only when use_peephole)
  const T* cs_prev;                   // [B, H]
  const T *i, *cs, *f, *o, *ci, *co;  // [T, B, H] each, forward outputs
  const T *d_cs, *d_h;                // [T, B, H] each
  T* d_gates;                         // [S, B, 4H] out
  T* partial;                         // [B, H, k_chunks(H, k_chunk)] workspace
  T *carry_cs, *carry_h;              // [B, H] out: d_cs_prev and d_h_prev
  T* d_b;                             // [4H] out
  T *d_wci, *d_wcf, *d_wco;           // [H] each, out (zeros without peepholes)
  bool use_peephole;
  GateCols cols;
};

// The backward's time loop and the reductions that follow the steps (db, peephole gradients),
// run by every thread of every CTA; `resident` as in lstm_fwd_cta.
template <typename T, typename Sync>
__host__ __device__ void lstm_bwd_cta(const BwdParams<T>& p, const CtaIndex& c, T* resident,
                                      Sync& sync) {
  const i64 B = p.B, I = p.I, H = p.H, G = 4 * H, BH = B * H;
  const UnitSlice u = unit_slice(H, c.ctas, c.cta);
  const i64 hp = u.count, cw = 4 * hp;
  const i64 kc = p.k_chunk, nk = k_chunks(H, kc);
  // resident[jj·G + g] = w[I + begin + jj, g]: the own units' rows of w_h (columns of w_hᵀ).
  for (i64 e = c.tid; e < hp * G; e += c.threads) {
    resident[e] = p.w[(I + u.begin + e / G) * G + e % G];
  }
  // The carried gradients and the parameter sums of the own units and columns start at 0.
  for (i64 e = c.tid; e < B * hp; e += c.threads) {
    const i64 x = (e / hp) * H + u.begin + e % hp;
    p.carry_cs[x] = T(0);
    p.carry_h[x] = T(0);
  }
  for (i64 e = c.tid; e < cw; e += c.threads) {
    p.d_b[p.cols.of(e / hp) * H + u.begin + e % hp] = T(0);
  }
  for (i64 e = c.tid; e < hp; e += c.threads) {
    p.d_wci[u.begin + e] = T(0);
    p.d_wcf[u.begin + e] = T(0);
    p.d_wco[u.begin + e] = T(0);
  }
  sync.cta();
  for (i64 t = p.S - 1; t >= 0; --t) {
    const i64 o0 = t * BH;
    const T* csprev = t == 0 ? p.cs_prev : p.cs + o0 - BH;
    T* dg = p.d_gates + t * B * G;
    // Phase A: the cell's pointwise backward for the own units.
    for (i64 e = c.tid; e < B * hp; e += c.threads) {
      const i64 n = e / hp, j = u.begin + e % hp, x = n * H + j;
      const T i = p.i[o0 + x], f = p.f[o0 + x], o = p.o[o0 + x];
      const T ci = p.ci[o0 + x], co = p.co[o0 + x];
      const T hg = p.carry_h[x] + p.d_h[o0 + x];
      const T csg = p.carry_cs[x] + p.d_cs[o0 + x];
      const T d_o = ((o * (T(1) - o)) * hg) * co;
      T dcs = ((T(1) - co * co) * hg) * o + csg;
      if (p.use_peephole) dcs = dcs + d_o * p.wco[j];
      const T dci = ((T(1) - ci * ci) * dcs) * i;
      const T df = ((f * (T(1) - f)) * dcs) * csprev[x];
      const T di = ((i * (T(1) - i)) * dcs) * ci;
      dg[n * G + p.cols.i * H + j] = di;
      dg[n * G + p.cols.c * H + j] = dci;
      dg[n * G + p.cols.f * H + j] = df;
      dg[n * G + p.cols.o * H + j] = d_o;
      sync.jitter();
      T cpg = dcs * f;
      if (p.use_peephole) cpg = (cpg + di * p.wci[j]) + df * p.wcf[j];
      p.carry_cs[x] = cpg;
    }
    sync.grid();  // d_gates[t] complete: every CTA's phase B reads all 4H columns
    // Phase B1: the split-K partials of carry_h = d_gates[t]·w_hᵀ for the own units.
    for (i64 e = c.tid; e < B * hp * nk; e += c.threads) {
      const i64 n = e / (hp * nk), jj = (e / nk) % hp, k = e % nk;
      const i64 g_end = (k + 1) * kc < G ? (k + 1) * kc : G;
      T acc = T(0);
      for (i64 g = k * kc; g < g_end; ++g) acc += dg[n * G + g] * resident[jj * G + g];
      p.partial[(n * H + u.begin + jj) * nk + k] = acc;
      sync.jitter();
    }
    // The own columns' db and the own units' peephole gradients: this step's batch sums.
    for (i64 e = c.tid; e < cw; e += c.threads) {
      const i64 col = p.cols.of(e / hp) * H + u.begin + e % hp;
      T s = T(0);
      for (i64 n = 0; n < B; ++n) s += dg[n * G + col];
      p.d_b[col] += s;
    }
    if (p.use_peephole) {
      for (i64 e = c.tid; e < hp; e += c.threads) {
        const i64 j = u.begin + e;
        T sci = T(0), scf = T(0), sco = T(0);
        for (i64 n = 0; n < B; ++n) {
          sci += dg[n * G + p.cols.i * H + j] * csprev[n * H + j];
          scf += dg[n * G + p.cols.f * H + j] * csprev[n * H + j];
          sco += dg[n * G + p.cols.o * H + j] * p.cs[o0 + n * H + j];
        }
        p.d_wci[j] += sci;
        p.d_wcf[j] += scf;
        p.d_wco[j] += sco;
      }
    }
    sync.cta();  // a unit's partials may come from several threads
    // Phase B2: the partials in increasing chunk order.
    for (i64 e = c.tid; e < B * hp; e += c.threads) {
      const i64 x = (e / hp) * H + u.begin + e % hp;
      T s = p.partial[x * nk];
      for (i64 k = 1; k < nk; ++k) s += p.partial[x * nk + k];
      p.carry_h[x] = s;
    }
    // No barrier before phase A of step t − 1: phases A and B2 visit the same (n, unit)
    // elements with the same thread mapping, so each thread reads only its own carry_h and
    // carry_cs writes.
  }
}

// ---- the bodies' parameters from the kernel arguments (host code) ----

// `gates`: the [S, B, 4H] workspace holding x[t]·w_x for t < S.
template <typename T>
FwdParams<T> fwd_params(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a, T* gates) {
  FwdParams<T> p{};
  p.S = d.seq_len_max;
  p.B = d.B;
  p.I = d.I;
  p.H = d.H;
  p.w = a.w;
  p.b = a.b;
  p.wci = a.wci;
  p.wcf = a.wcf;
  p.wco = a.wco;
  p.cs_prev = a.cs_prev;
  p.h_prev = a.h_prev;
  p.gates = gates;
  p.i = a.i;
  p.cs = a.cs;
  p.f = a.f;
  p.o = a.o;
  p.ci = a.ci;
  p.co = a.co;
  p.h = a.h;
  p.forget_bias = a.forget_bias;
  p.cell_clip = a.cell_clip;
  p.use_peephole = a.use_peephole;
  p.cols = gate_cols(a.layout);
  return p;
}

// `d_gates`: a [S, B, 4H] workspace; `partial`: [B, H, k_chunks(H, k_chunk)]. The carried
// gradients are kept in the outputs d_cs_prev and d_h_prev.
template <typename T>
BwdParams<T> bwd_params(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a, i64 k_chunk,
                        T* d_gates, T* partial) {
  BwdParams<T> p{};
  p.S = d.seq_len_max;
  p.B = d.B;
  p.I = d.I;
  p.H = d.H;
  p.k_chunk = k_chunk;
  p.w = a.w;
  p.wci = a.wci;
  p.wcf = a.wcf;
  p.wco = a.wco;
  p.cs_prev = a.cs_prev;
  p.i = a.i;
  p.cs = a.cs;
  p.f = a.f;
  p.o = a.o;
  p.ci = a.ci;
  p.co = a.co;
  p.d_cs = a.d_cs;
  p.d_h = a.d_h;
  p.d_gates = d_gates;
  p.partial = partial;
  p.carry_cs = a.d_cs_prev;
  p.carry_h = a.d_h_prev;
  p.d_b = a.d_b;
  p.d_wci = a.d_wci;
  p.d_wcf = a.d_wcf;
  p.d_wco = a.d_wco;
  p.use_peephole = a.use_peephole;
  p.cols = gate_cols(a.layout);
  return p;
}

}  // namespace blockrnn::cuda::persistent
