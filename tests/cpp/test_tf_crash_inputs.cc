// TensorFlow's crash reports as regression tests (SPEC §10, A3; issue 7), through the C++ API.
//
// Every input behind a TensorFlow crash report about the LSTM block ops is replayed through
// blockrnn::run_op, which must throw blockrnn::Error(kInvalidArgument) naming the op and the
// argument, or, where the input is valid under SPEC A3, return correctly shaped outputs. Run
// under ASan/UBSan with --gtest_filter='*Crash*'. The Python twin, with the reproducers'
// shapes, dtypes and attrs in each docstring, is tests/python/test_tf_crash_inputs.py. Values
// drawn by tf.random.uniform in a reproducer are seeded uniform values of the same shape and
// dtype here; saturate_cast(uniform int64 in [0, 64)) to half becomes integer-valued float16.
// Shape letters: T time, B batch, I input size, H cell size.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace blockrnn {
namespace {

using testing::expect_invalid;
using testing::random_tensor;
using testing::scalar_int64;

using Inputs = std::map<std::string, Tensor>;

const std::vector<std::string> kCellGates = {"i", "cs", "f", "o", "ci", "co"};
const std::vector<std::string> kSeqSteps = {"i",  "cs", "f",       "o",     "ci",
                                            "co", "h",  "cs_grad", "h_grad"};
const std::vector<std::string> kSeqFwd = {"BlockLSTM", "BlockLSTMV2"};
const std::vector<std::string> kSeqGrad = {"BlockLSTMGrad", "BlockLSTMGradV2"};
const std::vector<std::string> kCellBwd = {"LSTMBlockCellGrad", "gradients.LSTMBlockCell"};

bool is_seq(const std::string& op) {
  return op.rfind("Block", 0) == 0;
}
bool is_seq_grad(const std::string& op) {
  return is_seq(op) && op.find("Grad") != op.npos;
}

// Runs `op` with its inputs taken by name (in the OpDef's order) from `in`.
std::vector<Tensor> run(const std::string& op, const Inputs& in, const AttrMap& attrs) {
  std::vector<TensorView> views;
  for (const std::string& name : find_op(op).inputs) {
    const auto it = in.find(name);
    if (it == in.end() && name == "seq_lengths") break;  // optional (blockrnn's), omitted
    if (it == in.end()) throw std::logic_error("test bug: no input " + name + " for " + op);
    views.push_back(it->second.view());
  }
  return run_op(op, views, attrs);
}

// The call must throw Error(kInvalidArgument) whose message contains "<op>: <fragment>".
void expect_rejected(const std::string& op, const Inputs& in, const AttrMap& attrs,
                     const std::string& fragment) {
  SCOPED_TRACE(op + ": " + fragment);
  expect_invalid([&] { (void)run(op, in, attrs); }, op + ": " + fragment);
}

// Like tf.random.uniform(shape, dtype): values in [0, 1).
Tensor uniform(DType dtype, Shape shape, std::mt19937_64& rng) {
  return random_tensor(dtype, shape, rng, 0.0, 1.0);
}

// Like tf.saturate_cast(tf.random.uniform(shape, 0, 64, tf.int64), dtype).
Tensor small_ints(DType dtype, Shape shape, std::mt19937_64& rng) {
  Tensor t = random_tensor(dtype, shape, rng, 0.0, 64.0);
  for (std::int64_t e = 0; e < t.num_elements(); ++e) {
    testing::set(t, e, std::floor(testing::get(t, e)));
  }
  return t;
}

Tensor filled(DType dtype, Shape shape, double v) {
  Tensor t(dtype, shape);
  for (std::int64_t e = 0; e < t.num_elements(); ++e) testing::set(t, e, v);
  return t;
}

Tensor half_values(Shape shape, std::initializer_list<double> values) {
  Tensor t(DType::kFloat16, shape);
  std::int64_t e = 0;
  for (double v : values) testing::set(t, e++, v);
  return t;
}

using Draw = Tensor (*)(DType, Shape, std::mt19937_64&);

// Consistent inputs of a sequence op (the per-step tensors too for the grads).
Inputs seq_inputs(const std::string& op, std::mt19937_64& rng, std::int64_t T, std::int64_t B,
                  std::int64_t I, std::int64_t H, std::int64_t seq_len_max,
                  DType dtype = DType::kFloat32, Draw draw = uniform) {
  Inputs in;
  in["seq_len_max"] = scalar_int64(seq_len_max);
  in["x"] = draw(dtype, Shape{T, B, I}, rng);
  in["cs_prev"] = draw(dtype, Shape{B, H}, rng);
  in["h_prev"] = draw(dtype, Shape{B, H}, rng);
  in["w"] = draw(dtype, Shape{I + H, 4 * H}, rng);
  for (const char* n : {"wci", "wcf", "wco"}) in[n] = draw(dtype, Shape{H}, rng);
  in["b"] = draw(dtype, Shape{4 * H}, rng);
  if (is_seq_grad(op)) {
    for (const std::string& n : kSeqSteps) in[n] = draw(dtype, Shape{T, B, H}, rng);
  }
  return in;
}

// Consistent inputs of a cell op (the gates and upstream gradients too for the grads).
Inputs cell_inputs(const std::string& op, std::mt19937_64& rng, std::int64_t B, std::int64_t I,
                   std::int64_t H, DType dtype = DType::kFloat32, Draw draw = uniform) {
  Inputs in;
  in["x"] = draw(dtype, Shape{B, I}, rng);
  in["cs_prev"] = draw(dtype, Shape{B, H}, rng);
  in["h_prev"] = draw(dtype, Shape{B, H}, rng);
  in["w"] = draw(dtype, Shape{I + H, 4 * H}, rng);
  for (const char* n : {"wci", "wcf", "wco"}) in[n] = draw(dtype, Shape{H}, rng);
  in["b"] = draw(dtype, Shape{4 * H}, rng);
  if (op != "LSTMBlockCell") {
    for (const std::string& n : kCellGates) in[n] = draw(dtype, Shape{B, H}, rng);
    for (const char* n : {"cs_grad", "h_grad"}) in[n] = draw(dtype, Shape{B, H}, rng);
  }
  return in;
}

// Attrs for the sequence ops: V1 forward (forget_bias, cell_clip, use_peephole), V2 forward
// (cell_clip, use_peephole), the grads (use_peephole, required).
AttrMap seq_attrs(const std::string& op, bool use_peephole = false, double forget_bias = 1.0,
                  double cell_clip = 3.0) {
  if (op == "BlockLSTM") {
    return {{"forget_bias", forget_bias}, {"cell_clip", cell_clip}, {"use_peephole", use_peephole}};
  }
  if (op == "BlockLSTMV2") return {{"cell_clip", cell_clip}, {"use_peephole", use_peephole}};
  return {{"use_peephole", use_peephole}};
}

// #58175: BlockLSTM (GPU) CHECK-failed on a non-scalar seq_len_max: int64 [13, 11, 0]; x float32
// [1, 3, 15]; cs_prev, h_prev [3, 0]; w [15, 0]; wci, wcf, wco, b [0]; forget_bias -121.23,
// cell_clip -106.82. Ours: "seq_len_max must be a scalar", on all four sequence ops.
TEST(TFCrashInputs, Issue58175NonScalarSeqLenMax) {
  std::mt19937_64 rng(58175);
  for (const std::string& op : {"BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2"}) {
    Inputs in = seq_inputs(op, rng, 1, 3, 15, 0, 1);
    in["seq_len_max"] = Tensor(DType::kInt64, Shape{13, 11, 0});
    const AttrMap attrs = seq_attrs(op, false, -121.22699269620765, -106.82307555235684);
    expect_rejected(op, in, attrs, "seq_len_max must be a scalar (rank 0), got shape [13, 11, 0]");
    in["seq_len_max"] = Tensor(DType::kInt64, Shape{1});
    expect_rejected(op, in, attrs, "seq_len_max must be a scalar (rank 0), got shape [1]");
  }
}

// #58176: BlockLSTM (GPU) CHECK-failed with zero cell size: #58175's shapes, H = 0. VALID under
// SPEC A3: BlockLSTM(V2) accept H = 0 with consistent shapes and return empty [T, B, 0] outputs.
TEST(TFCrashInputs, Issue58176ZeroCellSizeIsValid) {
  std::mt19937_64 rng(58176);
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    for (const std::string& op : kSeqFwd) {
      for (std::int64_t seq_len_max : {0, 1}) {
        for (bool use_peephole : {false, true}) {
          SCOPED_TRACE(op + " seq_len_max " + std::to_string(seq_len_max));
          const Inputs in = seq_inputs(op, rng, 1, 3, 15, 0, seq_len_max);
          const std::vector<Tensor> out =
              run(op, in, seq_attrs(op, use_peephole, -121.22699269620765, -106.82307555235684));
          ASSERT_EQ(out.size(), 7u);
          for (const Tensor& t : out) {
            EXPECT_EQ(t.shape(), (Shape{1, 3, 0}));
            EXPECT_EQ(t.dtype(), DType::kFloat32);
          }
        }
      }
    }
  }
}

