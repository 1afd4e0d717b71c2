// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): what the stand-in runtime
// offers beyond the CUDA API — the kernel execution model for src/cuda/kernels.cu compiled by the
// host compiler, the checks shared by the runtime and the cuBLAS stand-in, and a few controls for
// the tests. Only built with BLOCKRNN_CUDA_HOST_EMU.
#pragma once

#include <cmath>  // expf, tanhf, exp, tanh: the device math functions, here the host's
#include <cstddef>
#include <functional>
#include <string>

#include <cuda_runtime_api.h>

#include "cuda/qualifiers.h"

// CUDA's function qualifiers mean nothing on the host (cuda/qualifiers.h). __syncthreads and
// __shared__ are left undefined on purpose: a kernel that needs a block's threads to run together
// does not compile here until the emulation runs them together (it runs them one after another,
// below).

// The built-in variables of the kernel thread being run, set by blockrnn::cuda_emu::launch.
extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

namespace blockrnn::cuda_emu {

// Runs `thread` once for every thread of the grid, after the checks a real launch makes (a
// device, a valid stream, 1..1024 threads per block within the per-dimension limits, grid
// dimensions within the limits, no dynamic shared memory). Blocks and the threads of a block run
// one after another, in DESCENDING order (the last block's last thread first), so a kernel that
// silently depends on threads finishing in index order gives wrong results here. A failed check
// sets the error that cudaGetLastError returns, as a failed launch does; nothing runs.
void launch(const char* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
            cudaStream_t stream, const std::function<void()>& thread);

// ---- checks shared with the cuBLAS stand-in ----

// Work enqueued on `stream`: run now, or recorded when the stream is capturing a graph (then it
// runs when the graph is launched). `work` must hold copies of what it reads from the caller.
void enqueue(cudaStream_t stream, std::function<void()> work);

// True when [p, p + bytes) lies inside one live device allocation.
bool is_device_range(const void* p, std::size_t bytes);
// True when p lies inside a live stream-ordered allocation (cudaMallocAsync); *stream is then the
// stream it was allocated on.
bool stream_of_allocation(const void* p, cudaStream_t* stream);
// True for nullptr, cudaStreamLegacy, cudaStreamPerThread and a created, not destroyed, stream.
bool is_valid_stream(cudaStream_t stream);
// Reports a broken rule of the CUDA or cuBLAS API: counted, kept as the last violation, and
// written to stderr ("blockrnn CUDA emulation: <what>").
void report_violation(const std::string& what);

// ---- controls for the tests ----

// Broken rules reported since the start of the process, and the last one's text.
std::size_t violation_count();
std::string last_violation();
// Device and pinned host allocations not yet freed.
std::size_t live_allocations();
// Graphs instantiated and graph launches since the start of the process; graphs and graph execs
// not yet destroyed.
std::size_t graphs_instantiated();
std::size_t graph_launches();
std::size_t live_graphs();
// The number of devices the stand-in reports (default 1, or the environment variable
// BLOCKRNN_CUDA_EMU_DEVICES when set to 0 or 1 at the first CUDA call: lets a script run a
// test binary "on a machine without a GPU"). With 0, cudaGetDeviceCount and every
// call that needs a device return cudaErrorNoDevice, as on a machine without a GPU.
void set_device_count(int count);

}  // namespace blockrnn::cuda_emu
