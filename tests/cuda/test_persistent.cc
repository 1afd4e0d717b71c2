// blockrnn_persistent_tests: the persistent BlockLSTM bodies (src/cuda/persistent_lstm.h) run by
// the host driver (src/cuda/persistent_host.h: every CTA thread a std::thread, barriers for
// __syncthreads and the grid sync, random yields between the phases) against the CPU reference
// (src/ref/block_lstm.cc) in float64 and float32.
//
// What the design promises, and so what is checked bit for bit:
//   - the forward equals the reference exactly (same groupings and summation orders; the host
//     driver's input projection sums in the reference's order);
//   - the backward's d_x, d_cs_prev, d_b and the peephole gradients equal the reference exactly,
//     and so does d_h_prev when the split-K chunk covers all 4H gate columns (then it is the
//     reference's sequential sum); with a smaller chunk (the default, 64) d_h_prev and
//     everything downstream of it differ from the reference by the reordering alone;
//   - d_w is one product over all S·B rows, where the reference adds per-step products: equal
//     to rounding only;
//   - every output is the same bits for any number of CTAs, threads per CTA and yields.
// Tolerances where not bitwise (abs + rel, elementwise): float64 1e-12, float32 2e-5. Reason: a
// sum of n products of O(1) terms reordered differs by about n·eps of its terms' magnitude;
// here n ≤ S·B = 27 (d_w) or 4H = 148 (the split-K), so ≤ ~1.6e-14 (float64) and ~9e-6
// (float32) in the worst case, and the scaled weights make the backward recurrence contract,
// so the differences do not grow over the 9 steps. A wrong term is O(1e-2) or more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "blockrnn/error.h"
#include "cuda/persistent_host.h"
#include "persistent_case.h"

