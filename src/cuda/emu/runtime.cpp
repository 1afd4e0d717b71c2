// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the stand-in CUDA
// runtime. "Device" memory is host memory from operator new, tracked in a table, poisoned with
// 0xFF bytes at allocation (NaN in every floating dtype, so a read before a write shows) and
// again before it is freed; every call checks its pointers against the table (a memset or copy
// must lie inside one live allocation of the right kind) and its stream against the live
// streams. Work enqueued on a stream runs at once in the calling thread, so every stream is
// always complete: synchronisation calls only check their arguments.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cuda/emu/emu.h"

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

struct CUstream_st {
  unsigned flags;
};

struct CUevent_st {
  bool recorded = false;
  std::chrono::steady_clock::time_point when;
};

// A captured graph and an instantiated one: the recorded work, in order.
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};

// The device's default memory pool: its release threshold (above 0, freed stream-ordered blocks
// are kept for reuse: State::pooled).
struct CUmemPoolHandle_st {
  std::uint64_t release_threshold = 0;  // CUDA's default: release at every synchronisation
};

namespace blockrnn::cuda_emu {
namespace {

constexpr std::size_t kAlignment = 256;  // cudaMalloc's guarantee
constexpr unsigned char kPoison = 0xFF;  // NaN in float16, float32 and float64

enum class Kind { kDevice, kPinnedHost };

struct Allocation {
  std::size_t bytes;
  Kind kind;
  bool stream_ordered = false;  // from cudaMallocAsync, on `stream`
  cudaStream_t stream = nullptr;
};

// BLOCKRNN_CUDA_EMU_DEVICES=0 makes the stand-in a machine without a GPU from the start (the
// runbook's own test runs a test binary that way); anything else, or unset, is one device.
int initial_device_count() {
  const char* v = std::getenv("BLOCKRNN_CUDA_EMU_DEVICES");
  return v != nullptr && std::strcmp(v, "0") == 0 ? 0 : 1;
}

struct State {
  std::mutex mu;
  std::map<std::uintptr_t, Allocation> allocations;  // by start address
  std::set<cudaStream_t> streams;                    // created and not destroyed
  // Every stream object ever created: kept until exit, so that a destroyed stream's address is
  // never reused and a stale handle is always recognised.
  std::vector<std::unique_ptr<CUstream_st>> stream_objects;
  std::set<cudaEvent_t> events;  // created and not destroyed (deleted when destroyed)
  CUmemPoolHandle_st default_pool;
  // Streams capturing a graph, with the work recorded so far.
  std::map<cudaStream_t, std::vector<std::function<void()>>> capturing;
  // Freed stream-ordered blocks the pool keeps (only while its release threshold is above 0, as
  // the timing tool sets it): (stream, bytes) -> blocks, poisoned, reused by a cudaMallocAsync of
  // the same size on the same stream, as CUDA's pool reuses memory freed on a stream.
  std::multimap<std::pair<cudaStream_t, std::size_t>, void*> pooled;
  ~State() {
    for (const auto& [key, block] : pooled) ::operator delete(block, std::align_val_t(kAlignment));
  }
  std::set<cudaGraph_t> graphs;
  std::set<cudaGraphExec_t> execs;
  std::size_t instantiated = 0, launches = 0;
  int devices = initial_device_count();
  std::size_t violations = 0;
  std::string last_violation;
};

State& state() {
  static State s;
  return s;
}

thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

// A broken API rule: reported, then returned (and kept for cudaGetLastError).
cudaError_t violation(cudaError_t e, const std::string& what) {
  report_violation(what);
  return fail(e);
}

bool has_device() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().devices > 0;
}

// The allocation holding [p, p + bytes), bytes > 0, or null. Caller holds the lock.
const Allocation* find_locked(const void* p, std::size_t bytes) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  auto& table = state().allocations;
  auto it = table.upper_bound(addr);
  if (it == table.begin()) return nullptr;
  --it;
  const std::uintptr_t offset = addr - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) {
    return nullptr;
  }
  return &it->second;
}

bool in_allocation(const void* p, std::size_t bytes, Kind kind) {
  std::lock_guard<std::mutex> lock(state().mu);
  const Allocation* a = find_locked(p, bytes);
  return a != nullptr && a->kind == kind;
}

