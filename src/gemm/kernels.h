// Internal interface between the GEMM driver (gemm.cc) and the per-ISA kernel files
// (kernels_avx512.cc, kernels_avx2.cc, kernels_baseline.cc, each defining its table as
// gemm_path_table<Tag>() of kernels_table.h with its own instruction-set flags). Nothing here
// depends on an ISA.
#pragma once

#include <cstdint>

namespace blockrnn::gemm::detail {

// Register and cache blocking of one (ISA, dtype) path. MR × NR is the micro-kernel's
// accumulator tile; KC the K block (the packed B block of a tile is KC × NT); MT × NT the
// output tile one thread computes (NT_TRANS_A for a transposed A, which is packed per tile).
// MT and both NT are multiples of MR and NR.
struct Blocking {
  int mr, nr, kc, mt_max, nt, nt_trans_a;
};

// One product, with the output tiling chosen (gemm.cc, set_tiling).
template <typename T>
struct Problem {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const T* a = nullptr;  // op(A) [M, K]: A is [M, K] (row stride lda) or [K, M] when trans_a
  std::int64_t lda = 0;
  const T* b = nullptr;  // op(B) [K, N]: B is [K, N] (row stride ldb) or [N, K] when trans_b
  std::int64_t ldb = 0;
  const T* packed = nullptr;   // B already packed (PackedB layout) for this path, or nullptr:
  std::int64_t packed_ld = 0;  // then row k0 of panel q is packed[q·packed_ld + k0·NR]
  T beta = T(0);
  T* c = nullptr;  // [M, N] (row stride ldc)
  std::int64_t ldc = 0;
  std::int64_t mt = 0, nt = 0;  // output tile
  std::int64_t tiles_m = 0, tiles_n = 0;
};

template <typename T>
struct PathKernels {
  Blocking blocking;
  // Computes output tiles [t0, t1) (column-major tile order: t = in·tiles_m + im). scratch:
  // scratch_elems(p) elements of this thread.
  void (*run_tiles)(const Problem<T>& p, std::int64_t t0, std::int64_t t1, T* scratch);
  // Packs op(B) panels [p0, p1) into dst (PackedB layout: panel p at dst + p·K·NR).
  void (*pack_panels)(bool trans_b, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb,
                      std::int64_t p0, std::int64_t p1, T* dst);
  // dst[c·ldd + r] = src[r·lds + c] for r < rows, c < cols (gemm.h's transpose).
  void (*transpose)(std::int64_t rows, std::int64_t cols, const T* src, std::int64_t lds, T* dst,
                    std::int64_t ldd);
};

// The K block of a product whose B is packed per tile (not prepacked): at most this many rows,
// whatever the path's KC, so that the packed block stays in L2 (a one-shot product's
// transposed weights; on a Zen 3 core, GRUBlockCellGrad B = 64, I = H = 512 took 8 % longer
// with the avx2 path's KC of 1024 than with 256).
constexpr std::int64_t kPackedPerTileKC = 256;

// The rows of the K blocks of a product: KC (capped as above when B is packed per tile), or
// all of K when K is shorter. Internal linkage (static): the per-path files call it too, and a
// copy compiled with their instruction sets must never be the one the linker keeps.
static inline std::int64_t k_block_rows(std::int64_t kc, bool prepacked, std::int64_t k) {
  const std::int64_t block = prepacked || kc < kPackedPerTileKC ? kc : kPackedPerTileKC;
  return k < block ? k : block;
}

// Per-thread scratch of run_tiles: the packed B block (unless B is prepacked) and the packed
// A block (transposed A), each sized for the K blocks of this product.
template <typename T>
std::int64_t scratch_elems(const Blocking& bl, const Problem<T>& p) {
  const std::int64_t kc = k_block_rows(bl.kc, p.packed != nullptr, p.k);
  return (p.packed != nullptr ? 0 : kc * p.nt) + (p.trans_a ? kc * p.mt : 0);
}

struct Path {
  PathKernels<float> f32;
  PathKernels<double> f64;
};

extern const Path kAvx512Path;
extern const Path kAvx2Path;
extern const Path kBaselinePath;

// The bfloat16 product on packed operands (gemm_bf16.h; kernels_bf16_avx512.cc), K taken in
// pairs (kp = ⌈K/2⌉ pairs, an odd K padded with a zero):
//   A: bfloat16, row-major [M, 2·kp] with row stride lda (≥ 2·kp): row r's pair p is the
//      32-bit word at a + r·lda + 2p, the even k in the low half (what a row-major bfloat16
//      matrix of even K already is);
//   B: NR-column panels, panel q at b + q·kp·NR·2; pair p of column j at + (p·NR + j)·2
//      (columns past N are zeros).
// Tiles as for float32: MT × NT, column-major tile order, one thread per tile over all of K.
struct Bf16Problem {
  std::int64_t m = 0, n = 0, kp = 0;
  const std::uint16_t* a = nullptr;
  std::int64_t lda = 0;
  const std::uint16_t* b = nullptr;
  float beta = 0.0f;
  float* c = nullptr;  // [M, N] (row stride ldc)
  std::int64_t ldc = 0;
  std::int64_t mt = 0, nt = 0;  // output tile
  std::int64_t tiles_m = 0, tiles_n = 0;
};

struct Bf16Kernels {
  int mr, nr, kc_pairs, mt_max, nt;
  // Computes output tiles [t0, t1) (t = in·tiles_m + im); no scratch.
  void (*run_tiles)(const Bf16Problem& p, std::int64_t t0, std::int64_t t1);
  // dst[0:n] = the bfloat16 bits of src[0:n], bit for bit bf16_from_float (bf16.h) in vector
  // code: rounds the float32 rows of A for run_tiles.
  void (*round_row)(const float* src, std::int64_t n, std::uint16_t* dst);
  // Panels [p0, p1) of op(B) [k, n] (float32 B stored [k, n], or [n, k] when trans) as
  // bfloat16 pairs (the layout above), rounded bit for bit as bf16_from_float, zero past k
  // and n: PackedBBf16's packing of a float32 B, in vector code.
  void (*pack_pairs)(bool trans, std::int64_t k, std::int64_t n, const float* b, std::int64_t ldb,
                     std::int64_t p0, std::int64_t p1, std::uint16_t* dst);
};

// The AVX512_BF16 kernels (vdpbf16ps); only run on a CPU that has them.
extern const Bf16Kernels kAvx512Bf16Kernels;

}  // namespace blockrnn::gemm::detail