// #58270: LSTMBlockCell with an empty cs_prev crashed (cuBLAS, GPU): float16 integers in
// [0, 64); x [2, 16]; cs_prev, h_prev [2, 0]; w [16, 0]; wci [5]; wcf [16]; forget_bias 112.67,
// cell_clip 67.12. Ours (SPEC A3): LSTMBlockCell(Grad) reject B = 0 or H = 0, "cs_prev is
// empty"; the batch-0 variants and the grads too.
TEST(TFCrashInputs, Issue58270EmptyCsPrev) {
  std::mt19937_64 rng(58270);
  const DType f16 = DType::kFloat16;
  for (const std::string& op : {"LSTMBlockCell", "LSTMBlockCellGrad", "gradients.LSTMBlockCell"}) {
    const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{2, 0}, {0, 4}, {0, 0}};
    for (const auto& [B, H] : sizes) {
      Inputs in = cell_inputs(op, rng, B, 16, H, f16, small_ints);
      if (B == 2 && H == 0) {  // the issue's own peephole vectors (wco and b are cut off)
        in["wci"] = small_ints(f16, Shape{5}, rng);
        in["wcf"] = small_ints(f16, Shape{16}, rng);
        in["wco"] = small_ints(f16, Shape{16}, rng);
        in["b"] = small_ints(f16, Shape{0}, rng);
      }
      const AttrMap attrs = op == "LSTMBlockCell" ? AttrMap{{"forget_bias", 112.66590343649887},
                                                            {"cell_clip", 67.12389445926587},
                                                            {"use_peephole", 0}}
                                                  : AttrMap{{"use_peephole", 0}};
      expect_rejected(
          op, in, attrs,
          "cs_prev is empty, got shape [" + std::to_string(B) + ", " + std::to_string(H) + "]");
    }
  }
}

