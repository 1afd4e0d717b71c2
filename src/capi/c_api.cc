// The C ABI (blockrnn/c_api.h) over the by-name interface of blockrnn/ops.h: converts the C
// descriptors into TensorViews and an AttrMap, gathers strided inputs into dense copies, and
// turns every exception into a status code plus a per-thread message. Adds no op semantics.
#include "blockrnn/c_api.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/ops.h"
#include "blockrnn/tensor.h"
#include "capi_internal.h"

namespace blockrnn {
namespace capi {

thread_local std::string t_last_error;

blockrnn_status status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return BLOCKRNN_INVALID_ARGUMENT;
    case ErrorCode::kUnimplemented:
      return BLOCKRNN_UNIMPLEMENTED;
    case ErrorCode::kResourceExhausted:
      return BLOCKRNN_RESOURCE_EXHAUSTED;
    case ErrorCode::kCancelled:
      return BLOCKRNN_CANCELLED;
    case ErrorCode::kInternal:
      return BLOCKRNN_INTERNAL;
  }
  return BLOCKRNN_UNKNOWN;
}

void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

namespace {

// "GRUBlockCell: input 2 (w_ru)"
std::string describe(const char* op, const char* what, size_t index,
                     const std::vector<std::string>& names) {
  std::string s = std::string(op) + ": " + what + " " + std::to_string(index);
  if (index < names.size()) s += " (" + names[index] + ")";
  return s;
}

}  // namespace

// blockrnn_dtype and DType have the same values.
static_assert(BLOCKRNN_FLOAT16 == static_cast<int>(DType::kFloat16) &&
              BLOCKRNN_FLOAT32 == static_cast<int>(DType::kFloat32) &&
              BLOCKRNN_FLOAT64 == static_cast<int>(DType::kFloat64) &&
              BLOCKRNN_INT64 == static_cast<int>(DType::kInt64) &&
              BLOCKRNN_BFLOAT16 == static_cast<int>(DType::kBFloat16));

DType checked_dtype(int32_t dtype, const std::string& where) {
  if (dtype < BLOCKRNN_FLOAT16 || dtype > BLOCKRNN_BFLOAT16) {
    invalid(where + ": dtype " + std::to_string(dtype) + " is not a blockrnn_dtype (0..4)");
  }
  return static_cast<DType>(dtype);
}

// The shape, its dimensions non-negative and its element count addressable.
Shape checked_shape(const blockrnn_tensor& t, const std::string& where) {
  if (t.rank < 0 || t.rank > BLOCKRNN_MAX_RANK) {
    invalid(where + ": rank " + std::to_string(t.rank) + " is outside [0, " +
            std::to_string(BLOCKRNN_MAX_RANK) + "]");
  }
  if (t.rank > 0 && t.shape == nullptr) invalid(where + ": shape is NULL with rank > 0");
  const Shape shape = Shape::from_dims(t.shape, t.rank);
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape.dim(d) < 0) {
      invalid(where + ": shape " + shape.to_string() + " has a negative dimension (dimension " +
              std::to_string(d) + " is " + std::to_string(shape.dim(d)) + ")");
    }
  }
  try {
    shape.num_elements();  // throws when the product overflows int64
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  return shape;
}

namespace {

std::string strides_text(const blockrnn_tensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.rank; ++d) s += (d ? ", " : "") + std::to_string(t.strides[d]);
  return s + "]";
}

