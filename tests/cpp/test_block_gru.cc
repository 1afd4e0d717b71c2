// BlockGRU and BlockGRUGrad (docs/ops.md): equality with stepping the GRU cell ops and the typed
// seq_len_max default; then the GRUSequence suite, which runs what BlockGRU and
// BlockGRUResetAfter share on both (seq_len_max semantics, cancellation, validation, with each
// op's refused shapes in its bad_inputs() table, BlockGRU's at the end of this file). Fast path
// vs reference, finite differences, empty shapes, float16 and caller memory: the generic op
// tester (test_ops.cc).
#include <array>

#include "sequence_case.h"

namespace blockrnn {
namespace {

using namespace testing;  // test_util.h

// docs/ops.md: BlockGRU is GRUBlockCell stepped over time; BlockGRUGrad is the full cell backward
// stepped in reverse with the carry, its parameter gradients summed over steps.
TEST(BlockGRU, EqualsSteppingTheCell) {
  on_both_paths([] {
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
  });
}

// The typed API's default: seq_len_max unset runs all T steps (it used to default
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
  expect_invalid([&] { run_op("BlockGRU", c.views()); },
                 "BlockGRU: seq_len_max has 1 elements but no data (null pointer)");
}

// ---- Both sequence GRUs (sequence_case.h): BlockGRU and BlockGRUResetAfter ----------------------

template <typename V>
class GRUSequence : public ::testing::Test {};
struct VariantName {
  template <typename V>
  static std::string GetName(int) {
    return V::kOp;
  }
};
using GRUVariants = ::testing::Types<BlockGRUVariant, BlockGRUResetAfterVariant>;
TYPED_TEST_SUITE(GRUSequence, GRUVariants, VariantName);

// Outputs past seq_len_max are zero; the steps before it do not depend on T; upstream gradients
// past it are ignored, bit for bit; with no step every gradient is zero.
TYPED_TEST(GRUSequence, StepsPastSeqLenMaxAreZeroAndIgnored) {
  using V = TypeParam;
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(3);
    const std::int64_t T = 6, B = 2, I = 3, H = 5;
    const typename V::Case c(DType::kFloat32, T, B, I, H, rng);
    for (std::int64_t S : {0, 1, 4}) {
      const auto f = V::forward(c.inputs(S));
      for (const Tensor* out : V::outputs(f)) EXPECT_TRUE(all_zero(*out, S * B * H));
      // The steps before S do not depend on T: the full sequence gives the same values.
      const auto full = V::forward(c.inputs(T));
      for (std::int64_t e = 0; e < S * B * H; ++e) {
        EXPECT_EQ(f.h.template data_as<float>()[e], full.h.template data_as<float>()[e]);
      }
      Tensor h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
      const auto g1 = V::backward(c.grad_inputs(S, f, h_grad));
      for (std::int64_t e = S * B * H; e < T * B * H; ++e) h_grad.data_as<float>()[e] = 1e3f;
      const auto g2 = V::backward(c.grad_inputs(S, f, h_grad));
      const std::vector<const Tensor*> a = V::grads(g1), b = V::grads(g2);
      for (std::size_t k = 0; k < a.size(); ++k) {
        EXPECT_TRUE(bitwise_equal(*a[k], *b[k])) << "gradient " << k << " S=" << S;
        if (S == 0) EXPECT_TRUE(all_zero(*a[k])) << "gradient " << k;
      }
      EXPECT_TRUE(all_zero(g1.x_grad, S * B * I));
    }
  }
}

// Cancellation at step boundaries (blockrnn/context.h): with a check that always says stop, a
// call longer than the poll interval (20 ms) throws kCancelled naming the op, on both paths and
// with a team of threads in the time loop.
TYPED_TEST(GRUSequence, CancelsAtStepBoundaries) {
  using V = TypeParam;
  const int saved = get_num_threads();
  std::mt19937_64 rng(9);
  // ~12.6 M multiply-adds of recurrent product per step: the 500 steps take well over 20 ms.
  const std::int64_t T = 500, B = 4, I = 8, H = 1024;
  const typename V::Case c(DType::kFloat32, T, B, I, H, rng);
  const auto f = V::forward(c.inputs(T));
  const Tensor h_grad = random_tensor(DType::kFloat32, {T, B, H}, rng);
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    for (int threads : {1, 3}) {
      set_num_threads(threads);
      set_cancel_check([](void*) { return true; }, nullptr);
      testing::expect_cancelled([&] { V::forward(c.inputs(T)); }, V::kOp);
      testing::expect_cancelled([&] { V::backward(c.grad_inputs(T, f, h_grad)); },
                                std::string(V::kOp) + "Grad");
      set_cancel_check(nullptr, nullptr);
    }
  }
  set_num_threads(saved);
}

