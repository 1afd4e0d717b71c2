// Packing of src/cpu/sequence_plan.h and the workspace bounds of the sequence kernels (each
// bound is the sum of the slices its kernel's Workspace carves, with N = S·B active rows).
#include "cpu/sequence_plan.h"

#include <type_traits>

#include "core/isa.h"
#include "cpu/sequence_common.h"

// The plan types are declared by the kernel interface (namespace blockrnn, kernel/block_*.h).
namespace blockrnn {

using gemm::Trans;

namespace {

// Packs op(b) into the float member `f` of a plan holding float packs, or into its bfloat16 twin
// `h` when the plan holds the bfloat16 products' packs (has_bf16; float weights only), as pack()
// and pack_bf16() pack the rest.
template <typename Plan, typename T>
void pack_of_kind(const Plan& plan, gemm::PackedB<T>& f, gemm::PackedBBf16& h, Trans tb,
                  std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb) {
  if constexpr (std::is_same_v<T, float>) {
    if (plan.has_bf16) return h.pack(tb, k, n, b, ldb);
  }
  f.pack(tb, k, n, b, ldb, plan.isa);
}

}  // namespace

template <typename T>
void LSTMPlan<T>::pack(std::int64_t I, std::int64_t H, const T* w) {
  const std::int64_t G = 4 * H;
  isa = core::active_isa();
  w_x.pack(Trans::kNo, I, G, w, G, isa);
  for (std::int64_t q = 0; q < 4; ++q) w_h[q].pack(Trans::kNo, H, H, w + I * G + q * H, G, isa);
  has_bf16 = has_x_t = has_h_t = false;
}

// The packs of block_lstm.cc's bfloat16 products, made once (PackedBBf16::pack on the active
// path, as the kernel without a plan packs them per call; the one-shot d_x product packs w_xᵀ).
template <typename T>
void LSTMPlan<T>::pack_bf16(std::int64_t I, std::int64_t H, const float* w) {
  const std::int64_t G = 4 * H;
  isa = core::active_isa();
  has_bf16 = false;
  bf16.w_x.pack(Trans::kNo, I, G, w, G);
  for (std::int64_t q = 0; q < 4; ++q) bf16.w_h[q].pack(Trans::kNo, H, H, w + I * G + q * H, G);
  has_x_t = has_h_t = false;
  has_bf16 = true;
}

template <typename T>
void LSTMPlan<T>::pack_transposed(std::int64_t I, std::int64_t H, const T* w, bool x_t, bool h_t) {
  const std::int64_t G = 4 * H;
  if (h_t && !has_h_t) {
    pack_of_kind(*this, w_h_t, bf16.w_h_t, Trans::kYes, G, H, w + I * G, G);
    has_h_t = true;
  }
  if (x_t && !has_x_t) {
    pack_of_kind(*this, w_x_t, bf16.w_x_t, Trans::kYes, G, I, w, G);
    has_x_t = true;
  }
}

template <typename T>
void GRUPlan<T>::pack(std::int64_t I, std::int64_t H, const T* w_ru, const T* w_c) {
  isa = core::active_isa();
  w_ru_x.pack(Trans::kNo, I, 2 * H, w_ru, 2 * H, isa);
  w_c_x.pack(Trans::kNo, I, H, w_c, H, isa);
  w_r_h.pack(Trans::kNo, H, H, w_ru + I * 2 * H, 2 * H, isa);
  w_u_h.pack(Trans::kNo, H, H, w_ru + I * 2 * H + H, 2 * H, isa);
  w_c_h.pack(Trans::kNo, H, H, w_c + I * H, H, isa);
  has_bf16 = has_x_t = has_h_t = false;
}

// The packs of block_gru.cc's bfloat16 products, made once (as LSTMPlan::pack_bf16).
template <typename T>
void GRUPlan<T>::pack_bf16(std::int64_t I, std::int64_t H, const float* w_ru, const float* w_c) {
  isa = core::active_isa();
  has_bf16 = false;
  bf16.w_ru_x.pack(Trans::kNo, I, 2 * H, w_ru, 2 * H);
  bf16.w_c_x.pack(Trans::kNo, I, H, w_c, H);
  bf16.w_r_h.pack(Trans::kNo, H, H, w_ru + I * 2 * H, 2 * H);
  bf16.w_u_h.pack(Trans::kNo, H, H, w_ru + I * 2 * H + H, 2 * H);
  bf16.w_c_h.pack(Trans::kNo, H, H, w_c + I * H, H);
  has_x_t = has_h_t = false;
  has_bf16 = true;
}

template <typename T>
void GRUPlan<T>::pack_transposed(std::int64_t I, std::int64_t H, const T* w_ru, const T* w_c,
                                 bool x_t, bool h_t) {
  if (h_t && !has_h_t) {
    pack_of_kind(*this, w_ru_h_t, bf16.w_ru_h_t, Trans::kYes, 2 * H, H, w_ru + I * 2 * H, 2 * H);
    pack_of_kind(*this, w_c_h_t, bf16.w_c_h_t, Trans::kYes, H, H, w_c + I * H, H);
    has_h_t = true;
  }
  if (x_t && !has_x_t) {
    pack_of_kind(*this, w_ru_x_t, bf16.w_ru_x_t, Trans::kYes, 2 * H, I, w_ru, 2 * H);
    pack_of_kind(*this, w_c_x_t, bf16.w_c_x_t, Trans::kYes, H, I, w_c, H);
    has_x_t = true;
  }
}

template <typename T>
void GRUResetAfterPlan<T>::pack(std::int64_t I, std::int64_t H, const T* wi, const T* wh) {
  const std::int64_t H3 = 3 * H;
  isa = core::active_isa();
  w_i.pack(Trans::kNo, I, H3, wi, H3, isa);
  w_h_r.pack(Trans::kNo, H, H, wh, H3, isa);
  w_h_z.pack(Trans::kNo, H, H, wh + H, H3, isa);
  w_h_n.pack(Trans::kNo, H, H, wh + 2 * H, H3, isa);
  has_bf16 = has_x_t = has_h_t = false;
}

// The packs of block_gru_reset_after.cc's bfloat16 products, made once (as LSTMPlan::pack_bf16).
template <typename T>
void GRUResetAfterPlan<T>::pack_bf16(std::int64_t I, std::int64_t H, const float* wi,
                                     const float* wh) {
  const std::int64_t H3 = 3 * H;
  isa = core::active_isa();
  has_bf16 = false;
  bf16.w_i.pack(Trans::kNo, I, H3, wi, H3);
  bf16.w_h_r.pack(Trans::kNo, H, H, wh, H3);
  bf16.w_h_z.pack(Trans::kNo, H, H, wh + H, H3);
  bf16.w_h_n.pack(Trans::kNo, H, H, wh + 2 * H, H3);
  has_x_t = has_h_t = false;
  has_bf16 = true;
}

template <typename T>
void GRUResetAfterPlan<T>::pack_transposed(std::int64_t I, std::int64_t H, const T* wi, const T* wh,
                                           bool x_t, bool h_t) {
  const std::int64_t H3 = 3 * H;
  if (h_t && !has_h_t) {
    pack_of_kind(*this, w_h_t, bf16.w_h_t, Trans::kYes, H3, H, wh, H3);
    has_h_t = true;
  }
  if (x_t && !has_x_t) {
    pack_of_kind(*this, w_i_t, bf16.w_i_t, Trans::kYes, H3, I, wi, H3);
    has_x_t = true;
  }
}

template struct LSTMPlan<float>;
template struct LSTMPlan<double>;
template struct GRUPlan<float>;
template struct GRUPlan<double>;
template struct GRUResetAfterPlan<float>;
template struct GRUResetAfterPlan<double>;

}  // namespace blockrnn

