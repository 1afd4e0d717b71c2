// blockrnn_gemm_bench: the GEMM engine alone (src/gemm/), bfloat16 against float32, on the
// products of an RNN layer (H = I = 512, B = 64, T = 50, N = 4H): the hoisted input projection
// [B·T, 4H, I], one step's recurrent product [B, 4H, H] and the same at B = 1, the weights packed
// once (PackedB / PackedBBf16) as the sequence ops do, A float32 (the activations; rounded to
// bfloat16 while packed) or already bfloat16.
//
//   build/dev/tests/cpp/blockrnn_gemm_bench [--rounds R] [--seconds S] [--fma-peak PATH]
//                                           [--fp32-peak GFLOPS] [--bf16-peak GFLOPS]
//
// It lives beside the tests, not in bench/, because it calls the internal engine (src/gemm),
// which bench/'s programs, clients of the public API only, may not include.
//
// One thread. Noise: the variants of a shape run interleaved (fp32, bf16, bf16-A, fp32, …)
// for R rounds of about S seconds each; a round's figure for a variant is its best call time,
// counted in the thread's CPU time (a descheduled thread's wait is not the product's),
// and the report gives per variant the median GFLOP/s over rounds and per bfloat16 variant the
// median of the per-round ratios to float32 with their range — ratios from the same round
// share the machine's state, so they survive a loaded machine better than absolute figures.
// The peaks turn the figures into fractions of the physical limit: with --fma-peak (the
// bench/peers/fma_peak program) both are measured in every round, interleaved with the
// products (`fma_peak --isa <the active path>` and `--isa avx512_bf16` where the CPU has it),
// and a fraction is the median of the per-round fractions; else --fp32-peak / --bf16-peak are
// taken as given.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <time.h>

#include "blockrnn/context.h"
#include "core/isa.h"
#include "gemm/bf16.h"
#include "gemm/gemm.h"
#include "gemm/gemm_bf16.h"

namespace {

using blockrnn::gemm::Trans;

struct Options {
  int rounds = 7;
  double seconds = 0.3;
  double fp32_peak = 0, bf16_peak = 0;
  std::string fma_peak;  // path of bench/peers/fma_peak, or empty
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--rounds R] [--seconds S] [--fma-peak PATH] [--fp32-peak GFLOPS] "
               "[--bf16-peak GFLOPS]\n",
               argv0);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(argv[0]);
    const char* text = argv[++i];
    const double v = std::atof(text);
    if (k == "--fma-peak") {
      o.fma_peak = text;
    } else if (k == "--rounds") {
      o.rounds = static_cast<int>(v);
    } else if (k == "--seconds") {
      o.seconds = v;
    } else if (k == "--fp32-peak") {
      o.fp32_peak = v;
    } else if (k == "--bf16-peak") {
      o.bf16_peak = v;
    } else {
      usage(argv[0]);
    }
  }
  if (o.rounds < 1 || o.seconds <= 0) usage(argv[0]);
  return o;
}

