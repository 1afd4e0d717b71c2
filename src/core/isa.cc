// CPU-feature detection and the process-wide ISA path (see core/isa.h).
#include "core/isa.h"

#include <atomic>
#include <cstdlib>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <iterator>
#include <string>

#include "blockrnn/error.h"
#include "core/enum_table.h"

namespace blockrnn::core {
namespace {

// CPUID through the compiler's runtime (libgcc / compiler-rt), which also checks with XGETBV
// that the OS saves the YMM/ZMM state before reporting AVX2 / AVX-512.
bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

}  // namespace

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx512() && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

namespace {

Isa best_isa() {
  if (cpu_has_avx512()) return Isa::kAvx512;
  if (cpu_has_avx2_fma()) return Isa::kAvx2;
  return Isa::kBaseline;
}

// -1: no run-time override (use the environment / CPU choice).
std::atomic<int> g_override{-1};

Isa checked(Isa isa, const char* what) {
  if (!isa_supported(isa)) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + ": the " + isa_name(isa) +
                    " path needs CPU features this machine lacks (best available: " +
                    isa_name(best_isa()) + ")");
  }
  return isa;
}

// The environment's choice, computed once; a bad value throws on every call (the static is
// left uninitialised when its initialiser throws), so every op reports it.
Isa env_isa() {
  static const Isa isa = [] {
    const char* v = std::getenv("BLOCKRNN_ISA");
    if (v == nullptr || *v == '\0') return best_isa();
    return checked(parse_isa(v, "BLOCKRNN_ISA"), "BLOCKRNN_ISA");
  }();
  return isa;
}

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return cpu_has_avx512();
    case Isa::kAvx2:
      return cpu_has_avx2_fma();
    case Isa::kBaseline:
      return true;
  }
  return false;
}

Isa parse_isa(std::string_view name, const char* what) {
  if (name == "avx512") return Isa::kAvx512;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "baseline") return Isa::kBaseline;
  if (name == "auto") return best_isa();
  throw Error(ErrorCode::kInvalidArgument,
              std::string(what) + ": expected one of avx512, avx2, baseline, auto; got \"" +
                  std::string(name) + "\"");
}

Isa active_isa() {
  const int o = g_override.load(std::memory_order_relaxed);
  return o >= 0 ? static_cast<Isa>(o) : env_isa();
}

}  // namespace blockrnn::core

namespace blockrnn {

const char* isa_name(Isa isa) {
  static constexpr const char* kNames[] = {"baseline", "avx2", "avx512"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(Isa::kAvx512) + 1);
  return core::enum_lookup(isa, kNames, "unknown");
}

void set_isa(std::string_view name) {
  if (name.empty()) {
    core::g_override.store(-1);
    return;
  }
  const Isa isa = core::checked(core::parse_isa(name, "set_isa"), "set_isa");
  core::g_override.store(static_cast<int>(isa));
}

const char* get_isa() {
  return isa_name(core::active_isa());
}

}  // namespace blockrnn
