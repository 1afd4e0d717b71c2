// blockrnn._core's CUDA functions, in the extension built with BLOCKRNN_PYTHON_CUDA (ON: the CUDA
// backend, nvcc; EMU: its host emulation, for the tests). The Python layer
// (python/blockrnn/_cuda.py) reads the caller's arrays (__cuda_array_interface__, DLPack, torch
// tensors) into plain descriptors, (pointer, dtype name, shape), and calls these; nothing here
// copies or converts data. blockrnn/cuda.h's run_op validates the call the CPU path's way and
// checks that every tensor is device memory.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "blockrnn/cuda.h"

namespace nb = nanobind;

namespace {

// One array of a call: its data pointer (an integer), dtype name and shape.
using Desc = std::tuple<std::uintptr_t, std::string, std::vector<int64_t>>;

blockrnn::Error invalid(const std::string& text) {
  return blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument, text);
}

blockrnn::DType dtype_named(const std::string& op, const std::string& name, const std::string& d) {
  if (d == "float16") return blockrnn::DType::kFloat16;
  if (d == "float32") return blockrnn::DType::kFloat32;
  if (d == "float64") return blockrnn::DType::kFloat64;
  if (d == "int64") return blockrnn::DType::kInt64;
  throw invalid(op + ": " + name + " must be float16, float32 or float64 on a CUDA device, got " +
                d);
}

void check_cuda(const std::string& op, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw blockrnn::Error(blockrnn::ErrorCode::kInternal,
                        op + ": " + what + " failed: " + cudaGetErrorName(e));
}

// Before a runtime call that needs a device: "<who>: no CUDA device is available".
void require_device(const std::string& who) {
  if (blockrnn::cuda::device_count() == 0) {
    throw blockrnn::Error(blockrnn::ErrorCode::kUnimplemented,
                          who + ": no CUDA device is available");
  }
}

// The stream integers of the CUDA array interface and DLPack: 1 the legacy default stream, 2 the
// per-thread default stream, anything else a cudaStream_t.
cudaStream_t stream_of(std::uintptr_t s) {
  if (s == 0 || s == 1) return nullptr;
#ifdef BLOCKRNN_CUDA_HOST_EMU
  if (s == 2) return nullptr;  // one thread's work runs at once on the emulation
#endif
  return reinterpret_cast<cudaStream_t>(s);
}

struct Call {
  const blockrnn::OpDef* def;
  std::vector<blockrnn::TensorView> views;
  blockrnn::AttrMap attrs;
};

Call make_call(std::size_t op_index, const std::vector<Desc>& inputs,
               const std::map<std::string, double>& attrs) {
  const auto& all = blockrnn::list_ops();
  if (op_index >= all.size()) throw invalid("unknown op index " + std::to_string(op_index));
  Call call{&all[op_index], {}, blockrnn::AttrMap(attrs.begin(), attrs.end())};
  const blockrnn::OpDef& def = *call.def;
  if (inputs.size() > def.inputs.size()) {
    throw invalid(def.name + ": expected at most " + std::to_string(def.inputs.size()) +
                  " inputs, got " + std::to_string(inputs.size()));
  }
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto& [ptr, dtype, dims] = inputs[k];
    if (dims.size() > static_cast<std::size_t>(blockrnn::Shape::kMaxRank)) {
      throw invalid(def.name + ": " + def.inputs[k] + " has rank " + std::to_string(dims.size()) +
                    "; inputs have rank at most " + std::to_string(blockrnn::Shape::kMaxRank));
    }
    call.views.emplace_back(reinterpret_cast<const void*>(ptr),
                            dtype_named(def.name, def.inputs[k], dtype),
                            blockrnn::Shape::from_dims(dims.data(), static_cast<int>(dims.size())));
  }
  return call;
}

