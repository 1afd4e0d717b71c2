// Fast GRU block cell: BLAS GEMMs on the x and h row blocks of the weights (no [x, h]
// concatenation) and one fused element-wise pass per stage (the row kernels of
// src/cpu/gru_pointwise.h, shared with BlockGRU). Same math and signature as
// src/ref/gru_cell.cc; see there for the equations.
// With a plan (src/cpu/cell_plan.h: the cell layer objects) the products multiply by the
// plan's packed weights (the backward's transposed ones when the plan holds them, else by the
// weights' rows) and the scratch lives in the call's workspace: the same products, the same
// bits, nothing allocated.
#include <vector>

#include "core/parallel.h"
#include "cpu/cell_plan.h"
#include "cpu/gru_pointwise.h"
#include "cpu/sequence_common.h"
#include "gemm/gemm.h"
#include "kernel/gru_cell.h"

namespace blockrnn::cpu {

using gemm::gemm;
using gemm::Trans;

template <typename T>
void gru_cell_fwd(const GRUDims& d, const GRUCellFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H;
  if (B == 0 || H == 0) return;
  const T* w_ru_x = a.w_ru;              // [I, 2H]
  const T* w_ru_h = a.w_ru + I * 2 * H;  // [H, 2H]
  const T* w_c_x = a.w_c;                // [I, H]
  const T* w_c_h = a.w_c + I * H;        // [H, H]
  std::vector<T> own;                    // the scratch without a workspace
  if (a.workspace == nullptr) own.resize(B * 3 * H);
  T* const ru_bar = a.workspace != nullptr ? a.workspace : own.data();  // [B, 2H]
  T* const hr = ru_bar + B * 2 * H;                                     // [B, H]
  // ru_bar = x·w_ru_x + h_prev·w_ru_h      [B,2H] = [B,I]·[I,2H] + [B,H]·[H,2H]
  if (a.plan != nullptr) {
    gemm<T>(Trans::kNo, B, a.x, I, a.plan->w_ru, 0, I, T(0), ru_bar, 2 * H);
    gemm<T>(Trans::kNo, B, a.h_prev, H, a.plan->w_ru, I, I + H, T(1), ru_bar, 2 * H);
  } else {
    gemm<T>(Trans::kNo, Trans::kNo, B, 2 * H, I, a.x, I, w_ru_x, 2 * H, T(0), ru_bar, 2 * H);
    gemm<T>(Trans::kNo, Trans::kNo, B, 2 * H, H, a.h_prev, H, w_ru_h, 2 * H, T(1), ru_bar, 2 * H);
  }
  core::parallel_for(B, 2 * H, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      gru_fwd_gates_row(H, H, ru_bar + n * 2 * H, a.b_ru, a.h_prev + n * H, a.r + n * H,
                        a.u + n * H, hr + n * H);
    }
  });
  // c_bar = x·w_c_x + (h_prev⊙r)·w_c_h      [B,H] = [B,I]·[I,H] + [B,H]·[H,H]  (into c)
  if (a.plan != nullptr) {
    gemm<T>(Trans::kNo, B, a.x, I, a.plan->w_c, 0, I, T(0), a.c, H);
    gemm<T>(Trans::kNo, B, hr, H, a.plan->w_c, I, I + H, T(1), a.c, H);
  } else {
    gemm<T>(Trans::kNo, Trans::kNo, B, H, I, a.x, I, w_c_x, H, T(0), a.c, H);
    gemm<T>(Trans::kNo, Trans::kNo, B, H, H, hr, H, w_c_h, H, T(1), a.c, H);
  }
  core::parallel_for(B, H, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      gru_fwd_candidate_row(H, a.b_c, a.u + n * H, a.h_prev + n * H, a.c + n * H, a.h + n * H);
    }
  });
}

