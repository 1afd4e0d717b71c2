// bfloat16 products of the fast sequence kernels (src/cpu/block_lstm.cc, src/cpu/block_gru.cc):
// what a kernel runs instead of its float32 GEMMs when its arguments say `bf16_products` (a
// bfloat16 call: the op sets it from the call's dtype). The operands are rounded to bfloat16
// (nearest even) and multiplied on the bfloat16 GEMM (gemm/gemm_bf16.h), the sums in float32;
// everything else a kernel does (the carried state, the element-wise passes, the bias and
// peephole reductions) stays float32. Inputs the op widened from bfloat16 are rounded exactly.
//
// A recurrent product's left operand is written by column ranges (each thread of the time loop
// its own columns of h[t] or d_gates[t]) and read whole by the next product, so it is rounded by
// its owners right after they write it (Bf16Lhs::round, elementwise: the bits do not depend on
// who rounds) into one of two buffers, alternating by step where the loop has one barrier a
// step (the LSTM): a thread that runs ahead into the next step writes the other buffer while
// the team may still read this one, and the step's barrier orders the rest. Where a barrier
// separates every write from the last read of the previous contents (the GRU's two a step),
// one buffer is used. Nothing here allocates after construction.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "blockrnn/error.h"
#include "core/first_touch.h"
#include "cpu/sequence_common.h"
#include "gemm/bf16.h"
#include "gemm/gemm.h"
#include "gemm/gemm_bf16.h"

namespace blockrnn::cpu {

// Two [rows, k] left operands of a recurrent bfloat16 product, for B packed with `kernel`:
// bfloat16 pairs (row stride bf16_pairs_ld(k), an odd k padded with a zero) for kDpbf16, or
// float32 holding bfloat16 values (row stride k) for kWidened. They live in `storage` when given
// (storage_floats(rows, k) floats: a plan-once caller's workspace), else in buffers allocated
// here.
class Bf16Lhs {
 public:
  Bf16Lhs(const char* op, std::int64_t rows, std::int64_t k, gemm::Bf16Kernel kernel,
          float* storage = nullptr)
      : dp_(kernel == gemm::Bf16Kernel::kDpbf16),
        ld_(dp_ ? gemm::bf16_pairs_ld(k) : k),
        size_(rows * ld_) {
    if (storage != nullptr) {
      // Zeroed as the owned buffers are: the odd-k pad of kDpbf16 stays zero.
      if (dp_) {
        bits_ = reinterpret_cast<std::uint16_t*>(storage);
        std::fill_n(bits_, 2 * size_, std::uint16_t(0));
      } else {
        wide_ = storage;
        std::fill_n(wide_, 2 * size_, 0.0f);
      }
      return;
    }
    try {
      if (dp_) {
        own_bits_.assign(static_cast<std::size_t>(2 * size_), 0);  // the odd-k pad stays zero
        bits_ = own_bits_.data();
      } else {
        own_wide_.assign(static_cast<std::size_t>(2 * size_), 0.0f);
        wide_ = own_wide_.data();
      }
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kResourceExhausted,
                  std::string(op) + ": cannot allocate the workspace for this problem size");
    }
  }
  Bf16Lhs(const Bf16Lhs&) = delete;
  Bf16Lhs& operator=(const Bf16Lhs&) = delete;

  // The floats of `storage` for [rows, k], whichever the kernel: two buffers of rows·k float32
  // for kWidened; kDpbf16 holds 2 bytes an element, k padded to even, never more.
  static std::int64_t storage_floats(std::int64_t rows, std::int64_t k) { return 2 * rows * k; }

