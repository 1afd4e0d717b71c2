// The cell layer objects of blockrnn/layer.h (LSTMCellLayer, GRUCellLayer):
//   - forward and backward equal the one-shot ops bit for bit (lstm_block_cell,
//     lstm_block_cell_backward and LSTMBlockCellGrad's dicfo; gru_block_cell,
//     gru_block_cell_backward and GRUBlockCellGrad's gate gradients), float32 and float64, on
//     the fast and the reference path, at 1, 2 and 3 threads, over shapes that cross the GEMM's
//     tiles (B, I or H above one 96-row tile), B = 1 (and B = 0 for the GRU), I = 0, peepholes
//     on and off, calls below max_batch, repeated calls and new weights;
//   - a caller's workspace gives the same bits;
//   - creation, set_weights and the calls name the layer and the argument.
// ctest runs this binary in reference mode and on each ISA path too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "test_util.h"

namespace blockrnn::testing {
namespace {

bool bitwise(const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype || a.shape != b.shape) return false;
  const std::size_t n = static_cast<std::size_t>(a.shape.num_elements()) * dtype_size(a.dtype);
  return n == 0 || std::memcmp(a.data, b.data, n) == 0;
}

struct CellCase {
  std::int64_t B, I, H;
};
// Below, at and above the SIMD widths; B, I and H past one 96-row GEMM tile (the one-shot op
// then packs its whole operand, the plan never does).
const CellCase kCellCases[] = {{1, 5, 7},    {3, 0, 4},   {2, 1, 1},  {8, 17, 9}, {13, 33, 16},
                               {64, 12, 24}, {100, 7, 5}, {5, 98, 3}, {4, 3, 100}};

class CellLayerTest : public ::testing::TestWithParam<DType> {};

// Each thread count in turn, restored at the end.
template <typename F>
void on_thread_counts(F&& f) {
  const int saved = get_num_threads();
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    set_num_threads(threads);
    f();
  }
  set_num_threads(saved);
}

// The LSTM cell layer against the one-shot ops at one shape (both paths, 1–3 threads).
void check_lstm(DType dt, const CellCase& c, bool peephole, std::uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(c.B) + " I " + std::to_string(c.I) + " H " +
               std::to_string(c.H) + " peephole " + std::to_string(peephole) + " seed " +
               std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t B = c.B, I = c.I, H = c.H;
  const LSTMBlockCellAttrs attrs{.forget_bias = 0.7, .cell_clip = 0.9, .use_peephole = peephole};
  LSTMCellLayer layer({.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B + 2}, attrs);
  const Tensor w = random_tensor(dt, {I + H, 4 * H}, rng), b = random_tensor(dt, {4 * H}, rng);
  const Tensor wci = random_tensor(dt, {H}, rng), wcf = random_tensor(dt, {H}, rng),
               wco = random_tensor(dt, {H}, rng);
  if (peephole) {
    layer.set_weights(w, b, wci, wcf, wco);
  } else {
    layer.set_weights(w, b);
  }
  const Tensor x = random_tensor(dt, {B, I}, rng), cs0 = random_tensor(dt, {B, H}, rng),
               h0 = random_tensor(dt, {B, H}, rng);
  const Tensor csg = random_tensor(dt, {B, H}, rng), hg = random_tensor(dt, {B, H}, rng);
  on_both_paths([&] {
    const LSTMBlockCellInputs op_in{x, cs0, h0, w, wci, wcf, wco, b};
    const LSTMBlockCellResult want = lstm_block_cell(op_in, attrs);
    const LSTMBlockCellGradInputs op_grad{x,       cs0,     h0,     w,       wci,    wcf,
                                          wco,     b,       want.i, want.cs, want.f, want.o,
                                          want.ci, want.co, csg,    hg};
    const LSTMBlockCellBackwardResult gwant = lstm_block_cell_backward(op_grad, attrs);
    const LSTMBlockCellGradResult dwant = lstm_block_cell_grad(op_grad, peephole);
    on_thread_counts([&] {
      for (int rep = 0; rep < 2; ++rep) {  // the same object, called again
        std::vector<Tensor> o;
        for (int k = 0; k < 7; ++k) o.push_back(poisoned(dt, {B, H}));
        layer.forward({x, cs0, h0}, {o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                     o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                                     o[6].mutable_view()});
        const Tensor* ref[] = {&want.i, &want.cs, &want.f, &want.o, &want.ci, &want.co, &want.h};
        for (int k = 0; k < 7; ++k) EXPECT_TRUE(bitwise(o[k], *ref[k])) << "output " << k;
        std::vector<Tensor> g;
        for (const Tensor* t : {&x, &cs0, &h0, &w, &wci, &wcf, &wco, &b}) {
          g.push_back(poisoned(dt, t->shape()));
        }
        Tensor dicfo = poisoned(dt, {B, 4 * H});
        layer.backward(
            {x, cs0, h0, o[0], o[1], o[2], o[3], o[4], o[5], csg, hg},
            {g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(), g[3].mutable_view(),
             g[4].mutable_view(), g[5].mutable_view(), g[6].mutable_view(), g[7].mutable_view(),
             rep == 0 ? dicfo.mutable_view() : MutableTensorView()});
        const Tensor* gref[] = {&gwant.x,   &gwant.cs_prev, &gwant.h_prev, &gwant.w,
                                &gwant.wci, &gwant.wcf,     &gwant.wco,    &gwant.b};
        for (int k = 0; k < 8; ++k) EXPECT_TRUE(bitwise(g[k], *gref[k])) << "gradient " << k;
        if (rep == 0) EXPECT_TRUE(bitwise(dicfo, dwant.dicfo)) << "dicfo";
      }
    });
  });
}

