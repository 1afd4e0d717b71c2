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
#include "core/cancel.h"
#include "ref/per_example.h"
#include "ref/ref_linalg.h"

namespace blockrnn::ref {

template <typename T>
void block_gru_reset_after_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a);
template <typename T>
void block_gru_reset_after_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a);

namespace {

// seq_lengths: each example alone (ref/per_example.h).
template <typename T>
void per_example_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a) {
  const std::int64_t I = d.I, H = d.H;
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b);
    BlockGRUResetAfterFwdArgs<T> e = a;
    e.x = s.in(a.x, I, steps);
    e.h_prev = a.h_prev + b * H;
    e.r = s.out(a.r, H);
    e.u = s.out(a.u, H);
    e.n = s.out(a.n, H);
    e.hn = s.out(a.hn, H);
    e.h = s.out(a.h, H);
    block_gru_reset_after_fwd<T>({d.T, 1, I, H, steps}, e);
    s.finish();
  }
}

template <typename T>
void per_example_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a) {
  const std::int64_t I = d.I, H = d.H;
  std::fill(a.w_i_grad, a.w_i_grad + I * 3 * H, T(0));
  std::fill(a.w_h_grad, a.w_h_grad + H * 3 * H, T(0));
  std::fill(a.b_i_grad, a.b_i_grad + 3 * H, T(0));
  std::fill(a.b_h_grad, a.b_h_grad + 3 * H, T(0));
  std::vector<T> dw_i(I * 3 * H), dw_h(H * 3 * H), db_i(3 * H), db_h(3 * H);
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b);
    BlockGRUResetAfterBwdArgs<T> e = a;
    e.x = s.in(a.x, I, steps);
    e.h_prev = a.h_prev + b * H;
    e.r = s.in(a.r, H, steps);
    e.u = s.in(a.u, H, steps);
    e.n = s.in(a.n, H, steps);
    e.hn = s.in(a.hn, H, steps);
    e.h = s.in(a.h, H, steps);
    e.h_grad = s.in(a.h_grad, H, steps);
    e.x_grad = s.out(a.x_grad, I);
    e.h_prev_grad = a.h_prev_grad + b * H;
    e.w_i_grad = dw_i.data();
    e.w_h_grad = dw_h.data();
    e.b_i_grad = db_i.data();
    e.b_h_grad = db_h.data();
    block_gru_reset_after_bwd<T>({d.T, 1, I, H, steps}, e);
    s.finish();
    add_into(a.w_i_grad, dw_i);
    add_into(a.w_h_grad, dw_h);
    add_into(a.b_i_grad, db_i);
    add_into(a.b_h_grad, db_h);
  }
}

}  // namespace

template <typename T>
void block_gru_reset_after_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a) {
  if (d.lengths != nullptr) return per_example_fwd(d, a);
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, H3 = 3 * H;
  std::vector<T> gi(B * H3), gh(B * H3);
  core::StepPoll poll;
  for (std::int64_t t = 0; t < S; ++t) {
    if (poll.due()) core::throw_cancelled("BlockGRUResetAfter", t, S);
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
  }
  for (T* out : {a.r, a.u, a.n, a.hn, a.h}) std::fill(out + S * BH, out + d.T * BH, T(0));
}

template <typename T>
void block_gru_reset_after_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a) {
  if (d.lengths != nullptr) return per_example_bwd(d, a);
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, H3 = 3 * H;
  std::fill(a.x_grad, a.x_grad + d.T * B * I, T(0));
  std::fill(a.w_i_grad, a.w_i_grad + I * H3, T(0));
  std::fill(a.w_h_grad, a.w_h_grad + H * H3, T(0));
  std::fill(a.b_i_grad, a.b_i_grad + H3, T(0));
  std::fill(a.b_h_grad, a.b_h_grad + H3, T(0));
  std::vector<T> carry(BH, T(0)), d_h(BH), d_gi(B * H3), d_gh(B * H3), g(BH);
  std::vector<T> dw_i(I * H3), dw_h(H * H3), db(H3);
  core::StepPoll poll;
  for (std::int64_t t = S - 1; t >= 0; --t) {
    if (poll.due()) core::throw_cancelled("BlockGRUResetAfterGrad", S - 1 - t, S);
    const std::int64_t o = t * BH;
    const T* hp = t == 0 ? a.h_prev : a.h + o - BH;  // [B, H]
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t j = 0; j < H; ++j) {
        const std::int64_t e = b * H + j;
        const T dh = carry[e] + a.h_grad[o + e];
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
    matmul_bt(B, I, H3, d_gi.data(), a.w_i, a.x_grad + t * B * I);  // d_gi·w_iᵀ   [B, I]
    matmul_bt(B, H, H3, d_gh.data(), a.w_h, g.data());              // d_gh·w_hᵀ   [B, H]
    for (std::int64_t e = 0; e < BH; ++e) carry[e] = g[e] + d_h[e] * a.u[o + e];
    matmul_at(I, H3, B, a.x + t * B * I, d_gi.data(), dw_i.data());  // x[t]ᵀ·d_gi  [I, 3H]
    matmul_at(H, H3, B, hp, d_gh.data(), dw_h.data());               // hpᵀ·d_gh    [H, 3H]
    for (std::int64_t e = 0; e < I * H3; ++e) a.w_i_grad[e] += dw_i[e];
    for (std::int64_t e = 0; e < H * H3; ++e) a.w_h_grad[e] += dw_h[e];
    column_sums(B, H3, d_gi.data(), db.data());
    for (std::int64_t j = 0; j < H3; ++j) a.b_i_grad[j] += db[j];
    column_sums(B, H3, d_gh.data(), db.data());
    for (std::int64_t j = 0; j < H3; ++j) a.b_h_grad[j] += db[j];
  }
  std::copy(carry.begin(), carry.end(), a.h_prev_grad);
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