// a * b and a + b, false when the result does not fit in int64.
bool mul_fits(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
bool add_fits(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

}  // namespace

// The byte offsets a strided tensor with elements can reach, relative to its data pointer:
// the element at index k is at data + elem * sum(k_d * strides[d]), so the lowest offset sums
// the negative strides' reach and the highest the positive ones' (plus the element itself).
// Computed in overflow-checked arithmetic before anything is read: a layout whose offsets do
// not fit in int64, or that runs past either end of the address space from `data`, is refused
// (a wrapped offset would read the wrong element, or memory before the buffer). Each partial
// sum of the gather lies between the two ends, so the gather cannot overflow either.
void check_strides(const blockrnn_tensor& t, const Shape& shape, DType dtype,
                   const std::string& where) {
  // No elements: nothing is read. No data: the op's own check names the null pointer.
  if (t.strides == nullptr || shape.num_elements() == 0 || t.data == nullptr) return;
  const std::int64_t elem = static_cast<std::int64_t>(dtype_size(dtype));
  std::int64_t low = 0, high = 0;  // in elements
  bool fits = true;
  for (int d = 0; d < shape.rank() && fits; ++d) {
    std::int64_t reach = 0;
    fits = mul_fits(shape.dim(d) - 1, t.strides[d], &reach) &&
           (reach < 0 ? add_fits(low, reach, &low) : add_fits(high, reach, &high));
  }
  std::int64_t low_bytes = 0, high_bytes = 0;
  fits = fits && mul_fits(low, elem, &low_bytes) && mul_fits(high, elem, &high_bytes) &&
         add_fits(high_bytes, elem, &high_bytes);
  const auto base = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(t.data));
  // |low_bytes|, which may be 2^63.
  const std::uint64_t below = low_bytes == 0 ? 0 : static_cast<std::uint64_t>(-(low_bytes + 1)) + 1;
  fits = fits && below <= base && static_cast<std::uint64_t>(high_bytes) <= UINTPTR_MAX - base;
  if (!fits) {
    invalid(where + ": strides " + strides_text(t) + " (in elements) with shape " +
            shape.to_string() + " of " + dtype_name(dtype) +
            " reach byte offsets that overflow int64 or the address space");
  }
}

namespace {

// Argument `index` of the call (what: "input" or "output"), its dtype and shape checked.
struct CheckedTensor {
  std::string where;  // describe()'s
  DType dtype;
  Shape shape;
};
CheckedTensor checked_tensor(const char* op, const char* what, size_t index,
                             const std::vector<std::string>& names, const blockrnn_tensor& t) {
  std::string where = describe(op, what, index, names);
  const DType dtype = checked_dtype(t.dtype, where);
  const Shape shape = checked_shape(t, where);
  check_strides(t, shape, dtype, where);
  return {std::move(where), dtype, shape};
}

}  // namespace

// True when the strides are NULL or those of the dense row-major layout (dimensions of size 1
// may have any stride; a tensor with no elements is dense).
bool is_dense(const blockrnn_tensor& t, const Shape& shape) {
  if (t.strides == nullptr) return true;
  if (shape.num_elements() == 0) return true;
  std::int64_t expected = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    if (shape.dim(d) != 1 && t.strides[d] != expected) return false;
    expected *= shape.dim(d);
  }
  return true;
}

// Copies a strided tensor into a dense row-major one, element by element.
void gather(const blockrnn_tensor& t, const Shape& shape, Tensor& dense) {
  const std::size_t elem = dtype_size(dense.dtype());
  const std::int64_t n = shape.num_elements();
  if (n == 0) return;
  if (t.data == nullptr) invalid("data is NULL");
  const int rank = shape.rank();
  std::int64_t index[Shape::kMaxRank] = {};
  const auto* src = static_cast<const unsigned char*>(t.data);
  auto* dst = static_cast<unsigned char*>(dense.data());
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += index[d] * t.strides[d];
    std::memcpy(dst + k * elem, src + offset * static_cast<std::int64_t>(elem), elem);
    for (int d = rank - 1; d >= 0; --d) {  // next row-major index
      if (++index[d] < shape.dim(d)) break;
      index[d] = 0;
    }
  }
}

