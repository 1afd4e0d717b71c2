// Tests of CharModel: the whole model's gradients (embedding, every recurrent layer's weights
// and biases, the softmax layer) against central finite differences in float64 on tiny LSTM
// and GRU models with a non-zero initial state, the state carry, and input validation.
#include "train/char_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace blockrnn::train {
namespace {

struct FdCase {
  CellKind cell;
  int64_t layers;
};

class CharModelGradient : public ::testing::TestWithParam<FdCase> {};

// Loss of `model` on (inputs, targets) from a copy of `state` (the state is an input here).
double loss_from(CharModel<double>& model, const std::vector<int32_t>& inputs,
                 const std::vector<int32_t>& targets, int64_t T, int64_t B,
                 const CharModel<double>::State& state) {
  CharModel<double>::State s = state;
  return model.loss(inputs, targets, T, B, s);
}

TEST_P(CharModelGradient, MatchesFiniteDifferencesFloat64) {
  const uint64_t seed = 20240611;
  SCOPED_TRACE("seed " + std::to_string(seed));
  ModelConfig c;
  c.cell = GetParam().cell;
  c.vocab_size = 5;
  c.embed = 3;
  c.hidden = 4;
  c.layers = GetParam().layers;
  CharModel<double> model(c);
  model.init(seed);
  std::mt19937_64 rng(seed);
  // Random biases too (init() zeroes them), so no gradient is trivially symmetric.
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (size_t k = 0; k < model.num_tensors(); ++k) {
    if (model.specs()[k].shape.size() == 1) {
      for (double& v : model.param(k)) v = u(rng);
    }
  }
  const int64_t T = 3, B = 2;
  std::vector<int32_t> inputs(T * B), targets(T * B);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(c.vocab_size - 1));
  for (auto& v : inputs) v = id(rng);
  for (auto& v : targets) v = id(rng);
  CharModel<double>::State state0 = model.zero_state(B);
  for (auto& h : state0.h) {
    for (double& v : h) v = u(rng);
  }
  for (auto& cs : state0.cs) {
    for (double& v : cs) v = u(rng);
  }

  CharModel<double>::State state = state0;
  const double loss = model.forward_backward(inputs, targets, T, B, state);
  EXPECT_NEAR(loss, loss_from(model, inputs, targets, T, B, state0), 1e-15);

  const double eps = 1e-6;
  for (size_t k = 0; k < model.num_tensors(); ++k) {
    const std::vector<double> analytic(model.grad(k).begin(), model.grad(k).end());
    double max_err = 0, max_grad = 0;
    for (size_t e = 0; e < analytic.size(); ++e) {
      double& p = model.param(k)[e];
      const double saved = p;
      p = saved + eps;
      const double lp = loss_from(model, inputs, targets, T, B, state0);
      p = saved - eps;
      const double lm = loss_from(model, inputs, targets, T, B, state0);
      p = saved;
      const double numeric = (lp - lm) / (2 * eps);
      max_err = std::max(max_err, std::abs(numeric - analytic[e]));
      max_grad = std::max(max_grad, std::abs(numeric));
    }
    // Central differences: truncation O(eps²) ≈ 1e-12 and cancellation ≈ 1e-16 / eps = 1e-10
    // relative to O(1) losses, so 1e-8 leaves two orders of margin and still catches any
    // wrong term (those are O(1e-2) or larger here).
    EXPECT_LE(max_err, 1e-8) << model.specs()[k].name << " (max |grad| " << max_grad << ")";
    EXPECT_GT(max_grad, 1e-6) << model.specs()[k].name << ": gradient unexpectedly zero";
  }
}

INSTANTIATE_TEST_SUITE_P(Cells, CharModelGradient,
                         ::testing::Values(FdCase{CellKind::kLstm, 1}, FdCase{CellKind::kLstm, 2},
                                           FdCase{CellKind::kGru, 1}, FdCase{CellKind::kGru, 2}),
                         [](const auto& info) {
                           return std::string(cell_name(info.param.cell)) + "_" +
                                  std::to_string(info.param.layers) + "layers";
                         });

TEST(CharModel, StateCarryEqualsOneLongSequence) {
  // Two batches of T steps with the state carried give the logits of one 2T-step run.
  for (CellKind cell : {CellKind::kLstm, CellKind::kGru}) {
    ModelConfig c{cell, 7, 4, 5, 2};
    CharModel<double> model(c);
    model.init(3);
    const std::vector<int32_t> ids = {1, 4, 6, 0, 2, 2, 5, 3};  // T = 8, B = 1
    auto s1 = model.zero_state(1);
    const std::vector<double> whole = model.last_logits(ids, 8, 1, s1);
    auto s2 = model.zero_state(1);
    model.last_logits(std::span(ids).first(4), 4, 1, s2);
    const std::vector<double> split = model.last_logits(std::span(ids).last(4), 4, 1, s2);
    ASSERT_EQ(whole.size(), split.size());
    for (size_t j = 0; j < whole.size(); ++j) EXPECT_NEAR(whole[j], split[j], 1e-12);
    for (size_t l = 0; l < s1.h.size(); ++l) {
      for (size_t j = 0; j < s1.h[l].size(); ++j) EXPECT_NEAR(s1.h[l][j], s2.h[l][j], 1e-12);
    }
  }
}

