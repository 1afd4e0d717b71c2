// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the stand-in for the
// CUDA runtime API header. Only the targets built with BLOCKRNN_CUDA_HOST_EMU see this directory;
// the real backend includes the toolkit's header of the same name.
//
// It declares the part of the runtime that src/cuda/ and tests/cuda/ use, with the toolkit's
// names and error codes. src/cuda/emu/runtime.cpp implements it on the host: "device" memory is
// host memory that the stand-in tracks, poisons (every byte 0xFF: NaN in float16, float32 and
// float64) and checks on every use; streams run their work at once, in the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

// The toolkit's numbering, for the codes the stand-in returns.
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidPitchValue = 12,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
typedef enum cudaError cudaError_t;

typedef struct CUstream_st* cudaStream_t;
// The special handles: the legacy default stream (also nullptr) and the per-thread one.
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

// Events: the stand-in records the host's steady clock when an event is recorded (work runs at
// once, so an event is complete as soon as it is recorded).
typedef struct CUevent_st* cudaEvent_t;

// Memory pools: only the default pool of the device and its release threshold.
typedef struct CUmemPoolHandle_st* cudaMemPool_t;
enum cudaMemPoolAttr {
  cudaMemPoolAttrReleaseThreshold = 4,
};

// The fields of the device properties that blockrnn's tools read.
struct cudaDeviceProp {
  char name[256];
  int multiProcessorCount;
  int major;
  int minor;
  int clockRate;  // kHz
};

// Graphs: stream capture records the work enqueued on the capturing stream (kernel launches,
// memsets, copies, cuBLAS GEMMs) instead of running it; a graph's instantiation copies the
// record; launching it runs the record on the stream. Nothing else of the graph API.
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

extern "C" {
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocAsync(void** ptr, std::size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr);

cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream);
cudaError_t cudaMemset2DAsync(void* ptr, std::size_t pitch, int value, std::size_t width,
                              std::size_t height, cudaStream_t stream);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value);
}