  // Rows [r0, r1), columns [c0, c1) of src (row stride lds) rounded into buffer `slot` (0, 1).
  void round(int slot, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1,
             const float* src, std::int64_t lds) {
    // An even count through round_rows_bf16 (vector code where the CPU has AVX512_BF16, the same
    // bits as bf16_from_float), which then writes no pad past it: an odd range's pad would be
    // the next column, another thread's.
    const std::int64_t even = (c1 - c0) & ~std::int64_t(1);
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* in = src + r * lds;
      if (dp_) {
        std::uint16_t* out = bits_ + slot * size_ + r * ld_;
        if (even > 0) gemm::round_rows_bf16(0, 1, even, in + c0, lds, out + c0);
        if (c0 + even < c1) out[c1 - 1] = gemm::bf16_from_float(in[c1 - 1]);
      } else {
        float* out = wide_ + slot * size_ + r * ld_;
        for (std::int64_t j = c0; j < c1; ++j) out[j] = gemm::bf16_round(in[j]);
      }
    }
  }

  // Columns of panels [p0, p1) of C = beta·C + L[0:m]·B, L buffer `slot`, on this thread only
  // (gemm_bf16_panels or, for kWidened, the float32 engine's gemm_panels).
  void product(int slot, std::int64_t m, const gemm::PackedBBf16& b, std::int64_t p0,
               std::int64_t p1, float beta, float* c, std::int64_t ldc) const {
    if (dp_) {
      gemm::gemm_bf16_panels(m, bits_ + slot * size_, ld_, b, p0, p1, beta, c, ldc);
    } else {
      gemm::gemm_panels<float>(m, wide_ + slot * size_, ld_, b.widened(), p0, p1, beta, c, ldc);
    }
  }

 private:
  bool dp_;
  std::int64_t ld_, size_;
  std::uint16_t* bits_ = nullptr;  // kDpbf16: 2·size_ elements
  float* wide_ = nullptr;          // kWidened: 2·size_ elements
  std::vector<std::uint16_t> own_bits_;
  std::vector<float> own_wide_;
};

// A weight packed for bfloat16 products: the plan's (`planned`, packed once by the plan's
// pack_bf16 exactly so, sequence_plan.h) or, without one, op(B) packed now into `local`.
inline const gemm::PackedBBf16& bf16_weight(const gemm::PackedBBf16* planned,
                                            gemm::PackedBBf16& local, gemm::Trans tb,
                                            std::int64_t k, std::int64_t n, const float* b,
                                            std::int64_t ldb) {
  if (planned != nullptr) return *planned;
  local.pack(tb, k, n, b, ldb);
  return local;
}

// C [m, n] = beta·C + bf16(A)·bf16(W)ᵀ, W [n, k] (row stride ldw) a weight: on its transpose
// packed by the plan (`planned_t`, the pack the one-shot product makes, so the same bits), or
// the one-shot gemm_bf16 that packs it per call.
// A is rounded into `a_scratch` (gemm_bf16_a_scratch_floats(m, k) floats) on the plan's pack.
inline void product_weight_t_bf16(const gemm::PackedBBf16* planned_t, std::int64_t m,
                                  std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                                  const float* w, std::int64_t ldw, float beta, float* c,
                                  std::int64_t ldc, float* a_scratch) {
  if (planned_t != nullptr) {
    gemm::gemm_bf16(gemm::Trans::kNo, m, a, lda, *planned_t, beta, c, ldc, a_scratch);
  } else {
    gemm::gemm_bf16(gemm::Trans::kNo, gemm::Trans::kYes, m, n, k, a, lda, w, ldw, beta, c, ldc);
  }
}

// out[t] = x[t]·w for all S·B rows, or with per-step prefix lengths each step's active prefix
// (as input_projection, sequence_common.h), on w packed for bfloat16 products.
// x is rounded into `scratch` when given (input_projection_bf16_floats), else into a buffer
// allocated per product.
inline void input_projection_bf16(const ActiveRows& act, const gemm::PackedBBf16& w, const float* x,
                                  std::int64_t I, float* out, std::int64_t ld,
                                  float* scratch = nullptr) {
  if (!act.per_step_prefix()) {
    gemm::gemm_bf16(gemm::Trans::kNo, act.S * act.B, x, I, w, 0.0f, out, ld, scratch);
    return;
  }
  for (std::int64_t t = 0; t < act.S; ++t) {
    gemm::gemm_bf16(gemm::Trans::kNo, act.count[t], x + t * act.B * I, I, w, 0.0f,
                    out + t * act.B * ld, ld, scratch);
  }
}

// The floats of input_projection_bf16's `scratch` for S steps of B rows of I inputs.
inline std::int64_t input_projection_bf16_floats(std::int64_t S, std::int64_t B, std::int64_t I) {
  return gemm::gemm_bf16_a_scratch_floats(S * B, I, gemm::active_bf16_kernel());
}

