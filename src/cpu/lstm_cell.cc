// Fast LSTM block cell: BLAS GEMMs on the x and h row blocks of w (no [x, h] concatenation)
// and the fused element-wise passes of src/cpu/lstm_pointwise.h. Same math and signature as
// src/ref/lstm_cell.cc; see there and lstm_pointwise.h for the equations.
// Shape letters: B batch, I input size, H cell size; w_x = w[0:I, :], w_h = w[I:I+H, :].
#include <vector>

#include "cpu/lstm_pointwise.h"
#include "cpu/sequence_common.h"
#include "gemm/gemm.h"
#include "kernel/lstm_cell.h"

namespace blockrnn::cpu {

using gemm::gemm;
using gemm::Trans;

template <typename T>
void lstm_cell_fwd(const LSTMDims& d, const LSTMCellFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, G = 4 * H;
  if (B == 0 || H == 0) return;
  const T* w_x = a.w;          // [I, 4H]
  const T* w_h = a.w + I * G;  // [H, 4H]
  std::vector<T> gates(B * G);
  // gates = x·w_x + h_prev·w_h      [B,4H] = [B,I]·[I,4H] + [B,H]·[H,4H]   (bias: pointwise)
  gemm<T>(Trans::kNo, Trans::kNo, B, G, I, a.x, I, w_x, G, T(0), gates.data(), G);
  gemm<T>(Trans::kNo, Trans::kNo, B, G, H, a.h_prev, H, w_h, G, T(1), gates.data(), G);
  const LSTMFwdParams<T> p{H,   a.layout, a.forget_bias, a.cell_clip, a.use_peephole,
                           a.b, a.wci,    a.wcf,         a.wco};
  const LSTMFwdStep<T> s{gates.data(), a.cs_prev, a.i, a.cs, a.f, a.o, a.ci, a.co, a.h};
  lstm_fwd_pointwise(p, s, B);
}

template <typename T>
void lstm_cell_bwd(const LSTMDims& d, const LSTMCellBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, G = 4 * H;
  const LSTMBwdParams<T> p{H, a.layout, a.use_peephole, a.wci, a.wcf, a.wco};
  LSTMBwdStep<T> s{a.cs_prev, a.i,      a.cs,    a.f,     a.o,      a.ci,          a.co,
                   a.cs_grad, a.h_grad, nullptr, nullptr, a.dgates, a.cs_prev_grad};
  lstm_bwd_pointwise(p, s, B);
  if (a.use_peephole) {
    // wci_grad = Σ_b di⊙cs_prev;  wcf_grad = Σ_b df⊙cs_prev;  wco_grad = Σ_b do⊙cs      [H]
    lstm_peephole_grads(p, s, B, a.wci_grad, a.wcf_grad, a.wco_grad);
  } else {
    for (std::int64_t j = 0; j < H; ++j) a.wci_grad[j] = a.wcf_grad[j] = a.wco_grad[j] = T(0);
  }
  if (!a.full) return;
  const T* w_x = a.w;          // [I, 4H]
  const T* w_h = a.w + I * G;  // [H, 4H]
  // x_grad = dgates·w_xᵀ      [B,I] = [B,4H]·[I,4H]ᵀ
  gemm<T>(Trans::kNo, Trans::kYes, B, I, G, a.dgates, G, w_x, G, T(0), a.x_grad, I);
  // h_prev_grad = dgates·w_hᵀ      [B,H] = [B,4H]·[H,4H]ᵀ
  gemm<T>(Trans::kNo, Trans::kYes, B, H, G, a.dgates, G, w_h, G, T(0), a.h_prev_grad, H);
  // w_grad = [x, h_prev]ᵀ·dgates      [I+H,4H] = [B,I+H]ᵀ·[B,4H], as two row blocks:
  //   w_grad[0:I]   = xᵀ·dgates        [I,4H] = [B,I]ᵀ·[B,4H]
  //   w_grad[I:I+H] = h_prevᵀ·dgates   [H,4H] = [B,H]ᵀ·[B,4H]
  gemm<T>(Trans::kYes, Trans::kNo, I, G, B, a.x, I, a.dgates, G, T(0), a.w_grad, G);
  gemm<T>(Trans::kYes, Trans::kNo, H, G, B, a.h_prev, H, a.dgates, G, T(0), a.w_grad + I * G, G);
  // b_grad = Σ_b dgates      [4H]
  column_sums<T, T>(B, G, a.dgates, G, a.b_grad);
}

template void lstm_cell_fwd<float>(const LSTMDims&, const LSTMCellFwdArgs<float>&);
template void lstm_cell_fwd<double>(const LSTMDims&, const LSTMCellFwdArgs<double>&);
template void lstm_cell_bwd<float>(const LSTMDims&, const LSTMCellBwdArgs<float>&);
template void lstm_cell_bwd<double>(const LSTMDims&, const LSTMCellBwdArgs<double>&);

}  // namespace blockrnn::cpu
