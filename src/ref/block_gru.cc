// Reference BlockGRU and BlockGRUGrad (docs/ops.md): literally GRUBlockCell / GRUBlockCellGrad plus
// the parameter gradients of docs/ops.md, stepped over time with the plain-loop cell reference
// (src/ref/gru_cell.cc). This is the executable definition the fast path is tested against.
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max.
//   forward, t = 0 … S−1:   (r, u, c, h)[t] = GRUBlockCell(x[t], t == 0 ? h_prev : h[t−1])
//   forward, t ≥ S:         r, u, c, h = 0
//   backward, t = S−1 … 0:  d_h = carry + d_h[t]
//                           (d_x[t], carry, d_w_ru, d_w_c, d_b_ru, d_b_c) =
//                               gradients.GRUBlockCell(x[t], hp, …, r[t], u[t], c[t], d_h)
//                           d_w_ru += d_w_ru, … (in that time order)
//   d_h_prev = carry;  d_x[t] = 0 for t ≥ S;  all gradients 0 when S = 0
#include "kernel/block_gru.h"

#include <algorithm>
#include <vector>

#include "kernel/gru_cell.h"
#include "ref/per_example.h"
#include "ref/time_steps.h"

namespace blockrnn::ref {

template <typename T>
void block_gru_fwd(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  using A = BlockGRUFwdArgs<T>;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    return each_example<T>(d, a, block_gru_fwd<T>, {&A::r, &A::u, &A::c, &A::h});
  }
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H;
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
  if (run_without_unwanted_grads<T>(block_gru_bwd<T>, d, a)) return;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    using A = BlockGRUBwdArgs<T>;
    return each_example<T>(
        d, a, block_gru_bwd<T>, {&A::r, &A::u, &A::c, &A::h, &A::d_h},
        {{&A::d_w_ru, K * 2 * H}, {&A::d_w_c, K * H}, {&A::d_b_ru, 2 * H}, {&A::d_b_c, H}});
  }
  std::fill(a.d_x, a.d_x + d.T * B * I, T(0));
  using C = GRUCellBwdArgs<T>;
  CellGradSums<T, C> grads{{&C::d_w_ru, a.d_w_ru, K * 2 * H},
                           {&C::d_w_c, a.d_w_c, K * H},
                           {&C::d_b_ru, a.d_b_ru, 2 * H},
                           {&C::d_b_c, a.d_b_c, H}};
  std::vector<T> carry(BH, T(0)), d_h(BH), next(BH), d_c_bar(BH), d_ru(2 * BH);
  auto step = [&](std::int64_t t) {
    const std::int64_t o = t * BH;
    for (std::int64_t e = 0; e < BH; ++e) d_h[e] = carry[e] + a.d_h[o + e];
    GRUCellBwdArgs<T> cell{a.x + t * B * I,
                           t == 0 ? a.h_prev : a.h + o - BH,
                           a.w_ru,
                           a.w_c,
                           a.r + o,
                           a.u + o,
                           a.c + o,
                           d_h.data(),
                           a.d_x + t * B * I,
                           next.data(),
                           d_c_bar.data(),
                           d_ru.data()};
    cell.full = true;
    grads.point(cell);
    gru_cell_bwd<T>({B, I, H}, cell);
    grads.add();
    carry.swap(next);
  };
  backward_steps("BlockGRUGrad", d.seq_len_max, step);
  std::copy(carry.begin(), carry.end(), a.d_h_prev);
}

template void block_gru_fwd<float>(const BlockGRUDims&, const BlockGRUFwdArgs<float>&);
template void block_gru_fwd<double>(const BlockGRUDims&, const BlockGRUFwdArgs<double>&);
template void block_gru_bwd<float>(const BlockGRUDims&, const BlockGRUBwdArgs<float>&);
template void block_gru_bwd<double>(const BlockGRUDims&, const BlockGRUBwdArgs<double>&);

}  // namespace blockrnn::ref
