// blockrnn._core — thin nanobind bindings over the generic op interface (blockrnn/ops.h).
// They map numpy arrays to tensor views, allocate numpy outputs, release the GIL while an op
// computes, and translate blockrnn::Error into the Python exception classes. All validation
// happens in the C++ core.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "blockrnn/blockrnn.h"

namespace nb = nanobind;

namespace {

PyObject* g_invalid_argument = nullptr;
PyObject* g_unimplemented = nullptr;
PyObject* g_resource_exhausted = nullptr;
PyObject* g_internal = nullptr;

using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy>;

blockrnn::DType to_dtype(const std::string& op, const std::string& name, nb::dlpack::dtype t) {
  using nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == static_cast<uint8_t>(dtype_code::Float)) {
      if (t.bits == 16) return blockrnn::DType::kFloat16;
      if (t.bits == 32) return blockrnn::DType::kFloat32;
      if (t.bits == 64) return blockrnn::DType::kFloat64;
    }
    if (t.code == static_cast<uint8_t>(dtype_code::Int) && t.bits == 64) {
      return blockrnn::DType::kInt64;
    }
  }
  throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                        op + ": " + name +
                            " must be float16, float32 or float64, got an array of "
                            "unsupported dtype (code " +
                            std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits)");
}

nb::dlpack::dtype to_dlpack(blockrnn::DType d) {
  switch (d) {
    case blockrnn::DType::kFloat16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case blockrnn::DType::kFloat32:
      return nb::dtype<float>();
    case blockrnn::DType::kFloat64:
      return nb::dtype<double>();
    case blockrnn::DType::kInt64:
      return nb::dtype<int64_t>();
  }
  return nb::dtype<float>();
}

// Runs `op` on numpy inputs (already C-contiguous) and returns new numpy outputs.
std::vector<OutArray> run(const std::string& op, std::vector<InArray> inputs,
                          const std::map<std::string, double>& attrs) {
  const blockrnn::OpDef& def = blockrnn::find_op(op);
  if (inputs.size() != def.inputs.size()) {
    throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                          op + ": expected " + std::to_string(def.inputs.size()) + " inputs, got " +
                              std::to_string(inputs.size()));
  }
  std::vector<blockrnn::TensorView> views;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const InArray& a = inputs[k];
    std::vector<int64_t> dims(a.ndim());
    for (std::size_t d = 0; d < a.ndim(); ++d) dims[d] = static_cast<int64_t>(a.shape(d));
    views.emplace_back(a.data(), to_dtype(op, def.inputs[k], a.dtype()),
                       blockrnn::Shape::from_dims(dims.data(), static_cast<int>(dims.size())));
  }
  const blockrnn::AttrMap attr_map(attrs.begin(), attrs.end());
  const blockrnn::OutputSpec spec = blockrnn::infer_outputs(op, views, attr_map);
  std::vector<OutArray> outs;
  std::vector<blockrnn::MutableTensorView> out_views;
  for (const blockrnn::Shape& s : spec.shapes) {
    const std::size_t bytes =
        static_cast<std::size_t>(s.num_elements()) * blockrnn::dtype_size(spec.dtype);
    auto* buf = new unsigned char[bytes == 0 ? 1 : bytes];
    std::memset(buf, 0, bytes);
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<unsigned char*>(p); });
    std::vector<size_t> shape(s.dims(), s.dims() + s.rank());
    outs.emplace_back(buf, shape.size(), shape.data(), owner, nullptr, to_dlpack(spec.dtype));
    out_views.emplace_back(buf, spec.dtype, s);
  }
  {
    nb::gil_scoped_release release;
    blockrnn::run_op(op, views, attr_map, out_views);
  }
  return outs;
}

using AttrTuple = std::tuple<std::string, std::string, bool, double>;
using OpTuple = std::tuple<std::string, std::vector<std::string>, std::vector<AttrTuple>,
                           std::vector<std::string>>;

std::vector<OpTuple> op_defs() {
  std::vector<OpTuple> out;
  for (const blockrnn::OpDef& d : blockrnn::list_ops()) {
    std::vector<AttrTuple> attrs;
    for (const blockrnn::AttrDef& a : d.attrs) {
      attrs.emplace_back(a.name, a.kind == blockrnn::AttrKind::kBool ? "bool" : "float",
                         a.has_default, a.default_value);
    }
    out.emplace_back(d.name, d.inputs, attrs, d.outputs);
  }
  return out;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "blockrnn native core (use the blockrnn package, not this module)";
  g_invalid_argument = PyErr_NewExceptionWithDoc(
      "blockrnn.InvalidArgumentError", "Bad shapes, ranks, dtypes or values given to an op.",
      PyExc_ValueError, nullptr);
  g_unimplemented = PyErr_NewExceptionWithDoc("blockrnn.UnimplementedError",
                                              "A documented path that is not built.",
                                              PyExc_NotImplementedError, nullptr);
  g_resource_exhausted = PyErr_NewExceptionWithDoc("blockrnn.ResourceExhaustedError",
                                                   "Sizes that cannot be addressed or allocated.",
                                                   PyExc_MemoryError, nullptr);
  g_internal = PyErr_NewExceptionWithDoc("blockrnn.InternalError",
                                         "A broken invariant inside blockrnn (a bug).",
                                         PyExc_RuntimeError, nullptr);
  m.attr("InvalidArgumentError") = nb::handle(g_invalid_argument);
  m.attr("UnimplementedError") = nb::handle(g_unimplemented);
  m.attr("ResourceExhaustedError") = nb::handle(g_resource_exhausted);
  m.attr("InternalError") = nb::handle(g_internal);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const blockrnn::Error& e) {
      PyObject* type = g_internal;
      switch (e.code()) {
        case blockrnn::ErrorCode::kInvalidArgument:
          type = g_invalid_argument;
          break;
        case blockrnn::ErrorCode::kUnimplemented:
          type = g_unimplemented;
          break;
        case blockrnn::ErrorCode::kResourceExhausted:
          type = g_resource_exhausted;
          break;
        case blockrnn::ErrorCode::kInternal:
          break;
      }
      PyErr_SetString(type, e.what());
    }
  });

  m.def("run", &run, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs"),
        "Run an op by name on C-contiguous arrays; returns the outputs in TF order.");
  m.def("op_defs", &op_defs, "(name, inputs, [(attr, kind, has_default, default)], outputs)");
  m.def("set_num_threads", &blockrnn::set_num_threads, nb::arg("n"));
  m.def("get_num_threads", &blockrnn::get_num_threads);
  m.def("set_isa", [](const std::string& name) { blockrnn::set_isa(name); }, nb::arg("name"));
  m.def("get_isa", &blockrnn::get_isa);
  m.def("set_force_reference", &blockrnn::set_force_reference, nb::arg("on"));
  m.def("force_reference", &blockrnn::force_reference);
  m.def("version", &blockrnn::version);
}
