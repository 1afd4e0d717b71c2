// Every op the generic tester (test_ops.cc) checks, declared once: which forward op produces a
// grad op's inputs, which attr values to draw, whether finite differences apply, and the
// tolerance of each dtype with its reason (docs/tolerances.md lists the same table).
//
// Inputs and their shape family in (T, B, I, H) come from the registry's OpDef names through
// op_shapes.h (shared with the fuzzer and the benchmarks). An input name the shape table does not
// know is an optional trailing input the tester leaves out (e.g. a new `seq_lengths`), so an op
// growing one keeps its row unchanged. Adding an op is one row in kOpTests.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "blockrnn/tensor.h"

namespace blockrnn::testing {

// One dtype's bound for "this dtype's result against the float64 reference path on the same
// (dtype-representable) inputs": element-wise |a − b| ≤ rtol·|b| + atol·max(1, max|b|), and
// in aggregate NMSE = Σ(a − b)² / Σb² ≤ nmse. The same bound holds for the fast path against
// the reference path in that dtype. `reason` says where the size comes from.
struct Tolerance {
  double rtol, atol, nmse;
  const char* reason;
};

// Indexed by dtype: float16, float32, float64.
using Tolerances = std::array<Tolerance, 3>;

inline constexpr Tolerance kHalf = {
    1.0 / 1024, 1e-5, 1e-6,
    "float16 computes in float32 and rounds each stored value once (2^-11 relative, two "
    "roundings: the grad op's float16 inputs and its outputs); atol covers float32 sums of "
    "terms that cancel"};
inline constexpr Tolerance kSingleCell = {
    1e-5, 1e-6, 1e-11,
    "float32 GEMM over I+H terms in another order than float64: a few ulp times sqrt(I+H)"};
inline constexpr Tolerance kSingleSequence = {
    5e-5, 1e-5, 1e-10,
    "float32 errors of a cell compound through T steps of the recurrence, and weight gradients "
    "sum T·B rows"};
inline constexpr Tolerance kDoubleCell = {
    1e-13, 1e-14, 1e-26, "float64 GEMM accumulation order: a few ulp times sqrt(I+H)"};
inline constexpr Tolerance kDoubleSequence = {
    1e-12, 1e-13, 1e-24, "float64 errors compound through T steps; weight gradients sum T·B rows"};

inline constexpr Tolerances kCell = {kHalf, kSingleCell, kDoubleCell};
inline constexpr Tolerances kSequence = {kHalf, kSingleSequence, kDoubleSequence};

// SPEC A7: analytic float64 gradients against central differences (ε = 1e-6).
inline constexpr double kFiniteDifferenceRel = 1e-6;

struct AttrChoice {
  std::string name;
  std::vector<double> values;  // one is drawn per case; the first is used where fixed
};

struct OpTest {
  std::string op;
  // For a grad op: the forward op whose inputs and outputs it takes (the rest of its inputs are
  // random upstream gradients). Empty for a forward op.
  std::string forward;
  // True where the op's outputs are the full gradients of `forward`'s inputs (outputs named as
  // the input, or the input name + "_grad"): then they are checked by finite differences of
  // L = Σ upstream ⊙ forward output. TF's partial cell grads (GRUBlockCellGrad,
  // LSTMBlockCellGrad) return pre-activation terms instead; they are covered by the full grads
  // built on them and by the golden files.
  bool full_gradient;
  Tolerances tol;
  std::vector<AttrChoice> attrs;  // of the forward op (a grad op takes the ones it declares)
  // Sizes ('B', 'H') that must be positive: zero is an InvalidArgument as in TensorFlow
  // (LSTMBlockCell(Grad): #58270; BlockLSTMGrad(V2): w needs a positive multiple of 4 columns).
  std::string positive = "";
  std::string positive_error = "";  // what the error then says
};

inline const std::vector<AttrChoice>& lstm_attrs() {
  // cell_clip ≤ 0 turns clipping off; 0.5 clips often. use_peephole both ways.
  static const std::vector<AttrChoice> a = {
      {"forget_bias", {1, 0, 0.5}}, {"cell_clip", {3, -1, 0.5}}, {"use_peephole", {0, 1}}};
  return a;
}
inline const std::vector<AttrChoice>& lstm_v2_attrs() {
  static const std::vector<AttrChoice> a = {{"cell_clip", {0, -1, 0.5}}, {"use_peephole", {0, 1}}};
  return a;
}

// Clipping passes the gradient straight through (TensorFlow's kernels, SPEC B), which is not the
// derivative where it clips: finite differences run with clipping off.
inline constexpr std::pair<const char*, double> kFiniteDifferenceAttrs[] = {{"cell_clip", -1}};

inline const std::vector<OpTest>& op_tests() {
  static const std::vector<OpTest> t = {
      {"GRUBlockCell", "", false, kCell, {}},
      {"GRUBlockCellGrad", "GRUBlockCell", false, kCell, {}},
      {"gradients.GRUBlockCell", "GRUBlockCell", true, kCell, {}},
      {"LSTMBlockCell", "", false, kCell, lstm_attrs(), "BH", "cs_prev is empty"},
      {"LSTMBlockCellGrad", "LSTMBlockCell", false, kCell, lstm_attrs(), "BH", "cs_prev is empty"},
      {"gradients.LSTMBlockCell", "LSTMBlockCell", true, kCell, lstm_attrs(), "BH",
       "cs_prev is empty"},
      {"BlockLSTM", "", false, kSequence, lstm_attrs()},
      {"BlockLSTMGrad", "BlockLSTM", true, kSequence, lstm_attrs(), "H",
       "w must have a positive multiple of 4 columns"},
      {"BlockLSTMV2", "", false, kSequence, lstm_v2_attrs()},
      {"BlockLSTMGradV2", "BlockLSTMV2", true, kSequence, lstm_v2_attrs(), "H",
       "w must have a positive multiple of 4 columns"},
      {"BlockGRU", "", false, kSequence, {}},
      {"BlockGRUGrad", "BlockGRU", true, kSequence, {}},
      {"BlockGRUResetAfter", "", false, kSequence, {}},
      {"BlockGRUResetAfterGrad", "BlockGRUResetAfter", true, kSequence, {}},
  };
  return t;
}

inline const OpTest& find_op_test(const std::string& op) {
  for (const OpTest& t : op_tests()) {
    if (t.op == op) return t;
  }
  throw std::invalid_argument("no op_tests() row for " + op);
}

inline int dtype_index(DType dt) {
  return dt == DType::kFloat16 ? 0 : dt == DType::kFloat32 ? 1 : 2;
}

}  // namespace blockrnn::testing
