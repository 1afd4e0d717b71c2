// Fused element-wise LSTM kernels: everything of one LSTM step that is not a GEMM, in one pass
// over memory. Shared by the cell ops (src/cpu/lstm_cell.cc) and the sequence ops
// (src/cpu/block_lstm.cc), which call them once per time step. STABLE INTERFACE: other files
// depend on it; change it only together with its callers.
//
// Shape letters: B rows (the batch of one step), H cell size. Gate layout (ICFO or IFCO,
// docs/ops.md) decides only the column blocks of `gates`, `b` and `d_gates`; see
// lstm_gate_blocks().
//
// Forward, per element (groupings exactly as TensorFlow's CPU kernel, docs/ops.md):
//   z_x = gates[:, block_x] + b[block_x]            (b may be null: bias already in gates)
//   i  = σ( z_i [+ cs_prev⊙wci] )
//   ci = tanh( z_c )
//   f  = σ( (z_f + forget_bias) [+ cs_prev⊙wcf] )
//   cs = i⊙ci + f⊙cs_prev;   if cell_clip > 0: cs = min(max(cs, −cell_clip), cell_clip)
//   co = tanh(cs)
//   o  = σ( z_o [+ cs⊙wco] )                         (peephole on the new, clipped cs)
//   h  = o⊙co
// Backward, per element (docs/ops.md; the clip is straight-through, as in TensorFlow):
//   dh  = d_h [+ h_grad_carry];   dcs_in = d_cs [+ cs_grad_carry]
//   do  = ((o⊙(1−o))⊙dh)⊙co
//   dcs = ((1−co⊙co)⊙dh)⊙o + dcs_in      [then + do⊙wco]
//   dci = ((1−ci⊙ci)⊙dcs)⊙i
//   df  = ((f⊙(1−f))⊙dcs)⊙cs_prev
//   di  = ((i⊙(1−i))⊙dcs)⊙ci
//   d_gates = di | dci | df | do in the layout's column blocks
//   d_cs_prev = dcs⊙f                 [then (· + di⊙wci) + df⊙wcf]
// Peephole and bias gradients are column reductions over the rows (lstm_peephole_grads and
// column_sums of sequence_common.h):  d_wci = Σ_n di⊙cs_prev;  d_wcf = Σ_n df⊙cs_prev;
//                   d_wco = Σ_n do⊙cs;  d_b = Σ_n d_gates.
// [..] terms are present only with use_peephole; without it wci/wcf/wco are never read.
//
// T is float or double (float16 is computed in float32 by the caller, docs/design.md). All pointers
// are dense row-major with the shapes given; the row functions process rows [n0, n1) and touch
// nothing outside them, so callers may split rows over threads themselves. Outputs must not
// alias inputs, except where noted.
#pragma once

#include <cstdint>
#include <limits>

#include <type_traits>

#include "core/parallel.h"
#include "cpu/fast_math.h"
#include "cpu/pointwise_dispatch.h"
#include "kernel/lstm_cell.h"

