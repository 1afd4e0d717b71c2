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
// CPU path: the hand-written kernels run on AVX-512, AVX2+FMA or baseline x86-64, chosen from
// CPUID; BLOCKRNN_ISA=avx512|avx2|baseline|auto or set_isa() forces one (an error when the CPU
// lacks it). get_isa() names the path in use.
//
// Reference mode: set_force_reference(true), or BLOCKRNN_FORCE_REFERENCE=1 in the environment,
// routes every op through its plain-loop reference implementation (src/ref/), the executable
// form of SPEC.md. Tests run the conformance suites in both modes.
#pragma once

#include <string_view>

namespace blockrnn {

// Largest accepted thread count.
inline constexpr int kMaxThreads = 4096;

void set_num_threads(int n);  // 1 <= n <= kMaxThreads, otherwise Error(kInvalidArgument)
int get_num_threads();

// Instruction-set paths of the CPU kernels.
enum class Isa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
const char* isa_name(Isa isa);  // "baseline", "avx2", "avx512"
// Forces a path by name ("avx512", "avx2", "baseline", "auto"); "" returns to the default.
void set_isa(std::string_view name);
const char* get_isa();  // the path ops use now

void set_force_reference(bool on);
bool force_reference();

// Version of the library, "MAJOR.MINOR.PATCH".
const char* version();

}  // namespace blockrnn
