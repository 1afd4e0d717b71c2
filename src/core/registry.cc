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
#include "core/op_impl.h"
#include "core/parallel.h"

namespace blockrnn {
namespace core {
namespace {

std::vector<OpImpl>& table() {
  static std::vector<OpImpl> ops;
  return ops;
}

const std::vector<OpImpl>& ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_gru_ops();
    register_lstm_ops();
    register_sequence_ops();
  });
  return table();
}

const OpImpl& find_impl(std::string_view name) {
  for (const OpImpl& impl : ops()) {
    if (impl.def.name == name) return impl;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown op '" + std::string(name) + "'");
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

Attrs resolve_attrs(const OpDef& def, const AttrMap& given) {
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
  Attrs out;
  for (const AttrDef& a : def.attrs) {
    auto it = given.find(a.name);
    if (it != given.end()) {
      if (a.kind == AttrKind::kBool && it->second != 0.0 && it->second != 1.0) {
        throw Error(ErrorCode::kInvalidArgument, def.name + ": attr " + a.name +
                                                     " must be a bool (0 or 1), got " +
                                                     format_number(it->second));
      }
      if (a.kind == AttrKind::kFloat && std::isfinite(it->second) &&
          std::fabs(it->second) > double(std::numeric_limits<float>::max())) {
        // TensorFlow's float attrs are float32: its Python layer silently turns such a value
        // into inf. NaN and ±inf, given as such, keep TensorFlow's meaning (a NaN cell_clip
        // does not clip).
        throw Error(ErrorCode::kInvalidArgument,
                    def.name + ": attr " + a.name +
                        " must be representable as float32 (|value| <= 3.4028235e+38), got " +
                        format_number(it->second));
      }
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

// Checks the count (the trailing optional inputs may be omitted) and the storage of every
// given input, and returns the inputs padded to the full count with absent views.
std::vector<TensorView> check_input_count(const OpDef& def, std::span<const TensorView> inputs) {
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
  Checker check(def.name.c_str());
  std::vector<TensorView> full(inputs.begin(), inputs.end());
  full.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    if (k >= required && is_absent_input(full[k])) continue;
    check.storage(def.inputs[k].c_str(), full[k]);
  }
  return full;
}

// Outputs must not overlap inputs or each other: the kernels read inputs after writing
// outputs, so aliasing would silently give wrong results.
void check_no_alias(const OpDef& def, std::span<const TensorView> inputs,
                    std::span<const MutableTensorView> outputs) {
  auto range = [](const void* p, const TensorView& t) {
    const auto begin = reinterpret_cast<std::uintptr_t>(p);
    return std::pair<std::uintptr_t, std::uintptr_t>(
        begin, begin + static_cast<std::uintptr_t>(t.shape.num_elements()) * dtype_size(t.dtype));
  };
  auto overlap = [](auto a, auto b) { return a.first < b.second && b.first < a.second; };
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto o = range(outputs[k].data, outputs[k]);
    if (o.first == o.second) continue;
    for (std::size_t j = 0; j < inputs.size(); ++j) {
      const auto i = range(inputs[j].data, inputs[j]);
      if (i.first != i.second && overlap(o, i)) {
        throw Error(ErrorCode::kInvalidArgument, def.name + ": output " + def.outputs[k] +
                                                     " overlaps input " + def.inputs[j] +
                                                     " in memory; outputs must not alias inputs");
      }
    }
    for (std::size_t j = 0; j < k; ++j) {
      const auto p = range(outputs[j].data, outputs[j]);
      if (p.first != p.second && overlap(o, p)) {
        throw Error(ErrorCode::kInvalidArgument, def.name + ": outputs " + def.outputs[j] +
                                                     " and " + def.outputs[k] +
                                                     " overlap in memory");
      }
    }
  }
}

// Every output must be addressable in bytes before anything is allocated (issue 7: size
// arithmetic never overflows; a shape too large for the machine is a clear error).
void check_output_sizes(const OpDef& def, const OutputSpec& spec) {
  for (std::size_t k = 0; k < spec.shapes.size(); ++k) {
    std::int64_t n = 0;
    try {
      n = spec.shapes[k].num_elements();  // throws on int64 overflow
    } catch (const Error&) {
      throw Error(ErrorCode::kResourceExhausted, def.name + ": output " + def.outputs[k] +
                                                     " of shape " + spec.shapes[k].to_string() +
                                                     " has more elements than can be addressed");
    }
    if (static_cast<std::uint64_t>(n) >
        static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) /
            dtype_size(spec.dtype)) {
      throw Error(ErrorCode::kResourceExhausted, def.name + ": output " + def.outputs[k] +
                                                     " of shape " + spec.shapes[k].to_string() +
                                                     " needs more bytes than can be addressed");
    }
  }
}

int input_index(const OpDef& def, const char* name) {
  for (std::size_t k = 0; k < def.inputs.size(); ++k) {
    if (def.inputs[k] == name) return static_cast<int>(k);
  }
  return -1;
}

// Every op has h_prev [B, H]. When it is empty (B = 0 or H = 0) every step of every op is empty
// work: the outputs are zeros (or empty), whatever seq_len_max or the other dimensions say.
bool empty_work(const OpDef& def, std::span<const TensorView> inputs) {
  const int k = input_index(def, "h_prev");
  return k >= 0 && inputs[k].shape.num_elements() == 0;
}

// An upper bound, in bytes, of what a call allocates besides its outputs on the path it takes
// (fast or reference): the sequence workspaces ([S, B, 4H] gates or gradients of gates, padded,
// and their packed copy), packed weights, the reference's [B, I + H] concatenations and
// per-step buffers, each GEMM thread's packing scratch, and float16's float32 staging of every
// input and output. Computed in double: these sizes may overflow any integer.
double workspace_bytes(const OpDef& def, std::span<const TensorView> inputs,
                       const OutputSpec& spec) {
  const int kx = input_index(def, "x"), kh = input_index(def, "h_prev");
  if (kx < 0 || kh < 0) return 0.0;
  const Shape& xs = inputs[kx].shape;
  const double T = xs.rank() == 3 ? double(xs[0]) : 1.0;
  const double B = double(xs[xs.rank() - 2]), I = double(xs[xs.rank() - 1]);
  const double H = double(inputs[kh].shape[1]), K = I + H;
  const double compute_size = spec.dtype == DType::kFloat64 ? 8.0 : 4.0;
  double elems =
      2.0 * T * B * (4.0 * H + 16.0) + 2.0 * K * (4.0 * H + 64.0) + 16.0 * B * H + 64.0 * (H + 1.0);
  if (force_reference()) elems += 4.0 * B * K;  // [x, h] concatenations and their gradients
  const int kl = input_index(def, "seq_lengths");
  if (kl >= 0 && !is_absent_input(inputs[kl])) {
    // The fast grads' compacted copies of the active rows (x, h[t−1], and up to 5H of gate
    // gradients, padded) for the weight-gradient products.
    elems += T * B * (I + 6.0 * H + 32.0);
  }
  double bytes = elems * compute_size + double(get_num_threads()) * (4 << 20);
  if (spec.dtype == DType::kFloat16) {
    for (const TensorView& t : inputs) bytes += 4.0 * double(t.shape.num_elements());
    for (const Shape& s : spec.shapes) bytes += 4.0 * double(s.num_elements());
  }
  return bytes;
}

// The call's memory against get_memory_limit(), before anything is allocated (issue 14).
void check_memory(const OpDef& def, std::span<const TensorView> inputs, const OutputSpec& spec,
                  bool allocates_outputs, std::span<const ExtraBytes> extra) {
  double outputs = 0.0, largest = -1.0;
  std::size_t largest_k = 0;
  if (allocates_outputs) {
    for (std::size_t k = 0; k < spec.shapes.size(); ++k) {
      const double b = double(spec.shapes[k].num_elements()) * double(dtype_size(spec.dtype));
      outputs += b;
      if (b > largest) largest = b, largest_k = k;
    }
  }
  double extra_total = 0.0, extra_largest = -1.0;
  const ExtraBytes* extra_max = nullptr;
  for (const ExtraBytes& e : extra) {
    extra_total += double(e.bytes);
    if (double(e.bytes) > extra_largest) extra_largest = double(e.bytes), extra_max = &e;
  }
  const double work = empty_work(def, inputs) ? 0.0 : workspace_bytes(def, inputs, spec);
  const double total = outputs + extra_total + work;
  const double limit = double(get_memory_limit());
  if (total <= limit) return;
  std::string parts;
  if (allocates_outputs) {
    parts += "outputs " + format_bytes(outputs) + ", the largest " + def.outputs[largest_k] +
             " of shape " + spec.shapes[largest_k].to_string() + " " + dtype_name(spec.dtype);
  }
  if (extra_max != nullptr) {
    parts += std::string(parts.empty() ? "" : "; ") + extra_max->what + " " +
             format_bytes(extra_max->bytes);
  }
  parts += std::string(parts.empty() ? "" : "; ") + "workspace up to " + format_bytes(work);
  char exact[64];
  std::snprintf(exact, sizeof(exact), "%.0f", total);
  throw Error(ErrorCode::kResourceExhausted,
              def.name + ": this call needs " + format_bytes(total) + " (" + exact +
                  " bytes: " + parts + "), more than the memory limit of " + format_bytes(limit) +
                  " (what this machine can hold; see set_memory_limit)");
}

}  // namespace

void register_op(OpImpl impl) {
  table().push_back(std::move(impl));
}

namespace detail {

HalfStaging::HalfStaging(std::span<const TensorView> inputs,
                         std::span<const MutableTensorView> outputs) {
  for (const TensorView& t : inputs) {
    if (t.dtype != DType::kFloat16) {
      buffers.in.push_back(nullptr);
      continue;
    }
    const std::int64_t n = t.shape.num_elements();
    const Half* src = static_cast<const Half*>(t.data);
    std::vector<float> copy(static_cast<std::size_t>(n));
    for (std::int64_t e = 0; e < n; ++e) copy[e] = half_to_float(src[e]);
    in_copies.push_back(std::move(copy));
    buffers.in.push_back(in_copies.back().data());
  }
  for (const MutableTensorView& t : outputs) {
    out_copies.emplace_back(static_cast<std::size_t>(t.shape.num_elements()));
    buffers.out.push_back(out_copies.back().data());
  }
}

void HalfStaging::store(std::span<const MutableTensorView> outputs) const {
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    Half* dst = static_cast<Half*>(outputs[k].data);
    const std::vector<float>& src = out_copies[k];
    for (std::size_t e = 0; e < src.size(); ++e) dst[e] = float_to_half(src[e]);
  }
}

}  // namespace detail
}  // namespace core

