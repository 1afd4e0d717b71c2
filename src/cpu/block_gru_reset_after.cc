// Fast BlockGRUResetAfter and BlockGRUResetAfterGrad (blockrnn's reset-after GRU, docs/ops.md).
// Same math and signature as src/ref/block_gru_reset_after.cc; the element-wise stages are the
// row kernels gru_reset_after_{fwd,bwd}_row of src/cpu/gru_pointwise.h.
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max; gate column blocks [r | z | n]
// of w_i [I, 3H], w_h [H, 3H], b_i, b_h [3H].
//
// Forward. Before the loop, the input projection of all S steps (x viewed as [S·B, I]):
//   gi = x·w_i  → workspace [S·B, 3H] (no bias)
// Per step, ONE recurrent product (the reset gate multiplies its result, not its input):
//   gh = h[t−1]·w_h  (r, z blocks → a [B, 2H] scratch; n block → the output hn)
//   pass: hn += b_h_n; r, u, n, h
// The time loop is one parallel region (sequence_common.h, TimeLoop): a thread owns the same
// hidden-unit columns of r, z and n for the whole sequence, computes its columns of gh (reading
// all of h[t−1]) and runs the pass on them; one barrier per step, before the next product reads
// the whole new h.
//
// Backward. The carry lives in the output d_h_prev (a workspace slice when no h_prev gradient is
// wanted). Per step t = S−1 … 0:
//   pass: d_h = carry + d_h[t];  d_gh[t] = [d_r_bar, d_u_bar, d_hn];  d_n_bar[t];  carry = d_h⊙u
//   carry += d_gh[t]·w_hᵀ        [B, H] += [B, 3H]·[H, 3H]ᵀ
// one barrier per step (the product reads every column of d_gh[t]). After the loop, over all S·B
// rows: d_w_h = [h_prev; h[0:S−1]]ᵀ·d_gh and d_b_h = Σ_rows d_gh; then the n block of d_gh
// is replaced by d_n_bar, which makes it d_gi = [d_r_bar, d_u_bar, d_n_bar]:
//   d_x = d_gi·w_iᵀ;  d_w_i = xᵀ·d_gi;  d_b_i = Σ_rows d_gi.
// The reference groups d_h_prev as d_gh·w_hᵀ + d_h⊙u; here the product's chain starts from d_h⊙u
// (beta = 1), a rounding-level difference (docs/tolerances.md).
//
// bfloat16 calls (bf16_products in the arguments, set by the op from the call's dtype): every
// product above takes bfloat16 operands with float32 sums (src/cpu/bf16_products.h): x, the
// weights and the forward's outputs are bfloat16 values already (exact); h[t−1] is rounded for
// the forward's recurrent product, d_gh[t] for the backward's carry product, d_gh and d_gi for
// the after-loop products (the carried state, the element-wise math and the bias sums stay
// float32). The reference path computes a bfloat16 call in float32, so the two differ by these
// roundings (docs/tolerances.md, "bf16_products").
#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "cpu/bf16_products.h"
#include "cpu/gru_pointwise.h"
#include "cpu/sequence_common.h"
#include "cpu/sequence_plan.h"
#include "gemm/gemm.h"
#include "kernel/block_gru_reset_after.h"

