// Every op the generic tester (test_ops.cc) checks, read from tests/data/op_table.json — the one
// table the C++ and the Python testers (tests/python/optable.py) share: which forward op produces
// a grad op's inputs, which attr values to draw, whether finite differences apply, and the
// rule that derives each comparison's tolerance from its accumulation depth, with the reason
// for its constant (docs/tolerances.md explains them).
//
// Inputs and their shape family in (T, B, I, H) come from the registry's OpDef names through
// op_shapes.h (shared with the fuzzer and the benchmarks). An input name the shape table does not
// know is an optional trailing input the tester leaves out (e.g. a new `seq_lengths`), so an op
// growing one keeps its row unchanged. Adding an op is one row of the JSON file.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "blockrnn/tensor.h"

namespace blockrnn::testing {

// One comparison's bound for "this dtype's result against the float64 reference path on the
// same (dtype-representable) inputs" (and the fast path against the reference path in that
// dtype): element-wise |a − b| ≤ rtol·|b| + atol·max(1, max|b|), and in aggregate
// NMSE = Σ(a − b)² / Σb² ≤ nmse.
struct Tolerance {
  double rtol, atol, nmse;
};

// The table's rule (op_table.json, "tolerances"): tol = c·log2(K·T)·eps(dtype), K = I + H the
// GEMMs' reduction length, T the steps; rtol = atol = tol, plus the storage rounding of float16
// and bfloat16 in rtol; nmse = (rtol + atol)². oneDNN's benchdnn sizes its comparisons the same way
// (setup_cmp): the rounding error of a sum of n terms accumulated in blocks or pairs grows like
// log2(n)·eps.
struct ToleranceRule {
  double c = 0;
  // The machine epsilon of the type the arithmetic runs in: float32 for float16, bfloat16 and
  // float32; float64's.
  double eps_float32 = 0, eps_float64 = 0;
  // Each stored float16 / bfloat16 value rounded relative to itself (op_table.json says how much).
  double float16_storage = 0, bfloat16_storage = 0;
  // bfloat16 products (an op row's `bf16_products`): the most one product with bfloat16
  // operands moves a result, relative to max(1, max|b|) (op_table.json, "bf16_products").
  double bf16_product = 0;

  // `products`: P > 0 where the op's fast path multiplies bfloat16 operands in a bfloat16 call,
  // P of them in sequence per step; each of the at most P·T + 1 such products an output depends
  // on in sequence adds bf16_product to atol.
  Tolerance operator()(DType dt, std::int64_t K, std::int64_t T, int products = 0) const {
    const double eps = dt == DType::kFloat64 ? eps_float64 : eps_float32;
    const double storage = dt == DType::kFloat16    ? float16_storage
                           : dt == DType::kBFloat16 ? bfloat16_storage
                                                    : 0.0;
    // log2 of at least 2: a depth of 1 still rounds its product and its activation.
    const double depth = std::max<double>(2.0, static_cast<double>(K) * static_cast<double>(T));
    const double accumulation = c * std::log2(depth) * eps;
    // Storing a 16-bit float rounds each value relative to itself: it adds to rtol only.
    const double rtol = accumulation + storage;
    const double atol =
        accumulation +
        (products > 0 && dt == DType::kBFloat16
             ? bf16_product * static_cast<double>(products * std::max<std::int64_t>(T, 1) + 1)
             : 0.0);
    // The NMSE the element-wise bound allows when every element is as large as the largest.
    return Tolerance{rtol, atol, (rtol + atol) * (rtol + atol)};
  }
};

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
  bool full_gradient = false;
  // Its fast path multiplies bfloat16 operands in a bfloat16 call, this many recurrent products
  // in sequence per step (ToleranceRule); 0: it computes bfloat16 in float32.
  int bf16_products = 0;
  std::vector<AttrChoice> attrs;  // of the forward op (a grad op takes the ones it declares)
  // Sizes ('B', 'H') that must be positive: zero is an InvalidArgument as in TensorFlow
  // (LSTMBlockCell(Grad) refuses an empty batch or cell; BlockLSTMGrad(V2): w needs a positive
  // multiple of 4 columns).
  std::string positive;
  std::string positive_error;  // what the error then says
};

// The parsed table: the op rows, the tolerance rule, the finite-difference bound and the attrs
// fixed for it.
struct OpTable {
  std::vector<OpTest> ops;
  ToleranceRule tolerance;
  double finite_difference_rel = 0;
  std::vector<std::pair<std::string, double>> finite_difference_attrs;
};

inline OpTable load_op_table(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open the op table " + path);
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(f);
  OpTable table;
  table.finite_difference_rel = j.at("finite_differences").at("rel").get<double>();
  for (const auto& [name, value] : j.at("finite_differences").at("attrs").items())
    table.finite_difference_attrs.emplace_back(name, value.get<double>());
  const nlohmann::ordered_json& tol = j.at("tolerances");
  table.tolerance.c = tol.at("c").get<double>();
  table.tolerance.eps_float32 = tol.at("eps").at("float32").get<double>();
  table.tolerance.eps_float64 = tol.at("eps").at("float64").get<double>();
  table.tolerance.float16_storage = tol.at("storage").at("float16").get<double>();
  table.tolerance.bfloat16_storage = tol.at("storage").at("bfloat16").get<double>();
  table.tolerance.bf16_product = tol.at("bf16_products").at("per_product").get<double>();
  for (const nlohmann::ordered_json& row : j.at("ops")) {
    OpTest t;
    t.op = row.at("op").get<std::string>();
    t.forward = row.value("forward", "");
    t.full_gradient = row.value("full_gradient", false);
    t.bf16_products = row.value("bf16_products", 0);
    if (row.contains("attrs")) {
      for (const auto& [name, values] :
           j.at("attr_sets").at(row.at("attrs").get<std::string>()).items()) {
        AttrChoice a{name, {}};
        for (const nlohmann::ordered_json& v : values)
          a.values.push_back(v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>());
        t.attrs.push_back(std::move(a));
      }
    }
    t.positive = row.value("positive", "");
    t.positive_error = row.value("positive_error", "");
    table.ops.push_back(std::move(t));
  }
  return table;
}

inline const OpTable& op_table() {
  static const OpTable table = load_op_table(BLOCKRNN_TEST_DATA_DIR "/op_table.json");
  return table;
}

inline const std::vector<OpTest>& op_tests() {
  return op_table().ops;
}

inline const OpTest& find_op_test(const std::string& op) {
  for (const OpTest& t : op_tests()) {
    if (t.op == op) return t;
  }
  throw std::invalid_argument("no op_tests() row for " + op);
}

}  // namespace blockrnn::testing
