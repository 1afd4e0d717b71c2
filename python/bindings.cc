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
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "blockrnn/blockrnn.h"

namespace nb = nanobind;

void register_layers(nb::module_& m);  // layer_bindings.cc
#ifdef BLOCKRNN_PYTHON_CUDA
void register_cuda(nb::module_& m);  // cuda_bindings.cc
#endif

namespace {

PyObject* g_invalid_argument = nullptr;
PyObject* g_unimplemented = nullptr;
PyObject* g_resource_exhausted = nullptr;
PyObject* g_internal = nullptr;

// Inputs of any layout (strides in elements, possibly zero or negative): they are validated
// as they are and copied to contiguous memory only after the whole call has been checked.
using InArray = nb::ndarray<nb::ro, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy>;

// `bfloat16`: the Python layer passes a bfloat16 array (numpy has no bfloat16 of its own; the
// ml_dtypes one has no buffer-protocol or DLPack form) as a uint16 view of its bits.
blockrnn::DType to_dtype(const std::string& op, const std::string& name, nb::dlpack::dtype t,
                         bool bfloat16) {
  using nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (bfloat16 && t.code == static_cast<uint8_t>(dtype_code::UInt) && t.bits == 16) {
      return blockrnn::DType::kBFloat16;
    }
    if (t.code == static_cast<uint8_t>(dtype_code::Bfloat) && t.bits == 16) {
      return blockrnn::DType::kBFloat16;
    }
    if (t.code == static_cast<uint8_t>(dtype_code::Float)) {
      if (t.bits == 16) return blockrnn::DType::kFloat16;
      if (t.bits == 32) return blockrnn::DType::kFloat32;
      if (t.bits == 64) return blockrnn::DType::kFloat64;
    }
    if (t.code == static_cast<uint8_t>(dtype_code::Int) && t.bits == 64) {
      return blockrnn::DType::kInt64;
    }
  }
  // The Python layer refuses other dtypes by name before this; other DLPack producers land here.
  const char* kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string kind = t.code < 7 ? kinds[t.code] : "code " + std::to_string(t.code);
  throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                        op + ": " + name + " must be float16, bfloat16, float32 or float64, got " +
                            kind + std::to_string(t.bits) +
                            (t.lanes != 1 ? " x" + std::to_string(t.lanes) : ""));
}

// The numpy dtype of an output; bfloat16 comes back as uint16 bits, which the Python layer views
// as ml_dtypes.bfloat16 (numpy cannot receive a bfloat16 DLPack array).
nb::dlpack::dtype to_dlpack(blockrnn::DType d) {
  switch (d) {
    case blockrnn::DType::kFloat16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case blockrnn::DType::kBFloat16:
      return nb::dtype<uint16_t>();
    case blockrnn::DType::kFloat32:
      return nb::dtype<float>();
    case blockrnn::DType::kFloat64:
      return nb::dtype<double>();
    case blockrnn::DType::kInt64:
      return nb::dtype<int64_t>();
  }
  return nb::dtype<float>();
}

bool is_contiguous(const InArray& a) {
  int64_t expected = 1;
  for (std::size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expected) return false;
    expected *= static_cast<int64_t>(a.shape(d));
  }
  return true;
}

// Copies a strided array into contiguous row-major memory, byte-swapping each element when the
// caller's array was in the other byte order.
void gather(const InArray& a, std::size_t elem, bool swap, unsigned char* dst) {
  const std::size_t rank = a.ndim();
  const auto* base = static_cast<const unsigned char*>(a.data());
  std::vector<int64_t> index(rank, 0);
  const int64_t n = static_cast<int64_t>(a.size());
  for (int64_t e = 0; e < n; ++e) {
    int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset += index[d] * a.stride(d);
    const unsigned char* src = base + offset * static_cast<int64_t>(elem);
    if (swap) {
      for (std::size_t b = 0; b < elem; ++b) dst[b] = src[elem - 1 - b];
    } else {
      std::memcpy(dst, src, elem);
    }
    dst += elem;
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < static_cast<int64_t>(a.shape(d))) break;
      index[d] = 0;
    }
  }
}

