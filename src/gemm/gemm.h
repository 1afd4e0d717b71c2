// blockrnn's GEMM engine: every matrix product of the ops, deterministic by construction.
//
//   C[M,N] = beta·C + op(A)[M,K] · op(B)[K,N]        op(X) = X or Xᵀ, all row-major
//
// Determinism (docs/design.md, "Determinism"). Each output element is one fused multiply-add
// chain over k = 0, 1, …, K−1 in order, seeded with beta·C (0 when beta = 0, C itself when
// beta = 1):  c = fma(a[K−1]·b[K−1], … fma(a[0]·b[0], beta·c)).  The K blocking only stores
// and reloads the running value (exact), so the bits depend on neither the blocking nor the
// tiling. The output is cut into tiles (their shape from M, N, K, the ISA and the team's size,
// gemm.cc); one thread computes one tile over the whole K; K is never split across threads: so
// the bits do not depend on the thread count either. The avx512 and avx2 paths give identical
// bits (one FMA per step); the baseline path (SSE2, no FMA instruction) rounds the product and
// the sum separately.
//
// Speed. Register-blocked micro-kernels (per ISA: MR rows × NR columns of accumulators) over
// B packed into NR-wide column panels; A is read in place. PackedB packs a B once for many
// products with different A (the recurrent weights of a sequence, used at every step).
//
// Degenerate sizes are handled here (M or N = 0: nothing; K = 0: C = beta·C), so callers
// never special-case empty tensors. Nothing here allocates except gemm() (one scratch buffer
// for the packed B blocks of each thread) and PackedB::pack.
#pragma once

#include <cstdint>
#include <memory>

#include "blockrnn/context.h"

namespace blockrnn::gemm {

enum class Trans : bool { kNo = false, kYes = true };

// op(B) [K, N] packed into column panels for the micro-kernels of one ISA path: panel p holds
// columns [p·NR, p·NR + NR) of rows 0..K−1, k-major ([K][NR] contiguous), zero-padded past N.
template <typename T>
class PackedB {
 public:
  PackedB() = default;
  // Packs op(B) (B is [K, N] when tb = kNo, [N, K] when tb = kYes) for the active ISA path,
  // threaded over panels. Allocates, unless the panels this PackedB owns from an earlier pack
  // hold the new ones; throws Error(kResourceExhausted) when it cannot.
  void pack(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb);
  // The same for a given path (it must be one this CPU supports).
  void pack(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb, Isa isa);
  // The same into `storage`, `capacity` elements the caller owns and keeps alive while this
  // PackedB is used (at least elems(k, n, isa); packed_elems_bound(k, n) always is): allocates
  // nothing, so that a plan object's call can pack a per-call operand into its workspace.
  void pack_into(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb, Isa isa,
                 T* storage, std::int64_t capacity);
  // Elements of the panels of op(B) [k, n] on path isa.
  static std::int64_t elems(std::int64_t k, std::int64_t n, Isa isa);
  std::int64_t k() const { return k_; }
  std::int64_t n() const { return n_; }
  Isa isa() const { return isa_; }
  // NR: the columns of one panel (a multiple of the path's vector width).
  std::int64_t panel_width() const;
  std::int64_t panels() const { return (n_ + panel_width() - 1) / panel_width(); }
  const T* data() const { return data_.get(); }

 private:
  // Packs op(B) into data_ (sized for it) for path isa.
  void fill(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb, Isa isa);
  struct Free {
    bool owned = true;  // false: the caller's storage (pack_into)
    void operator()(T* p) const;
  };
  std::unique_ptr<T, Free> data_;
  std::int64_t capacity_ = 0;  // elements at data_
  std::int64_t k_ = 0, n_ = 0;
  Isa isa_ = Isa::kBaseline;
};

// An upper bound of PackedB<T>::elems(k, n, isa) on every path (panels of at most 64 columns,
// each a divisor of 64), for sizing a workspace before the path is known.
inline std::int64_t packed_elems_bound(std::int64_t k, std::int64_t n) {
  return k * ((n + 63) / 64 * 64);
}

// C = beta·C + op(A)·op(B), threaded over output tiles (get_num_threads()).
template <typename T>
void gemm(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

// C = beta·C + op(A)·B with B packed beforehand (its K and N); threaded over output tiles.
template <typename T>
void gemm(Trans trans_a, std::int64_t m, const T* a, std::int64_t lda, const PackedB<T>& b, T beta,
          T* c, std::int64_t ldc);

// The same over rows [k0, k1) of the packed B only: C = beta·C + op(A)·B[k0:k1, :], op(A) being
// [M, k1 − k0]. Chaining ranges with beta = 1 gives the bits of one product over the whole K
// (each output stays one in-order chain), so a product whose A lives in pieces needs one pack.
template <typename T>
void gemm(Trans trans_a, std::int64_t m, const T* a, std::int64_t lda, const PackedB<T>& b,
          std::int64_t k0, std::int64_t k1, T beta, T* c, std::int64_t ldc);

// For callers that run their own parallel region (the sequence ops: one region around the time
// loop). Columns [p0·NR, min(p1·NR, N)) of C = beta·C + A·B (A row-major [M, K], B packed; c
// points at column 0 of C), on the calling thread only: no threads, no allocation. The bits are
// those of the threaded gemm.
template <typename T>
void gemm_panels(std::int64_t m, const T* a, std::int64_t lda, const PackedB<T>& b, std::int64_t p0,
                 std::int64_t p1, T beta, T* c, std::int64_t ldc);

// dst = srcᵀ: src [rows, cols] (row stride lds) into dst [cols, rows] (row stride ldd),
// threaded over bands of rows, allocating nothing (copies only: the same values on every path
// and thread count). float and double on the active ISA path's kernels; 16-bit values (float16
// and bfloat16 bits) one at a time, 64 columns at a time.
template <typename T>
void transpose(std::int64_t rows, std::int64_t cols, const T* src, std::int64_t lds, T* dst,
               std::int64_t ldd);

}  // namespace blockrnn::gemm