namespace {

// The inputs as views of the caller's memory. Strided inputs are listed in `strided`: their
// views are only good for validation (no op reads data while it validates, except seq_len_max,
// a scalar and so always dense) until gather_strided() has replaced them with dense copies.
// seq_lengths, whose values validation reads, is gathered at once when strided (it is [B] int64,
// small) into `small`, which must outlive the views.
std::vector<TensorView> input_views(const char* op, const OpDef& def, const blockrnn_tensor* inputs,
                                    size_t num_inputs, std::vector<std::size_t>* strided,
                                    std::deque<Tensor>* small) {
  if (num_inputs > 0 && inputs == nullptr) invalid(std::string(op) + ": inputs is NULL");
  std::vector<TensorView> views;
  views.reserve(num_inputs);
  for (size_t k = 0; k < num_inputs; ++k) {
    const blockrnn_tensor& t = inputs[k];
    const auto [where, dtype, shape] = checked_tensor(op, "input", k, def.inputs, t);
    const bool lengths = k < def.inputs.size() && def.inputs[k] == "seq_lengths";
    if (lengths && !is_dense(t, shape) && shape.rank() == 1 && shape.num_elements() > 0 &&
        dtype == DType::kInt64) {
      if (shape.num_elements() > (std::int64_t{1} << 24)) {
        invalid(where +
                ": a strided seq_lengths must have at most 2^24 elements (it is copied "
                "before validation); pass a dense one");
      }
      Tensor& dense = small->emplace_back(dtype, shape);
      try {
        gather(t, shape, dense);
      } catch (const Error& e) {
        throw Error(e.code(), where + ": " + e.what());
      }
      views.emplace_back(dense.data(), dtype, shape);
      continue;
    }
    if (!is_dense(t, shape) && strided != nullptr) strided->push_back(k);
    views.emplace_back(t.data, dtype, shape);
  }
  return views;
}

// Dense copies of the strided inputs, after the whole call has been validated.
void gather_strided(const char* op, const OpDef& def, const blockrnn_tensor* inputs,
                    const std::vector<std::size_t>& strided, std::span<TensorView> views,
                    std::vector<Tensor>& copies) {
  copies.reserve(strided.size());
  for (std::size_t k : strided) {
    const std::string where = describe(op, "input", k, def.inputs);
    copies.emplace_back(views[k].dtype, views[k].shape);
    try {
      gather(inputs[k], views[k].shape, copies.back());
    } catch (const Error& e) {
      throw Error(e.code(), where + ": " + e.what());
    }
    views[k].data = copies.back().data();
  }
}

// What the dense copies of the strided inputs take, for the memory check.
std::vector<ExtraBytes> dense_copies(const OpDef& def, std::span<const TensorView> views,
                                     const std::vector<std::size_t>& strided) {
  std::vector<ExtraBytes> extra;
  for (std::size_t k : strided) {
    extra.push_back({"a dense copy of input " + def.inputs[k],
                     static_cast<long long>(views[k].shape.num_elements()) *
                         static_cast<long long>(dtype_size(views[k].dtype))});
  }
  return extra;
}

// The outputs' dtype and shapes into the caller's arrays.
void write_spec(const OutputSpec& spec, int32_t* dtype, blockrnn_shape* shapes,
                size_t num_outputs) {
  if (dtype != nullptr) *dtype = static_cast<int32_t>(spec.dtype);
  for (size_t k = 0; k < num_outputs; ++k) {
    const Shape& s = spec.shapes[k];
    shapes[k].rank = s.rank();
    for (int d = 0; d < BLOCKRNN_MAX_RANK; ++d) shapes[k].dims[d] = d < s.rank() ? s.dim(d) : 0;
  }
}

AttrMap attr_map(const char* op, const OpDef& def, const blockrnn_attr* attrs, size_t num_attrs) {
  if (num_attrs > 0 && attrs == nullptr) invalid(std::string(op) + ": attrs is NULL");
  AttrMap map;
  for (size_t k = 0; k < num_attrs; ++k) {
    const blockrnn_attr& a = attrs[k];
    if (a.name == nullptr)
      invalid(std::string(op) + ": attr " + std::to_string(k) + " has no name");
    const AttrDef* attr_def = nullptr;
    for (const AttrDef& d : def.attrs) {
      if (d.name == a.name) attr_def = &d;
    }
    // An unknown name is reported by the op itself (with the list of known attrs).
    if (attr_def != nullptr) {
      const int32_t want =
          attr_def->kind == AttrKind::kBool ? BLOCKRNN_ATTR_BOOL : BLOCKRNN_ATTR_FLOAT;
      if (a.kind != want) {
        invalid(std::string(op) + ": attr " + a.name + " is a " +
                (want == BLOCKRNN_ATTR_BOOL ? "bool" : "float") + " (kind BLOCKRNN_ATTR_" +
                (want == BLOCKRNN_ATTR_BOOL ? "BOOL" : "FLOAT") + "), got kind " +
                std::to_string(a.kind));
      }
    } else if (a.kind != BLOCKRNN_ATTR_FLOAT && a.kind != BLOCKRNN_ATTR_BOOL) {
      invalid(std::string(op) + ": attr " + a.name + " has kind " + std::to_string(a.kind) +
              ", not a blockrnn_attr_kind");
    }
    if (map.count(a.name) != 0) invalid(std::string(op) + ": attr " + a.name + " given twice");
    map[a.name] = a.kind == BLOCKRNN_ATTR_BOOL ? (a.b != 0 ? 1.0 : 0.0) : a.f;
  }
  return map;
}

const OpDef& op_def(const char* op) {
  if (op == nullptr) invalid("op name is NULL");
  return find_op(op);
}

// The op's definition, after checking the caller's count of outputs and its shapes array.
const OpDef& def_for_shapes(const char* op, blockrnn_shape* shapes, size_t num_outputs) {
  const OpDef& def = op_def(op);
  if (num_outputs != def.outputs.size()) {
    invalid(std::string(op) + ": has " + std::to_string(def.outputs.size()) +
            " outputs, num_outputs is " + std::to_string(num_outputs));
  }
  if (num_outputs > 0 && shapes == nullptr) invalid(std::string(op) + ": shapes is NULL");
  return def;
}

const OpDef* op_at(int index) {
  const std::vector<OpDef>& ops = list_ops();
  if (index < 0 || static_cast<size_t>(index) >= ops.size()) return nullptr;
  return &ops[static_cast<size_t>(index)];
}

// The number of inputs, outputs or attrs (`list`: &OpDef::inputs, ...) of op `index`, or -1
// when the index is out of range.
template <class List>
int count_at(int index, List OpDef::*list) {
  const OpDef* def = nullptr;
  attempted([&] { def = op_at(index); });
  return def != nullptr ? static_cast<int>((def->*list).size()) : -1;
}

// The k-th input or output name (`names`: &OpDef::inputs or &OpDef::outputs) of op `index`, or
// NULL when either index is out of range.
const char* name_at(int index, int k, std::vector<std::string> OpDef::*names) {
  const OpDef* def = nullptr;
  attempted([&] { def = op_at(index); });
  if (def == nullptr || k < 0 || static_cast<size_t>(k) >= (def->*names).size()) return nullptr;
  return (def->*names)[static_cast<size_t>(k)].c_str();
}

// The C cancel check of this thread, called through the C++ one.
struct CCancel {
  blockrnn_cancel_check check = nullptr;
  void* user = nullptr;
};
thread_local CCancel t_cancel;

bool call_c_cancel(void* p) {
  const CCancel* c = static_cast<const CCancel*>(p);
  return c->check != nullptr && c->check(c->user) != 0;
}

}  // namespace
}  // namespace capi
}  // namespace blockrnn