// #66763: LSTMBlockCellGrad aborted on x float32 zeros [17] with every other input float32
// [28, 29] filled with 0.837607. Ours: ranks first, "x must be rank 2".
TEST(TFCrashInputs, Issue66763Rank1XCellGrad) {
  for (const std::string& op : kCellBwd) {
    Inputs in;
    for (const char* n : {"cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b", "i", "cs", "f", "o",
                          "ci", "co", "cs_grad", "h_grad"}) {
      in[n] = filled(DType::kFloat32, Shape{28, 29}, 0.837607);
    }
    in["x"] = Tensor(DType::kFloat32, Shape{17});
    expect_rejected(op, in, {{"use_peephole", 0}}, "x must be rank 2, got rank 1 (shape [17])");
  }
}

// #66762 (the forward twin of #66763): LSTMBlockCell aborted on x [0], cs_prev [0],
// h_prev [0, 0], w [0], wci [0, 0], wcf/wco/b [28, 29]. Ours: "x must be rank 2".
TEST(TFCrashInputs, Issue66762Rank1XCell) {
  const DType f32 = DType::kFloat32;
  Inputs in;
  in["x"] = Tensor(f32, Shape{0});
  in["cs_prev"] = Tensor(f32, Shape{0});
  in["h_prev"] = Tensor(f32, Shape{0, 0});
  in["w"] = Tensor(f32, Shape{0});
  in["wci"] = Tensor(f32, Shape{0, 0});
  for (const char* n : {"wcf", "wco", "b"}) in[n] = filled(f32, Shape{28, 29}, 0.837607);
  expect_rejected("LSTMBlockCell", in, {{"forget_bias", 1}, {"cell_clip", 0}, {"use_peephole", 0}},
                  "x must be rank 2, got rank 1 (shape [0])");
}

