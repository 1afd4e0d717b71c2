// The bfloat16 micro-kernels: C (float32) = init + A·B with A and B packed as bfloat16 pairs
// (kernels.h, Bf16Problem), on AVX512_BF16's vdpbf16ps. This file alone is compiled with
// -mavx512bf16 (CMakeLists.txt) and runs only when the CPU has it (gemm_bf16.cc asks
// core::cpu_has_avx512_bf16()). As in kernels_table.h, everything has internal linkage (here: an
// anonymous namespace) and calls no out-of-line template of another file (no weak code symbol:
// tests/cpp/check_isa_objects.sh).
//
// One vdpbf16ps step on lane j: acc[j] += a[2p+1]·b[2p+1, j]; acc[j] += a[2p]·b[2p, j] — two
// products (exact in float32: 8-bit × 8-bit mantissas), each added with one float32 rounding
// (round to nearest even; the instruction treats subnormal inputs and results as zero). Per
// output, the chain runs over the pairs p = 0, 1, … in order, seeded with beta·C; the K
// blocking stores and reloads the running value in C (exact). The bits therefore depend on
// neither the blocking, nor the tiling, nor the thread count.
//
// Per output tile (rows i0.., columns j0..), per K block of KC pairs: for each NR-wide panel
// (32 KB of B at KC = 256 pairs, streamed from L1/L2 once per strip), for each MR-row strip of A
// (bfloat16 rows read in place, one 32-bit pair broadcast per row and pair), the micro-kernel. A
// strip of fewer than MR rows runs a kernel instantiated for that many rows; a panel narrower than
// NR computes into a local tile and copies the valid columns.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "gemm/kernels.h"