using namespace blockrnn;        // NOLINT: the definitions below are the extern "C" functions
using namespace blockrnn::capi;  // NOLINT

extern "C" {

const char* blockrnn_last_error(void) {
  return t_last_error.c_str();
}

const char* blockrnn_status_name(blockrnn_status status) {
  switch (status) {
    case BLOCKRNN_OK:
      return "OK";
    case BLOCKRNN_INVALID_ARGUMENT:
      return "InvalidArgument";
    case BLOCKRNN_UNIMPLEMENTED:
      return "Unimplemented";
    case BLOCKRNN_RESOURCE_EXHAUSTED:
      return "ResourceExhausted";
    case BLOCKRNN_CANCELLED:
      return "Cancelled";
    case BLOCKRNN_INTERNAL:
      return "Internal";
    case BLOCKRNN_UNKNOWN:
      break;
  }
  return "Unknown";
}

const char* blockrnn_version(void) {
  return version();
}

int blockrnn_op_count(void) {
  int n = -1;
  attempted([&] { n = static_cast<int>(list_ops().size()); });
  return n;
}

const char* blockrnn_op_name(int index) {
  const OpDef* def = nullptr;
  attempted([&] { def = op_at(index); });
  return def != nullptr ? def->name.c_str() : nullptr;
}

int blockrnn_op_find(const char* name) {
  int found = -1;
  attempted([&] {
    const OpDef& def = op_def(name);  // throws for an unknown name
    const std::vector<OpDef>& ops = list_ops();
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].name == def.name) found = static_cast<int>(k);
    }
  });
  return found;
}

