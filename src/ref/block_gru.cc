// Reference BlockGRU and BlockGRUGrad (SPEC A6): literally GRUBlockCell / GRUBlockCellGrad plus
// the parameter gradients of SPEC §3.4, stepped over time with the plain-loop cell reference
// (src/ref/gru_cell.cc). This is the executable definition the fast path is tested against.
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max.
//   forward, t = 0 … S−1:   (r, u, c, h)[t] = GRUBlockCell(x[t], t == 0 ? h_prev : h[t−1])
//   forward, t ≥ S:         r, u, c, h = 0
//   backward, t = S−1 … 0:  d_h = carry + h_grad[t]
//                           (x_grad[t], carry, d_w_ru, d_w_c, d_b_ru, d_b_c) =
//                               gradients.GRUBlockCell(x[t], hp, …, r[t], u[t], c[t], d_h)
//                           w_ru_grad += d_w_ru, … (in that time order)
//   h_prev_grad = carry;  x_grad[t] = 0 for t ≥ S;  all gradients 0 when S = 0
#include "kernel/block_gru.h"
#include "core/cancel.h"

#include <algorithm>
#include <vector>

#include "kernel/gru_cell.h"
#include "ref/per_example.h"

namespace blockrnn::ref {

template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a);
template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a);

namespace {

// seq_lengths: each example alone (ref/per_example.h).
template <typename T>
void per_example_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  const std::int64_t I = d.I, H = d.H;
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b);
    BlockGRUFwdArgs<T> e = a;
    e.x = s.in(a.x, I, steps);
    e.h_prev = a.h_prev + b * H;
    e.r = s.out(a.r, H);
    e.u = s.out(a.u, H);
    e.c = s.out(a.c, H);
    e.h = s.out(a.h, H);
    block_gru_fwd<T>({d.T, 1, I, H, steps}, e);
    s.finish();
  }
}

template <typename T>
void per_example_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  const std::int64_t I = d.I, H = d.H, K = I + H;
  std::fill(a.w_ru_grad, a.w_ru_grad + K * 2 * H, T(0));
  std::fill(a.w_c_grad, a.w_c_grad + K * H, T(0));
  std::fill(a.b_ru_grad, a.b_ru_grad + 2 * H, T(0));
  std::fill(a.b_c_grad, a.b_c_grad + H, T(0));
  std::vector<T> dw_ru(K * 2 * H), dw_c(K * H), db_ru(2 * H), db_c(H);
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b);
    BlockGRUBwdArgs<T> e = a;
    e.x = s.in(a.x, I, steps);
    e.h_prev = a.h_prev + b * H;
    e.r = s.in(a.r, H, steps);
    e.u = s.in(a.u, H, steps);
    e.c = s.in(a.c, H, steps);
    e.h = s.in(a.h, H, steps);
    e.h_grad = s.in(a.h_grad, H, steps);
    e.x_grad = s.out(a.x_grad, I);
    e.h_prev_grad = a.h_prev_grad + b * H;
    e.w_ru_grad = dw_ru.data();
    e.w_c_grad = dw_c.data();
    e.b_ru_grad = db_ru.data();
    e.b_c_grad = db_c.data();
    block_gru_bwd<T>({d.T, 1, I, H, steps}, e);
    s.finish();
    add_into(a.w_ru_grad, dw_ru);
    add_into(a.w_c_grad, dw_c);
    add_into(a.b_ru_grad, db_ru);
    add_into(a.b_c_grad, db_c);
  }
}

}  // namespace

template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  if (d.lengths != nullptr) return per_example_fwd(d, a);
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H;
  core::StepPoll poll;
  for (std::int64_t t = 0; t < S; ++t) {
    if (poll.due()) core::throw_cancelled("BlockGRU", t, S);
    const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;
    const GRUCellFwdArgs<T> step{a.x + t * B * I, hp,          a.w_ru,       a.w_c,
                                 a.b_ru,          a.b_c,       a.r + t * BH, a.u + t * BH,
                                 a.c + t * BH,    a.h + t * BH};
    gru_cell_fwd<T>({B, I, H}, step);
  }
  for (T* out : {a.r, a.u, a.c, a.h}) std::fill(out + S * BH, out + d.T * BH, T(0));
}

template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  if (d.lengths != nullptr) return per_example_bwd(d, a);
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H;
  std::fill(a.x_grad, a.x_grad + d.T * B * I, T(0));
  std::fill(a.w_ru_grad, a.w_ru_grad + K * 2 * H, T(0));
  std::fill(a.w_c_grad, a.w_c_grad + K * H, T(0));
  std::fill(a.b_ru_grad, a.b_ru_grad + 2 * H, T(0));
  std::fill(a.b_c_grad, a.b_c_grad + H, T(0));
  std::vector<T> carry(BH, T(0)), d_h(BH), next(BH), d_c_bar(BH), d_ru(2 * BH);
  std::vector<T> dw_ru(K * 2 * H), dw_c(K * H), db_ru(2 * H), db_c(H);
  core::StepPoll poll;
  for (std::int64_t t = S - 1; t >= 0; --t) {
    if (poll.due()) core::throw_cancelled("BlockGRUGrad", S - 1 - t, S);
    const std::int64_t o = t * BH;
    for (std::int64_t e = 0; e < BH; ++e) d_h[e] = carry[e] + a.h_grad[o + e];
    GRUCellBwdArgs<T> step{a.x + t * B * I,
                           t == 0 ? a.h_prev : a.h + o - BH,
                           a.w_ru,
                           a.w_c,
                           a.r + o,
                           a.u + o,
                           a.c + o,
                           d_h.data(),
                           a.x_grad + t * B * I,
                           next.data(),
                           d_c_bar.data(),
                           d_ru.data()};
    step.full = true;
    step.d_w_ru = dw_ru.data();
    step.d_w_c = dw_c.data();
    step.d_b_ru = db_ru.data();
    step.d_b_c = db_c.data();
    gru_cell_bwd<T>({B, I, H}, step);
    for (std::int64_t e = 0; e < K * 2 * H; ++e) a.w_ru_grad[e] += dw_ru[e];
    for (std::int64_t e = 0; e < K * H; ++e) a.w_c_grad[e] += dw_c[e];
    for (std::int64_t j = 0; j < 2 * H; ++j) a.b_ru_grad[j] += db_ru[j];
    for (std::int64_t j = 0; j < H; ++j) a.b_c_grad[j] += db_c[j];
    carry.swap(next);
  }
  std::copy(carry.begin(), carry.end(), a.h_prev_grad);
}

template void block_gru_fwd<float>(const BlockGRUDims&, const BlockGRUFwdArgs<float>&);
template void block_gru_fwd<double>(const BlockGRUDims&, const BlockGRUFwdArgs<double>&);
template void block_gru_bwd<float>(const BlockGRUDims&, const BlockGRUBwdArgs<float>&);
template void block_gru_bwd<double>(const BlockGRUDims&, const BlockGRUBwdArgs<double>&);

}  // namespace blockrnn::ref
