// BlockGRU and BlockGRUGrad (SPEC A6): fast path vs reference, equality with stepping the
// GRU cell ops, seq_len_max semantics, finite differences in float64, empty shapes, float16,
// caller memory and validation.
#include <array>

#include "test_util.h"

namespace blockrnn {
namespace {

using namespace testing;  // test_util.h

struct BlockGRUCase {
  std::int64_t T, B, I, H;
  Tensor x, h_prev, w_ru, w_c, b_ru, b_c;
  BlockGRUCase(DType dt, std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_,
               std::mt19937_64& rng)
      : T(T_),
        B(B_),
        I(I_),
        H(H_),
        x(random_tensor(dt, {T, B, I}, rng)),
        h_prev(random_tensor(dt, {B, H}, rng)),
        // Weights ~U(±1/√(I+H)) (SPEC A7's unit scale), biases ~U(±1).
        w_ru(random_tensor(dt, {I + H, 2 * H}, rng, -scale(), scale())),
        w_c(random_tensor(dt, {I + H, H}, rng, -scale(), scale())),
        b_ru(random_tensor(dt, {2 * H}, rng)),
        b_c(random_tensor(dt, {H}, rng)) {}
  double scale() const {
    return 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(I + H, 1)));
  }
  BlockGRUInputs inputs(std::int64_t S) const { return {S, x, h_prev, w_ru, w_c, b_ru, b_c}; }
  BlockGRUGradInputs grad_inputs(std::int64_t S, const BlockGRUResult& f,
                                 const Tensor& h_grad) const {
    return {S, x, h_prev, w_ru, w_c, b_ru, b_c, f.r, f.u, f.c, f.h, h_grad};
  }
};

BlockGRUResult forward(const BlockGRUCase& c, std::int64_t S, bool reference) {
  testing::ReferenceMode mode(reference);
  return block_gru(c.inputs(S));
}

BlockGRUGradResult backward(const BlockGRUCase& c, std::int64_t S, const BlockGRUResult& f,
                            const Tensor& h_grad, bool reference) {
  testing::ReferenceMode mode(reference);
  return block_gru_grad(c.grad_inputs(S, f, h_grad));
}

// A view of step t of a [T, B, H] (or [T, B, I]) tensor.
template <typename T>
TensorView step(const Tensor& t, std::int64_t k) {
  const std::int64_t n = t.shape()[1] * t.shape()[2];
  return TensorView(t.data_as<T>() + k * n, Shape{t.shape()[1], t.shape()[2]});
}

bool all_zero(const Tensor& t, std::int64_t from = 0) {
  for (std::int64_t e = from; e < t.num_elements(); ++e) {
    if (testing::get(t, e) != 0.0) return false;
  }
  return true;
}

// SPEC A6: BlockGRU is GRUBlockCell stepped over time; BlockGRUGrad is the full cell backward
// stepped in reverse with the carry, its parameter gradients summed over steps.
TEST(BlockGRU, EqualsSteppingTheCell) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(11);
    const std::int64_t T = 5, B = 3, I = 4, H = 6, S = 4;
    const BlockGRUCase c(DType::kFloat64, T, B, I, H, rng);
    const BlockGRUResult f = block_gru(c.inputs(S));
    const Tensor h_grad = random_tensor(DType::kFloat64, {T, B, H}, rng);
    const BlockGRUGradResult g = block_gru_grad(c.grad_inputs(S, f, h_grad));
    std::vector<GRUBlockCellResult> cells;
    for (std::int64_t t = 0; t < S; ++t) {
      const TensorView hp = t == 0 ? TensorView(c.h_prev) : TensorView(cells.back().h);
      cells.push_back(gru_block_cell({step<double>(c.x, t), hp, c.w_ru, c.w_c, c.b_ru, c.b_c}));
      const double* want = cells.back().h.data_as<double>();
      for (std::int64_t e = 0; e < B * H; ++e) {
        EXPECT_NEAR(f.h.data_as<double>()[t * B * H + e], want[e], 1e-13);
        EXPECT_NEAR(f.r.data_as<double>()[t * B * H + e], cells.back().r.data_as<double>()[e],
                    1e-13);
      }
    }
    Tensor carry(DType::kFloat64, {B, H});
    Tensor w_ru(DType::kFloat64, {I + H, 2 * H}), b_c(DType::kFloat64, {H});
    for (std::int64_t t = S - 1; t >= 0; --t) {
      Tensor d_h(DType::kFloat64, {B, H});
      for (std::int64_t e = 0; e < B * H; ++e) {
        d_h.data_as<double>()[e] =
            carry.data_as<double>()[e] + h_grad.data_as<double>()[t * B * H + e];
      }
      const TensorView hp = t == 0 ? TensorView(c.h_prev) : TensorView(cells[t - 1].h);
      GRUBlockCellBackwardResult cb =
          gru_block_cell_backward({step<double>(c.x, t), hp, c.w_ru, c.w_c, c.b_ru, c.b_c,
                                   cells[t].r, cells[t].u, cells[t].c, d_h});
      for (std::int64_t e = 0; e < B * I; ++e) {
        EXPECT_NEAR(g.x_grad.data_as<double>()[t * B * I + e], cb.x.data_as<double>()[e], 1e-12);
      }
      for (std::int64_t e = 0; e < w_ru.num_elements(); ++e) {
        w_ru.data_as<double>()[e] += cb.w_ru.data_as<double>()[e];
      }
      for (std::int64_t e = 0; e < H; ++e) b_c.data_as<double>()[e] += cb.b_c.data_as<double>()[e];
      carry = std::move(cb.h_prev);
    }
    EXPECT_TRUE(all_close(g.h_prev_grad, carry, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(g.w_ru_grad, w_ru, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(g.b_c_grad, b_c, 1e-12, 1e-12));
    EXPECT_TRUE(all_zero(g.x_grad, S * B * I));  // x_grad past seq_len_max
  }
}

