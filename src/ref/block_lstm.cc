// Reference BlockLSTM(V2) and BlockLSTMGrad(V2) (SPEC §7.2, §8.2): literally LSTMBlockCell and
// the full cell backward (LSTMBlockCellGrad plus SPEC §6.4), stepped over time with the
// plain-loop cell reference (src/ref/lstm_cell.cc). The executable definition the fast path is
// tested against.
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max.
//   forward, t = 0 … S−1:  (i, cs, f, o, ci, co, h)[t] =
//                              LSTMBlockCell(x[t], cs[t−1], h[t−1])   (cs_prev, h_prev at t = 0)
//   forward, t ≥ S:        all seven outputs 0
//   backward, t = S−1 … 0: (x_grad[t], carry_cs, carry_h, dw, dwci, dwcf, dwco, db) =
//                              cell backward(…, cs_grad = carry_cs + cs_grad[t],
//                                               h_grad  = carry_h  + h_grad[t])
//                          w_grad += dw, …  (summed in that time order, as TensorFlow does)
//   cs_prev_grad = carry_cs;  h_prev_grad = carry_h;  x_grad[t ≥ S] = 0
#include "kernel/block_lstm.h"

#include "ref/per_example.h"
#include "ref/time_steps.h"

#include <algorithm>
#include <vector>

namespace blockrnn::ref {

template <typename T>
void block_lstm_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    using A = BlockLSTMFwdArgs<T>;
    return each_example<T>(d, a, block_lstm_fwd<T>, [&](ExampleSlices<T>& s, A& e) {
      e.cs_prev = s.row(a.cs_prev, H);
      for (auto f : {&A::i, &A::cs, &A::f, &A::o, &A::ci, &A::co, &A::h}) e.*f = s.out(a.*f, H);
    });
  }
  auto step = [&](std::int64_t t) {
    const std::int64_t o = t * BH;
    LSTMCellFwdArgs<T> cell{a.x + t * B * I,
                            t == 0 ? a.cs_prev : a.cs + o - BH,
                            t == 0 ? a.h_prev : a.h + o - BH,
                            a.w,
                            a.wci,
                            a.wcf,
                            a.wco,
                            a.b,
                            a.i + o,
                            a.cs + o,
                            a.f + o,
                            a.o + o,
                            a.ci + o,
                            a.co + o,
                            a.h + o};
    cell.forget_bias = a.forget_bias;
    cell.cell_clip = a.cell_clip;
    cell.use_peephole = a.use_peephole;
    cell.layout = a.layout;
    lstm_cell_fwd<T>({B, I, H}, cell);
  };
  forward_steps<T>(block_lstm_op_name(a.layout, false), d.T, d.seq_len_max, BH,
                   {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}, step);
}

template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H, K = I + H, G = 4 * H;
  if (d.lengths != nullptr) {  // seq_lengths: each example alone (ref/per_example.h)
    zero<T>({{a.w_grad, K * G}, {a.b_grad, G}, {a.wci_grad, H}, {a.wcf_grad, H}, {a.wco_grad, H}});
    using A = BlockLSTMBwdArgs<T>;
    return each_example<T>(d, a, block_lstm_bwd<T>, [&](ExampleSlices<T>& s, A& e) {
      e.cs_prev = s.row(a.cs_prev, H);
      for (auto f : {&A::i, &A::cs, &A::f, &A::o, &A::ci, &A::co, &A::h, &A::cs_grad, &A::h_grad}) {
        e.*f = s.in(a.*f, H);
      }
      e.cs_prev_grad = s.row(a.cs_prev_grad, H);
      e.w_grad = s.summed(a.w_grad, K * G);
      e.b_grad = s.summed(a.b_grad, G);
      e.wci_grad = s.summed(a.wci_grad, H);
      e.wcf_grad = s.summed(a.wcf_grad, H);
      e.wco_grad = s.summed(a.wco_grad, H);
    });
  }
  std::fill(a.x_grad, a.x_grad + d.T * B * I, T(0));
  StepSum<T> w_grad(a.w_grad, K * G), b_grad(a.b_grad, G), wci_grad(a.wci_grad, H),
      wcf_grad(a.wcf_grad, H), wco_grad(a.wco_grad, H);
  std::vector<T> carry_cs(BH, T(0)), carry_h(BH, T(0)), next_cs(BH), next_h(BH);
  std::vector<T> cs_grad(BH), h_grad(BH), dgates(B * G);
  auto step = [&](std::int64_t t) {
    const std::int64_t o = t * BH;
    for (std::int64_t e = 0; e < BH; ++e) {
      cs_grad[e] = carry_cs[e] + a.cs_grad[o + e];
      h_grad[e] = carry_h[e] + a.h_grad[o + e];
    }
    LSTMCellBwdArgs<T> cell{a.x + t * B * I,
                            t == 0 ? a.cs_prev : a.cs + o - BH,
                            t == 0 ? a.h_prev : a.h + o - BH,
                            a.w,
                            a.wci,
                            a.wcf,
                            a.wco,
                            a.i + o,
                            a.cs + o,
                            a.f + o,
                            a.o + o,
                            a.ci + o,
                            a.co + o,
                            cs_grad.data(),
                            h_grad.data(),
                            next_cs.data(),
                            dgates.data(),
                            wci_grad.step(),
                            wcf_grad.step(),
                            wco_grad.step()};
    cell.use_peephole = a.use_peephole;
    cell.layout = a.layout;
    cell.full = true;
    cell.x_grad = a.x_grad + t * B * I;
    cell.h_prev_grad = next_h.data();
    cell.w_grad = w_grad.step();
    cell.b_grad = b_grad.step();
    lstm_cell_bwd<T>({B, I, H}, cell);
    for (StepSum<T>* g : {&w_grad, &b_grad, &wci_grad, &wcf_grad, &wco_grad}) g->add();
    carry_cs.swap(next_cs);
    carry_h.swap(next_h);
  };
  backward_steps(block_lstm_op_name(a.layout, true), d.seq_len_max, step);
  std::copy(carry_cs.begin(), carry_cs.end(), a.cs_prev_grad);
  std::copy(carry_h.begin(), carry_h.end(), a.h_prev_grad);
}

template void block_lstm_fwd<float>(const BlockLSTMDims&, const BlockLSTMFwdArgs<float>&);
template void block_lstm_fwd<double>(const BlockLSTMDims&, const BlockLSTMFwdArgs<double>&);
template void block_lstm_bwd<float>(const BlockLSTMDims&, const BlockLSTMBwdArgs<float>&);
template void block_lstm_bwd<double>(const BlockLSTMDims&, const BlockLSTMBwdArgs<double>&);

}  // namespace blockrnn::ref