template <typename T>
void gru_cell_bwd(const GRUDims& d, const GRUCellBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H;
  const T* w_ru_x = a.w_ru;
  const T* w_ru_h = a.w_ru + I * 2 * H;
  const T* w_c_x = a.w_c;
  const T* w_c_h = a.w_c + I * H;
  // Scratch: d_hr [B, H], hr [B, H], then (plan) d_r_bar_u_bar and d_c_bar packed for the
  // weight gradients' products; the workspace's or, without one, allocated here.
  const std::int64_t packed_ru = gemm::packed_elems_bound(B, 2 * H);
  const std::int64_t packed_c = gemm::packed_elems_bound(B, H);
  std::vector<T> own;
  if (a.workspace == nullptr)
    own.resize(2 * B * H + (a.plan != nullptr ? packed_ru + packed_c : 0));
  T* const d_hr = a.workspace != nullptr ? a.workspace : own.data();  // [B, H]
  T* const hr = d_hr + B * H;                                         // [B, H]
  const T* d_ru = a.d_r_bar_u_bar;                                    // [B, 2H]
  core::parallel_for(B, H, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      gru_bwd_cu_row(H, a.u + n * H, a.c + n * H, a.h_prev + n * H, a.d_h + n * H,
                     a.d_c_bar + n * H, a.d_r_bar_u_bar + n * 2 * H + H);
    }
  });
  // The transposed weights' products on the plan's panels when it holds them (packed at a cell
  // layer's first backward), else on the weights' rows: the same bits.
  const bool planned_t = a.plan != nullptr && a.plan->has_transposed;
  // d_hr = d_c_bar·w_c_hᵀ      [B,H] = [B,H]·[H,H]ᵀ
  if (planned_t) {
    gemm<T>(Trans::kNo, B, a.d_c_bar, H, a.plan->w_c_h_t, T(0), d_hr, H);
  } else {
    gemm<T>(Trans::kNo, Trans::kYes, B, H, H, a.d_c_bar, H, w_c_h, H, T(0), d_hr, H);
  }
  core::parallel_for(B, H, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      gru_bwd_r_row(H, d_hr + n * H, a.h_prev + n * H, a.r + n * H, a.d_r_bar_u_bar + n * 2 * H);
    }
  });
  // d_x = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ      [B,I] = [B,2H]·[I,2H]ᵀ + [B,H]·[I,H]ᵀ
  // d_h_prev = d_ru·w_ru_hᵀ + d_hr⊙r + d_h⊙u      [B,H] = [B,2H]·[H,2H]ᵀ
  if (planned_t) {
    gemm<T>(Trans::kNo, B, d_ru, 2 * H, a.plan->w_ru_x_t, T(0), a.d_x, I);
    gemm<T>(Trans::kNo, B, a.d_c_bar, H, a.plan->w_c_x_t, T(1), a.d_x, I);
    gemm<T>(Trans::kNo, B, d_ru, 2 * H, a.plan->w_ru_h_t, T(0), a.d_h_prev, H);
  } else {
    gemm<T>(Trans::kNo, Trans::kYes, B, I, 2 * H, d_ru, 2 * H, w_ru_x, 2 * H, T(0), a.d_x, I);
    gemm<T>(Trans::kNo, Trans::kYes, B, I, H, a.d_c_bar, H, w_c_x, H, T(1), a.d_x, I);
    gemm<T>(Trans::kNo, Trans::kYes, B, H, 2 * H, d_ru, 2 * H, w_ru_h, 2 * H, T(0), a.d_h_prev, H);
  }
  core::parallel_for(B, H, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      gru_bwd_h_prev_row(H, d_hr + n * H, a.r + n * H, a.d_h + n * H, a.u + n * H,
                         a.d_h_prev + n * H);
    }
  });
  if (!a.full) return;
  for (std::int64_t e = 0; e < B * H; ++e) hr[e] = a.h_prev[e] * a.r[e];
  if (a.plan != nullptr) {
    // The weight gradients below on d_ru and d_c_bar packed once each into the scratch.
    gemm::PackedB<T> d_ru_packed, d_c_packed;  // [B, 2H], [B, H]
    d_ru_packed.pack_into(Trans::kNo, B, 2 * H, d_ru, 2 * H, a.plan->isa, hr + B * H, packed_ru);
    d_c_packed.pack_into(Trans::kNo, B, H, a.d_c_bar, H, a.plan->isa, hr + B * H + packed_ru,
                         packed_c);
    gemm<T>(Trans::kYes, I, a.x, I, d_ru_packed, T(0), a.d_w_ru, 2 * H);
    gemm<T>(Trans::kYes, H, a.h_prev, H, d_ru_packed, T(0), a.d_w_ru + I * 2 * H, 2 * H);
    gemm<T>(Trans::kYes, I, a.x, I, d_c_packed, T(0), a.d_w_c, H);
    gemm<T>(Trans::kYes, H, hr, H, d_c_packed, T(0), a.d_w_c + I * H, H);
  } else {
    // d_w_ru = [x, h_prev]ᵀ·d_ru      [I+H,2H] = [B,I+H]ᵀ·[B,2H], as two row blocks
    gemm<T>(Trans::kYes, Trans::kNo, I, 2 * H, B, a.x, I, d_ru, 2 * H, T(0), a.d_w_ru, 2 * H);
    gemm<T>(Trans::kYes, Trans::kNo, H, 2 * H, B, a.h_prev, H, d_ru, 2 * H, T(0),
            a.d_w_ru + I * 2 * H, 2 * H);
    // d_w_c = [x, h_prev⊙r]ᵀ·d_c_bar      [I+H,H] = [B,I+H]ᵀ·[B,H]
    gemm<T>(Trans::kYes, Trans::kNo, I, H, B, a.x, I, a.d_c_bar, H, T(0), a.d_w_c, H);
    gemm<T>(Trans::kYes, Trans::kNo, H, H, B, hr, H, a.d_c_bar, H, T(0), a.d_w_c + I * H, H);
  }
  // d_b_ru = Σ_b d_ru;  d_b_c = Σ_b d_c_bar
  column_sums<T, T>(B, 2 * H, d_ru, 2 * H, a.d_b_ru);
  column_sums<T, T>(B, H, a.d_c_bar, H, a.d_b_c);
}

template void gru_cell_fwd<float>(const GRUDims&, const GRUCellFwdArgs<float>&);
template void gru_cell_fwd<double>(const GRUDims&, const GRUCellFwdArgs<double>&);
template void gru_cell_bwd<float>(const GRUDims&, const GRUCellBwdArgs<float>&);
template void gru_cell_bwd<double>(const GRUDims&, const GRUCellBwdArgs<double>&);

}  // namespace blockrnn::cpu
