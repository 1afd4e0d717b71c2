// Runtime ISA dispatch of the float32 element-wise kernels (lstm_pointwise.h, gru_pointwise.h).
//
// Each function below is compiled three times by GCC's target_clones — for x86-64-v4
// (AVX-512 F/BW/DQ/VL), x86-64-v3 (AVX2 + FMA) and the baseline — and the dynamic loader binds
// the best clone for the running CPU once, at load time (an ifunc resolver). `flatten` inlines
// the generic row kernels and the branch-free activations of core/fast_math.h into every clone,
// so each clone's loops are vectorised for its own ISA (checked with objdump: zmm in the v4
// clone, ymm in the v3 clone). The math is the generic kernels' — only the instructions differ.
#include "cpu/gru_pointwise.h"
#include "cpu/lstm_pointwise.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define BLOCKRNN_ISA_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
// Other compilers (clang rejects target_clones together with flatten) and other CPUs: one
// generic build of each function, vectorised for the compiler's target flags. Correct
// everywhere; the release build (GCC) is the fast one. The fuzz preset uses this path.
#define BLOCKRNN_ISA_CLONES
#endif

namespace blockrnn::cpu::isa {

BLOCKRNN_ISA_CLONES
void lstm_fwd_rows_f32(const LSTMFwdParams<float>& p, const LSTMFwdStep<float>& s, std::int64_t n0,
                       std::int64_t n1) {
  if (p.use_peephole) {
    detail::lstm_fwd_rows<float, true>(p, s, n0, n1);
  } else {
    detail::lstm_fwd_rows<float, false>(p, s, n0, n1);
  }
}

BLOCKRNN_ISA_CLONES
void lstm_bwd_rows_f32(const LSTMBwdParams<float>& p, const LSTMBwdStep<float>& s, std::int64_t n0,
                       std::int64_t n1) {
  if (p.use_peephole) {
    detail::lstm_bwd_rows<float, true>(p, s, n0, n1);
  } else {
    detail::lstm_bwd_rows<float, false>(p, s, n0, n1);
  }
}

BLOCKRNN_ISA_CLONES
void gru_fwd_gates_row_f32(std::int64_t H, const float* ru_bar, const float* b_ru,
                           const float* h_prev, float* r, float* u, float* hr) {
  detail::gru_fwd_gates_row_generic(H, ru_bar, b_ru, h_prev, r, u, hr);
}

BLOCKRNN_ISA_CLONES
void gru_fwd_candidate_row_f32(std::int64_t H, const float* b_c, const float* u,
                               const float* h_prev, float* c, float* h) {
  detail::gru_fwd_candidate_row_generic(H, b_c, u, h_prev, c, h);
}

BLOCKRNN_ISA_CLONES
void gru_bwd_cu_row_f32(std::int64_t H, const float* u, const float* c, const float* h_prev,
                        const float* d_h, float* d_c_bar, float* d_u_bar) {
  detail::gru_bwd_cu_row_generic(H, u, c, h_prev, d_h, d_c_bar, d_u_bar);
}

BLOCKRNN_ISA_CLONES
void gru_bwd_r_row_f32(std::int64_t H, const float* d_hr, const float* h_prev, const float* r,
                       float* d_r_bar) {
  detail::gru_bwd_r_row_generic(H, d_hr, h_prev, r, d_r_bar);
}

BLOCKRNN_ISA_CLONES
void gru_bwd_h_prev_row_f32(std::int64_t H, const float* d_hr, const float* r, const float* d_h,
                            const float* u, float* g) {
  detail::gru_bwd_h_prev_row_generic(H, d_hr, r, d_h, u, g);
}

}  // namespace blockrnn::cpu::isa