int blockrnn_op_num_inputs(int index) {
  return count_at(index, &OpDef::inputs);
}

const char* blockrnn_op_input_name(int index, int input) {
  return name_at(index, input, &OpDef::inputs);
}

int blockrnn_op_num_outputs(int index) {
  return count_at(index, &OpDef::outputs);
}

const char* blockrnn_op_output_name(int index, int output) {
  return name_at(index, output, &OpDef::outputs);
}

int blockrnn_op_num_attrs(int index) {
  return count_at(index, &OpDef::attrs);
}

blockrnn_status blockrnn_op_attr(int index, int attr, const char** name, int32_t* kind,
                                 int32_t* has_default, double* default_value) {
  return guarded([&] {
    const OpDef* def = op_at(index);
    if (def == nullptr)
      invalid("blockrnn_op_attr: op index " + std::to_string(index) + " out of range");
    if (attr < 0 || static_cast<size_t>(attr) >= def->attrs.size()) {
      invalid("blockrnn_op_attr: " + def->name + " has " + std::to_string(def->attrs.size()) +
              " attrs, attr index " + std::to_string(attr) + " is out of range");
    }
    const AttrDef& a = def->attrs[static_cast<size_t>(attr)];
    if (name != nullptr) *name = a.name.c_str();
    if (kind != nullptr)
      *kind = a.kind == AttrKind::kBool ? BLOCKRNN_ATTR_BOOL : BLOCKRNN_ATTR_FLOAT;
    if (has_default != nullptr) *has_default = a.has_default ? 1 : 0;
    if (default_value != nullptr) *default_value = a.default_value;
  });
}

blockrnn_status blockrnn_infer_outputs(const char* op, const blockrnn_tensor* inputs,
                                       size_t num_inputs, const blockrnn_attr* attrs,
                                       size_t num_attrs, int32_t* dtype, blockrnn_shape* shapes,
                                       size_t num_outputs) {
  return guarded([&] {
    const OpDef& def = def_for_shapes(op, shapes, num_outputs);
    std::deque<Tensor> small;
    const std::vector<TensorView> views = input_views(op, def, inputs, num_inputs, nullptr, &small);
    write_spec(infer_outputs(def, views, attr_map(op, def, attrs, num_attrs)), dtype, shapes,
               num_outputs);
  });
}

blockrnn_status blockrnn_prepare_call(const char* op, const blockrnn_tensor* inputs,
                                      size_t num_inputs, const blockrnn_attr* attrs,
                                      size_t num_attrs, int64_t extra_bytes, int32_t* dtype,
                                      blockrnn_shape* shapes, size_t num_outputs) {
  return guarded([&] {
    const OpDef& def = def_for_shapes(op, shapes, num_outputs);
    if (extra_bytes < 0) {
      invalid(std::string(op) + ": extra_bytes must be >= 0, got " + std::to_string(extra_bytes));
    }
    std::vector<std::size_t> strided;
    std::deque<Tensor> small;
    const std::vector<TensorView> views =
        input_views(op, def, inputs, num_inputs, &strided, &small);
    std::vector<ExtraBytes> extra = dense_copies(def, views, strided);
    if (extra_bytes > 0) extra.push_back({"the caller's own buffers (extra_bytes)", extra_bytes});
    write_spec(prepare_call(def, views, attr_map(op, def, attrs, num_attrs), extra,
                            /*allocates_outputs=*/true),
               dtype, shapes, num_outputs);
  });
}

