// The op table and the name-based entry points of ops.h.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/ops.h"
#include "core/parallel.h"
#include "ops/op_impl.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace core {
namespace {

std::vector<std::unique_ptr<OpAdapter>>& table() {
  static std::vector<std::unique_ptr<OpAdapter>> ops;
  return ops;
}

const std::vector<std::unique_ptr<OpAdapter>>& ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Every typed op of src/ops, by family.
    register_adapters(ops::kGRUBlockCell, ops::kGRUBlockCellGrad, ops::kGRUBlockCellBackward,
                      ops::kLSTMBlockCell, ops::kLSTMBlockCellGrad, ops::kLSTMBlockCellBackward,
                      ops::kBlockLSTM, ops::kBlockLSTMGrad, ops::kBlockLSTMV2,
                      ops::kBlockLSTMGradV2, ops::kBlockGRU, ops::kBlockGRUGrad,
                      ops::kBlockGRUResetAfter, ops::kBlockGRUResetAfterGrad);
  });
  return table();
}

const OpAdapter& find_impl(std::string_view name) {
  for (const auto& impl : ops()) {
    if (impl->def().name == name) return *impl;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown op '" + std::string(name) + "'");
}

// The op an OpDef of the table names, by its index (no search).
const OpAdapter& impl_of(const OpDef& def) {
  const auto& all = ops();
  if (def.index >= all.size() || all[def.index]->def().name != def.name) {
    throw Error(ErrorCode::kInvalidArgument,
                "OpDef '" + def.name + "' (index " + std::to_string(def.index) +
                    ") is not an op of list_ops(); pass find_op's or list_ops()'s");
  }
  return *all[def.index];
}

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// "1.5 GiB" for messages.
std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace

std::vector<double> OpAdapter::resolve_attrs(const AttrMap& given) const {
  const OpDef& def = def_;
  for (const auto& entry : given) {
    const std::string& name = entry.first;
    const bool known = std::any_of(def.attrs.begin(), def.attrs.end(),
                                   [&](const AttrDef& a) { return a.name == name; });
    if (!known) {
      std::string names;
      for (const AttrDef& a : def.attrs) names += (names.empty() ? "" : ", ") + a.name;
      throw Error(ErrorCode::kInvalidArgument, def.name + ": unknown attr '" + name + "' (attrs: " +
                                                   (names.empty() ? "none" : names) + ")");
    }
  }
  std::vector<double> out;
  for (const AttrDef& a : def.attrs) {
    auto it = given.find(a.name);
    if (it != given.end()) {
      if (a.kind == AttrKind::kBool && it->second != 0.0 && it->second != 1.0) {
        throw Error(ErrorCode::kInvalidArgument, def.name + ": attr " + a.name +
                                                     " must be a bool (0 or 1), got " +
                                                     format_number(it->second));
      }
      // A float attr's value is the op's to check (ops::check_lstm_attrs, in its validation),
      // where the typed call and the layers check it too.
      out.push_back(it->second);
    } else if (a.has_default) {
      out.push_back(a.default_value);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  def.name + ": attr " + a.name + " is required (it has no default)");
    }
  }
  return out;
}

std::vector<TensorView> OpAdapter::full_inputs(std::span<const TensorView> inputs) const {
  const OpDef& def = def_;
  const std::size_t n = def.inputs.size(), required = n - std::size_t(def.num_optional_inputs);
  if (inputs.size() < required || inputs.size() > n) {
    std::string optional;
    for (std::size_t k = required; k < n; ++k)
      optional += (optional.empty() ? "" : ", ") + def.inputs[k];
    throw Error(
        ErrorCode::kInvalidArgument,
        def.name + ": expected " + std::to_string(required) + " inputs, got " +
            std::to_string(inputs.size()) +
            (required == n ? ""
                           : " (" + std::to_string(n) + " with the optional " + optional + ")"));
  }
  std::vector<TensorView> full(inputs.begin(), inputs.end());
  full.resize(n);
  return full;
}