bool is_device_pointer(const void* p) {
  std::lock_guard<std::mutex> lock(state().mu);
  const Allocation* a = find_locked(p, 1);
  return a != nullptr && a->kind == Kind::kDevice;
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

bool is_capturing(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().capturing.count(stream) > 0;
}

bool any_capturing() {
  std::lock_guard<std::mutex> lock(state().mu);
  return !state().capturing.empty();
}

// A call that cannot be part of a capture (a synchronisation, a stream-ordered allocation: the
// stand-in records kernels, memsets and GEMMs only) on a capturing stream.
cudaError_t refuse_in_capture(cudaStream_t stream, const char* fn) {
  if (!is_capturing(stream)) return cudaSuccess;
  report_violation(std::string(fn) + ": not permitted (or not emulated) while stream " +
                   hex(stream) + " captures a graph");
  t_last_error = cudaErrorStreamCaptureUnsupported;
  return cudaErrorStreamCaptureUnsupported;
}

// stream_ordered: cudaMallocAsync's allocation on `stream`.
cudaError_t allocate(void** ptr, std::size_t bytes, Kind kind, const char* fn,
                     bool stream_ordered = false, cudaStream_t stream = nullptr) {
  if (ptr == nullptr) return violation(cudaErrorInvalidValue, std::string(fn) + ": ptr is null");
  *ptr = nullptr;
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (bytes == 0) return cudaSuccess;
  void* p = nullptr;
  if (stream_ordered) {
    std::lock_guard<std::mutex> lock(state().mu);
    const auto it = state().pooled.find({stream, bytes});
    if (it != state().pooled.end()) {
      p = it->second;
      state().pooled.erase(it);
    }
  }
  if (p == nullptr) p = ::operator new(bytes, std::align_val_t(kAlignment), std::nothrow);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  std::memset(p, kPoison, bytes);
  {
    std::lock_guard<std::mutex> lock(state().mu);
    state().allocations[reinterpret_cast<std::uintptr_t>(p)] = {bytes, kind, stream_ordered,
                                                                stream};
  }
  *ptr = p;
  return cudaSuccess;
}

cudaError_t release(void* p, Kind kind, const char* fn) {
  std::size_t bytes = 0;
  bool keep = false;  // into the pool, for reuse
  {
    std::lock_guard<std::mutex> lock(state().mu);
    auto& table = state().allocations;
    const auto it = table.find(reinterpret_cast<std::uintptr_t>(p));
    if (it != table.end() && it->second.kind == kind) {
      bytes = it->second.bytes;
      keep = it->second.stream_ordered && state().default_pool.release_threshold > 0;
      if (keep) state().pooled.emplace(std::make_pair(it->second.stream, bytes), p);
      table.erase(it);
    }
  }
  if (bytes == 0) {
    // Not the start of a live allocation of this kind: a double free, an interior pointer, host
    // memory, or device memory given to cudaFreeHost (or the reverse).
    return violation(cudaErrorInvalidValue, std::string(fn) + ": " + hex(p) + " is not a live " +
                                                (kind == Kind::kDevice ? "device" : "pinned host") +
                                                " allocation");
  }
  std::memset(p, kPoison, bytes);
  if (!keep) ::operator delete(p, std::align_val_t(kAlignment));
  return cudaSuccess;
}

cudaError_t check_stream(cudaStream_t stream, const char* fn) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (!is_valid_stream(stream)) {
    return violation(cudaErrorInvalidResourceHandle,
                     std::string(fn) + ": stream " + hex(stream) + " is not a live stream");
  }
  return cudaSuccess;
}

// The device range [p, p + bytes) of a memset or copy, or a violation naming `what`.
cudaError_t check_device_range(const void* p, std::size_t bytes, const char* fn, const char* what) {
  if (bytes == 0) return cudaSuccess;
  if (in_allocation(p, bytes, Kind::kDevice)) return cudaSuccess;
  return violation(cudaErrorInvalidValue, std::string(fn) + ": " + what + " [" + hex(p) + ", +" +
                                              std::to_string(bytes) +
                                              " bytes) is not inside one device allocation");
}

