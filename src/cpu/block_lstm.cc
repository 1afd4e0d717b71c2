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
//
// bfloat16 calls (bf16_products in the arguments, set by the op from the call's dtype): every
// product above takes bfloat16 operands with float32 sums on the bfloat16 GEMM
// (src/cpu/bf16_products.h): x, w and the forward's outputs are bfloat16 values already (exact);
// h[t−1] is rounded to bfloat16 for the recurrent product only (the loop carries it, cs and all
// the element-wise math in float32), and so is d_gates for carry_h, d_x and d_w (d_b and the
// peephole gradients sum the float32 d_gates). The reference path computes a bfloat16 call in
// float32, so the two differ by these roundings (docs/tolerances.md, "bf16_products").
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "cpu/bf16_products.h"
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

// The forward's time loop on gates = x·w_x already in `gates` (row stride Gp): per step
// recurrent(t, m, h[t−1], own, gates[t]) adds h[t−1]·w_h to the own columns of each gate over
// the first m rows, then the pass over the active rows, then rounded(t, own) (the bfloat16
// products round the own columns of h[t] there).
template <typename T, class Recurrent, class Rounded>
void lstm_fwd_loop(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a, const ActiveRows& act,
                   T* gates, std::int64_t Gp, std::int64_t panels, std::int64_t nr,
                   Recurrent&& recurrent, Rounded&& rounded) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max, BH = B * H, G = 4 * H;
  const LSTMFwdParams<T> p = lstm_fwd_params(H, a);
  const TimeLoop loop{block_lstm_op_name(a.layout, false), S, panels, nr, H, double(B) * G * H};
  loop.run([&](const UnitSplit& u, const auto& end_step) {
    for (std::int64_t t = 0; t < S; ++t) {
      const std::int64_t o = t * BH;
      const T* hp = t == 0 ? a.h_prev : a.h + o - BH;
      T* const gates_t = gates + t * B * Gp;
      recurrent(t, act.gemm_rows(t), hp, u, gates_t);
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
      rounded(t, u);
      if (end_step(t)) break;
    }
  });
}