const std::vector<OpDef>& list_ops() {
  static const std::vector<OpDef> defs = [] {
    std::vector<OpDef> d;
    for (const core::OpImpl& impl : core::ops()) d.push_back(impl.def);
    return d;
  }();
  return defs;
}

const OpDef& find_op(std::string_view name) {
  return core::find_impl(name).def;
}

namespace {

// Everything every entry point does before computing: find the op, check the inputs, resolve
// the attrs, validate and infer the outputs, and check their sizes.
struct Prepared {
  const core::OpImpl& impl;
  std::vector<TensorView> inputs;  // all of the op's inputs, omitted optional ones absent
  core::Attrs attrs;
  OutputSpec spec;
};

Prepared prepare(std::string_view op, std::span<const TensorView> given, const AttrMap& attrs) {
  const core::OpImpl& impl = core::find_impl(op);
  std::vector<TensorView> inputs = core::check_input_count(impl.def, given);
  core::Attrs resolved = core::resolve_attrs(impl.def, attrs);
  OutputSpec spec = impl.infer(inputs, resolved);
  core::check_output_sizes(impl.def, spec);
  return {impl, std::move(inputs), std::move(resolved), std::move(spec)};
}

// Runs a prepared call: empty work (core::empty_work) only zero-fills the outputs; anything
// else first makes sure the thread team can be created, then computes.
void compute(const Prepared& p, std::span<const MutableTensorView> outputs) {
  const std::span<const TensorView> inputs = p.inputs;
  if (core::empty_work(p.impl.def, inputs)) {
    for (const MutableTensorView& o : outputs) {
      const std::size_t bytes =
          static_cast<std::size_t>(o.shape.num_elements()) * dtype_size(o.dtype);
      if (bytes > 0) std::memset(o.data, 0, bytes);
    }
    return;
  }
  core::ensure_threads(p.impl.def.name.c_str(), get_num_threads());
  p.impl.compute(inputs, p.attrs, outputs);
}

}  // namespace

