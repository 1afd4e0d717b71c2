// The bfloat16 GEMM: float32 results from bfloat16 operands, deterministic like the float32
// engine (gemm.h).
//
//   C[M,N] (float32) = beta·C + bf16(op(A))[M,K] · bf16(op(B))[K,N]      op(X) = X or Xᵀ
//
// Operands are row-major float32 (`float`) or bfloat16 bits (`std::uint16_t`, see bf16.h),
// in any of the four combinations; a float32 operand is rounded to bfloat16 (nearest, ties to
// even; NaN kept a quiet NaN) when it is packed — the only rounding to bfloat16 in the product.
// Every product of two bfloat16 values is exact in float32; the sums are float32.
//
// Two kernels, chosen per ISA path (bf16_kernel_for):
//   - kDpbf16 (the avx512 path on a CPU with AVX512_BF16): both operands packed into bfloat16
//     panels with K in pairs (kernels.h), micro-kernels on vdpbf16ps. Per output, one chain
//     over the pairs of k in order, seeded with beta·C; each step adds the odd k's product,
//     then the even k's, each with one float32 rounding. vdpbf16ps treats subnormal inputs
//     and results as zero.
//   - kWidened (every other path: avx2, baseline, an AVX-512 CPU without AVX512_BF16): the
//     operands rounded to bfloat16 and widened to float32 (exact), then the float32 engine of
//     that path: one chain over k = 0, 1, … in order (exact products, so an FMA step equals
//     vdpbf16ps's add of one product), with subnormals kept. Its bits can therefore differ from
//     kDpbf16's in the last places (the order within each pair, subnormals), never by more
//     than the float32 accumulation error both share.
// Within one kernel the bits depend neither on the blocking nor on the thread count: the
// output is cut into tiles fixed by (M, N, K, path), one thread computes a tile over all of
// K, and K is never split across threads.
//
// Degenerate sizes: M or N = 0 writes nothing; K = 0 gives C = beta·C. With beta = 0, C is
// not read. Negative sizes are an internal error (Error kInternal).
#pragma once

#include <cstdint>
#include <memory>

#include "blockrnn/context.h"
#include "gemm/gemm.h"

namespace blockrnn::gemm {

enum class Bf16Kernel { kDpbf16, kWidened };

// The kernel a bfloat16 product runs on for the given path on this CPU.
Bf16Kernel bf16_kernel_for(Isa isa);
// The same for the active path (core::active_isa()): what pack and pack_into use.
Bf16Kernel active_bf16_kernel();

// op(B) [K, N] rounded to bfloat16 and packed once for many products (the recurrent weights
// of a sequence, used at every step): kDpbf16 panels of K pairs, or kWidened float32 panels of
// the path's float32 engine.
class PackedBBf16 {
 public:
  PackedBBf16() = default;
  // Packs op(B) (B is [K, N] when tb = kNo, [N, K] when tb = kYes; float or std::uint16_t)
  // for the active ISA path, threaded over panels. Allocates; throws Error(kResourceExhausted)
  // when it cannot.
  template <typename TB>
  void pack(Trans tb, std::int64_t k, std::int64_t n, const TB* b, std::int64_t ldb);
  // The same for a given path (one this CPU supports) and kernel (kDpbf16 only where
  // bf16_kernel_for(isa) gives it; kWidened on any path).
  template <typename TB>
  void pack(Trans tb, std::int64_t k, std::int64_t n, const TB* b, std::int64_t ldb, Isa isa,
            Bf16Kernel kernel);
  // The same as pack(tb, k, n, b, ldb) into the caller's storage (`capacity` floats, at least
  // packed_floats(k, n, active_bf16_kernel()), valid while this PackedBBf16 is used),
  // allocating nothing: a plan-once caller packs a per-call operand into its workspace. Same
  // panels, same bits.
  void pack_into(Trans tb, std::int64_t k, std::int64_t n, const float* b, std::int64_t ldb,
                 float* storage, std::int64_t capacity);
  // The floats of pack_into's storage for op(B) [k, n] on `kernel`: kDpbf16 panels of at most
  // 64 columns of ⌈k/2⌉ pairs (4 bytes a pair); kWidened op(B) rounded into k·n floats, then
  // packed into the float32 engine's panels.
  static std::int64_t packed_floats(std::int64_t k, std::int64_t n, Bf16Kernel kernel) {
    return kernel == Bf16Kernel::kDpbf16 ? packed_elems_bound((k + 1) / 2, n)
                                         : k * n + packed_elems_bound(k, n);
  }
  std::int64_t k() const { return k_; }
  std::int64_t n() const { return n_; }
  Isa isa() const { return isa_; }
  Bf16Kernel kernel() const { return kernel_; }
  // NR: the columns of one panel (32 for kDpbf16; the float32 path's for kWidened).
  std::int64_t panel_width() const;
  std::int64_t panels() const { return (n_ + panel_width() - 1) / panel_width(); }
  // kDpbf16: the bfloat16 panels (kernels.h layout); kWidened: the float32 panels.
  const std::uint16_t* pairs() const { return pairs_.get(); }
  const PackedB<float>& widened() const { return widened_; }

