// libFuzzer target: drives every op (or the ops whose name contains BLOCKRNN_FUZZ_OPS) through
// the public C++ API with arbitrary ranks, shapes (zero, huge, mismatched, huge-but-empty),
// dtypes, attrs (NaN, ±inf, subnormals, beyond float32, bools other than 0/1, unknown names,
// missing required ones) and seq_len_max values, on the fast and the reference path, under a
// small memory limit and with a cancel check that fires; or, with the C API byte, through the
// C API with strided inputs. Every input must yield success or blockrnn::Error (a status, in C)
// — never a crash, a leak, a sanitizer report or a hang (the binary is built with ASan + UBSan;
// scripts/test.sh runs it with -timeout=10) — and strides that overflow must be refused.
//
// Input layout (read front to back; missing bytes read as 0; every section has a fixed size,
// so a byte means the same whatever op the first byte picks), so seeds are easy to write
// (tests/fuzz/make_seeds.py):
//   u8 op index (mod the number of selected ops)
//   u8 flags: bit0 consistent shapes from (T,B,I,H); bit1 caller-owned outputs;
//             bit2 infer only; bits3-4 dtype (0 f32, 1 f64, 2 f16, 3 int64);
//             bit5 consistent shapes with (T,B,I,H) from kDims (huge-but-empty shapes: a zero
//             dim beside 2^40, 2^62 or INT64_MAX; H is clamped to INT64_MAX / 4 and I to
//             INT64_MAX - H so that I + H and 4H stay in int64); bit6 seq_len_max = T (the
//             i64 below is then ignored); bit7 reference mode (set_force_reference)
//   u8 T, u8 B, u8 I, u8 H      (consistent mode: small sizes, each mod 12; bit5: kDims[v % 16])
//   19 x (u8 mutation, u8 argument), for the op's inputs in order (the rest unused):
//              mutation 0-191 none; 192-207 rank change; 208-223 one dim changed;
//              224-239 dtype changed; 240-247 huge dim; 248-255 negative dim
//   i64 seq_len_max (little-endian)
//   3 x (u8 selector s, f64 value v), for the op's attrs in order (the rest unused but for
//             mode 3):
//             s bit0: given (else missing: the default, or an error for a required attr);
//             mode (s >> 1) & 3: 0 well-formed (v; a bool is s >> 7), 1 the raw double v for
//             any kind (NaN, 2.0 for a bool...), 2 kSpecial[s >> 3] (NaN, ±inf, float32 and
//             float64 subnormals, 1e39, ±1e300...), 3 an unknown or foreign attr name
//             kNames[(s >> 3) % 8] = v instead of this attr
//   u8 memory limit: 0 the default, else set_memory_limit(1 KiB << ((m - 1) % 25)); restored
//   u8 cancel: 0 none, else a cancel check that answers yes at its ((c - 1) % 4 + 1)-th poll
//             (polled every 20 ms by sequence ops: only long sequences reach it); removed after
//   u8 empty data: the pointer every empty tensor (inputs and caller-owned outputs) gets, which
//             never has storage: 0 nullptr, 1 a real 64-byte buffer, 2 an unmapped address
//   u8 C API: 0 the C++ API; else the call goes through blockrnn_infer_outputs (with bit2) or
//             blockrnn_prepare_call and blockrnn_run_op on caller-owned outputs, with strides
//             on every input of rank >= 1 (seq_lengths included): dense row-major ones, except
//             in dimension (c >> 3) % rank, whose stride is kStrides[c & 7] (see there)
//   the rest: element values (f32 bit patterns, cycled over the whole input)
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "blockrnn/c_api.h"
#include "fuzz_bytes.h"
#include "op_shapes.h"

