// GRU block cell: fast path vs reference, finite differences in float64, validation, empty
// shapes and float16.
#include <array>

#include "cpu/cell_plan.h"
#include "kernel/gru_cell.h"
#include "test_util.h"

namespace blockrnn {
namespace {

using namespace testing;  // test_util.h

struct GRUCase {
  Tensor x, h_prev, w_ru, w_c, b_ru, b_c;
  GRUCase(DType dt, std::int64_t B, std::int64_t I, std::int64_t H, std::mt19937_64& rng,
          double scale = 1.0)
      : x(random_tensor(dt, {B, I}, rng, -scale, scale)),
        h_prev(random_tensor(dt, {B, H}, rng)),
        w_ru(random_tensor(dt, {I + H, 2 * H}, rng, -scale, scale)),
        w_c(random_tensor(dt, {I + H, H}, rng, -scale, scale)),
        b_ru(random_tensor(dt, {2 * H}, rng)),
        b_c(random_tensor(dt, {H}, rng)) {}
  GRUBlockCellInputs inputs() const { return {x, h_prev, w_ru, w_c, b_ru, b_c}; }
};

GRUBlockCellResult forward(const GRUCase& c, bool reference) {
  testing::ReferenceMode mode(reference);
  return gru_block_cell(c.inputs());
}

TEST(GRUBlockCell, Validation) {
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const GRUCase c(f, 4, 3, 16, rng);
  const Tensor bad2 = random_tensor(f, {4, 15}, rng), rank1 = random_tensor(f, {4}, rng);
  // Every input's rank and dtype: the op tester (test_ops.cc). Op-specific messages here.
  const Tensor h_wrong_b = random_tensor(f, {5, 16}, rng);
  expect_invalid(
      [&] {
        gru_block_cell({c.x, h_wrong_b, c.w_ru, c.w_c, c.b_ru, c.b_c});
      },
      "h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]");
  const Tensor w_ru_bad = random_tensor(f, {19, 31}, rng),
               w_c_bad = random_tensor(f, {18, 16}, rng);
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, w_ru_bad, c.w_c, c.b_ru, c.b_c});
      },
      "w_ru must have shape [19, 32]");
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, c.w_ru, w_c_bad, c.b_ru, c.b_c});
      },
      "w_c must have shape [19, 16]");
  // An x of the wrong width: both weights agree on another input_size, so the message
  // names x first; the same from the grads.
  const Tensor x_wide = random_tensor(f, {4, 8}, rng);
  const std::string x_msg =
      "x and the weights disagree on input_size: x has input_size 8 (its last dimension), but "
      "w_ru and w_c have 19 rows, which are input_size + cell_size for input_size 3 (cell_size "
      "16): either x must be [4, 3], or w_ru must have shape [24, 32]";
  expect_invalid(
      [&] {
        gru_block_cell({x_wide, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c});
      },
      "GRUBlockCell: " + x_msg);
  {
    const GRUBlockCellResult fwd = gru_block_cell({c.x, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c});
    expect_invalid(
        [&] {
          gru_block_cell_grad(
              {x_wide, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c, fwd.r, fwd.u, fwd.c, fwd.h});
        },
        "GRUBlockCellGrad: " + x_msg);
  }
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, c.w_ru, c.w_c, c.b_c, c.b_c});
      },
      "b_ru must have shape [32]");
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_ru});
      },
      "b_c must have shape [16]");
  // Ranks are checked before dimensions: a wrong rank anywhere wins over a wrong dimension.
  expect_invalid(
      [&] {
        gru_block_cell({c.x, h_wrong_b, c.w_ru, c.w_c, c.b_ru, c.w_c});
      },
      "b_c must be rank 1");
  // dtypes must agree and be floating.
  const GRUCase d(DType::kFloat64, 4, 3, 16, rng);
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, c.w_ru, d.w_c, c.b_ru, c.b_c});
      },
      "w_c must have the dtype of x (float32), got float64");
  const Tensor ints(DType::kInt64, {4, 3});
  expect_invalid(
      [&] {
        gru_block_cell({ints, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c});
      },
      "x must be float16, bfloat16, float32 or float64, got int64");
  // Grad: every gate tensor and d_h must be [B, H].
  const GRUBlockCellResult fwd = gru_block_cell(c.inputs());
  const GRUBlockCellGradInputs ok{c.x,   c.h_prev, c.w_ru, c.w_c, c.b_ru,
                                  c.b_c, fwd.r,    fwd.u,  fwd.c, fwd.h};
  EXPECT_NO_THROW(gru_block_cell_grad(ok));
  const char* names[] = {"r", "u", "c", "d_h"};
  for (int k = 0; k < 4; ++k) {
    GRUBlockCellGradInputs in = ok;
    TensorView* slots[] = {&in.r, &in.u, &in.c, &in.d_h};
    *slots[k] = bad2;
    expect_invalid([&] { gru_block_cell_grad(in); },
                   std::string("GRUBlockCellGrad: ") + names[k] +
                       " must have shape [4, 16] (batch_size, cell_size), got [4, 15]");
    *slots[k] = rank1;
    expect_invalid([&] { gru_block_cell_backward(in); },
                   std::string("gradients.GRUBlockCell: ") + names[k] + " must be rank 2");
  }
  // Caller-provided outputs are checked too.
  Tensor r(f, {4, 16}), u(f, {4, 16}), cc(f, {4, 16}), small(f, {4, 15});
  expect_invalid(
      [&] {
        gru_block_cell(c.inputs(), {r.mutable_view(), u.mutable_view(), cc.mutable_view(),
                                    small.mutable_view()});
      },
      "output h must have shape [4, 16], got [4, 15]");
  // An output aliasing an input is refused.
  Tensor hp_copy(f, {4, 16});
  expect_invalid(
      [&] {
        gru_block_cell(
            {c.x, hp_copy, c.w_ru, c.w_c, c.b_ru, c.b_c},
            {r.mutable_view(), u.mutable_view(), cc.mutable_view(), hp_copy.mutable_view()});
      },
      "overlaps input h_prev");
  // Null data with elements.
  expect_invalid(
      [&] {
        gru_block_cell({TensorView(static_cast<const float*>(nullptr), {4, 3}), c.h_prev, c.w_ru,
                        c.w_c, c.b_ru, c.b_c});
      },
      "x has 12 elements but no data");
  // Negative dimensions.
  expect_invalid(
      [&] {
        gru_block_cell({TensorView(static_cast<const float*>(nullptr), {-1, 3}), c.h_prev, c.w_ru,
                        c.w_c, c.b_ru, c.b_c});
      },
      "negative dimension");
}