namespace blockrnn::cpu {

using gemm::gemm;
using gemm::Trans;

namespace {

// The forward's time loop on the input projection already in gi (row stride R): per step
// product(t, m, h[t−1], own, hn[t]) puts h[t−1]·w_h on the own columns of the r and z blocks
// of gh_rz (row stride R2) and of hn[t] over the first m rows, the pass, and rounded(t, own)
// (the bfloat16 products round the own columns of h[t] there), then the step's barrier.
template <typename T, class Product, class Rounded>
void gru_reset_after_fwd_loop(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a,
                              const ActiveRows& act, const T* gi, std::int64_t R, T* gh_rz,
                              std::int64_t R2, std::int64_t panels, std::int64_t nr,
                              Product&& product, Rounded&& rounded) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max, BH = B * H;
  const TimeLoop loop{"BlockGRUResetAfter", S, panels, nr, H, 3.0 * double(B) * H * H};
  loop.run([&](const UnitSplit& own, const auto& end_step) {
    const std::int64_t j0 = own.j0, w = own.j1 - own.j0;
    for (std::int64_t t = 0; t < S; ++t) {
      const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;
      const T* gi_t = gi + t * B * R;
      T* const r_t = a.r + t * BH;
      T* const u_t = a.u + t * BH;
      T* const n_t = a.n + t * BH;
      T* const hn_t = a.hn + t * BH;
      T* const h_t = a.h + t * BH;
      product(t, act.gemm_rows(t), hp, own, hn_t);
      act.for_rows(
          t,
          [&](std::int64_t n0, std::int64_t n1) {
            for (std::int64_t n = n0; n < n1; ++n) {
              const std::int64_t o = n * H + j0;
              gru_reset_after_fwd_row(w, H, gi_t + n * R + j0, a.b_i + j0, gh_rz + n * R2 + j0,
                                      a.b_h + j0, hp + o, r_t + o, u_t + o, n_t + o, hn_t + o,
                                      h_t + o);
            }
          },
          [&](std::int64_t n) {
            for (T* p : {r_t, u_t, n_t, hn_t, h_t}) zero(p + n * H + j0, w);
          });
      rounded(t, own);
      if (end_step(t)) break;
    }
  });
}

// The forward with bfloat16 products (bf16_products.h): gi = x·w_i on w_i packed in bfloat16,
// and each step's h[t−1]·w_h with h[t−1] rounded to bfloat16 (h_prev before the loop, h[t] by
// the owners of its columns at the end of step t, into buffer (t+1) mod 2: one barrier a step,
// so a thread that runs ahead writes the other buffer while the team may still read this one).
void block_gru_reset_after_fwd_bf16(const BlockGRUDims& d,
                                    const BlockGRUResetAfterFwdArgs<float>& a,
                                    const ActiveRows& act, float* gi, std::int64_t R, float* gh_rz,
                                    std::int64_t R2) {
  const std::int64_t B = d.B, I = d.I, H = d.H, BH = B * H, H3 = 3 * H;
  const GRUResetAfterPlan<float>::Bf16* const p = bf16_packs(a.plan);
  gemm::PackedBBf16 now[4];
  const gemm::PackedBBf16& w_i =
      bf16_weight(p ? &p->w_i : nullptr, now[0], Trans::kNo, I, H3, a.w_i, H3);
  const gemm::PackedBBf16& w_h_r =
      bf16_weight(p ? &p->w_h_r : nullptr, now[1], Trans::kNo, H, H, a.w_h, H3);
  const gemm::PackedBBf16& w_h_z =
      bf16_weight(p ? &p->w_h_z : nullptr, now[2], Trans::kNo, H, H, a.w_h + H, H3);
  const gemm::PackedBBf16& w_h_n =
      bf16_weight(p ? &p->w_h_n : nullptr, now[3], Trans::kNo, H, H, a.w_h + 2 * H, H3);
  // The operands in the caller's bf16_workspace when given
  // (block_gru_reset_after_bf16_fwd_workspace_floats: x's rounding, then hb's buffers), else
  // allocated here.
  float* const x_scratch = a.bf16_workspace;
  float* const h_scratch = past_input_projection_bf16(a.bf16_workspace, d.seq_len_max, B, I);
  input_projection_bf16(act, w_i, a.x, I, gi, R, x_scratch);
  Bf16Lhs hb("BlockGRUResetAfter", B, H, w_h_n.kernel(), h_scratch);
  hb.round(0, 0, B, 0, H, a.h_prev, H);
  gru_reset_after_fwd_loop(
      d, a, act, gi, R, gh_rz, R2, w_h_n.panels(), w_h_n.panel_width(),
      [&](std::int64_t t, std::int64_t m, const float*, const UnitSplit& own, float* hn_t) {
        const int slot = int(t % 2);
        hb.product(slot, m, w_h_r, own.p0, own.p1, 0.0f, gh_rz, R2);
        hb.product(slot, m, w_h_z, own.p0, own.p1, 0.0f, gh_rz + H, R2);
        hb.product(slot, m, w_h_n, own.p0, own.p1, 0.0f, hn_t, H);
      },
      [&](std::int64_t t, const UnitSplit& own) {
        hb.round(int((t + 1) % 2), 0, B, own.j0, own.j1, a.h + t * BH, H);
      });
}

}  // namespace