cudaError_t memcpy_checked(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                           const char* fn) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) {
    return violation(cudaErrorInvalidValue, std::string(fn) + ": null pointer");
  }
  bool dst_dev = false, src_dev = false;
  switch (kind) {
    case cudaMemcpyHostToHost:
      break;
    case cudaMemcpyHostToDevice:
      dst_dev = true;
      break;
    case cudaMemcpyDeviceToHost:
      src_dev = true;
      break;
    case cudaMemcpyDeviceToDevice:
      dst_dev = src_dev = true;
      break;
    case cudaMemcpyDefault:
      dst_dev = is_device_pointer(dst);
      src_dev = is_device_pointer(src);
      break;
    default:
      return violation(cudaErrorInvalidMemcpyDirection, std::string(fn) + ": bad kind");
  }
  // A side declared host must not be device memory (the copy would read the wrong memory on a
  // GPU), and a side declared device must lie inside one device allocation.
  if (!dst_dev && is_device_pointer(dst)) {
    return violation(cudaErrorInvalidValue,
                     std::string(fn) + ": dst is device memory, kind says host");
  }
  if (!src_dev && is_device_pointer(src)) {
    return violation(cudaErrorInvalidValue,
                     std::string(fn) + ": src is device memory, kind says host");
  }
  if (dst_dev) {
    if (cudaError_t e = check_device_range(dst, bytes, fn, "dst"); e != cudaSuccess) return e;
  }
  if (src_dev) {
    if (cudaError_t e = check_device_range(src, bytes, fn, "src"); e != cudaSuccess) return e;
  }
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  if (d < s + bytes && s < d + bytes) {
    return violation(cudaErrorInvalidValue, std::string(fn) + ": src and dst overlap");
  }
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

}  // namespace

bool is_device_range(const void* p, std::size_t bytes) {
  return bytes > 0 && in_allocation(p, bytes, Kind::kDevice);
}

bool stream_of_allocation(const void* p, cudaStream_t* stream) {
  std::lock_guard<std::mutex> lock(state().mu);
  const Allocation* a = find_locked(p, 1);
  if (a == nullptr || !a->stream_ordered) return false;
  *stream = a->stream;
  return true;
}

bool is_valid_stream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return true;
  }
  std::lock_guard<std::mutex> lock(state().mu);
  return state().streams.count(stream) > 0;
}

void report_violation(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(state().mu);
    ++state().violations;
    state().last_violation = what;
  }
  std::fprintf(stderr, "blockrnn CUDA emulation: %s\n", what.c_str());
}

std::size_t violation_count() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().violations;
}

std::string last_violation() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().last_violation;
}

std::size_t live_allocations() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().allocations.size();
}

void set_device_count(int count) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().devices = count;
}

void enqueue(cudaStream_t stream, std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(state().mu);
    const auto it = state().capturing.find(stream);
    if (it != state().capturing.end()) {
      it->second.push_back(std::move(work));
      return;
    }
  }
  work();
}

std::size_t graphs_instantiated() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().instantiated;
}

std::size_t graph_launches() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().launches;
}

std::size_t live_graphs() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().graphs.size() + state().execs.size();
}

void run_grid(dim3 grid, dim3 block, const std::function<void()>& thread);

void launch(const char* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
            cudaStream_t stream, const std::function<void()>& thread) {
  if (check_stream(stream, kernel) != cudaSuccess) return;
  const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535 || shared_bytes != 0) {
    violation(cudaErrorInvalidConfiguration,
              std::string(kernel) + ": launch configuration grid (" + std::to_string(grid.x) +
                  ", " + std::to_string(grid.y) + ", " + std::to_string(grid.z) + ") block (" +
                  std::to_string(block.x) + ", " + std::to_string(block.y) + ", " +
                  std::to_string(block.z) + "), dynamic shared memory " +
                  std::to_string(shared_bytes) + " bytes");
    return;
  }
  enqueue(stream, [grid, block, thread] { run_grid(grid, block, thread); });
}

