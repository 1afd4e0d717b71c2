// Reference BlockLSTM(V2) and BlockLSTMGrad(V2) (docs/ops.md): literally LSTMBlockCell and
// the full cell backward (LSTMBlockCellGrad plus docs/ops.md), stepped over time with the
// plain-loop cell reference (src/ref/lstm_cell.cc). The executable definition the fast path is
// tested against.
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max.
//   forward, t = 0 … S−1:  (i, cs, f, o, ci, co, h)[t] =
//                              LSTMBlockCell(x[t], cs[t−1], h[t−1])   (cs_prev, h_prev at t = 0)
//   forward, t ≥ S:        all seven outputs 0
//   backward, t = S−1 … 0: (d_x[t], carry_cs, carry_h, dw, dwci, dwcf, dwco, db) =
//                              cell backward(…, d_cs = carry_cs + d_cs[t],
//                                               d_h  = carry_h  + d_h[t])
//                          d_w += dw, …  (summed in that time order, as TensorFlow does)
//   d_cs_prev = carry_cs;  d_h_prev = carry_h;  d_x[t ≥ S] = 0
#include "kernel/block_lstm.h"

#include "ref/per_example.h"
#include "ref/time_steps.h"

#include <algorithm>
#include <vector>

namespace blockrnn::ref {

namespace {

// Step t's cell arguments, as far as both directions share them: x[t], the state the step starts
// from ((cs_prev, h_prev) at t = 0, else (cs, h)[t−1]), the weights, row t of the gate
// activations (written by the forward, read by the backward) and the flags. Cell is
// LSTMCellFwdArgs or LSTMCellBwdArgs, Seq the sequence op's arguments.
template <typename Cell, typename Seq>
Cell cell_at_step(const BlockLSTMDims& d, const Seq& a, std::int64_t t) {
  const std::int64_t BH = d.B * d.H, o = t * BH;
  Cell cell{};
  cell.x = a.x + t * d.B * d.I;
  cell.h_prev = t == 0 ? a.h_prev : a.h + o - BH;
  lstm_step_state(cell, a, t, BH);
  cell.w = a.w;
  cell.wci = a.wci;
  cell.wcf = a.wcf;
  cell.wco = a.wco;
  cell.use_peephole = a.use_peephole;
  cell.layout = a.layout;
  return cell;
}

}  // namespace

template <typename T>
void block_lstm_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  using A = BlockLSTMFwdArgs<T>;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    return each_example<T>(d, a, block_lstm_fwd<T>,
                           {&A::i, &A::cs, &A::f, &A::o, &A::ci, &A::co, &A::h});
  }
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H;
  auto step = [&](std::int64_t t) {
    auto cell = cell_at_step<LSTMCellFwdArgs<T>>(d, a, t);
    cell.b = a.b;
    cell.h = a.h + t * BH;
    cell.forget_bias = a.forget_bias;
    cell.cell_clip = a.cell_clip;
    lstm_cell_fwd<T>({B, I, H}, cell);
  };
  forward_steps<T>(block_lstm_op_name(a.layout, false), d.T, d.seq_len_max, BH,
                   {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}, step);
}

template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H, K = I + H, G = 4 * H;
  if (run_without_unwanted_grads<T>(block_lstm_bwd<T>, d, a)) return;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    using A = BlockLSTMBwdArgs<T>;
    return each_example<T>(
        d, a, block_lstm_bwd<T>,
        {&A::i, &A::cs, &A::f, &A::o, &A::ci, &A::co, &A::h, &A::d_cs, &A::d_h},
        {{&A::d_w, K * G}, {&A::d_b, G}, {&A::d_wci, H}, {&A::d_wcf, H}, {&A::d_wco, H}});
  }
  std::fill(a.d_x, a.d_x + d.T * B * I, T(0));
  using C = LSTMCellBwdArgs<T>;
  CellGradSums<T, C> grads{{&C::d_w, a.d_w, K * G},
                           {&C::d_b, a.d_b, G},
                           {&C::d_wci, a.d_wci, H},
                           {&C::d_wcf, a.d_wcf, H},
                           {&C::d_wco, a.d_wco, H}};
  std::vector<T> carry_cs(BH, T(0)), carry_h(BH, T(0)), next_cs(BH), next_h(BH);
  std::vector<T> d_cs(BH), d_h(BH), d_gates(B * G);
  auto step = [&](std::int64_t t) {
    const std::int64_t o = t * BH;
    for (std::int64_t e = 0; e < BH; ++e) {
      d_cs[e] = carry_cs[e] + a.d_cs[o + e];
      d_h[e] = carry_h[e] + a.d_h[o + e];
    }
    auto cell = cell_at_step<C>(d, a, t);
    cell.d_cs = d_cs.data();
    cell.d_h = d_h.data();
    cell.full = true;
    cell.d_x = a.d_x + t * B * I;
    cell.d_cs_prev = next_cs.data();
    cell.d_h_prev = next_h.data();
    cell.d_gates = d_gates.data();
    grads.point(cell);
    lstm_cell_bwd<T>({B, I, H}, cell);
    grads.add();
    carry_cs.swap(next_cs);
    carry_h.swap(next_h);
  };
  backward_steps(block_lstm_op_name(a.layout, true), d.seq_len_max, step);
  std::copy(carry_cs.begin(), carry_cs.end(), a.d_cs_prev);
  std::copy(carry_h.begin(), carry_h.end(), a.d_h_prev);
}

template void block_lstm_fwd<float>(const BlockLSTMDims&, const BlockLSTMFwdArgs<float>&);
template void block_lstm_fwd<double>(const BlockLSTMDims&, const BlockLSTMFwdArgs<double>&);
template void block_lstm_bwd<float>(const BlockLSTMDims&, const BlockLSTMBwdArgs<float>&);
template void block_lstm_bwd<double>(const BlockLSTMDims&, const BlockLSTMBwdArgs<double>&);

}  // namespace blockrnn::ref
