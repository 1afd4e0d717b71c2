// Tests for softmax cross-entropy (closed-form values, finite-difference
// gradient check in double, stability) and for sampling from logits.
#include "train/softmax_xent.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace blockrnn::train {
namespace {

TEST(SoftmaxXent, UniformLogits) {
  const int64_t N = 2, V = 4;
  const std::vector<float> logits(N * V, 0.0f);
  const std::vector<int32_t> targets = {1, 3};
  std::vector<float> d(N * V);
  const float loss = softmax_xent_forward_backward(logits.data(), targets.data(), N, V, d.data());
  EXPECT_NEAR(loss, std::log(4.0), 1e-6);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < V; ++j) {
      const float expected = (0.25f - (j == targets[n] ? 1.0f : 0.0f)) / N;
      EXPECT_NEAR(d[n * V + j], expected, 1e-7);
    }
  }
}

TEST(SoftmaxXent, GradientMatchesFiniteDifferencesInDouble) {
  const int64_t N = 3, V = 5;
  std::vector<double> logits(N * V);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(1.3 * i) * 3.0 + 0.1 * i;
  const std::vector<int32_t> targets = {4, 0, 2};
  std::vector<double> grad(N * V);
  const double loss =
      softmax_xent_forward_backward(logits.data(), targets.data(), N, V, grad.data());
  EXPECT_GT(loss, 0);
  const double h = 1e-6;
  for (size_t i = 0; i < logits.size(); ++i) {
    std::vector<double> plus = logits, minus = logits;
    plus[i] += h;
    minus[i] -= h;
    const double lp = softmax_xent_forward_backward(plus.data(), targets.data(), N, V, nullptr);
    const double lm = softmax_xent_forward_backward(minus.data(), targets.data(), N, V, nullptr);
    EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-8) << "element " << i;
  }
  // Each row of the gradient sums to zero.
  for (int64_t n = 0; n < N; ++n) {
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += grad[n * V + j];
    EXPECT_NEAR(sum, 0.0, 1e-15);
  }
}

TEST(SoftmaxXent, FloatMatchesDoubleAndAllowsAliasing) {
  const int64_t N = 4, V = 7;
  std::vector<float> logits(N * V);
  std::vector<double> logits_d(N * V);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>(std::cos(0.7 * i) * 5.0);
    logits_d[i] = logits[i];
  }
  const std::vector<int32_t> targets = {0, 6, 3, 3};
  std::vector<double> gd(N * V);
  const double ld = softmax_xent_forward_backward(logits_d.data(), targets.data(), N, V, gd.data());
  std::vector<float> g(N * V);
  const float lf = softmax_xent_forward_backward(logits.data(), targets.data(), N, V, g.data());
  EXPECT_NEAR(lf, ld, 1e-6);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], gd[i], 1e-7);
  // In place: dlogits == logits.
  const float l2 =
      softmax_xent_forward_backward(logits.data(), targets.data(), N, V, logits.data());
  EXPECT_EQ(l2, lf);
  EXPECT_EQ(logits, g);
}

TEST(SoftmaxXent, NumericallyStableForLargeLogits) {
  const std::vector<float> logits = {1e4f, 0.0f, -1e4f, 3e38f, 3e38f, -3e38f};
  const std::vector<int32_t> targets = {1, 0};
  std::vector<float> d(6);
  const float loss = softmax_xent_forward_backward(logits.data(), targets.data(), 2, 3, d.data());
  // Row 0: -log softmax = 1e4; row 1: log 2.
  EXPECT_NEAR(loss, (1e4 + std::log(2.0)) / 2, 1e-2);
  for (float x : d) EXPECT_TRUE(std::isfinite(x));
  EXPECT_NEAR(d[0], 0.5f, 1e-6);
  EXPECT_NEAR(d[1], -0.5f, 1e-6);
  EXPECT_NEAR(d[3], (0.5f - 1.0f) / 2, 1e-6);
}