// The device of every floating input with elements (cudaPointerGetAttributes): all on one
// device, each device or managed memory. Returns that device (the current one when no input has
// elements).
int common_device(const Call& call) {
  const blockrnn::OpDef& def = *call.def;
  int device = -1;
  std::string first;
  for (std::size_t k = 0; k < call.views.size(); ++k) {
    const blockrnn::TensorView& v = call.views[k];
    if (v.dtype == blockrnn::DType::kInt64 || v.shape.num_elements() == 0) continue;
    cudaPointerAttributes attr{};
    check_cuda(def.name, cudaPointerGetAttributes(&attr, v.data), "cudaPointerGetAttributes");
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      throw invalid(def.name + ": " + def.inputs[k] +
                    " is not CUDA device memory (its __cuda_array_interface__ or DLPack pointer "
                    "is host memory)");
    }
    if (device < 0) {
      device = attr.device;
      first = def.inputs[k];
    } else if (attr.device != device) {
      throw invalid(def.name + ": " + def.inputs[k] + " is on CUDA device " +
                    std::to_string(attr.device) + " and " + first + " on CUDA device " +
                    std::to_string(device) + "; all arrays of one call must be on one device");
    }
  }
  if (device < 0) check_cuda(def.name, cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

// Validates the call the CPU path's way (ranks, shapes, dtypes, attrs, seq_len_max), then that a
// device exists and the inputs are device memory on one device: everything before the outputs are
// allocated. Returns (dtype name, output shapes, device).
std::tuple<std::string, std::vector<std::vector<int64_t>>, int> prepare(
    std::size_t op_index, const std::vector<Desc>& inputs,
    const std::map<std::string, double>& attrs) {
  const Call call = make_call(op_index, inputs, attrs);
  const blockrnn::OutputSpec spec = blockrnn::infer_outputs(*call.def, call.views, call.attrs);
  if (blockrnn::cuda::device_count() == 0) {
    throw blockrnn::Error(blockrnn::ErrorCode::kUnimplemented,
                          call.def->name +
                              ": no CUDA device is available (this blockrnn is built with its "
                              "CUDA backend, which needs one to compute on device arrays)");
  }
  if (spec.dtype == blockrnn::DType::kBFloat16) {
    throw blockrnn::Error(blockrnn::ErrorCode::kUnimplemented,
                          call.def->name + ": bfloat16 is not supported on the CUDA backend yet");
  }
  const int device = common_device(call);
  std::vector<std::vector<int64_t>> shapes;
  for (const blockrnn::Shape& s : spec.shapes) shapes.emplace_back(s.dims(), s.dims() + s.rank());
  return {blockrnn::dtype_name(spec.dtype), shapes, device};
}

// Makes `consumer` wait for the work enqueued so far on each of `producers` (the streams of the
// inputs' __cuda_array_interface__), with one event each; none for a producer equal to it.
void wait_for(const std::string& op, std::uintptr_t consumer,
              const std::vector<std::uintptr_t>& producers) {
  for (std::uintptr_t p : producers) {
    if (stream_of(p) == stream_of(consumer)) continue;
    cudaEvent_t event = nullptr;
    check_cuda(op, cudaEventCreate(&event), "cudaEventCreate");
    cudaError_t e = cudaEventRecord(event, stream_of(p));
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream_of(consumer), event, 0);
    cudaEventDestroy(event);
    check_cuda(op, e, "waiting for an input's stream");
  }
}