// The forward with bfloat16 products (bf16_products.h): gates = x·w_x on w_x packed in
// bfloat16, and each step's h[t−1]·w_h with h[t−1] rounded to bfloat16 (h_prev before the loop,
// h[t] by the owners of its columns at the end of step t, into buffer (t+1) mod 2).
void block_lstm_fwd_bf16(const BlockLSTMDims& d, const BlockLSTMFwdArgs<float>& a,
                         const ActiveRows& act, float* gates, std::int64_t Gp) {
  const std::int64_t B = d.B, I = d.I, H = d.H, G = 4 * H;
  const char* const op = block_lstm_op_name(a.layout, false);
  const LSTMPlan<float>::Bf16* const p = bf16_packs(a.plan);
  gemm::PackedBBf16 w_x_now;
  const gemm::PackedBBf16& w_x =
      bf16_weight(p ? &p->w_x : nullptr, w_x_now, Trans::kNo, I, G, a.w, G);
  std::array<gemm::PackedBBf16, 4> w_h_now;
  std::array<const gemm::PackedBBf16*, 4> w_h;
  for (std::int64_t q = 0; q < 4; ++q) {
    w_h[q] = &bf16_weight(p ? &p->w_h[q] : nullptr, w_h_now[q], Trans::kNo, H, H,
                          a.w + I * G + q * H, G);
  }
  // The operands in the caller's bf16_workspace when given (block_lstm_bf16_fwd_workspace_floats:
  // x's rounding, then the two h buffers), else allocated here.
  float* const x_scratch = a.bf16_workspace;
  float* const h_scratch = past_input_projection_bf16(a.bf16_workspace, d.seq_len_max, B, I);
  input_projection_bf16(act, w_x, a.x, I, gates, Gp, x_scratch);
  Bf16Lhs hb(op, B, H, w_h[0]->kernel(), h_scratch);
  hb.round(0, 0, B, 0, H, a.h_prev, H);
  lstm_fwd_loop(
      d, a, act, gates, Gp, w_h[0]->panels(), w_h[0]->panel_width(),
      [&](std::int64_t t, std::int64_t m, const float*, const UnitSplit& u, float* gates_t) {
        for (std::int64_t q = 0; q < 4; ++q) {
          hb.product(int(t % 2), m, *w_h[q], u.p0, u.p1, 1.0f, gates_t + q * H, Gp);
        }
      },
      [&](std::int64_t t, const UnitSplit& u) {
        hb.round(int((t + 1) % 2), 0, B, u.j0, u.j1, a.h + t * B * H, H);
      });
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
  const ActiveRows act(d.lengths, S, B, d.index);
  const std::int64_t Gp = padded_ld(G);
  Workspace<T> ws(block_lstm_op_name(a.layout, false), {S * B * Gp}, a.workspace);
  T* const gates = ws.slice(0);
  if constexpr (std::is_same_v<T, float>) {
    if (a.bf16_products) return block_lstm_fwd_bf16(d, a, act, gates, Gp);
  }
  const std::array<Packed<T>, 4> w_h = recurrent_blocks(a, I, H);
  // gates = x·w_x (w_x = w[0:I]); with prefix lengths only each step's active rows.
  input_projection(act, a.plan ? &a.plan->w_x : nullptr, a.x, I, a.w, G, G, gates, Gp);
  lstm_fwd_loop(
      d, a, act, gates, Gp, w_h[0]->panels(), w_h[0]->panel_width(),
      [&](std::int64_t, std::int64_t m, const T* hp, const UnitSplit& u, T* gates_t) {
        for (std::int64_t q = 0; q < 4; ++q) {
          gemm::gemm_panels(m, hp, H, *w_h[q], u.p0, u.p1, T(1), gates_t + q * H, Gp);
        }
      },
      [](std::int64_t, const UnitSplit&) {});
}

namespace {

// The backward's time loop: per step the pass over the active rows into d_gates[t] (row stride
// Gp) and carry_cs, then rounded(t, own) (the bfloat16 products round the own columns of
// d_gates[t] there), the barrier, then carry(t, m, d_gates[t], own): the own columns of
// carry_h = d_gates[t]·w_hᵀ over the first m rows (rows past them stay zero, as no later step
// had them active either). Without a d_h_prev the last step's product, which only d_h_prev
// reads, is skipped.
template <typename T, class Carry, class Rounded>
void lstm_bwd_loop(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a, const ActiveRows& act,
                   T* d_gates, std::int64_t Gp, T* carry_cs, T* carry_h, std::int64_t panels,
                   std::int64_t nr, Carry&& carry, Rounded&& rounded) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max, BH = B * H, G = 4 * H;
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
      rounded(t, u);
      if (end_step(S - 1 - t)) break;
      if (t > 0 || a.d_h_prev) carry(t, act.gemm_rows(t), d_gates_t, u);
    }
  });
}