OutputSpec infer_outputs(std::string_view op, std::span<const TensorView> given,
                         const AttrMap& attrs) {
  return prepare(op, given, attrs).spec;
}

OutputSpec prepare_call(std::string_view op, std::span<const TensorView> given,
                        const AttrMap& attrs, std::span<const ExtraBytes> extra,
                        bool allocates_outputs) {
  Prepared p = prepare(op, given, attrs);
  core::check_memory(p.impl.def, p.inputs, p.spec, allocates_outputs, extra);
  return std::move(p.spec);
}

void run_op(std::string_view op, std::span<const TensorView> given, const AttrMap& attrs,
            std::span<const MutableTensorView> outputs) {
  const Prepared p = prepare(op, given, attrs);
  const std::span<const TensorView> inputs = p.inputs;
  std::vector<const char*> names;
  for (const std::string& n : p.impl.def.outputs) names.push_back(n.c_str());
  core::check_outputs(p.impl.def.name.c_str(), names, p.spec.dtype, p.spec.shapes, outputs);
  // Empty work reads no input (compute only zero-fills the outputs), so overlap cannot matter;
  // the Python and C layers then pass strided inputs uncopied, whose dense extent may
  // spuriously overlap a fresh output.
  if (!core::empty_work(p.impl.def, inputs)) core::check_no_alias(p.impl.def, inputs, outputs);
  core::check_memory(p.impl.def, inputs, p.spec, false, {});
  compute(p, outputs);
}

std::vector<Tensor> run_op(std::string_view op, std::span<const TensorView> given,
                           const AttrMap& attrs) {
  const Prepared p = prepare(op, given, attrs);
  core::check_memory(p.impl.def, p.inputs, p.spec, true, {});
  std::vector<Tensor> out;
  std::vector<MutableTensorView> views;
  for (const Shape& s : p.spec.shapes) {
    out.emplace_back(p.spec.dtype, s);
    views.push_back(out.back().mutable_view());
  }
  compute(p, views);
  return out;
}

}  // namespace blockrnn
