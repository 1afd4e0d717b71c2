// Fused element-wise stages of the GRU block cell, one batch row at a time, shared by the cell
// (src/cpu/gru_cell.cc) and the sequence op BlockGRU(Grad) (src/cpu/block_gru.cc). The callers
// do the GEMMs and split the batch rows over threads; these kernels touch one row of H (or 2H)
// elements and are written so the compiler vectorises the inner loops.
//
// Shape letters: H cell size. Row pointers: a row of a [B, H] tensor is H contiguous values, a
// row of a [B, 2H] gate tensor is [r-block | u-block]. Groupings are TensorFlow's (docs/ops.md,
// §3.2):
//   forward, gates:      r = σ(ru_bar[:H] + b_r);  u = σ(ru_bar[H:] + b_u);  hr = h_prev⊙r
//   forward, candidate:  c = tanh(c_bar + b_c);    h = u⊙(h_prev − c) + c
//   backward, c and u:   d_c_bar = (d_h⊙(1−u))⊙(1−c⊙c);  d_u_bar = ((d_h⊙(h_prev−c))⊙u)⊙(1−u)
//   backward, r:         d_r_bar = ((d_hr⊙h_prev)⊙r)⊙(1−r)
//   backward, h_prev:    d_h_prev = (g + d_hr⊙r) + d_h⊙u     (g = d_ru·w_ru_hᵀ row)
// Derivatives use the stored gate values r, u, c, never recomputed pre-activations.
//
// The reset-after GRU (BlockGRUResetAfter(Grad), src/cpu/block_gru_reset_after.cc; gate blocks
// [r | z | n] of a [3H] row, u = PyTorch's z), groupings as src/ref/block_gru_reset_after.cc:
//   forward:   hn = gh_n + b_h_n;  r = σ((gi_r + b_i_r) + (gh_r + b_h_r));  u likewise;
//              n = tanh((gi_n + b_i_n) + r⊙hn);  h = u⊙h_prev + (1−u)⊙n
//   backward:  d_h = carry + d_h;  d_n_bar = (d_h⊙(1−u))⊙(1−n⊙n);
//              d_u_bar = ((d_h⊙(h_prev−n))⊙u)⊙(1−u);  d_r_bar = ((d_n_bar⊙hn)⊙r)⊙(1−r);
//              d_hn = d_n_bar⊙r;  carry = d_h⊙u   (the caller adds d_gh·w_hᵀ)
#pragma once

#include <cstdint>

#include <type_traits>

#include "cpu/fast_math.h"
#include "cpu/pointwise_dispatch.h"

