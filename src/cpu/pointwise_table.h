// The float32 fused element-wise kernels of one ISA path (lstm_pointwise.h, gru_pointwise.h) and
// its table (pointwise_dispatch.h), compiled once per path: pointwise_avx512.cc,
// pointwise_avx2.cc and pointwise_baseline.cc each define their table as
// pointwise_table<Path>() of a tag type of their own, with their own instruction-set flags
// (CMakeLists.txt); pointwise_f32() returns the table of the path chosen at run time
// (core/isa.h).
//
// `flatten` inlines the generic row kernels and the branch-free activations of cpu/fast_math.h
// into each function, so the loops are vectorised for that path's ISA. The tag is declared in
// an anonymous namespace, so PointwiseRowsF32<Path>'s functions have internal linkage: no copy
// compiled for one ISA can be picked by the linker for another (the object files of these TUs
// define no weak symbols; tests/cpp/check_isa_objects.sh checks). The math is the generic
// kernels', operation for operation (with -ffp-contract=off): every path gives the same bits.
#pragma once

#include <cstdint>

#include "cpu/gru_pointwise.h"
#include "cpu/lstm_pointwise.h"
#include "cpu/pointwise_dispatch.h"

namespace blockrnn::cpu {

// The row kernels of the path `Path` (a tag type of the path's file); see the header comment.
template <class Path>
struct PointwiseRowsF32 {
  [[gnu::flatten]] static void lstm_fwd_rows(const LSTMFwdParams<float>& p,
                                             const LSTMFwdStep<float>& s, std::int64_t n0,
                                             std::int64_t n1, std::int64_t j0, std::int64_t j1) {
    detail::lstm_rows_generic(p, s, n0, n1, j0, j1);
  }

  [[gnu::flatten]] static void lstm_bwd_rows(const LSTMBwdParams<float>& p,
                                             const LSTMBwdStep<float>& s, std::int64_t n0,
                                             std::int64_t n1, std::int64_t j0, std::int64_t j1) {
    detail::lstm_rows_generic(p, s, n0, n1, j0, j1);
  }

  [[gnu::flatten]] static void gru_fwd_gates_row(std::int64_t n, std::int64_t H,
                                                 const float* ru_bar, const float* b_ru,
                                                 const float* h_prev, float* r, float* u,
                                                 float* hr) {
    detail::gru_fwd_gates_row_generic(n, H, ru_bar, b_ru, h_prev, r, u, hr);
  }

  [[gnu::flatten]] static void gru_fwd_candidate_row(std::int64_t H, const float* b_c,
                                                     const float* u, const float* h_prev, float* c,
                                                     float* h) {
    detail::gru_fwd_candidate_row_generic(H, b_c, u, h_prev, c, h);
  }

  [[gnu::flatten]] static void gru_bwd_cu_row(std::int64_t H, const float* u, const float* c,
                                              const float* h_prev, const float* d_h, float* d_c_bar,
                                              float* d_u_bar) {
    detail::gru_bwd_cu_row_generic(H, u, c, h_prev, d_h, d_c_bar, d_u_bar);
  }

  [[gnu::flatten]] static void gru_bwd_r_row(std::int64_t H, const float* d_hr, const float* h_prev,
                                             const float* r, float* d_r_bar) {
    detail::gru_bwd_r_row_generic(H, d_hr, h_prev, r, d_r_bar);
  }

  [[gnu::flatten]] static void gru_bwd_h_prev_row(std::int64_t H, const float* d_hr, const float* r,
                                                  const float* d_h, const float* u, float* g) {
    detail::gru_bwd_h_prev_row_generic(H, d_hr, r, d_h, u, g);
  }

  [[gnu::flatten]] static void gru_reset_after_fwd_row(std::int64_t n, std::int64_t H,
                                                       const float* gi, const float* b_i,
                                                       const float* gh_rz, const float* b_h,
                                                       const float* h_prev, float* r, float* u,
                                                       float* nn, float* hn, float* h) {
    detail::gru_reset_after_fwd_row_generic(n, H, gi, b_i, gh_rz, b_h, h_prev, r, u, nn, hn, h);
  }

  [[gnu::flatten]] static void gru_reset_after_bwd_row(std::int64_t n, std::int64_t H,
                                                       const float* r, const float* u,
                                                       const float* nn, const float* hn,
                                                       const float* h_prev, const float* d_h,
                                                       float* carry, float* d_gh, float* d_n_bar) {
    detail::gru_reset_after_bwd_row_generic(n, H, r, u, nn, hn, h_prev, d_h, carry, d_gh, d_n_bar);
  }
};

// The table of the path `Path`: a row per kernel.
template <class Path>
constexpr PointwiseF32 pointwise_table() {
  using Rows = PointwiseRowsF32<Path>;
  return {
      .lstm_fwd_rows = Rows::lstm_fwd_rows,
      .lstm_bwd_rows = Rows::lstm_bwd_rows,
      .gru_fwd_gates_row = Rows::gru_fwd_gates_row,
      .gru_fwd_candidate_row = Rows::gru_fwd_candidate_row,
      .gru_bwd_cu_row = Rows::gru_bwd_cu_row,
      .gru_bwd_r_row = Rows::gru_bwd_r_row,
      .gru_bwd_h_prev_row = Rows::gru_bwd_h_prev_row,
      .gru_reset_after_fwd_row = Rows::gru_reset_after_fwd_row,
      .gru_reset_after_bwd_row = Rows::gru_reset_after_bwd_row,
  };
}

}  // namespace blockrnn::cpu
