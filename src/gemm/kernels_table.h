// The GEMM micro-kernels and tile driver of one ISA path, written once and compiled once per
// path: kernels_avx512.cc, kernels_avx2.cc and kernels_baseline.cc each define, in an anonymous
// namespace, a tag type whose member template Vec<T> holds that path's vector operations and
// blocking for float and double, and their table as gemm_path_table<Tag>(), with their own
// instruction-set flags (CMakeLists.txt). The tag's internal linkage gives every function here
// that is instantiated for it internal linkage too, so no code compiled for one instruction set
// can be picked by the linker for another (the one-definition-rule trap of per-file ISA flags;
// the objects define no weak code symbols: tests/cpp/check_isa_objects.sh checks).
//
// Shape letters: M, N, K of C[M,N] = beta·C + op(A)[M,K]·op(B)[K,N]; MR × NR the accumulator
// tile (NV vectors of L lanes per row); KC the K block (at most kPackedPerTileKC rows where B
// is packed per tile, kernels.h); MT × NT the output tile of one thread.
//
// Per output tile (rows i0.., columns j0..):
//   for each K block [k0, k0+KC):
//     pack op(B)[k0:k0+KC, j0:j0+NT] into NR-wide panels (unless B is prepacked)
//     transposed A: pack A's block into MR-row strips (row-major A is read in place)
//     for each panel (NR columns):   B panel stays in L1
//       for each MR-row strip:       A strip from L1/L2
//         acc = (first block ? beta·C : C);  acc += a[:,k]·b[k,:] for k in the block, in order;
//         C = acc
// A tile of a single strip of one or two rows takes its panels in groups of 4 or 2 per kernel
// call (grouped_panels). Edges: a strip of fewer than MR rows runs a kernel instantiated for that
// many rows; a panel narrower than NR computes into a local MR × NR tile and copies the valid
// columns.
#pragma once

#include <cstdint>
#include <utility>

#include "gemm/kernels.h"