namespace blockrnn::cpu {

// fwd: [S·B, Gp];  bwd: [S·B, Gp] + with lengths [N, Gp], [N, I], [N, H] + d_gates [N, 4H]
// packed + the carries [B, H] each when no d_cs_prev / d_h_prev is wanted
std::int64_t block_lstm_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                        std::int64_t H) {
  const std::int64_t SB = S * B;
  return SB * (2 * padded_ld(4 * H) + I + H) + gemm::packed_elems_bound(SB, 4 * H) + 2 * B * H;
}

// fwd: [S·B, R], [B, H];  bwd: [S·B, R], 2 [S·B, H], [B, H] + with lengths [N, R], [N, I],
// 3 [N, H] + d_ru [N, 2H] and d_c_bar [N, H] packed + the carry [B, H] when no d_h_prev is wanted
std::int64_t block_gru_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                       std::int64_t H) {
  const std::int64_t SB = S * B;
  return SB * (2 * padded_ld(2 * H) + 5 * H + I) + 2 * B * H + gemm::packed_elems_bound(SB, 2 * H) +
         gemm::packed_elems_bound(SB, H);
}

// fwd: [S·B, R], [B, R2];  bwd: [S·B, R], [S·B, H] + with lengths [N, R], [N, H], [N, I] + d_gh,
// then d_gi, [N, 3H] packed + the carry [B, H] when no d_h_prev is wanted
std::int64_t block_gru_reset_after_workspace_elems(std::int64_t S, std::int64_t B, std::int64_t I,
                                                   std::int64_t H) {
  const std::int64_t SB = S * B;
  return SB * (2 * padded_ld(3 * H) + 2 * H + I) + B * padded_ld(2 * H) + B * H +
         gemm::packed_elems_bound(SB, 3 * H);
}

}  // namespace blockrnn::cpu