void run_grid(dim3 grid, dim3 block, const std::function<void()>& thread) {
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = grid.z; bz-- > 0;) {
    for (unsigned by = grid.y; by-- > 0;) {
      for (unsigned bx = grid.x; bx-- > 0;) {
        blockIdx = {bx, by, bz};
        for (unsigned tz = block.z; tz-- > 0;) {
          for (unsigned ty = block.y; ty-- > 0;) {
            for (unsigned tx = block.x; tx-- > 0;) {
              threadIdx = {tx, ty, tz};
              thread();
            }
          }
        }
      }
    }
  }
}

}  // namespace blockrnn::cuda_emu

using namespace blockrnn::cuda_emu;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr)
    return violation(cudaErrorInvalidValue, "cudaGetDeviceCount: count is null");
  std::lock_guard<std::mutex> lock(state().mu);
  *count = state().devices;
  return state().devices > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return violation(cudaErrorInvalidValue, "cudaGetDevice: device is null");
  if (!has_device()) return fail(cudaErrorNoDevice);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (device != 0) return violation(cudaErrorInvalidDevice, "cudaSetDevice: no such device");
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (any_capturing()) {
    return violation(cudaErrorStreamCaptureUnsupported,
                     "cudaDeviceSynchronize: not permitted while a stream captures a graph");
  }
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  return t_last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidPitchValue:
      return "cudaErrorInvalidPitchValue";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (host emulation)";
    default:
      return "see the emulation's message on stderr (host emulation)";
  }
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  return allocate(ptr, bytes, Kind::kDevice, "cudaMalloc");
}

cudaError_t cudaFree(void* ptr) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (ptr == nullptr) return cudaSuccess;
  return release(ptr, Kind::kDevice, "cudaFree");
}

cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMallocAsync"); e != cudaSuccess) return e;
  if (cudaError_t e = refuse_in_capture(stream, "cudaMallocAsync"); e != cudaSuccess) return e;
  return allocate(ptr, bytes, Kind::kDevice, "cudaMallocAsync", true, stream);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaFreeAsync"); e != cudaSuccess) return e;
  if (cudaError_t e = refuse_in_capture(stream, "cudaFreeAsync"); e != cudaSuccess) return e;
  if (ptr == nullptr) return violation(cudaErrorInvalidValue, "cudaFreeAsync: ptr is null");
  return release(ptr, Kind::kDevice, "cudaFreeAsync");
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
  return allocate(ptr, bytes, Kind::kPinnedHost, "cudaMallocHost");
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (ptr == nullptr) return cudaSuccess;
  return release(ptr, Kind::kPinnedHost, "cudaFreeHost");
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr || ptr == nullptr) {
    return violation(cudaErrorInvalidValue, "cudaPointerGetAttributes: null argument");
  }
  if (!has_device()) return fail(cudaErrorNoDevice);
  *attributes = {cudaMemoryTypeUnregistered, -2, nullptr, nullptr};
  std::lock_guard<std::mutex> lock(state().mu);
  if (const Allocation* a = find_locked(ptr, 1)) {
    void* p = const_cast<void*>(ptr);
    if (a->kind == Kind::kDevice) {
      *attributes = {cudaMemoryTypeDevice, 0, p, nullptr};
    } else {
      *attributes = {cudaMemoryTypeHost, 0, p, p};
    }
  }
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes) {
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMemsetAsync"); e != cudaSuccess) return e;
  if (cudaError_t e = check_device_range(ptr, bytes, "cudaMemsetAsync", "ptr"); e != cudaSuccess) {
    return e;
  }
  if (bytes > 0) enqueue(stream, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset2DAsync(void* ptr, std::size_t pitch, int value, std::size_t width,
                              std::size_t height, cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMemset2DAsync"); e != cudaSuccess) return e;
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > pitch) {
    return violation(
        cudaErrorInvalidPitchValue,
        "cudaMemset2DAsync: width " + std::to_string(width) + " > pitch " + std::to_string(pitch));
  }
  const std::size_t extent = (height - 1) * pitch + width;
  if (cudaError_t e = check_device_range(ptr, extent, "cudaMemset2DAsync", "ptr");
      e != cudaSuccess) {
    return e;
  }
  auto* rows = static_cast<unsigned char*>(ptr);
  enqueue(stream, [=] {
    for (std::size_t r = 0; r < height; ++r) std::memset(rows + r * pitch, value, width);
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, enum cudaMemcpyKind kind) {
  return memcpy_checked(dst, src, bytes, kind, "cudaMemcpy");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaMemcpyAsync"); e != cudaSuccess) return e;
  if (cudaError_t e = refuse_in_capture(stream, "cudaMemcpyAsync"); e != cudaSuccess) return e;
  return memcpy_checked(dst, src, bytes, kind, "cudaMemcpyAsync");
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (stream == nullptr || (flags != cudaStreamDefault && flags != cudaStreamNonBlocking)) {
    return violation(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: bad arguments");
  }
  if (!has_device()) return fail(cudaErrorNoDevice);
  std::lock_guard<std::mutex> lock(state().mu);
  state().stream_objects.push_back(std::make_unique<CUstream_st>(CUstream_st{flags}));
  *stream = state().stream_objects.back().get();
  state().streams.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  bool erased = false;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    erased = state().streams.erase(stream) > 0;
  }
  if (!erased) {
    return violation(cudaErrorInvalidResourceHandle,
                     "cudaStreamDestroy: " + hex(stream) + " is not a live stream");
  }
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaStreamSynchronize"); e != cudaSuccess) return e;
  return refuse_in_capture(stream, "cudaStreamSynchronize");
}

// Capture only on created streams (CUDA refuses the legacy default stream); one capture per
// stream at a time.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  if (cudaError_t e = check_stream(stream, "cudaStreamBeginCapture"); e != cudaSuccess) return e;
  if (stream == nullptr || stream == cudaStreamLegacy) {
    return violation(cudaErrorStreamCaptureUnsupported,
                     "cudaStreamBeginCapture: the legacy default stream cannot capture");
  }
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed) {
    return violation(cudaErrorInvalidValue, "cudaStreamBeginCapture: bad mode");
  }
  std::lock_guard<std::mutex> lock(state().mu);
  if (!state().capturing.emplace(stream, std::vector<std::function<void()>>{}).second) {
    report_violation("cudaStreamBeginCapture: the stream is already capturing");
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return violation(cudaErrorInvalidValue, "cudaStreamEndCapture: null");
  if (cudaError_t e = check_stream(stream, "cudaStreamEndCapture"); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(state().mu);
  const auto it = state().capturing.find(stream);
  if (it == state().capturing.end()) {
    report_violation("cudaStreamEndCapture: the stream is not capturing");
    return fail(cudaErrorInvalidValue);
  }
  *graph = new CUgraph_st{std::move(it->second)};
  state().capturing.erase(it);
  state().graphs.insert(*graph);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  if (status == nullptr) return violation(cudaErrorInvalidValue, "cudaStreamIsCapturing: null");
  if (cudaError_t e = check_stream(stream, "cudaStreamIsCapturing"); e != cudaSuccess) return e;
  *status = is_capturing(stream) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (exec == nullptr || flags != 0) {
    return violation(cudaErrorInvalidValue, "cudaGraphInstantiate: null exec or flags not 0");
  }
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().graphs.count(graph) == 0) {
    report_violation("cudaGraphInstantiate: not a live graph");
    return fail(cudaErrorInvalidValue);
  }
  *exec = new CUgraphExec_st{graph->work};
  state().execs.insert(*exec);
  ++state().instantiated;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (cudaError_t e = check_stream(stream, "cudaGraphLaunch"); e != cudaSuccess) return e;
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    if (state().execs.count(exec) == 0) {
      report_violation("cudaGraphLaunch: not a live graph exec");
      return fail(cudaErrorInvalidValue);
    }
    work = exec->work;
    ++state().launches;
  }
  for (auto& w : work) enqueue(stream, w);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().graphs.erase(graph) == 0) {
    report_violation("cudaGraphDestroy: not a live graph");
    return fail(cudaErrorInvalidValue);
  }
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().execs.erase(exec) == 0) {
    report_violation("cudaGraphExecDestroy: not a live graph exec");
    return fail(cudaErrorInvalidValue);
  }
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (event == nullptr) return violation(cudaErrorInvalidValue, "cudaEventCreate: event is null");
  if (!has_device()) return fail(cudaErrorNoDevice);
  *event = new CUevent_st;
  std::lock_guard<std::mutex> lock(state().mu);
  state().events.insert(*event);
  return cudaSuccess;
}