// The weight gradients and d_x after the loop, float32 products (T = double too):
// d_x = d_gates·w_xᵀ, d_w = [x, h_{t−1}]ᵀ·d_gates over all S·B rows in place, or over the N
// active rows compacted (dgc, xc, hc: workspace slices).
// The packed d_gates live in `packed` (a workspace slice, pack_into_workspace); w_xᵀ is the
// plan's when there is one.
template <typename T>
void lstm_weight_grads(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a, const ActiveRows& act,
                       const T* d_gates, std::int64_t Gp, T* dgc, T* xc, T* hc, T* packed) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, G = 4 * H, N = act.total();
  const gemm::PackedB<T>* const w_x_t = a.plan && a.plan->has_x_t ? &a.plan->w_x_t : nullptr;
  if (act.all) {  // every row active: the products over all S·B rows, in place
    const std::int64_t SB = S * B;
    // d_x[0:S] = d_gates·w_xᵀ      [S·B, I] = [S·B, 4H]·[I, 4H]ᵀ
    if (a.d_x) product_weight_t(w_x_t, SB, I, G, d_gates, Gp, a.w, G, T(0), a.d_x, I);
    // d_gates [S·B, 4H], packed once for both weight-gradient products.
    gemm::PackedB<T> d_gates_packed;
    pack_into_workspace(d_gates_packed, SB, G, d_gates, Gp, packed);
    // d_w[0:I] = xᵀ·d_gates      [I, 4H] = [S·B, I]ᵀ·[S·B, 4H]
    gemm<T>(Trans::kYes, I, a.x, I, d_gates_packed, T(0), a.d_w, G);
    // d_w[I:] = [h_prev; h[0:S−1]]ᵀ·d_gates over two K ranges of the packed d_gates, so the
    // previous-h sequence is never copied:
    //   [H, 4H] = [B, H]ᵀ·d_gates[0:B] + [(S−1)·B, H]ᵀ·d_gates[B:]
    T* const w_grad_h = a.d_w + I * G;
    gemm<T>(Trans::kYes, H, a.h_prev, H, d_gates_packed, 0, B, T(0), w_grad_h, G);
    gemm<T>(Trans::kYes, H, a.h, H, d_gates_packed, B, SB, T(1), w_grad_h, G);
    return;
  }
  gemm::PackedB<T> d_gates_packed;
  pack_into_workspace(d_gates_packed, N, G, dgc, Gp, packed);
  // d_w = [x, h_{t−1}]ᵀ·d_gates over the active rows
  gemm<T>(Trans::kYes, I, xc, I, d_gates_packed, T(0), a.d_w, G);
  gemm<T>(Trans::kYes, H, hc, H, d_gates_packed, T(0), a.d_w + I * G, G);
  // d_x of the active rows = d_gates·w_xᵀ, computed compact (into xc) and scattered.
  if (a.d_x) {
    product_weight_t(w_x_t, N, I, G, dgc, Gp, a.w, G, T(0), xc, I);
    scatter_rows(act.rows, xc, I, a.d_x);
  }
}

// The same with bfloat16 operands (bf16_products.h): d_gates rounded when packed, x, h and w_x
// rounded (exactly, for a bfloat16 call's inputs). [h_prev; h[0:S−1]] is one bfloat16 copy. The
// operands live in `scratch` (block_lstm_bf16_bwd_workspace_floats counts what is taken here):
// the packed d_gates, that copy, and one buffer for each product's rounded left operand in turn.
void lstm_weight_grads_bf16(const BlockLSTMDims& d, const BlockLSTMBwdArgs<float>& a,
                            const ActiveRows& act, const float* d_gates, std::int64_t Gp,
                            const float* dgc, float* xc, const float* hc, Bf16Scratch& scratch) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, G = 4 * H;
  const std::int64_t rows = act.all ? S * B : act.total();
  const LSTMPlan<float>::Bf16* const p = bf16_packs(a.plan);
  const gemm::PackedBBf16* const w_x_t = p && a.plan->has_x_t ? &p->w_x_t : nullptr;
  float* const a_scratch = scratch.take(lhs_scratch_floats({{rows, G}, {I, rows}, {H, rows}}));
  gemm::PackedBBf16 d_gates_packed;
  if (act.all) {
    if (a.d_x) {
      product_weight_t_bf16(w_x_t, rows, I, G, d_gates, Gp, a.w, G, 0.0f, a.d_x, I, a_scratch);
    }
    scratch.pack(d_gates_packed, rows, G, d_gates, Gp);
    gemm::gemm_bf16(Trans::kYes, I, a.x, I, d_gates_packed, 0.0f, a.d_w, G, a_scratch);
    const std::uint16_t* const h_before =
        previous_h_bf16(S, B, H, a.h_prev, a.h, scratch.take(previous_h_bf16_floats(S, B, H)));
    gemm::gemm_bf16(Trans::kYes, H, h_before, H, d_gates_packed, 0.0f, a.d_w + I * G, G, a_scratch);
    return;
  }
  scratch.pack(d_gates_packed, rows, G, dgc, Gp);
  gemm::gemm_bf16(Trans::kYes, I, xc, I, d_gates_packed, 0.0f, a.d_w, G, a_scratch);
  gemm::gemm_bf16(Trans::kYes, H, hc, H, d_gates_packed, 0.0f, a.d_w + I * G, G, a_scratch);
  if (a.d_x) {
    product_weight_t_bf16(w_x_t, rows, I, G, dgc, Gp, a.w, G, 0.0f, xc, I, a_scratch);
    scatter_rows(act.rows, xc, I, a.d_x);
  }
}

}  // namespace

