// BlockGRUResetAfter and BlockGRUResetAfterGrad (blockrnn's reset-after GRU, SPEC A9): fast path
// vs reference, seq_len_max semantics, finite differences in float64 for every gradient, empty
// shapes, float16, caller memory, validation, and bits across thread counts on a shape whose
// time loop runs on a team. (tests/cpp/test_reliability.cc covers the new ops generically too;
// tests/python/test_block_gru_reset_after.py compares with Keras.)
#include <array>
#include <cstring>

#include "test_util.h"

namespace blockrnn {
namespace {

using namespace testing;  // test_util.h

struct Case {
  std::int64_t T, B, I, H;
  Tensor x, h_prev, w_i, w_h, b_i, b_h;
  Case(DType dt, std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_,
       std::mt19937_64& rng)
      : T(T_),
        B(B_),
        I(I_),
        H(H_),
        x(random_tensor(dt, {T, B, I}, rng)),
        h_prev(random_tensor(dt, {B, H}, rng)),
        // Weights ~U(±1/√(I+H)) (SPEC A7's unit scale), biases ~U(±1).
        w_i(random_tensor(dt, {I, 3 * H}, rng, -scale(), scale())),
        w_h(random_tensor(dt, {H, 3 * H}, rng, -scale(), scale())),
        b_i(random_tensor(dt, {3 * H}, rng)),
        b_h(random_tensor(dt, {3 * H}, rng)) {}
  double scale() const {
    return 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(I + H, 1)));
  }
  BlockGRUResetAfterInputs inputs(std::int64_t S) const {
    return {S, x, h_prev, w_i, w_h, b_i, b_h};
  }
  BlockGRUResetAfterGradInputs grad_inputs(std::int64_t S, const BlockGRUResetAfterResult& f,
                                           const Tensor& h_grad) const {
    return {S, x, h_prev, w_i, w_h, b_i, b_h, f.r, f.u, f.n, f.hn, f.h, h_grad};
  }
};

BlockGRUResetAfterResult forward(const Case& c, std::int64_t S, bool reference) {
  testing::ReferenceMode mode(reference);
  return block_gru_reset_after(c.inputs(S));
}

BlockGRUResetAfterGradResult backward(const Case& c, std::int64_t S,
                                      const BlockGRUResetAfterResult& f, const Tensor& h_grad,
                                      bool reference) {
  testing::ReferenceMode mode(reference);
  return block_gru_reset_after_grad(c.grad_inputs(S, f, h_grad));
}

bool all_zero(const Tensor& t, std::int64_t from = 0) {
  for (std::int64_t e = from; e < t.num_elements(); ++e) {
    if (testing::get(t, e) != 0.0) return false;
  }
  return true;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.num_bytes()) == 0;
}

// One step written out in float64 from the equations (no shared code with either path).
TEST(BlockGRUResetAfter, OneStepMatchesTheEquations) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(31);
    const std::int64_t B = 2, I = 3, H = 4;
    const Case c(DType::kFloat64, 1, B, I, H, rng);
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

TEST(BlockGRUResetAfter, StepsPastSeqLenMaxAreZeroAndIgnored) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(3);
    const std::int64_t T = 6, B = 2, I = 3, H = 5;
    const Case c(DType::kFloat32, T, B, I, H, rng);
    for (std::int64_t S : {0, 1, 4}) {
      const BlockGRUResetAfterResult f = block_gru_reset_after(c.inputs(S));
      for (const Tensor* out : {&f.r, &f.u, &f.n, &f.hn, &f.h}) {
        EXPECT_TRUE(all_zero(*out, S * B * H));
      }
      // The steps before S do not depend on T: the full sequence gives the same values.
      const BlockGRUResetAfterResult full = block_gru_reset_after(c.inputs(T));
      for (std::int64_t e = 0; e < S * B * H; ++e) {
        EXPECT_EQ(f.h.data_as<float>()[e], full.h.data_as<float>()[e]);
      }
      Tensor h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
      const BlockGRUResetAfterGradResult g1 =
          block_gru_reset_after_grad(c.grad_inputs(S, f, h_grad));
      for (std::int64_t e = S * B * H; e < T * B * H; ++e) h_grad.data_as<float>()[e] = 1e3f;
      const BlockGRUResetAfterGradResult g2 =
          block_gru_reset_after_grad(c.grad_inputs(S, f, h_grad));
      EXPECT_TRUE(bitwise_equal(g1.w_h_grad, g2.w_h_grad));
      EXPECT_TRUE(bitwise_equal(g1.b_i_grad, g2.b_i_grad));
      EXPECT_TRUE(bitwise_equal(g1.h_prev_grad, g2.h_prev_grad));
      EXPECT_TRUE(bitwise_equal(g1.x_grad, g2.x_grad));
      EXPECT_TRUE(all_zero(g1.x_grad, S * B * I));
      if (S == 0) {
        for (const Tensor* t :
             {&g1.h_prev_grad, &g1.w_i_grad, &g1.w_h_grad, &g1.b_i_grad, &g1.b_h_grad}) {
          EXPECT_TRUE(all_zero(*t));
        }
      }
    }
  }
}