namespace blockrnn::gemm::detail {

using std::int64_t;

// The vector operations and blocking of the path `Isa` (a tag type of the path's file; see the
// header comment) for T = float, double: the vector type V, its lanes, the tile kMR × kNV·lanes,
// the K block kKC, the largest output tile's rows kMTMax and its panels kNTPanels, and zero,
// load, store, bcast, fmadd (a·b + c; the baseline path rounds the product first) and mul.
template <class Isa, typename T>
using VecOf = typename Isa::template Vec<T>;

// Internal linkage, as every function below has for a path's tag.
static inline int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// How the accumulators start: from zero, from C, or from beta·C.
enum class Init { kZero, kLoad, kScale };

// acc[ROWS][PANELS·NV] over one K block: C[r, :PANELS·NR] = init + Σ_k A(r, k)·B[k, :], k in
// order, B's columns taken from PANELS consecutive panels, panel p at panel + p·panel_stride.
// A(r, k) is a[r·lda + k] (A row-major) or a[k·lda + r] (TRANS_A: A stored [K, M]).
// A panel: [kc][NR] contiguous. c: ROWS rows of PANELS·NR values, row stride ldc.
// Every accumulator is its own output's chain over k: grouping panels changes no bit, it only
// gives a strip of one or two rows enough independent chains to cover the FMA latency (a
// 1 × NR tile has NV chains, too few to keep both FMA ports busy: the B = 1 recurrent step).
template <class Isa, typename T, int ROWS, int PANELS, bool TRANS_A>
void micro_kernel(int64_t kc, const T* a, int64_t lda, const T* panel, int64_t panel_stride, T* c,
                  int64_t ldc, Init init, T beta) {
  using O = VecOf<Isa, T>;
  using V = typename O::V;
  constexpr int L = O::kLanes, NV = O::kNV, NR = NV * L, W = PANELS * NV;
  V acc[ROWS][W];
  if (init == Init::kZero) {
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < W; ++v) acc[r][v] = O::zero();
  } else if (init == Init::kLoad) {
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < W; ++v) acc[r][v] = O::load(c + r * ldc + v * L);
  } else {
    const V bv = O::bcast(&beta);
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < W; ++v) acc[r][v] = O::mul(bv, O::load(c + r * ldc + v * L));
  }
  for (int64_t k = 0; k < kc; ++k) {
    V bv[W];
    for (int p = 0; p < PANELS; ++p)
      for (int v = 0; v < NV; ++v)
        bv[p * NV + v] = O::load(panel + p * panel_stride + k * NR + v * L);
    for (int r = 0; r < ROWS; ++r) {
      const V av = O::bcast(TRANS_A ? a + k * lda + r : a + r * lda + k);
      for (int v = 0; v < W; ++v) acc[r][v] = O::fmadd(av, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int v = 0; v < W; ++v) O::store(c + r * ldc + v * L, acc[r][v]);
}

template <typename T>
using KernelFn = void (*)(int64_t, const T*, int64_t, const T*, int64_t, T*, int64_t, Init, T);

// kernel_for<Isa, T, TRANS_A>(rows): the one-panel micro-kernel for 1..MR rows.
template <class Isa, typename T, bool TRANS_A, int... R>
constexpr auto make_table(std::integer_sequence<int, R...>) {
  struct Table {
    KernelFn<T> fn[sizeof...(R)];
  };
  return Table{{&micro_kernel<Isa, T, R + 1, 1, TRANS_A>...}};
}

template <class Isa, typename T, bool TRANS_A>
KernelFn<T> kernel_for(int rows) {
  static constexpr auto table =
      make_table<Isa, T, TRANS_A>(std::make_integer_sequence<int, VecOf<Isa, T>::kMR>{});
  return table.fn[rows - 1];
}

// Panels per call of a tile whose only strip has `rows` rows: four for one row, two for two
// (eight accumulator vectors or more at NV = 2), else one.
constexpr int grouped_panels(int64_t rows) {
  return rows == 1 ? 4 : rows == 2 ? 2 : 1;
}

// The grouped micro-kernel for a strip of 1 or 2 rows (grouped_panels).
template <class Isa, typename T, bool TRANS_A>
KernelFn<T> grouped_kernel_for(int rows) {
  return rows == 1 ? &micro_kernel<Isa, T, 1, grouped_panels(1), TRANS_A>
                   : &micro_kernel<Isa, T, 2, grouped_panels(2), TRANS_A>;
}

// Packs op(B)[k0:k0+kc, j0:j0+nc] into NR-wide panels [kc][NR] at dst (panel q at
// dst + q·kc·NR), zero-padding the columns past nc.
template <class Isa, typename T>
void pack_block(bool trans_b, int64_t k0, int64_t kc, int64_t j0, int64_t nc, const T* b,
                int64_t ldb, T* dst) {
  constexpr int NR = VecOf<Isa, T>::kNV * VecOf<Isa, T>::kLanes;
  for (int64_t q = 0; q * NR < nc; ++q) {
    T* panel = dst + q * kc * NR;
    const int64_t jq = j0 + q * NR, w = min64(NR, nc - q * NR);
    if (!trans_b) {
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = b + (k0 + k) * ldb + jq;  // op(B)[k, j] = B[k, j]
        T* out = panel + k * NR;
        int64_t j = 0;
        for (; j < w; ++j) out[j] = src[j];
        for (; j < NR; ++j) out[j] = T(0);
      }
    } else {
      // op(B)[k, j] = B[j, k]: 8 × 8 blocks transposed in registers where the path has a
      // transpose (float on avx2 and avx512: 8 loads and 8 stores of 8 values per 64 values;
      // one at a time, the scattered stores ran at a fifth of a plain copy's speed) cover the
      // first j8 rows' first k8 values; the rest is read along each row of B, one at a time.
      int64_t j8 = 0, k8 = 0;
      if constexpr (requires { VecOf<Isa, T>::transpose8; }) {
        j8 = w - w % 8;
        k8 = kc - kc % 8;
        for (int64_t j = 0; j < j8; j += 8) {
          const T* src = b + (jq + j) * ldb + k0;
          for (int64_t k = 0; k < k8; k += 8) {
            VecOf<Isa, T>::transpose8(src + k, ldb, panel + k * NR + j, NR);
          }
        }
      }
      for (int64_t j = 0; j < w; ++j) {
        const T* src = b + (jq + j) * ldb + k0;
        for (int64_t k = j < j8 ? k8 : 0; k < kc; ++k) panel[k * NR + j] = src[k];
      }
      for (int64_t j = w; j < NR; ++j)
        for (int64_t k = 0; k < kc; ++k) panel[k * NR + j] = T(0);
    }
  }
}

