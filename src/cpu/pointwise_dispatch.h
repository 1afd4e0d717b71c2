// The float32 fused element-wise kernels of one ISA path, as a table of plain rows: the
// element-wise kernels of lstm_pointwise.h and gru_pointwise.h run float32 through the table of
// the path core/isa.h chose at run time (AVX-512, AVX2+FMA or baseline), every other element
// type through the generic templates (detail::*_generic) the tables' functions are compiled from.
// Each path's table is pointwise_table<Path>() of src/cpu/pointwise_table.h, compiled once per
// path (pointwise_avx512.cc, pointwise_avx2.cc, pointwise_baseline.cc) with that path's flags.
#pragma once

#include <cstdint>

namespace blockrnn::cpu {

template <typename T>
struct LSTMFwdParams;
template <typename T>
struct LSTMFwdStep;
template <typename T>
struct LSTMBwdParams;
template <typename T>
struct LSTMBwdStep;

struct PointwiseF32 {
  // lstm_pointwise.h: one step's rows [n0, n1), cell columns [j0, j1).
  void (*lstm_fwd_rows)(const LSTMFwdParams<float>& p, const LSTMFwdStep<float>& s, std::int64_t n0,
                        std::int64_t n1, std::int64_t j0, std::int64_t j1);
  void (*lstm_bwd_rows)(const LSTMBwdParams<float>& p, const LSTMBwdStep<float>& s, std::int64_t n0,
                        std::int64_t n1, std::int64_t j0, std::int64_t j1);
  // gru_pointwise.h: one row each.
  void (*gru_fwd_gates_row)(std::int64_t n, std::int64_t H, const float* ru_bar, const float* b_ru,
                            const float* h_prev, float* r, float* u, float* hr);
  void (*gru_fwd_candidate_row)(std::int64_t H, const float* b_c, const float* u,
                                const float* h_prev, float* c, float* h);
  void (*gru_bwd_cu_row)(std::int64_t H, const float* u, const float* c, const float* h_prev,
                         const float* d_h, float* d_c_bar, float* d_u_bar);
  void (*gru_bwd_r_row)(std::int64_t H, const float* d_hr, const float* h_prev, const float* r,
                        float* d_r_bar);
  void (*gru_bwd_h_prev_row)(std::int64_t H, const float* d_hr, const float* r, const float* d_h,
                             const float* u, float* g);
  void (*gru_reset_after_fwd_row)(std::int64_t n, std::int64_t H, const float* gi, const float* b_i,
                                  const float* gh_rz, const float* b_h, const float* h_prev,
                                  float* r, float* u, float* nn, float* hn, float* h);
  void (*gru_reset_after_bwd_row)(std::int64_t n, std::int64_t H, const float* r, const float* u,
                                  const float* nn, const float* hn, const float* h_prev,
                                  const float* d_h, float* carry, float* d_gh, float* d_n_bar);
};

extern const PointwiseF32 kAvx512Pointwise;
extern const PointwiseF32 kAvx2Pointwise;
extern const PointwiseF32 kBaselinePointwise;

// The table of the active ISA path (core::active_isa()).
const PointwiseF32& pointwise_f32();

}  // namespace blockrnn::cpu