// #90915: BlockLSTMGrad and BlockLSTMGradV2 aborted on float16 with zero cell size:
// seq_len_max 10; integers in [0, 64); x [10, 2, 16]; cs_prev, h_prev [2, 0]; w [16, 0]
// (completed with H = 0). Ours (SPEC A3): the grads reject H = 0 (w's columns must be a
// positive multiple of 4).
TEST(TFCrashInputs, Issue90915GradZeroCellSizeHalf) {
  std::mt19937_64 rng(90915);
  for (const std::string& op : kSeqGrad) {
    Inputs in = seq_inputs(op, rng, 10, 2, 16, 0, 10, DType::kFloat16, small_ints);
    for (bool use_peephole : {false, true}) {
      expect_rejected(op, in, {{"use_peephole", use_peephole}},
                      "w must have a positive multiple of 4 columns (4 * cell_size), got shape "
                      "[16, 0]");
    }
    in["w"] = small_ints(DType::kFloat16, Shape{16, 6}, rng);
    expect_rejected(op, in, {{"use_peephole", 0}},
                    "w must have a positive multiple of 4 columns (4 * cell_size), got shape "
                    "[16, 6]");
  }
}

// #104847: BlockLSTMGrad CHECK-failed on CPU with rank-2 per-step tensors: seq_len_max 1;
// x [1, 1, 1]; cs_prev, h_prev, w [1, 1]; wci, wcf, wco, b [1]; i..h [1, 1], all ones. Ours:
// every per-step tensor (cs_grad and h_grad too) must be rank 3, ranks checked first.
TEST(TFCrashInputs, Issue104847Rank2StepTensors) {
  const DType f32 = DType::kFloat32;
  for (const std::string& op : kSeqGrad) {
    Inputs in;
    in["seq_len_max"] = scalar_int64(1);
    in["x"] = filled(f32, Shape{1, 1, 1}, 1);
    for (const char* n : {"cs_prev", "h_prev", "w"}) in[n] = filled(f32, Shape{1, 1}, 1);
    for (const char* n : {"wci", "wcf", "wco", "b"}) in[n] = filled(f32, Shape{1}, 1);
    for (const std::string& n : kSeqSteps) in[n] = filled(f32, Shape{1, 1}, 1);
    expect_rejected(op, in, {{"use_peephole", 0}}, "i must be rank 3, got rank 2 (shape [1, 1])");
    // Only one per-step tensor of the wrong rank, everything else consistent (T=B=I=H=1).
    in["w"] = filled(f32, Shape{2, 4}, 1);
    in["b"] = filled(f32, Shape{4}, 1);
    for (const std::string& bad : kSeqSteps) {
      for (const std::string& n : kSeqSteps) in[n] = filled(f32, Shape{1, 1, 1}, 1);
      in[bad] = filled(f32, Shape{1, 1}, 1);
      expect_rejected(op, in, {{"use_peephole", 1}},
                      bad + " must be rank 3, got rank 2 (shape [1, 1])");
      in[bad] = filled(f32, Shape{1}, 1);
      expect_rejected(op, in, {{"use_peephole", 0}},
                      bad + " must be rank 3, got rank 1 (shape [1])");
    }
  }
}

// #106407: BlockLSTMGradV2 segfaulted when seq_len_max (3) exceeded the time dimension of its
// inputs: batch 2, input 4, cell 5, x [2, 2, 4]. Ours: "seq_len_max must be between 0 and 2";
// per-step tensors with 3 steps against x's 2 are a time mismatch.
TEST(TFCrashInputs, Issue106407GradSeqLenMaxAboveTime) {
  std::mt19937_64 rng(106407);
  for (const std::string& op : kSeqGrad) {
    Inputs in = seq_inputs(op, rng, 2, 2, 4, 5, 3);
    for (bool use_peephole : {false, true}) {
      expect_rejected(op, in, {{"use_peephole", use_peephole}},
                      "seq_len_max must be between 0 and 2 (time_len of x), got 3");
    }
    for (const std::string& n : kSeqSteps) in[n] = uniform(DType::kFloat32, Shape{3, 2, 5}, rng);
    expect_rejected(op, in, {{"use_peephole", 0}},
                    "i must have shape [2, 2, 5] (time_len, batch_size, cell_size), got [3, 2, 5]");
  }
}