TEST(BlockGRU, StepsPastSeqLenMaxAreZeroAndIgnored) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(3);
    const std::int64_t T = 6, B = 2, I = 3, H = 5;
    const BlockGRUCase c(DType::kFloat32, T, B, I, H, rng);
    for (std::int64_t S : {0, 1, 4}) {
      const BlockGRUResult f = block_gru(c.inputs(S));
      for (const Tensor* out : {&f.r, &f.u, &f.c, &f.h}) EXPECT_TRUE(all_zero(*out, S * B * H));
      // The steps before S do not depend on T: a truncated sequence gives the same values.
      const BlockGRUResult full = block_gru(c.inputs(T));
      for (std::int64_t e = 0; e < S * B * H; ++e) {
        EXPECT_EQ(f.h.data_as<float>()[e], full.h.data_as<float>()[e]);
      }
      Tensor h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
      const BlockGRUGradResult g1 = block_gru_grad(c.grad_inputs(S, f, h_grad));
      for (std::int64_t e = S * B * H; e < T * B * H; ++e) h_grad.data_as<float>()[e] = 1e3f;
      const BlockGRUGradResult g2 = block_gru_grad(c.grad_inputs(S, f, h_grad));
      EXPECT_TRUE(all_close(g1.w_ru_grad, g2.w_ru_grad, 0, 0));
      EXPECT_TRUE(all_close(g1.h_prev_grad, g2.h_prev_grad, 0, 0));
      EXPECT_TRUE(all_close(g1.x_grad, g2.x_grad, 0, 0));
      EXPECT_TRUE(all_zero(g1.x_grad, S * B * I));
      if (S == 0) {
        for (const Tensor* t :
             {&g1.h_prev_grad, &g1.w_ru_grad, &g1.w_c_grad, &g1.b_ru_grad, &g1.b_c_grad}) {
          EXPECT_TRUE(all_zero(*t));
        }
      }
    }
  }
}