// Runs the op into the caller's outputs (device memory of prepare's shapes) on `stream`, after
// it waits for `producers`. On `device`, the current device restored afterwards.
void run(std::size_t op_index, const std::vector<Desc>& inputs,
         const std::map<std::string, double>& attrs, const std::vector<Desc>& outputs, int device,
         std::uintptr_t stream, const std::vector<std::uintptr_t>& producers) {
  const Call call = make_call(op_index, inputs, attrs);
  const blockrnn::OpDef& def = *call.def;
  std::vector<blockrnn::MutableTensorView> outs;
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto& [ptr, dtype, dims] = outputs[k];
    const std::string& name = k < def.outputs.size() ? def.outputs[k] : "an output";
    outs.emplace_back(reinterpret_cast<void*>(ptr), dtype_named(def.name, name, dtype),
                      blockrnn::Shape::from_dims(dims.data(), static_cast<int>(dims.size())));
  }
  nb::gil_scoped_release release;
  int previous = 0;
  check_cuda(def.name, cudaGetDevice(&previous), "cudaGetDevice");
  if (previous != device) check_cuda(def.name, cudaSetDevice(device), "cudaSetDevice");
  try {
    wait_for(def.name, stream, producers);
    blockrnn::cuda::run_op(def, call.views, call.attrs, outs, stream_of(stream));
  } catch (...) {
    if (previous != device) cudaSetDevice(previous);
    throw;
  }
  if (previous != device) cudaSetDevice(previous);
}

// Device memory for an output that no framework allocates (inputs that are not torch tensors):
// cudaMalloc'd, freed with cudaFree when the last Python reference goes.
class DeviceBuffer {
 public:
  DeviceBuffer(std::size_t bytes, int device) : device_(device) {
    require_device("blockrnn.DeviceBuffer");
    int previous = 0;
    check_cuda("blockrnn", cudaGetDevice(&previous), "cudaGetDevice");
    if (previous != device) check_cuda("blockrnn", cudaSetDevice(device), "cudaSetDevice");
    const cudaError_t e = cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes);
    if (previous != device) cudaSetDevice(previous);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw blockrnn::Error(blockrnn::ErrorCode::kResourceExhausted,
                            "blockrnn: cudaMalloc of " + std::to_string(bytes) +
                                " bytes for an output failed (out of device memory)");
    }
    check_cuda("blockrnn", e, "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  std::uintptr_t ptr() const { return reinterpret_cast<std::uintptr_t>(ptr_); }
  int device() const { return device_; }

 private:
  void* ptr_ = nullptr;
  int device_;
};