struct Mismatch {
  std::string op;
  std::int64_t T, B, I, H;  // T < 0: a cell op
  std::map<std::string, Shape> bad;
  std::string fragment;
};

// #112746: BlockLSTMGrad crashed (or silently misread) when x and the other inputs disagreed on
// batch or time (x [3, 0, 4] against batch 2; the PR's sweep: batch (1|2, 0), a per-step
// tensor of time 1), and LSTMBlockCellGrad crashed on an empty rank-1 x. Ours: every input's
// batch, time and cell dims are checked (SPEC A3, §8.3).
TEST(TFCrashInputs, Issue112746BatchTimeMismatch) {
  const std::vector<Mismatch> cases = {
      {"BlockLSTMGrad",
       3,
       2,
       4,
       5,
       {{"x", Shape{3, 0, 4}}},
       "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"},
      {"BlockLSTMGrad",
       3,
       0,
       4,
       5,
       {{"x", Shape{3, 2, 4}}},
       "cs_prev must have shape [2, 5] (batch_size, cell_size), got [0, 5]"},
      {"BlockLSTMGrad", 3, 2, 4, 5, {{"x", Shape{3, 1, 4}}}, "cs_prev must have shape [1, 5]"},
      {"BlockLSTMGrad",
       3,
       2,
       4,
       5,
       {{"h_prev", Shape{0, 5}}},
       "h_prev must have shape [2, 5] (batch_size, cell_size), got [0, 5]"},
      {"BlockLSTMGrad",
       3,
       2,
       4,
       5,
       {{"i", Shape{1, 2, 5}}},
       "i must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [1, 2, 5]"},
      {"BlockLSTMGrad",
       3,
       2,
       4,
       5,
       {{"h", Shape{3, 0, 5}}},
       "h must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [3, 0, 5]"},
      {"BlockLSTMGrad",
       3,
       2,
       4,
       5,
       {{"cs_grad", Shape{2, 2, 5}}},
       "cs_grad must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [2, 2, 5]"},
      {"BlockLSTMGrad",
       3,
       2,
       4,
       5,
       {{"h_grad", Shape{3, 2, 4}}},
       "h_grad must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [3, 2, 4]"},
      {"BlockLSTMGradV2",
       3,
       2,
       4,
       5,
       {{"x", Shape{3, 0, 4}}},
       "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"},
      {"BlockLSTMGradV2",
       3,
       2,
       4,
       5,
       {{"co", Shape{1, 2, 5}}},
       "co must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [1, 2, 5]"},
      {"BlockLSTM",
       3,
       2,
       4,
       5,
       {{"x", Shape{3, 0, 4}}},
       "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"},
      {"BlockLSTMV2",
       3,
       2,
       4,
       5,
       {{"h_prev", Shape{3, 5}}},
       "h_prev must have shape [2, 5] (batch_size, cell_size), got [3, 5]"},
      {"LSTMBlockCellGrad",
       -1,
       2,
       4,
       5,
       {{"x", Shape{0}}},
       "x must be rank 2, got rank 1 (shape [0])"},
      {"gradients.LSTMBlockCell",
       -1,
       2,
       4,
       5,
       {{"x", Shape{0}}},
       "x must be rank 2, got rank 1 (shape [0])"},
      {"LSTMBlockCellGrad",
       -1,
       2,
       4,
       5,
       {{"x", Shape{0, 4}}},
       "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"},
      {"LSTMBlockCellGrad",
       -1,
       2,
       4,
       5,
       {{"i", Shape{3, 5}}},
       "i must have shape [2, 5] (batch_size, cell_size), got [3, 5]"},
  };
  std::mt19937_64 rng(112746);
  for (const Mismatch& c : cases) {
    Inputs in = c.T < 0 ? cell_inputs(c.op, rng, c.B, c.I, c.H)
                        : seq_inputs(c.op, rng, c.T, c.B, c.I, c.H, c.T);
    for (const auto& [name, shape] : c.bad) in[name] = uniform(DType::kFloat32, shape, rng);
    const AttrMap attrs = is_seq(c.op) ? seq_attrs(c.op) : AttrMap{{"use_peephole", 0}};
    expect_rejected(c.op, in, attrs, c.fragment);
  }
}

