// The bfloat16 GEMM (src/gemm/gemm_bf16.h) and the conversions of src/gemm/bf16.h:
//   - float32 → bfloat16 rounds to nearest even, keeps NaN a quiet NaN of the same sign,
//     rounds overflow to ±inf and keeps subnormals;
//   - every product, on every path this CPU has (the vdpbf16ps kernel where the CPU has
//     AVX512_BF16, the widened float32 fallback on the others and when forced), is within the
//     float32 accumulation error of the float64 product of the bfloat16-rounded operands, on
//     shapes below, at and above the register tile, panel and K block (odd M, N and K), all
//     four transposes, float32 and bfloat16 operands, beta 0 (NaN in C never read), 1 and ½;
//   - the bits do not depend on the thread count (1, 2, 3), on B being packed once and reused,
//     nor on the product being cut into column-panel ranges (the panel form);
//   - the fallback gives exactly the float32 engine's bits on the widened operands.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "blockrnn/error.h"
#include "core/isa.h"
#include "gemm/bf16.h"
#include "gemm/gemm.h"
#include "gemm/gemm_bf16.h"
#include "gemm/kernels.h"

namespace blockrnn {
namespace {

using gemm::bf16_from_float;
using gemm::bf16_to_float;
using gemm::Bf16Kernel;
using gemm::Trans;

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}
float from_bits(std::uint32_t u) {
  return std::bit_cast<float>(u);
}

TEST(Bf16Conversion, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(bf16_from_float(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3f82);
  // Just above the halfway point rounds up, just below rounds down.
  EXPECT_EQ(bf16_from_float(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_from_float(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(bf16_from_float(-1.0f - 3 * 0x1p-8f), 0xbf82);
  EXPECT_EQ(bf16_from_float(0.0f), 0x0000);
  EXPECT_EQ(bf16_from_float(-0.0f), 0x8000);
  // Round trip of every bfloat16 that is not a NaN is exact.
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float x = bf16_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(x)) continue;
    ASSERT_EQ(bf16_from_float(x), h) << std::hex << h;
  }
}

TEST(Bf16Conversion, OverflowInfinityAndSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16_from_float(inf), 0x7f80);
  EXPECT_EQ(bf16_from_float(-inf), 0xff80);
  // The largest float32 is above the largest bfloat16's halfway point: it rounds to inf.
  EXPECT_EQ(bf16_from_float(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16_from_float(from_bits(0x7f7f7fffu)), 0x7f7f);  // below halfway: the max
  // Subnormals are rounded like any other value, never flushed.
  EXPECT_EQ(bf16_from_float(from_bits(0x00010000u)), 0x0001);
  EXPECT_EQ(bf16_from_float(from_bits(0x00018000u)), 0x0002);  // tie to even
  EXPECT_EQ(bf16_from_float(from_bits(0x00008001u)), 0x0001);
  EXPECT_EQ(bf16_from_float(from_bits(0x80007fffu)), 0x8000);
}

TEST(Bf16Conversion, NanStaysAQuietNanOfTheSameSign) {
  // A signalling NaN whose payload is in the low half only: plain rounding would carry it to
  // the exponent (0x7f80 = inf, or past it).
  for (std::uint32_t u : {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0xff800001u,
                          0xffffffffu, 0x7f80ffffu}) {
    const std::uint16_t h = bf16_from_float(from_bits(u));
    EXPECT_TRUE(std::isnan(bf16_to_float(h))) << std::hex << u;
    EXPECT_EQ(h & 0x0040, 0x0040) << std::hex << u;              // quiet
    EXPECT_EQ(h & 0x8000, (u >> 16) & 0x8000) << std::hex << u;  // sign kept
  }
}

// The vector rounding that the vdpbf16ps path applies to float32 rows of A gives
// bf16_from_float's bits: specials, every tie and random patterns, at lengths with tails.
TEST(Bf16Conversion, VectorRoundingMatchesScalar) {
  if (!core::cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  std::vector<std::uint32_t> patterns = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                         0x7f800001u, 0xffbfffffu, 0x7fc00000u, 0x7f7fffffu,
                                         0x7f7f8000u, 0x00008000u, 0x00018000u, 0x3f808000u,
                                         0x3f818000u, 0xbf818000u, 0x00000001u, 0x807fffffu};
  std::mt19937_64 rng(53);
  for (int i = 0; i < 4096; ++i) patterns.push_back(static_cast<std::uint32_t>(rng()));
  for (std::size_t n : {std::size_t(1), std::size_t(15), std::size_t(17), patterns.size()}) {
    std::vector<float> src(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = from_bits(patterns[i]);
    std::vector<std::uint16_t> got(n + 1, 0xabcd);
    gemm::detail::kAvx512Bf16Kernels.round_row(src.data(), static_cast<std::int64_t>(n),
                                               got.data());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], bf16_from_float(src[i])) << std::hex << patterns[i];
    }
    EXPECT_EQ(got[n], 0xabcd) << "wrote past the row";
  }
}

// PackedBBf16 of a float32 B (vector code, kernels_bf16_avx512.cc): every pair word is the
// scalar rounding of its two elements (specials, ties, subnormals and random patterns), in the
// layout of kernels.h, zero past K and N; both transposes, odd K, ragged last panels.
TEST(Bf16Conversion, PackedPairsMatchTheScalarRounding) {
  if (!core::cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const std::uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                    0x7f800001u, 0xffbfffffu, 0x7fc00000u, 0x7f7fffffu,
                                    0x7f7f8000u, 0x00008000u, 0x00018000u, 0x3f808000u,
                                    0x3f818000u, 0xbf818000u, 0x00000001u, 0x807fffffu};
  std::mt19937_64 rng(59);
  const int nr = gemm::detail::kAvx512Bf16Kernels.nr;
  const struct {
    std::int64_t k, n;
  } dims[] = {{1, 1}, {2, 32}, {3, 33}, {31, 17}, {32, 64}, {33, 70}, {65, 31}, {130, 95}};
  for (const auto& d : dims) {
    for (bool trans : {false, true}) {
      // B [k, n] (or [n, k]) with a row stride past its row, filled with the patterns.
      const std::int64_t rows = trans ? d.n : d.k, cols = trans ? d.k : d.n, ldb = cols + 3;
      std::vector<float> b(static_cast<std::size_t>(rows * ldb));
      for (std::size_t i = 0; i < b.size(); ++i) {
        b[i] = from_bits(i % 5 == 0 ? specials[(i / 5) % 16] : static_cast<std::uint32_t>(rng()));
      }
      gemm::PackedBBf16 packed;
      packed.pack(trans ? Trans::kYes : Trans::kNo, d.k, d.n, b.data(), ldb, Isa::kAvx512,
                  Bf16Kernel::kDpbf16);
      const auto op_b = [&](std::int64_t kk, std::int64_t j) -> std::uint16_t {
        if (kk >= d.k || j >= d.n) return 0;
        return bf16_from_float(trans ? b[j * ldb + kk] : b[kk * ldb + j]);
      };
      const std::int64_t kp = (d.k + 1) / 2, panels = (d.n + nr - 1) / nr;
      for (std::int64_t q = 0; q < panels; ++q) {
        for (std::int64_t p = 0; p < kp; ++p) {
          for (std::int64_t j = 0; j < nr; ++j) {
            const std::uint16_t* pair = packed.pairs() + ((q * kp + p) * nr + j) * 2;
            ASSERT_EQ(pair[0], op_b(2 * p, q * nr + j))
                << "k=" << d.k << " n=" << d.n << " trans=" << trans << " p=" << p << " j=" << j;
            ASSERT_EQ(pair[1], op_b(2 * p + 1, q * nr + j))
                << "k=" << d.k << " n=" << d.n << " trans=" << trans << " p=" << p << " j=" << j;
          }
        }
      }
    }
  }
}

std::vector<Isa> supported_paths() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline}) {
    if (core::isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// Restores the default path and thread count at scope exit.
struct PathGuard {
  int threads = get_num_threads();
  ~PathGuard() {
    set_isa("");
    set_num_threads(threads);
  }
};

struct Dims {
  std::int64_t m, n, k;
};

// Around the vdpbf16ps tiles (8 × 32, K blocks of 256 pairs = 512 k, output tiles of up to
// 96 rows × 128 columns) and the float32 ones: odd K (a zero-padded last pair), K = 1, K one
// past a block and over three blocks, M and N one past a tile.
const Dims kDims[] = {{1, 1, 1},      {1, 33, 7},    {2, 17, 3},    {5, 9, 257}, {7, 31, 129},
                      {8, 32, 256},   {9, 33, 255},  {13, 64, 513}, {64, 16, 5}, {97, 129, 17},
                      {100, 300, 33}, {6, 130, 514}, {193, 3, 40},  {3, 257, 2}, {5, 40, 1031}};

// Operands of one product: A and B of type TA / TB, stored with row strides wider than the
// rows (the padding is never read), C with its own stride.
template <typename TA, typename TB>
struct Operands {
  Dims d;
  bool ta, tb;
  std::int64_t lda, ldb, ldc;
  std::vector<TA> a;
  std::vector<TB> b;
  std::vector<float> c;
  // The operands as the product sees them: rounded to bfloat16.
  double A(std::int64_t i, std::int64_t kk) const {
    return value(ta ? a[kk * lda + i] : a[i * lda + kk]);
  }
  double B(std::int64_t kk, std::int64_t j) const {
    return value(tb ? b[j * ldb + kk] : b[kk * ldb + j]);
  }
  template <typename T>
  static double value(T x) {
    if constexpr (std::is_same_v<T, float>) {
      return gemm::bf16_round(x);
    } else {
      return bf16_to_float(x);
    }
  }
};

template <typename T>
T random_value(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  if constexpr (std::is_same_v<T, float>) {
    return d(rng);
  } else {
    return bf16_from_float(d(rng));
  }
}

template <typename TA, typename TB>
Operands<TA, TB> make(Dims d, bool ta, bool tb, std::mt19937_64& rng) {
  Operands<TA, TB> o{d, ta, tb, (ta ? d.m : d.k) + 2, (tb ? d.k : d.n) + 1, d.n + 3, {}, {}, {}};
  o.a.resize((ta ? d.k : d.m) * o.lda);
  o.b.resize((tb ? d.n : d.k) * o.ldb);
  o.c.resize(d.m * o.ldc);
  for (TA& v : o.a) v = random_value<TA>(rng);
  for (TB& v : o.b) v = random_value<TB>(rng);
  for (float& v : o.c) v = random_value<float>(rng);
  return o;
}

template <typename TA, typename TB>
std::vector<float> run(const Operands<TA, TB>& o, float beta, bool packed,
                       const std::vector<float>& c0) {
  std::vector<float> c = c0;
  const Trans ta = o.ta ? Trans::kYes : Trans::kNo, tb = o.tb ? Trans::kYes : Trans::kNo;
  if (packed) {
    gemm::PackedBBf16 pb;
    pb.pack(tb, o.d.k, o.d.n, o.b.data(), o.ldb);
    gemm::gemm_bf16(ta, o.d.m, o.a.data(), o.lda, pb, beta, c.data(), o.ldc);
  } else {
    gemm::gemm_bf16(ta, tb, o.d.m, o.d.n, o.d.k, o.a.data(), o.lda, o.b.data(), o.ldb, beta,
                    c.data(), o.ldc);
  }
  return c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Checks c against the float64 product of the rounded operands, and that nothing outside the
// M × N output (the padding of each row) was written.
//
// Tolerance. Every product of two bfloat16 values is exact in float32 (8-bit × 8-bit
// significands), so the only errors are the K float32 additions (and beta·C's rounding when
// beta is not 0 or 1), each within u = 2^-24 of its result. Higham's worst case for a
// sequential sum is (K − 1)·u·Σ|a||b|; for these operands (independent, uniform in [−1, 1),
// random signs) the per-step errors are independent with mean zero and the partial sums grow
// like √k, so the total stays a small multiple of u·Σ|a||b| — c·log2(K)·u with c = 2, plus
// 2u for the seed and the last rounding, has a wide margin. Errors of bfloat16 size still
// fail: an operand left unrounded (or truncated) moves a result by about 2^-9/√K of Σ|a||b|,
// 45× or more above this tolerance for every K here (≤ 1031); a lost pair or a wrong K block
// moves it by whole products.
template <typename TA, typename TB>
void check_against_float64(const Operands<TA, TB>& o, float beta, const std::vector<float>& c0,
                           const std::vector<float>& c, const std::string& what) {
  const double u = 0x1p-24;
  const double c_k = 2.0 * std::log2(double(std::max<std::int64_t>(o.d.k, 1))) + 2.0;
  int bad = 0;
  for (std::int64_t i = 0; i < o.d.m; ++i) {
    for (std::int64_t j = 0; j < o.d.n; ++j) {
      const double seed = beta == 0.0f ? 0.0 : double(beta) * c0[i * o.ldc + j];
      double want = seed, scale = std::abs(seed);
      for (std::int64_t kk = 0; kk < o.d.k; ++kk) {
        want += o.A(i, kk) * o.B(kk, j);
        scale += std::abs(o.A(i, kk) * o.B(kk, j));
      }
      const double got = c[i * o.ldc + j];
      if (!(std::abs(got - want) <= c_k * u * scale) && bad++ < 3) {
        ADD_FAILURE() << what << " at (" << i << ", " << j << "): got " << got << ", want " << want
                      << " ± " << c_k * u * scale;
      }
    }
    for (std::int64_t j = o.d.n; j < o.ldc; ++j) {
      EXPECT_EQ(bits(c[i * o.ldc + j]), bits(c0[i * o.ldc + j])) << what << " padding written";
    }
  }
}

std::string describe(Isa isa, const Dims& d, bool ta, bool tb, float beta) {
  return std::string(isa_name(isa)) + " m=" + std::to_string(d.m) + " n=" + std::to_string(d.n) +
         " k=" + std::to_string(d.k) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
         " beta=" + std::to_string(beta);
}

// On every path (avx2 and baseline force the widened fallback; avx512 runs vdpbf16ps where the
// CPU has AVX512_BF16): every shape, transpose and beta against float64; 1, 2 and 3 threads
// and packed-once B give the same bits.
template <typename TA, typename TB>
void check_products() {
  PathGuard guard;
  std::mt19937_64 rng(59);
  for (Isa isa : supported_paths()) {
    set_isa(isa_name(isa));
    for (const Dims& d : kDims) {
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        const Operands<TA, TB> o = make<TA, TB>(d, ta, tb, rng);
        for (float beta : {0.0f, 1.0f, 0.5f}) {
          const std::string what = describe(isa, d, ta, tb, beta);
          std::vector<float> c0 = o.c;
          // beta = 0 must not read C: NaN there must not reach the output.
          if (beta == 0.0f) {
            for (std::int64_t i = 0; i < d.m; ++i)
              for (std::int64_t j = 0; j < d.n; ++j)
                c0[i * o.ldc + j] = std::numeric_limits<float>::quiet_NaN();
          }
          set_num_threads(1);
          const std::vector<float> one = run(o, beta, false, c0);
          check_against_float64(o, beta, c0, one, what);
          for (int threads : {2, 3}) {
            set_num_threads(threads);
            EXPECT_TRUE(same_bits(run(o, beta, false, c0), one)) << what << " threads=" << threads;
            EXPECT_TRUE(same_bits(run(o, beta, true, c0), one))
                << what << " packed, threads=" << threads;
          }
        }
      }
    }
  }
}

TEST(GemmBf16, Float32OperandsAgainstFloat64OnEveryPath) {
  check_products<float, float>();
}
TEST(GemmBf16, Bfloat16OperandsAgainstFloat64OnEveryPath) {
  check_products<std::uint16_t, std::uint16_t>();
}
TEST(GemmBf16, MixedOperandsAgainstFloat64OnEveryPath) {
  check_products<float, std::uint16_t>();
  check_products<std::uint16_t, float>();
}

TEST(GemmBf16, KernelChoice) {
  EXPECT_EQ(gemm::bf16_kernel_for(Isa::kAvx2), Bf16Kernel::kWidened);
  EXPECT_EQ(gemm::bf16_kernel_for(Isa::kBaseline), Bf16Kernel::kWidened);
  EXPECT_EQ(gemm::bf16_kernel_for(Isa::kAvx512) == Bf16Kernel::kDpbf16,
            core::cpu_has_avx512_bf16());
  PathGuard guard;
  for (Isa isa : supported_paths()) {
    set_isa(isa_name(isa));
    gemm::PackedBBf16 pb;
    const float b[4] = {1, 2, 3, 4};
    pb.pack(Trans::kNo, 2, 2, b, 2);
    EXPECT_EQ(pb.kernel(), gemm::bf16_kernel_for(isa)) << isa_name(isa);
    EXPECT_EQ(pb.isa(), isa);
  }
  // The vdpbf16ps kernel on a path that cannot run it is refused, not run.
  gemm::PackedBBf16 pb;
  const float b[1] = {1};
  EXPECT_THROW(pb.pack(Trans::kNo, 1, 1, b, 1, Isa::kBaseline, Bf16Kernel::kDpbf16), Error);
}

// The fallback is exactly the float32 engine of its path on the widened operands, also when
// chosen explicitly on the avx512 path (an AVX-512 CPU without AVX512_BF16).
TEST(GemmBf16, WidenedFallbackIsTheFloat32EngineOnRoundedOperands) {
  PathGuard guard;
  std::mt19937_64 rng(61);
  for (Isa isa : supported_paths()) {
    for (const Dims& d : kDims) {
      const Operands<float, float> o = make<float, float>(d, true, false, rng);
      std::vector<float> a = o.a, b = o.b;
      for (float& v : a) v = gemm::bf16_round(v);
      for (float& v : b) v = gemm::bf16_round(v);
      set_isa(isa_name(isa));
      std::vector<float> want = o.c;
      gemm::gemm<float>(Trans::kYes, Trans::kNo, d.m, d.n, d.k, a.data(), o.lda, b.data(), o.ldb,
                        1.0f, want.data(), o.ldc);
      gemm::PackedBBf16 pb;
      pb.pack(Trans::kNo, d.k, d.n, o.b.data(), o.ldb, isa, Bf16Kernel::kWidened);
      std::vector<float> got = o.c;
      gemm::gemm_bf16(Trans::kYes, d.m, o.a.data(), o.lda, pb, 1.0f, got.data(), o.ldc);
      EXPECT_TRUE(same_bits(got, want)) << describe(isa, d, true, false, 1.0f);
      check_against_float64(o, 1.0f, o.c, got, describe(isa, d, true, false, 1.0f));
    }
  }
}

// One packed B reused by many products with different A (the recurrent weights of a sequence):
// each gives the one-shot bits, at 1 and 2 threads.
TEST(GemmBf16, PackedWeightsReusedAcrossCalls) {
  PathGuard guard;
  std::mt19937_64 rng(67);
  const Dims d{64, 2048 / 8, 512 / 4};
  const Operands<float, float> w = make<float, float>(d, false, false, rng);
  gemm::PackedBBf16 pb;
  pb.pack(Trans::kNo, d.k, d.n, w.b.data(), w.ldb);
  for (int step = 0; step < 4; ++step) {
    const Operands<float, float> o = make<float, float>(d, false, false, rng);
    std::vector<float> want = o.c;
    set_num_threads(1);
    gemm::gemm_bf16(Trans::kNo, Trans::kNo, d.m, d.n, d.k, o.a.data(), o.lda, w.b.data(), w.ldb,
                    1.0f, want.data(), o.ldc);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      std::vector<float> got = o.c;
      gemm::gemm_bf16(Trans::kNo, d.m, o.a.data(), o.lda, pb, 1.0f, got.data(), o.ldc);
      EXPECT_TRUE(same_bits(got, want)) << "step " << step << " threads " << threads;
    }
  }
}

// The panel form of the sequence ops' own parallel region: A's rows rounded in parts, then
// the columns computed in 1, 2 and 3 panel ranges give the threaded product's bits.
template <typename TA>
void check_panels() {
  if (!core::cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  PathGuard guard;
  set_isa("avx512");
  std::mt19937_64 rng(73);
  for (const Dims& d : kDims) {
    const Operands<TA, float> o = make<TA, float>(d, false, false, rng);
    gemm::PackedBBf16 pb;
    pb.pack(Trans::kNo, d.k, d.n, o.b.data(), o.ldb);
    ASSERT_EQ(pb.kernel(), Bf16Kernel::kDpbf16);
    const std::int64_t ld = gemm::bf16_pairs_ld(d.k);
    std::vector<std::uint16_t> pairs(d.m * ld, 0xffff);
    gemm::round_rows_bf16(0, d.m / 2, d.k, o.a.data(), o.lda, pairs.data());
    gemm::round_rows_bf16(d.m / 2, d.m, d.k, o.a.data(), o.lda, pairs.data());
    for (float beta : {0.0f, 1.0f, 0.5f}) {
      std::vector<float> want = o.c;
      gemm::gemm_bf16(Trans::kNo, d.m, o.a.data(), o.lda, pb, beta, want.data(), o.ldc);
      const std::int64_t panels = pb.panels();
      EXPECT_EQ(panels, (d.n + 31) / 32);
      for (std::int64_t parts = 1; parts <= 3; ++parts) {
        std::vector<float> c = o.c;
        for (std::int64_t q = 0; q < parts; ++q) {
          gemm::gemm_bf16_panels(d.m, pairs.data(), ld, pb, panels * q / parts,
                                 panels * (q + 1) / parts, beta, c.data(), o.ldc);
        }
        EXPECT_TRUE(same_bits(c, want))
            << describe(Isa::kAvx512, d, false, false, beta) << " parts=" << parts;
      }
    }
  }
}

TEST(GemmBf16, PanelRangesGiveTheThreadedBitsFloat32A) {
  check_panels<float>();
}
TEST(GemmBf16, PanelRangesGiveTheThreadedBitsBfloat16A) {
  check_panels<std::uint16_t>();
}

TEST(GemmBf16, PanelFormRefusesAWidenedPack) {
  PathGuard guard;
  const float b[4] = {1, 2, 3, 4}, a[2] = {1, 1};
  float c[2] = {0, 0};
  gemm::PackedBBf16 pb;
  pb.pack(Trans::kNo, 2, 2, b, 2, Isa::kBaseline, Bf16Kernel::kWidened);
  std::uint16_t pairs[2];
  gemm::round_rows_bf16(0, 1, 2, a, 2, pairs);
  EXPECT_THROW(gemm::gemm_bf16_panels(1, pairs, 2, pb, 0, 1, 0.0f, c, 2), Error);
}

TEST(GemmBf16, DegenerateSizes) {
  PathGuard guard;
  for (Isa isa : supported_paths()) {
    set_isa(isa_name(isa));
    const float a[1] = {1}, b[1] = {1};
    // K = 0: C = beta·C (beta = 0 writes zeros over NaN).
    std::vector<float> c = {2.0f, std::numeric_limits<float>::quiet_NaN()};
    gemm::gemm_bf16(Trans::kNo, Trans::kNo, 1, 2, 0, a, 1, b, 2, 0.5f, c.data(), 2);
    EXPECT_EQ(c[0], 1.0f);
    EXPECT_TRUE(std::isnan(c[1]));
    gemm::gemm_bf16(Trans::kNo, Trans::kNo, 1, 2, 0, a, 1, b, 2, 0.0f, c.data(), 2);
    EXPECT_EQ(c[0], 0.0f);
    EXPECT_EQ(c[1], 0.0f);
    // M = 0 or N = 0: nothing written.
    c = {7.0f, 7.0f};
    gemm::gemm_bf16(Trans::kNo, Trans::kNo, 0, 2, 1, a, 1, b, 2, 0.0f, c.data(), 2);
    gemm::gemm_bf16(Trans::kNo, Trans::kNo, 1, 0, 1, a, 1, b, 2, 0.0f, c.data(), 2);
    EXPECT_EQ(c[0], 7.0f);
    EXPECT_EQ(c[1], 7.0f);
    // A negative size is refused.
    EXPECT_THROW(gemm::gemm_bf16(Trans::kNo, Trans::kNo, -1, 2, 1, a, 1, b, 2, 0.0f, c.data(), 2),
                 Error);
  }
}

// A NaN or infinity in an operand reaches exactly the outputs it feeds, on every path.
TEST(GemmBf16, NanAndInfinityPropagate) {
  PathGuard guard;
  std::mt19937_64 rng(71);
  for (Isa isa : supported_paths()) {
    set_isa(isa_name(isa));
    const Dims d{9, 40, 7};
    Operands<float, float> o = make<float, float>(d, false, false, rng);
    o.a[2 * o.lda + 3] = std::numeric_limits<float>::quiet_NaN();  // row 2 of A
    o.b[5 * o.ldb + 33] = std::numeric_limits<float>::infinity();  // column 33 of B
    const std::vector<float> c = run(o, 0.0f, false, o.c);
    for (std::int64_t i = 0; i < d.m; ++i) {
      for (std::int64_t j = 0; j < d.n; ++j) {
        const float x = c[i * o.ldc + j];
        if (i == 2) {
          EXPECT_TRUE(std::isnan(x)) << isa_name(isa) << " " << i << "," << j;
        } else if (j == 33) {
          EXPECT_TRUE(std::isinf(x)) << isa_name(isa) << " " << i << "," << j;
        } else {
          EXPECT_TRUE(std::isfinite(x)) << isa_name(isa) << " " << i << "," << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace blockrnn