// The forward, with or without seq_lengths (sequence_common.h, ActiveRows; without lengths every
// row is active): each step's product over its active prefix (or all rows) and its pass on the
// active rows; inactive rows of the five outputs are zero.
template <typename T>
void block_gru_reset_after_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, H3 = 3 * H;
  for (T* out : {a.r, a.u, a.n, a.hn, a.h}) zero(out + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  const ActiveRows act(d.lengths, S, B, d.index);
  const std::int64_t R = padded_ld(H3), R2 = padded_ld(2 * H);
  Workspace<T> ws("BlockGRUResetAfter", {S * B * R, B * R2}, a.workspace);
  T* const gi = ws.slice(0);
  T* const gh_rz = ws.slice(1);
  if constexpr (std::is_same_v<T, float>) {
    if (a.bf16_products) return block_gru_reset_after_fwd_bf16(d, a, act, gi, R, gh_rz, R2);
  }
  const Packed<T> w_h_r(a.plan ? &a.plan->w_h_r : nullptr, Trans::kNo, H, H, a.w_h, H3);
  const Packed<T> w_h_z(a.plan ? &a.plan->w_h_z : nullptr, Trans::kNo, H, H, a.w_h + H, H3);
  const Packed<T> w_h_n(a.plan ? &a.plan->w_h_n : nullptr, Trans::kNo, H, H, a.w_h + 2 * H, H3);
  // gi = x·w_i; with prefix lengths only each step's active rows.
  input_projection(act, a.plan ? &a.plan->w_i : nullptr, a.x, I, a.w_i, H3, H3, gi, R);
  gru_reset_after_fwd_loop(
      d, a, act, gi, R, gh_rz, R2, w_h_n->panels(), w_h_n->panel_width(),
      [&](std::int64_t, std::int64_t m, const T* hp, const UnitSplit& own, T* hn_t) {
        gemm::gemm_panels(m, hp, H, *w_h_r, own.p0, own.p1, T(0), gh_rz, R2);
        gemm::gemm_panels(m, hp, H, *w_h_z, own.p0, own.p1, T(0), gh_rz + H, R2);
        gemm::gemm_panels(m, hp, H, *w_h_n, own.p0, own.p1, T(0), hn_t, H);
      },
      [](std::int64_t, const UnitSplit&) {});
}

