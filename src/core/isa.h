// Runtime choice of the instruction-set path for the hand-written kernels (the GEMM engine of
// src/gemm/ and the fused element-wise kernels of src/cpu/). Decided once per process from
// CPUID — never from a CPU-model table — and overridable for tests and comparisons:
//
//   BLOCKRNN_ISA=avx512     AVX-512 F/BW/DQ/VL + AVX2 + FMA (x86-64-v4)
//   BLOCKRNN_ISA=avx2       AVX2 + FMA (x86-64-v3)
//   BLOCKRNN_ISA=baseline   SSE2 only (every x86-64 CPU)
//   unset, empty or "auto"  the best path this CPU (and its OS) supports
//
// Asking for a path the CPU lacks, or for an unknown name, is an error (Error kInvalidArgument
// from the first op), never a silent fallback. set_isa() overrides the choice at run time.
// Results are bitwise reproducible within one path; the avx512 and avx2 GEMMs give the same bits
// (same per-output FMA chain), baseline (no FMA) may differ in the last bits (docs/design.md).
#pragma once

#include <string_view>

#include "blockrnn/context.h"

namespace blockrnn::core {

// The path every kernel uses now (the override, else the CPU's best). Throws Error when
// BLOCKRNN_ISA names an unknown path or one this CPU lacks.
Isa active_isa();

// Whether this CPU (and OS) can run the path.
bool isa_supported(Isa isa);

// Whether this CPU (and OS) has AVX512_BF16 (vdpbf16ps) on top of the avx512 path. Not a path
// of its own: the bfloat16 GEMM (src/gemm/gemm_bf16.h) uses it when the avx512 path is active.
bool cpu_has_avx512_bf16();

// Whether this CPU has F16C (vcvtph2ps / vcvtps2ph: CPUID leaf 1, ECX bit 29; every CPU of the
// avx2 and avx512 paths has it). Read from CPUID directly: not every compiler's
// __builtin_cpu_supports knows "f16c" (clang 14 does not).
bool cpu_has_f16c();

// Parses "avx512" | "avx2" | "baseline" | "auto" ("auto" gives the CPU's best).
Isa parse_isa(std::string_view name, const char* what);

}  // namespace blockrnn::core
