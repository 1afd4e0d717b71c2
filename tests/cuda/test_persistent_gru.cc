// blockrnn_persistent_tests: the persistent BlockGRU forward body (src/cuda/persistent_gru.h)
// run by the host driver (src/cuda/persistent_host.h: every CTA thread a std::thread, barriers
// for __syncthreads and the grid sync, random yields between the phases) against the CPU
// reference (src/ref/block_gru.cc) in float64 and float32.
//
// What the design promises, and so what is checked bit for bit (no tolerance anywhere): the
// forward equals the reference exactly (the same groupings and summation orders; the host
// driver's input projections sum in the reference's order), and every output is the same bits
// for any number of CTAs, threads per CTA and yields.
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

namespace blockrnn {
namespace {

using cuda::persistent::gru_fwd_host;
using cuda::persistent::HostGrid;

struct GRUShape {
  std::int64_t T, B, I, H, S;
  std::uint64_t seed = 1;
};

template <typename T>
std::vector<T> nan_vector(std::int64_t n) {
  return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

// The forward's outputs, NaN until written (an element the kernel fails to write shows).
template <typename T>
struct GRUOut {
  std::vector<T> r, u, c, h;
  explicit GRUOut(std::int64_t n)
      : r(nan_vector<T>(n)), u(nan_vector<T>(n)), c(nan_vector<T>(n)), h(nan_vector<T>(n)) {}
};

// Random inputs uniform in [−1, 1], the weights scaled by 1/√(I+H) (pre-activations O(1)).
template <typename T>
struct GRUCase {
  GRUShape s;
  BlockGRUDims d;
  std::vector<T> x, h_prev, w_ru, w_c, b_ru, b_c;

  explicit GRUCase(const GRUShape& shape)
      : s(shape), d{shape.T, shape.B, shape.I, shape.H, shape.S, nullptr} {
    std::mt19937_64 rng(shape.seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const std::int64_t K = s.I + s.H;
    auto fill = [&](std::int64_t n, double scale) {
      std::vector<T> v(static_cast<std::size_t>(n));
      for (T& e : v) e = static_cast<T>(u(rng) * scale);
      return v;
    };
    const double ws = K > 0 ? 1.0 / std::sqrt(double(K)) : 1.0;
    x = fill(s.T * s.B * s.I, 1.0);
    h_prev = fill(s.B * s.H, 1.0);
    w_ru = fill(K * 2 * s.H, ws);
    w_c = fill(K * s.H, ws);
    b_ru = fill(2 * s.H, 1.0);
    b_c = fill(s.H, 1.0);
  }

  BlockGRUFwdArgs<T> args(GRUOut<T>& o) const {
    BlockGRUFwdArgs<T> a{};
    a.x = x.data();
    a.h_prev = h_prev.data();
    a.w_ru = w_ru.data();
    a.w_c = w_c.data();
    a.b_ru = b_ru.data();
    a.b_c = b_c.data();
    a.r = o.r.data();
    a.u = o.u.data();
    a.c = o.c.data();
    a.h = o.h.data();
    return a;
  }

  GRUOut<T> reference() const {
    GRUOut<T> o(s.T * s.B * s.H);
    ref::block_gru_fwd<T>(d, args(o));
    return o;
  }

  GRUOut<T> persistent(const HostGrid& g) const {
    GRUOut<T> o(s.T * s.B * s.H);
    gru_fwd_host<T>(d, args(o), g);
    return o;
  }
};

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
    expect_same(c.persistent(grid(4, 3, 7)), c.reference(), "4 CTAs x 3 threads, yields:");
  }
}

TYPED_TEST(PersistentGRU, BitwiseDeterministicAcrossGrids) {
  using T = TypeParam;
  const GRUShape s = shapes()[1];
  const GRUCase<T> c(s);
  const GRUOut<T> want = c.persistent(grid(1, 1, 0));
  for (std::int64_t ctas : {2, 4, 7, 37, 40}) {
    for (std::int64_t threads : {1, 4}) {
      const std::string how =
          std::to_string(ctas) + " CTAs x " + std::to_string(threads) + " threads:";
      expect_same(c.persistent(grid(ctas, threads, std::uint64_t(ctas * 10 + threads))), want, how);
    }
  }
}

TYPED_TEST(PersistentGRU, RepeatedRunsWithYieldsAreIdentical) {
  using T = TypeParam;
  const GRUCase<T> c(shapes()[0]);
  const GRUOut<T> want = c.reference();
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    expect_same(c.persistent(grid(4, 4, seed)), want, "seed " + std::to_string(seed) + ":");
  }
}

// seq_len_max = 0, B = 0, I = 0 (the input projections are sums of nothing) and T = 0.
TYPED_TEST(PersistentGRU, EmptyShapesMatchReference) {
  using T = TypeParam;
  for (const GRUShape& s : std::vector<GRUShape>{
           {5, 3, 4, 6, 0, 31}, {5, 0, 4, 6, 5, 32}, {5, 3, 0, 6, 5, 33}, {0, 3, 4, 6, 0, 34}}) {
    SCOPED_TRACE(describe(s));
    const GRUCase<T> c(s);
    expect_same(c.persistent(grid(3, 2, 5)), c.reference(), "empty:");
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