namespace {

// The backward's time loop: per step the pass into d_gh[t] (row stride R), d_n_bar[t] and the
// carry, rounded(t, own) (the bfloat16 products round the own columns of d_gh[t] there), the
// step's barrier, then carry_product(t, m, own): carry += d_gh[t]·w_hᵀ on the own columns over
// the first m rows. Without a d_h_prev the last step's product, which only d_h_prev reads, is
// skipped.
template <typename T, class CarryProduct, class Rounded>
void gru_reset_after_bwd_loop(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a,
                              const ActiveRows& act, T* d_g, std::int64_t R, T* d_n, T* carry,
                              std::int64_t panels, std::int64_t nr, CarryProduct&& carry_product,
                              Rounded&& rounded) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max, BH = B * H;
  const TimeLoop loop{"BlockGRUResetAfterGrad", S, panels, nr, H, 3.0 * double(B) * H * H};
  loop.run([&](const UnitSplit& own, const auto& end_step) {
    const std::int64_t j0 = own.j0, w = own.j1 - own.j0;
    for (std::int64_t t = S - 1; t >= 0; --t) {
      const T* hp = t == 0 ? a.h_prev : a.h + (t - 1) * BH;
      const std::int64_t s = t * BH;
      T* const d_g_t = d_g + t * B * R;
      act.for_rows(
          t,
          [&](std::int64_t n0, std::int64_t n1) {
            for (std::int64_t n = n0; n < n1; ++n) {
              const std::int64_t o = n * H + j0;
              gru_reset_after_bwd_row(w, H, a.r + s + o, a.u + s + o, a.n + s + o, a.hn + s + o,
                                      hp + o, a.d_h + s + o, carry + o, d_g_t + n * R + j0,
                                      d_n + s + o);
            }
          },
          [&](std::int64_t n) {
            // Not a step of example n: no gradient enters or leaves it.
            for (std::int64_t q = 0; q < 3; ++q) zero(d_g_t + n * R + q * H + j0, w);
            zero(d_n + s + n * H + j0, w);
            zero(carry + n * H + j0, w);
          });
      rounded(t, own);
      if (end_step(S - 1 - t)) break;
      if (t > 0 || a.d_h_prev) carry_product(t, act.gemm_rows(t), own);
    }
  });
}

// The storage of the bfloat16 products after the loop (bf16_products; taken from the call's
// Bf16Scratch, block_gru_reset_after_bf16_bwd_workspace_floats counts it).
struct Bf16GradOperands {
  float* packed;  // d_gh, then d_gi, packed: packed_bf16_floats(rows, 3H)
  std::int64_t packed_floats;
  float* a_scratch;  // each product's rounded left operand in turn (reset_after_lhs_floats)
  float* h_before;   // [h_prev; h[0:S−1]] in bfloat16: previous_h_bf16_floats(S, B, H)
};

// The floats of Bf16GradOperands::a_scratch over `rows` rows: the left operands d_giᵀ… of
// d_x = d_gi·w_iᵀ [rows, 3H], and hᵀ, xᵀ of the weight gradients [H, rows], [I, rows].
std::int64_t reset_after_lhs_floats(std::int64_t rows, std::int64_t I, std::int64_t H) {
  return lhs_scratch_floats({{rows, 3 * H}, {H, rows}, {I, rows}});
}

// d_w_h = [h_prev; h[0:S−1]]ᵀ·d_gh over all S·B rows (d_gh = d_g in place), or hcᵀ·d_gc over the
// N active rows compacted (d_gh = d_gc); on bfloat16 operands with `bf16` (d_gh rounded when
// packed, [h_prev; h[0:S−1]] one bfloat16 copy). The float products pack d_gh into `packed`
// (a workspace slice, pack_into_workspace).
template <typename T>
void reset_after_d_w_h(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a,
                       const ActiveRows& act, const T* d_gh, std::int64_t R, const T* hc,
                       const Bf16GradOperands* bf16, T* packed) {
  const std::int64_t B = d.B, H = d.H, S = d.seq_len_max, H3 = 3 * H;
  const std::int64_t rows = act.all ? S * B : act.total();
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) {
      gemm::PackedBBf16 d_gh_packed;
      d_gh_packed.pack_into(Trans::kNo, rows, H3, d_gh, R, bf16->packed, bf16->packed_floats);
      const std::uint16_t* const h_before =
          act.all ? previous_h_bf16(S, B, H, a.h_prev, a.h, bf16->h_before) : nullptr;
      if (!act.all) {
        gemm::gemm_bf16(Trans::kYes, H, hc, H, d_gh_packed, 0.0f, a.d_w_h, H3, bf16->a_scratch);
      } else {
        gemm::gemm_bf16(Trans::kYes, H, h_before, H, d_gh_packed, 0.0f, a.d_w_h, H3,
                        bf16->a_scratch);
      }
      return;
    }
  }
  gemm::PackedB<T> d_gh_packed;  // packed once for its two K ranges
  pack_into_workspace(d_gh_packed, rows, H3, d_gh, R, packed);
  if (!act.all) {
    gemm<T>(Trans::kYes, H, hc, H, d_gh_packed, T(0), a.d_w_h, H3);
    return;
  }
  // Over two K ranges of the packed d_gh, so the previous-h sequence is never copied:
  //   [H, 3H] = [B, H]ᵀ·d_gh[0:B] + [(S−1)·B, H]ᵀ·d_gh[B:]
  gemm<T>(Trans::kYes, H, a.h_prev, H, d_gh_packed, 0, B, T(0), a.d_w_h, H3);
  gemm<T>(Trans::kYes, H, a.h, H, d_gh_packed, B, rows, T(1), a.d_w_h, H3);
}