namespace {

using blockrnn::DType;
using blockrnn::Shape;
using blockrnn::Tensor;
using blockrnn::TensorView;
using blockrnn::fuzz::Bytes;

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

// BLOCKRNN_FUZZ_VERBOSE=1: print each input's op and outcome (for replaying seeds by hand).
bool verbose() {
  static const bool on = std::getenv("BLOCKRNN_FUZZ_VERBOSE") != nullptr;
  return on;
}

// The most any op has: BlockLSTMGrad(V2)'s 18 and the optional seq_lengths.
constexpr std::size_t kMaxInputs = 19, kMaxAttrs = 3;
constexpr std::int64_t kMaxBacked = 1 << 16;  // elements we actually allocate per tensor
// Multiply-adds (T·B·H·(I+H)) beyond which a valid call is only checked (prepare_call), not
// computed: keeps every run well under the 10 s timeout even on the reference path.
constexpr double kMaxWork = double(1 << 24);
constexpr std::int64_t kMaxUncancelledSteps = 1000;

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
// Flags bit5: T, B, I, H from this table. Zeros (two entries, so they come often) beside huge
// values give huge-but-empty shapes (element count 0, products of the other dims overflowing);
// T = 4096 outlasts the cancel check's 20 ms poll interval.
// clang-format off
constexpr std::int64_t kDims[16] = {
    0, 1, 2, 3, 5, 17, 64, 4096, 1000,
    std::int64_t{1} << 31, (std::int64_t{1} << 32) + 1, std::int64_t{1} << 40,
    std::int64_t{1} << 62, kI64Max / 4 + 1, kI64Max, 0};
// clang-format on

// C API mode: the stride of the chosen dimension. 0 keeps the dense stride, 1 a broadcast
// (stride 0), 2 a reversed dimension (the dense stride negated, data moved to element 0), both
// valid layouts inside the buffer; the others reach byte offsets beyond int64 or below address
// 0 for every element size whenever the dimension has more than one element, so the call must be
// refused (the library cannot know a buffer's size: a stride that stays in the address space
// but leaves the buffer is the caller's error, and is not generated).
constexpr std::int64_t kKeepStride = 1, kBroadcast = 0, kReverse = -1;
constexpr std::int64_t kStrides[8] = {kKeepStride,
                                      kBroadcast,
                                      kReverse,
                                      std::int64_t{1} << 62,
                                      kI64Max,
                                      std::numeric_limits<std::int64_t>::min(),
                                      -(std::int64_t{1} << 62),
                                      -(std::int64_t{1} << 61)};

double double_from_bits(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// Attr mode 2: the values attr handling must get right.
const double kSpecial[32] = {
    std::numeric_limits<double>::quiet_NaN(),
    -std::numeric_limits<double>::quiet_NaN(),
    double_from_bits(0x7ff0000000000001ull),  // signaling NaN
    std::numeric_limits<double>::infinity(),
    -std::numeric_limits<double>::infinity(),
    double(std::numeric_limits<float>::denorm_min()),  // float32 subnormals
    -double(std::numeric_limits<float>::denorm_min()),
    double(FLT_MIN) / 2,
    std::nextafter(double(FLT_MIN), 0.0),
    std::numeric_limits<double>::denorm_min(),  // float64 subnormals
    -std::numeric_limits<double>::denorm_min(),
    DBL_MIN / 2,
    1e-300,  // a normal float64 that is 0 as float32
    double(FLT_MAX),
    -double(FLT_MAX),
    std::nextafter(double(FLT_MAX), 1e300),  // just beyond float32: refused
    1e39,
    -1e39,
    1e300,
    -1e300,
    DBL_MAX,
    -DBL_MAX,
    0.0,
    -0.0,
    1.0,
    2.0,  // bools other than 0 / 1
    -1.0,
    0.5,
    1e-45,
    3.0,
    double(FLT_MIN),
    1e38,
};

// Attr mode 3: names that are not this op's attr (or are another op's).
const std::string kNames[8] = {
    "",
    "bogus",
    "T",
    "forget_bias",
    "cell_clip",
    "use_peephole",
    std::string("cell_clip\0x", 11),
    std::string(300, 'a'),
};

// Restores the process-wide settings a run changes, whatever it throws.
struct SettingsGuard {
  bool reference = blockrnn::force_reference();
  ~SettingsGuard() {
    blockrnn::set_memory_limit(0);
    blockrnn::set_cancel_check(nullptr, nullptr);
    blockrnn::set_force_reference(reference);
  }
};

struct CancelAfter {
  int polls_left;
  static bool check(void* user) {
    auto* self = static_cast<CancelAfter*>(user);
    return --self->polls_left <= 0;
  }
};

std::int64_t elements_or(const Shape& s, std::int64_t fallback) {
  try {
    return s.num_elements();
  } catch (const blockrnn::Error&) {
    return fallback;  // negative or overflowing
  }
}

// One input described for the C API: its shape, its strides, and the data pointer of element
// (0, 0, ...).
struct CTensor {
  std::int64_t shape[Shape::kMaxRank] = {}, strides[Shape::kMaxRank] = {};
  bool refused = false;  // its strides must be refused
  blockrnn_tensor t{};
};

// `view` with the strides of C API mode `mode`: dense row-major but for dimension
// (mode >> 3) % rank, whose stride is kStrides[mode & 7]. A tensor of rank 0, with no elements or
// not backed by memory of its size (a huge one on a 64-byte buffer: its offsets must not even
// be computed) keeps the dense description.
CTensor strided(const TensorView& view, std::uint8_t mode) {
  CTensor c;
  const int rank = view.shape.rank();
  for (int d = 0; d < rank; ++d) c.shape[d] = view.shape[d];
  c.t = {static_cast<std::int32_t>(view.dtype), rank, c.shape, nullptr,
         const_cast<void*>(view.data)};
  const std::int64_t n = elements_or(view.shape, -1);
  if (rank == 0 || n <= 0 || n > kMaxBacked) return c;
  std::int64_t dense = 1;
  for (int d = rank - 1; d >= 0; --d) {
    c.strides[d] = dense;
    dense *= view.shape[d];
  }
  const int d = (mode >> 3) % rank;
  const std::int64_t pick = kStrides[mode & 7];
  if (pick == kBroadcast) {
    c.strides[d] = 0;
  } else if (pick == kReverse) {
    c.t.data = static_cast<char*>(c.t.data) +
               (view.shape[d] - 1) * c.strides[d] * std::int64_t(blockrnn::dtype_size(view.dtype));
    c.strides[d] = -c.strides[d];
  } else if (pick != kKeepStride) {
    c.strides[d] = pick;
    c.refused = view.shape[d] > 1 && view.data != nullptr;
  }
  c.t.strides = c.strides;
  return c;
}

// The call through the C API with strided inputs (flags as the C++ path: bit2 infer only);
// computed only when `computable` (the C++ path's bounds). Any status is an accepted outcome,
// except success where a stride had to be refused.
template <class Fill>
const char* c_api_call(const blockrnn::OpDef& def, const std::vector<TensorView>& views,
                       const blockrnn::AttrMap& attrs, std::uint8_t flags, std::uint8_t mode,
                       bool computable, Fill&& fill_values) {
  std::vector<CTensor> inputs;
  bool must_refuse = false;
  for (const TensorView& v : views) {
    inputs.push_back(strided(v, mode));
    must_refuse = must_refuse || inputs.back().refused;
  }
  // The descriptors point into their CTensor, which moved into `inputs`: point them there.
  std::vector<blockrnn_tensor> tensors;
  for (CTensor& c : inputs) {
    c.t.shape = c.shape;
    if (c.t.strides != nullptr) c.t.strides = c.strides;
    tensors.push_back(c.t);
  }
  std::vector<blockrnn_attr> c_attrs;
  for (const auto& [name, value] : attrs) {
    bool is_bool = false;
    for (const blockrnn::AttrDef& a : def.attrs) {
      if (a.name == name) is_bool = a.kind == blockrnn::AttrKind::kBool;
    }
    c_attrs.push_back(is_bool ? blockrnn_attr_bool(name.c_str(), value != 0.0)
                              : blockrnn_attr_float(name.c_str(), value));
  }
  const std::size_t num_outputs = def.outputs.size();
  std::vector<blockrnn_shape> shapes(num_outputs);
  std::int32_t dtype = 0;
  auto accepted = [&](blockrnn_status s) {
    if (s == BLOCKRNN_OK && must_refuse) {
      std::fprintf(stderr, "%s: strides that overflow were accepted\n", def.name.c_str());
      std::abort();
    }
    return s == BLOCKRNN_OK;
  };
  if (flags & 4) {
    const blockrnn_status s =
        blockrnn_infer_outputs(def.name.c_str(), tensors.data(), tensors.size(), c_attrs.data(),
                               c_attrs.size(), &dtype, shapes.data(), num_outputs);
    return accepted(s) ? "valid (infer only)" : blockrnn_status_name(s);
  }
  const blockrnn_status s =
      blockrnn_prepare_call(def.name.c_str(), tensors.data(), tensors.size(), c_attrs.data(),
                            c_attrs.size(), 0, &dtype, shapes.data(), num_outputs);
  if (!accepted(s)) return blockrnn_status_name(s);
  if (!computable) return "valid (too big or too long: not computed)";
  std::vector<Tensor> outs;
  std::vector<blockrnn_tensor> out_tensors;
  for (const blockrnn_shape& shape : shapes) {
    const Shape out_shape = Shape::from_dims(shape.dims, shape.rank);
    if (out_shape.num_elements() > 8 * kMaxBacked) return "valid (outputs too big: not computed)";
    outs.emplace_back(static_cast<DType>(dtype), out_shape);
  }
  for (std::size_t k = 0; k < num_outputs; ++k) {
    out_tensors.push_back({dtype, shapes[k].rank, shapes[k].dims, nullptr, outs[k].data()});
  }
  fill_values();
  const blockrnn_status r =
      blockrnn_run_op(def.name.c_str(), tensors.data(), tensors.size(), c_attrs.data(),
                      c_attrs.size(), out_tensors.data(), num_outputs);
  accepted(r);
  return r == BLOCKRNN_OK ? "computed" : blockrnn_status_name(r);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& ops = selected_ops();
  if (ops.empty()) return 0;
  Bytes in(data, size);
  const blockrnn::OpDef& def = *ops[in.u8() % ops.size()];
  const std::uint8_t flags = in.u8();
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64};
  const DType base = dtypes[(flags >> 3) & 3];
  const bool table_dims = flags & 32, consistent = (flags & 1) || table_dims;
  std::int64_t dim4[4];
  for (std::int64_t& d : dim4) {
    const std::uint8_t v = in.u8();
    d = table_dims ? kDims[v % 16] : v % 12;
  }
  const std::int64_t T = dim4[0], B = dim4[1], I = dim4[2], H = dim4[3];
  // input_shape computes I + H and 4 * H: clamp so that neither overflows (a consistent shape
  // that large is never backed, only validated).
  const std::int64_t Hc = std::min(H, kI64Max / 4), Ic = std::min(I, kI64Max - Hc);

  std::vector<Shape> shapes;
  std::vector<DType> types;
  bool backed = true;
  // Fixed-size sections, so that a byte means the same thing whatever op the first byte picks
  // (it depends on BLOCKRNN_FUZZ_OPS): kMaxInputs mutation pairs, of which the op's inputs use
  // the first ones, and likewise kMaxAttrs attrs.
  std::uint8_t mutation[kMaxInputs][2];
  for (auto& m : mutation) m[0] = in.u8(), m[1] = in.u8();
  const std::int64_t seq_len_read = in.read<std::int64_t>();
  std::uint8_t attr_sel[kMaxAttrs];
  double attr_value[kMaxAttrs];
  for (std::size_t k = 0; k < kMaxAttrs; ++k) {
    attr_sel[k] = in.u8();
    attr_value[k] = in.read<double>();
  }
  const std::uint8_t memory = in.u8(), cancel = in.u8(), empty_data = in.u8(), c_api = in.u8();

  for (std::size_t input = 0; input < def.inputs.size(); ++input) {
    const std::string& name = def.inputs[input];
    Shape s = blockrnn::testing::input_shape(def.name, name, T, B, Ic, Hc);
    DType t = name == "seq_len_max" || name == "seq_lengths" ? DType::kInt64 : base;
    const std::uint8_t m = input < kMaxInputs ? mutation[input][0] : 0;
    const std::uint8_t arg = input < kMaxInputs ? mutation[input][1] : 0;
    std::int64_t dims[Shape::kMaxRank] = {};
    for (int k = 0; k < s.rank(); ++k) dims[k] = s[k];
    int rank = s.rank();
    if (!consistent) {  // arbitrary mode: small random dims of the same rank
      for (int k = 0; k < rank; ++k) dims[k] = arg % 7 + k;
    }
    if (m >= 192 && m < 208) {
      rank = arg % 5;
      for (int k = 0; k < rank; ++k) dims[k] = (arg >> k) % 5;
    } else if (m >= 208 && m < 224 && rank > 0) {
      dims[arg % rank] = std::min(dims[arg % rank], kI64Max - 3) + 1 + arg % 3;
    } else if (m >= 224 && m < 240) {
      t = dtypes[arg % 4];
    } else if (m >= 240 && m < 248 && rank > 0) {
      dims[arg % rank] = std::int64_t{1} << (20 + arg % 43);
    } else if (m >= 248 && rank > 0) {
      dims[arg % rank] = -1 - arg % 3;
    }
    s = Shape::from_dims(dims, rank);
    if (elements_or(s, -1) < 0 || elements_or(s, -1) > kMaxBacked) backed = false;
    shapes.push_back(s);
    types.push_back(t);
  }
  const std::int64_t seq_len_max = (flags & 64) ? T : seq_len_read;
  blockrnn::AttrMap attrs;
  for (std::size_t k = 0; k < kMaxAttrs; ++k) {
    const std::uint8_t sel = attr_sel[k];
    const double v = attr_value[k];
    if (!(sel & 1)) continue;  // missing: the default, or an error when it is required
    const int mode = (sel >> 1) & 3;
    if (mode == 3) {  // an unknown name: also for slots beyond the op's attrs (GRU has none)
      attrs[kNames[(sel >> 3) % 8]] = v;
      continue;
    }
    if (k >= def.attrs.size()) continue;
    const blockrnn::AttrDef& a = def.attrs[k];
    if (mode == 0) {
      attrs[a.name] = a.kind == blockrnn::AttrKind::kBool ? double(sel >> 7) : v;
    } else {
      attrs[a.name] = mode == 1 ? v : kSpecial[sel >> 3];
    }
  }
  SettingsGuard guard;
  blockrnn::set_force_reference(flags & 128);
  if (memory != 0) blockrnn::set_memory_limit(1024LL << ((memory - 1) % 25));
  CancelAfter cancel_after{(cancel - 1) % 4 + 1};
  if (cancel != 0) blockrnn::set_cancel_check(&CancelAfter::check, &cancel_after);

  // Back every tensor with real memory of its declared size when small; empty ones get no
  // storage (any pointer will do: the library must not read it); huge ones get a 64-byte
  // buffer and are only ever validated (infer, prepare_call), never computed on.
  alignas(64) static double dummy[8] = {};
  void* const empty_ptrs[3] = {nullptr, dummy, reinterpret_cast<void*>(std::uintptr_t{4096})};
  void* const empty_ptr = empty_ptrs[empty_data % 3];
  // Tensors are allocated (zeros) now; int64 ones, which validation reads (seq_len_max), are
  // filled now, floating ones only once the call is known to be computed (filling a few
  // [4096, 3, 5] tensors costs more than validating them).
  std::vector<Tensor> storage;
  std::vector<TensorView> views;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const std::int64_t n = elements_or(shapes[k], -1);
    if (n == 0) {
      views.emplace_back(empty_ptr, types[k], shapes[k]);
      continue;
    }
    if (n < 0 || n > kMaxBacked) {
      views.emplace_back(dummy, types[k], shapes[k]);
      continue;
    }
    Tensor t(types[k], shapes[k]);
    if (types[k] == DType::kInt64) {
      for (std::int64_t e = 0; e < n; ++e) {
        std::int64_t v = e;
        if (def.inputs[k] == "seq_len_max") {
          v = seq_len_max;
        } else if (def.inputs[k] == "seq_lengths") {
          // Mostly in [0, T], sometimes T + 1 or -1 (invalid); unsigned: T may be huge.
          const std::uint64_t span = T >= 0 && T < kI64Max - 2 ? std::uint64_t(T) + 2 : 1;
          v = static_cast<std::int64_t>((std::uint64_t(e) * 5 + std::uint64_t(seq_len_read)) %
                                        span);
          if (e == 0 && (std::uint64_t(seq_len_read) >> 20) % 7 == 0) v = -1;
        }
        t.data_as<std::int64_t>()[e] = v;
      }
    }
    views.push_back(t.view());
    storage.push_back(std::move(t));
  }
  // The optional trailing input (seq_lengths) is omitted on half of the inputs: an even
  // second mutation byte (or no byte) leaves it out, the op's TensorFlow behaviour.
  if (def.num_optional_inputs > 0) {
    const std::size_t k = def.inputs.size() - 1;
    // Validation reads every value of seq_lengths, so an unbacked one (huge: a 64-byte dummy)
    // is left out too: the library may read the [B] values a caller claims to pass.
    const std::int64_t n = elements_or(shapes[k], -1);
    if (k >= kMaxInputs || (mutation[k][1] & 1) == 0 || n < 0 || n > kMaxBacked) {
      views.pop_back();
    }
  }
  auto fill_values = [&] {
    for (Tensor& t : storage) {
      const std::int64_t n = t.shape().num_elements();
      for (std::int64_t e = 0; e < n; ++e) {
        switch (t.dtype()) {
          case DType::kFloat32:
            t.data_as<float>()[e] = in.value();
            break;
          case DType::kFloat64:
            t.data_as<double>()[e] = in.value();
            break;
          case DType::kFloat16:
            t.data_as<blockrnn::Half>()[e] = blockrnn::float_to_half(in.value());
            break;
          case DType::kBFloat16:
            t.data_as<blockrnn::BFloat16>()[e] = blockrnn::float_to_bfloat16(in.value());
            break;
          case DType::kInt64:
            break;
        }
      }
    }
  };