TEST(CharModel, PlannedInferenceIsBitwiseTheOneShotPath) {
  // plan_inference's layer objects (blockrnn/layer.h) give last_logits and the state bit for
  // bit as the one-shot ops do, over a prime and then one character at a time.
  for (CellKind cell : {CellKind::kLstm, CellKind::kGru}) {
    ModelConfig c{cell, 7, 4, 5, 2};
    CharModel<float> model(c);
    model.init(9);
    const std::vector<int32_t> prime = {1, 4, 6, 0};
    auto s1 = model.zero_state(1);
    std::vector<std::vector<float>> want;
    want.push_back(model.last_logits(prime, 4, 1, s1));
    for (int32_t id : {2, 5, 3}) want.push_back(model.last_logits(std::span(&id, 1), 1, 1, s1));
    model.plan_inference(4, 1);
    auto s2 = model.zero_state(1);
    std::vector<std::vector<float>> got;
    got.push_back(model.last_logits(prime, 4, 1, s2));
    for (int32_t id : {2, 5, 3}) got.push_back(model.last_logits(std::span(&id, 1), 1, 1, s2));
    EXPECT_EQ(want, got) << cell_name(cell);
    EXPECT_EQ(s1.h, s2.h);
    EXPECT_EQ(s1.cs, s2.cs);
  }
}

TEST(CharModel, FloatAndDoubleAgree) {
  ModelConfig c{CellKind::kLstm, 11, 6, 9, 2};
  CharModel<double> md(c);
  CharModel<float> mf(c);
  md.init(5);
  mf.init(5);
  const std::vector<int32_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1},
                             tg = {2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2};
  auto sd = md.zero_state(3);
  auto sf = mf.zero_state(3);
  const double ld = md.forward_backward(in, tg, 4, 3, sd);
  const double lf = mf.forward_backward(in, tg, 4, 3, sf);
  EXPECT_NEAR(ld, lf, 1e-5);
  for (size_t k = 0; k < md.num_tensors(); ++k) {
    for (size_t e = 0; e < md.grad(k).size(); ++e) {
      EXPECT_NEAR(md.grad(k)[e], mf.grad(k)[e], 1e-5) << md.specs()[k].name << " " << e;
    }
  }
}

TEST(CharModel, InitIsDeterministicAndShapedAsDocumented) {
  ModelConfig c{CellKind::kGru, 62, 16, 32, 2};
  CharModel<float> a(c), b(c);
  a.init(9);
  b.init(9);
  for (size_t k = 0; k < a.num_tensors(); ++k) {
    EXPECT_TRUE(std::equal(a.param(k).begin(), a.param(k).end(), b.param(k).begin()));
  }
  const std::vector<ParamSpec> specs = param_specs(c);
  ASSERT_EQ(specs.size(), 1u + 2 * 4 + 2);
  EXPECT_EQ(specs[0].name, "embedding");
  EXPECT_EQ(specs[0].shape, (std::vector<int64_t>{62, 16}));
  EXPECT_EQ(specs[1].name, "layers.0.w_ru");
  EXPECT_EQ(specs[1].shape, (std::vector<int64_t>{16 + 32, 64}));
  EXPECT_EQ(specs[5].name, "layers.1.w_ru");
  EXPECT_EQ(specs[5].shape, (std::vector<int64_t>{32 + 32, 64}));
  EXPECT_EQ(specs[9].name, "softmax.w");
  EXPECT_EQ(specs[10].name, "softmax.b");
  for (float v : a.param("layers.0.b_ru")) EXPECT_EQ(v, 1.0f);
  for (float v : a.param("layers.0.b_c")) EXPECT_EQ(v, 0.0f);
  const auto lstm = param_specs({CellKind::kLstm, 62, 16, 32, 1});
  EXPECT_EQ(lstm[1].name, "layers.0.w");
  EXPECT_EQ(lstm[1].shape, (std::vector<int64_t>{48, 128}));
  EXPECT_EQ(lstm[2].name, "layers.0.b");
}

TEST(CharModel, RejectsBadConfigAndInputs) {
  EXPECT_THROW(CharModel<float>(ModelConfig{CellKind::kLstm, 0, 4, 4, 1}), std::invalid_argument);
  EXPECT_THROW(CharModel<float>(ModelConfig{CellKind::kLstm, 257, 4, 4, 1}), std::invalid_argument);
  EXPECT_THROW(CharModel<float>(ModelConfig{CellKind::kLstm, 5, 4, 0, 1}), std::invalid_argument);
  EXPECT_THROW(CharModel<float>(ModelConfig{CellKind::kGru, 5, 4, 4, 0}), std::invalid_argument);
  CharModel<float> m(ModelConfig{CellKind::kLstm, 5, 4, 4, 1});
  auto s = m.zero_state(2);
  const std::vector<int32_t> ok = {0, 1, 2, 3}, bad = {0, 1, 5, 3}, neg = {0, -1, 2, 3};
  EXPECT_THROW(m.forward_backward(bad, ok, 2, 2, s), std::invalid_argument);
  EXPECT_THROW(m.forward_backward(neg, ok, 2, 2, s), std::invalid_argument);
  EXPECT_THROW(m.forward_backward(ok, bad, 2, 2, s), std::invalid_argument);
  EXPECT_THROW(m.forward_backward(ok, ok, 3, 2, s), std::invalid_argument);  // size mismatch
  auto s3 = m.zero_state(3);
  EXPECT_THROW(m.forward_backward(ok, ok, 2, 2, s3), std::invalid_argument);  // state batch
  EXPECT_NO_THROW(m.forward_backward(ok, ok, 2, 2, s));
  EXPECT_EQ(parse_cell("lstm"), CellKind::kLstm);
  EXPECT_EQ(parse_cell("gru"), CellKind::kGru);
  EXPECT_FALSE(parse_cell("rnn").has_value());
}

}  // namespace
}  // namespace blockrnn::train