namespace {

// The bytes a view occupies, [begin, end); empty (begin == end) when it has no elements or is
// an absent optional input. Its storage was checked (its byte count fits in size_t / 2); an end
// past the address space is clamped to its top.
struct ByteRange {
  std::uintptr_t begin = 0, end = 0;
};
ByteRange byte_range(const TensorView& t) {
  if (is_absent_input(t)) return {};
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data);
  const auto bytes = static_cast<std::uintptr_t>(t.shape.num_elements()) * dtype_size(t.dtype);
  if (bytes == 0) return {};
  const std::uintptr_t end =
      bytes > UINTPTR_MAX - begin ? std::uintptr_t(UINTPTR_MAX) : begin + bytes;
  return {begin, end};
}

// Whether two byte ranges intersect (an empty one intersects nothing).
bool intersect(const ByteRange& a, const ByteRange& b) {
  return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end;
}

}  // namespace

// The kernels read inputs after writing outputs (and empty work zero-fills the outputs), so an
// output on top of an input would silently change the input or the results.
namespace {

// Whether any output overlaps an input or another output (inputs may overlap each other): the
// non-empty byte ranges sorted by their start, then one sweep. A range overlaps an earlier one
// exactly when it starts before the furthest end seen so far, so an output overlaps something
// when it starts before the end of any earlier range, and an input overlaps an output when it
// starts before the end of an earlier output. `false` for lists longer than the op tables'
// (then the caller runs the pairwise search, which finds the same overlaps).
bool any_overlap(std::span<const TensorView> inputs, std::span<const MutableTensorView> outputs,
                 bool* decided) {
  struct Tagged {
    ByteRange range;
    bool output;
  };
  Tagged all[kMaxInputs + kMaxOutputs];
  *decided = inputs.size() <= kMaxInputs && outputs.size() <= kMaxOutputs;
  if (!*decided) return false;
  std::size_t n = 0;
  for (const TensorView& t : inputs) {
    const ByteRange r = byte_range(t);
    if (r.begin < r.end) all[n++] = {r, false};
  }
  for (const MutableTensorView& t : outputs) {
    const ByteRange r = byte_range(t);
    if (r.begin < r.end) all[n++] = {r, true};
  }
  std::sort(all, all + n,
            [](const Tagged& a, const Tagged& b) { return a.range.begin < b.range.begin; });
  std::uintptr_t end_any = 0, end_output = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const Tagged& t = all[k];
    if (t.range.begin < (t.output ? end_any : end_output)) return true;
    end_any = std::max(end_any, t.range.end);
    if (t.output) end_output = std::max(end_output, t.range.end);
  }
  return false;
}

}  // namespace

void check_no_alias(const char* op, std::span<const char* const> input_names,
                    std::span<const TensorView> inputs, std::span<const char* const> output_names,
                    std::span<const MutableTensorView> outputs) {
  // The sweep first; only a call with an overlap (or more views than an op has) searches the
  // pairs, in the order that names the first output involved. The message is built only when it
  // is thrown: a layer object's call allocates nothing.
  bool decided = false;
  if (!any_overlap(inputs, outputs, &decided) && decided) return;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const ByteRange o = byte_range(outputs[k]);
    for (std::size_t j = 0; j < inputs.size(); ++j) {
      if (intersect(o, byte_range(inputs[j]))) {
        const std::string name(op);
        throw Error(ErrorCode::kInvalidArgument, name + ": output " + output_names[k] +
                                                     " overlaps input " + input_names[j] +
                                                     " in memory; outputs must not alias inputs");
      }
    }
    for (std::size_t j = 0; j < k; ++j) {
      if (intersect(o, byte_range(outputs[j]))) {
        const std::string name(op);
        throw Error(ErrorCode::kInvalidArgument, name + ": outputs " + output_names[j] + " and " +
                                                     output_names[k] + " overlap in memory");
      }
    }
  }
}