namespace blockrnn::cpu {
namespace detail {

// r, u and h_prev⊙r of n columns of one row from the gate pre-activations without bias: the
// r pre-activations at ru_bar[j], the u ones at ru_bar[H + j] (likewise b_ru).
template <typename T>
inline void gru_fwd_gates_row_generic(std::int64_t n, std::int64_t H, const T* ru_bar /* [2H] */,
                                      const T* b_ru /* [2H] */, const T* h_prev /* [H] */,
                                      T* r /* [H] */, T* u /* [H] */, T* hr /* [H] */) {
#pragma GCC ivdep
  for (std::int64_t j = 0; j < n; ++j) {
    const T rj = act_sigmoid(ru_bar[j] + b_ru[j]);
    r[j] = rj;
    u[j] = act_sigmoid(ru_bar[H + j] + b_ru[H + j]);
    hr[j] = h_prev[j] * rj;
  }
}

// c and h of one row. `c` holds the candidate pre-activation without bias on entry and the
// activated candidate on exit.
template <typename T>
inline void gru_fwd_candidate_row_generic(std::int64_t H, const T* b_c /* [H] */,
                                          const T* u /* [H] */, const T* h_prev /* [H] */,
                                          T* c /* [H] */, T* h /* [H] */) {
#pragma GCC ivdep
  for (std::int64_t j = 0; j < H; ++j) {
    const T cj = act_tanh(c[j] + b_c[j]);
    c[j] = cj;
    h[j] = u[j] * (h_prev[j] - cj) + cj;
  }
}

// d_c_bar and d_u_bar of one row (d_u_bar into the u-block of a [2H] row).
template <typename T>
inline void gru_bwd_cu_row_generic(std::int64_t H, const T* u /* [H] */, const T* c /* [H] */,
                                   const T* h_prev /* [H] */, const T* d_h /* [H] */,
                                   T* d_c_bar /* [H] */, T* d_u_bar /* [H] */) {
#pragma GCC ivdep
  for (std::int64_t j = 0; j < H; ++j) {
    const T uj = u[j], cj = c[j], dh = d_h[j];
    d_c_bar[j] = (dh * (T(1) - uj)) * (T(1) - cj * cj);
    d_u_bar[j] = ((dh * (h_prev[j] - cj)) * uj) * (T(1) - uj);
  }
}

// d_r_bar of one row (into the r-block of a [2H] row).
template <typename T>
inline void gru_bwd_r_row_generic(std::int64_t H, const T* d_hr /* [H] */,
                                  const T* h_prev /* [H] */, const T* r /* [H] */,
                                  T* d_r_bar /* [H] */) {
#pragma GCC ivdep
  for (std::int64_t j = 0; j < H; ++j) {
    const T rj = r[j];
    d_r_bar[j] = ((d_hr[j] * h_prev[j]) * rj) * (T(1) - rj);
  }
}

// d_h_prev of one row; `g` holds d_ru·w_ru_hᵀ on entry and d_h_prev on exit.
template <typename T>
inline void gru_bwd_h_prev_row_generic(std::int64_t H, const T* d_hr /* [H] */,
                                       const T* r /* [H] */, const T* d_h /* [H] */,
                                       const T* u /* [H] */, T* g /* [H] */) {
#pragma GCC ivdep
  for (std::int64_t j = 0; j < H; ++j) g[j] = (g[j] + d_hr[j] * r[j]) + d_h[j] * u[j];
}

// Reset-after GRU, forward, n columns of one row. gi: x·w_i row without bias (r at gi[j], z at
// gi[H + j], n at gi[2H + j]; likewise b_i, b_h); gh_rz: the r and z blocks of h_prev·w_h
// without bias (z at gh_rz[H + j]); hn: h_prev·w_h_n without bias on entry, plus b_h_n on exit.
template <typename T>
inline void gru_reset_after_fwd_row_generic(std::int64_t n, std::int64_t H, const T* gi /* [3H] */,
                                            const T* b_i /* [3H] */, const T* gh_rz /* [2H] */,
                                            const T* b_h /* [3H] */, const T* h_prev /* [H] */,
                                            T* r /* [H] */, T* u /* [H] */, T* nn /* [H] */,
                                            T* hn /* [H] */, T* h /* [H] */) {
#pragma GCC ivdep
  for (std::int64_t j = 0; j < n; ++j) {
    const T hnj = hn[j] + b_h[2 * H + j];
    const T rj = act_sigmoid((gi[j] + b_i[j]) + (gh_rz[j] + b_h[j]));
    const T uj = act_sigmoid((gi[H + j] + b_i[H + j]) + (gh_rz[H + j] + b_h[H + j]));
    const T nj = act_tanh((gi[2 * H + j] + b_i[2 * H + j]) + rj * hnj);
    r[j] = rj;
    u[j] = uj;
    hn[j] = hnj;
    nn[j] = nj;
    h[j] = uj * h_prev[j] + (T(1) - uj) * nj;
  }
}

// Reset-after GRU, backward, n columns of one row. carry: the gradient flowing into h from the
// later steps on entry, d_h⊙u on exit; d_gh: [d_r_bar | d_u_bar | d_hn] (blocks H apart).
template <typename T>
inline void gru_reset_after_bwd_row_generic(std::int64_t n, std::int64_t H, const T* r /* [H] */,
                                            const T* u /* [H] */, const T* nn /* [H] */,
                                            const T* hn /* [H] */, const T* h_prev /* [H] */,
                                            const T* d_h /* [H] */, T* carry /* [H] */,
                                            T* d_gh /* [3H] */, T* d_n_bar /* [H] */) {
#pragma GCC ivdep
  for (std::int64_t j = 0; j < n; ++j) {
    const T dh = carry[j] + d_h[j];
    const T rj = r[j], uj = u[j], nj = nn[j];
    const T dn = (dh * (T(1) - uj)) * (T(1) - nj * nj);
    d_gh[j] = ((dn * hn[j]) * rj) * (T(1) - rj);
    d_gh[H + j] = ((dh * (h_prev[j] - nj)) * uj) * (T(1) - uj);
    d_gh[2 * H + j] = dn * rj;
    d_n_bar[j] = dn;
    carry[j] = dh * uj;
  }
}

}  // namespace detail

// float32 rows run the table of the active ISA path (pointwise_dispatch.h), every other type
// the generic code the tables are compiled from.
//
// r, u and h_prev⊙r of n columns of one row, u's pre-activations H after r's (see the file
// header).
template <typename T>
inline void gru_fwd_gates_row(std::int64_t n, std::int64_t H, const T* ru_bar, const T* b_ru,
                              const T* h_prev, T* r, T* u, T* hr) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().gru_fwd_gates_row(n, H, ru_bar, b_ru, h_prev, r, u, hr);
  } else {
    detail::gru_fwd_gates_row_generic(n, H, ru_bar, b_ru, h_prev, r, u, hr);
  }
}