// A non-blocking stream of the current device, destroyed with the object: for callers without a
// framework's streams (blockrnn.cuda_stream takes its .ptr) and the tests.
class Stream {
 public:
  Stream() {
    require_device("blockrnn.CudaStream");
    check_cuda("blockrnn", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags");
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::uintptr_t ptr() const { return reinterpret_cast<std::uintptr_t>(stream_); }

 private:
  cudaStream_t stream_ = nullptr;
};

nb::dlpack::dtype dlpack_dtype(const std::string& d) {
  if (d == "float16") return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
  if (d == "float64") return nb::dtype<double>();
  if (d == "int64") return nb::dtype<int64_t>();
  return nb::dtype<float>();
}

}  // namespace

void register_cuda(nb::module_& m) {
#ifdef BLOCKRNN_CUDA_HOST_EMU
  m.attr("cuda_backend") = "emulation";
#else
  m.attr("cuda_backend") = "cuda";
#endif
  m.def("cuda_device_count", &blockrnn::cuda::device_count);
  m.def("cuda_prepare", &prepare, nb::arg("op_index"), nb::arg("inputs"), nb::arg("attrs"),
        "Validates a call on device arrays [(ptr, dtype, shape)]; returns (dtype, output shapes, "
        "device). Nothing is allocated.");
  m.def("cuda_run", &run, nb::arg("op_index"), nb::arg("inputs"), nb::arg("attrs"),
        nb::arg("outputs"), nb::arg("device"), nb::arg("stream"), nb::arg("producers"),
        "Runs an op validated by cuda_prepare into device outputs on `stream` (an integer: 1 the "
        "legacy default stream, 2 the per-thread one, else a cudaStream_t), after waiting for "
        "the `producers` streams.");
  m.def(
      "cuda_wait",
      [](std::uintptr_t consumer, std::uintptr_t producer) {
        wait_for("blockrnn", consumer, {producer});
      },
      nb::arg("consumer"), nb::arg("producer"),
      "Makes stream `consumer` wait for the work enqueued so far on `producer`.");
  m.def(
      "cuda_synchronize",
      [](std::uintptr_t stream) {
        nb::gil_scoped_release release;
        check_cuda("blockrnn", cudaStreamSynchronize(stream_of(stream)), "cudaStreamSynchronize");
      },
      nb::arg("stream"));
  nb::class_<Stream>(m, "CudaStream")
      .def(nb::init<>())
      .def_prop_ro("ptr", &Stream::ptr)
      .def("synchronize", [](const Stream& s) {
        nb::gil_scoped_release release;
        check_cuda("blockrnn", cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s.ptr())),
                   "cudaStreamSynchronize");
      });
  nb::class_<DeviceBuffer>(m, "DeviceBuffer")
      .def(nb::init<std::size_t, int>(), nb::arg("bytes"), nb::arg("device"))
      .def_prop_ro("ptr", &DeviceBuffer::ptr)
      .def_prop_ro("device", &DeviceBuffer::device);
  // Host <-> device copies of a DeviceBuffer (synchronous, on the legacy default stream):
  // DeviceArray.get() and blockrnn.to_device.
  m.def(
      "cuda_copy_to_host",
      [](const DeviceBuffer& b, nb::ndarray<nb::numpy, nb::c_contig, nb::device::cpu> out) {
        nb::gil_scoped_release release;
        check_cuda("blockrnn",
                   cudaMemcpy(out.data(), reinterpret_cast<void*>(b.ptr()), out.nbytes(),
                              cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
      },
      nb::arg("buffer"), nb::arg("out"));
  m.def(
      "cuda_copy_from_host",
      [](const DeviceBuffer& b, nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> in) {
        nb::gil_scoped_release release;
        check_cuda("blockrnn",
                   cudaMemcpy(reinterpret_cast<void*>(b.ptr()), in.data(), in.nbytes(),
                              cudaMemcpyHostToDevice),
                   "cudaMemcpy");
      },
      nb::arg("buffer"), nb::arg("in"));
  // A DLPack capsule ("dltensor") of a buffer's bytes, owning a reference to the buffer.
  m.def(
      "cuda_dlpack",
      [](nb::handle buffer, const std::string& dtype, const std::vector<size_t>& shape) {
        const DeviceBuffer& b = nb::cast<const DeviceBuffer&>(buffer);
        return nb::ndarray<>(reinterpret_cast<void*>(b.ptr()), shape.size(), shape.data(), buffer,
                             nullptr, dlpack_dtype(dtype), nb::device::cuda::value, b.device());
      },
      nb::arg("buffer"), nb::arg("dtype"), nb::arg("shape"));
  // The parts of a DLPack capsule (what __dlpack__ returned): (ptr, dtype, shape, strides in
  // elements or None, device type, device id). The capsule's owner keeps the memory alive for as
  // long as the producer's array lives.
  m.def(
      "dlpack_info",
      [](nb::ndarray<nb::ro> a) {
        std::vector<int64_t> shape(a.ndim()), strides(a.ndim());
        for (std::size_t d = 0; d < a.ndim(); ++d) {
          shape[d] = static_cast<int64_t>(a.shape(d));
          strides[d] = a.stride(d);
        }
        const nb::dlpack::dtype t = a.dtype();
        std::string dtype = "other";
        if (t.lanes == 1 && t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float)) {
          dtype = "float" + std::to_string(t.bits);
        } else if (t.lanes == 1 && t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Int)) {
          dtype = "int" + std::to_string(t.bits);
        } else if (t.lanes == 1 && t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat)) {
          dtype = "bfloat" + std::to_string(t.bits);
        }
        return std::make_tuple(reinterpret_cast<std::uintptr_t>(a.data()), dtype, shape, strides,
                               a.device_type(), a.device_id());
      },
      nb::arg("capsule"));
}