// #112746, the counterpart the fix keeps working: a CONSISTENT zero batch is VALID (SPEC
// §8.3: B = 0 works); the grads return empty x/state gradients and zero weight gradients.
TEST(TFCrashInputs, Issue112746ConsistentZeroBatchIsValid) {
  std::mt19937_64 rng(1127460);
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    for (const std::string& op : kSeqGrad) {
      for (bool use_peephole : {false, true}) {
        SCOPED_TRACE(op);
        const Inputs in = seq_inputs(op, rng, 3, 0, 4, 5, 3);
        const std::vector<Tensor> g = run(op, in, {{"use_peephole", use_peephole}});
        const std::vector<Shape> want = {Shape{3, 0, 4}, Shape{0, 5}, Shape{0, 5}, Shape{9, 20},
                                         Shape{5},       Shape{5},    Shape{5},    Shape{20}};
        ASSERT_EQ(g.size(), want.size());
        for (std::size_t k = 0; k < want.size(); ++k) {
          EXPECT_EQ(g[k].shape(), want[k]) << find_op(op).outputs[k];
          EXPECT_EQ(g[k].dtype(), DType::kFloat32);
          for (std::int64_t e = 0; e < g[k].num_elements(); ++e) {
            ASSERT_EQ(testing::get(g[k], e), 0.0) << find_op(op).outputs[k] << " element " << e;
          }
        }
      }
    }
  }
}

// PR #124034's float16 inputs: x [0.1, 0.2] (rank 1), cs_prev [[0.5, 0.6]], h_prev
// [[0.7, 0.8]], w [4, 2], wci/wcf/wco [2], b [4]; with `rank1` = "cs_prev", x is [1, 2] and
// cs_prev [2] instead. Gates and upstream gradients [1, 2] for the grads.
Inputs pr124034_inputs(const std::string& op, const std::string& rank1) {
  Inputs in;
  in["x"] = rank1 == "x" ? half_values(Shape{2}, {0.1, 0.2}) : half_values(Shape{1, 2}, {0.1, 0.2});
  in["cs_prev"] =
      rank1 == "cs_prev" ? half_values(Shape{2}, {0.5, 0.6}) : half_values(Shape{1, 2}, {0.5, 0.6});
  in["h_prev"] = half_values(Shape{1, 2}, {0.7, 0.8});
  in["w"] = half_values(Shape{4, 2}, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8});
  in["wci"] = half_values(Shape{2}, {0.1, 0.2});
  in["wcf"] = half_values(Shape{2}, {0.3, 0.4});
  in["wco"] = half_values(Shape{2}, {0.5, 0.6});
  in["b"] = half_values(Shape{4}, {0.1, 0.2, 0.3, 0.4});
  if (op != "LSTMBlockCell") {
    for (const std::string& n : kCellGates) in[n] = half_values(Shape{1, 2}, {0.25, 0.75});
    for (const char* n : {"cs_grad", "h_grad"}) in[n] = half_values(Shape{1, 2}, {0.25, 0.75});
  }
  return in;
}

// #113069: LSTMBlockCell read dim_size(1) of x and cs_prev before checking ranks, so a rank-1
// x (or cs_prev) aborted. Ours: "x must be rank 2", before the inconsistent w and b.
TEST(TFCrashInputs, Issue113069Rank1CellInput) {
  for (const std::string& arg : {"x", "cs_prev"}) {
    expect_rejected("LSTMBlockCell", pr124034_inputs("LSTMBlockCell", arg), {},
                    arg + " must be rank 2, got rank 1 (shape [2])");
  }
}

// #113071: the same for LSTMBlockCellGrad (and our gradients.LSTMBlockCell).
TEST(TFCrashInputs, Issue113071Rank1CellGradInput) {
  for (const std::string& op : kCellBwd) {
    for (const std::string& arg : {"x", "cs_prev"}) {
      expect_rejected(op, pr124034_inputs(op, arg), {{"use_peephole", 0}},
                      arg + " must be rank 2, got rank 1 (shape [2])");
    }
  }
}

