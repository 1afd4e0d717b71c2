// Fast BlockLSTM(V2) and BlockLSTMGrad(V2) (docs/ops.md). Same math and signature as
// src/ref/block_lstm.cc; the element-wise work of a step is one fused pass of
// src/cpu/lstm_pointwise.h (shared with the cell ops).
//
// Shape letters: T time, B batch, I input, H cell, G = 4H, S = seq_len_max. The weights are
// split by rows into w_x = w[0:I] [I, 4H] (a view) and w_h = w[I:] [H, 4H], packed once per
// call into the GEMM engine's panel layout (w_h by gate column block for the forward, w_hᵀ for
// the backward).
//
// The time loop is one parallel region (sequence_common.h, TimeLoop): each thread owns the same
// hidden-unit columns of all four gates for the whole sequence and meets the others at one
// barrier per step.
// Forward:
//   before the loop   gates = x·w_x for all S steps, x viewed as [S·B, I]   (one GEMM)
//   per step t        own columns of each gate: gates[t] += h[t−1]·w_h      (recurrent GEMM)
//                     one fused pass on own columns: bias, activations, cs (clipped), co, h
//                     barrier (step t+1 reads all of h[t])
// Backward (the carries live in the outputs d_cs_prev and d_h_prev):
//   per step t = S−1 … 0
//                     one fused pass on own columns: dh = carry_h + d_h[t],
//                     dcs_in = carry_cs + d_cs[t], d_gates[t] (kept for all steps),
//                     carry_cs = dcs⊙f [+ peepholes]
//                     barrier (the product reads all columns of d_gates[t])
//                     own columns: carry_h = d_gates[t]·w_hᵀ                 (recurrent GEMM)
//   after the loop    d_x = d_gates·w_xᵀ;  d_w = [x, h_{t−1}]ᵀ·d_gates (row blocks, on
//                     d_gates packed once);
//                     d_b and the peephole gradients as column reductions over all S·B rows
//                     (accumulated in double for float: they sum S·B terms)
// Rounding differs from TensorFlow's per-step [x, h]·w only in GEMM accumulation order
// (x·w_x and h·w_h are each rounded before they are added), well inside docs/tolerances.md.
#include <algorithm>
#include <array>

#include "cpu/lstm_pointwise.h"
#include "cpu/sequence_common.h"
#include "cpu/sequence_plan.h"
#include "gemm/gemm.h"
#include "kernel/block_lstm.h"

namespace blockrnn::cpu {

using gemm::gemm;
using gemm::Trans;

namespace {

// Peephole gradients over all S·B rows after the backward loop (docs/ops.md, summed over steps):
//   d_wci = Σ di⊙cs[t−1];  d_wcf = Σ df⊙cs[t−1];  d_wco = Σ do⊙cs[t]
// with cs[−1] = cs_prev. Threads split the columns; each column is summed in row order with a
// double accumulator for float (like column_sums), so the result does not depend on threads.
template <typename T>
void peephole_grads(const BlockLSTMDims& d, LSTMGateBlocks g, const T* d_gates, std::int64_t G,
                    const T* cs_prev, const T* cs, const BlockLSTMBwdArgs<T>& a,
                    const std::int64_t* steps = nullptr) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max;  // G: row stride of d_gates
  constexpr std::int64_t kChunk = 128;
  const std::int64_t chunks = (H + kChunk - 1) / kChunk;
  core::parallel_for(chunks, 3 * S * B * kChunk, [&](std::int64_t c0, std::int64_t c1) {
    Acc<T> ai[kChunk], af[kChunk], ao[kChunk];
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t j0 = c * kChunk, n = std::min(kChunk, H - j0);
      std::fill(ai, ai + n, Acc<T>(0));
      std::fill(af, af + n, Acc<T>(0));
      std::fill(ao, ao + n, Acc<T>(0));
      for (std::int64_t t = 0; t < S; ++t) {
        for (std::int64_t b = 0; b < B; ++b) {
          if (steps != nullptr && t >= steps[b]) continue;  // seq_lengths: not a step of b
          const T* dg = d_gates + (t * B + b) * G + j0;
          const T* csp = (t == 0 ? cs_prev : cs + (t - 1) * B * H) + b * H + j0;
          const T* cst = cs + (t * B + b) * H + j0;
          for (std::int64_t j = 0; j < n; ++j) {
            ai[j] += Acc<T>(dg[g.i * H + j]) * csp[j];
            af[j] += Acc<T>(dg[g.f * H + j]) * csp[j];
            ao[j] += Acc<T>(dg[g.o * H + j]) * cst[j];
          }
        }
      }
      for (std::int64_t j = 0; j < n; ++j) {
        a.d_wci[j0 + j] = static_cast<T>(ai[j]);
        a.d_wcf[j0 + j] = static_cast<T>(af[j]);
        a.d_wco[j0 + j] = static_cast<T>(ao[j]);
      }
    }
  });
}

