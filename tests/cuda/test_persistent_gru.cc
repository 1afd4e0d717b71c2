// blockrnn_persistent_tests: the persistent BlockGRU forward body (src/cuda/persistent_gru.h)
// run by the host driver (src/cuda/persistent_host.h: every CTA thread a std::thread, barriers
// for __syncthreads and the grid sync, random yields between the phases) against the CPU
// reference (src/ref/block_gru.cc) in float64 and float32.
//
// What the design promises, and so what is checked bit for bit: the forward equals the
// reference exactly (the same groupings and summation orders; the host driver's input
// projections sum in the reference's order), and so does every output of the backward but d_w_ru
// and d_w_c; and every output is the same bits for any number of CTAs, threads per CTA and
// yields. d_w_ru and d_w_c are one product over all S·B rows each, where the reference adds
// per-step products: within 1e-12 (float64) / 2e-5 (float32), the reason being that of
// test_persistent.cc's d_w (a reordered sum of n ≤ S·B = 27 terms of O(1) differs by about
// n·eps: ≤ ~6e-15 / ~3e-6). A wrong term is O(1e-2) or more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "blockrnn/error.h"
#include "cuda/persistent_host.h"
#include "kernel/block_gru.h"
#include "persistent_gru_case.h"

namespace blockrnn {
namespace {

using cuda::persistent::gru_bwd_host;
using cuda::persistent::gru_fwd_host;
using cuda::persistent::HostGrid;
using persistent_test::GRUBwdOut;
using persistent_test::GRUCase;
using persistent_test::GRUOut;
using persistent_test::GRUShape;
using persistent_test::kGRUBwdNames;

template <typename T>
GRUOut<T> run_persistent(const GRUCase<T>& c, const HostGrid& g) {
  GRUOut<T> o(c.s.T * c.s.B * c.s.H);
  gru_fwd_host<T>(c.d, c.args(o), g);
  return o;
}

template <typename T>
GRUBwdOut<T> run_persistent_bwd(const GRUCase<T>& c, const GRUOut<T>& f, const HostGrid& g) {
  GRUBwdOut<T> o(c.s.T, c.s.B, c.s.I, c.s.H);
  gru_bwd_host<T>(c.d, c.bwd_args(f, o), g);
  return o;
}

template <typename T>
void expect_near(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = sizeof(T) == 8 ? 1e-12 : 2e-5;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double g = got[e], w = want[e];
    if (!(std::fabs(g - w) <= tol + tol * std::fabs(w))) {
      ADD_FAILURE() << what << "[" << e << "]: " << g << " vs reference " << w;
      return;
    }
  }
}

template <typename T>
void expect_bitwise(const std::vector<T>& got, const std::vector<T>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t e = 0; e < got.size(); ++e) {
    if (std::memcmp(&got[e], &want[e], sizeof(T)) != 0) {
      ADD_FAILURE() << what << "[" << e << "]: " << got[e] << " != " << want[e] << " (bits differ)";
      return;
    }
  }
}

template <typename T>
void expect_same(const GRUOut<T>& got, const GRUOut<T>& want, const std::string& how) {
  expect_bitwise(got.r, want.r, how + " r");
  expect_bitwise(got.u, want.u, how + " u");
  expect_bitwise(got.c, want.c, how + " c");
  expect_bitwise(got.h, want.h, how + " h");
}

// Every output of the backward bitwise the reference's but d_w_ru and d_w_c (near: the header).
template <typename T>
void expect_bwd_matches_reference(const GRUBwdOut<T>& got, const GRUBwdOut<T>& want) {
  const auto g = got.all(), w = want.all();
  for (int k = 0; k < 6; ++k) {
    const std::string name = kGRUBwdNames[k];
    if (name == "d_w_ru" || name == "d_w_c") {
      expect_near(*g[k], *w[k], name);
    } else {
      expect_bitwise(*g[k], *w[k], name);
    }
  }
}

HostGrid grid(std::int64_t ctas, std::int64_t threads, std::uint64_t seed) {
  HostGrid g;
  g.ctas = ctas;
  g.threads_per_cta = threads;
  g.jitter_seed = seed;
  return g;
}

// Odd shapes: H = 37 over 4 CTAs (9, 9, 9, 10 units), B and I not powers of two, seq_len_max = T
// and < T.
std::vector<GRUShape> shapes() {
  return {{9, 3, 5, 37, 9, 21}, {9, 3, 5, 37, 6, 22}, {7, 5, 3, 13, 7, 23}, {4, 2, 7, 1, 3, 24}};
}

std::string describe(const GRUShape& s) {
  return "T=" + std::to_string(s.T) + " B=" + std::to_string(s.B) + " I=" + std::to_string(s.I) +
         " H=" + std::to_string(s.H) + " S=" + std::to_string(s.S);
}

