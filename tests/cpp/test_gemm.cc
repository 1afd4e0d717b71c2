// The GEMM engine (src/gemm/gemm.h) against its contract, on every ISA path this CPU has:
//   - each output is exactly the in-order multiply-add chain over k seeded with beta·C (a
//     fused multiply-add on the avx512 and avx2 paths, a rounded product then a sum on the
//     baseline path): checked bit for bit against a scalar evaluation, on shapes at, below and
//     above every register tile, panel and K block (1 row, odd M/N/K, K above the K block);
//   - the bits never depend on the thread count (1, 2, 3, 4, 7) or on B being prepacked, nor
//     on a product being cut into K ranges of a packed B or into column-panel ranges;
//   - nothing outside the output is written; beta = 0 never reads C (NaN there stays out);
//   - the host's OpenMP setting is the same before and after a call.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "blockrnn/error.h"
#include "core/isa.h"
#include "gemm/gemm.h"

namespace blockrnn {
namespace {

using gemm::Trans;

std::vector<Isa> supported_paths() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline}) {
    if (core::isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// Calls f(isa, fused) on each path this CPU has, selected; `fused`: its chains use FMAs.
template <typename F>
void on_every_path(F&& f) {
  for (Isa isa : supported_paths()) {
    set_isa(isa_name(isa));
    f(isa, isa != Isa::kBaseline);
  }
}

// Restores the default path and thread count at scope exit.
struct PathGuard {
  int threads = get_num_threads();
  ~PathGuard() {
    set_isa("");
    set_num_threads(threads);
  }
};

struct Shape {
  std::int64_t m, n, k;
};

// Shapes around the tiles of every path: MR ∈ {4, 6, 8}, NR ∈ {4, 8, 16, 32}, KC ∈ {128, 256,
// 1024} (256 where B is packed per tile), output tiles of up to 96 or 144 rows and 4–8 panels;
// strips of one and two rows over groups of 4 and 2 panels, with panels left over and a
// narrow last one.
const Shape kShapes[] = {{1, 1, 1},       {1, 33, 7},    {2, 17, 3},    {5, 9, 257}, {7, 31, 129},
                         {8, 32, 256},    {9, 33, 255},  {13, 64, 600}, {64, 16, 5}, {97, 129, 17},
                         {100, 300, 33},  {6, 130, 513}, {193, 3, 40},  {3, 257, 2}, {7, 33, 1100},
                         {150, 40, 1030}, {1, 200, 37},  {2, 100, 300}};

// f(isa, fused, shape) for every shape of kShapes on every path.
template <typename F>
void on_every_path_and_shape(F&& f) {
  on_every_path([&](Isa isa, bool fused) {
    for (const Shape& s : kShapes) f(isa, fused, s);
  });
}

template <typename T>
struct Operands {
  std::int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb;
  std::vector<T> a, b, c;  // A: [m, k] or [k, m]; B: [k, n] or [n, k]; C: [m, ldc]
  T A(std::int64_t i, std::int64_t kk) const { return ta ? a[kk * lda + i] : a[i * lda + kk]; }
  T B(std::int64_t kk, std::int64_t j) const { return tb ? b[j * ldb + kk] : b[kk * ldb + j]; }
};

template <typename T>
Operands<T> make(Shape s, bool ta, bool tb, std::mt19937_64& rng) {
  Operands<T> o{s.m, s.n, s.k, 0, 0, s.n + 3, ta, tb, {}, {}, {}};
  o.lda = (ta ? s.m : s.k) + 2;  // row strides wider than the rows: padding is never read
  o.ldb = (tb ? s.k : s.n) + 1;
  std::uniform_real_distribution<double> d(-1, 1);
  o.a.resize((ta ? s.k : s.m) * o.lda);
  o.b.resize((tb ? s.n : s.k) * o.ldb);
  o.c.resize(s.m * o.ldc);
  for (T& v : o.a) v = static_cast<T>(d(rng));
  for (T& v : o.b) v = static_cast<T>(d(rng));
  for (T& v : o.c) v = static_cast<T>(d(rng));
  return o;
}

// The contract, evaluated one element at a time.
template <typename T>
std::vector<T> expected(const Operands<T>& o, T beta, bool fused) {
  std::vector<T> c = o.c;
  for (std::int64_t i = 0; i < o.m; ++i) {
    for (std::int64_t j = 0; j < o.n; ++j) {
      const T c0 = o.c[i * o.ldc + j];
      T acc = beta == T(0) ? T(0) : beta == T(1) ? c0 : beta * c0;
      for (std::int64_t kk = 0; kk < o.k; ++kk) {
        if (fused) {
          acc = std::fma(o.A(i, kk), o.B(kk, j), acc);
        } else {
          const T p = o.A(i, kk) * o.B(kk, j);
          acc = p + acc;
        }
      }
      c[i * o.ldc + j] = acc;
    }
  }
  return c;
}

template <typename T>
std::vector<T> run(const Operands<T>& o, T beta, bool packed) {
  std::vector<T> c = o.c;
  const Trans ta = o.ta ? Trans::kYes : Trans::kNo, tb = o.tb ? Trans::kYes : Trans::kNo;
  if (packed) {
    gemm::PackedB<T> pb;
    pb.pack(tb, o.k, o.n, o.b.data(), o.ldb);
    gemm::gemm<T>(ta, o.m, o.a.data(), o.lda, pb, beta, c.data(), o.ldc);
  } else {
    gemm::gemm<T>(ta, tb, o.m, o.n, o.k, o.a.data(), o.lda, o.b.data(), o.ldb, beta, c.data(),
                  o.ldc);
  }
  return c;
}

template <typename T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

template <typename T>
void check_exact_chains() {
  PathGuard guard;
  std::mt19937_64 rng(31);
  on_every_path_and_shape([&](Isa isa, bool fused, const Shape& s) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const Operands<T> o = make<T>(s, ta, tb, rng);
      for (T beta : {T(0), T(1), T(0.5)}) {
        const std::vector<T> want = expected(o, beta, fused);
        for (bool packed : {false, true}) {
          set_num_threads(packed ? 3 : 1);
          EXPECT_TRUE(same_bits(run(o, beta, packed), want))
              << isa_name(isa) << " m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta
              << " tb=" << tb << " beta=" << beta << " packed=" << packed;
        }
      }
    }
  });
}

