// GRU block cell: fast path vs reference, finite differences in float64, validation, empty
// shapes and float16.
#include <array>

#include "test_util.h"

namespace blockrnn {
namespace {

using testing::all_close;
using testing::expect_invalid;
using testing::poisoned;
using testing::random_tensor;

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

TEST(GRUBlockCell, FastMatchesReference) {
  const std::array<std::int64_t, 8> sizes = {1, 2, 7, 8, 9, 16, 17, 33};
  for (std::uint64_t seed = 0; seed < 24; ++seed) {
    std::mt19937_64 rng(seed);
    const std::int64_t B = sizes[rng() % 8], I = sizes[rng() % 8], H = sizes[rng() % 8];
    SCOPED_TRACE("seed " + std::to_string(seed) + " B=" + std::to_string(B) +
                 " I=" + std::to_string(I) + " H=" + std::to_string(H));
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      const GRUCase c(dt, B, I, H, rng);
      const GRUBlockCellResult ref = forward(c, true), fast = forward(c, false);
      // Different GEMM accumulation orders: a few ulp times sqrt(I+H).
      const double tol = dt == DType::kFloat32 ? 1e-5 : 1e-13;
      EXPECT_TRUE(all_close(fast.r, ref.r, tol, tol));
      EXPECT_TRUE(all_close(fast.u, ref.u, tol, tol));
      EXPECT_TRUE(all_close(fast.c, ref.c, tol, tol));
      EXPECT_TRUE(all_close(fast.h, ref.h, tol, tol));

      const Tensor d_h = random_tensor(dt, {B, H}, rng);
      const GRUBlockCellGradInputs gi{c.x,   c.h_prev, c.w_ru, c.w_c, c.b_ru,
                                      c.b_c, ref.r,    ref.u,  ref.c, d_h};
      GRUBlockCellBackwardResult gr, gf;
      {
        testing::ReferenceMode mode(true);
        gr = gru_block_cell_backward(gi);
      }
      {
        testing::ReferenceMode mode(false);
        gf = gru_block_cell_backward(gi);
      }
      EXPECT_TRUE(all_close(gf.x, gr.x, tol, tol));
      EXPECT_TRUE(all_close(gf.h_prev, gr.h_prev, tol, tol));
      EXPECT_TRUE(all_close(gf.w_ru, gr.w_ru, tol, tol));
      EXPECT_TRUE(all_close(gf.w_c, gr.w_c, tol, tol));
      EXPECT_TRUE(all_close(gf.b_ru, gr.b_ru, tol, tol));
      EXPECT_TRUE(all_close(gf.b_c, gr.b_c, tol, tol));
    }
  }
}

TEST(GRUBlockCell, WritesEveryOutputElementIntoCallerMemory) {
  std::mt19937_64 rng(7);
  const GRUCase c(DType::kFloat32, 3, 5, 4, rng);
  Tensor r = poisoned(DType::kFloat32, {3, 4}), u = poisoned(DType::kFloat32, {3, 4}),
         cc = poisoned(DType::kFloat32, {3, 4}), h = poisoned(DType::kFloat32, {3, 4});
  gru_block_cell(c.inputs(),
                 {r.mutable_view(), u.mutable_view(), cc.mutable_view(), h.mutable_view()});
  const GRUBlockCellResult want = gru_block_cell(c.inputs());
  EXPECT_TRUE(all_close(h, want.h, 0, 0));
  EXPECT_TRUE(all_close(r, want.r, 0, 0));
  EXPECT_TRUE(all_close(cc, want.c, 0, 0));
  EXPECT_TRUE(all_close(u, want.u, 0, 0));
}

// L = Σ d_h ⊙ h(x, h_prev, w_ru, w_c, b_ru, b_c) with a random d_h; every analytic gradient of
// gradients.GRUBlockCell against central differences in float64 (SPEC A7: 1e-6 relative).
TEST(GRUBlockCell, GradientsMatchFiniteDifferences) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    std::mt19937_64 rng(2024);
    const std::int64_t B = 3, I = 4, H = 5;
    GRUCase c(DType::kFloat64, B, I, H, rng);
    const Tensor d_h = random_tensor(DType::kFloat64, {B, H}, rng);
    const GRUBlockCellResult fwd = gru_block_cell(c.inputs());
    const GRUBlockCellBackwardResult g = gru_block_cell_backward(
        {c.x, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c, fwd.r, fwd.u, fwd.c, d_h});
    auto loss = [&] {
      const GRUBlockCellResult f = gru_block_cell(c.inputs());
      double l = 0;
      for (std::int64_t e = 0; e < B * H; ++e)
        l += d_h.data_as<double>()[e] * f.h.data_as<double>()[e];
      return l;
    };
    const std::array<std::pair<Tensor*, const Tensor*>, 6> pairs = {{{&c.x, &g.x},
                                                                     {&c.h_prev, &g.h_prev},
                                                                     {&c.w_ru, &g.w_ru},
                                                                     {&c.w_c, &g.w_c},
                                                                     {&c.b_ru, &g.b_ru},
                                                                     {&c.b_c, &g.b_c}}};
    const char* names[] = {"x", "h_prev", "w_ru", "w_c", "b_ru", "b_c"};
    for (int k = 0; k < 6; ++k) {
      const testing::FiniteDifference fd =
          testing::finite_difference(*pairs[k].first, *pairs[k].second, loss);
      EXPECT_TRUE(fd.within(1e-6)) << "max |numeric - analytic| " << fd.max_err << " " << names[k]
                                   << " reference=" << reference;
    }
  }
}