// The typed API's default (issue 12): seq_len_max unset runs all T steps (it used to default
// to 0, silently returning zeros). The name-based run_op keeps TensorFlow's required input.
TEST(BlockGRU, TypedDefaultSeqLenMaxIsT) {
  std::mt19937_64 rng(12);
  const std::int64_t T = 4, B = 2, I = 3, H = 5;
  const BlockGRUCase c(DType::kFloat32, T, B, I, H, rng);
  const Tensor h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
  BlockGRUInputs in = c.inputs(T);
  in.seq_len_max.reset();
  const BlockGRUResult unset = block_gru(in), all = block_gru(c.inputs(T));
  const Tensor* got[] = {&unset.r, &unset.u, &unset.c, &unset.h};
  const Tensor* want[] = {&all.r, &all.u, &all.c, &all.h};
  for (int o = 0; o < 4; ++o) {
    EXPECT_TRUE(all_close(*got[o], *want[o], 0, 0)) << o;
    EXPECT_FALSE(all_zero(*got[o], (T - 1) * B * H)) << "the last step ran, output " << o;
  }
  // Into caller memory too.
  Tensor r(DType::kFloat32, {T, B, H}), u(DType::kFloat32, {T, B, H}),
      cc(DType::kFloat32, {T, B, H}), h(DType::kFloat32, {T, B, H});
  block_gru(in, {r.mutable_view(), u.mutable_view(), cc.mutable_view(), h.mutable_view()});
  EXPECT_TRUE(all_close(h, all.h, 0, 0));
  BlockGRUGradInputs gin = c.grad_inputs(T, all, h_grad);
  gin.seq_len_max = std::nullopt;
  const BlockGRUGradResult g_unset = block_gru_grad(gin),
                           g_all = block_gru_grad(c.grad_inputs(T, all, h_grad));
  EXPECT_TRUE(all_close(g_unset.x_grad, g_all.x_grad, 0, 0));
  EXPECT_TRUE(all_close(g_unset.w_ru_grad, g_all.w_ru_grad, 0, 0));
  EXPECT_TRUE(all_close(g_unset.b_c_grad, g_all.b_c_grad, 0, 0));
  EXPECT_FALSE(all_zero(g_unset.x_grad, (T - 1) * B * I));
  // An explicit 0 still runs no step, as in TensorFlow.
  in.seq_len_max = 0;
  EXPECT_TRUE(all_zero(block_gru(in).h));
  // The name-based interface has no default.
  const std::vector<TensorView> ins = {TensorView(), c.x, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c};
  expect_invalid([&] { run_op("BlockGRU", ins); },
                 "BlockGRU: seq_len_max has 1 elements but no data (null pointer)");
}

