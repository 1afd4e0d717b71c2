// blockrnn/context.h — process-wide execution settings: thread count, the CPU path and the
// reference switch.
//
// Threads: every op uses get_num_threads() threads for its GEMMs and element-wise work. The
// default is BLOCKRNN_NUM_THREADS, else the first value of OMP_NUM_THREADS, else the number of
// cores this process may run on; a value that is not an integer in [1, 4096] is an error
// (Error kInvalidArgument, from set_num_threads or from the first op when it comes from the
// environment). blockrnn never changes the host's OpenMP or BLAS settings: its parallel
// regions ask for their thread count explicitly. The thread count never changes a result's
// bits (docs/design.md, "Determinism").
//
// Thread budget: the count is what one call asks for; what it gets comes from one process-wide
// budget shared by all calling threads (docs/reliability.md, "Thread budget"). libgomp keeps a
// pool of worker threads per calling thread and ends the process when it cannot start one, so
// the budget counts every pool, lets a pool grow only after the system has started that many
// more threads (with OpenMP's stack size, one to spare), runs at most max_threads() − 1 workers
// at once over all callers, and ends a thread's pool with its region when another caller got
// fewer threads than it asked for meanwhile. A call the budget cannot give threads runs with fewer,
// down to the calling thread alone, with the same bits: a shortage of threads never fails a call or
// ends the process. A call from inside a parallel region runs on the calling thread alone.
//
// CPU path: the hand-written kernels run on AVX-512, AVX2+FMA or baseline x86-64, chosen from
// CPUID; BLOCKRNN_ISA=avx512|avx2|baseline|auto or set_isa() forces one (an error when the CPU
// lacks it). get_isa() names the path in use.
//
// Reference mode: set_force_reference(true), or BLOCKRNN_FORCE_REFERENCE=1 in the environment,
// routes every op through its plain-loop reference implementation (src/ref/), the executable
// form of docs/ops.md. Tests run the conformance suites in both modes.
#pragma once

#include <string_view>

#include "blockrnn/export.h"

namespace blockrnn {

// Largest thread count ever accepted, whatever the machine (an absolute cap).
inline constexpr int kMaxThreads = 1024;
// Largest thread count accepted on this machine: 4 x the cores this process may run on, at least
// 16, at most kMaxThreads.
BLOCKRNN_API int max_threads();

BLOCKRNN_API void set_num_threads(
    int n);  // 1 <= n <= max_threads(), otherwise Error(kInvalidArgument)
BLOCKRNN_API int get_num_threads();

// Memory limit: an op refuses (Error kResourceExhausted, naming the op, the argument and the
// bytes) a call whose outputs, workspace and staging copies together need more bytes than this,
// before it allocates anything. The default is what the machine can hold: the smallest of its
// physical memory, the address-space and data limits (RLIMIT_AS, RLIMIT_DATA) and the cgroup's
// memory.max. bytes <= 0 restores the default.
BLOCKRNN_API void set_memory_limit(long long bytes);
BLOCKRNN_API long long get_memory_limit();

// Workspace cache: a one-shot op keeps its per-call workspace for the next call on the same
// thread (a layer object owns its own instead), so that repeated calls do not map, fault in and
// zero tens of MB afresh each time (docs/performance.md). Each calling thread keeps at most one
// buffer; all of them together stay within this limit, default 256 MiB; 0 keeps none, a
// negative value restores the default. Lowering it frees the calling thread's buffer when it no
// longer fits; another thread's goes at its next call or when it ends. The memory limit counts
// a call's workspace whether it is kept or new.
BLOCKRNN_API void set_workspace_cache_limit(long long bytes);
BLOCKRNN_API long long get_workspace_cache_limit();

// Cancellation: a long call asks `check(user)` at its step boundaries (on the thread that made
// the call); when it returns true, the call stops and throws Error(kCancelled). The check is per
// calling thread; nullptr removes it. The Python bindings install one that looks for pending
// signals (Ctrl-C) and raise KeyboardInterrupt.
using CancelCheck = bool (*)(void* user);
BLOCKRNN_API void set_cancel_check(CancelCheck check, void* user);

// Instruction-set paths of the CPU kernels.
enum class Isa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
BLOCKRNN_API const char* isa_name(Isa isa);  // "baseline", "avx2", "avx512"
// Forces a path by name ("avx512", "avx2", "baseline", "auto"); "" returns to the default.
BLOCKRNN_API void set_isa(std::string_view name);
BLOCKRNN_API const char* get_isa();  // the path ops use now

BLOCKRNN_API void set_force_reference(bool on);
BLOCKRNN_API bool force_reference();

// Version of the library, "MAJOR.MINOR.PATCH".
BLOCKRNN_API const char* version();

}  // namespace blockrnn