// d_w_i = xᵀ·d_gi and d_x = d_gi·w_iᵀ over all S·B rows (d_gi = d_g in place), or over the N
// active rows compacted (d_gi = d_gc; xc holds their x rows, then their d_x rows, scattered);
// on bfloat16 operands with `bf16` (d_gi rounded when packed). The float products pack d_gi
// into `packed` (a workspace slice) and multiply by the plan's w_iᵀ when there is one.
//   d_w_i [I, 3H] = [rows, I]ᵀ·[rows, 3H];  d_x [rows, I] = [rows, 3H]·[I, 3H]ᵀ
template <typename T>
void reset_after_input_grads(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a,
                             const ActiveRows& act, const T* d_gi, std::int64_t R, T* xc,
                             const Bf16GradOperands* bf16, T* packed) {
  const std::int64_t B = d.B, I = d.I, H3 = 3 * d.H, S = d.seq_len_max;
  const std::int64_t rows = act.all ? S * B : act.total();
  const T* const x = act.all ? a.x : xc;
  T* const d_x = act.all ? a.d_x : xc;  // written after d_w_i has read xc
  bool done = false;
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) {
      {
        gemm::PackedBBf16 d_gi_packed;
        d_gi_packed.pack_into(Trans::kNo, rows, H3, d_gi, R, bf16->packed, bf16->packed_floats);
        gemm::gemm_bf16(Trans::kYes, I, x, I, d_gi_packed, 0.0f, a.d_w_i, H3, bf16->a_scratch);
      }
      const GRUResetAfterPlan<float>::Bf16* const p = bf16_packs(a.plan);
      const gemm::PackedBBf16* const w_i_t = p && a.plan->has_x_t ? &p->w_i_t : nullptr;
      if (a.d_x) {
        product_weight_t_bf16(w_i_t, rows, I, H3, d_gi, R, a.w_i, H3, 0.0f, d_x, I,
                              bf16->a_scratch);
      }
      done = true;
    }
  }
  if (!done) {
    {
      gemm::PackedB<T> d_gi_packed;
      pack_into_workspace(d_gi_packed, rows, H3, d_gi, R, packed);
      gemm<T>(Trans::kYes, I, x, I, d_gi_packed, T(0), a.d_w_i, H3);
    }
    if (a.d_x) {
      product_weight_t(a.plan && a.plan->has_x_t ? &a.plan->w_i_t : nullptr, rows, I, H3, d_gi, R,
                       a.w_i, H3, T(0), d_x, I);
    }
  }
  if (a.d_x && !act.all) scatter_rows(act.rows, xc, I, a.d_x);
}

}  // namespace

