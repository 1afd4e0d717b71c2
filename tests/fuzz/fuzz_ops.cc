// libFuzzer target: drives every op (or the ops whose name contains BLOCKRNN_FUZZ_OPS) through
// the public C++ API with arbitrary ranks, shapes (zero, huge, mismatched), dtypes, attrs
// and seq_len_max values. Every input must yield success or blockrnn::Error — never a crash,
// a leak or a sanitizer report (the binary is built with ASan + UBSan).
//
// Input layout (read front to back; missing bytes read as 0), so seeds are easy to write
// (tests/fuzz/make_seeds.py):
//   u8 op index (mod the number of selected ops)
//   u8 flags: bit0 consistent shapes from (T,B,I,H); bit1 caller-owned outputs;
//             bit2 infer only; bits3-4 dtype (0 f32, 1 f64, 2 f16, 3 int64)
//   u8 T, u8 B, u8 I, u8 H      (consistent mode: small sizes, each mod 12)
//   per input: u8 mutation  (0-191 none; 192-207 rank change; 208-223 one dim changed;
//              224-239 dtype changed; 240-247 huge dim; 248-255 negative dim)
//              u8 mutation argument
//   i64 seq_len_max (little-endian)
//   per attr: u8 present, f64 value
//   the rest: element values (f32 bit patterns, cycled)
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "op_shapes.h"

namespace {

using blockrnn::DType;
using blockrnn::Shape;
using blockrnn::Tensor;
using blockrnn::TensorView;

class Bytes {
 public:
  Bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint8_t u8() { return pos_ < n_ ? d_[pos_++] : 0; }
  template <typename T>
  T read() {
    T v{};
    std::uint8_t buf[sizeof(T)] = {};
    for (std::size_t k = 0; k < sizeof(T); ++k) buf[k] = u8();
    std::memcpy(&v, buf, sizeof v);
    return v;
  }
  // Element values: 4-byte float bit patterns taken cyclically from the whole input.
  float value() {
    if (n_ == 0) return 0.25f;
    std::uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) bits = bits << 8 | d_[(cycle_++) % n_];
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }

 private:
  const std::uint8_t* d_;
  std::size_t n_, pos_ = 0, cycle_ = 0;
};

const std::vector<const blockrnn::OpDef*>& selected_ops() {
  static const std::vector<const blockrnn::OpDef*> ops = [] {
    std::vector<const blockrnn::OpDef*> v;
    const char* filter = std::getenv("BLOCKRNN_FUZZ_OPS");
    for (const blockrnn::OpDef& d : blockrnn::list_ops()) {
      if (filter == nullptr || d.name.find(filter) != std::string::npos) v.push_back(&d);
    }
    return v;
  }();
  return ops;
}

constexpr std::int64_t kMaxBacked = 1 << 16;  // elements we actually allocate per tensor

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& ops = selected_ops();
  if (ops.empty()) return 0;
  Bytes in(data, size);
  const blockrnn::OpDef& def = *ops[in.u8() % ops.size()];
  const std::uint8_t flags = in.u8();
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64};
  const DType base = dtypes[(flags >> 3) & 3];
  const std::int64_t T = in.u8() % 12, B = in.u8() % 12, I = in.u8() % 12, H = in.u8() % 12;

  std::vector<Shape> shapes;
  std::vector<DType> types;
  bool backed = true;
  for (const std::string& name : def.inputs) {
    Shape s = blockrnn::testing::input_shape(def.name, name, T, B, I, H);
    DType t = name == "seq_len_max" ? DType::kInt64 : base;
    const std::uint8_t m = in.u8(), arg = in.u8();
    std::int64_t dims[Shape::kMaxRank] = {};
    for (int k = 0; k < s.rank(); ++k) dims[k] = s[k];
    int rank = s.rank();
    if (!(flags & 1)) {  // arbitrary mode: small random dims of the same rank
      for (int k = 0; k < rank; ++k) dims[k] = arg % 7 + k;
    }
    if (m >= 192 && m < 208) {
      rank = arg % 5;
      for (int k = 0; k < rank; ++k) dims[k] = (arg >> k) % 5;
    } else if (m >= 208 && m < 224 && rank > 0) {
      dims[arg % rank] += 1 + arg % 3;
    } else if (m >= 224 && m < 240) {
      t = dtypes[arg % 4];
    } else if (m >= 240 && m < 248 && rank > 0) {
      dims[arg % rank] = std::int64_t{1} << (20 + arg % 43);
    } else if (m >= 248 && rank > 0) {
      dims[arg % rank] = -1 - arg % 3;
    }
    s = Shape::from_dims(dims, rank);
    std::int64_t n = 0;
    try {
      n = s.num_elements();
    } catch (const blockrnn::Error&) {
      n = kMaxBacked + 1;  // negative or overflowing: never backed
    }
    if (n > kMaxBacked) backed = false;
    shapes.push_back(s);
    types.push_back(t);
  }
  const std::int64_t seq_len_max = in.read<std::int64_t>();
  blockrnn::AttrMap attrs;
  for (const blockrnn::AttrDef& a : def.attrs) {
    const std::uint8_t present = in.u8();
    const double v = in.read<double>();
    if (present & 1) {
      // bit1: the raw double (NaN, inf, 2.0 for a bool...); else a well-formed value.
      const bool is_bool = a.kind == blockrnn::AttrKind::kBool;
      attrs[a.name] = (present & 2) ? v : (is_bool ? double(present >> 7) : v);
    }
  }

  // Back every tensor with real memory of its declared size when small; huge ones get a
  // one-element buffer and are only ever validated (infer), never computed on.
  std::vector<Tensor> storage;
  std::vector<TensorView> views;
  static const double dummy[8] = {};
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    std::int64_t n = 0;
    try {
      n = shapes[k].num_elements();
    } catch (const blockrnn::Error&) {
      n = -1;
    }
    if (n < 0 || n > kMaxBacked) {
      views.emplace_back(dummy, types[k], shapes[k]);
      continue;
    }
    Tensor t(types[k], shapes[k]);
    for (std::int64_t e = 0; e < n; ++e) {
      const float v = in.value();
      switch (types[k]) {
        case DType::kFloat32:
          t.data_as<float>()[e] = v;
          break;
        case DType::kFloat64:
          t.data_as<double>()[e] = v;
          break;
        case DType::kFloat16:
          t.data_as<blockrnn::Half>()[e] = blockrnn::float_to_half(v);
          break;
        case DType::kInt64:
          t.data_as<std::int64_t>()[e] = def.inputs[k] == "seq_len_max" ? seq_len_max : e;
          break;
      }
    }
    views.push_back(t.view());
    storage.push_back(std::move(t));
  }

  try {
    const blockrnn::OutputSpec spec = blockrnn::infer_outputs(def.name, views, attrs);
    if (!backed || (flags & 4)) return 0;
    // Valid but too big to be worth computing (each output is at most 2^62 bytes, so checking
    // them one by one cannot overflow).
    for (const Shape& s : spec.shapes) {
      if (s.num_elements() > 8 * kMaxBacked) return 0;
    }
    if (flags & 2) {
      std::vector<Tensor> outs;
      std::vector<blockrnn::MutableTensorView> out_views;
      for (const Shape& s : spec.shapes) {
        outs.emplace_back(spec.dtype, s);
        out_views.push_back(outs.back().mutable_view());
      }
      blockrnn::run_op(def.name, views, attrs, out_views);
    } else {
      (void)blockrnn::run_op(def.name, views, attrs);
    }
  } catch (const blockrnn::Error&) {
    // The library's error: an accepted outcome.
  }
  return 0;
}