  // Valid calls that are only validated, not computed: too much work, or a sequence longer than
  // kMaxUncancelledSteps (T = 4096 from kDims, there to reach the cancel check) without a cancel
  // check to stop it after a few 20 ms polls (a few hundred ms each under ASan).
  auto too_long = [&] {
    return double(T) * double(B) * double(H) * (double(I) + double(H)) > kMaxWork ||
           (T > kMaxUncancelledSteps && cancel == 0 && B != 0 && H != 0);
  };
  auto call = [&]() -> const char* {
    if (flags & 4) {
      (void)blockrnn::infer_outputs(def.name, views, attrs);
      return "valid (infer only)";
    }
    // Validation and the memory check (ResourceExhausted under a small limit) on everything.
    const blockrnn::OutputSpec spec = blockrnn::prepare_call(def.name, views, attrs);
    if (!backed) return "valid (inputs too big to back: not computed)";
    // Valid but too big to be worth computing (each output is at most 2^62 bytes, so checking
    // them one by one cannot overflow).
    for (const Shape& s : spec.shapes) {
      if (s.num_elements() > 8 * kMaxBacked) return "valid (outputs too big: not computed)";
    }
    if (too_long()) return "valid (too much work, or long without a cancel check: not computed)";
    fill_values();
    if (flags & 2) {
      std::vector<Tensor> outs;
      std::vector<blockrnn::MutableTensorView> out_views;
      for (const Shape& s : spec.shapes) {
        if (s.num_elements() == 0) {
          out_views.emplace_back(empty_ptr, spec.dtype, s);
          continue;
        }
        outs.emplace_back(spec.dtype, s);
        out_views.push_back(outs.back().mutable_view());
      }
      blockrnn::run_op(def.name, views, attrs, out_views);
    } else {
      (void)blockrnn::run_op(def.name, views, attrs);
    }
    return "computed";
  };
  // The same call through the C API, the inputs described with strides (c_api_call below).
  if (c_api != 0) {
    const char* outcome =
        c_api_call(def, views, attrs, flags, c_api, backed && !too_long(), fill_values);
    if (verbose()) std::fprintf(stderr, "%s (C API): %s\n", def.name.c_str(), outcome);
    return 0;
  }
  try {
    const char* outcome = call();
    if (verbose()) std::fprintf(stderr, "%s: %s\n", def.name.c_str(), outcome);
  } catch (const blockrnn::Error& e) {
    // The library's error: an accepted outcome.
    if (verbose()) {
      std::fprintf(stderr, "%s: %s: %s\n", def.name.c_str(), blockrnn::error_code_name(e.code()),
                   e.what());
    }
  }
  return 0;
}