TEST(SoftmaxXent, ValidatesArguments) {
  const std::vector<float> logits(6, 0.0f);
  std::vector<float> d(6, 123.0f);
  const std::vector<int32_t> bad = {0, 3};
  EXPECT_THROW(softmax_xent_forward_backward(logits.data(), bad.data(), 2, 3, d.data()),
               std::invalid_argument);
  EXPECT_EQ(d[0], 123.0f);  // nothing written before the check
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(softmax_xent_forward_backward(logits.data(), negative.data(), 1, 3, nullptr),
               std::invalid_argument);
  EXPECT_THROW(softmax_xent_forward_backward(logits.data(), bad.data(), 1, 0, nullptr),
               std::invalid_argument);
  EXPECT_EQ(softmax_xent_forward_backward(logits.data(), bad.data(), 0, 3, nullptr), 0.0f);
}

TEST(Softmax, RowsSumToOne) {
  const std::vector<float> logits = {1, 2, 3, -1000, 0, 1000};
  std::vector<float> p(6);
  softmax(logits.data(), 2, 3, p.data());
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0f, 1e-6);
  EXPECT_NEAR(p[2], std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
  EXPECT_EQ(p[5], 1.0f);
  EXPECT_EQ(p[3], 0.0f);
}

TEST(SampleFromLogits, GreedyAtZeroTemperature) {
  std::mt19937_64 rng(1);
  const std::vector<float> logits = {0.1f, 2.0f, 2.0f, -5.0f};
  EXPECT_EQ(sample_from_logits(logits.data(), 4, 0.0f, rng), 1);
  EXPECT_EQ(sample_from_logits(logits.data(), 4, -1.0f, rng), 1);
  const std::vector<float> sharp = {0.0f, 1.0f, 0.5f};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_from_logits(sharp.data(), 3, 1e-3f, rng), 1);
  EXPECT_EQ(sample_from_logits(sharp.data(), 3, 1e-45f, rng), 1);  // logits / T overflow
}

TEST(SampleFromLogits, MatchesDistribution) {
  std::mt19937_64 rng(12345);
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.7f),
                                     -std::numeric_limits<float>::infinity()};
  std::vector<int> counts(4, 0);
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) ++counts[sample_from_logits(logits.data(), 4, 1.0f, rng)];
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[0] / double(draws), 0.1, 0.01);
  EXPECT_NEAR(counts[1] / double(draws), 0.2, 0.01);
  EXPECT_NEAR(counts[2] / double(draws), 0.7, 0.01);
  // Temperature 2 flattens: p ~ sqrt(0.1, 0.2, 0.7).
  counts.assign(4, 0);
  for (int i = 0; i < draws; ++i) ++counts[sample_from_logits(logits.data(), 4, 2.0f, rng)];
  const double z = std::sqrt(0.1) + std::sqrt(0.2) + std::sqrt(0.7);
  EXPECT_NEAR(counts[0] / double(draws), std::sqrt(0.1) / z, 0.01);
  EXPECT_NEAR(counts[2] / double(draws), std::sqrt(0.7) / z, 0.01);
}

TEST(SampleFromLogits, DeterministicAndValidated) {
  const std::vector<float> logits = {0.3f, -0.2f, 1.1f, 0.0f, 0.5f};
  std::mt19937_64 a(99), b(99);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(sample_from_logits(logits.data(), 5, 0.8f, a),
              sample_from_logits(logits.data(), 5, 0.8f, b));
  }
  std::mt19937_64 rng(0);
  const std::vector<float> nan = {0.0f, NAN};
  EXPECT_THROW(sample_from_logits(nan.data(), 2, 1.0f, rng), std::invalid_argument);
  EXPECT_THROW(sample_from_logits(logits.data(), 0, 1.0f, rng), std::invalid_argument);
  const std::vector<float> one = {-3.0f};
  EXPECT_EQ(sample_from_logits(one.data(), 1, 1.0f, rng), 0);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const std::vector<float> all_neg_inf = {neg_inf, neg_inf};
  EXPECT_EQ(sample_from_logits(all_neg_inf.data(), 2, 1.0f, rng), 0);
}

}  // namespace
}  // namespace blockrnn::train