// The recurrent weights w[I:] by gate column block [H, H]: the plan's, or packed now.
template <typename T>
std::array<Packed<T>, 4> recurrent_blocks(const BlockLSTMFwdArgs<T>& a, std::int64_t I,
                                          std::int64_t H) {
  const std::int64_t G = 4 * H;
  auto block = [&](std::int64_t q) { return a.plan ? &a.plan->w_h[q] : nullptr; };
  return {Packed<T>(block(0), Trans::kNo, H, H, a.w + I * G, G),
          Packed<T>(block(1), Trans::kNo, H, H, a.w + I * G + H, G),
          Packed<T>(block(2), Trans::kNo, H, H, a.w + I * G + 2 * H, G),
          Packed<T>(block(3), Trans::kNo, H, H, a.w + I * G + 3 * H, G)};
}

}  // namespace

// The forward, with or without seq_lengths (sequence_common.h, ActiveRows; without lengths every
// row is active and this is the plain loop): each step's recurrent product over its active
// prefix (or all rows) and its pass over the active rows only; inactive rows of the seven
// outputs are zero.
template <typename T>
void block_lstm_fwd(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, G = 4 * H;
  for (T* out : {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}) zero(out + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  const ActiveRows act(d.lengths, S, B);
  const std::int64_t Gp = padded_ld(G);
  Workspace<T> ws(block_lstm_op_name(a.layout, false), {S * B * Gp}, a.workspace);
  T* const gates = ws.slice(0);
  const std::array<Packed<T>, 4> w_h = recurrent_blocks(a, I, H);
  const std::int64_t panels = w_h[0]->panels(), nr = w_h[0]->panel_width();
  // gates = x·w_x (w_x = w[0:I]); with prefix lengths only each step's active rows.
  input_projection(act, a.plan ? &a.plan->w_x : nullptr, a.x, I, a.w, G, G, gates, Gp);
  const LSTMFwdParams<T> p = lstm_fwd_params(H, a);
  const TimeLoop loop{block_lstm_op_name(a.layout, false), S, panels, nr, H, double(B) * G * H};
  loop.run([&](const UnitSplit& u, const auto& end_step) {
    for (std::int64_t t = 0; t < S; ++t) {
      const std::int64_t o = t * BH;
      const T* hp = t == 0 ? a.h_prev : a.h + o - BH;
      T* const gates_t = gates + t * B * Gp;
      const std::int64_t m = act.gemm_rows(t);
      for (std::int64_t q = 0; q < 4; ++q) {
        gemm::gemm_panels(m, hp, H, *w_h[q], u.p0, u.p1, T(1), gates_t + q * H, Gp);
      }
      LSTMFwdStep<T> step{.gates = gates_t, .h = a.h + o, .gates_ld = Gp};
      lstm_step_state(step, a, t, BH);
      act.for_rows(
          t,
          [&](std::int64_t r0, std::int64_t r1) {
            lstm_fwd_pointwise_rows(p, step, r0, r1, u.j0, u.j1);
          },
          [&](std::int64_t n) {
            for (T* out : {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}) {
              zero(out + o + n * H + u.j0, u.j1 - u.j0);
            }
          });
      if (end_step(t)) break;
    }
  });
}

// The backward, with or without seq_lengths (ActiveRows; without lengths every row is active):
// each step's pass on its active rows (inactive rows of d_gates and of the carries are zero);
// after the loop the weight gradients as products over all S·B rows in place, or, with
// lengths, over the N active rows compacted: d_gates, x and h[t−1] gathered by row.
template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H, G = 4 * H;
  zero(a.d_x, d.T * B * I);
  zero(a.d_cs_prev, BH);
  zero(a.d_h_prev, BH);
  zero(a.d_wci, H);
  zero(a.d_wcf, H);
  zero(a.d_wco, H);
  zero(a.d_w, K * G);
  zero(a.d_b, G);
  const ActiveRows act(d.lengths, S, B);
  const std::int64_t N = act.total(), Nc = act.compacted();
  if (N == 0) return;  // S = 0 or no active rows: the gradients are the zeros above
  const std::int64_t Gp = padded_ld(G);
  Workspace<T> ws(block_lstm_op_name(a.layout, true), {S * B * Gp, Nc * Gp, Nc * I, Nc * H},
                  a.workspace);
  T* const d_gates = ws.slice(0);
  T* const dgc = ws.slice(1);  // [N, 4H] (row stride Gp)  d_gates of the active rows
  T* const xc = ws.slice(2);   // [N, I]  their x rows, then their d_x rows
  T* const hc = ws.slice(3);   // [N, H]  their h[t−1] rows (h_prev at t = 0)
  const Packed<T> w_h_t(a.plan ? &a.plan->w_h_t : nullptr, Trans::kYes, G, H, a.w + I * G, G);
  const std::int64_t panels = w_h_t->panels(), nr = w_h_t->panel_width();
  T* const carry_cs = a.d_cs_prev;
  T* const carry_h = a.d_h_prev;
  const LSTMBwdParams<T> p = lstm_bwd_params(H, a);
  const TimeLoop loop{block_lstm_op_name(a.layout, true), S, panels, nr, H, double(B) * G * H};
  loop.run([&](const UnitSplit& u, const auto& end_step) {
    for (std::int64_t t = S - 1; t >= 0; --t) {
      const std::int64_t o = t * BH;
      T* const d_gates_t = d_gates + t * B * Gp;
      LSTMBwdStep<T> step{
          .d_cs = a.d_cs + o,
          .d_h = a.d_h + o,
          .cs_grad_carry = carry_cs,
          .h_grad_carry = carry_h,
          .d_gates = d_gates_t,
          .d_cs_prev = carry_cs,
          .d_gates_ld = Gp,
      };
      lstm_step_state(step, a, t, BH);
      act.for_rows(
          t,
          [&](std::int64_t r0, std::int64_t r1) {
            lstm_bwd_pointwise_rows(p, step, r0, r1, u.j0, u.j1);
          },
          [&](std::int64_t n) {
            // Not a step of example n: no gradient enters or leaves it (carries stay zero).
            for (std::int64_t q = 0; q < 4; ++q)
              zero(d_gates_t + n * Gp + q * H + u.j0, u.j1 - u.j0);
            zero(carry_cs + n * H + u.j0, u.j1 - u.j0);
          });
      if (end_step(S - 1 - t)) break;
      // carry_h = d_gates[t]·w_hᵀ over the step's rows (prefix: rows past it stay zero, as no
      // later step had them active either)
      gemm::gemm_panels(act.gemm_rows(t), d_gates_t, Gp, *w_h_t, u.p0, u.p1, T(0), carry_h, H);
    }
  });

  if (act.all) {  // every row active: the products over all S·B rows, in place
    const std::int64_t SB = S * B;
    // d_x[0:S] = d_gates·w_xᵀ      [S·B, I] = [S·B, 4H]·[I, 4H]ᵀ
    gemm<T>(Trans::kNo, Trans::kYes, SB, I, G, d_gates, Gp, a.w, G, T(0), a.d_x, I);
    // d_gates [S·B, 4H], packed once for both weight-gradient products.
    gemm::PackedB<T> d_gates_packed;
    d_gates_packed.pack(Trans::kNo, SB, G, d_gates, Gp);
    // d_w[0:I] = xᵀ·d_gates      [I, 4H] = [S·B, I]ᵀ·[S·B, 4H]
    gemm<T>(Trans::kYes, I, a.x, I, d_gates_packed, T(0), a.d_w, G);
    // d_w[I:] = [h_prev; h[0:S−1]]ᵀ·d_gates over two K ranges of the packed d_gates, so the
    // previous-h sequence is never copied:
    //   [H, 4H] = [B, H]ᵀ·d_gates[0:B] + [(S−1)·B, H]ᵀ·d_gates[B:]
    T* const w_grad_h = a.d_w + I * G;
    gemm<T>(Trans::kYes, H, a.h_prev, H, d_gates_packed, 0, B, T(0), w_grad_h, G);
    gemm<T>(Trans::kYes, H, a.h, H, d_gates_packed, B, SB, T(1), w_grad_h, G);
    // d_b = Σ over all S·B rows of d_gates      [4H]
    column_sums(SB, G, d_gates, Gp, a.d_b);
    if (a.use_peephole)
      peephole_grads(d, lstm_gate_blocks(a.layout), d_gates, Gp, a.cs_prev, a.cs, a);
    return;
  }

  // The active rows, compacted: d_gates, x, h[t−1].
  gather_rows(act.rows, d_gates, Gp, G, dgc, Gp);
  gather_inputs(act.rows, B, I, H, a.x, a.h_prev, a.h, xc, hc);
  gemm::PackedB<T> d_gates_packed;
  d_gates_packed.pack(Trans::kNo, N, G, dgc, Gp);
  // d_w = [x, h_{t−1}]ᵀ·d_gates over the active rows
  gemm<T>(Trans::kYes, I, xc, I, d_gates_packed, T(0), a.d_w, G);
  gemm<T>(Trans::kYes, H, hc, H, d_gates_packed, T(0), a.d_w + I * G, G);
  column_sums(N, G, dgc, Gp, a.d_b);
  if (a.use_peephole) {
    peephole_grads(d, lstm_gate_blocks(a.layout), d_gates, Gp, a.cs_prev, a.cs, a,
                   act.steps.data());
  }
  // d_x of the active rows = d_gates·w_xᵀ, computed compact (into xc) and scattered.
  gemm<T>(Trans::kNo, Trans::kYes, N, I, G, dgc, Gp, a.w, G, T(0), xc, I);
  scatter_rows(act.rows, xc, I, a.d_x);
}

template void block_lstm_fwd<float>(const BlockLSTMDims&, const BlockLSTMFwdArgs<float>&);
template void block_lstm_fwd<double>(const BlockLSTMDims&, const BlockLSTMFwdArgs<double>&);
template void block_lstm_bwd<float>(const BlockLSTMDims&, const BlockLSTMBwdArgs<float>&);
template void block_lstm_bwd<double>(const BlockLSTMDims&, const BlockLSTMBwdArgs<double>&);

}  // namespace blockrnn::cpu
