// Fused element-wise stages of the GRU block cell, one batch row at a time, shared by the cell
// (src/cpu/gru_cell.cc) and the sequence op BlockGRU(Grad) (src/cpu/block_gru.cc). The callers
// do the GEMMs and split the batch rows over threads; these kernels touch one row of H (or 2H)
// elements and are written so the compiler vectorises the inner loops.
//
// Shape letters: H cell size. Row pointers: a row of a [B, H] tensor is H contiguous values, a
// row of a [B, 2H] gate tensor is [r-block | u-block]. Groupings are TensorFlow's (SPEC §2.2,
// §3.2):
//   forward, gates:      r = σ(ru_bar[:H] + b_r);  u = σ(ru_bar[H:] + b_u);  hr = h_prev⊙r
//   forward, candidate:  c = tanh(c_bar + b_c);    h = u⊙(h_prev − c) + c
//   backward, c and u:   d_c_bar = (d_h⊙(1−u))⊙(1−c⊙c);  d_u_bar = ((d_h⊙(h_prev−c))⊙u)⊙(1−u)
//   backward, r:         d_r_bar = ((d_hr⊙h_prev)⊙r)⊙(1−r)
//   backward, h_prev:    d_h_prev = (g + d_hr⊙r) + d_h⊙u     (g = d_ru·w_ru_hᵀ row)
// Derivatives use the stored gate values r, u, c, never recomputed pre-activations.
#pragma once

#include <cstdint>

#include "core/activations.h"

namespace blockrnn::cpu {

// r, u and h_prev⊙r of one row from the gate pre-activations without bias.
template <typename T>
inline void gru_fwd_gates_row(std::int64_t H, const T* ru_bar /* [2H] */, const T* b_ru /* [2H] */,
                              const T* h_prev /* [H] */, T* r /* [H] */, T* u /* [H] */,
                              T* hr /* [H] */) {
  for (std::int64_t j = 0; j < H; ++j) {
    const T rj = core::sigmoid(ru_bar[j] + b_ru[j]);
    r[j] = rj;
    u[j] = core::sigmoid(ru_bar[H + j] + b_ru[H + j]);
    hr[j] = h_prev[j] * rj;
  }
}

// c and h of one row. `c` holds the candidate pre-activation without bias on entry and the
// activated candidate on exit.
template <typename T>
inline void gru_fwd_candidate_row(std::int64_t H, const T* b_c /* [H] */, const T* u /* [H] */,
                                  const T* h_prev /* [H] */, T* c /* [H] */, T* h /* [H] */) {
  for (std::int64_t j = 0; j < H; ++j) {
    const T cj = core::tanh_act(c[j] + b_c[j]);
    c[j] = cj;
    h[j] = u[j] * (h_prev[j] - cj) + cj;
  }
}

// d_c_bar and d_u_bar of one row (d_u_bar into the u-block of a [2H] row).
template <typename T>
inline void gru_bwd_cu_row(std::int64_t H, const T* u /* [H] */, const T* c /* [H] */,
                           const T* h_prev /* [H] */, const T* d_h /* [H] */, T* d_c_bar /* [H] */,
                           T* d_u_bar /* [H] */) {
  for (std::int64_t j = 0; j < H; ++j) {
    const T uj = u[j], cj = c[j], dh = d_h[j];
    d_c_bar[j] = (dh * (T(1) - uj)) * (T(1) - cj * cj);
    d_u_bar[j] = ((dh * (h_prev[j] - cj)) * uj) * (T(1) - uj);
  }
}

// d_r_bar of one row (into the r-block of a [2H] row).
template <typename T>
inline void gru_bwd_r_row(std::int64_t H, const T* d_hr /* [H] */, const T* h_prev /* [H] */,
                          const T* r /* [H] */, T* d_r_bar /* [H] */) {
  for (std::int64_t j = 0; j < H; ++j) {
    const T rj = r[j];
    d_r_bar[j] = ((d_hr[j] * h_prev[j]) * rj) * (T(1) - rj);
  }
}

// d_h_prev of one row; `g` holds d_ru·w_ru_hᵀ on entry and d_h_prev on exit.
template <typename T>
inline void gru_bwd_h_prev_row(std::int64_t H, const T* d_hr /* [H] */, const T* r /* [H] */,
                               const T* d_h /* [H] */, const T* u /* [H] */, T* g /* [H] */) {
  for (std::int64_t j = 0; j < H; ++j) g[j] = (g[j] + d_hr[j] * r[j]) + d_h[j] * u[j];
}

}  // namespace blockrnn::cpu