// Cancellation at step boundaries (blockrnn/context.h): with a check that always says stop, a
// call longer than the poll interval (20 ms) throws kCancelled naming the op, on both paths and
// with a team of threads in the time loop.
TEST(BlockGRUResetAfter, CancelsAtStepBoundaries) {
  const int saved = get_num_threads();
  std::mt19937_64 rng(9);
  // ~12.6 M multiply-adds of recurrent product per step: the 500 steps take well over 20 ms.
  const std::int64_t T = 500, B = 4, I = 8, H = 1024;
  const Case c(DType::kFloat32, T, B, I, H, rng);
  const BlockGRUResetAfterResult f = block_gru_reset_after(c.inputs(T));
  const Tensor h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    for (int threads : {1, 3}) {
      set_num_threads(threads);
      set_cancel_check([](void*) { return true; }, nullptr);
      testing::expect_cancelled([&] { block_gru_reset_after(c.inputs(T)); }, "BlockGRUResetAfter");
      testing::expect_cancelled([&] { block_gru_reset_after_grad(c.grad_inputs(T, f, h_grad)); },
                                "BlockGRUResetAfterGrad");
      set_cancel_check(nullptr, nullptr);
    }
  }
  set_num_threads(saved);
}

TEST(BlockGRUResetAfter, Validation) {
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const std::int64_t T = 5, B = 4, I = 3, H = 16;
  const Case c(f, T, B, I, H, rng);
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
  for (std::int64_t S : {std::int64_t{-1}, T + 1}) {
    expect_invalid([&] { block_gru_reset_after(c.inputs(S)); },
                   "BlockGRUResetAfter: seq_len_max must be between 0 and 5 (time_len of x), got " +
                       std::to_string(S));
  }
  std::vector<TensorView> ins = {TensorView(), c.x, c.h_prev, c.w_i, c.w_h, c.b_i, c.b_h};
  const Tensor s_vec(DType::kInt64, {1}), s_f32(DType::kFloat32, {});
  ins[0] = s_vec;
  expect_invalid([&] { run_op("BlockGRUResetAfter", ins); },
                 "BlockGRUResetAfter: seq_len_max must be a scalar (rank 0), got shape [1]");
  ins[0] = s_f32;
  expect_invalid([&] { run_op("BlockGRUResetAfter", ins); },
                 "seq_len_max must be int64, got float32");
  const Case d(DType::kFloat64, T, B, I, H, rng);
  expect_invalid(
      [&] {
        BlockGRUResetAfterInputs in = ok;
        in.w_h = d.w_h;
        block_gru_reset_after(in);
      },
      "w_h must have the dtype of x (float32), got float64");
  // Grad: r, u, n, hn, h and h_grad must each be [T, B, H].
  const BlockGRUResetAfterResult fwd = block_gru_reset_after(ok);
  const Tensor h_grad = random_tensor(f, {T, B, H}, rng);
  const BlockGRUResetAfterGradInputs gok = c.grad_inputs(T, fwd, h_grad);
  EXPECT_NO_THROW(block_gru_reset_after_grad(gok));
  const Tensor wrong_t = random_tensor(f, {T - 1, B, H}, rng),
               wrong_h = random_tensor(f, {T, B, H - 1}, rng),
               rank2_bh = random_tensor(f, {B, H}, rng);
  const char* names[] = {"r", "u", "n", "hn", "h", "h_grad"};
  for (int k = 0; k < 6; ++k) {
    for (const Tensor* bad : {&wrong_t, &wrong_h}) {
      BlockGRUResetAfterGradInputs in = gok;
      TensorView* slots[] = {&in.r, &in.u, &in.n, &in.hn, &in.h, &in.h_grad};
      *slots[k] = *bad;
      expect_invalid([&] { block_gru_reset_after_grad(in); },
                     std::string("BlockGRUResetAfterGrad: ") + names[k] +
                         " must have shape [5, 4, 16] (time_len, batch_size, cell_size), got " +
                         bad->shape().to_string());
      *slots[k] = rank2_bh;
      expect_invalid([&] { block_gru_reset_after_grad(in); },
                     std::string("BlockGRUResetAfterGrad: ") + names[k] + " must be rank 3");
    }
  }
  expect_invalid(
      [&] {
        BlockGRUResetAfterGradInputs in = gok;
        in.seq_len_max = T + 1;
        block_gru_reset_after_grad(in);
      },
      "BlockGRUResetAfterGrad: seq_len_max must be between 0 and 5");
  expect_invalid(
      [&] {
        BlockGRUResetAfterGradInputs in = gok;
        in.w_i = w_i_bad;
        block_gru_reset_after_grad(in);
      },
      "BlockGRUResetAfterGrad: w_i must have shape [3, 48]");
  // Caller outputs are checked; outputs must not alias inputs.
  Tensor r(f, {T, B, H}), u(f, {T, B, H}), n(f, {T, B, H}), hn(f, {T, B, H}),
      small(f, {T, B, H - 1});
  expect_invalid(
      [&] {
        block_gru_reset_after(ok, {r.mutable_view(), u.mutable_view(), n.mutable_view(),
                                   hn.mutable_view(), small.mutable_view()});
      },
      "output h must have shape [5, 4, 16], got [5, 4, 15]");
  Tensor x_copy(f, {T, B, H});
  expect_invalid(
      [&] {
        BlockGRUResetAfterInputs in = ok;
        in.x = TensorView(x_copy.data_as<float>(), {T, B, I});
        block_gru_reset_after(in, {r.mutable_view(), u.mutable_view(), n.mutable_view(),
                                   hn.mutable_view(), x_copy.mutable_view()});
      },
      "overlaps input x");
}

}  // namespace
}  // namespace blockrnn
