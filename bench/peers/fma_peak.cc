// fma_peak: measures this machine's float32 FMA peak (GFLOP/s) at a given thread count, or
// with --isa avx512_bf16 its bfloat16 dot-product peak (vdpbf16ps: bf16 products, fp32 sums).
//
//   fma_peak [--threads N] [--seconds S] [--reps R] [--isa auto|avx2|avx512|avx512_bf16]
//
// Defaults: --threads 1 --seconds 0.3 --reps 5 --isa auto (AVX-512 if the CPU has avx512f,
// else AVX2 if it has avx2 and fma). Prints one JSON object on stdout, e.g.
//   {"peer":"fma_peak","isa":"avx512","threads":2,"gflops":...,"cpu":"AMD EPYC",...}
//
// Method: each of N OpenMP threads runs `kChains` independent accumulator chains
// acc = fma(acc, a, b) in registers (16 zmm for AVX-512, 12 ymm for AVX2: enough to cover
// FMA latency x throughput on two FMA ports), with no memory traffic. A measurement is the
// wall time between two barriers around the loop; FLOPs = 2 * lanes * FMAs, summed over
// threads. One vdpbf16ps multiplies 32 bf16 pairs and adds them pairwise into 16 fp32 lanes:
// 64 FLOPs, so its kernel counts 32 lanes. The best (highest) of --reps measurements is reported.
// The accumulators are summed into a volatile sink so the chains cannot be optimised away.
//
// No dependency on blockrnn. The kernels are compiled with __attribute__((target(...))), so
// the file needs no global -m flags; the ISA is chosen at run time with
// __builtin_cpu_supports.

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FMA_PEAK_X86 1
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 1;
  double seconds = 0.3;  // per measurement
  int reps = 5;
  std::string isa = "auto";  // auto | avx2 | avx512
};

// One kernel: runs `iters` iterations of `chains` FMAs of `lanes` floats each, returns a
// value that depends on every accumulator.
struct Kernel {
  const char* isa;
  int lanes;
  int chains;
  float (*run)(long iters);
};

volatile float g_sink = 0.0f;  // keeps the results of the chains alive

#ifdef FMA_PEAK_X86

constexpr int kChains512 = 16;
constexpr int kChains256 = 12;

// acc converges to b / (1 - a) = 1: no overflow, no denormals, whatever `iters` is.
__attribute__((target("avx512f"), noinline)) float RunAvx512(long iters) {
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(0.000001f);
  __m512 acc[kChains512];
  for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(1.0f + 0.001f * j);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 sum = acc[0];
  for (int j = 1; j < kChains512; ++j) sum = _mm512_add_ps(sum, acc[j]);
  // Plain store + scalar sum (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized).
  alignas(64) float v[16];
  _mm512_store_ps(v, sum);
  float s = 0.0f;
  for (float x : v) s += x;
  return s;
}

__attribute__((target("avx2,fma"), noinline)) float RunAvx2(long iters) {
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(0.000001f);
  __m256 acc[kChains256];
  for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_set1_ps(1.0f + 0.001f * j);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 sum = acc[0];
  for (int j = 1; j < kChains256; ++j) sum = _mm256_add_ps(sum, acc[j]);
  alignas(32) float v[8];
  _mm256_store_ps(v, sum);
  float s = 0.0f;
  for (float x : v) s += x;
  return s;
}

// The bf16 chains: acc = acc + a0·b0 + a1·b1 per lane, a = 1e-6 and b = 1 in bf16 (exact), so
// each step adds 2e-6 to every lane: finite for any iteration count this tool runs.
__attribute__((target("avx512f,avx512bf16"), noinline)) float RunAvx512Bf16(long iters) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-6f), _mm512_set1_ps(1e-6f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
  __m512 acc[kChains512];
  for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(1.0f + 0.001f * j);
  for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  __m512 sum = acc[0];
  for (int j = 1; j < kChains512; ++j) sum = _mm512_add_ps(sum, acc[j]);
  alignas(64) float v[16];
  _mm512_store_ps(v, sum);
  float s = 0.0f;
  for (float x : v) s += x;
  return s;
}

#endif  // FMA_PEAK_X86