TEST(Gemm, EveryOutputIsTheInOrderChainFloat32) {
  check_exact_chains<float>();
}
TEST(Gemm, EveryOutputIsTheInOrderChainFloat64) {
  check_exact_chains<double>();
}

// Bits identical at 1, 2, 3, 4 and 7 threads on shapes with many tiles: B·T rows in the
// thousands, one row (the latency case), a long reduction (weight gradients) and a prepacked
// recurrent product.
// The entry points the sequence ops use: K ranges of one packed B chained with beta = 1 (the
// weight gradients whose A lives in two buffers), and column-panel ranges computed by the
// caller's own threads (the time loop). Both must give the contract's bits exactly.
template <typename T>
void check_ranges() {
  PathGuard guard;
  std::mt19937_64 rng(47);
  on_every_path_and_shape([&](Isa isa, bool fused, const Shape& s) {
    for (bool ta : {false, true}) {
      const Operands<T> o = make<T>(s, ta, false, rng);
      gemm::PackedB<T> pb;
      pb.pack(Trans::kNo, o.k, o.n, o.b.data(), o.ldb);
      const Trans trans_a = ta ? Trans::kYes : Trans::kNo;
      for (T beta : {T(0), T(1), T(0.5)}) {
        const std::vector<T> want = expected(o, beta, fused);
        // K split at 0, 1, k/3 and k: [0, k1) with beta, then [k1, k) with beta = 1.
        for (std::int64_t k1 : {std::int64_t(0), std::int64_t(1), o.k / 3, o.k}) {
          if (k1 > o.k) continue;
          std::vector<T> c = o.c;
          const T* a2 = o.a.data() + (ta ? k1 * o.lda : k1);  // op(A)[:, k1:]
          gemm::gemm<T>(trans_a, o.m, o.a.data(), o.lda, pb, 0, k1, beta, c.data(), o.ldc);
          gemm::gemm<T>(trans_a, o.m, a2, o.lda, pb, k1, o.k, T(1), c.data(), o.ldc);
          EXPECT_TRUE(same_bits(c, want)) << isa_name(isa) << " m=" << s.m << " n=" << s.n
                                          << " k=" << s.k << " ta=" << ta << " k1=" << k1;
        }
        if (ta) continue;
        // Panels split into 1, 2 and 3 ranges, as 1, 2 and 3 threads of a time loop would.
        const std::int64_t panels = pb.panels();
        EXPECT_EQ(panels, (o.n + pb.panel_width() - 1) / pb.panel_width());
        for (std::int64_t parts = 1; parts <= 3; ++parts) {
          std::vector<T> c = o.c;
          for (std::int64_t q = 0; q < parts; ++q) {
            gemm::gemm_panels<T>(o.m, o.a.data(), o.lda, pb, panels * q / parts,
                                 panels * (q + 1) / parts, beta, c.data(), o.ldc);
          }
          EXPECT_TRUE(same_bits(c, want)) << isa_name(isa) << " m=" << s.m << " n=" << s.n
                                          << " k=" << s.k << " parts=" << parts;
        }
      }
    }
  });
}