namespace blockrnn::cpu {

// Per-op constants of the forward pass.
template <typename T>
struct LSTMFwdParams {
  std::int64_t H = 0;                     // cell size
  LSTMLayout layout = LSTMLayout::kICFO;  // column blocks of `gates` and `b`
  T forget_bias = T(0);                   // BlockLSTMV2: 0
  T cell_clip = T(0);                     // clip only when > 0 (0, negative and NaN disable it)
  bool use_peephole = false;
  const T* b = nullptr;    // [4H] bias in `layout`, or nullptr when `gates` already holds it
  const T* wci = nullptr;  // [H]  (read only with use_peephole)
  const T* wcf = nullptr;  // [H]
  const T* wco = nullptr;  // [H]
};

// The tensors of one forward step.
template <typename T>
struct LSTMFwdStep {
  const T* gates = nullptr;    // [B, 4H]  [x, h_prev]·w (+ b when LSTMFwdParams::b is null)
  const T* cs_prev = nullptr;  // [B, H]   state entering the step
  T* i = nullptr;              // [B, H]
  T* cs = nullptr;             // [B, H]
  T* f = nullptr;              // [B, H]
  T* o = nullptr;              // [B, H]
  T* ci = nullptr;             // [B, H]
  T* co = nullptr;             // [B, H]
  T* h = nullptr;              // [B, H]
  std::int64_t gates_ld = 0;   // row stride of gates (0: dense, 4H)
};

// Per-op constants of the backward pass.
template <typename T>
struct LSTMBwdParams {
  std::int64_t H = 0;
  LSTMLayout layout = LSTMLayout::kICFO;  // column blocks of `d_gates`
  bool use_peephole = false;
  const T* wci = nullptr;  // [H]  (read only with use_peephole)
  const T* wcf = nullptr;  // [H]
  const T* wco = nullptr;  // [H]
};

// The tensors of one backward step.
template <typename T>
struct LSTMBwdStep {
  const T* cs_prev = nullptr;  // [B, H]  state that entered the step
  const T* i = nullptr;        // [B, H]  forward outputs of the step
  const T* cs = nullptr;       // [B, H]
  const T* f = nullptr;        // [B, H]
  const T* o = nullptr;        // [B, H]
  const T* ci = nullptr;       // [B, H]
  const T* co = nullptr;       // [B, H]
  // ∂L/∂cs and ∂L/∂h: the external parts, or the totals when no carries are given.
  const T* d_cs = nullptr;           // [B, H]
  const T* d_h = nullptr;            // [B, H]
  const T* cs_grad_carry = nullptr;  // [B, H] optional, added to d_cs (recurrent carry)
  const T* h_grad_carry = nullptr;   // [B, H] optional, added to d_h
  T* d_gates = nullptr;              // [B, 4H] ∂L/∂gates in the layout
  // May alias cs_grad_carry (each element is read before it is written).
  T* d_cs_prev = nullptr;       // [B, H]
  std::int64_t d_gates_ld = 0;  // row stride of d_gates (0: dense, 4H)
};

// The pass constants of an op from its kernel arguments (LSTMCell*Args or BlockLSTM*Args, which
// name them alike).
template <typename T, template <typename> class Args>
LSTMFwdParams<T> lstm_fwd_params(std::int64_t H, const Args<T>& a) {
  return {H, a.layout, a.forget_bias, a.cell_clip, a.use_peephole, a.b, a.wci, a.wcf, a.wco};
}
template <typename T, template <typename> class Args>
LSTMBwdParams<T> lstm_bwd_params(std::int64_t H, const Args<T>& a) {
  return {H, a.layout, a.use_peephole, a.wci, a.wcf, a.wco};
}

namespace detail {

// The forward pass over rows [n0, n1) and columns [j0, j1), peephole terms and the bias compiled
// in or out (a load under a run-time condition keeps GCC from vectorising the loop for AVX2,
// which has no masked arithmetic).
template <typename T, bool kPeephole, bool kBias>
inline void lstm_rows(const LSTMFwdParams<T>& p, const LSTMFwdStep<T>& s, std::int64_t n0,
                      std::int64_t n1, std::int64_t j0, std::int64_t j1) {
  const std::int64_t H = p.H;
  const LSTMGateBlocks g = lstm_gate_blocks(p.layout);
  const T fb = p.forget_bias;
  // The clip bound: cell_clip when positive, else +inf, which clips nothing (a NaN cell_clip
  // too: `cell_clip > 0` is false). One select per bound and no run-time branch in the loop.
  const T clip = p.cell_clip > T(0) ? p.cell_clip : std::numeric_limits<T>::infinity();
  for (std::int64_t n = n0; n < n1; ++n) {
    const T* gates = s.gates + n * (s.gates_ld ? s.gates_ld : 4 * H);
    const T* gi = gates + g.i * H;
    const T* gc = gates + g.c * H;
    const T* gf = gates + g.f * H;
    const T* go = gates + g.o * H;
    const T* csp = s.cs_prev + n * H;
    const std::int64_t r = n * H;
#pragma GCC ivdep
    for (std::int64_t j = j0; j < j1; ++j) {
      T zi = gi[j], zc = gc[j], zf = gf[j], zo = go[j];
      if constexpr (kBias) {
        zi = zi + p.b[g.i * H + j];
        zc = zc + p.b[g.c * H + j];
        zf = zf + p.b[g.f * H + j];
        zo = zo + p.b[g.o * H + j];
      }
      const T cp = csp[j];
      if constexpr (kPeephole) zi = zi + cp * p.wci[j];
      const T vi = act_sigmoid(zi);
      const T vci = act_tanh(zc);
      zf = zf + fb;
      if constexpr (kPeephole) zf = zf + cp * p.wcf[j];
      const T vf = act_sigmoid(zf);
      T vcs = vi * vci + vf * cp;
      // min(max(cs, −clip), clip); a NaN cs stays NaN, as in TensorFlow
      vcs = vcs < -clip ? -clip : vcs;
      vcs = vcs > clip ? clip : vcs;
      const T vco = act_tanh(vcs);
      if constexpr (kPeephole) zo = zo + vcs * p.wco[j];
      const T vo = act_sigmoid(zo);
      s.i[r + j] = vi;
      s.ci[r + j] = vci;
      s.f[r + j] = vf;
      s.cs[r + j] = vcs;
      s.co[r + j] = vco;
      s.o[r + j] = vo;
      s.h[r + j] = vo * vco;
    }
  }
}

// The backward pass likewise.
template <typename T, bool kPeephole>
inline void lstm_rows(const LSTMBwdParams<T>& p, const LSTMBwdStep<T>& s, std::int64_t n0,
                      std::int64_t n1, std::int64_t j0, std::int64_t j1) {
  const std::int64_t H = p.H;
  const LSTMGateBlocks g = lstm_gate_blocks(p.layout);
  for (std::int64_t n = n0; n < n1; ++n) {
    const std::int64_t r = n * H;
    T* dg = s.d_gates + n * (s.d_gates_ld ? s.d_gates_ld : 4 * H);
#pragma GCC ivdep
    for (std::int64_t j = j0; j < j1; ++j) {
      const std::int64_t e = r + j;
      const T i = s.i[e], f = s.f[e], o = s.o[e], ci = s.ci[e], co = s.co[e], cp = s.cs_prev[e];
      T dh = s.d_h[e];
      if (s.h_grad_carry != nullptr) dh = dh + s.h_grad_carry[e];
      T dcs_in = s.d_cs[e];
      if (s.cs_grad_carry != nullptr) dcs_in = dcs_in + s.cs_grad_carry[e];
      const T d_o = ((o * (T(1) - o)) * dh) * co;
      T dcs = ((T(1) - co * co) * dh) * o + dcs_in;
      if constexpr (kPeephole) dcs = dcs + d_o * p.wco[j];
      const T dci = ((T(1) - ci * ci) * dcs) * i;
      const T df = ((f * (T(1) - f)) * dcs) * cp;
      const T di = ((i * (T(1) - i)) * dcs) * ci;
      dg[g.i * H + j] = di;
      dg[g.c * H + j] = dci;
      dg[g.f * H + j] = df;
      dg[g.o * H + j] = d_o;
      T dcsp = dcs * f;
      if constexpr (kPeephole) dcsp = (dcsp + di * p.wci[j]) + df * p.wcf[j];
      s.d_cs_prev[e] = dcsp;
    }
  }
}

// The forward pass with the peephole terms as p.use_peephole says and the bias when p.b is given.
template <typename T>
inline void lstm_rows_generic(const LSTMFwdParams<T>& p, const LSTMFwdStep<T>& s, std::int64_t n0,
                              std::int64_t n1, std::int64_t j0, std::int64_t j1) {
  if (p.use_peephole) {
    if (p.b != nullptr) return lstm_rows<T, true, true>(p, s, n0, n1, j0, j1);
    return lstm_rows<T, true, false>(p, s, n0, n1, j0, j1);
  }
  if (p.b != nullptr) return lstm_rows<T, false, true>(p, s, n0, n1, j0, j1);
  lstm_rows<T, false, false>(p, s, n0, n1, j0, j1);
}

// The backward pass with the peephole terms as p.use_peephole says.
template <typename T>
inline void lstm_rows_generic(const LSTMBwdParams<T>& p, const LSTMBwdStep<T>& s, std::int64_t n0,
                              std::int64_t n1, std::int64_t j0, std::int64_t j1) {
  if (p.use_peephole) {
    lstm_rows<T, true>(p, s, n0, n1, j0, j1);
  } else {
    lstm_rows<T, false>(p, s, n0, n1, j0, j1);
  }
}

}  // namespace detail

// float32 rows run the table of the active ISA path (pointwise_dispatch.h), every other type
// the generic code the tables are compiled from.
//
// Forward element-wise pass over rows [n0, n1) and cell columns [j0, j1) of one step (all
// columns by default). A column range must start at a multiple of the vector width (the
// sequence ops split at GEMM panel boundaries) so that every element takes the same path
// through the vectorised loop as in a whole-row pass.
template <typename T>
inline void lstm_fwd_pointwise_rows(const LSTMFwdParams<T>& p, const LSTMFwdStep<T>& s,
                                    std::int64_t n0, std::int64_t n1, std::int64_t j0 = 0,
                                    std::int64_t j1 = -1) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().lstm_fwd_rows(p, s, n0, n1, j0, j1 < 0 ? p.H : j1);
  } else {
    detail::lstm_rows_generic(p, s, n0, n1, j0, j1 < 0 ? p.H : j1);
  }
}

