// BlockGRUResetAfter and BlockGRUResetAfterGrad (blockrnn's reset-after GRU, docs/ops.md): one step
// against the equations and the shapes its validation refuses. seq_len_max semantics,
// cancellation and validation run on both GRUs in the GRUSequence suite of test_block_gru.cc; fast
// path vs reference, finite differences, empty shapes, float16, caller memory and bits across
// thread counts in the generic op tester (test_ops.cc); tests/python/test_block_gru_reset_after.py
// compares with Keras.
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

}  // namespace

// BlockGRUResetAfter's shapes (the rest of its validation: GRUSequence.Validation in
// test_block_gru.cc).
std::vector<testing::BadInput> testing::BlockGRUResetAfterVariant::bad_inputs() {
  return {
      {1, {5, 16}, "h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]"},
      {2, {3, 47}, "w_i must have shape [3, 48] (input_size, 3 * cell_size), got [3, 47]"},
      {3, {15, 48}, "w_h must have shape [16, 48] (cell_size, 3 * cell_size), got [15, 48]"},
      // A [I+H, 3H] weight (the concatenated layout of BlockGRU) is refused for w_i.
      {2, {19, 48}, "w_i must have shape [3, 48]"},
      {4, {16}, "b_i must have shape [48] (3 * cell_size), got [16]"},
      {5, {16}, "b_h must have shape [48] (3 * cell_size), got [16]"},
  };
}

}  // namespace blockrnn