TEST(BlockGRU, Validation) {
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const std::int64_t T = 5, B = 4, I = 3, H = 16;
  const BlockGRUCase c(f, T, B, I, H, rng);
  const BlockGRUInputs ok = c.inputs(T);
  const Tensor rank2 = random_tensor(f, {4, 3}, rng);
  auto fwd_with = [&](int k, const TensorView& v) {
    BlockGRUInputs in = ok;
    TensorView* slots[] = {&in.x, &in.h_prev, &in.w_ru, &in.w_c, &in.b_ru, &in.b_c};
    *slots[k] = v;
    block_gru(in);
  };
  const Tensor hp_bad = random_tensor(f, {5, 16}, rng);
  expect_invalid([&] { fwd_with(1, hp_bad); },
                 "BlockGRU: h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]");
  const Tensor w_ru_bad = random_tensor(f, {19, 31}, rng),
               w_c_bad = random_tensor(f, {18, 16}, rng);
  expect_invalid([&] { fwd_with(2, w_ru_bad); }, "w_ru must have shape [19, 32]");
  expect_invalid([&] { fwd_with(3, w_c_bad); }, "w_c must have shape [19, 16]");
  // An x of the wrong width (issue 12): both weights agree on another input_size, so the message
  // names x first, then both weights. A weight whose rows alone disagree is named alone.
  const Tensor x_narrow = random_tensor(f, {T, B, 2}, rng),
               w_ru_rows = random_tensor(f, {18, 32}, rng);
  const std::string x_msg =
      "x and the weights disagree on input_size: x has input_size 2 (its last dimension), but "
      "w_ru and w_c have 19 rows, which are input_size + cell_size for input_size 3 (cell_size "
      "16): either x must be [5, 4, 3], or w_ru must have shape [18, 32] (input_size + cell_size, "
      "2 * cell_size), got [19, 32] and w_c [18, 16]";
  expect_invalid([&] { fwd_with(0, x_narrow); }, "BlockGRU: " + x_msg);
  {
    const BlockGRUResult fwd = block_gru(ok);
    BlockGRUGradInputs gin = c.grad_inputs(T, fwd, fwd.h);
    gin.x = x_narrow;
    expect_invalid([&] { block_gru_grad(gin); }, "BlockGRUGrad: " + x_msg);
  }
  expect_invalid([&] { fwd_with(2, w_ru_rows); },
                 "BlockGRU: w_ru must have shape [19, 32] (input_size + cell_size, 2 * cell_size), "
                 "got [18, 32]");
  expect_invalid([&] { fwd_with(4, c.b_c); },
                 "b_ru must have shape [32] (2 * cell_size), got [16]");
  expect_invalid([&] { fwd_with(5, c.b_ru); }, "b_c must have shape [16] (cell_size), got [32]");
  // Ranks first: a wrong rank anywhere wins over a wrong dimension elsewhere.
  expect_invalid(
      [&] {
        BlockGRUInputs in = ok;
        in.h_prev = hp_bad;
        in.b_c = rank2;
        block_gru(in);
      },
      "b_c must be rank 1");
  // seq_len_max: range, scalar, dtype (the generic interface takes any tensor).
  for (std::int64_t S : {std::int64_t{-1}, T + 1}) {
    expect_invalid(
        [&] { block_gru(c.inputs(S)); },
        "BlockGRU: seq_len_max must be between 0 and 5 (time_len of x), got " + std::to_string(S));
  }
  std::vector<TensorView> ins = {TensorView(), c.x, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c};
  const Tensor s_vec(DType::kInt64, {1}), s_f32(DType::kFloat32, {});
  ins[0] = s_vec;
  expect_invalid([&] { run_op("BlockGRU", ins); },
                 "BlockGRU: seq_len_max must be a scalar (rank 0), got shape [1]");
  ins[0] = s_f32;
  expect_invalid([&] { run_op("BlockGRU", ins); }, "seq_len_max must be int64, got float32");
  const BlockGRUCase d(DType::kFloat64, T, B, I, H, rng);
  expect_invalid(
      [&] {
        BlockGRUInputs in = ok;
        in.w_c = d.w_c;
        block_gru(in);
      },
      "w_c must have the dtype of x (float32), got float64");
  // Grad: r, u, c, h and h_grad must each be [T, B, H].
  const BlockGRUResult fwd = block_gru(ok);
  const Tensor h_grad = random_tensor(f, {T, B, H}, rng);
  const BlockGRUGradInputs gok = c.grad_inputs(T, fwd, h_grad);
  EXPECT_NO_THROW(block_gru_grad(gok));
  const Tensor wrong_t = random_tensor(f, {T - 1, B, H}, rng),
               wrong_h = random_tensor(f, {T, B, H - 1}, rng),
               rank2_bh = random_tensor(f, {B, H}, rng);
  const char* names[] = {"r", "u", "c", "h", "h_grad"};
  for (int k = 0; k < 5; ++k) {
    for (const Tensor* bad : {&wrong_t, &wrong_h}) {
      BlockGRUGradInputs in = gok;
      TensorView* slots[] = {&in.r, &in.u, &in.c, &in.h, &in.h_grad};
      *slots[k] = *bad;
      expect_invalid([&] { block_gru_grad(in); },
                     std::string("BlockGRUGrad: ") + names[k] + " must have shape [5, 4, 16] " +
                         "(time_len, batch_size, cell_size), got " + bad->shape().to_string());
      *slots[k] = rank2_bh;
      expect_invalid([&] { block_gru_grad(in); },
                     std::string("BlockGRUGrad: ") + names[k] + " must be rank 3");
    }
  }
  expect_invalid(
      [&] {
        BlockGRUGradInputs in = gok;
        in.seq_len_max = T + 1;
        block_gru_grad(in);
      },
      "BlockGRUGrad: seq_len_max must be between 0 and 5");
  expect_invalid(
      [&] {
        BlockGRUGradInputs in = gok;
        in.h_prev = hp_bad;
        block_gru_grad(in);
      },
      "BlockGRUGrad: h_prev must have shape [4, 16]");
  // Caller outputs are checked; outputs must not alias inputs.
  Tensor r(f, {T, B, H}), u(f, {T, B, H}), cc(f, {T, B, H}), small(f, {T, B, H - 1});
  expect_invalid(
      [&] {
        block_gru(ok,
                  {r.mutable_view(), u.mutable_view(), cc.mutable_view(), small.mutable_view()});
      },
      "output h must have shape [5, 4, 16], got [5, 4, 15]");
  Tensor x_copy(f, {T, B, H});
  expect_invalid(
      [&] {
        BlockGRUInputs in = ok;
        in.x = TensorView(x_copy.data_as<float>(), {T, B, I});
        block_gru(in,
                  {r.mutable_view(), u.mutable_view(), cc.mutable_view(), x_copy.mutable_view()});
      },
      "overlaps input x");
}

}  // namespace
}  // namespace blockrnn