// Backward element-wise pass over rows [n0, n1) and cell columns [j0, j1) of one step (all
// columns by default; the same rule on j0 as the forward): d_gates and d_cs_prev.
template <typename T>
inline void lstm_bwd_pointwise_rows(const LSTMBwdParams<T>& p, const LSTMBwdStep<T>& s,
                                    std::int64_t n0, std::int64_t n1, std::int64_t j0 = 0,
                                    std::int64_t j1 = -1) {
  if constexpr (std::is_same_v<T, float>) {
    pointwise_f32().lstm_bwd_rows(p, s, n0, n1, j0, j1 < 0 ? p.H : j1);
  } else {
    detail::lstm_rows_generic(p, s, n0, n1, j0, j1 < 0 ? p.H : j1);
  }
}

// Forward element-wise pass over all B rows of one step, threaded over rows (core::parallel_for;
// results do not depend on the thread count).
template <typename T>
inline void lstm_fwd_pointwise(const LSTMFwdParams<T>& p, const LSTMFwdStep<T>& s, std::int64_t B) {
  core::parallel_for(
      B, 8 * p.H, [&](std::int64_t n0, std::int64_t n1) { lstm_fwd_pointwise_rows(p, s, n0, n1); });
}

// Backward element-wise pass over all B rows of one step, threaded over rows.
template <typename T>
inline void lstm_bwd_pointwise(const LSTMBwdParams<T>& p, const LSTMBwdStep<T>& s, std::int64_t B) {
  core::parallel_for(
      B, 8 * p.H, [&](std::int64_t n0, std::int64_t n1) { lstm_bwd_pointwise_rows(p, s, n0, n1); });
}