TEST(Gemm, KRangesAndPanelRangesGiveTheWholeProductsBitsFloat32) {
  check_ranges<float>();
}
TEST(Gemm, KRangesAndPanelRangesGiveTheWholeProductsBitsFloat64) {
  check_ranges<double>();
}

TEST(Gemm, BitsDoNotDependOnTheThreadCount) {
  PathGuard guard;
  std::mt19937_64 rng(32);
  const struct {
    Shape s;
    bool ta, tb, packed;
  } cases[] = {{{2000, 200, 129}, false, false, false},
               {{1, 2048, 512}, false, false, true},
               {{64, 1024, 256}, false, true, true},
               {{300, 160, 1500}, true, false, false},
               {{129, 257, 255}, false, true, false},
               // A weight gradient whose row tiles change with the team (gemm.cc, set_tiling;
               // avx512: 3 tiles of ≤ 96 rows at one thread, 4 at two and four, 7 at seven;
               // avx2: 2 of ≤ 144 rows at one and two threads, 4 at four, 7 at seven).
               {{200, 300, 400}, true, false, true}};
  on_every_path([&](Isa isa, bool) {
    for (const auto& cs : cases) {
      const Operands<float> o = make<float>(cs.s, cs.ta, cs.tb, rng);
      set_num_threads(1);
      const std::vector<float> one = run(o, 1.0f, cs.packed);
      for (int threads : {2, 3, 4, 7}) {
        set_num_threads(threads);
        EXPECT_TRUE(same_bits(run(o, 1.0f, cs.packed), one))
            << isa_name(isa) << " threads=" << threads << " m=" << cs.s.m << " n=" << cs.s.n
            << " k=" << cs.s.k;
      }
    }
  });
}

// The two FMA paths compute the same chains, hence the same bits.
TEST(Gemm, Avx512AndAvx2GiveTheSameBits) {
  if (!core::isa_supported(Isa::kAvx512)) GTEST_SKIP() << "this CPU has no AVX-512";
  PathGuard guard;
  std::mt19937_64 rng(33);
  const Operands<float> o = make<float>({77, 301, 700}, false, true, rng);
  set_isa("avx512");
  const std::vector<float> x = run(o, 1.0f, false);
  set_isa("avx2");
  EXPECT_TRUE(same_bits(run(o, 1.0f, false), x));
}

TEST(Gemm, BetaZeroNeverReadsC) {
  PathGuard guard;
  std::mt19937_64 rng(34);
  on_every_path([&](Isa isa, bool) {
    Operands<float> o = make<float>({9, 33, 20}, false, false, rng);
    for (float& v : o.c) v = std::nanf("");
    const std::vector<float> c = run(o, 0.0f, false);
    for (std::int64_t i = 0; i < o.m; ++i) {
      for (std::int64_t j = 0; j < o.ldc; ++j) {
        // Inside the output: a number; the row padding past n: untouched (still NaN).
        EXPECT_EQ(std::isnan(c[i * o.ldc + j]), j >= o.n) << isa_name(isa) << " " << i << "," << j;
      }
    }
  });
}