// The backward, with or without seq_lengths (ActiveRows; without lengths every row is active):
// each step's pass on its active rows (inactive rows of d_gates and of the carries are zero);
// after the loop the weight gradients as products over all S·B rows in place, or, with
// lengths, over the N active rows compacted: d_gates, x and h[t−1] gathered by row. With
// bf16_products, every product on bfloat16 operands: carry_h from d_gates[t] rounded by the
// owners of its columns into buffer t mod 2 before the step's barrier.
template <typename T>
void block_lstm_bwd(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H, G = 4 * H;
  if (a.d_cs_prev) zero(a.d_cs_prev, BH);
  if (a.d_h_prev) zero(a.d_h_prev, BH);
  zero(a.d_wci, H);
  zero(a.d_wcf, H);
  zero(a.d_wco, H);
  const ActiveRows act(d.lengths, S, B, d.index);
  const std::int64_t N = act.total(), Nc = act.compacted();
  zero_unwritten_d_x(a.d_x, act, d.T, I);
  if (N == 0) {  // S = 0 or no active rows: the gradients are zeros
    zero(a.d_w, K * G);
    zero(a.d_b, G);
    return;
  }
  // Past here d_w and d_b are written whole by their products (beta = 0) and column sums (the
  // peephole gradients, zeroed above, only with use_peephole).
  const std::int64_t Gp = padded_ld(G);
  const char* const op = block_lstm_op_name(a.layout, true);
  // bfloat16 products pack their own operands: no slice for the float packs.
  bool bf16 = false;
  if constexpr (std::is_same_v<T, float>) bf16 = a.bf16_products;
  Workspace<T> ws(op,
                  {S * B * Gp, Nc * Gp, Nc * I, Nc * H, bf16 ? 0 : gemm::packed_elems_bound(N, G),
                   a.d_cs_prev ? 0 : BH, a.d_h_prev ? 0 : BH},
                  a.workspace);
  T* const d_gates = ws.slice(0);
  T* const dgc = ws.slice(1);     // [N, 4H] (row stride Gp)  d_gates of the active rows
  T* const xc = ws.slice(2);      // [N, I]  their x rows, then their d_x rows
  T* const hc = ws.slice(3);      // [N, H]  their h[t−1] rows (h_prev at t = 0)
  T* const packed = ws.slice(4);  // the active rows' d_gates packed (the float products)
  // The carries live in d_cs_prev and d_h_prev, or without them (no state gradient wanted) in
  // the workspace.
  T* const carry_cs = carry_storage(a.d_cs_prev, ws.slice(5), BH);
  T* const carry_h = carry_storage(a.d_h_prev, ws.slice(6), BH);
  // bfloat16 products: their operands in the caller's bf16_workspace, else allocated per call.
  std::optional<Bf16Scratch> scratch;
  if (bf16) {
    if constexpr (std::is_same_v<T, float>) {
      scratch.emplace(op, a.bf16_workspace, block_lstm_bf16_bwd_workspace_floats(S, B, I, H));
      const LSTMPlan<float>::Bf16* const p = bf16_packs(a.plan);
      gemm::PackedBBf16 w_h_t_now;
      const gemm::PackedBBf16& w_h_t = bf16_weight(p && a.plan->has_h_t ? &p->w_h_t : nullptr,
                                                   w_h_t_now, Trans::kYes, G, H, a.w + I * G, G);
      Bf16Lhs dg(op, B, G, w_h_t.kernel(), scratch->take(Bf16Lhs::storage_floats(B, G)));
      lstm_bwd_loop(
          d, a, act, d_gates, Gp, carry_cs, carry_h, w_h_t.panels(), w_h_t.panel_width(),
          [&](std::int64_t t, std::int64_t m, const float*, const UnitSplit& u) {
            dg.product(int(t % 2), m, w_h_t, u.p0, u.p1, 0.0f, carry_h, H);
          },
          [&](std::int64_t t, const UnitSplit& u) {
            for (std::int64_t q = 0; q < 4; ++q) {
              dg.round(int(t % 2), 0, B, q * H + u.j0, q * H + u.j1, d_gates + t * B * Gp, Gp);
            }
          });
    }
  } else {
    const Packed<T> w_h_t(a.plan && a.plan->has_h_t ? &a.plan->w_h_t : nullptr, Trans::kYes, G, H,
                          a.w + I * G, G);
    lstm_bwd_loop(
        d, a, act, d_gates, Gp, carry_cs, carry_h, w_h_t->panels(), w_h_t->panel_width(),
        [&](std::int64_t, std::int64_t m, const T* d_gates_t, const UnitSplit& u) {
          gemm::gemm_panels(m, d_gates_t, Gp, *w_h_t, u.p0, u.p1, T(0), carry_h, H);
        },
        [](std::int64_t, const UnitSplit&) {});
  }

  if (!act.all) {  // the active rows, compacted: d_gates, x, h[t−1]
    gather_rows(act.rows, d_gates, Gp, G, dgc, Gp);
    gather_inputs(act.rows, B, I, H, a.x, a.h_prev, a.h, xc, hc);
  }
  // d_b = Σ over the active rows of d_gates      [4H]
  if (act.all) {
    column_sums(S * B, G, d_gates, Gp, a.d_b);
  } else {
    column_sums(N, G, dgc, Gp, a.d_b);
  }
  if (a.use_peephole) {
    peephole_grads(d, lstm_gate_blocks(a.layout), d_gates, Gp, a.cs_prev, a.cs, a,
                   act.all ? nullptr : act.steps.data());
  }
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) return lstm_weight_grads_bf16(d, a, act, d_gates, Gp, dgc, xc, hc, *scratch);
  }
  lstm_weight_grads(d, a, act, d_gates, Gp, dgc, xc, hc, packed);
}