// A backward given a plan that holds no transposed packs (a cell layer packs them at its first
// backward only) multiplies by the weights' rows instead: every output has the bits of the
// backward without a plan and of one whose plan holds the transposes.
TEST(GRUKernels, PlanWithoutTransposesGivesTheBitsOfOneWithThem) {
  std::mt19937_64 rng(17);
  const std::int64_t B = 5, I = 7, H = 9;
  const DType dt = DType::kFloat32;
  const GRUCase c(dt, B, I, H, rng);
  const GRUBlockCellResult f = gru_block_cell(c.inputs());
  const Tensor h_grad = random_tensor(dt, {B, H}, rng);
  const float *w_ru = c.w_ru.data_as<float>(), *w_c = c.w_c.data_as<float>();
  GRUCellPlan<float> forward_only, with_transposes;
  forward_only.pack(I, H, w_ru, w_c);
  with_transposes.pack(I, H, w_ru, w_c);
  with_transposes.pack_transposed(I, H, w_ru, w_c);
  auto backward = [&](const GRUCellPlan<float>* plan) {
    // d_x, d_h_prev, d_c_bar, d_r_bar_u_bar, d_w_ru, d_w_c, d_b_ru, d_b_c
    std::vector<Tensor> g = poisoned_each(
        dt, {{B, I}, {B, H}, {B, H}, {B, 2 * H}, {I + H, 2 * H}, {I + H, H}, {2 * H}, {H}});
    auto out = [&](int k) { return g[k].data_as<float>(); };
    GRUCellBwdArgs<float> a{};
    a.x = c.x.data_as<float>();
    a.h_prev = c.h_prev.data_as<float>();
    a.w_ru = w_ru;
    a.w_c = w_c;
    a.r = f.r.data_as<float>();
    a.u = f.u.data_as<float>();
    a.c = f.c.data_as<float>();
    a.d_h = h_grad.data_as<float>();
    a.d_x = out(0);
    a.d_h_prev = out(1);
    a.d_c_bar = out(2);
    a.d_r_bar_u_bar = out(3);
    a.full = true;
    a.d_w_ru = out(4);
    a.d_w_c = out(5);
    a.d_b_ru = out(6);
    a.d_b_c = out(7);
    a.plan = plan;
    cpu::gru_cell_bwd<float>(GRUDims{B, I, H}, a);
    return g;
  };
  const std::vector<Tensor> none = backward(nullptr), lazy = backward(&forward_only),
                            full = backward(&with_transposes);
  expect_bitwise_equal(lazy, none);
  expect_bitwise_equal(full, none);
}

}  // namespace
}  // namespace blockrnn