// transpose: dst[c·ldd + r] = src[r·lds + c] on every path and thread count, for sizes with and
// without whole 8 × 8 blocks and 64 × 64 tiles, row strides past the rows; dst's padding is never
// written.
template <typename T>
void check_transpose(Isa isa, std::int64_t rows, std::int64_t cols) {
  const std::int64_t lds = cols + 3, ldd = rows + 5;
  std::vector<T> src(static_cast<std::size_t>(rows * lds)),
      dst(static_cast<std::size_t>(cols * ldd), T(7));
  for (std::size_t e = 0; e < src.size(); ++e) src[e] = static_cast<T>(e % 1000 + 1);
  gemm::transpose(rows, cols, src.data(), lds, dst.data(), ldd);
  for (std::int64_t c = 0; c < cols; ++c) {
    for (std::int64_t r = 0; r < ldd; ++r) {
      const T want = r < rows ? src[r * lds + c] : T(7);
      ASSERT_EQ(dst[c * ldd + r], want)
          << isa_name(isa) << " " << rows << "x" << cols << " at " << r << "," << c;
    }
  }
}

TEST(Gemm, TransposeMovesEveryValueAndNothingElse) {
  PathGuard guard;
  on_every_path([&](Isa isa, bool) {
    for (const int threads : {1, 3}) {  // 3: bands of rows split unevenly over the team
      set_num_threads(threads);
      check_transpose<float>(isa, 700, 300);
      check_transpose<std::uint16_t>(isa, 700, 300);
    }
    for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1},
                                     {7, 9},
                                     {8, 8},
                                     {64, 64},
                                     {67, 130},
                                     {0, 5},
                                     {16, 200}}) {
      check_transpose<float>(isa, rows, cols);
      check_transpose<double>(isa, rows, cols);
      check_transpose<std::uint16_t>(isa, rows, cols);
    }
  });
}

TEST(Gemm, DegenerateSizes) {
  std::vector<float> c = {1, 2, 3, 4};
  const float a = 1, b = 1;
  gemm::gemm<float>(Trans::kNo, Trans::kNo, 2, 2, 0, &a, 1, &b, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2}));  // K = 0: C = beta·C
  gemm::gemm<float>(Trans::kNo, Trans::kNo, 2, 2, 0, &a, 1, &b, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
  c = {7, 7, 7, 7};
  gemm::gemm<float>(Trans::kNo, Trans::kNo, 0, 2, 3, &a, 3, &b, 2, 0.0f, c.data(), 2);
  gemm::gemm<float>(Trans::kNo, Trans::kNo, 2, 0, 3, &a, 3, &b, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{7, 7, 7, 7}));  // M or N = 0: nothing written
}

// blockrnn asks for its threads per parallel region; the host's OpenMP setting is untouched.
TEST(Gemm, HostOpenMPSettingIsUntouched) {
  PathGuard guard;
  const int host = omp_get_max_threads();
  omp_set_num_threads(1);
  set_num_threads(4);
  std::mt19937_64 rng(35);
  const Operands<float> o = make<float>({256, 512, 256}, false, false, rng);
  (void)run(o, 0.0f, false);
  (void)run(o, 1.0f, true);
  EXPECT_EQ(omp_get_max_threads(), 1);
  omp_set_num_threads(host);
}

TEST(Isa, UnknownOrUnsupportedPathIsAnError) {
  PathGuard guard;
  try {
    set_isa("sse9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of avx512, avx2, baseline, auto"),
              std::string::npos)
        << e.what();
  }
  set_isa("baseline");
  EXPECT_STREQ(get_isa(), "baseline");
  set_isa("");
  EXPECT_STREQ(get_isa(), isa_name(core::active_isa()));
}

}  // namespace
}  // namespace blockrnn
