// Tests for the Adam update (hand-computed two-step example) and global-norm
// gradient clipping.
#include "train/adam.h"

#include <gtest/gtest.h>

#include <cmath>

namespace blockrnn::train {
namespace {

TEST(Adam, TwoStepsMatchHandComputation) {
  // lr 0.1, beta1 0.9, beta2 0.999, eps 1e-8; params (1, -2).
  // Step 1, g = (0.5, -1):  m = (0.05, -0.1), v = (2.5e-4, 1e-3)
  //   m_hat = m / 0.1 = (0.5, -1), v_hat = v / 0.001 = (0.25, 1)
  //   p -= 0.1 * m_hat / (sqrt(v_hat) + eps)  ->  (0.9, -1.9)
  // Step 2, g = (0.3, 0.2): m = (0.075, -0.07), v = (3.3975e-4, 1.039e-3)
  //   m_hat = m / 0.19, v_hat = v / 0.001999
  //   p -> (0.9 - 0.1 * 0.394737 / 0.412262, -1.9 + 0.1 * 0.368421 / 0.720944)
  //      = (0.8042510, -1.8488974)
  // v is compared with a relative tolerance: beta2 = 0.999f is 0.99900001287 as a
  // float, so 1 - beta2 (and hence v) is off from the decimal value by ~1.3e-5.
  struct Step {
    std::vector<float> g, m, v, p;
    double p_tol;
  };
  const Step steps[] = {
      {{0.5f, -1.0f}, {0.05f, -0.1f}, {2.5e-4f, 1e-3f}, {0.9f, -1.9f}, 1e-6},
      {{0.3f, 0.2f}, {0.075f, -0.07f}, {3.3975e-4f, 1.039e-3f}, {0.8042510f, -1.8488974f}, 2e-6}};
  Adam adam(0.1f);
  std::vector<float> p = {1.0f, -2.0f}, m(2, 0.0f), v(2, 0.0f);
  for (int t = 0; t < 2; ++t) {
    const Step& want = steps[t];
    EXPECT_EQ(adam.t(), t + 1);
    adam.step(p, want.g, m, v);
    adam.next_step();
    for (int k = 0; k < 2; ++k) {
      EXPECT_NEAR(m[k], want.m[k], 1e-7) << "step " << t + 1;
      EXPECT_NEAR(v[k], want.v[k], want.v[k] * 1e-4) << "step " << t + 1;
      EXPECT_NEAR(p[k], want.p[k], want.p_tol) << "step " << t + 1;
    }
  }
}

TEST(Adam, FirstStepMovesEachParameterByAboutLr) {
  // With bias correction the first update is lr * sign(g) regardless of |g|.
  Adam adam(0.01f);
  std::vector<float> p = {0, 0, 0}, m(3, 0), v(3, 0);
  const std::vector<float> g = {1e-3f, -50.0f, 7.0f};
  adam.step(p, g, m, v);
  EXPECT_NEAR(p[0], -0.01f, 1e-6);
  EXPECT_NEAR(p[1], 0.01f, 1e-6);
  EXPECT_NEAR(p[2], -0.01f, 1e-6);
}

TEST(Adam, ZeroGradientLeavesParamsAndResumeWorks) {
  Adam adam(0.5f, 0.8f, 0.99f, 1e-6f);
  std::vector<float> p = {3}, m(1, 0), v(1, 0);
  adam.step(p, std::vector<float>{0.0f}, m, v);
  EXPECT_EQ(p[0], 3.0f);
  adam.set_t(100000);
  EXPECT_EQ(adam.t(), 100000);
  EXPECT_THROW(adam.set_t(0), std::invalid_argument);
  adam.set_learning_rate(0.25f);
  EXPECT_EQ(adam.learning_rate(), 0.25f);
  EXPECT_EQ(adam.beta1(), 0.8f);
  EXPECT_EQ(adam.beta2(), 0.99f);
  EXPECT_EQ(adam.epsilon(), 1e-6f);
}

TEST(Adam, RejectsBadArguments) {
  EXPECT_THROW(Adam(-1.0f), std::invalid_argument);
  EXPECT_THROW(Adam(0.1f, 1.0f), std::invalid_argument);
  EXPECT_THROW(Adam(0.1f, 0.9f, -0.1f), std::invalid_argument);
  EXPECT_THROW(Adam(0.1f, 0.9f, 0.999f, -1.0f), std::invalid_argument);
  EXPECT_THROW(Adam(NAN), std::invalid_argument);
  Adam adam(0.1f);
  std::vector<float> p(3), g(2), m(3), v(3);
  EXPECT_THROW(adam.step(p, g, m, v), std::invalid_argument);
}

TEST(ClipGradNorm, ScalesToMaxNormAndReturnsPreClipNorm) {
  std::vector<float> a = {3, 4}, b = {12};
  const float norm = clip_grad_norm({a, b}, 6.5f);
  EXPECT_FLOAT_EQ(norm, 13.0f);
  EXPECT_FLOAT_EQ(a[0], 1.5f);
  EXPECT_FLOAT_EQ(a[1], 2.0f);
  EXPECT_FLOAT_EQ(b[0], 6.0f);
  EXPECT_NEAR(global_norm({a, b}), 6.5, 1e-6);
}

TEST(ClipGradNorm, LeavesSmallOrNonFiniteGradients) {
  std::vector<float> a = {0.3f, 0.4f};
  EXPECT_FLOAT_EQ(clip_grad_norm({a}, 1.0f), 0.5f);
  EXPECT_EQ(a, (std::vector<float>{0.3f, 0.4f}));
  std::vector<float> bad = {1.0f, NAN};
  EXPECT_TRUE(std::isnan(clip_grad_norm({bad}, 1.0f)));
  EXPECT_EQ(bad[0], 1.0f);
  std::vector<float> inf = {INFINITY, 1.0f};
  EXPECT_TRUE(std::isinf(clip_grad_norm({inf}, 1.0f)));
  EXPECT_EQ(inf[1], 1.0f);
  EXPECT_EQ(clip_grad_norm({}, 1.0f), 0.0f);
  EXPECT_THROW(clip_grad_norm({a}, 0.0f), std::invalid_argument);
  // Large values: the norm is accumulated in double, so squares do not overflow.
  std::vector<float> big = {3e20f, 4e20f};
  EXPECT_FLOAT_EQ(clip_grad_norm({big}, 5.0f), 5e20f);
  EXPECT_FLOAT_EQ(big[0], 3.0f);
}

}  // namespace
}  // namespace blockrnn::train
