// Reference BlockGRUResetAfter and BlockGRUResetAfterGrad: plain loops, one step at a time, the
// executable form of the equations in src/ref/block_gru_reset_after.h (which the fast path of
// src/cpu/block_gru_reset_after.cc is tested against).
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max; gate blocks [r | z | n].
// Groupings (the fast path's element-wise kernels use the same ones):
//   r = σ((x·w_i_r + b_i_r) + (hp·w_h_r + b_h_r))      (likewise u)
//   hn = hp·w_h_n + b_h_n;  n = tanh((x·w_i_n + b_i_n) + r⊙hn);  h = u⊙hp + (1−u)⊙n
//   d_h_prev = d_gh·w_hᵀ + d_h⊙u
// The parameter gradients are summed over the steps in the order t = S−1 … 0.
#include "kernel/block_gru_reset_after.h"

#include <algorithm>
#include <vector>

#include "core/activations.h"
#include "ref/per_example.h"
#include "ref/ref_linalg.h"
#include "ref/time_steps.h"

namespace blockrnn::ref {

template <typename T>
void block_gru_reset_after_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a) {
  using A = BlockGRUResetAfterFwdArgs<T>;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    return each_example<T>(d, a, block_gru_reset_after_fwd<T>,
                           {&A::r, &A::u, &A::n, &A::hn, &A::h});
  }
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H, H3 = 3 * H;
  std::vector<T> gi(B * H3), gh(B * H3);
  auto step = [&](std::int64_t t) {
    const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;  // [B, H]
    matmul(B, H3, I, a.x + t * B * I, a.w_i, gi.data());   // x[t]·w_i  [B, 3H]
    matmul(B, H3, H, hp, a.w_h, gh.data());                // hp·w_h    [B, 3H]
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t j = 0; j < H; ++j) {
        const T* gi_b = gi.data() + b * H3;
        const T* gh_b = gh.data() + b * H3;
        const std::int64_t o = t * BH + b * H + j;
        const T r = core::sigmoid((gi_b[j] + a.b_i[j]) + (gh_b[j] + a.b_h[j]));
        const T u = core::sigmoid((gi_b[H + j] + a.b_i[H + j]) + (gh_b[H + j] + a.b_h[H + j]));
        const T hn = gh_b[2 * H + j] + a.b_h[2 * H + j];
        const T n = core::tanh_act((gi_b[2 * H + j] + a.b_i[2 * H + j]) + r * hn);
        a.r[o] = r;
        a.u[o] = u;
        a.hn[o] = hn;
        a.n[o] = n;
        a.h[o] = u * hp[b * H + j] + (T(1) - u) * n;
      }
    }
  };
  forward_steps<T>("BlockGRUResetAfter", d.T, d.seq_len_max, BH, {a.r, a.u, a.n, a.hn, a.h}, step);
}

template <typename T>
void block_gru_reset_after_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H, H3 = 3 * H;
  if (run_without_unwanted_grads<T>(block_gru_reset_after_bwd<T>, d, a)) return;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    using A = BlockGRUResetAfterBwdArgs<T>;
    return each_example<T>(
        d, a, block_gru_reset_after_bwd<T>, {&A::r, &A::u, &A::n, &A::hn, &A::h, &A::d_h},
        {{&A::d_w_i, I * H3}, {&A::d_w_h, H * H3}, {&A::d_b_i, H3}, {&A::d_b_h, H3}});
  }
  std::fill(a.d_x, a.d_x + d.T * B * I, T(0));
  StepSum<T> d_w_i(a.d_w_i, I * H3), d_w_h(a.d_w_h, H * H3), d_b_i(a.d_b_i, H3), d_b_h(a.d_b_h, H3);
  std::vector<T> carry(BH, T(0)), d_h(BH), d_gi(B * H3), d_gh(B * H3), g(BH);
  auto step = [&](std::int64_t t) {
    const std::int64_t o = t * BH;
    const T* hp = t == 0 ? a.h_prev : a.h + o - BH;  // [B, H]
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t j = 0; j < H; ++j) {
        const std::int64_t e = b * H + j;
        const T dh = carry[e] + a.d_h[o + e];
        const T r = a.r[o + e], u = a.u[o + e], n = a.n[o + e], hn = a.hn[o + e];
        const T d_n_bar = (dh * (T(1) - u)) * (T(1) - n * n);
        const T d_u_bar = ((dh * (hp[e] - n)) * u) * (T(1) - u);
        const T d_r_bar = ((d_n_bar * hn) * r) * (T(1) - r);
        d_h[e] = dh;
        d_gi[b * H3 + j] = d_gh[b * H3 + j] = d_r_bar;
        d_gi[b * H3 + H + j] = d_gh[b * H3 + H + j] = d_u_bar;
        d_gi[b * H3 + 2 * H + j] = d_n_bar;
        d_gh[b * H3 + 2 * H + j] = d_n_bar * r;
      }
    }
    matmul_bt(B, I, H3, d_gi.data(), a.w_i, a.d_x + t * B * I);  // d_gi·w_iᵀ   [B, I]
    matmul_bt(B, H, H3, d_gh.data(), a.w_h, g.data());           // d_gh·w_hᵀ   [B, H]
    for (std::int64_t e = 0; e < BH; ++e) carry[e] = g[e] + d_h[e] * a.u[o + e];
    matmul_at(I, H3, B, a.x + t * B * I, d_gi.data(), d_w_i.step());  // x[t]ᵀ·d_gi  [I, 3H]
    matmul_at(H, H3, B, hp, d_gh.data(), d_w_h.step());               // hpᵀ·d_gh    [H, 3H]
    column_sums(B, H3, d_gi.data(), d_b_i.step());                    // Σ_b d_gi
    column_sums(B, H3, d_gh.data(), d_b_h.step());                    // Σ_b d_gh
    for (StepSum<T>* sum : {&d_w_i, &d_w_h, &d_b_i, &d_b_h}) sum->add();
  };
  backward_steps("BlockGRUResetAfterGrad", d.seq_len_max, step);
  std::copy(carry.begin(), carry.end(), a.d_h_prev);
}

template void block_gru_reset_after_fwd<float>(const BlockGRUDims&,
                                               const BlockGRUResetAfterFwdArgs<float>&);
template void block_gru_reset_after_fwd<double>(const BlockGRUDims&,
                                                const BlockGRUResetAfterFwdArgs<double>&);
template void block_gru_reset_after_bwd<float>(const BlockGRUDims&,
                                               const BlockGRUResetAfterBwdArgs<float>&);
template void block_gru_reset_after_bwd<double>(const BlockGRUDims&,
                                                const BlockGRUResetAfterBwdArgs<double>&);

}  // namespace blockrnn::ref