// The floats of one gemm_bf16 `a_scratch` for the rounded left operands of several products
// taken in turn, each [m, k], on the active path's kernel.
inline std::int64_t lhs_scratch_floats(std::initializer_list<std::array<std::int64_t, 2>> shapes) {
  const gemm::Bf16Kernel kernel = gemm::active_bf16_kernel();
  std::int64_t most = 0;
  for (const auto& [m, k] : shapes) {
    most = std::max(most, gemm::gemm_bf16_a_scratch_floats(m, k, kernel));
  }
  return most;
}

// The floats of PackedBBf16::pack_into's storage for [k, n] on the active path's kernel.
inline std::int64_t packed_bf16_floats(std::int64_t k, std::int64_t n) {
  return gemm::PackedBBf16::packed_floats(k, n, gemm::active_bf16_kernel());
}

// A forward's bf16_workspace (the kernel argument) holds x's rounding for the input projection
// first, then the storage of its Bf16Lhs operands: the part past x's rounding, or nullptr when
// the call has no bf16_workspace (its operands are then allocated).
inline float* past_input_projection_bf16(float* bf16_workspace, std::int64_t S, std::int64_t B,
                                         std::int64_t I) {
  return bf16_workspace != nullptr ? bf16_workspace + input_projection_bf16_floats(S, B, I)
                                   : nullptr;
}

// The floats of previous_h_bf16's storage (S·B·H bfloat16 values, two a float).
inline std::int64_t previous_h_bf16_floats(std::int64_t S, std::int64_t B, std::int64_t H) {
  return (S * B * H + 1) / 2;
}

// The [S·B, H] matrix [h_prev; h[0:S−1]] (h[t−1] of every row t·B + b) in bfloat16, written
// into `storage` (previous_h_bf16_floats): the left operand (transposed) of a weight gradient
// over all S·B rows.
inline const std::uint16_t* previous_h_bf16(std::int64_t S, std::int64_t B, std::int64_t H,
                                            const float* h_prev, const float* h, float* storage) {
  std::uint16_t* const out = reinterpret_cast<std::uint16_t*>(storage);
  const std::int64_t BH = B * H;
  for (std::int64_t e = 0; e < BH; ++e) out[e] = gemm::bf16_from_float(h_prev[e]);
  for (std::int64_t e = BH; e < S * BH; ++e) out[e] = gemm::bf16_from_float(h[e - BH]);
  return out;
}

// The storage of a bfloat16 backward's operands (its Bf16Lhs buffers, packed gate gradients,
// [h_prev; h[0:S−1]] and the rounded left operands of the products), taken in order from the
// caller's bf16_workspace (a plan-once layer's, `capacity` floats:
// block_*_bf16_bwd_workspace_floats) or, without one (the one-shot ops), from buffers allocated
// here and freed with it.
class Bf16Scratch {
 public:
  Bf16Scratch(const char* op, float* workspace, std::int64_t capacity)
      : op_(op), next_(workspace), left_(capacity) {}
  Bf16Scratch(const Bf16Scratch&) = delete;
  Bf16Scratch& operator=(const Bf16Scratch&) = delete;

  // [k, n] of b (row stride ldb) packed into `packed` on storage taken here.
  void pack(gemm::PackedBBf16& packed, std::int64_t k, std::int64_t n, const float* b,
            std::int64_t ldb) {
    const std::int64_t floats = packed_bf16_floats(k, n);
    packed.pack_into(gemm::Trans::kNo, k, n, b, ldb, take(floats), floats);
  }

  float* take(std::int64_t floats) {
    if (next_ != nullptr) {
      if (floats > left_) {
        throw Error(ErrorCode::kInternal,
                    std::string(op_) + ": the bfloat16 operands outgrew their workspace (" +
                        std::to_string(floats) + " floats, " + std::to_string(left_) + " left)");
      }
      float* const p = next_;
      next_ += floats;
      left_ -= floats;
      return p;
    }
    try {
      // Uninitialised, as the allocations it replaces: every user writes what it reads.
      own_.push_back(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(floats)));
      core::fault_in(own_.back().get(), static_cast<std::size_t>(floats) * sizeof(float));
      return own_.back().get();
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kResourceExhausted,
                  std::string(op_) + ": cannot allocate the workspace for this problem size");
    }
  }

 private:
  const char* op_;
  float* next_;
  std::int64_t left_;
  // Each buffer stays where it is when the list grows; an empty list allocates nothing (a
  // std::deque would, even empty).
  std::vector<std::unique_ptr<float[]>> own_;
};

}  // namespace blockrnn::cpu
