// TensorFlow's crash reports as regression tests (docs/ops.md), through the C++ API.
//
// Every input behind a TensorFlow crash report about the LSTM block ops is one case of
// tests/data/tf_crash_inputs.json (shared with tests/python/test_tf_crash_inputs.py; its "about"
// says what a case holds and its "issues" what each report was). Each is replayed through
// blockrnn::run_op, which must throw blockrnn::Error(kInvalidArgument) naming the op and the
// argument, or, where the input is valid under docs/design.md, return correctly shaped outputs on
// the fast and the reference paths. Run under ASan/UBSan with --gtest_filter='*Crash*'.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "op_shapes.h"
#include "test_util.h"

namespace blockrnn {
namespace {

using nlohmann::json;

const json& crash_data() {
  static const json data = [] {
    std::ifstream in(BLOCKRNN_TEST_DATA_DIR "/tf_crash_inputs.json");
    if (!in)
      throw std::runtime_error("cannot read " BLOCKRNN_TEST_DATA_DIR "/tf_crash_inputs.json");
    return json::parse(in);
  }();
  return data;
}

DType dtype_of(const std::string& name) {
  if (name == "float16") return DType::kFloat16;
  if (name == "float32") return DType::kFloat32;
  if (name == "float64") return DType::kFloat64;
  if (name == "int64") return DType::kInt64;
  throw std::invalid_argument("unknown dtype " + name);
}

Shape shape_of(const json& dims) {
  const std::vector<std::int64_t> d = dims.get<std::vector<std::int64_t>>();
  return Shape::from_dims(d.data(), static_cast<int>(d.size()));
}

// `values`: "uniform" ([0, 1)), "small_ints" (integers in [0, 64)), a number, or a list.
Tensor make_tensor(DType dtype, const Shape& shape, const json& values, std::mt19937_64& rng) {
  Tensor t(dtype, shape);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::int64_t e = 0; e < t.num_elements(); ++e) {
    double v = 0;
    if (values.is_string() && values == "uniform") {
      v = unit(rng);
    } else if (values.is_string() && values == "small_ints") {
      v = std::floor(64 * unit(rng));
    } else if (values.is_array()) {
      v = e < static_cast<std::int64_t>(values.size()) ? values[e].get<double>() : 0;
    } else if (dtype == DType::kInt64) {
      t.data_as<std::int64_t>()[e] = values.get<std::int64_t>();
      continue;
    } else {
      v = values.get<double>();
    }
    testing::set(t, e, v);
  }
  return t;
}

// The case's inputs in the OpDef's order: an override from "inputs", else the shape its name has
// under "dims"; an input named by neither is an optional trailing input, left out.
std::vector<Tensor> case_inputs(const json& c, std::mt19937_64& rng) {
  const std::string op = c["op"];
  const DType dtype = dtype_of(c["dtype"]);
  const json overrides = c.value("inputs", json::object());
  std::vector<Tensor> in;
  const OpDef& def = find_op(op);
  const std::size_t required = def.inputs.size() - std::size_t(def.num_optional_inputs);
  for (const std::string& name : def.inputs) {
    if (overrides.contains(name)) {
      const json& o = overrides[name];
      const DType dt = o.contains("dtype") ? dtype_of(o["dtype"]) : dtype;
      in.push_back(make_tensor(dt, shape_of(o["shape"]), o.value("values", c["values"]), rng));
    } else if (c.contains("dims") && in.size() < required) {
      const json& d = c["dims"];
      if (name == "seq_len_max") {
        in.push_back(testing::scalar_int64(d["S"].get<std::int64_t>()));
      } else {
        in.push_back(make_tensor(
            dtype, testing::input_shape(op, name, d.value("T", 1), d["B"], d["I"], d["H"]),
            c["values"], rng));
      }
    } else {
      break;
    }
  }
  return in;
}

// Replays case `k`: an InvalidArgument containing "<op>: <error>", or (both paths) outputs of
// the listed shapes, all zero where the case says so.
void replay(std::size_t k) {
  const json& c = crash_data()["cases"][k];
  const std::string op = c["op"];
  SCOPED_TRACE("case " + std::to_string(k) + ": " + c.dump());
  std::mt19937_64 rng(k);
  const std::vector<Tensor> in = case_inputs(c, rng);
  const std::vector<TensorView> views(in.begin(), in.end());
  AttrMap attrs;
  for (const auto& [name, value] : c["attrs"].items()) attrs[name] = value.get<double>();
  if (c.contains("error")) {
    testing::expect_invalid([&] { (void)run_op(op, views, attrs); },
                            op + ": " + c["error"].get<std::string>());
    return;
  }
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    const std::vector<Tensor> out = run_op(op, views, attrs);
    ASSERT_EQ(out.size(), c["outputs"].size());
    for (std::size_t j = 0; j < out.size(); ++j) {
      EXPECT_EQ(out[j].shape(), shape_of(c["outputs"][j])) << find_op(op).outputs[j];
      EXPECT_EQ(out[j].dtype(), dtype_of(c["dtype"]));
      if (!c.value("zeros", false)) continue;
      for (std::int64_t e = 0; e < out[j].num_elements(); ++e) {
        ASSERT_EQ(testing::get(out[j], e), 0.0) << find_op(op).outputs[j] << " element " << e;
      }
    }
  }
}

// One test per TensorFlow issue (its cases in a loop) keeps ctest's count small.
class TFCrashInputs : public ::testing::TestWithParam<std::string> {};

TEST_P(TFCrashInputs, RejectedCleanlyOrValid) {
  const json& cases = crash_data()["cases"];
  int n = 0;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    if (cases[k]["issue"] != GetParam()) continue;
    ++n;
    replay(k);
  }
  EXPECT_GT(n, 0);
}

std::vector<std::string> issues() {
  std::vector<std::string> names;
  for (const auto& [name, about] : crash_data()["issues"].items()) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Issue, TFCrashInputs, ::testing::ValuesIn(issues()), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n) {
    if (ch == '-') ch = '_';
  }
  return n;
});

// Every case belongs to a listed issue.
TEST(TFCrashData, EveryCaseNamesAListedIssue) {
  for (const json& c : crash_data()["cases"]) {
    EXPECT_TRUE(crash_data()["issues"].contains(c["issue"].get<std::string>())) << c.dump();
  }
}

}  // namespace
}  // namespace blockrnn