// c and h of one row; `c` holds the candidate pre-activation without bias on entry.
template <typename T>
inline void gru_fwd_candidate_row(std::int64_t H, const T* b_c, const T* u, const T* h_prev, T* c,
                                  T* h) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().gru_fwd_candidate_row(H, b_c, u, h_prev, c, h);
  } else {
    detail::gru_fwd_candidate_row_generic(H, b_c, u, h_prev, c, h);
  }
}

// d_c_bar and d_u_bar of one row.
template <typename T>
inline void gru_bwd_cu_row(std::int64_t H, const T* u, const T* c, const T* h_prev, const T* d_h,
                           T* d_c_bar, T* d_u_bar) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().gru_bwd_cu_row(H, u, c, h_prev, d_h, d_c_bar, d_u_bar);
  } else {
    detail::gru_bwd_cu_row_generic(H, u, c, h_prev, d_h, d_c_bar, d_u_bar);
  }
}

// d_r_bar of one row.
template <typename T>
inline void gru_bwd_r_row(std::int64_t H, const T* d_hr, const T* h_prev, const T* r, T* d_r_bar) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().gru_bwd_r_row(H, d_hr, h_prev, r, d_r_bar);
  } else {
    detail::gru_bwd_r_row_generic(H, d_hr, h_prev, r, d_r_bar);
  }
}

// d_h_prev of one row; `g` holds d_ru·w_ru_hᵀ on entry and d_h_prev on exit.
template <typename T>
inline void gru_bwd_h_prev_row(std::int64_t H, const T* d_hr, const T* r, const T* d_h, const T* u,
                               T* g) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().gru_bwd_h_prev_row(H, d_hr, r, d_h, u, g);
  } else {
    detail::gru_bwd_h_prev_row_generic(H, d_hr, r, d_h, u, g);
  }
}

// Reset-after GRU, forward, n columns of one row (see the generic kernel).
template <typename T>
inline void gru_reset_after_fwd_row(std::int64_t n, std::int64_t H, const T* gi, const T* b_i,
                                    const T* gh_rz, const T* b_h, const T* h_prev, T* r, T* u,
                                    T* nn, T* hn, T* h) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().gru_reset_after_fwd_row(n, H, gi, b_i, gh_rz, b_h, h_prev, r, u, nn, hn, h);
  } else {
    detail::gru_reset_after_fwd_row_generic(n, H, gi, b_i, gh_rz, b_h, h_prev, r, u, nn, hn, h);
  }
}

// Reset-after GRU, backward, n columns of one row (see the generic kernel).
template <typename T>
inline void gru_reset_after_bwd_row(std::int64_t n, std::int64_t H, const T* r, const T* u,
                                    const T* nn, const T* hn, const T* h_prev, const T* d_h,
                                    T* carry, T* d_gh, T* d_n_bar) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().gru_reset_after_bwd_row(n, H, r, u, nn, hn, h_prev, d_h, carry, d_gh, d_n_bar);
  } else {
    detail::gru_reset_after_bwd_row_generic(n, H, r, u, nn, hn, h_prev, d_h, carry, d_gh, d_n_bar);
  }
}

}  // namespace blockrnn::cpu
