// The op table and the name-based entry points of ops.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>

#include "blockrnn/error.h"
#include "blockrnn/ops.h"
#include "core/op_impl.h"

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
                                                     std::to_string(it->second));
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

void check_input_count(const OpDef& def, std::span<const TensorView> inputs) {
  if (inputs.size() != def.inputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, def.name + ": expected " +
                                                 std::to_string(def.inputs.size()) +
                                                 " inputs, got " + std::to_string(inputs.size()));
  }
  Checker check(def.name.c_str());
  for (std::size_t k = 0; k < inputs.size(); ++k) check.storage(def.inputs[k].c_str(), inputs[k]);
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
    const std::int64_t n = spec.shapes[k].num_elements();  // throws on int64 overflow
    if (static_cast<std::uint64_t>(n) >
        static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) /
            dtype_size(spec.dtype)) {
      throw Error(ErrorCode::kResourceExhausted, def.name + ": output " + def.outputs[k] +
                                                     " of shape " + spec.shapes[k].to_string() +
                                                     " needs more bytes than can be addressed");
    }
  }
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
  core::Attrs attrs;
  OutputSpec spec;
};

Prepared prepare(std::string_view op, std::span<const TensorView> inputs, const AttrMap& attrs) {
  const core::OpImpl& impl = core::find_impl(op);
  core::check_input_count(impl.def, inputs);
  core::Attrs resolved = core::resolve_attrs(impl.def, attrs);
  OutputSpec spec = impl.infer(inputs, resolved);
  core::check_output_sizes(impl.def, spec);
  return {impl, std::move(resolved), std::move(spec)};
}

}  // namespace

OutputSpec infer_outputs(std::string_view op, std::span<const TensorView> inputs,
                         const AttrMap& attrs) {
  return prepare(op, inputs, attrs).spec;
}

void run_op(std::string_view op, std::span<const TensorView> inputs, const AttrMap& attrs,
            std::span<const MutableTensorView> outputs) {
  const Prepared p = prepare(op, inputs, attrs);
  std::vector<const char*> names;
  for (const std::string& n : p.impl.def.outputs) names.push_back(n.c_str());
  core::check_outputs(p.impl.def.name.c_str(), names, p.spec.dtype, p.spec.shapes, outputs);
  core::check_no_alias(p.impl.def, inputs, outputs);
  p.impl.compute(inputs, p.attrs, outputs);
}

std::vector<Tensor> run_op(std::string_view op, std::span<const TensorView> inputs,
                           const AttrMap& attrs) {
  const Prepared p = prepare(op, inputs, attrs);
  std::vector<Tensor> out;
  std::vector<MutableTensorView> views;
  for (const Shape& s : p.spec.shapes) {
    out.emplace_back(p.spec.dtype, s);
    views.push_back(out.back().mutable_view());
  }
  p.impl.compute(inputs, p.attrs, views);
  return out;
}

}  // namespace blockrnn