template <class Isa, typename T>
void pack_panels(bool trans_b, int64_t k, int64_t n, const T* b, int64_t ldb, int64_t p0,
                 int64_t p1, T* dst) {
  constexpr int NR = VecOf<Isa, T>::kNV * VecOf<Isa, T>::kLanes;
  for (int64_t p = p0; p < p1; ++p) {
    pack_block<Isa>(trans_b, 0, k, p * NR, min64(NR, n - p * NR), b, ldb, dst + p * k * NR);
  }
}

// Packs A[i0:i0+mt, k0:k0+kc] (A stored [K, M], the transposed case) into MR-row strips
// [kc][MR] at dst (strip q at dst + q·kc·MR): each strip is then read as one contiguous stream
// instead of one strided cache line per k.
template <class Isa, typename T>
void pack_a_trans(const T* a, int64_t lda, int64_t i0, int64_t mt, int64_t k0, int64_t kc, T* dst) {
  constexpr int MR = VecOf<Isa, T>::kMR;
  for (int64_t q = 0; q * MR < mt; ++q) {
    const int64_t rows = min64(MR, mt - q * MR);
    T* strip = dst + q * kc * MR;
    const T* src = a + k0 * lda + i0 + q * MR;
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t r = 0; r < rows; ++r) strip[k * MR + r] = src[k * lda + r];
    }
  }
}

template <class Isa, typename T, bool TRANS_A>
void run_tiles_impl(const Problem<T>& p, int64_t t0, int64_t t1, T* scratch) {
  using O = VecOf<Isa, T>;
  constexpr int MR = O::kMR, NR = O::kNV * O::kLanes, KC = O::kKC;
  // Scratch: the packed B block of a tile (unless B is prepacked), then the packed A block
  // (transposed A only).
  const int64_t kc_max = k_block_rows(KC, p.packed != nullptr, p.k);
  T* const b_block = scratch;
  T* const a_block = scratch + (p.packed != nullptr ? 0 : kc_max * p.nt);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t im = t % p.tiles_m, in = t / p.tiles_m;
    const int64_t i0 = im * p.mt, j0 = in * p.nt;
    const int64_t mt = min64(p.mt, p.m - i0), nt = min64(p.nt, p.n - j0);
    for (int64_t k0 = 0; k0 < p.k; k0 += kc_max) {
      const int64_t kc = min64(kc_max, p.k - k0);
      // Panels of this block: prepacked ([K][NR] per panel, this block at row k0) or packed
      // now ([kc][NR] per panel).
      const T* panels;
      int64_t panel_stride;
      if (p.packed != nullptr) {
        panels = p.packed + (j0 / NR) * p.packed_ld + k0 * NR;
        panel_stride = p.packed_ld;
      } else {
        pack_block<Isa>(p.trans_b, k0, kc, j0, nt, p.b, p.ldb, b_block);
        panels = b_block;
        panel_stride = kc * NR;
      }
      if (TRANS_A) pack_a_trans<Isa>(p.a, p.lda, i0, mt, k0, kc, a_block);
      const Init init = k0 > 0           ? Init::kLoad
                        : p.beta == T(0) ? Init::kZero
                        : p.beta == T(1) ? Init::kLoad
                                         : Init::kScale;
      // The A strip of the tile's rows i..i+MR: the packed [kc][MR] strip (transposed A, row
      // stride MR) or A's rows in place (row stride lda).
      const int64_t lda = TRANS_A ? MR : p.lda;
      const auto a_strip = [&](int64_t i) -> const T* {
        return TRANS_A ? a_block + (i / MR) * kc * MR : p.a + (i0 + i) * p.lda + k0;
      };
      // A tile of one strip of one or two rows (the recurrent step of a small batch): its full
      // panels in groups (grouped_panels), the rest one by one below.
      int64_t q = 0;
      if (const int group = grouped_panels(mt); group > 1) {
        const KernelFn<T> kernel = grouped_kernel_for<Isa, T, TRANS_A>(static_cast<int>(mt));
        for (; (q + group) * NR <= nt; q += group) {
          kernel(kc, a_strip(0), lda, panels + q * panel_stride, panel_stride,
                 p.c + i0 * p.ldc + j0 + q * NR, p.ldc, init, p.beta);
        }
      }
      for (; q * NR < nt; ++q) {
        const T* panel = panels + q * panel_stride;
        const int64_t jq = j0 + q * NR, w = min64(NR, nt - q * NR);
        for (int64_t i = 0; i < mt; i += MR) {
          const int rows = static_cast<int>(min64(MR, mt - i));
          const int64_t row = i0 + i;
          const T* a = a_strip(i);
          T* c = p.c + row * p.ldc + jq;
          const KernelFn<T> kernel = kernel_for<Isa, T, TRANS_A>(rows);
          if (w == NR) {
            kernel(kc, a, lda, panel, panel_stride, c, p.ldc, init, p.beta);
          } else {
            // Narrow last panel: compute on a full-width local tile, copy the valid columns.
            alignas(64) T tile[MR * NR];
            if (init != Init::kZero) {
              for (int r = 0; r < rows; ++r)
                for (int64_t j = 0; j < NR; ++j) tile[r * NR + j] = j < w ? c[r * p.ldc + j] : T(0);
            }
            kernel(kc, a, lda, panel, panel_stride, tile, NR, init, p.beta);
            for (int r = 0; r < rows; ++r)
              for (int64_t j = 0; j < w; ++j) c[r * p.ldc + j] = tile[r * NR + j];
          }
        }
      }
    }
  }
}

