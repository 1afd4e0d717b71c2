// blockrnn::matmul (blockrnn/matmul.h): the public entry to the GEMM engine on views.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "blockrnn/matmul.h"
#include "gemm/gemm.h"
#include "test_util.h"

namespace blockrnn {
namespace {

using testing::expect_invalid;

// c = op(a)·op(b) + beta·c in long double, for the comparison below.
template <typename T>
void naive(const Tensor& a, const Tensor& b, Tensor& c, const MatmulOptions& o) {
  const std::int64_t M = c.shape()[0], N = c.shape()[1];
  const std::int64_t K = o.transpose_a ? a.shape()[0] : a.shape()[1];
  const T* pa = a.data_as<T>();
  const T* pb = b.data_as<T>();
  T* pc = c.data_as<T>();
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      long double s = o.beta == 0.0 ? 0.0L : static_cast<long double>(o.beta) * pc[i * N + j];
      for (std::int64_t k = 0; k < K; ++k) {
        const T x = o.transpose_a ? pa[k * M + i] : pa[i * K + k];
        const T y = o.transpose_b ? pb[j * K + k] : pb[k * N + j];
        s += static_cast<long double>(x) * y;
      }
      pc[i * N + j] = static_cast<T>(s);
    }
  }
}

template <typename T>
void check_against_naive() {
  std::mt19937_64 rng(7);
  const DType dt = dtype_of<T>();
  // Sizes past the micro-kernels' register blocks and panel widths, and not multiples of them.
  const std::int64_t M = 37, N = 45, K = 29;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (double beta : {0.0, 1.0}) {
        SCOPED_TRACE(::testing::Message() << "ta " << ta << " tb " << tb << " beta " << beta);
        const MatmulOptions o{.transpose_a = ta, .transpose_b = tb, .beta = beta};
        const Tensor a = testing::random_tensor(dt, ta ? Shape{K, M} : Shape{M, K}, rng);
        const Tensor b = testing::random_tensor(dt, tb ? Shape{N, K} : Shape{K, N}, rng);
        const Tensor c0 = testing::random_tensor(dt, Shape{M, N}, rng);
        Tensor got(dt, Shape{M, N}), want(dt, Shape{M, N}), engine(dt, Shape{M, N});
        for (Tensor* t : {&got, &want, &engine}) {
          std::copy_n(c0.data_as<T>(), M * N, t->data_as<T>());
        }
        matmul(a, b, got.mutable_view(), o);
        naive<T>(a, b, want, o);
        // Entries of a, b, c in [−1, 1], so the K + 1 terms (the +1: beta·c) have Σ|term| ≤
        // K + 1. Each step of the chain rounds at most twice (once with an FMA; the baseline
        // path rounds product and sum), so the chain is within 2(K + 1)·u·Σ|term| of the exact
        // sum, and rounding the long double reference adds u·(K + 1); u = eps / 2.
        const double u = std::numeric_limits<T>::epsilon() / 2;
        const double tol = (2 * (K + 1) + 1) * (K + 1) * u;
        EXPECT_TRUE(testing::all_close(got, want, 0.0, tol));
        // The same bits as the engine called directly with the row-major leading dimensions.
        using gemm::Trans;
        gemm::gemm<T>(ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, M, N, K,
                      a.data_as<T>(), ta ? M : K, b.data_as<T>(), tb ? K : N, static_cast<T>(beta),
                      engine.data_as<T>(), N);
        EXPECT_TRUE(testing::bitwise_equal(got, engine));
      }
    }
  }
}

TEST(Matmul, MatchesLongDoubleProductFloat32) {
  check_against_naive<float>();
}
TEST(Matmul, MatchesLongDoubleProductFloat64) {
  check_against_naive<double>();
}

TEST(Matmul, BetaZeroIgnoresOldValuesOfC) {
  Tensor a(DType::kFloat32, Shape{2, 3}), b(DType::kFloat32, Shape{3, 2});
  for (std::int64_t e = 0; e < 6; ++e) {
    a.data_as<float>()[e] = 1.0f;
    b.data_as<float>()[e] = 2.0f;
  }
  Tensor c = testing::poisoned(DType::kFloat32, Shape{2, 2});  // NaN
  matmul(a, b, c.mutable_view());
  for (std::int64_t e = 0; e < 4; ++e) EXPECT_EQ(c.data_as<float>()[e], 6.0f);
}