// Every output must be addressable in bytes before anything is allocated (size
// arithmetic never overflows; a shape too large for the machine is a clear error).
void check_output_sizes(const char* op, std::span<const char* const> output_names,
                        const CallShape& call) {
  for (int k = 0; k < call.num_outputs; ++k) {
    const Shape& shape = call.shapes[k];
    std::int64_t n = 0;
    try {
      n = shape.num_elements();  // throws on int64 overflow
    } catch (const Error&) {
      throw Error(ErrorCode::kResourceExhausted, std::string(op) + ": output " + output_names[k] +
                                                     " of shape " + shape.to_string() +
                                                     " has more elements than can be addressed");
    }
    if (static_cast<std::uint64_t>(n) >
        static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) /
            dtype_size(call.dtype)) {
      throw Error(ErrorCode::kResourceExhausted, std::string(op) + ": output " + output_names[k] +
                                                     " of shape " + shape.to_string() +
                                                     " needs more bytes than can be addressed");
    }
  }
}

namespace {

// An upper bound, in bytes, of what a call allocates besides its outputs on the path it takes
// (fast or reference): the sequence workspaces ([S, B, 4H] gates or gradients of gates, padded,
// and their packed copy), packed weights, the reference's [B, I + H] concatenations and
// per-step buffers, each GEMM thread's packing scratch, and float16's and bfloat16's float32
// staging of every input and output. Computed in double: these sizes may overflow any integer.
double workspace_bytes(std::span<const TensorView> inputs, const CallShape& p) {
  const double T = double(p.T), B = double(p.B), I = double(p.I), H = double(p.H), K = I + H;
  const double compute_size = p.dtype == DType::kFloat64 ? 8.0 : 4.0;
  double elems =
      2.0 * T * B * (4.0 * H + 16.0) + 2.0 * K * (4.0 * H + 64.0) + 16.0 * B * H + 64.0 * (H + 1.0);
  if (force_reference()) elems += 4.0 * B * K;  // [x, h] concatenations and their gradients
  if (p.lengths) {
    // The fast grads' compacted copies of the active rows (x, h[t−1], and up to 5H of gate
    // gradients, padded) for the weight-gradient products.
    elems += T * B * (I + 6.0 * H + 32.0);
  }
  double bytes = elems * compute_size + double(get_num_threads()) * (4 << 20);
  if (is_16bit_float(p.dtype)) {
    for (const TensorView& t : inputs) bytes += 4.0 * double(t.shape.num_elements());
    for (const Shape& s : p.output_shapes()) bytes += 4.0 * double(s.num_elements());
  }
  return bytes;
}

}  // namespace

void check_memory(const char* op, std::span<const TensorView> inputs,
                  std::span<const char* const> output_names, const CallShape& call,
                  bool allocates_outputs, std::span<const ExtraBytes> extra) {
  double outputs = 0.0, largest = -1.0;
  std::size_t largest_k = 0;
  if (allocates_outputs) {
    for (int k = 0; k < call.num_outputs; ++k) {
      const double b = double(call.shapes[k].num_elements()) * double(dtype_size(call.dtype));
      outputs += b;
      if (b > largest) largest = b, largest_k = std::size_t(k);
    }
  }
  double extra_total = 0.0, extra_largest = -1.0;
  const ExtraBytes* extra_max = nullptr;
  for (const ExtraBytes& e : extra) {
    extra_total += double(e.bytes);
    if (double(e.bytes) > extra_largest) extra_largest = double(e.bytes), extra_max = &e;
  }
  const double work = call.empty() ? 0.0 : workspace_bytes(inputs, call);
  // The fast path's bfloat16 product operands (CallShape::bf16_operand_bytes): allocated per call
  // besides the workspace; the reference path computes a bfloat16 call in float32 without them.
  const double bf16_operands = call.empty() || force_reference() ? 0.0 : call.bf16_operand_bytes;
  const double total = outputs + extra_total + work + bf16_operands;
  const double limit = double(get_memory_limit());
  if (total <= limit) return;
  std::string parts;
  if (allocates_outputs) {
    parts += "outputs " + format_bytes(outputs) + ", the largest " + output_names[largest_k] +
             " of shape " + call.shapes[largest_k].to_string() + " " + dtype_name(call.dtype);
  }
  if (extra_max != nullptr) {
    parts += std::string(parts.empty() ? "" : "; ") + extra_max->what + " " +
             format_bytes(extra_max->bytes);
  }
  parts += std::string(parts.empty() ? "" : "; ") + "workspace up to " + format_bytes(work);
  if (bf16_operands > 0) {
    parts += "; bfloat16 product operands up to " + format_bytes(bf16_operands);
  }
  char exact[64];
  std::snprintf(exact, sizeof(exact), "%.0f", total);
  throw Error(ErrorCode::kResourceExhausted,
              std::string(op) + ": this call needs " + format_bytes(total) + " (" + exact +
                  " bytes: " + parts + "), more than the memory limit of " + format_bytes(limit) +
                  " (what this machine can hold; see set_memory_limit)");
}