blockrnn_status blockrnn_run_op(const char* op, const blockrnn_tensor* inputs, size_t num_inputs,
                                const blockrnn_attr* attrs, size_t num_attrs,
                                const blockrnn_tensor* outputs, size_t num_outputs) {
  return guarded([&] {
    const OpDef& def = op_def(op);
    if (num_outputs > 0 && outputs == nullptr) invalid(std::string(op) + ": outputs is NULL");
    std::vector<std::size_t> strided;
    std::deque<Tensor> small;
    std::vector<TensorView> views = input_views(op, def, inputs, num_inputs, &strided, &small);
    std::vector<MutableTensorView> outs;
    outs.reserve(num_outputs);
    for (size_t k = 0; k < num_outputs; ++k) {
      const blockrnn_tensor& t = outputs[k];
      const auto [where, out_dtype, shape] = checked_tensor(op, "output", k, def.outputs, t);
      if (!is_dense(t, shape)) {
        invalid(where +
                ": outputs must be dense row-major (strides NULL or C-order); got "
                "strides that are not");
      }
      outs.emplace_back(t.data, out_dtype, shape);
    }
    const AttrMap attr_values = attr_map(op, def, attrs, num_attrs);
    // Validate everything and check the memory of the call (its workspace and the dense copies
    // of strided inputs; the outputs are the caller's) before copying anything.
    const std::vector<ExtraBytes> extra = dense_copies(def, views, strided);
    std::vector<Tensor> copies;
    run_op(def, views, attr_values, extra, /*allocates_outputs=*/false,
           [&](const OutputSpec&, std::span<TensorView> all) {
             gather_strided(op, def, inputs, strided, all, copies);
             return outs;
           });
  });
}

blockrnn_status blockrnn_set_num_threads(int n) {
  return guarded([&] { set_num_threads(n); });
}

blockrnn_status blockrnn_get_num_threads(int* n) {
  return guarded([&] {
    if (n == nullptr) invalid("blockrnn_get_num_threads: n is NULL");
    *n = get_num_threads();
  });
}

int blockrnn_max_threads(void) {
  int n = kMaxThreads;
  attempted([&] { n = max_threads(); });
  return n;
}

void blockrnn_set_memory_limit(int64_t bytes) {
  attempted([&] { set_memory_limit(bytes); });
}

int64_t blockrnn_get_memory_limit(void) {
  int64_t bytes = -1;
  attempted([&] { bytes = get_memory_limit(); });
  return bytes;
}

void blockrnn_set_workspace_cache_limit(int64_t bytes) {
  attempted([&] { set_workspace_cache_limit(bytes); });
}

int64_t blockrnn_get_workspace_cache_limit(void) {
  int64_t bytes = -1;
  attempted([&] { bytes = get_workspace_cache_limit(); });
  return bytes;
}

void blockrnn_set_cancel_check(blockrnn_cancel_check check, void* user) {
  attempted([&] {
    t_cancel.check = check;
    t_cancel.user = user;
    if (check == nullptr) {
      set_cancel_check(nullptr, nullptr);
    } else {
      set_cancel_check(&call_c_cancel, &t_cancel);
    }
  });
}

blockrnn_status blockrnn_set_isa(const char* name) {
  return guarded([&] { set_isa(name == nullptr ? "" : name); });
}

const char* blockrnn_get_isa(void) {
  const char* isa = nullptr;
  attempted([&] { isa = get_isa(); });
  return isa;
}

void blockrnn_set_force_reference(int on) {
  attempted([&] { set_force_reference(on != 0); });
}

}  // extern "C"