// dst[c·ldd + r] = src[r·lds + c]: tiles of 64 × 64 values, whose rows read and columns written
// stay in L1, each tile in 8 × 8 blocks transposed in registers where the path has a transpose
// (float on avx2 and avx512), one value at a time elsewhere and at the tiles' ragged edges.
template <class Isa, typename T>
void transpose(int64_t rows, int64_t cols, const T* src, int64_t lds, T* dst, int64_t ldd) {
  constexpr int64_t kTile = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = min64(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = min64(cols, c0 + kTile);
      int64_t r8 = r0, c8 = c0;  // [r0, r8) × [c0, c8) done in blocks
      if constexpr (requires { VecOf<Isa, T>::transpose8; }) {
        r8 = r0 + (r1 - r0) / 8 * 8;
        c8 = c0 + (c1 - c0) / 8 * 8;
        for (int64_t r = r0; r < r8; r += 8) {
          for (int64_t c = c0; c < c8; c += 8) {
            VecOf<Isa, T>::transpose8(src + r * lds + c, lds, dst + c * ldd + r, ldd);
          }
        }
      }
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = r < r8 ? c8 : c0; c < c1; ++c) dst[c * ldd + r] = src[r * lds + c];
      }
    }
  }
}

template <class Isa, typename T>
void run_tiles(const Problem<T>& p, int64_t t0, int64_t t1, T* scratch) {
  if (p.trans_a) {
    run_tiles_impl<Isa, T, true>(p, t0, t1, scratch);
  } else {
    run_tiles_impl<Isa, T, false>(p, t0, t1, scratch);
  }
}

template <class Isa, typename T>
constexpr PathKernels<T> path_kernels() {
  using O = VecOf<Isa, T>;
  constexpr int nr = O::kNV * O::kLanes;
  return {{O::kMR, nr, O::kKC, O::kMTMax, nr * O::kNTPanels, nr * O::kNTPanels * 8},
          &run_tiles<Isa, T>,
          &pack_panels<Isa, T>,
          &transpose<Isa, T>};
}

// The table of the path `Isa`: what kAvx512Path, kAvx2Path and kBaselinePath are (kernels.h).
template <class Isa>
constexpr Path gemm_path_table() {
  return {path_kernels<Isa, float>(), path_kernels<Isa, double>()};
}

}  // namespace blockrnn::gemm::detail