[[noreturn]] void Usage(const char* argv0, const std::string& msg) {
  if (!msg.empty()) std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::fprintf(
      stderr,
      "usage: %s [--threads n] [--seconds s] [--reps n] [--isa auto|avx2|avx512|avx512_bf16]\n",
      argv0);
  std::exit(2);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help") Usage(argv[0], "");
    if (i + 1 >= argc) Usage(argv[0], "missing value for " + k);
    const char* v = argv[++i];
    if (k == "--threads") {
      o.threads = std::atoi(v);
    } else if (k == "--seconds") {
      o.seconds = std::atof(v);
    } else if (k == "--reps") {
      o.reps = std::atoi(v);
    } else if (k == "--isa") {
      o.isa = v;
    } else {
      Usage(argv[0], "unknown option " + k);
    }
  }
  if (o.threads < 1) Usage(argv[0], "--threads must be >= 1");
  if (o.seconds <= 0) Usage(argv[0], "--seconds must be > 0");
  if (o.reps < 1) Usage(argv[0], "--reps must be >= 1");
  if (o.isa != "auto" && o.isa != "avx2" && o.isa != "avx512" && o.isa != "avx512_bf16")
    Usage(argv[0], "--isa must be auto, avx2, avx512 or avx512_bf16");
  return o;
}

// Picks the kernel for --isa; exits if the CPU lacks the requested instructions.
Kernel SelectKernel(const std::string& isa) {
#ifdef FMA_PEAK_X86
  __builtin_cpu_init();
  const bool has512 = __builtin_cpu_supports("avx512f");
  const bool has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const Kernel k512{"avx512", 16, kChains512, RunAvx512};
  const Kernel k256{"avx2", 8, kChains256, RunAvx2};
  if (isa == "avx512_bf16") {
    if (!has512 || !__builtin_cpu_supports("avx512bf16"))
      Usage("fma_peak", "this CPU has no avx512_bf16");
    return Kernel{"avx512_bf16", 32, kChains512, RunAvx512Bf16};
  }
  if (isa == "avx512" || (isa == "auto" && has512)) {
    if (!has512) Usage("fma_peak", "this CPU has no avx512f");
    return k512;
  }
  if (!has256) Usage("fma_peak", "this CPU has no avx2+fma");
  return k256;
#else
  (void)isa;
  Usage("fma_peak", "x86 only (AVX2/AVX-512 kernels)");
#endif
}

// "model name" from /proc/cpuinfo, with JSON-unsafe characters dropped.
std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(std::remove_if(name.begin(), name.end(),
                              [](char c) { return c == '"' || c == '\\' || c < 0x20; }),
               name.end());
    return name;
  }
  return "unknown";
}

// One measurement: all threads run `iters` iterations between two barriers. Returns the wall
// seconds and the number of threads the runtime actually gave.
double TimeOnce(const Kernel& k, int threads, long iters, int* got_threads) {
  double seconds = 0.0;
  float sink = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    Clock::time_point t0;
#pragma omp barrier
#pragma omp master
    t0 = Clock::now();
    sink += k.run(iters);
#pragma omp barrier
#pragma omp master
    {
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      *got_threads = omp_get_num_threads();
    }
  }
  g_sink = g_sink + sink;
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  const Kernel k = SelectKernel(o.isa);

  // Calibrate on one thread: grow the iteration count until a run takes >= 20 ms, then scale
  // it to --seconds (every thread runs the same count, so a measurement lasts ~--seconds).
  long iters = 1 << 16;
  double t = 0.0;
  for (;;) {
    int unused = 0;
    t = TimeOnce(k, 1, iters, &unused);
    if (t >= 0.02) break;
    iters *= 4;
  }
  iters = std::max(1L, static_cast<long>(iters * (o.seconds / t)));

  double best = 0.0;
  int got_threads = o.threads;
  TimeOnce(k, o.threads, iters / 10 + 1, &got_threads);  // warm-up: start the thread team
  for (int r = 0; r < o.reps; ++r) {
    const double s = TimeOnce(k, o.threads, iters, &got_threads);
    const double flop = 2.0 * k.lanes * k.chains * static_cast<double>(iters) * got_threads;
    best = std::max(best, flop / s / 1e9);
  }

  std::printf(
      "{\"peer\":\"fma_peak\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.1f,"
      "\"gflops_per_thread\":%.1f,\"lanes\":%d,\"chains\":%d,\"iters\":%ld,\"seconds\":%.3f,"
      "\"reps\":%d,\"cpu\":\"%s\"}\n",
      k.isa, got_threads, best, best / got_threads, k.lanes, k.chains, iters, o.seconds, o.reps,
      CpuModel().c_str());
  if (got_threads != o.threads)
    std::fprintf(stderr, "warning: asked for %d threads, OpenMP gave %d\n", o.threads, got_threads);
  return 0;
}