// Asks Python whether a signal (Ctrl-C) is pending: the op's time loop calls this between steps
// (blockrnn/context.h, set_cancel_check). A raised KeyboardInterrupt stays set and is what the
// caller sees.
bool python_signal_pending(void*) {
  nb::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

struct CancelHook {
  CancelHook() { blockrnn::set_cancel_check(python_signal_pending, nullptr); }
  ~CancelHook() { blockrnn::set_cancel_check(nullptr, nullptr); }
};

// Runs `op` on arrays of any layout and returns new numpy outputs. `swapped[k]`: input k is in
// the other byte order (the Python layer passes such arrays as native-order views of the same
// bytes). `bfloat16[k]` (empty: none): input k is a uint16 view of bfloat16 data. Order of work:
// validate everything once and check the memory of the whole call (outputs, workspace and the
// contiguous copies) before allocating or copying anything.
// `index`: the op's position in list_ops() (op_defs), which the Python layer keeps with each op
// function it makes: the op is not looked up by name during a call.
std::vector<OutArray> run(std::size_t index, std::vector<InArray> inputs,
                          const std::map<std::string, double>& attrs,
                          const std::vector<bool>& swapped, const std::vector<bool>& bfloat16) {
  const std::vector<blockrnn::OpDef>& all = blockrnn::list_ops();
  if (index >= all.size()) {
    throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                          "no op at index " + std::to_string(index) + " (there are " +
                              std::to_string(all.size()) + ")");
  }
  const blockrnn::OpDef& def = all[index];
  const std::string& op = def.name;
  // The trailing optional inputs (seq_lengths) may be omitted.
  const std::size_t required = def.inputs.size() - std::size_t(def.num_optional_inputs);
  if (inputs.size() < required || inputs.size() > def.inputs.size() ||
      swapped.size() != inputs.size() || (!bfloat16.empty() && bfloat16.size() != inputs.size())) {
    throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                          op + ": expected " + std::to_string(required) + " inputs, got " +
                              std::to_string(inputs.size()));
  }
  std::vector<blockrnn::TensorView> views;
  bool empty_work = false;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const InArray& a = inputs[k];
    if (a.ndim() > static_cast<std::size_t>(blockrnn::Shape::kMaxRank)) {
      throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                            op + ": " + def.inputs[k] + " has rank " + std::to_string(a.ndim()) +
                                "; inputs have rank at most " +
                                std::to_string(blockrnn::Shape::kMaxRank));
    }
    std::vector<int64_t> dims(a.ndim());
    for (std::size_t d = 0; d < a.ndim(); ++d) dims[d] = static_cast<int64_t>(a.shape(d));
    const bool bf16 = !bfloat16.empty() && bfloat16[k];
    views.emplace_back(a.data(), to_dtype(op, def.inputs[k], a.dtype(), bf16),
                       blockrnn::Shape::from_dims(dims.data(), static_cast<int>(dims.size())));
    // h_prev [B, H] empty: no step reads any input (the core only zero-fills the outputs).
    if (def.inputs[k] == "h_prev" && a.size() == 0) empty_work = true;
  }
  std::vector<blockrnn::ExtraBytes> copies;
  std::vector<bool> copy(inputs.size(), false);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    copy[k] = !empty_work && inputs[k].size() > 0 && (swapped[k] || !is_contiguous(inputs[k]));
    if (copy[k]) {
      copies.push_back({"a contiguous copy of input " + def.inputs[k],
                        static_cast<long long>(inputs[k].size() * inputs[k].itemsize())});
    }
  }
  const blockrnn::AttrMap attr_map(attrs.begin(), attrs.end());

  // Within the memory limit the system may still refuse (other processes, fragmentation).
  auto allocate = [&](std::size_t bytes, const std::string& what) {
    try {
      return std::make_unique_for_overwrite<unsigned char[]>(bytes == 0 ? 1 : bytes);
    } catch (const std::bad_alloc&) {
      throw blockrnn::Error(
          blockrnn::ErrorCode::kResourceExhausted,
          op + ": the system refused " + std::to_string(bytes) + " bytes for " + what);
    }
  };
  // Filled by `setup`, which run_op calls once the call is validated and its memory checked:
  // the outputs (not initialised: every op writes every element) and the contiguous copies.
  std::vector<std::unique_ptr<unsigned char[]>> copied(inputs.size());
  std::vector<std::unique_ptr<unsigned char[]>> out_buffers;
  blockrnn::OutputSpec spec;
  auto setup = [&](const blockrnn::OutputSpec& s, std::span<blockrnn::TensorView> views) {
    spec = s;
    std::vector<blockrnn::MutableTensorView> out_views;
    for (std::size_t k = 0; k < s.shapes.size(); ++k) {
      const std::size_t bytes =
          static_cast<std::size_t>(s.shapes[k].num_elements()) * blockrnn::dtype_size(s.dtype);
      out_buffers.push_back(allocate(bytes, "output " + def.outputs[k]));
      out_views.emplace_back(out_buffers.back().get(), s.dtype, s.shapes[k]);
    }
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (!copy[k]) continue;
      copied[k] = allocate(inputs[k].nbytes(), "a contiguous copy of " + def.inputs[k]);
      gather(inputs[k], inputs[k].itemsize(), swapped[k], copied[k].get());
      views[k].data = copied[k].get();
    }
    return out_views;
  };
  {
    nb::gil_scoped_release release;
    const CancelHook hook;
    blockrnn::run_op(def, views, attr_map, copies, /*allocates_outputs=*/true, setup);
  }
  std::vector<OutArray> outs;
  for (std::size_t k = 0; k < spec.shapes.size(); ++k) {
    const blockrnn::Shape& s = spec.shapes[k];
    unsigned char* buf = out_buffers[k].release();
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<unsigned char*>(p); });
    std::vector<size_t> shape(s.dims(), s.dims() + s.rank());
    outs.emplace_back(buf, shape.size(), shape.data(), owner, nullptr, to_dlpack(spec.dtype));
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
        case blockrnn::ErrorCode::kCancelled:
          // The signal's own exception (KeyboardInterrupt) is already set.
          if (PyErr_Occurred() == nullptr) PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
          return;
        case blockrnn::ErrorCode::kInternal:
          break;
      }
      PyErr_SetString(type, e.what());
    }
  });

  m.def("run", &run, nb::arg("op_index"), nb::arg("inputs"), nb::arg("attrs"), nb::arg("swapped"),
        nb::arg("bfloat16") = std::vector<bool>(),
        "Run the op at op_index of op_defs() on arrays of any layout; returns the outputs in TF "
        "order (bfloat16 outputs as uint16 bits).");
  m.def("op_defs", &op_defs,
        "[(name, inputs, [(attr, kind, has_default, default)], outputs)], in the order run's "
        "op_index counts");
  m.def("set_num_threads", &blockrnn::set_num_threads, nb::arg("n"));
  m.def("get_num_threads", &blockrnn::get_num_threads);
  m.def("max_threads", &blockrnn::max_threads);
  m.def("set_memory_limit", &blockrnn::set_memory_limit, nb::arg("bytes"));
  m.def("get_memory_limit", &blockrnn::get_memory_limit);
  m.def("set_workspace_cache_limit", &blockrnn::set_workspace_cache_limit, nb::arg("bytes"));
  m.def("get_workspace_cache_limit", &blockrnn::get_workspace_cache_limit);
  m.def(
      "set_isa", [](const std::string& name) { blockrnn::set_isa(name); }, nb::arg("name"));
  m.def("get_isa", &blockrnn::get_isa);
  m.def("set_force_reference", &blockrnn::set_force_reference, nb::arg("on"));
  m.def("force_reference", &blockrnn::force_reference);
  m.def("version", &blockrnn::version);
  m.def(
      "same_bytes",
      [](nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> a,
         nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> b) {
        // One memcmp, without the GIL: numpy's array_equal allocates a boolean array of the
        // operands' size (page faults for megabytes) and reads both once more.
        if (a.nbytes() != b.nbytes()) return false;
        nb::gil_scoped_release unlocked;
        return a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
      },
      nb::arg("a"), nb::arg("b"),
      "Whether two C-contiguous arrays of the same size hold the same bytes.");
  register_layers(m);
#ifdef BLOCKRNN_PYTHON_CUDA
  register_cuda(m);  // cuda_backend: "cuda" or "emulation"
#else
  m.attr("cuda_backend") = nb::none();  // a CPU-only build (python/blockrnn/_device.py)
#endif
}