namespace blockrnn::gemm::avx512_bf16 {
namespace {

using std::int64_t;

constexpr int kLanes = 16;         // float32 accumulators per zmm
constexpr int kNV = 2;             // zmm per row of the accumulator tile
constexpr int kNR = kNV * kLanes;  // columns of a panel
static_assert(64 % kNR == 0, "PackedBBf16::packed_floats bounds the panels by 64 columns");
constexpr int kMR = 8;         // rows of the accumulator tile: 16 zmm accumulators
constexpr int kKCPairs = 256;  // K block, in pairs of k (128: 89 % of peak, 256: 96 %)
constexpr int kMTMax = 96;     // rows of an output tile
constexpr int kNTPanels = 4;   // panels of an output tile

inline int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

enum class Init { kZero, kLoad, kScale };

// acc[ROWS][NV] over one K block of kpc pairs: C[r, :NR] = init + Σ_p A(r, p)·panel[p, :].
// a: ROWS rows of pairs at this block (row stride lda); panel: [kpc][NR][2]; c: ROWS rows,
// stride ldc.
template <int ROWS>
void micro_kernel(int64_t kpc, const std::uint16_t* a, int64_t lda, const std::uint16_t* panel,
                  float* c, int64_t ldc, Init init, float beta) {
  __m512 acc[ROWS][kNV];
  if (init == Init::kZero) {
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_setzero_ps();
  } else if (init == Init::kLoad) {
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_loadu_ps(c + r * ldc + v * kLanes);
  } else {
    const __m512 bv = _mm512_set1_ps(beta);
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < kNV; ++v)
        acc[r][v] = _mm512_mul_ps(bv, _mm512_loadu_ps(c + r * ldc + v * kLanes));
  }
  for (int64_t p = 0; p < kpc; ++p) {
    const std::uint16_t* bp = panel + p * kNR * 2;
    __m512bh bv[kNV];
    for (int v = 0; v < kNV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bp + v * kLanes * 2);
    for (int r = 0; r < ROWS; ++r) {
      std::int32_t pair;  // A(r, 2p) in the low half, A(r, 2p+1) in the high half
      std::memcpy(&pair, a + r * lda + p * 2, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int v = 0; v < kNV; ++v) _mm512_storeu_ps(c + r * ldc + v * kLanes, acc[r][v]);
}

using KernelFn = void (*)(int64_t, const std::uint16_t*, int64_t, const std::uint16_t*, float*,
                          int64_t, Init, float);

template <int... R>
constexpr auto make_table(std::integer_sequence<int, R...>) {
  struct Table {
    KernelFn fn[sizeof...(R)];
  };
  return Table{{&micro_kernel<R + 1>...}};
}

// The micro-kernel for 1..MR rows.
KernelFn kernel_for(int rows) {
  static constexpr auto table = make_table(std::make_integer_sequence<int, kMR>{});
  return table.fn[rows - 1];
}

void run_tiles(const detail::Bf16Problem& p, int64_t t0, int64_t t1) {
  const int64_t panel_ld = p.kp * kNR * 2;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t im = t % p.tiles_m, in = t / p.tiles_m;
    const int64_t i0 = im * p.mt, j0 = in * p.nt;
    const int64_t mt = min64(p.mt, p.m - i0), nt = min64(p.nt, p.n - j0);
    for (int64_t k0 = 0; k0 < p.kp; k0 += kKCPairs) {
      const int64_t kpc = min64(kKCPairs, p.kp - k0);
      const Init init = k0 > 0           ? Init::kLoad
                        : p.beta == 0.0f ? Init::kZero
                        : p.beta == 1.0f ? Init::kLoad
                                         : Init::kScale;
      for (int64_t q = 0; q * kNR < nt; ++q) {
        const int64_t jq = j0 + q * kNR, w = min64(kNR, nt - q * kNR);
        const std::uint16_t* panel = p.b + (jq / kNR) * panel_ld + k0 * kNR * 2;
        for (int64_t i = 0; i < mt; i += kMR) {
          const int rows = static_cast<int>(min64(kMR, mt - i));
          const int64_t row = i0 + i;
          const std::uint16_t* a = p.a + row * p.lda + k0 * 2;
          float* c = p.c + row * p.ldc + jq;
          const KernelFn kernel = kernel_for(rows);
          if (w == kNR) {
            kernel(kpc, a, p.lda, panel, c, p.ldc, init, p.beta);
          } else {
            // Narrow last panel: compute on a full-width local tile, copy the valid columns.
            alignas(64) float tile[kMR * kNR];
            if (init != Init::kZero) {
              for (int r = 0; r < rows; ++r)
                for (int64_t j = 0; j < kNR; ++j)
                  tile[r * kNR + j] = j < w ? c[r * p.ldc + j] : 0.0f;
            }
            kernel(kpc, a, p.lda, panel, tile, kNR, init, p.beta);
            for (int r = 0; r < rows; ++r)
              for (int64_t j = 0; j < w; ++j) c[r * p.ldc + j] = tile[r * kNR + j];
          }
        }
      }
    }
  }
}

// bf16_from_float (bf16.h) on 16 lanes at a time: u + 0x7fff + (bit 16 of u), upper half
// (round to nearest even); a NaN keeps its upper half with the quiet bit set. (The all-lanes
// masked forms of the shift and the narrowing keep GCC 12 from warning about the unmasked
// forms' undefined pass-through operand.)
__m256i round16(__m512i u) {
  const __mmask16 all = 0xffff;
  const __m512i high = _mm512_maskz_srli_epi32(all, u, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_maskz_srli_epi32(
      all, _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  const __m512i quiet = _mm512_or_si512(high, _mm512_set1_epi32(0x0040));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_maskz_cvtepi32_epi16(all, _mm512_mask_mov_epi32(rounded, nan, quiet));
}

// The first n of 16 lanes.
__mmask16 first_lanes(int64_t n) {
  return n >= kLanes ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

void round_row(const float* src, int64_t n, std::uint16_t* dst) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512i u = _mm512_loadu_si512(src + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), round16(u));
  }
  if (i < n) {
    const __mmask16 tail = first_lanes(n - i);
    const __m512i u = _mm512_maskz_loadu_epi32(tail, src + i);
    _mm256_mask_storeu_epi16(dst + i, tail, round16(u));
  }
}

// Two rows of 16 float32 bit patterns (masked-off lanes zero) as 16 pairs: lane j holds the
// bfloat16 of even[j] in its low half and of odd[j] in its high half (the pair layout of
// kernels.h; a zero lane rounds to the pair 0).
__m512i pairs16(__m512i even, __m512i odd) {
  const __mmask16 all = 0xffff;  // masked forms: see round16
  const __m512i lo = _mm512_maskz_cvtepu16_epi32(all, round16(even));
  const __m512i hi = _mm512_maskz_cvtepu16_epi32(all, round16(odd));
  return _mm512_or_si512(lo, _mm512_maskz_slli_epi32(all, hi, 16));
}

// Panels [p0, p1) of op(B) [k, n] (B stored [k, n], or [n, k] when trans; row stride ldb) as
// bfloat16 pairs, each value rounded as round16 does (bf16_from_float): pair p of column j of
// panel q is the 32-bit word dst32[q·kp·NR + p·NR + j] (kernels.h), zero past k and n.
void pack_pairs(bool trans, int64_t k, int64_t n, const float* b, int64_t ldb, int64_t p0,
                int64_t p1, std::uint16_t* dst) {
  const int64_t kp = (k + 1) / 2;
  std::uint32_t* const words = reinterpret_cast<std::uint32_t*>(dst);
  for (int64_t q = p0; q < p1; ++q) {
    std::uint32_t* const panel = words + q * kp * kNR;
    const int64_t j0 = q * kNR, w = min64(kNR, n - j0);
    if (!trans) {
      // Rows 2p and 2p+1 of B, 16 columns at a time.
      for (int64_t p = 0; p < kp; ++p) {
        const float* even = b + 2 * p * ldb + j0;
        const bool has_odd = 2 * p + 1 < k;
        for (int v = 0; v < kNV; ++v) {
          const __mmask16 cols = first_lanes(w - v * kLanes);
          const __m512i e = _mm512_maskz_loadu_epi32(cols, even + v * kLanes);
          const __m512i o = has_odd ? _mm512_maskz_loadu_epi32(cols, even + ldb + v * kLanes)
                                    : _mm512_setzero_si512();
          _mm512_storeu_si512(panel + p * kNR + v * kLanes, pairs16(e, o));
        }
      }
      continue;
    }
    // Column j of op(B) is row j0 + j of B: its pairs are consecutive floats there, rounded 16
    // pairs (32 floats) at a time and stored down the panel (one word per NR).
    for (int64_t j = 0; j < kNR; ++j) {
      const float* row = j < w ? b + (j0 + j) * ldb : nullptr;
      for (int64_t p = 0; p < kp; p += kLanes) {
        const int64_t pairs = min64(kLanes, kp - p);
        alignas(64) std::uint32_t out[kLanes];
        if (row == nullptr) {
          _mm512_store_si512(out, _mm512_setzero_si512());
        } else {
          // Floats 2p … 2p+31 of the row, in two halves: the first 16 are pairs p … p+7.
          const __m512i first = _mm512_maskz_loadu_epi32(first_lanes(k - 2 * p), row + 2 * p);
          const __m512i second =
              _mm512_maskz_loadu_epi32(first_lanes(k - 2 * p - kLanes), row + 2 * p + kLanes);
          // 16 bfloat16 each: pairs p … p+7, then p+8 … p+15.
          _mm256_store_si256(reinterpret_cast<__m256i*>(out), round16(first));
          _mm256_store_si256(reinterpret_cast<__m256i*>(out + kLanes / 2), round16(second));
        }
        for (int64_t i = 0; i < pairs; ++i) panel[(p + i) * kNR + j] = out[i];
      }
    }
  }
}

}  // namespace
}  // namespace blockrnn::gemm::avx512_bf16

namespace blockrnn::gemm::detail {
extern const Bf16Kernels kAvx512Bf16Kernels;
// The constants by name (designated initialisers: a reader sees which is which).
const Bf16Kernels kAvx512Bf16Kernels = {
    .mr = avx512_bf16::kMR,
    .nr = avx512_bf16::kNR,
    .kc_pairs = avx512_bf16::kKCPairs,
    .mt_max = avx512_bf16::kMTMax,
    .nt = avx512_bf16::kNR * avx512_bf16::kNTPanels,
    .run_tiles = &avx512_bf16::run_tiles,
    .round_row = &avx512_bf16::round_row,
    .pack_pairs = &avx512_bf16::pack_pairs,
};
}  // namespace blockrnn::gemm::detail