template <typename T>
class PersistentGRU : public ::testing::Test {};
using Types = ::testing::Types<double, float>;
TYPED_TEST_SUITE(PersistentGRU, Types);

TYPED_TEST(PersistentGRU, ForwardEqualsReferenceBitwise) {
  using T = TypeParam;
  for (const GRUShape& s : shapes()) {
    SCOPED_TRACE(describe(s));
    const GRUCase<T> c(s);
    expect_same(run_persistent(c, grid(4, 3, 7)), c.reference(), "4 CTAs x 3 threads, yields:");
  }
}

// The backward from the reference's forward outputs: every output but d_w bitwise.
TYPED_TEST(PersistentGRU, BackwardMatchesReference) {
  using T = TypeParam;
  for (const GRUShape& s : shapes()) {
    SCOPED_TRACE(describe(s));
    const GRUCase<T> c(s);
    const GRUOut<T> f = c.reference();
    const GRUBwdOut<T> got = run_persistent_bwd(c, f, grid(4, 3, 7)), want = c.reference_bwd(f);
    expect_bwd_matches_reference(got, want);
  }
}

TYPED_TEST(PersistentGRU, BackwardBitwiseAcrossGridsAndYields) {
  using T = TypeParam;
  const GRUCase<T> c(shapes()[1]);
  const GRUOut<T> f = c.reference();
  const GRUBwdOut<T> want = run_persistent_bwd(c, f, grid(1, 1, 0));
  for (std::int64_t ctas : {2, 4, 7, 37, 40}) {
    for (std::int64_t threads : {1, 4}) {
      const GRUBwdOut<T> got =
          run_persistent_bwd(c, f, grid(ctas, threads, std::uint64_t(ctas * 10 + threads)));
      const auto g = got.all(), w = want.all();
      for (int k = 0; k < 6; ++k) {
        expect_bitwise(*g[k], *w[k],
                       std::to_string(ctas) + " CTAs x " + std::to_string(threads) +
                           " threads: " + kGRUBwdNames[k]);
      }
    }
  }
}

TYPED_TEST(PersistentGRU, BitwiseDeterministicAcrossGrids) {
  using T = TypeParam;
  const GRUShape s = shapes()[1];
  const GRUCase<T> c(s);
  const GRUOut<T> want = run_persistent(c, grid(1, 1, 0));
  for (std::int64_t ctas : {2, 4, 7, 37, 40}) {
    for (std::int64_t threads : {1, 4}) {
      const std::string how =
          std::to_string(ctas) + " CTAs x " + std::to_string(threads) + " threads:";
      expect_same(run_persistent(c, grid(ctas, threads, std::uint64_t(ctas * 10 + threads))), want,
                  how);
    }
  }
}

TYPED_TEST(PersistentGRU, RepeatedRunsWithYieldsAreIdentical) {
  using T = TypeParam;
  const GRUCase<T> c(shapes()[0]);
  const GRUOut<T> want = c.reference();
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    expect_same(run_persistent(c, grid(4, 4, seed)), want, "seed " + std::to_string(seed) + ":");
  }
}

// seq_len_max = 0, B = 0, I = 0 (the input projections are sums of nothing) and T = 0, forward
// and backward (d_w within the tolerance, as in BackwardMatchesReference).
TYPED_TEST(PersistentGRU, EmptyShapesMatchReference) {
  using T = TypeParam;
  for (const GRUShape& s : std::vector<GRUShape>{
           {5, 3, 4, 6, 0, 31}, {5, 0, 4, 6, 5, 32}, {5, 3, 0, 6, 5, 33}, {0, 3, 4, 6, 0, 34}}) {
    SCOPED_TRACE(describe(s));
    const GRUCase<T> c(s);
    const GRUOut<T> f = c.reference();
    expect_same(run_persistent(c, grid(3, 2, 5)), f, "empty:");
    const GRUBwdOut<T> got = run_persistent_bwd(c, f, grid(3, 2, 5)), want = c.reference_bwd(f);
    expect_bwd_matches_reference(got, want);
  }
}

TEST(PersistentGRUErrors, BadGridAndSeqLengthsAreClearErrors) {
  const GRUCase<double> c({4, 2, 3, 5, 4, 41});
  GRUOut<double> o(4 * 2 * 5);
  try {
    gru_fwd_host<double>(c.d, c.args(o), grid(0, 1, 0));
    FAIL() << "no error for 0 CTAs";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("BlockGRU"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ctas must be at least 1, got 0"), std::string::npos)
        << e.what();
  }
  const std::vector<std::int64_t> lengths{4, 2};
  BlockGRUDims d = c.d;
  d.lengths = lengths.data();
  try {
    gru_fwd_host<double>(d, c.args(o), grid(2, 1, 0));
    FAIL() << "no error for seq_lengths";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("BlockGRU (persistent): seq_lengths"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace blockrnn
