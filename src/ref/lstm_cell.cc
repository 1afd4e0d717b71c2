// Reference LSTM block cell: plain loops, the executable form of docs/ops.md.
// Written independently of the fast path's fused kernels (src/cpu/lstm_pointwise.h) so that the
// two check each other. Shape letters: B batch, I input size, H cell size.
//
//   xh    = [x, h_prev]                                          [B, I+H]
//   gates = xh·w  (rounded), then + b                            [B, 4H]  (blocks per layout)
//   i  = σ(g_i [+ cs_prev⊙wci]);  ci = tanh(g_c);  f = σ((g_f + forget_bias) [+ cs_prev⊙wcf])
//   cs = i⊙ci + f⊙cs_prev;  if cell_clip > 0: cs = min(max(cs, −cell_clip), cell_clip)
//   co = tanh(cs);  o = σ(g_o [+ cs⊙wco]);  h = o⊙co
// Backward (groupings as TensorFlow evaluates them; the clip is not differentiated):
//   do  = ((o⊙(1−o))⊙d_h)⊙co
//   dcs = ((1−co⊙co)⊙d_h)⊙o + d_cs  [+ do⊙wco]
//   dci = ((1−ci⊙ci)⊙dcs)⊙i;  df = ((f⊙(1−f))⊙dcs)⊙cs_prev;  di = ((i⊙(1−i))⊙dcs)⊙ci
//   d_gates = [di, dci, df, do] (ICFO; IFCO: [di, df, dci, do])
//   d_cs_prev = dcs⊙f  [+ di⊙wci + df⊙wcf]
//   d_wci = Σ_b di⊙cs_prev;  d_wcf = Σ_b df⊙cs_prev;  d_wco = Σ_b do⊙cs  (else 0)
// Full backward (docs/ops.md):
//   xh_grad = d_gates·wᵀ  → d_x = xh_grad[:, :I], d_h_prev = xh_grad[:, I:]
//   d_w = xhᵀ·d_gates;  d_b = Σ_b d_gates
#include "kernel/lstm_cell.h"

#include <algorithm>
#include <vector>

#include "core/activations.h"
#include "ref/ref_linalg.h"

namespace blockrnn::ref {

template <typename T>
void lstm_cell_fwd(const LSTMDims& d, const LSTMCellFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, K = I + H, G = 4 * H;
  const LSTMGateBlocks blk = lstm_gate_blocks(a.layout);
  const std::vector<T> xh = concat_cols(B, I, a.x, H, a.h_prev);
  // gates = xh·w      [B, 4H] = [B, I+H]·[I+H, 4H]; stored, then the bias is added
  std::vector<T> gates(B * G);
  matmul(B, G, K, xh.data(), a.w, gates.data());
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t k = 0; k < G; ++k) gates[n * G + k] = gates[n * G + k] + a.b[k];
  }
  const bool clip = a.cell_clip > T(0);
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t j = 0; j < H; ++j) {
      const std::int64_t e = n * H + j;
      const T g_i = gates[n * G + blk.i * H + j], g_c = gates[n * G + blk.c * H + j],
              g_f = gates[n * G + blk.f * H + j], g_o = gates[n * G + blk.o * H + j];
      const T cs_prev = a.cs_prev[e];
      const T i = core::sigmoid(a.use_peephole ? g_i + cs_prev * a.wci[j] : g_i);
      const T ci = core::tanh_act(g_c);
      const T f = core::sigmoid(a.use_peephole ? (g_f + a.forget_bias) + cs_prev * a.wcf[j]
                                               : g_f + a.forget_bias);
      T cs = i * ci + f * cs_prev;
      if (clip) cs = std::min(std::max(cs, -a.cell_clip), a.cell_clip);
      const T co = core::tanh_act(cs);
      const T o = core::sigmoid(a.use_peephole ? g_o + cs * a.wco[j] : g_o);
      a.i[e] = i;
      a.cs[e] = cs;
      a.f[e] = f;
      a.o[e] = o;
      a.ci[e] = ci;
      a.co[e] = co;
      a.h[e] = o * co;
    }
  }
}

template <typename T>
void lstm_cell_bwd(const LSTMDims& d, const LSTMCellBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, K = I + H, G = 4 * H;
  const LSTMGateBlocks blk = lstm_gate_blocks(a.layout);
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t j = 0; j < H; ++j) {
      const std::int64_t e = n * H + j;
      const T i = a.i[e], f = a.f[e], o = a.o[e], ci = a.ci[e], co = a.co[e];
      const T d_h = a.d_h[e], cs_prev = a.cs_prev[e];
      const T d_o = ((o * (T(1) - o)) * d_h) * co;
      T dcs = ((T(1) - co * co) * d_h) * o + a.d_cs[e];
      if (a.use_peephole) dcs = dcs + d_o * a.wco[j];
      const T dci = ((T(1) - ci * ci) * dcs) * i;
      const T df = ((f * (T(1) - f)) * dcs) * cs_prev;
      const T di = ((i * (T(1) - i)) * dcs) * ci;
      a.d_gates[n * G + blk.i * H + j] = di;
      a.d_gates[n * G + blk.c * H + j] = dci;
      a.d_gates[n * G + blk.f * H + j] = df;
      a.d_gates[n * G + blk.o * H + j] = d_o;
      T d_cs_prev = dcs * f;
      if (a.use_peephole) d_cs_prev = (d_cs_prev + di * a.wci[j]) + df * a.wcf[j];
      a.d_cs_prev[e] = d_cs_prev;
    }
  }
  for (std::int64_t j = 0; j < H; ++j) {
    T sci = T(0), scf = T(0), sco = T(0);
    if (a.use_peephole) {
      for (std::int64_t n = 0; n < B; ++n) {
        sci += a.d_gates[n * G + blk.i * H + j] * a.cs_prev[n * H + j];
        scf += a.d_gates[n * G + blk.f * H + j] * a.cs_prev[n * H + j];
        sco += a.d_gates[n * G + blk.o * H + j] * a.cs[n * H + j];
      }
    }
    a.d_wci[j] = sci;
    a.d_wcf[j] = scf;
    a.d_wco[j] = sco;
  }
  if (!a.full) return;
  // xh_grad = d_gates·wᵀ      [B, I+H] = [B, 4H]·[I+H, 4H]ᵀ
  std::vector<T> xh_grad(B * K);
  matmul_bt(B, K, G, a.d_gates, a.w, xh_grad.data());
  for (std::int64_t n = 0; n < B; ++n) {
    for (std::int64_t m = 0; m < I; ++m) a.d_x[n * I + m] = xh_grad[n * K + m];
    for (std::int64_t j = 0; j < H; ++j) a.d_h_prev[n * H + j] = xh_grad[n * K + I + j];
  }
  // d_w = xhᵀ·d_gates      [I+H, 4H] = [B, I+H]ᵀ·[B, 4H]
  const std::vector<T> xh = concat_cols(B, I, a.x, H, a.h_prev);
  matmul_at(K, G, B, xh.data(), a.d_gates, a.d_w);
  // d_b = Σ_b d_gates      [4H]
  column_sums(B, G, a.d_gates, a.d_b);
}

template void lstm_cell_fwd<float>(const LSTMDims&, const LSTMCellFwdArgs<float>&);
template void lstm_cell_fwd<double>(const LSTMDims&, const LSTMCellFwdArgs<double>&);
template void lstm_cell_bwd<float>(const LSTMDims&, const LSTMCellBwdArgs<float>&);
template void lstm_cell_bwd<double>(const LSTMDims&, const LSTMCellBwdArgs<double>&);

}  // namespace blockrnn::ref