// The backward, with or without seq_lengths (ActiveRows; without lengths every row is active):
// the pass on the active rows (inactive rows of d_gh, d_n_bar and the carry are zero) and the
// product over the step's prefix (or all rows); the parameter gradients and d_x as products
// over all S·B rows in place, or, with lengths, over the N active rows compacted. With
// bf16_products, every product on bfloat16 operands: the carry from d_gh[t] rounded by the
// owners of its columns into buffer t mod 2 before the step's barrier (one barrier a step, as
// the forward).
template <typename T>
void block_gru_reset_after_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a) {
  const std::int64_t B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, H3 = 3 * H;
  if (a.d_h_prev) zero(a.d_h_prev, BH);
  const ActiveRows act(d.lengths, S, B, d.index);
  const std::int64_t N = act.total(), Nc = act.compacted();
  zero_unwritten_d_x(a.d_x, act, d.T, I);
  if (N == 0) {  // S = 0 or no active rows: the gradients are zeros
    zero(a.d_w_i, I * H3);
    zero(a.d_w_h, H * H3);
    zero(a.d_b_i, H3);
    zero(a.d_b_h, H3);
    return;
  }
  // Past here each parameter gradient is written whole by its product (beta = 0) or column sum.
  const std::int64_t R = padded_ld(H3);
  // bfloat16 products pack their own operands: no slice for the float packs.
  bool bf16 = false;
  if constexpr (std::is_same_v<T, float>) bf16 = a.bf16_products;
  Workspace<T> ws("BlockGRUResetAfterGrad",
                  {S * B * R, S * BH, Nc * R, Nc * H, Nc * I,
                   bf16 ? 0 : gemm::packed_elems_bound(N, H3), a.d_h_prev ? 0 : BH},
                  a.workspace);
  T* const packed = ws.slice(5);  // d_gh, then d_gi, of the active rows packed (float products)
  T* const d_g = ws.slice(0);
  T* const d_n = ws.slice(1);
  // The carry lives in d_h_prev, or without one (no h_prev gradient wanted) in the workspace.
  T* const carry = carry_storage(a.d_h_prev, ws.slice(6), BH);
  // bfloat16 products: their operands in the caller's bf16_workspace, else allocated per call.
  std::optional<Bf16Scratch> scratch;
  std::optional<Bf16GradOperands> bf16_operands;
  if (bf16) {
    if constexpr (std::is_same_v<T, float>) {
      scratch.emplace("BlockGRUResetAfterGrad", a.bf16_workspace,
                      block_gru_reset_after_bf16_bwd_workspace_floats(S, B, I, H));
      const GRUResetAfterPlan<float>::Bf16* const p = bf16_packs(a.plan);
      gemm::PackedBBf16 w_h_t_now;
      const gemm::PackedBBf16& w_h_t = bf16_weight(p && a.plan->has_h_t ? &p->w_h_t : nullptr,
                                                   w_h_t_now, Trans::kYes, H3, H, a.w_h, H3);
      Bf16Lhs dgb("BlockGRUResetAfterGrad", B, H3, w_h_t.kernel(),
                  scratch->take(Bf16Lhs::storage_floats(B, H3)));
      gru_reset_after_bwd_loop(
          d, a, act, d_g, R, d_n, carry, w_h_t.panels(), w_h_t.panel_width(),
          [&](std::int64_t t, std::int64_t m, const UnitSplit& own) {
            dgb.product(int(t % 2), m, w_h_t, own.p0, own.p1, 1.0f, carry, H);
          },
          [&](std::int64_t t, const UnitSplit& own) {
            for (std::int64_t q = 0; q < 3; ++q) {
              dgb.round(int(t % 2), 0, B, q * H + own.j0, q * H + own.j1, d_g + t * B * R, R);
            }
          });
    }
  } else {
    const Packed<T> w_h_t(a.plan && a.plan->has_h_t ? &a.plan->w_h_t : nullptr, Trans::kYes, H3, H,
                          a.w_h, H3);
    gru_reset_after_bwd_loop(
        d, a, act, d_g, R, d_n, carry, w_h_t->panels(), w_h_t->panel_width(),
        [&](std::int64_t t, std::int64_t m, const UnitSplit& own) {
          gemm::gemm_panels(m, d_g + t * B * R, R, *w_h_t, own.p0, own.p1, T(1), carry, H);
        },
        [](std::int64_t, const UnitSplit&) {});
  }
  if (scratch) {
    const std::int64_t packed_floats = packed_bf16_floats(N, H3);
    bf16_operands = Bf16GradOperands{.packed = scratch->take(packed_floats),
                                     .packed_floats = packed_floats,
                                     .a_scratch = scratch->take(reset_after_lhs_floats(N, I, H)),
                                     .h_before = scratch->take(previous_h_bf16_floats(S, B, H))};
  }
  const Bf16GradOperands* const bf16_ops = bf16_operands ? &*bf16_operands : nullptr;

  if (act.all) {  // every row active: the products over all S·B rows, in place
    const std::int64_t SB = S * B;
    // d_w_h = [h_prev; h[0:S−1]]ᵀ·d_gh      [H, 3H] = [S·B, H]ᵀ·[S·B, 3H]
    reset_after_d_w_h(d, a, act, d_g, R, static_cast<const T*>(nullptr), bf16_ops, packed);
    // d_b_h = Σ_rows d_gh  [3H]
    column_sums(SB, H3, d_g, R, a.d_b_h);
    // d_gi = d_gh with its n block d_hn replaced by d_n_bar.
    core::parallel_for(SB, H, [&](std::int64_t e0, std::int64_t e1) {
      for (std::int64_t e = e0; e < e1; ++e) {
        std::copy(d_n + e * H, d_n + (e + 1) * H, d_g + e * R + 2 * H);
      }
    });
    // d_b_i = Σ_rows d_gi  [3H]
    column_sums(SB, H3, d_g, R, a.d_b_i);
    // d_w_i = xᵀ·d_gi;  d_x[0:S] = d_gi·w_iᵀ
    reset_after_input_grads(d, a, act, d_g, R, static_cast<T*>(nullptr), bf16_ops, packed);
    return;
  }

  T* const d_gc = ws.slice(2);  // [N, 3H] (row stride R)  d_gh of the active rows, then d_gi
  T* const hc = ws.slice(3);    // [N, H]  their h[t−1]
  T* const xc = ws.slice(4);    // [N, I]  their x, then their d_x
  gather_rows(act.rows, d_g, R, H3, d_gc, R);
  gather_inputs(act.rows, B, I, H, a.x, a.h_prev, a.h, xc, hc);
  reset_after_d_w_h(d, a, act, d_gc, R, hc, bf16_ops, packed);
  column_sums(N, H3, d_gc, R, a.d_b_h);
  // d_gi = d_gh with its n block replaced by d_n_bar.
  gather_rows(act.rows, d_n, H, H, d_gc + 2 * H, R);
  column_sums(N, H3, d_gc, R, a.d_b_i);
  reset_after_input_grads(d, a, act, d_gc, R, xc, bf16_ops, packed);
}

