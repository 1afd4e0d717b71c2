// Packing of src/cpu/cell_plan.h and the workspace bounds of the cell kernels (each bound is the
// larger of the slices the forward and the backward of its kernel carve).
#include "cpu/cell_plan.h"

#include <algorithm>

#include "core/isa.h"

namespace blockrnn {

using gemm::Trans;

template <typename T>
void LSTMCellPlan<T>::pack(std::int64_t I, std::int64_t H, const T* wp) {
  const std::int64_t G = 4 * H;
  isa = core::active_isa();
  w.pack(Trans::kNo, I + H, G, wp, G, isa);
  has_transposed = false;
}

template <typename T>
void LSTMCellPlan<T>::pack_transposed(std::int64_t I, std::int64_t H, const T* wp) {
  if (has_transposed) return;
  const std::int64_t G = 4 * H;
  w_x_t.pack(Trans::kYes, G, I, wp, G, isa);
  w_h_t.pack(Trans::kYes, G, H, wp + I * G, G, isa);
  has_transposed = true;
}

template <typename T>
void GRUCellPlan<T>::pack(std::int64_t I, std::int64_t H, const T* wru, const T* wc) {
  isa = core::active_isa();
  w_ru.pack(Trans::kNo, I + H, 2 * H, wru, 2 * H, isa);
  w_c.pack(Trans::kNo, I + H, H, wc, H, isa);
  has_transposed = false;
}

template <typename T>
void GRUCellPlan<T>::pack_transposed(std::int64_t I, std::int64_t H, const T* wru, const T* wc) {
  if (has_transposed) return;
  w_ru_x_t.pack(Trans::kYes, 2 * H, I, wru, 2 * H, isa);
  w_ru_h_t.pack(Trans::kYes, 2 * H, H, wru + I * 2 * H, 2 * H, isa);
  w_c_x_t.pack(Trans::kYes, H, I, wc, H, isa);
  w_c_h_t.pack(Trans::kYes, H, H, wc + I * H, H, isa);
  has_transposed = true;
}

template struct LSTMCellPlan<float>;
template struct LSTMCellPlan<double>;
template struct GRUCellPlan<float>;
template struct GRUCellPlan<double>;

}  // namespace blockrnn

namespace blockrnn::cpu {

using gemm::packed_elems_bound;

// fwd: gates [B, 4H];  bwd: d_gates packed as the B operand of d_w = xhᵀ·d_gates [B, 4H]
std::int64_t lstm_cell_workspace_elems(std::int64_t B, std::int64_t, std::int64_t H) {
  return std::max(B * 4 * H, packed_elems_bound(B, 4 * H));
}

// fwd: ru_bar [B, 2H], hr [B, H];  bwd: d_hr [B, H], hr [B, H], d_r_bar_u_bar and d_c_bar packed
// as the B operands of the weight gradients' products
std::int64_t gru_cell_workspace_elems(std::int64_t B, std::int64_t, std::int64_t H) {
  const std::int64_t fwd = B * 3 * H;
  const std::int64_t bwd = 2 * B * H + packed_elems_bound(B, 2 * H) + packed_elems_bound(B, H);
  return std::max(fwd, bwd);
}

}  // namespace blockrnn::cpu