// #124974: BlockLSTMGrad aborted in Tensor::Slice when seq_len_max (10) exceeded a tensor's
// time dimension; a negative one crashed the same way, and BlockLSTM had the same pattern.
// Ours: 0 <= seq_len_max <= T on all four sequence ops.
TEST(TFCrashInputs, Issue124974SeqLenMaxOutOfRange) {
  std::mt19937_64 rng(124974);
  const std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  const std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (const std::string& op : {"BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2"}) {
    for (std::int64_t s : {std::int64_t{-1}, std::int64_t{4}, std::int64_t{10}, kMin, kMax}) {
      const Inputs in = seq_inputs(op, rng, 3, 2, 16, 4, s, DType::kFloat16);
      expect_rejected(
          op, in, seq_attrs(op),
          "seq_len_max must be between 0 and 3 (time_len of x), got " + std::to_string(s));
    }
  }
}

// #124974, the issue's own inputs: seq_len_max 10, float16 zeros, x [10, 2, 16], cs_prev and
// h_prev [2, 0], w [16, 0], completed with [0] vectors and per-step tensors of time 2. Ours:
// H = 0 first; with H = 4 the time mismatch; with everything of time 2, seq_len_max.
TEST(TFCrashInputs, Issue124974IssueInputs) {
  const DType f16 = DType::kFloat16;
  for (const std::string& op : kSeqGrad) {
    Inputs in;
    in["seq_len_max"] = scalar_int64(10);
    in["x"] = Tensor(f16, Shape{10, 2, 16});
    in["cs_prev"] = Tensor(f16, Shape{2, 0});
    in["h_prev"] = Tensor(f16, Shape{2, 0});
    in["w"] = Tensor(f16, Shape{16, 0});
    for (const char* n : {"wci", "wcf", "wco", "b"}) in[n] = Tensor(f16, Shape{0});
    for (const std::string& n : kSeqSteps) in[n] = Tensor(f16, Shape{2, 2, 0});
    const AttrMap attrs = {{"use_peephole", 0}};
    expect_rejected(op, in, attrs, "w must have a positive multiple of 4 columns");
    in["cs_prev"] = Tensor(f16, Shape{2, 4});
    in["h_prev"] = Tensor(f16, Shape{2, 4});
    in["w"] = Tensor(f16, Shape{20, 16});
    for (const char* n : {"wci", "wcf", "wco"}) in[n] = Tensor(f16, Shape{4});
    in["b"] = Tensor(f16, Shape{16});
    for (const std::string& n : kSeqSteps) in[n] = Tensor(f16, Shape{2, 2, 4});
    expect_rejected(
        op, in, attrs,
        "i must have shape [10, 2, 4] (time_len, batch_size, cell_size), got [2, 2, 4]");
    in["x"] = Tensor(f16, Shape{2, 2, 16});
    expect_rejected(op, in, attrs, "seq_len_max must be between 0 and 2 (time_len of x), got 10");
  }
}

// Peephole vectors shorter than H made TF's kernels read (LSTMBlockCell, BlockLSTM) or write
// (LSTMBlockCellGrad's wc*_grad) out of bounds. Ours: every peephole must be [H] on every LSTM
// op, even with use_peephole false, and the error names it.
TEST(TFCrashInputs, ShortPeepholeOnEveryLstmOp) {
  std::mt19937_64 rng(5);
  const std::int64_t H = 4;
  for (const std::string& op : {"LSTMBlockCell", "LSTMBlockCellGrad", "gradients.LSTMBlockCell",
                                "BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2"}) {
    for (const std::string& peephole : {"wci", "wcf", "wco"}) {
      for (bool use_peephole : {false, true}) {
        for (std::int64_t length : {0, 3}) {
          Inputs in =
              is_seq(op) ? seq_inputs(op, rng, 3, 2, 3, H, 3) : cell_inputs(op, rng, 2, 3, H);
          in[peephole] = uniform(DType::kFloat32, Shape{length}, rng);
          const AttrMap attrs =
              is_seq(op) ? seq_attrs(op, use_peephole) : AttrMap{{"use_peephole", use_peephole}};
          expect_rejected(
              op, in, attrs,
              peephole + " must have shape [4] (cell_size), got [" + std::to_string(length) + "]");
        }
      }
    }
  }
}

}  // namespace
}  // namespace blockrnn