// Validation of both GRUs, forward and grad: each input's own shapes (the variant's
// bad_inputs()), ranks before dimensions, seq_len_max (range, scalar, int64), the dtype of the
// weights, the grad's per-step inputs, and caller outputs (shape; no overlap with an input).
TYPED_TEST(GRUSequence, Validation) {
  using V = TypeParam;
  const std::string op = V::kOp, grad_op = op + "Grad";
  // seq_len_max, the forward inputs, the per-step inputs (then the optional seq_lengths).
  const std::vector<std::string>& names = find_op(grad_op).inputs;
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const std::int64_t T = 5, B = 4, I = 3, H = 16;
  const typename V::Case c(f, T, B, I, H, rng);
  const auto ok = c.inputs(T);
  const auto fwd = V::forward(ok);
  const Tensor h_grad = random_tensor(f, {T, B, H}, rng);
  const auto gok = c.grad_inputs(T, fwd, h_grad);
  EXPECT_NO_THROW(V::backward(gok));
  // Both ops with inputs (counted after seq_len_max) replaced.
  using Edits = std::vector<std::pair<std::size_t, TensorView>>;
  auto forward_with = [&](const Edits& edits) {
    auto in = ok;
    for (const auto& [k, v] : edits) *V::inputs(in)[k] = v;
    V::forward(in);
  };
  auto backward_with = [&](const Edits& edits) {
    auto in = gok;
    for (const auto& [k, v] : edits) *V::inputs(in)[k] = v;
    V::backward(in);
  };
  auto expect_both_invalid = [&](const Edits& edits, const std::string& message) {
    expect_invalid([&] { forward_with(edits); }, op + ": " + message);
    expect_invalid([&] { backward_with(edits); }, grad_op + ": " + message);
  };
  for (const BadInput& bad : V::bad_inputs()) {
    const Tensor v = random_tensor(f, bad.shape, rng);
    expect_both_invalid({{bad.input, v}}, bad.message);
  }
  // Ranks first: a wrong rank anywhere wins over a wrong dimension elsewhere.
  const Tensor hp_bad = random_tensor(f, {5, 16}, rng), rank2 = random_tensor(f, {4, 3}, rng);
  expect_both_invalid({{1, hp_bad}, {5, rank2}}, names[6] + " must be rank 1");
  // The weights must have the dtype of x.
  const typename V::Case d(DType::kFloat64, T, B, I, H, rng);
  expect_both_invalid({{3, d.views()[4]}},
                      names[4] + " must have the dtype of x (float32), got float64");
  expect_seq_len_max_checked(
      op, T, [&](std::int64_t S) { V::forward(c.inputs(S)); }, c.views());
  expect_seq_len_max_checked(grad_op, T, [&](std::int64_t S) {
    auto in = gok;
    in.seq_len_max = S;
    V::backward(in);
  });
  // The grad's per-step inputs (forward outputs and h_grad) must each be [T, B, H].
  auto probe = gok;
  const std::size_t steps = V::inputs(probe).size() - 6;
  expect_step_inputs_checked(grad_op, {names.begin() + 7, names.begin() + 7 + steps}, f, T, B, H,
                             [&](std::size_t k, const Tensor& v) {
                               backward_with({{6 + k, v}});
                             });
  // Caller outputs are checked; outputs must not alias inputs.
  std::vector<Tensor> outs;
  for (std::size_t k = 0; k + 1 < V::outputs(fwd).size(); ++k) outs.emplace_back(f, Shape{T, B, H});
  outs.emplace_back(f, Shape{T, B, H - 1});
  expect_invalid([&] { V::forward(ok, outs); },
                 op + ": output h must have shape [5, 4, 16], got [5, 4, 15]");
  outs.back() = Tensor(f, {T, B, H});
  auto in = ok;
  in.x = TensorView(outs.back().data_as<float>(), {T, B, I});
  expect_invalid([&] { V::forward(in, outs); }, "overlaps input x");
}

}  // namespace

// BlockGRU's shapes (the rest of its validation: GRUSequence.Validation).
std::vector<testing::BadInput> testing::BlockGRUVariant::bad_inputs() {
  return {
      {1, {5, 16}, "h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]"},
      {2, {19, 31}, "w_ru must have shape [19, 32]"},
      {3, {18, 16}, "w_c must have shape [19, 16]"},
      // An x of the wrong width: both weights agree on another input_size, so the
      // message names x first, then both weights. A weight whose rows alone disagree is named
      // alone.
      {0,
       {5, 4, 2},
       "x and the weights disagree on input_size: x has input_size 2 (its last dimension), but "
       "w_ru and w_c have 19 rows, which are input_size + cell_size for input_size 3 (cell_size "
       "16): either x must be [5, 4, 3], or w_ru must have shape [18, 32] (input_size + "
       "cell_size, 2 * cell_size), got [19, 32] and w_c [18, 16]"},
      {2,
       {18, 32},
       "w_ru must have shape [19, 32] (input_size + cell_size, 2 * cell_size), got [18, 32]"},
      {4, {16}, "b_ru must have shape [32] (2 * cell_size), got [16]"},
      {5, {32}, "b_c must have shape [16] (cell_size), got [32]"},
  };
}

}  // namespace blockrnn
