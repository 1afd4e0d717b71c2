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

#include <algorithm>
#include <vector>

#include "kernel/gru_cell.h"
#include "ref/per_example.h"
#include "ref/time_steps.h"

namespace blockrnn::ref {

template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    using A = BlockGRUFwdArgs<T>;
    return each_example<T>(d, a, block_gru_fwd<T>, [&](ExampleSlices<T>& s, A& e) {
      for (auto f : {&A::r, &A::u, &A::c, &A::h}) e.*f = s.out(a.*f, H);
    });
  }
  auto step = [&](std::int64_t t) {
    const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;
    const GRUCellFwdArgs<T> cell{a.x + t * B * I, hp,          a.w_ru,       a.w_c,
                                 a.b_ru,          a.b_c,       a.r + t * BH, a.u + t * BH,
                                 a.c + t * BH,    a.h + t * BH};
    gru_cell_fwd<T>({B, I, H}, cell);
  };
  forward_steps<T>("BlockGRU", d.T, d.seq_len_max, BH, {a.r, a.u, a.c, a.h}, step);
}

template <typename T>
void block_gru_bwd(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H, K = I + H;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    zero<T>({{a.w_ru_grad, K * 2 * H}, {a.w_c_grad, K * H}, {a.b_ru_grad, 2 * H}, {a.b_c_grad, H}});
    using A = BlockGRUBwdArgs<T>;
    return each_example<T>(d, a, block_gru_bwd<T>, [&](ExampleSlices<T>& s, A& e) {
      for (auto f : {&A::r, &A::u, &A::c, &A::h, &A::h_grad}) e.*f = s.in(a.*f, H);
      e.w_ru_grad = s.summed(a.w_ru_grad, K * 2 * H);
      e.w_c_grad = s.summed(a.w_c_grad, K * H);
      e.b_ru_grad = s.summed(a.b_ru_grad, 2 * H);
      e.b_c_grad = s.summed(a.b_c_grad, H);
    });
  }
  std::fill(a.x_grad, a.x_grad + d.T * B * I, T(0));
  StepSum<T> w_ru_grad(a.w_ru_grad, K * 2 * H), w_c_grad(a.w_c_grad, K * H),
      b_ru_grad(a.b_ru_grad, 2 * H), b_c_grad(a.b_c_grad, H);
  std::vector<T> carry(BH, T(0)), d_h(BH), next(BH), d_c_bar(BH), d_ru(2 * BH);
  auto step = [&](std::int64_t t) {
    const std::int64_t o = t * BH;
    for (std::int64_t e = 0; e < BH; ++e) d_h[e] = carry[e] + a.h_grad[o + e];
    GRUCellBwdArgs<T> cell{a.x + t * B * I,
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
    cell.full = true;
    cell.d_w_ru = w_ru_grad.step();
    cell.d_w_c = w_c_grad.step();
    cell.d_b_ru = b_ru_grad.step();
    cell.d_b_c = b_c_grad.step();
    gru_cell_bwd<T>({B, I, H}, cell);
    for (StepSum<T>* g : {&w_ru_grad, &w_c_grad, &b_ru_grad, &b_c_grad}) g->add();
    carry.swap(next);
  };
  backward_steps("BlockGRUGrad", d.seq_len_max, step);
  std::copy(carry.begin(), carry.end(), a.h_prev_grad);
}

template void block_gru_fwd<float>(const BlockGRUDims&, const BlockGRUFwdArgs<float>&);
template void block_gru_fwd<double>(const BlockGRUDims&, const BlockGRUFwdArgs<double>&);
template void block_gru_bwd<float>(const BlockGRUDims&, const BlockGRUBwdArgs<float>&);
template void block_gru_bwd<double>(const BlockGRUDims&, const BlockGRUBwdArgs<double>&);

}  // namespace blockrnn::ref
