// BlockGRUResetAfter and BlockGRUResetAfterGrad (blockrnn's reset-after GRU, SPEC A9): one step
// against the equations and the validation of its own shapes. seq_len_max semantics,
// cancellation and the validation it shares with BlockGRU run on both GRUs in the GRUSequence
// suite of test_block_gru.cc; fast path vs reference, finite differences, empty shapes, float16,
// caller memory and bits across thread counts in the generic op tester (test_ops.cc);
// tests/python/test_block_gru_reset_after.py compares with Keras.
#include <array>

#include "sequence_case.h"

namespace blockrnn {
namespace {

using namespace testing;  // test_util.h

// One step written out in float64 from the equations (no shared code with either path).
TEST(BlockGRUResetAfter, OneStepMatchesTheEquations) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(31);
    const std::int64_t B = 2, I = 3, H = 4;
    const BlockGRUResetAfterCase c(DType::kFloat64, 1, B, I, H, rng);
    const BlockGRUResetAfterResult f = block_gru_reset_after(c.inputs(1));
    auto at = [](const Tensor& t, std::int64_t e) { return t.data_as<double>()[e]; };
    auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t j = 0; j < H; ++j) {
        double gi[3], gh[3];
        for (int g = 0; g < 3; ++g) {
          gi[g] = at(c.b_i, g * H + j);
          gh[g] = at(c.b_h, g * H + j);
          for (std::int64_t k = 0; k < I; ++k)
            gi[g] += at(c.x, b * I + k) * at(c.w_i, k * 3 * H + g * H + j);
          for (std::int64_t k = 0; k < H; ++k) {
            gh[g] += at(c.h_prev, b * H + k) * at(c.w_h, k * 3 * H + g * H + j);
          }
        }
        const double r = sigmoid(gi[0] + gh[0]), u = sigmoid(gi[1] + gh[1]);
        const double n = std::tanh(gi[2] + r * gh[2]);
        const double h = u * at(c.h_prev, b * H + j) + (1 - u) * n;
        const std::int64_t e = b * H + j;
        EXPECT_NEAR(at(f.r, e), r, 1e-14);
        EXPECT_NEAR(at(f.u, e), u, 1e-14);
        EXPECT_NEAR(at(f.n, e), n, 1e-14);
        EXPECT_NEAR(at(f.hn, e), gh[2], 1e-14);
        EXPECT_NEAR(at(f.h, e), h, 1e-14);
      }
    }
  }
}

TEST(BlockGRUResetAfter, Validation) {
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const std::int64_t T = 5, B = 4, I = 3, H = 16;
  const BlockGRUResetAfterCase c(f, T, B, I, H, rng);
  const BlockGRUResetAfterInputs ok = c.inputs(T);
  const Tensor rank2 = random_tensor(f, {4, 3}, rng);
  auto fwd_with = [&](int k, const TensorView& v) {
    BlockGRUResetAfterInputs in = ok;
    TensorView* slots[] = {&in.x, &in.h_prev, &in.w_i, &in.w_h, &in.b_i, &in.b_h};
    *slots[k] = v;
    block_gru_reset_after(in);
  };
  const Tensor hp_bad = random_tensor(f, {5, 16}, rng);
  expect_invalid([&] { fwd_with(1, hp_bad); },
                 "BlockGRUResetAfter: h_prev must have shape [4, 16] (batch_size, cell_size), got "
                 "[5, 16]");
  const Tensor w_i_bad = random_tensor(f, {3, 47}, rng), w_h_bad = random_tensor(f, {15, 48}, rng);
  expect_invalid([&] { fwd_with(2, w_i_bad); },
                 "BlockGRUResetAfter: w_i must have shape [3, 48] (input_size, 3 * cell_size), "
                 "got [3, 47]");
  expect_invalid([&] { fwd_with(3, w_h_bad); },
                 "BlockGRUResetAfter: w_h must have shape [16, 48] (cell_size, 3 * cell_size), "
                 "got [15, 48]");
  // A [I+H, 3H] weight (the concatenated layout of BlockGRU) is refused for w_i.
  const Tensor w_cat = random_tensor(f, {I + H, 3 * H}, rng);
  expect_invalid([&] { fwd_with(2, w_cat); }, "w_i must have shape [3, 48]");
  const Tensor b16 = random_tensor(f, {16}, rng);
  expect_invalid([&] { fwd_with(4, b16); },
                 "BlockGRUResetAfter: b_i must have shape [48] (3 * cell_size), got [16]");
  expect_invalid([&] { fwd_with(5, b16); }, "b_h must have shape [48] (3 * cell_size), got [16]");
  // Ranks first: a wrong rank anywhere wins over a wrong dimension elsewhere.
  expect_invalid(
      [&] {
        BlockGRUResetAfterInputs in = ok;
        in.h_prev = hp_bad;
        in.b_h = rank2;
        block_gru_reset_after(in);
      },
      "b_h must be rank 1");
  // seq_len_max, the dtype of the weights, the grad's per-step inputs and the caller's outputs:
  // the GRUSequence suite of test_block_gru.cc, for both GRUs.
  const BlockGRUResetAfterResult fwd = block_gru_reset_after(ok);
  const BlockGRUResetAfterGradInputs gok = c.grad_inputs(T, fwd, fwd.h);
  expect_invalid(
      [&] {
        BlockGRUResetAfterGradInputs in = gok;
        in.w_i = w_i_bad;
        block_gru_reset_after_grad(in);
      },
      "BlockGRUResetAfterGrad: w_i must have shape [3, 48]");
}

}  // namespace
}  // namespace blockrnn