// Peephole gradients of the cell op from its d_gates (written by lstm_bwd_pointwise), over B
// rows (the sequence ops sum theirs over all steps in block_lstm.cc):
//   d_wci = Σ_n di⊙cs_prev;  d_wcf = Σ_n df⊙cs_prev;  d_wco = Σ_n do⊙cs
// Reads s.d_gates, s.cs_prev and s.cs only. Threaded over columns; each column is summed over n
// in increasing order, so results do not depend on the thread count. Call it only with
// peepholes (without them the gradients are zero and the caller zero-fills).
template <typename T>
inline void lstm_peephole_grads(const LSTMBwdParams<T>& p, const LSTMBwdStep<T>& s, std::int64_t B,
                                T* d_wci, T* d_wcf, T* d_wco) {
  const std::int64_t H = p.H;
  const LSTMGateBlocks g = lstm_gate_blocks(p.layout);
  core::parallel_for(H, 3 * B, [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t j = j0; j < j1; ++j) d_wci[j] = d_wcf[j] = d_wco[j] = T(0);
    for (std::int64_t n = 0; n < B; ++n) {
      const T* dg = s.d_gates + n * (s.d_gates_ld ? s.d_gates_ld : 4 * H);
      const T* cp = s.cs_prev + n * H;
      const T* cs = s.cs + n * H;
      for (std::int64_t j = j0; j < j1; ++j) {
        d_wci[j] += dg[g.i * H + j] * cp[j];
        d_wcf[j] += dg[g.f * H + j] * cp[j];
        d_wco[j] += dg[g.o * H + j] * cs[j];
      }
    }
  });
}

}  // namespace blockrnn::cpu