std::int64_t block_gru_reset_after_bf16_fwd_workspace_floats(std::int64_t S, std::int64_t B,
                                                             std::int64_t I, std::int64_t H) {
  return input_projection_bf16_floats(S, B, I) + Bf16Lhs::storage_floats(B, H);
}

// Backward: dgb, then the products' Bf16GradOperands (over at most S·B rows).
std::int64_t block_gru_reset_after_bf16_bwd_workspace_floats(std::int64_t S, std::int64_t B,
                                                             std::int64_t I, std::int64_t H) {
  const std::int64_t rows = S * B, H3 = 3 * H;
  return Bf16Lhs::storage_floats(B, H3) + packed_bf16_floats(rows, H3) +
         reset_after_lhs_floats(rows, I, H) + previous_h_bf16_floats(S, B, H);
}

template void block_gru_reset_after_fwd<float>(const BlockGRUDims&,
                                               const BlockGRUResetAfterFwdArgs<float>&);
template void block_gru_reset_after_fwd<double>(const BlockGRUDims&,
                                                const BlockGRUResetAfterFwdArgs<double>&);
template void block_gru_reset_after_bwd<float>(const BlockGRUDims&,
                                               const BlockGRUResetAfterBwdArgs<float>&);
template void block_gru_reset_after_bwd<double>(const BlockGRUDims&,
                                                const BlockGRUResetAfterBwdArgs<double>&);

}  // namespace blockrnn::cpu
