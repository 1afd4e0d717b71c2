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
#include "core/cancel.h"
#include "ref/per_example.h"

#include <algorithm>
#include <vector>

namespace blockrnn::ref {

template <typename T>
void block_lstm_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a);
template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a);

namespace {

// seq_lengths: each example alone (ref/per_example.h).
template <typename T>
void per_example_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  const std::int64_t I = d.I, H = d.H;
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b);
    BlockLSTMFwdArgs<T> e = a;
    e.x = s.in(a.x, I, steps);
    e.cs_prev = a.cs_prev + b * H;
    e.h_prev = a.h_prev + b * H;
    e.i = s.out(a.i, H);
    e.cs = s.out(a.cs, H);
    e.f = s.out(a.f, H);
    e.o = s.out(a.o, H);
    e.ci = s.out(a.ci, H);
    e.co = s.out(a.co, H);
    e.h = s.out(a.h, H);
    block_lstm_fwd<T>({d.T, 1, I, H, steps}, e);
    s.finish();
  }
}

template <typename T>
void per_example_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  const std::int64_t I = d.I, H = d.H, K = I + H, G = 4 * H;
  std::fill(a.w_grad, a.w_grad + K * G, T(0));
  std::fill(a.b_grad, a.b_grad + G, T(0));
  for (T* p : {a.wci_grad, a.wcf_grad, a.wco_grad}) std::fill(p, p + H, T(0));
  std::vector<T> dw(K * G), db(G), dwci(H), dwcf(H), dwco(H);
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b);
    BlockLSTMBwdArgs<T> e = a;
    e.x = s.in(a.x, I, steps);
    e.cs_prev = a.cs_prev + b * H;
    e.h_prev = a.h_prev + b * H;
    e.i = s.in(a.i, H, steps);
    e.cs = s.in(a.cs, H, steps);
    e.f = s.in(a.f, H, steps);
    e.o = s.in(a.o, H, steps);
    e.ci = s.in(a.ci, H, steps);
    e.co = s.in(a.co, H, steps);
    e.h = s.in(a.h, H, steps);
    e.cs_grad = s.in(a.cs_grad, H, steps);
    e.h_grad = s.in(a.h_grad, H, steps);
    e.x_grad = s.out(a.x_grad, I);
    e.cs_prev_grad = a.cs_prev_grad + b * H;
    e.h_prev_grad = a.h_prev_grad + b * H;
    e.w_grad = dw.data();
    e.b_grad = db.data();
    e.wci_grad = dwci.data();
    e.wcf_grad = dwcf.data();
    e.wco_grad = dwco.data();
    block_lstm_bwd<T>({d.T, 1, I, H, steps}, e);
    s.finish();
    add_into(a.w_grad, dw);
    add_into(a.b_grad, db);
    add_into(a.wci_grad, dwci);
    add_into(a.wcf_grad, dwcf);
    add_into(a.wco_grad, dwco);
  }
}

}  // namespace

template <typename T>
void block_lstm_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  if (d.lengths != nullptr) return per_example_fwd(d, a);
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H;
  core::StepPoll poll;
  for (std::int64_t t = 0; t < S; ++t) {
    if (poll.due()) core::throw_cancelled(block_lstm_op_name(a.layout, false), t, S);
    const std::int64_t o = t * BH;
    LSTMCellFwdArgs<T> step{a.x + t * B * I,
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
    step.forget_bias = a.forget_bias;
    step.cell_clip = a.cell_clip;
    step.use_peephole = a.use_peephole;
    step.layout = a.layout;
    lstm_cell_fwd<T>({B, I, H}, step);
  }
  for (T* out : {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}) {
    std::fill(out + S * BH, out + d.T * BH, T(0));
  }
}

template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  if (d.lengths != nullptr) return per_example_bwd(d, a);
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H, G = 4 * H;
  std::fill(a.x_grad, a.x_grad + d.T * B * I, T(0));
  std::fill(a.w_grad, a.w_grad + K * G, T(0));
  std::fill(a.b_grad, a.b_grad + G, T(0));
  for (T* p : {a.wci_grad, a.wcf_grad, a.wco_grad}) std::fill(p, p + H, T(0));
  std::vector<T> carry_cs(BH, T(0)), carry_h(BH, T(0)), next_cs(BH), next_h(BH);
  std::vector<T> cs_grad(BH), h_grad(BH), dgates(B * G), dw(K * G), db(G), dwci(H), dwcf(H),
      dwco(H);
  core::StepPoll poll;
  for (std::int64_t t = S - 1; t >= 0; --t) {
    if (poll.due()) core::throw_cancelled(block_lstm_op_name(a.layout, true), S - 1 - t, S);
    const std::int64_t o = t * BH;
    for (std::int64_t e = 0; e < BH; ++e) {
      cs_grad[e] = carry_cs[e] + a.cs_grad[o + e];
      h_grad[e] = carry_h[e] + a.h_grad[o + e];
    }
    LSTMCellBwdArgs<T> step{a.x + t * B * I,
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
                            dwci.data(),
                            dwcf.data(),
                            dwco.data()};
    step.use_peephole = a.use_peephole;
    step.layout = a.layout;
    step.full = true;
    step.x_grad = a.x_grad + t * B * I;
    step.h_prev_grad = next_h.data();
    step.w_grad = dw.data();
    step.b_grad = db.data();
    lstm_cell_bwd<T>({B, I, H}, step);
    for (std::int64_t e = 0; e < K * G; ++e) a.w_grad[e] += dw[e];
    for (std::int64_t k = 0; k < G; ++k) a.b_grad[k] += db[k];
    for (std::int64_t j = 0; j < H; ++j) {
      a.wci_grad[j] += dwci[j];
      a.wcf_grad[j] += dwcf[j];
      a.wco_grad[j] += dwco[j];
    }
    carry_cs.swap(next_cs);
    carry_h.swap(next_h);
  }
  std::copy(carry_cs.begin(), carry_cs.end(), a.cs_prev_grad);
  std::copy(carry_h.begin(), carry_h.end(), a.h_prev_grad);
}

template void block_lstm_fwd<float>(const BlockLSTMDims&, const BlockLSTMFwdArgs<float>&);
template void block_lstm_fwd<double>(const BlockLSTMDims&, const BlockLSTMFwdArgs<double>&);
template void block_lstm_bwd<float>(const BlockLSTMDims&, const BlockLSTMBwdArgs<float>&);
template void block_lstm_bwd<double>(const BlockLSTMDims&, const BlockLSTMBwdArgs<double>&);

}  // namespace blockrnn::ref
