// TensorFlow parity without Python: replays golden cases produced from tensorflow-cpu by
// tools/make_golden.py (format: docs/golden-format.md) through the generic run_op interface.
// Regenerate with:  .venv/bin/python tools/make_golden.py --out tests/golden
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_util.h"

namespace blockrnn {
namespace {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct GoldenCase {
  std::string op;
  AttrMap attrs;
  std::vector<NamedTensor> inputs, outputs;
};

class Reader {
 public:
  explicit Reader(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  template <typename T>
  T read() {
    T v;
    need(sizeof v);
    std::memcpy(&v, bytes_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = read<std::uint32_t>();
    need(n);
    std::string s(bytes_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  void raw(void* dst, std::size_t n) {
    need(n);
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  void need(std::size_t n) const {
    if (bytes_.size() - pos_ < n) throw std::runtime_error("golden file truncated");
  }
  std::vector<char> bytes_;
  std::size_t pos_ = 0;
};

NamedTensor read_tensor(Reader& r) {
  NamedTensor t;
  t.name = r.str();
  const auto code = r.read<std::uint8_t>();
  const DType dtypes[] = {DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kInt64};
  if (code > 3) throw std::runtime_error("bad dtype code");
  const auto rank = r.read<std::uint32_t>();
  std::int64_t dims[Shape::kMaxRank];
  if (rank > Shape::kMaxRank) throw std::runtime_error("bad rank");
  for (std::uint32_t k = 0; k < rank; ++k) dims[k] = r.read<std::int64_t>();
  t.tensor = Tensor(dtypes[code], Shape::from_dims(dims, static_cast<int>(rank)));
  r.raw(t.tensor.data(), t.tensor.num_bytes());
  return t;
}

std::vector<GoldenCase> load(const std::string& path) {
  Reader r(path);
  char magic[8];
  r.raw(magic, 8);
  if (std::string(magic, 8) != "BRNNGOLD") throw std::runtime_error("bad magic in " + path);
  const auto version = r.read<std::uint32_t>();
  if (version != 1) throw std::runtime_error("unsupported golden format version");
  const auto n = r.read<std::uint32_t>();
  std::vector<GoldenCase> cases(n);
  for (GoldenCase& c : cases) {
    c.op = r.str();
    const auto na = r.read<std::uint32_t>();
    for (std::uint32_t k = 0; k < na; ++k) {
      std::string name = r.str();
      c.attrs[name] = r.read<double>();
    }
    const auto ni = r.read<std::uint32_t>();
    for (std::uint32_t k = 0; k < ni; ++k) c.inputs.push_back(read_tensor(r));
    const auto no = r.read<std::uint32_t>();
    for (std::uint32_t k = 0; k < no; ++k) c.outputs.push_back(read_tensor(r));
  }
  if (!r.done()) throw std::runtime_error("trailing bytes in " + path);
  return cases;
}

// docs/tolerances.md: cell ops within 1e-5, sequence ops within 1e-4 (float32, unit-scale inputs);
// float16 within TensorFlow's own fp16 tolerance.
double tolerance(const GoldenCase& c) {
  if (c.inputs.back().tensor.dtype() == DType::kFloat16) return 8e-3;
  return c.op.rfind("Block", 0) == 0 ? 1e-4 : 1e-5;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesTensorFlow) {
  const std::vector<GoldenCase> cases = load(GetParam());
  ASSERT_FALSE(cases.empty());
  int index = 0;
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(GetParam() + " case " + std::to_string(index++) + " op " + c.op +
                 " — regenerate with: .venv/bin/python tools/make_golden.py --out tests/golden");
    std::vector<TensorView> ins;
    for (const NamedTensor& t : c.inputs) ins.push_back(t.tensor);
    const std::vector<Tensor> got = run_op(c.op, ins, c.attrs);
    const OpDef& def = find_op(c.op);
    for (const NamedTensor& want : c.outputs) {
      std::size_t k = 0;
      while (k < def.outputs.size() && def.outputs[k] != want.name) ++k;
      ASSERT_LT(k, def.outputs.size()) << "unknown output " << want.name;
      const double tol = tolerance(c);
      EXPECT_TRUE(testing::all_close(got[k], want.tensor, tol, tol)) << "output " << want.name;
    }
  }
}

std::vector<std::string> golden_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(BLOCKRNN_GOLDEN_DIR)) {
    if (e.path().extension() == ".bin") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

INSTANTIATE_TEST_SUITE_P(TensorFlow, Golden, ::testing::ValuesIn(golden_files()),
                         [](const auto& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

TEST(GoldenFiles, Present) {
  EXPECT_FALSE(golden_files().empty());
}

}  // namespace
}  // namespace blockrnn