bool begin_compute(const CallShape& call, std::span<const MutableTensorView> outputs) {
  if (call.empty()) {
    for (const MutableTensorView& o : outputs) {
      const std::size_t bytes =
          static_cast<std::size_t>(o.shape.num_elements()) * dtype_size(o.dtype);
      if (bytes > 0) std::memset(o.data, 0, bytes);
    }
    return false;
  }
  return true;
}

void register_op(std::unique_ptr<OpAdapter> op) {
  op->set_index(table().size());
  table().push_back(std::move(op));
}

}  // namespace core

const std::vector<OpDef>& list_ops() {
  static const std::vector<OpDef> defs = [] {
    std::vector<OpDef> d;
    for (const auto& impl : core::ops()) d.push_back(impl->def());
    return d;
  }();
  return defs;
}

const OpDef& find_op(std::string_view name) {
  return core::find_impl(name).def();
}

OutputSpec infer_outputs(const OpDef& op, std::span<const TensorView> inputs,
                         const AttrMap& attrs) {
  return core::impl_of(op).prepare(inputs, attrs, nullptr);
}

OutputSpec prepare_call(const OpDef& op, std::span<const TensorView> inputs, const AttrMap& attrs,
                        std::span<const ExtraBytes> extra, bool allocates_outputs) {
  const core::OpAdapter::Memory memory{extra, allocates_outputs};
  return core::impl_of(op).prepare(inputs, attrs, &memory);
}

void run_op(const OpDef& op, std::span<const TensorView> inputs, const AttrMap& attrs,
            std::span<const MutableTensorView> outputs) {
  core::impl_of(op).run(inputs, attrs, outputs);
}

std::vector<Tensor> run_op(const OpDef& op, std::span<const TensorView> inputs,
                           const AttrMap& attrs) {
  return core::impl_of(op).run(inputs, attrs);
}

void run_op(const OpDef& op, std::span<const TensorView> inputs, const AttrMap& attrs,
            std::span<const ExtraBytes> extra, bool allocates_outputs, const CallSetup& setup) {
  core::impl_of(op).run(inputs, attrs, {extra, allocates_outputs}, setup);
}

// By name: one lookup, then the calls above.
OutputSpec infer_outputs(std::string_view op, std::span<const TensorView> inputs,
                         const AttrMap& attrs) {
  return infer_outputs(find_op(op), inputs, attrs);
}

OutputSpec prepare_call(std::string_view op, std::span<const TensorView> inputs,
                        const AttrMap& attrs, std::span<const ExtraBytes> extra,
                        bool allocates_outputs) {
  return prepare_call(find_op(op), inputs, attrs, extra, allocates_outputs);
}

void run_op(std::string_view op, std::span<const TensorView> inputs, const AttrMap& attrs,
            std::span<const MutableTensorView> outputs) {
  run_op(find_op(op), inputs, attrs, outputs);
}

std::vector<Tensor> run_op(std::string_view op, std::span<const TensorView> inputs,
                           const AttrMap& attrs) {
  return run_op(find_op(op), inputs, attrs);
}

void run_op(std::string_view op, std::span<const TensorView> inputs, const AttrMap& attrs,
            std::span<const ExtraBytes> extra, bool allocates_outputs, const CallSetup& setup) {
  run_op(find_op(op), inputs, attrs, extra, allocates_outputs, setup);
}

}  // namespace blockrnn