TEST(Matmul, EmptySizes) {
  // K = 0: c = beta·c (beta = 1 keeps c, beta = 0 zeroes it); M = 0: nothing to write.
  Tensor a(DType::kFloat64, Shape{2, 0}), b(DType::kFloat64, Shape{0, 3});
  Tensor c(DType::kFloat64, Shape{2, 3});
  for (std::int64_t e = 0; e < 6; ++e) c.data_as<double>()[e] = 5.0;
  matmul(a, b, c.mutable_view(), {.beta = 1.0});
  for (std::int64_t e = 0; e < 6; ++e) EXPECT_EQ(c.data_as<double>()[e], 5.0);
  matmul(a, b, c.mutable_view());
  EXPECT_TRUE(testing::all_zero(c));
  Tensor a0(DType::kFloat64, Shape{0, 4}), b0(DType::kFloat64, Shape{4, 3});
  Tensor c0(DType::kFloat64, Shape{0, 3});
  matmul(a0, b0, c0.mutable_view());
}

TEST(Matmul, BadArgumentsNameMatmulAndTheArgument) {
  const Tensor a(DType::kFloat32, Shape{2, 3}), b(DType::kFloat32, Shape{3, 4});
  Tensor c(DType::kFloat32, Shape{2, 4});
  expect_invalid(
      [&] {
        matmul(Tensor(DType::kFloat32, Shape{2, 3, 1}), b, c.mutable_view());
      },
      "matmul: a must be rank 2");
  expect_invalid(
      [&] {
        matmul(a, Tensor(DType::kFloat32, Shape{4, 4}), c.mutable_view());
      },
      "matmul: b must have shape [3, 4] (K = a's columns, N), got [4, 4]");
  expect_invalid([&] { matmul(a, b, c.mutable_view(), {.transpose_a = true}); },
                 "matmul: b must have shape [2, 4] (K = a's rows, N), got [3, 4]");
  expect_invalid([&] { matmul(a, b, c.mutable_view(), {.transpose_b = true}); },
                 "matmul: b must have shape [3, 3] (N, K = a's columns; b is transposed), got "
                 "[3, 4]");
  Tensor c_wrong(DType::kFloat32, Shape{4, 2});
  expect_invalid([&] { matmul(a, b, c_wrong.mutable_view()); },
                 "matmul: c must have shape [2, 4] (M from a, N from b), got [4, 2]");
  Tensor ah(DType::kFloat16, Shape{2, 3}), bh(DType::kFloat16, Shape{3, 4});
  Tensor ch(DType::kFloat16, Shape{2, 4});
  expect_invalid([&] { matmul(ah, bh, ch.mutable_view()); },
                 "matmul: a must be float32 or float64, got float16");
  Tensor ab(DType::kBFloat16, Shape{2, 3}), bb(DType::kBFloat16, Shape{3, 4});
  Tensor cb(DType::kBFloat16, Shape{2, 4});
  expect_invalid([&] { matmul(ab, bb, cb.mutable_view()); },
                 "matmul: a must be float32 or float64, got bfloat16");
  const Tensor bd(DType::kFloat64, Shape{3, 4});
  expect_invalid([&] { matmul(a, bd, c.mutable_view()); },
                 "matmul: b must have the dtype of a (float32), got float64");
  expect_invalid(
      [&] {
        matmul(TensorView(nullptr, DType::kFloat32, Shape{2, 3}), b, c.mutable_view());
      },
      "matmul: a has 6 elements but no data");
  // c written over a: the product would read what it has already overwritten.
  Tensor sq(DType::kFloat32, Shape{3, 3});
  expect_invalid(
      [&] {
        matmul(sq, Tensor(DType::kFloat32, Shape{3, 3}), sq.mutable_view());
      },
      "matmul: c must not overlap a");
}

}  // namespace
}  // namespace blockrnn