 private:
  struct Free {
    Free() noexcept : owned(true) {}
    bool owned;  // false: the caller's storage (pack_into)
    void operator()(std::uint16_t* p) const;
  };
  // pack and pack_into: into `storage` (packed_floats(k, n) floats) when given, else allocated.
  template <typename TB>
  void pack_to(Trans tb, std::int64_t k, std::int64_t n, const TB* b, std::int64_t ldb, Isa isa,
               Bf16Kernel kernel, float* storage);
  std::unique_ptr<std::uint16_t, Free> pairs_;
  std::int64_t pairs_capacity_ = 0;  // bfloat16 values at pairs_ when owned
  PackedB<float> widened_;
  std::int64_t k_ = 0, n_ = 0;
  Isa isa_ = Isa::kBaseline;
  Bf16Kernel kernel_ = Bf16Kernel::kWidened;
};

// C = beta·C + bf16(op(A))·bf16(op(B)) on the active path, threaded over output tiles
// (get_num_threads()). TA, TB: float or std::uint16_t.
template <typename TA, typename TB>
void gemm_bf16(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               const TA* a, std::int64_t lda, const TB* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc);

// C = beta·C + bf16(op(A))·B with B packed beforehand (its K, N, path and kernel); threaded
// over output tiles. Same bits as the one-shot product on that path and kernel. A is rounded
// into `a_scratch` when given (gemm_bf16_a_scratch_floats(m, K) floats, e.g. a plan-once
// caller's workspace), else into a buffer allocated for the call.
template <typename TA>
void gemm_bf16(Trans trans_a, std::int64_t m, const TA* a, std::int64_t lda, const PackedBBf16& b,
               float beta, float* c, std::int64_t ldc, float* a_scratch = nullptr);

// The floats of gemm_bf16's `a_scratch` for an [m, k] A on `kernel`: kWidened widens A into
// m·k floats; kDpbf16 packs it into m rows of ⌈k/2⌉ bfloat16 pairs (4 bytes each).
inline std::int64_t gemm_bf16_a_scratch_floats(std::int64_t m, std::int64_t k, Bf16Kernel kernel) {
  return kernel == Bf16Kernel::kDpbf16 ? m * ((k + 1) / 2) : m * k;
}

// For callers that run their own parallel region (the sequence ops: one region around the time
// loop), in two steps that neither start threads nor allocate:
//
// 1. round_rows_bf16: rows [r0, r1) of A (row-major [M, K], row stride lda; float32 or
//    bfloat16) as bfloat16 pairs at dst + r·bf16_pairs_ld(K) (rounded to nearest even, an odd
//    K padded with a zero) — each thread its own rows, then a barrier;
// 2. gemm_bf16_panels: columns [p0·NR, min(p1·NR, N)) of C = beta·C + A·B on the calling
//    thread, A being those pairs (row stride lda ≥ bf16_pairs_ld(K)), c pointing at column 0
//    of C. Same bits as gemm_bf16 with the same B.
// kDpbf16 packs only: with a kWidened pack, use gemm_panels<float> on b.widened() with A
// rounded to bfloat16 as float32 (bf16_round); gemm_bf16_panels refuses it (Error kInternal).
inline std::int64_t bf16_pairs_ld(std::int64_t k) {
  return 2 * ((k + 1) / 2);
}

template <typename TA>
void round_rows_bf16(std::int64_t r0, std::int64_t r1, std::int64_t k, const TA* a,
                     std::int64_t lda, std::uint16_t* dst);

void gemm_bf16_panels(std::int64_t m, const std::uint16_t* a, std::int64_t lda,
                      const PackedBBf16& b, std::int64_t p0, std::int64_t p1, float beta, float* c,
                      std::int64_t ldc);

}  // namespace blockrnn::gemm
