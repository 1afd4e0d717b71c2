// Run-time dispatch of the float32 element-wise kernels to the ISA path of core/isa.h (the
// per-path definitions are pointwise_impl.inc compiled by pointwise_{avx512,avx2,baseline}.cc).
#include "core/isa.h"
#include "cpu/gru_pointwise.h"
#include "cpu/lstm_pointwise.h"

namespace blockrnn::cpu::isa {

#define BLOCKRNN_DECLARE_POINTWISE_PATH(NS)                                                        \
  namespace NS {                                                                                   \
  void lstm_rows_f32(const LSTMFwdParams<float>&, const LSTMFwdStep<float>&, std::int64_t,         \
                     std::int64_t, std::int64_t, std::int64_t);                                    \
  void lstm_rows_f32(const LSTMBwdParams<float>&, const LSTMBwdStep<float>&, std::int64_t,         \
                     std::int64_t, std::int64_t, std::int64_t);                                    \
  void gru_fwd_gates_row_f32(std::int64_t, std::int64_t, const float*, const float*, const float*, \
                             float*, float*, float*);                                              \
  void gru_fwd_candidate_row_f32(std::int64_t, const float*, const float*, const float*, float*,   \
                                 float*);                                                          \
  void gru_bwd_cu_row_f32(std::int64_t, const float*, const float*, const float*, const float*,    \
                          float*, float*);                                                         \
  void gru_bwd_r_row_f32(std::int64_t, const float*, const float*, const float*, float*);          \
  void gru_bwd_h_prev_row_f32(std::int64_t, const float*, const float*, const float*,              \
                              const float*, float*);                                               \
  void gru_reset_after_fwd_row_f32(std::int64_t, std::int64_t, const float*, const float*,         \
                                   const float*, const float*, const float*, float*, float*,       \
                                   float*, float*, float*);                                        \
  void gru_reset_after_bwd_row_f32(std::int64_t, std::int64_t, const float*, const float*,         \
                                   const float*, const float*, const float*, const float*, float*, \
                                   float*, float*);                                                \
  }
BLOCKRNN_DECLARE_POINTWISE_PATH(avx512)
BLOCKRNN_DECLARE_POINTWISE_PATH(avx2)
BLOCKRNN_DECLARE_POINTWISE_PATH(baseline)
#undef BLOCKRNN_DECLARE_POINTWISE_PATH

// Calls FN of the active path with the given arguments.
#define BLOCKRNN_DISPATCH(FN, ...)    \
  switch (core::active_isa()) {       \
    case Isa::kAvx512:                \
      return avx512::FN(__VA_ARGS__); \
    case Isa::kAvx2:                  \
      return avx2::FN(__VA_ARGS__);   \
    case Isa::kBaseline:              \
      break;                          \
  }                                   \
  return baseline::FN(__VA_ARGS__)

void lstm_rows_f32(const LSTMFwdParams<float>& p, const LSTMFwdStep<float>& s, std::int64_t n0,
                   std::int64_t n1, std::int64_t j0, std::int64_t j1) {
  BLOCKRNN_DISPATCH(lstm_rows_f32, p, s, n0, n1, j0, j1);
}

void lstm_rows_f32(const LSTMBwdParams<float>& p, const LSTMBwdStep<float>& s, std::int64_t n0,
                   std::int64_t n1, std::int64_t j0, std::int64_t j1) {
  BLOCKRNN_DISPATCH(lstm_rows_f32, p, s, n0, n1, j0, j1);
}

void gru_fwd_gates_row_f32(std::int64_t n, std::int64_t H, const float* ru_bar, const float* b_ru,
                           const float* h_prev, float* r, float* u, float* hr) {
  BLOCKRNN_DISPATCH(gru_fwd_gates_row_f32, n, H, ru_bar, b_ru, h_prev, r, u, hr);
}

void gru_fwd_candidate_row_f32(std::int64_t H, const float* b_c, const float* u,
                               const float* h_prev, float* c, float* h) {
  BLOCKRNN_DISPATCH(gru_fwd_candidate_row_f32, H, b_c, u, h_prev, c, h);
}

void gru_bwd_cu_row_f32(std::int64_t H, const float* u, const float* c, const float* h_prev,
                        const float* d_h, float* d_c_bar, float* d_u_bar) {
  BLOCKRNN_DISPATCH(gru_bwd_cu_row_f32, H, u, c, h_prev, d_h, d_c_bar, d_u_bar);
}

void gru_bwd_r_row_f32(std::int64_t H, const float* d_hr, const float* h_prev, const float* r,
                       float* d_r_bar) {
  BLOCKRNN_DISPATCH(gru_bwd_r_row_f32, H, d_hr, h_prev, r, d_r_bar);
}

void gru_bwd_h_prev_row_f32(std::int64_t H, const float* d_hr, const float* r, const float* d_h,
                            const float* u, float* g) {
  BLOCKRNN_DISPATCH(gru_bwd_h_prev_row_f32, H, d_hr, r, d_h, u, g);
}

void gru_reset_after_fwd_row_f32(std::int64_t n, std::int64_t H, const float* gi, const float* b_i,
                                 const float* gh_rz, const float* b_h, const float* h_prev,
                                 float* r, float* u, float* nn, float* hn, float* h) {
  BLOCKRNN_DISPATCH(gru_reset_after_fwd_row_f32, n, H, gi, b_i, gh_rz, b_h, h_prev, r, u, nn, hn,
                    h);
}

void gru_reset_after_bwd_row_f32(std::int64_t n, std::int64_t H, const float* r, const float* u,
                                 const float* nn, const float* hn, const float* h_prev,
                                 const float* d_h, float* carry, float* d_gh, float* d_n_bar) {
  BLOCKRNN_DISPATCH(gru_reset_after_bwd_row_f32, n, H, r, u, nn, hn, h_prev, d_h, carry, d_gh,
                    d_n_bar);
}

#undef BLOCKRNN_DISPATCH

}  // namespace blockrnn::cpu::isa