namespace {
bool is_live_event(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().events.count(event) > 0;
}
cudaError_t check_event(cudaEvent_t event, const char* fn) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (!is_live_event(event)) {
    return violation(cudaErrorInvalidResourceHandle,
                     std::string(fn) + ": " + hex(event) + " is not a live event");
  }
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t e = check_event(event, "cudaEventDestroy"); e != cudaSuccess) return e;
  {
    std::lock_guard<std::mutex> lock(state().mu);
    state().events.erase(event);
  }
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (cudaError_t e = check_event(event, "cudaEventRecord"); e != cudaSuccess) return e;
  if (cudaError_t e = check_stream(stream, "cudaEventRecord"); e != cudaSuccess) return e;
  event->recorded = true;
  event->when = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return check_event(event, "cudaEventSynchronize");
}

// Work runs at once in the calling thread, so a recorded event is always complete: the wait only
// checks its arguments.
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (cudaError_t e = check_event(event, "cudaStreamWaitEvent"); e != cudaSuccess) return e;
  if (cudaError_t e = check_stream(stream, "cudaStreamWaitEvent"); e != cudaSuccess) return e;
  if (flags != 0) return violation(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags must be 0");
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return violation(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is null");
  if (cudaError_t e = check_event(start, "cudaEventElapsedTime"); e != cudaSuccess) return e;
  if (cudaError_t e = check_event(end, "cudaEventElapsedTime"); e != cudaSuccess) return e;
  if (!start->recorded || !end->recorded) {
    return violation(cudaErrorInvalidResourceHandle,
                     "cudaEventElapsedTime: an event was never recorded");
  }
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  if (prop == nullptr) {
    return violation(cudaErrorInvalidValue, "cudaGetDeviceProperties: prop is null");
  }
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (device != 0) {
    return violation(cudaErrorInvalidDevice, "cudaGetDeviceProperties: no such device");
  }
  *prop = {};
  std::snprintf(prop->name, sizeof prop->name, "%s", "blockrnn host emulation");
  prop->multiProcessorCount = 1;
  prop->major = 0;
  prop->minor = 0;
  prop->clockRate = 0;
  return cudaSuccess;
}

// 0: not a CUDA version (the stand-in is none).
cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return violation(cudaErrorInvalidValue, "cudaDriverGetVersion: null");
  *version = 0;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return violation(cudaErrorInvalidValue, "cudaRuntimeGetVersion: null");
  *version = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (pool == nullptr) return violation(cudaErrorInvalidValue, "cudaDeviceGetDefaultMemPool: null");
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (device != 0) {
    return violation(cudaErrorInvalidDevice, "cudaDeviceGetDefaultMemPool: no such device");
  }
  *pool = &state().default_pool;
  return cudaSuccess;
}

namespace {
cudaError_t check_pool_attr(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value, const char* fn) {
  if (!has_device()) return fail(cudaErrorNoDevice);
  if (pool != &state().default_pool || value == nullptr ||
      attr != cudaMemPoolAttrReleaseThreshold) {
    return violation(cudaErrorInvalidValue,
                     std::string(fn) + ": only the default pool's release threshold is emulated");
  }
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  if (cudaError_t e = check_pool_attr(pool, attr, value, "cudaMemPoolSetAttribute");
      e != cudaSuccess) {
    return e;
  }
  std::lock_guard<std::mutex> lock(state().mu);
  std::memcpy(&pool->release_threshold, value, sizeof(std::uint64_t));
  if (pool->release_threshold == 0) {  // back to releasing: the kept blocks go
    for (const auto& [key, block] : state().pooled) {
      ::operator delete(block, std::align_val_t(kAlignment));
    }
    state().pooled.clear();
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value) {
  if (cudaError_t e = check_pool_attr(pool, attr, value, "cudaMemPoolGetAttribute");
      e != cudaSuccess) {
    return e;
  }
  std::lock_guard<std::mutex> lock(state().mu);
  std::memcpy(value, &pool->release_threshold, sizeof(std::uint64_t));
  return cudaSuccess;
}

}  // extern "C"