TEST(GRUBlockCell, EmptyShapesGiveEmptyOutputs) {
  std::mt19937_64 rng(1);
  for (auto [B, I, H] :
       std::array<std::array<std::int64_t, 3>, 4>{{{0, 3, 4}, {2, 0, 4}, {2, 3, 0}, {0, 0, 0}}}) {
    const GRUCase c(DType::kFloat32, B, I, H, rng);
    const GRUBlockCellResult f = gru_block_cell(c.inputs());
    EXPECT_EQ(f.h.shape(), (Shape{B, H}));
    const Tensor d_h = random_tensor(DType::kFloat32, {B, H}, rng);
    const GRUBlockCellBackwardResult g =
        gru_block_cell_backward({c.x, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c, f.r, f.u, f.c, d_h});
    EXPECT_EQ(g.x.shape(), (Shape{B, I}));
    EXPECT_EQ(g.w_ru.shape(), (Shape{I + H, 2 * H}));
    if (B == 0) {  // no batch rows: nothing to accumulate, the weight gradients are zero
      for (std::int64_t e = 0; e < g.w_ru.num_elements(); ++e) {
        EXPECT_EQ(g.w_ru.data_as<float>()[e], 0.0f);
      }
    }
    if (I == 0 && B > 0 && H > 0) {
      // With no input features the cell still runs on h_prev.
      EXPECT_TRUE(std::isfinite(f.h.data_as<float>()[0]));
    }
  }
}

TEST(GRUBlockCell, Float16ComputesInFloat32) {
  std::mt19937_64 rng(5);
  const GRUCase h16(DType::kFloat16, 4, 6, 8, rng);
  // The same (half-representable) values in float32.
  auto widen = [](const Tensor& t) {
    Tensor w(DType::kFloat32, t.shape());
    for (std::int64_t e = 0; e < t.num_elements(); ++e) w.data_as<float>()[e] = testing::get(t, e);
    return w;
  };
  const GRUBlockCellResult a = gru_block_cell(h16.inputs());
  const Tensor x = widen(h16.x), hp = widen(h16.h_prev), wru = widen(h16.w_ru), wc = widen(h16.w_c),
               bru = widen(h16.b_ru), bc = widen(h16.b_c);
  const GRUBlockCellResult b = gru_block_cell({x, hp, wru, wc, bru, bc});
  EXPECT_EQ(a.h.dtype(), DType::kFloat16);
  // One rounding to half per stored value: within half an ulp of half (2^-11 relative).
  EXPECT_TRUE(all_close(a.h, b.h, 1.0 / 2048, 1e-7));
  EXPECT_TRUE(all_close(a.r, b.r, 1.0 / 2048, 1e-7));
}

TEST(GRUBlockCell, Validation) {
  std::mt19937_64 rng(3);
  const DType f = DType::kFloat32;
  const GRUCase c(f, 4, 3, 16, rng);
  const Tensor bad2 = random_tensor(f, {4, 15}, rng), rank1 = random_tensor(f, {4}, rng);
  expect_invalid(
      [&] {
        gru_block_cell({rank1, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.b_c});
      },
      "GRUBlockCell: x must be rank 2, got rank 1 (shape [4])");
  expect_invalid(
      [&] {
        gru_block_cell({c.x, rank1, c.w_ru, c.w_c, c.b_ru, c.b_c});
      },
      "h_prev must be rank 2");
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, rank1, c.w_c, c.b_ru, c.b_c});
      },
      "w_ru must be rank 2");
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, c.w_ru, rank1, c.b_ru, c.b_c});
      },
      "w_c must be rank 2");
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, c.w_ru, c.w_c, c.w_c, c.b_c});
      },
      "b_ru must be rank 1");
  expect_invalid(
      [&] {
        gru_block_cell({c.x, c.h_prev, c.w_ru, c.w_c, c.b_ru, c.w_c});
      },
      "b_c must be rank 1");
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
  // An x of the wrong width (issue 12): both weights agree on another input_size, so the message
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
      "x must be float16, float32 or float64, got int64");
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

}  // namespace
}  // namespace blockrnn