// The calling thread's CPU time (all products here run on it: one thread). Unlike wall time it
// stops while the thread is descheduled, which on a loaded machine is most of a long call.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The best CPU time of one call over about `seconds` of repeated calls (after one warm-up).
double best_seconds(const std::function<void()>& call, double seconds) {
  call();
  double best = 1e30, spent = 0;
  while (spent < seconds) {
    const double t0 = thread_seconds();
    call();
    const double dt = thread_seconds() - t0;
    best = std::min(best, dt);
    spent += dt;
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// fma_peak's figure (`--isa isa`, one thread): the best of 5 ms windows over about `seconds`,
// the same best-of-short-calls measure as the products get (on a loaded machine a long window
// averages in the time the thread is descheduled). Its "gflops" field.
double measure_peak(const std::string& exe, const char* isa, double seconds) {
  const int windows = std::max(1, static_cast<int>(seconds / 0.005));
  const std::string cmd =
      exe + " --threads 1 --seconds 0.005 --reps " + std::to_string(windows) + " --isa " + isa;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return 0;
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
  pclose(f);
  const std::size_t at = out.find("\"gflops\":");
  return at == std::string::npos ? 0 : std::atof(out.c_str() + at + 9);
}

struct Product {
  const char* name;
  std::int64_t m, n, k;
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  blockrnn::set_num_threads(1);
  const bool dpbf16 = blockrnn::gemm::bf16_kernel_for(blockrnn::core::active_isa()) ==
                      blockrnn::gemm::Bf16Kernel::kDpbf16;
  std::printf("# path %s, bf16 kernel %s, 1 thread, %d interleaved rounds of ~%.2f s per variant\n",
              blockrnn::get_isa(), dpbf16 ? "vdpbf16ps" : "widened to float32", opt.rounds,
              opt.seconds);
  const int T = 50, B = 64, I = 512, H = 512;
  const Product products[] = {{"input projection x·W_x", B * T, 4 * H, I},
                              {"recurrent step h·W_h", B, 4 * H, H},
                              {"recurrent step, B = 1", 1, 4 * H, H}};
  std::vector<double> fp32_peaks, bf16_peaks;  // every round's measured peaks
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::printf(
      "| product | [M, N, K] | variant | GFLOP/s (median) | %% fp32 FMA peak | %% bf16 peak "
      "| bf16/fp32 (median of rounds) | range |\n|---|---|---|---|---|---|---|---|\n");
  for (const Product& p : products) {
    std::vector<float> a(p.m * p.k), w(p.k * p.n), c(p.m * p.n);
    for (float& v : a) v = dist(rng);
    for (float& v : w) v = dist(rng);
    std::vector<std::uint16_t> a16(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) a16[i] = blockrnn::gemm::bf16_from_float(a[i]);
    blockrnn::gemm::PackedB<float> w32;
    w32.pack(Trans::kNo, p.k, p.n, w.data(), p.n);
    blockrnn::gemm::PackedBBf16 w16;
    w16.pack(Trans::kNo, p.k, p.n, w.data(), p.n);
    const std::function<void()> calls[] = {
        [&] {
          blockrnn::gemm::gemm<float>(Trans::kNo, p.m, a.data(), p.k, w32, 0.0f, c.data(), p.n);
        },
        [&] {
          blockrnn::gemm::gemm_bf16(Trans::kNo, p.m, a.data(), p.k, w16, 0.0f, c.data(), p.n);
        },
        [&] {
          blockrnn::gemm::gemm_bf16(Trans::kNo, p.m, a16.data(), p.k, w16, 0.0f, c.data(), p.n);
        }};
    const char* names[] = {"fp32", "bf16 (A fp32)", "bf16 (A bf16)"};
    const double gflop = 2.0 * p.m * p.n * p.k * 1e-9;
    // Per round: each variant's GFLOP/s, its ratio to fp32, its fractions of the two peaks.
    std::vector<double> rate[3], ratio[3], of_fp32_peak[3], of_bf16_peak[3];
    for (int r = 0; r < opt.rounds; ++r) {
      double fp32_peak = opt.fp32_peak, bf16_peak = opt.bf16_peak;
      if (!opt.fma_peak.empty()) {
        // The active path's own FMA peak (fma_peak knows the avx512 and avx2 instructions; the
        // baseline path has no FMA and no peak), and the bf16 peak where vdpbf16ps runs.
        const std::string path = blockrnn::get_isa();
        fp32_peak = path == "baseline" ? 0 : measure_peak(opt.fma_peak, path.c_str(), opt.seconds);
        bf16_peak = dpbf16 ? measure_peak(opt.fma_peak, "avx512_bf16", opt.seconds) : 0;
        fp32_peaks.push_back(fp32_peak);
        bf16_peaks.push_back(bf16_peak);
      }
      double g[3];
      for (int v = 0; v < 3; ++v) {
        g[v] = gflop / best_seconds(calls[v], opt.seconds);
        rate[v].push_back(g[v]);
        if (fp32_peak > 0) of_fp32_peak[v].push_back(g[v] / fp32_peak);
        if (bf16_peak > 0) of_bf16_peak[v].push_back(g[v] / bf16_peak);
      }
      for (int v = 1; v < 3; ++v) ratio[v].push_back(g[v] / g[0]);
    }
    for (int v = 0; v < 3; ++v) {
      auto pct = [](const std::vector<double>& fractions) {
        return fractions.empty()
                   ? std::string("–")
                   : std::to_string(static_cast<int>(100.0 * median(fractions) + 0.5)) + " %";
      };
      std::string ratio_text = "–", range_text = "–";
      if (v > 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f×", median(ratio[v]));
        ratio_text = buf;
        std::snprintf(buf, sizeof buf, "%.2f–%.2f",
                      *std::min_element(ratio[v].begin(), ratio[v].end()),
                      *std::max_element(ratio[v].begin(), ratio[v].end()));
        range_text = buf;
      }
      std::printf("| %s | [%lld, %lld, %lld] | %s | %.1f | %s | %s | %s | %s |\n", p.name,
                  static_cast<long long>(p.m), static_cast<long long>(p.n),
                  static_cast<long long>(p.k), names[v], median(rate[v]),
                  pct(of_fp32_peak[v]).c_str(), pct(of_bf16_peak[v]).c_str(), ratio_text.c_str(),
                  range_text.c_str());
    }
    std::fflush(stdout);
  }
  if (!fp32_peaks.empty()) {
    // A peak of 0: not measured on this path (no FMA on the baseline path, no vdpbf16ps).
    const auto peak_text = [](double gflops) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", gflops);
      return gflops > 0 ? std::string(buf) : std::string("not measured on this path");
    };
    std::printf("# peaks measured per round by %s (median): fp32 FMA %s, bf16 %s\n",
                opt.fma_peak.c_str(), peak_text(median(fp32_peaks)).c_str(),
                peak_text(median(bf16_peaks)).c_str());
  }
  return 0;
}