TEST_P(CellLayerTest, LSTMEqualsOneShotOpsBitwise) {
  for (const CellCase& c : kCellCases) {
    for (const bool peephole : {false, true}) {
      check_lstm(GetParam(), c, peephole, 1000 * c.B + 10 * c.H + c.I + (peephole ? 7 : 0));
    }
  }
}

// The GRU cell layer against the one-shot ops at one shape (both paths, 1–3 threads).
void check_gru(DType dt, const CellCase& c, std::uint64_t seed) {
  SCOPED_TRACE("B " + std::to_string(c.B) + " I " + std::to_string(c.I) + " H " +
               std::to_string(c.H) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::int64_t B = c.B, I = c.I, H = c.H;
  GRUCellLayer layer({.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B + 3});
  for (int round = 0; round < 2; ++round) {  // new weights between rounds
    const Tensor w_ru = random_tensor(dt, {I + H, 2 * H}, rng),
                 w_c = random_tensor(dt, {I + H, H}, rng), b_ru = random_tensor(dt, {2 * H}, rng),
                 b_c = random_tensor(dt, {H}, rng);
    layer.set_weights(w_ru, w_c, b_ru, b_c);
    const Tensor x = random_tensor(dt, {B, I}, rng), h0 = random_tensor(dt, {B, H}, rng);
    const Tensor hg = random_tensor(dt, {B, H}, rng);
    on_both_paths([&] {
      const GRUBlockCellResult want = gru_block_cell({x, h0, w_ru, w_c, b_ru, b_c});
      const GRUBlockCellGradInputs op_grad{x, h0, w_ru, w_c, b_ru, b_c, want.r, want.u, want.c, hg};
      const GRUBlockCellBackwardResult gwant = gru_block_cell_backward(op_grad);
      const GRUBlockCellGradResult dwant = gru_block_cell_grad(op_grad);
      on_thread_counts([&] {
        for (int rep = 0; rep < 2; ++rep) {
          std::vector<Tensor> o;
          for (int k = 0; k < 4; ++k) o.push_back(poisoned(dt, {B, H}));
          layer.forward({x, h0}, {o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                  o[3].mutable_view()});
          const Tensor* ref[] = {&want.r, &want.u, &want.c, &want.h};
          for (int k = 0; k < 4; ++k) EXPECT_TRUE(bitwise(o[k], *ref[k])) << "output " << k;
          std::vector<Tensor> g;
          for (const Tensor* t : {&x, &h0, &w_ru, &w_c, &b_ru, &b_c}) {
            g.push_back(poisoned(dt, t->shape()));
          }
          Tensor d_c = poisoned(dt, {B, H}), d_ru = poisoned(dt, {B, 2 * H});
          const bool gates = rep == 0;
          layer.backward({x, h0, o[0], o[1], o[2], hg},
                         {g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(),
                          g[3].mutable_view(), g[4].mutable_view(), g[5].mutable_view(),
                          gates ? d_c.mutable_view() : MutableTensorView(),
                          gates ? d_ru.mutable_view() : MutableTensorView()});
          const Tensor* gref[] = {&gwant.x,   &gwant.h_prev, &gwant.w_ru,
                                  &gwant.w_c, &gwant.b_ru,   &gwant.b_c};
          for (int k = 0; k < 6; ++k) EXPECT_TRUE(bitwise(g[k], *gref[k])) << "gradient " << k;
          if (gates) {
            EXPECT_TRUE(bitwise(d_c, dwant.d_c_bar)) << "d_c_bar";
            EXPECT_TRUE(bitwise(d_ru, dwant.d_r_bar_u_bar)) << "d_r_bar_u_bar";
          }
        }
      });
    });
  }
}

TEST_P(CellLayerTest, GRUEqualsOneShotOpsBitwise) {
  std::vector<CellCase> cases(std::begin(kCellCases), std::end(kCellCases));
  cases.push_back({0, 4, 6});  // GRUBlockCell takes an empty batch
  for (const CellCase& c : cases) check_gru(GetParam(), c, 1000 * c.B + 10 * c.H + c.I + 3);
}

// Random shapes (the seed of each in the trace, to replay it with check_lstm / check_gru).
TEST_P(CellLayerTest, RandomShapesEqualOneShotOpsBitwise) {
  std::mt19937_64 pick(20261128);
  for (int k = 0; k < 12; ++k) {
    const CellCase c{std::uniform_int_distribution<std::int64_t>(1, 120)(pick),
                     std::uniform_int_distribution<std::int64_t>(0, 110)(pick),
                     std::uniform_int_distribution<std::int64_t>(1, 40)(pick)};
    const std::uint64_t seed = pick();
    check_lstm(GetParam(), c, k % 2 == 0, seed);
    check_gru(GetParam(), c, seed);
  }
}

TEST_P(CellLayerTest, CallerWorkspaceGivesTheSameBits) {
  const DType dt = GetParam();
  std::mt19937_64 rng(5);
  const std::int64_t B = 6, I = 9, H = 11;
  GRUCellLayer own({.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B});
  GRUCellLayer caller(
      {.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B, .caller_workspace = true});
  const Tensor w_ru = random_tensor(dt, {I + H, 2 * H}, rng),
               w_c = random_tensor(dt, {I + H, H}, rng), b_ru = random_tensor(dt, {2 * H}, rng),
               b_c = random_tensor(dt, {H}, rng);
  own.set_weights(w_ru, w_c, b_ru, b_c);
  caller.set_weights(w_ru, w_c, b_ru, b_c);
  const Tensor x = random_tensor(dt, {B, I}, rng), h0 = random_tensor(dt, {B, H}, rng);
  std::vector<Tensor> a, b;
  for (int k = 0; k < 4; ++k) {
    a.push_back(poisoned(dt, {B, H}));
    b.push_back(poisoned(dt, {B, H}));
  }
  own.forward({x, h0},
              {a[0].mutable_view(), a[1].mutable_view(), a[2].mutable_view(), a[3].mutable_view()});
  const GRUBlockCellOutputs bo{b[0].mutable_view(), b[1].mutable_view(), b[2].mutable_view(),
                               b[3].mutable_view()};
  EXPECT_THROW(
      {
        try {
          caller.forward({x, h0}, bo);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("GRUCellLayer.forward: the layer was created with "
                                               "caller_workspace"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  std::vector<double> ws(caller.workspace_bytes(B) / sizeof(double) + 1);
  caller.forward({x, h0}, bo, {ws.data(), caller.workspace_bytes(B)});
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(bitwise(a[k], b[k])) << k;
}

// `call` throws Error(code) whose message contains `text`.
template <typename F>
void expect_error(F&& call, ErrorCode code, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "no error; expected " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(CellLayerErrors, NameTheLayerAndTheArgument) {
  const DType f = DType::kFloat32;
  expect_error([] { GRUCellLayer({.input_size = 3, .hidden_size = 0}); },
               ErrorCode::kInvalidArgument, "GRUCellLayer.create: hidden_size must be >= 1");
  expect_error([] { LSTMCellLayer({.input_size = -1, .hidden_size = 2}); },
               ErrorCode::kInvalidArgument, "LSTMCellLayer.create: input_size must be >= 0");
  expect_error([] { LSTMCellLayer({.input_size = 1, .hidden_size = 2, .max_batch = 0}); },
               ErrorCode::kInvalidArgument, "LSTMCellLayer.create: max_batch must be >= 1");
  expect_error([] { LSTMCellLayer({.input_size = 1, .hidden_size = 2, .dtype = DType::kFloat16}); },
               ErrorCode::kUnimplemented, "LSTMCellLayer.create: dtype must be float32 or float64");
  expect_error([] { LSTMCellLayer({.input_size = 1, .hidden_size = 2}, {.forget_bias = 1e300}); },
               ErrorCode::kInvalidArgument, "forget_bias");
  LSTMCellLayer lstm({.input_size = 3, .hidden_size = 2, .dtype = f, .max_batch = 4});
  Tensor x(f, {2, 3}), s(f, {2, 2});
  std::vector<Tensor> o;
  for (int k = 0; k < 7; ++k) o.emplace_back(f, Shape{2, 2});
  const LSTMBlockCellOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                 o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                                 o[6].mutable_view()};
  expect_error(
      [&] {
        lstm.forward({x, s, s}, out);
      },
      ErrorCode::kInvalidArgument, "LSTMCellLayer.forward: set_weights has not been called");
  expect_error(
      [&] {
        lstm.set_weights(Tensor(f, {5, 7}), Tensor(f, {8}));
      },
      ErrorCode::kInvalidArgument,
      "LSTMCellLayer.set_weights: w must have shape [5, 8] (input_size + hidden_size, 4 * "
      "hidden_size), got [5, 7]");
  lstm.set_weights(Tensor(f, {5, 8}), Tensor(f, {8}));
  Tensor big(f, {5, 3});
  expect_error(
      [&] {
        lstm.forward({big, s, s}, out);
      },
      ErrorCode::kInvalidArgument,
      "LSTMCellLayer.forward: x has batch 5, the layer was created for 1 to 4");
  Tensor empty_x(f, {0, 3}), empty_s(f, {0, 2});
  expect_error(
      [&] {
        lstm.forward({empty_x, empty_s, empty_s}, out);
      },
      ErrorCode::kInvalidArgument,
      "LSTMCellLayer.forward: cs_prev is empty, got shape [0, 2] (batch_size and cell_size must "
      "be positive)");
  expect_error(
      [&] {
        lstm.forward({x, Tensor(f, {2, 3}), s}, out);
      },
      ErrorCode::kInvalidArgument, "LSTMCellLayer.forward: cs_prev must have shape [2, 2]");
  expect_error(
      [&] {
        lstm.forward({x, Tensor(DType::kFloat64, {2, 2}), s}, out);
      },
      ErrorCode::kInvalidArgument, "cs_prev must have dtype float32");
  // An output over an input.
  const LSTMBlockCellOutputs alias{s.mutable_view(),    o[1].mutable_view(), o[2].mutable_view(),
                                   o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                                   o[6].mutable_view()};
  expect_error(
      [&] {
        lstm.forward({x, s, s}, alias);
      },
      ErrorCode::kInvalidArgument, "LSTMCellLayer.forward: output i overlaps input");
  GRUCellLayer gru({.input_size = 3, .hidden_size = 2, .dtype = f, .max_batch = 2});
  expect_error([&] { gru.workspace_bytes(3); }, ErrorCode::kInvalidArgument,
               "GRUCellLayer.workspace_bytes: B must be in [0, 2]");
  expect_error(
      [&] {
        gru.set_weights(Tensor(f, {5, 4}), Tensor(f, {5, 3}), Tensor(f, {4}), Tensor(f, {2}));
      },
      ErrorCode::kInvalidArgument,
      "GRUCellLayer.set_weights: w_c must have shape [5, 2] (input_size + hidden_size, "
      "hidden_size), got [5, 3]");
}

// A refused set_weights changes nothing: the plan and every copy stay those of the weights the
// layer had (the first version replaced w before checking b, so the reference kernels, which
// read the copy, ran on the new w and the fast ones on the old plan).
TEST(CellLayerErrors, ARefusedSetWeightsKeepsTheWeightsTheLayerHad) {
  const DType f = DType::kFloat32;
  const std::int64_t B = 2, I = 3, H = 4;
  std::mt19937_64 rng(5);
  const Tensor w = random_tensor(f, {I + H, 4 * H}, rng), b = random_tensor(f, {4 * H}, rng);
  const Tensor other_w = random_tensor(f, {I + H, 4 * H}, rng), bad_b = random_tensor(f, {H}, rng);
  const Tensor x = random_tensor(f, {B, I}, rng), s = random_tensor(f, {B, H}, rng);
  for (const bool reference : {false, true}) {
    const ReferenceMode mode(reference);
    LSTMCellLayer lstm({.input_size = I, .hidden_size = H, .dtype = f, .max_batch = B});
    auto run = [&] {
      std::vector<Tensor> o;
      for (int k = 0; k < 7; ++k) o.emplace_back(f, Shape{B, H});
      lstm.forward({x, s, s}, {o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                               o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                               o[6].mutable_view()});
      return o;
    };
    lstm.set_weights(w, b);
    const std::vector<Tensor> want = run();
    expect_error([&] { lstm.set_weights(other_w, bad_b); }, ErrorCode::kInvalidArgument,
                 "LSTMCellLayer.set_weights: b must have shape");
    ASSERT_TRUE(lstm.has_weights());
    const std::vector<Tensor> got = run();
    for (std::size_t k = 0; k < want.size(); ++k) {
      EXPECT_TRUE(bitwise(got[k], want[k])) << "output " << k << " reference=" << reference;
    }
  }
}

TEST(CellLayerErrors, MemoryIsCheckedBeforeAllocating) {
  // The weights' copies and packed panels at creation.
  expect_error([] { GRUCellLayer({.input_size = 1 << 20, .hidden_size = 1 << 20}); },
               ErrorCode::kResourceExhausted, "GRUCellLayer.create");
  expect_error(
      [] { GRUCellLayer({.input_size = 4, .hidden_size = 4, .max_batch = std::int64_t{1} << 62}); },
      ErrorCode::kResourceExhausted,
      "GRUCellLayer.create: max_batch 4611686018427387904 is too large");
  // The workspace a call grows by.
  const DType f = DType::kFloat32;
  const std::int64_t B = 1 << 12, I = 4, H = 8;
  GRUCellLayer gru({.input_size = I, .hidden_size = H, .dtype = f, .max_batch = B});
  gru.set_weights(Tensor(f, {I + H, 2 * H}), Tensor(f, {I + H, H}), Tensor(f, {2 * H}),
                  Tensor(f, {H}));
  const Tensor x(f, {B, I}), h(f, {B, H});
  std::vector<Tensor> o;
  for (int k = 0; k < 4; ++k) o.emplace_back(f, Shape{B, H});
  const GRUBlockCellOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                                o[3].mutable_view()};
  const long long saved = get_memory_limit();
  set_memory_limit(static_cast<long long>(gru.workspace_bytes(B)) - 1);
  expect_error(
      [&] {
        gru.forward({x, h}, out);
      },
      ErrorCode::kResourceExhausted, "GRUCellLayer.forward");
  set_memory_limit(saved);
  gru.forward({x, h}, out);
}

// Weights packed on one ISA path, calls on another: the plan is repacked for the active path
// (the baseline path rounds products apart from sums, so panels of another path would not give
// the one-shot op's bits there).
TEST(CellLayerIsa, RepacksWhenThePathChanges) {
  const char* env = std::getenv("BLOCKRNN_ISA");
  const DType dt = DType::kFloat32;
  const std::int64_t B = 9, I = 13, H = 10;
  std::mt19937_64 rng(77);
  const LSTMBlockCellAttrs attrs{.use_peephole = true};
  LSTMCellLayer lstm({.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B}, attrs);
  GRUCellLayer gru({.input_size = I, .hidden_size = H, .dtype = dt, .max_batch = B});
  const Tensor w = random_tensor(dt, {I + H, 4 * H}, rng), b = random_tensor(dt, {4 * H}, rng);
  const Tensor p = random_tensor(dt, {H}, rng);
  const Tensor w_ru = random_tensor(dt, {I + H, 2 * H}, rng),
               w_c = random_tensor(dt, {I + H, H}, rng), b_ru = random_tensor(dt, {2 * H}, rng),
               b_c = random_tensor(dt, {H}, rng);
  lstm.set_weights(w, b, p, p, p);
  gru.set_weights(w_ru, w_c, b_ru, b_c);
  const Tensor x = random_tensor(dt, {B, I}, rng), s = random_tensor(dt, {B, H}, rng);
  for (const char* isa : {"baseline", "avx2", "avx512", "baseline"}) {
    try {
      set_isa(isa);
    } catch (const Error&) {
      continue;  // not on this CPU
    }
    SCOPED_TRACE(isa);
    const LSTMBlockCellResult want = lstm_block_cell({x, s, s, w, p, p, p, b}, attrs);
    std::vector<Tensor> o;
    for (int k = 0; k < 7; ++k) o.push_back(poisoned(dt, {B, H}));
    lstm.forward({x, s, s}, {o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                             o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                             o[6].mutable_view()});
    EXPECT_TRUE(bitwise(o[6], want.h)) << "LSTM h";
    const LSTMBlockCellBackwardResult gwant = lstm_block_cell_backward(
        {x, s, s, w, p, p, p, b, want.i, want.cs, want.f, want.o, want.ci, want.co, s, s}, attrs);
    std::vector<Tensor> g;
    for (const Tensor* t : {&x, &s, &s, &w, &p, &p, &p, &b}) g.push_back(poisoned(dt, t->shape()));
    lstm.backward(
        {x, s, s, o[0], o[1], o[2], o[3], o[4], o[5], s, s},
        {g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(), g[3].mutable_view(),
         g[4].mutable_view(), g[5].mutable_view(), g[6].mutable_view(), g[7].mutable_view()});
    EXPECT_TRUE(bitwise(g[0], gwant.x)) << "LSTM x_grad";
    EXPECT_TRUE(bitwise(g[3], gwant.w)) << "LSTM w_grad";
    const GRUBlockCellResult gru_want = gru_block_cell({x, s, w_ru, w_c, b_ru, b_c});
    std::vector<Tensor> r;
    for (int k = 0; k < 4; ++k) r.push_back(poisoned(dt, {B, H}));
    gru.forward({x, s}, {r[0].mutable_view(), r[1].mutable_view(), r[2].mutable_view(),
                         r[3].mutable_view()});
    EXPECT_TRUE(bitwise(r[3], gru_want.h)) << "GRU h";
  }
  set_isa(env ? env : "");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CellLayerTest,
                         ::testing::Values(DType::kFloat32, DType::kFloat64));

}  // namespace
}  // namespace blockrnn::testing
