// Fast LSTM block cell: BLAS GEMMs on the x and h row blocks of w (no [x, h] concatenation)
// and the fused element-wise passes of src/cpu/lstm_pointwise.h. Same math and signature as
// src/ref/lstm_cell.cc; see there and lstm_pointwise.h for the equations.
// Shape letters: B batch, I input size, H cell size; w_x = w[0:I, :], w_h = w[I:I+H, :].
// With a plan (src/cpu/cell_plan.h: the cell layer objects) the products multiply by the
// plan's packed weights (the backward's transposed ones when the plan holds them, else by w's
// rows) and the scratch lives in the call's workspace: the same products, the same bits,
// nothing allocated.
#include <vector>

#include "cpu/cell_plan.h"
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
  std::vector<T> own;          // the gates without a workspace
  if (a.workspace == nullptr) own.resize(B * G);
  T* const gates = a.workspace != nullptr ? a.workspace : own.data();  // [B, 4H]
  // gates = x·w_x + h_prev·w_h      [B,4H] = [B,I]·[I,4H] + [B,H]·[H,4H]   (bias: pointwise)
  if (a.plan != nullptr) {
    gemm<T>(Trans::kNo, B, a.x, I, a.plan->w, 0, I, T(0), gates, G);
    gemm<T>(Trans::kNo, B, a.h_prev, H, a.plan->w, I, I + H, T(1), gates, G);
  } else {
    gemm<T>(Trans::kNo, Trans::kNo, B, G, I, a.x, I, w_x, G, T(0), gates, G);
    gemm<T>(Trans::kNo, Trans::kNo, B, G, H, a.h_prev, H, w_h, G, T(1), gates, G);
  }
  const LSTMFwdParams<T> p = lstm_fwd_params(H, a);
  const LSTMFwdStep<T> s{gates, a.cs_prev, a.i, a.cs, a.f, a.o, a.ci, a.co, a.h};
  lstm_fwd_pointwise(p, s, B);
}

template <typename T>
void lstm_cell_bwd(const LSTMDims& d, const LSTMCellBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, G = 4 * H;
  const LSTMBwdParams<T> p = lstm_bwd_params(H, a);
  LSTMBwdStep<T> s{a.cs_prev, a.i,   a.cs,    a.f,     a.o,       a.ci,       a.co,
                   a.d_cs,    a.d_h, nullptr, nullptr, a.d_gates, a.d_cs_prev};
  lstm_bwd_pointwise(p, s, B);
  if (a.use_peephole) {
    // d_wci = Σ_b di⊙cs_prev;  d_wcf = Σ_b df⊙cs_prev;  d_wco = Σ_b do⊙cs      [H]
    lstm_peephole_grads(p, s, B, a.d_wci, a.d_wcf, a.d_wco);
  } else {
    for (std::int64_t j = 0; j < H; ++j) a.d_wci[j] = a.d_wcf[j] = a.d_wco[j] = T(0);
  }
  if (!a.full) return;
  const T* w_x = a.w;                                 // [I, 4H]
  const T* w_h = a.w + I * G;                         // [H, 4H]
  if (a.plan != nullptr && a.plan->has_transposed) {  // the same products on the plan's panels
    gemm<T>(Trans::kNo, B, a.d_gates, G, a.plan->w_x_t, T(0), a.d_x, I);       // d_gates·w_xᵀ
    gemm<T>(Trans::kNo, B, a.d_gates, G, a.plan->w_h_t, T(0), a.d_h_prev, H);  // d_gates·w_hᵀ
  } else {
    // d_x = d_gates·w_xᵀ      [B,I] = [B,4H]·[I,4H]ᵀ
    gemm<T>(Trans::kNo, Trans::kYes, B, I, G, a.d_gates, G, w_x, G, T(0), a.d_x, I);
    // d_h_prev = d_gates·w_hᵀ      [B,H] = [B,4H]·[H,4H]ᵀ
    gemm<T>(Trans::kNo, Trans::kYes, B, H, G, a.d_gates, G, w_h, G, T(0), a.d_h_prev, H);
  }
  // d_w = [x, h_prev]ᵀ·d_gates      [I+H,4H] = [B,I+H]ᵀ·[B,4H], as two row blocks:
  //   d_w[0:I]   = xᵀ·d_gates        [I,4H] = [B,I]ᵀ·[B,4H]
  //   d_w[I:I+H] = h_prevᵀ·d_gates   [H,4H] = [B,H]ᵀ·[B,4H]
  if (a.plan != nullptr) {
    // d_gates packed once into the workspace for both products.
    const std::int64_t packed_elems = gemm::packed_elems_bound(B, G);
    std::vector<T> own;  // without a workspace
    if (a.workspace == nullptr) own.resize(packed_elems);
    gemm::PackedB<T> d_gates_packed;  // [B, 4H]
    d_gates_packed.pack_into(Trans::kNo, B, G, a.d_gates, G, a.plan->isa,
                             a.workspace != nullptr ? a.workspace : own.data(), packed_elems);
    gemm<T>(Trans::kYes, I, a.x, I, d_gates_packed, T(0), a.d_w, G);
    gemm<T>(Trans::kYes, H, a.h_prev, H, d_gates_packed, T(0), a.d_w + I * G, G);
  } else {
    gemm<T>(Trans::kYes, Trans::kNo, I, G, B, a.x, I, a.d_gates, G, T(0), a.d_w, G);
    gemm<T>(Trans::kYes, Trans::kNo, H, G, B, a.h_prev, H, a.d_gates, G, T(0), a.d_w + I * G, G);
  }
  // d_b = Σ_b d_gates      [4H]
  column_sums<T, T>(B, G, a.d_gates, G, a.d_b);
}

template void lstm_cell_fwd<float>(const LSTMDims&, const LSTMCellFwdArgs<float>&);
template void lstm_cell_fwd<double>(const LSTMDims&, const LSTMCellFwdArgs<double>&);
template void lstm_cell_bwd<float>(const LSTMDims&, const LSTMCellBwdArgs<float>&);
template void lstm_cell_bwd<double>(const LSTMDims&, const LSTMCellBwdArgs<double>&);

}  // namespace blockrnn::cpu