namespace blockrnn {
namespace {

using cuda::persistent::HostGrid;
using cuda::persistent::lstm_bwd_host;
using cuda::persistent::lstm_fwd_host;
using persistent_test::BwdOut;
using persistent_test::Case;
using persistent_test::CaseShape;
using persistent_test::FwdOut;
using persistent_test::kBwdNames;
using persistent_test::kFwdNames;

template <typename T>
double tolerance() {
  return sizeof(T) == 8 ? 1e-12 : 2e-5;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
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
void expect_near(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = tolerance<T>();
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double g = got[e], w = want[e];
    if (!(std::fabs(g - w) <= tol + tol * std::fabs(w))) {
      ADD_FAILURE() << what << "[" << e << "]: " << g << " vs reference " << w;
      return;
    }
  }
}

template <typename T>
FwdOut<T> run_fwd(const Case<T>& c, const HostGrid& g) {
  FwdOut<T> o(c.s.T * c.s.B * c.s.H);
  lstm_fwd_host<T>(c.d, c.fwd_args(o), g);
  return o;
}

template <typename T>
BwdOut<T> run_bwd(const Case<T>& c, const FwdOut<T>& f, const HostGrid& g) {
  BwdOut<T> o(c.s.T, c.s.B, c.s.I, c.s.H);
  lstm_bwd_host<T>(c.d, c.bwd_args(f, o), g);
  return o;
}

HostGrid grid(std::int64_t ctas, std::int64_t threads, std::int64_t k_chunk, std::uint64_t seed) {
  HostGrid g;
  g.ctas = ctas;
  g.threads_per_cta = threads;
  g.k_chunk = k_chunk;
  g.jitter_seed = seed;
  return g;
}

// The shapes the tests run: H = 37 over 4 CTAs (9, 9, 9, 10 units), B = 3, T = 9, with
// seq_len_max = T and < T, both layouts, peepholes and the clip on and off.
std::vector<CaseShape> shapes() {
  std::vector<CaseShape> v;
  v.push_back({9, 3, 5, 37, 9, true, LSTMLayout::kICFO, 1.0, 0.5, 11});
  v.push_back({9, 3, 5, 37, 6, true, LSTMLayout::kIFCO, 0.0, 0.5, 12});
  v.push_back({9, 3, 5, 37, 9, false, LSTMLayout::kIFCO, 1.0, 0.0, 13});
  v.push_back({9, 3, 5, 37, 4, false, LSTMLayout::kICFO, 0.5, -1.0, 14});
  return v;
}

std::string describe(const CaseShape& s) {
  return "T=" + std::to_string(s.T) + " B=" + std::to_string(s.B) + " I=" + std::to_string(s.I) +
         " H=" + std::to_string(s.H) + " S=" + std::to_string(s.S) +
         (s.use_peephole ? " peephole" : "") + (s.layout == LSTMLayout::kIFCO ? " IFCO" : " ICFO");
}

template <typename T>
class PersistentLSTM : public ::testing::Test {};
using Types = ::testing::Types<double, float>;
TYPED_TEST_SUITE(PersistentLSTM, Types);

TYPED_TEST(PersistentLSTM, ForwardEqualsReferenceBitwise) {
  using T = TypeParam;
  for (const CaseShape& s : shapes()) {
    SCOPED_TRACE(describe(s));
    const Case<T> c(s);
    const FwdOut<T> want = c.reference_fwd();
    const FwdOut<T> got = run_fwd(c, grid(4, 3, 64, 7));
    for (int k = 0; k < 7; ++k) expect_bitwise(*got.all()[k], *want.all()[k], kFwdNames[k]);
  }
}

// With the split-K chunk ≥ 4H the backward's sums are the reference's: every gradient but d_w
// (one product over all steps, against per-step products added) is bitwise the reference's.
TYPED_TEST(PersistentLSTM, BackwardWithOneChunkEqualsReference) {
  using T = TypeParam;
  for (const CaseShape& s : shapes()) {
    SCOPED_TRACE(describe(s));
    const Case<T> c(s);
    const FwdOut<T> f = c.reference_fwd();
    const BwdOut<T> want = c.reference_bwd(f);
    const BwdOut<T> got = run_bwd(c, f, grid(4, 3, 4 * s.H, 5));
    const auto g = all(got), w = all(want);
    for (int k = 0; k < 8; ++k) {
      if (std::string(kBwdNames[k]) == "d_w") {
        expect_near(*g[k], *w[k], kBwdNames[k]);
      } else {
        expect_bitwise(*g[k], *w[k], kBwdNames[k]);
      }
    }
  }
}

// The default split (chunks of 64 of the 148 gate columns: 64, 64, 20) reorders d_h_prev's sums.
TYPED_TEST(PersistentLSTM, BackwardWithSplitKMatchesReference) {
  using T = TypeParam;
  for (const CaseShape& s : shapes()) {
    SCOPED_TRACE(describe(s));
    const Case<T> c(s);
    const FwdOut<T> f = c.reference_fwd();
    const BwdOut<T> want = c.reference_bwd(f);
    const BwdOut<T> got = run_bwd(c, f, grid(4, 3, 64, 9));
    const auto g = all(got), w = all(want);
    for (int k = 0; k < 8; ++k) expect_near(*g[k], *w[k], kBwdNames[k]);
    // The split must really change d_h_prev's rounding somewhere, or this test would not
    // exercise it.
    if (s.S > 1) EXPECT_FALSE(same_bits(got.d_h_prev, want.d_h_prev));
  }
}

// Same bits for 1, 2, 4, 7 and 37 CTAs (one unit each), 40 CTAs (3 without units), 1 or 4
// threads per CTA, with and without yields.
TYPED_TEST(PersistentLSTM, BitwiseDeterministicAcrossGrids) {
  using T = TypeParam;
  const CaseShape s = shapes()[1];  // S < T, peepholes, IFCO
  const Case<T> c(s);
  const FwdOut<T> f0 = run_fwd(c, grid(1, 1, 64, 0));
  const BwdOut<T> b0 = run_bwd(c, f0, grid(1, 1, 64, 0));
  for (std::int64_t ctas : {1, 2, 4, 7, 37, 40}) {
    for (std::int64_t threads : {1, 4}) {
      for (std::uint64_t seed : {0u, 3u}) {
        SCOPED_TRACE("ctas=" + std::to_string(ctas) + " threads=" + std::to_string(threads) +
                     " seed=" + std::to_string(seed));
        const FwdOut<T> f = run_fwd(c, grid(ctas, threads, 64, seed));
        for (int k = 0; k < 7; ++k) expect_bitwise(*f.all()[k], *f0.all()[k], kFwdNames[k]);
        const BwdOut<T> b = run_bwd(c, f, grid(ctas, threads, 64, seed));
        const auto g = all(b), w = all(b0);
        for (int k = 0; k < 8; ++k) expect_bitwise(*g[k], *w[k], kBwdNames[k]);
      }
    }
  }
}

// Repeated runs with different yields: a missing barrier would show as a difference somewhere.
TYPED_TEST(PersistentLSTM, RepeatedRunsWithYieldsAreIdentical) {
  using T = TypeParam;
  const Case<T> c(shapes()[0]);
  const FwdOut<T> f0 = c.reference_fwd();
  const BwdOut<T> b0 = run_bwd(c, f0, grid(4, 3, 64, 0));
  for (std::uint64_t seed = 100; seed < 110; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    const FwdOut<T> f = run_fwd(c, grid(4, 3, 64, seed));
    for (int k = 0; k < 7; ++k) expect_bitwise(*f.all()[k], *f0.all()[k], kFwdNames[k]);
    const BwdOut<T> b = run_bwd(c, f0, grid(4, 3, 64, seed));
    const auto g = all(b), w = all(b0);
    for (int k = 0; k < 8; ++k) expect_bitwise(*g[k], *w[k], kBwdNames[k]);
  }
}

// Empty shapes: seq_len_max = 0 (every output zero), B = 0, I = 0.
TYPED_TEST(PersistentLSTM, EmptyShapesMatchReference) {
  using T = TypeParam;
  const std::vector<CaseShape> empty = {
      {5, 3, 4, 6, 0}, {5, 0, 4, 6, 5}, {5, 3, 0, 6, 5}, {0, 3, 4, 6, 0}};
  for (const CaseShape& s : empty) {
    SCOPED_TRACE(describe(s));
    const Case<T> c(s);
    const FwdOut<T> want = c.reference_fwd();
    const FwdOut<T> got = run_fwd(c, grid(4, 2, 64, 1));
    for (int k = 0; k < 7; ++k) expect_bitwise(*got.all()[k], *want.all()[k], kFwdNames[k]);
    const BwdOut<T> wb = c.reference_bwd(want);
    const BwdOut<T> gb = run_bwd(c, want, grid(4, 2, 4 * s.H, 1));
    const auto g = all(gb), w = all(wb);
    for (int k = 0; k < 8; ++k) expect_near(*g[k], *w[k], kBwdNames[k]);
  }
}

TEST(PersistentLSTMErrors, BadGridAndSeqLengthsAreClearErrors) {
  const Case<float> c(shapes()[0]);
  FwdOut<float> o(c.s.T * c.s.B * c.s.H);
  auto expect_error = [&](const BlockLSTMDims& d, const HostGrid& g, ErrorCode code,
                          const std::string& message) {
    try {
      lstm_fwd_host<float>(d, c.fwd_args(o), g);
      ADD_FAILURE() << "no error for " << message;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code);
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  expect_error(c.d, grid(0, 1, 64, 0), ErrorCode::kInvalidArgument,
               "BlockLSTM (persistent, host): ctas must be at least 1, got 0");
  expect_error(c.d, grid(2, 0, 64, 0), ErrorCode::kInvalidArgument,
               "BlockLSTM (persistent, host): threads_per_cta must be at least 1, got 0");
  expect_error(c.d, grid(2, 1, 0, 0), ErrorCode::kInvalidArgument,
               "BlockLSTM (persistent, host): k_chunk must be at least 1, got 0");
  const std::vector<std::int64_t> lengths(static_cast<std::size_t>(c.s.B), 2);
  BlockLSTMDims d = c.d;
  d.lengths = lengths.data();
  expect_error(d, grid(2, 1, 64, 0), ErrorCode::kUnimplemented,
               "BlockLSTM (persistent): seq_lengths is not supported yet");
}

}  // namespace
}  // namespace blockrnn
