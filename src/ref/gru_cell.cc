// Reference GRU block cell: plain loops, the executable form of docs/ops.md.
//
//   xh      = [x, h_prev]                      [B, I+H]
//   ru_bar  = xh·w_ru  (rounded), then + b_ru  [B, 2H]
//   r, u    = σ(ru_bar[:, :H]), σ(ru_bar[:, H:])
//   xhr     = [x, h_prev⊙r]
//   c       = tanh(xhr·w_c (rounded) + b_c)
//   h       = u⊙(h_prev − c) + c
// Backward (groupings as TensorFlow evaluates them):
//   d_c_bar = (d_h⊙(1−u))⊙(1−c⊙c);  d_u_bar = ((d_h⊙(h_prev−c))⊙u)⊙(1−u)
//   G2 = d_c_bar·w_cᵀ;  d_hr = G2[:, I:];  d_r_bar = ((d_hr⊙h_prev)⊙r)⊙(1−r)
//   G1 = d_r_bar_u_bar·w_ruᵀ;  d_x = G1[:, :I] + G2[:, :I]
//   d_h_prev = (G1[:, I:] + d_hr⊙r) + d_h⊙u
//   d_w_ru = xhᵀ·d_r_bar_u_bar;  d_w_c = xhrᵀ·d_c_bar;  d_b = Σ_b d_(gate)
#include "kernel/gru_cell.h"

#include <vector>

#include "core/activations.h"
#include "ref/ref_linalg.h"

namespace blockrnn::ref {

template <typename T>
void gru_cell_fwd(const GRUDims& d, const GRUCellFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, K = I + H;
  const std::vector<T> xh = concat_cols(B, I, a.x, H, a.h_prev);
  std::vector<T> ru_bar(B * 2 * H);
  matmul(B, 2 * H, K, xh.data(), a.w_ru, ru_bar.data());
  std::vector<T> hr(B * H);
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t j = 0; j < H; ++j) {
      const T r = core::sigmoid(ru_bar[n * 2 * H + j] + a.b_ru[j]);
      const T u = core::sigmoid(ru_bar[n * 2 * H + H + j] + a.b_ru[H + j]);
      a.r[n * H + j] = r;
      a.u[n * H + j] = u;
      hr[n * H + j] = a.h_prev[n * H + j] * r;
    }
  }
  const std::vector<T> xhr = concat_cols(B, I, a.x, H, hr.data());
  std::vector<T> c_bar(B * H);
  matmul(B, H, K, xhr.data(), a.w_c, c_bar.data());
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t j = 0; j < H; ++j) {
      const T c = core::tanh_act(c_bar[n * H + j] + a.b_c[j]);
      const T u = a.u[n * H + j];
      a.c[n * H + j] = c;
      a.h[n * H + j] = u * (a.h_prev[n * H + j] - c) + c;
    }
  }
}

template <typename T>
void gru_cell_bwd(const GRUDims& d, const GRUCellBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, K = I + H;
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t j = 0; j < H; ++j) {
      const std::int64_t e = n * H + j;
      const T u = a.u[e], c = a.c[e], dh = a.d_h[e];
      a.d_c_bar[e] = (dh * (T(1) - u)) * (T(1) - c * c);
      a.d_r_bar_u_bar[n * 2 * H + H + j] = ((dh * (a.h_prev[e] - c)) * u) * (T(1) - u);
    }
  }
  std::vector<T> g2(B * K);
  matmul_bt(B, K, H, a.d_c_bar, a.w_c, g2.data());  // d_c_bar·w_cᵀ  [B, I+H]
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t j = 0; j < H; ++j) {
      const T d_hr = g2[n * K + I + j];
      const T r = a.r[n * H + j];
      a.d_r_bar_u_bar[n * 2 * H + j] = ((d_hr * a.h_prev[n * H + j]) * r) * (T(1) - r);
    }
  }
  std::vector<T> g1(B * K);
  matmul_bt(B, K, 2 * H, a.d_r_bar_u_bar, a.w_ru, g1.data());  // d_ru·w_ruᵀ  [B, I+H]
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t k = 0; k < I; ++k) a.d_x[n * I + k] = g1[n * K + k] + g2[n * K + k];
    for (std::int64_t j = 0; j < H; ++j) {
      const std::int64_t e = n * H + j;
      a.d_h_prev[e] = (g1[n * K + I + j] + g2[n * K + I + j] * a.r[e]) + a.d_h[e] * a.u[e];
    }
  }
  if (!a.full) return;
  const std::vector<T> xh = concat_cols(B, I, a.x, H, a.h_prev);
  std::vector<T> hr(B * H);
  for (std::int64_t e = 0; e < B * H; ++e) hr[e] = a.h_prev[e] * a.r[e];
  const std::vector<T> xhr = concat_cols(B, I, a.x, H, hr.data());
  matmul_at(K, 2 * H, B, xh.data(), a.d_r_bar_u_bar, a.d_w_ru);  // xhᵀ·d_ru   [I+H, 2H]
  matmul_at(K, H, B, xhr.data(), a.d_c_bar, a.d_w_c);            // xhrᵀ·d_c  [I+H, H]
  column_sums(B, 2 * H, a.d_r_bar_u_bar, a.d_b_ru);              // d_b_ru = Σ_b d_r_bar_u_bar
  column_sums(B, H, a.d_c_bar, a.d_b_c);                         // d_b_c  = Σ_b d_c_bar
}

template void gru_cell_fwd<float>(const GRUDims&, const GRUCellFwdArgs<float>&);
template void gru_cell_fwd<double>(const GRUDims&, const GRUCellFwdArgs<double>&);
template void gru_cell_bwd<float>(const GRUDims&, const GRUCellBwdArgs<float>&);
template void gru_cell_bwd<double>(const GRUDims&, const GRUCellBwdArgs<double>&);

}  // namespace blockrnn::ref
