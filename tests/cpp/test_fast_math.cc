// Accuracy of the vectorizable float32 activations (src/cpu/fast_math.h) against libm in
// double, in ulp of the float result, over a dense sweep of the useful input range.
#include <cmath>
#include <limits>

#include "cpu/fast_math.h"
#include "test_util.h"

namespace blockrnn {
namespace {

double ulp_error(float got, double want) {
  const float w = static_cast<float>(want);
  if (w == 0.0f)
    return got == 0.0f ? 0.0 : std::abs(got) / std::numeric_limits<float>::denorm_min();
  const double ulp =
      std::nextafter(std::abs(w), std::numeric_limits<float>::infinity()) - std::abs(w);
  return std::abs(static_cast<double>(got) - want) / ulp;
}

template <typename F, typename G>
double max_ulp(F f, G g, float lo, float hi, int steps) {
  double worst = 0;
  for (int k = 0; k <= steps; ++k) {
    const float x = lo + (hi - lo) * static_cast<float>(k) / static_cast<float>(steps);
    worst = std::max(worst, ulp_error(f(x), g(static_cast<double>(x))));
  }
  return worst;
}

TEST(FastMath, ExpWithinTwoUlp) {
  EXPECT_LE(max_ulp(
                cpu::fast_exp, [](double x) { return std::exp(x); }, -87.0f, 88.0f, 2000000),
            2.0);
}

TEST(FastMath, SigmoidWithinThreeUlp) {
  // Below −87 the result is subnormal and flushes to the smallest-normal-based limit.
  EXPECT_LE(max_ulp(
                cpu::fast_sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -80.0f,
                40.0f, 2000000),
            3.0);
}

TEST(FastMath, TanhWithinThreeUlp) {
  EXPECT_LE(max_ulp(
                cpu::fast_tanh, [](double x) { return std::tanh(x); }, -20.0f, 20.0f, 2000000),
            3.0);
  EXPECT_LE(max_ulp(
                cpu::fast_tanh, [](double x) { return std::tanh(x); }, -1e-3f, 1e-3f, 200000),
            3.0);
}

TEST(FastMath, LimitsAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(cpu::fast_sigmoid(inf), 1.0f);
  EXPECT_EQ(cpu::fast_sigmoid(-inf), 0.0f);
  EXPECT_EQ(cpu::fast_sigmoid(1000.0f), 1.0f);
  EXPECT_NEAR(cpu::fast_sigmoid(-1000.0f), 0.0f, 1e-37f);
  EXPECT_EQ(cpu::fast_tanh(inf), 1.0f);
  EXPECT_EQ(cpu::fast_tanh(-inf), -1.0f);
  EXPECT_EQ(cpu::fast_tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(cpu::fast_exp(nan)));
  EXPECT_TRUE(std::isnan(cpu::fast_sigmoid(nan)));
  EXPECT_TRUE(std::isnan(cpu::fast_tanh(nan)));
  EXPECT_TRUE(std::isnan(cpu::fast_tanh(-nan)));
}

}  // namespace
}  // namespace blockrnn