// Forward: x's rounding, then hb (Bf16Lhs [B, H]).
std::int64_t block_lstm_bf16_fwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                  std::int64_t H) {
  return input_projection_bf16_floats(S, B, I) + Bf16Lhs::storage_floats(B, H);
}

// Backward: dg, then lstm_weight_grads_bf16's (over at most S·B rows).
std::int64_t block_lstm_bf16_bwd_workspace_floats(std::int64_t S, std::int64_t B, std::int64_t I,
                                                  std::int64_t H) {
  const std::int64_t G = 4 * H, rows = S * B;
  return Bf16Lhs::storage_floats(B, G) + lhs_scratch_floats({{rows, G}, {I, rows}, {H, rows}}) +
         packed_bf16_floats(rows, G) + previous_h_bf16_floats(S, B, H);
}

template void block_lstm_fwd<float>(const BlockLSTMDims&, const BlockLSTMFwdArgs<float>&);
template void block_lstm_fwd<double>(const BlockLSTMDims&, const BlockLSTMFwdArgs<double>&);
template void block_lstm_bwd<float>(const BlockLSTMDims&, const BlockLSTMBwdArgs<float>&);
template void block_lstm_bwd<double>(const BlockLSTMDims&, const BlockLSTMBwdArgs<double>&);

}  // namespace blockrnn::cpu
