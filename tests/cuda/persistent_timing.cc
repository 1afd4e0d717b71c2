// blockrnn_persistent_timing: times the persistent BlockLSTM and BlockGRU kernels
// (src/cuda/persistent_lstm.cu; docs/cuda.md, "Persistent BlockLSTM kernels") on a GPU: the
// `persistent` stage of scripts/gpu_runbook.sh runs it once per shape.
//
//   blockrnn_persistent_timing [--csv FILE] [--target-ms MS] [--warmup N] [--min-reps N]
//                              [--max-reps N] T B H
//
// BlockLSTM (no peepholes), then BlockGRU (the reset-before GRU), in float32 (exact: TF32 off) at
// I = H, seq_len_max = T, on one non-blocking stream with a cuBLAS handle of its own: the forward
// (detail::persistent_lstm_fwd / persistent_gru_fwd) and the forward + backward (the forward, then
// detail::persistent_lstm_bwd / persistent_gru_bwd on its outputs).
// Each is warmed up (`--warmup` calls, 2 by default: module loading, the memory pool's first
// allocations), then timed with CUDA events around each call; the number of timed calls is
// chosen from the warm-up's time so that they take about `--target-ms` (default 1000) within
// [min-reps, max-reps] (3, 20), and the median is reported. Every CUDA and cuBLAS call is
// checked: a failure stops the program with the call's name and the error (exit 1); so does an
// error of blockrnn (Error), e.g. a weight slice too large for the device's shared memory.
//
// The device's default memory pool gets an unlimited release threshold first, so that the
// entries' stream-ordered workspaces (cudaMallocAsync) stay in the pool between calls instead of
// timing the driver's allocator.
//
// Output: one line per measurement on stdout, and with --csv one row per measurement appended
// (flushed at once; the header written when the file is new), with the columns of the per-step
// timing tool (blockrnn_cuda_timing), impl "blockrnn_persistent", cell "lstm" or "gru_rb", mode
// "fp32", pass "fwd" or "fwd+bwd". tflops counts the GEMM arithmetic of a step, 2·B·(I+H)·G for
// the forward (G = 4H for the LSTM, 3H for the GRU) and three times that for the forward +
// backward. Without a CUDA device it says so and exits
// with status 77 (not a result).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "blockrnn/error.h"
#include "cuda/persistent_lstm_device.h"

namespace {

using blockrnn::BlockGRUBwdArgs;
using blockrnn::BlockGRUDims;
using blockrnn::BlockGRUFwdArgs;
using blockrnn::BlockLSTMBwdArgs;
using blockrnn::BlockLSTMDims;
using blockrnn::BlockLSTMFwdArgs;
using blockrnn::cuda::detail::Ctx;
using i64 = std::int64_t;

// The columns of blockrnn_cuda_timing's CSV (read by scripts/gpu_bench_table.py).
constexpr const char* kCsvHeader =
    "impl,cell,mode,T,B,H,I,pass,us_per_call,us_per_step,tflops,reps,device,status";

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "blockrnn_persistent_timing: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    die(std::string(what) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    die(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)));
  }
}

struct Options {
  std::string csv;
  int warmup = 2, min_reps = 3, max_reps = 20;
  double target_ms = 1000;
  i64 T = 100, B = 16, H = 512;
};

[[noreturn]] void usage(const std::string& why) {
  die(why +
      "\nusage: blockrnn_persistent_timing [--csv FILE] [--target-ms MS] [--warmup N] "
      "[--min-reps N] [--max-reps N] T B H");
}

i64 positive(const char* s, const std::string& what) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v <= 0) usage(what + " must be a positive integer, got " + s);
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  std::vector<i64> dims;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    auto value = [&]() -> const char* {
      if (k + 1 >= argc) usage(a + " needs a value");
      return argv[++k];
    };
    if (a == "--csv") {
      o.csv = value();
    } else if (a == "--target-ms") {
      o.target_ms = static_cast<double>(positive(value(), a));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(positive(value(), a));
    } else if (a == "--min-reps") {
      o.min_reps = static_cast<int>(positive(value(), a));
    } else if (a == "--max-reps") {
      o.max_reps = static_cast<int>(positive(value(), a));
    } else if (!a.empty() && a[0] == '-') {
      usage("unknown option " + a);
    } else {
      dims.push_back(positive(a.c_str(), "T, B and H"));
    }
  }
  if (dims.size() != 3) usage("three sizes needed (T B H), got " + std::to_string(dims.size()));
  o.T = dims[0];
  o.B = dims[1];
  o.H = dims[2];
  if (o.min_reps > o.max_reps) usage("--min-reps exceeds --max-reps");
  return o;
}

// Device memory of n floats, uniform in [−s, s] (s = 1/√(I+H) for the weights, so that the
// recurrence stays in the range of real use).
class DeviceFloats {
 public:
  DeviceFloats(i64 n, float s, std::mt19937& rng) : n_(n) {
    check(cudaMalloc(&p_, sizeof(float) * static_cast<std::size_t>(std::max<i64>(n, 1))),
          "cudaMalloc");
    std::uniform_real_distribution<float> u(-s, s);
    std::vector<float> host(static_cast<std::size_t>(n));
    for (float& v : host) v = u(rng);
    check(cudaMemcpy(p_, host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice),
          "cudaMemcpy");
  }
  ~DeviceFloats() { check(cudaFree(p_), "cudaFree"); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return static_cast<float*>(p_); }

 private:
  i64 n_;
  void* p_ = nullptr;
};

// Times f on `stream`: warm-up calls, then the median of the timed calls (µs), each between two
// events. The number of timed calls comes back in *reps.
class Timer {
 public:
  Timer(cudaStream_t stream, const Options& o) : stream_(stream), o_(o) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&end_), "cudaEventCreate");
  }
  ~Timer() {
    check(cudaEventDestroy(start_), "cudaEventDestroy");
    check(cudaEventDestroy(end_), "cudaEventDestroy");
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  double median_us(const std::function<void()>& f, int* reps) {
    double warm_ms = 0;
    for (int k = 0; k < o_.warmup; ++k) warm_ms = once_ms(f);
    const double per_call = std::max(warm_ms, 1e-3);
    *reps = static_cast<int>(
        std::clamp(o_.target_ms / per_call, double(o_.min_reps), double(o_.max_reps)));
    std::vector<double> ms;
    for (int k = 0; k < *reps; ++k) ms.push_back(once_ms(f));
    std::sort(ms.begin(), ms.end());
    return 1000.0 * ms[ms.size() / 2];
  }

 private:
  double once_ms(const std::function<void()>& f) {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    f();
    check(cudaGetLastError(), "a launch");
    check(cudaEventRecord(end_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(end_), "cudaEventSynchronize (errors of the timed work)");
    float t = 0;
    check(cudaEventElapsedTime(&t, start_, end_), "cudaEventElapsedTime");
    return t;
  }

  cudaStream_t stream_;
  const Options& o_;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
};

// Prints a measurement and appends its CSV row at once (flushed), so that the rows of a run
// stopped by the runbook's timeout are kept.
class Report {
 public:
  Report(const Options& o, std::string device) : o_(o), device_(std::move(device)) {
    // The device name quoted, with quotes doubled.
    for (std::size_t p = device_.find('"'); p != std::string::npos; p = device_.find('"', p + 2)) {
      device_.insert(p, "\"");
    }
    if (o.csv.empty()) return;
    std::FILE* probe = std::fopen(o.csv.c_str(), "r");
    const bool is_new = probe == nullptr;
    if (probe != nullptr) std::fclose(probe);
    csv_ = std::fopen(o.csv.c_str(), "a");
    if (csv_ == nullptr) die("cannot open " + o.csv);
    if (is_new) std::fprintf(csv_, "%s\n", kCsvHeader);
  }
  ~Report() {
    if (csv_ != nullptr) std::fclose(csv_);
  }
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  // cell: "lstm" or "gru_rb"; pass: "fwd" or "fwd+bwd".
  void add(const char* cell, const char* pass, double us, int reps) {
    const i64 T = o_.T, B = o_.B, H = o_.H, I = H;
    const double step_us = us / double(T);
    const double gates = std::string(cell) == "lstm" ? 4.0 : 3.0;
    const double fwd_flops = 2.0 * double(B) * double(I + H) * gates * double(H);
    const double flops = fwd_flops * (std::string(pass) == "fwd" ? 1.0 : 3.0);
    const double tflops = flops / (step_us * 1e-6) / 1e12;
    std::printf(
        "blockrnn_persistent %-6s fp32 T=%lld B=%lld H=%lld %-7s %12.1f us/call %9.3f "
        "us/step %8.2f TFLOP/s (%d reps)\n",
        cell, (long long)T, (long long)B, (long long)H, pass, us, step_us, tflops, reps);
    std::fflush(stdout);
    if (csv_ == nullptr) return;
    std::fprintf(csv_,
                 "blockrnn_persistent,%s,fp32,%lld,%lld,%lld,%lld,%s,%.3f,%.4f,%.4f,%d,"
                 "\"%s\",ok\n",
                 cell, (long long)T, (long long)B, (long long)H, (long long)I, pass, us, step_us,
                 tflops, reps, device_.c_str());
    if (std::fflush(csv_) != 0) die("cannot write " + o_.csv);
  }

 private:
  const Options& o_;
  std::string device_;
  std::FILE* csv_ = nullptr;
};

// Times the forward, then the forward + backward, and reports both.
void time_passes(const char* cell, const std::function<void()>& fwd,
                 const std::function<void()>& fwd_bwd, Timer& timer, Report& report) {
  int reps = 0;
  const double fwd_us = timer.median_us(fwd, &reps);
  report.add(cell, "fwd", fwd_us, reps);
  const double fb_us = timer.median_us(fwd_bwd, &reps);
  report.add(cell, "fwd+bwd", fb_us, reps);
}

// BlockLSTM, no peepholes, forget_bias 1.
void time_lstm(const Options& o, cudaStream_t stream, cublasHandle_t blas, Timer& timer,
               Report& report) {
  const i64 T = o.T, B = o.B, H = o.H, I = H, G = 4 * H, TBH = T * B * H;
  std::mt19937 rng(1);
  const float ws = 1.0f / std::sqrt(float(I + H));
  DeviceFloats x(T * B * I, 1.0f, rng), cs0(B * H, 0.5f, rng), h0(B * H, 0.5f, rng),
      w((I + H) * G, ws, rng), b(G, ws, rng), d_cs(TBH, 0.1f, rng), d_h(TBH, 0.1f, rng);
  std::vector<std::unique_ptr<DeviceFloats>> seven;
  for (int k = 0; k < 7; ++k) seven.push_back(std::make_unique<DeviceFloats>(TBH, 0.0f, rng));
  DeviceFloats d_x(T * B * I, 0.0f, rng), d_cs0(B * H, 0.0f, rng), d_h0(B * H, 0.0f, rng),
      d_w((I + H) * G, 0.0f, rng), d_b(G, 0.0f, rng), d_wc(3 * H, 0.0f, rng);

  const BlockLSTMDims d{T, B, I, H, T, nullptr};
  BlockLSTMFwdArgs<float> fa{};
  fa.x = x.get();
  fa.cs_prev = cs0.get();
  fa.h_prev = h0.get();
  fa.w = w.get();
  fa.b = b.get();
  fa.i = seven[0]->get();
  fa.cs = seven[1]->get();
  fa.f = seven[2]->get();
  fa.o = seven[3]->get();
  fa.ci = seven[4]->get();
  fa.co = seven[5]->get();
  fa.h = seven[6]->get();
  fa.forget_bias = 1.0f;
  BlockLSTMBwdArgs<float> ba{};
  ba.x = x.get();
  ba.cs_prev = cs0.get();
  ba.h_prev = h0.get();
  ba.w = w.get();
  ba.i = fa.i;
  ba.cs = fa.cs;
  ba.f = fa.f;
  ba.o = fa.o;
  ba.ci = fa.ci;
  ba.co = fa.co;
  ba.h = fa.h;
  ba.d_cs = d_cs.get();
  ba.d_h = d_h.get();
  ba.d_x = d_x.get();
  ba.d_cs_prev = d_cs0.get();
  ba.d_h_prev = d_h0.get();
  ba.d_w = d_w.get();
  ba.d_wci = d_wc.get();
  ba.d_wcf = d_wc.get() + H;
  ba.d_wco = d_wc.get() + 2 * H;
  ba.d_b = d_b.get();

  const Ctx fwd_ctx{"BlockLSTM", stream, blas, false};
  const Ctx bwd_ctx{"BlockLSTMGrad", stream, blas, false};
  auto fwd = [&] { blockrnn::cuda::detail::persistent_lstm_fwd<float>(fwd_ctx, d, fa); };
  auto fwd_bwd = [&] {
    fwd();
    blockrnn::cuda::detail::persistent_lstm_bwd<float>(bwd_ctx, d, ba);
  };

  time_passes("lstm", fwd, fwd_bwd, timer, report);
}

// BlockGRU (the reset-before GRU).
void time_gru(const Options& o, cudaStream_t stream, cublasHandle_t blas, Timer& timer,
              Report& report) {
  const i64 T = o.T, B = o.B, H = o.H, I = H, TBH = T * B * H;
  std::mt19937 rng(2);
  const float ws = 1.0f / std::sqrt(float(I + H));
  DeviceFloats x(T * B * I, 1.0f, rng), h0(B * H, 0.5f, rng), w_ru((I + H) * 2 * H, ws, rng),
      w_c((I + H) * H, ws, rng), b_ru(2 * H, ws, rng), b_c(H, ws, rng), d_h(TBH, 0.1f, rng);
  DeviceFloats r(TBH, 0.0f, rng), u(TBH, 0.0f, rng), c(TBH, 0.0f, rng), h(TBH, 0.0f, rng);
  DeviceFloats d_x(T * B * I, 0.0f, rng), d_h0(B * H, 0.0f, rng),
      d_w_ru((I + H) * 2 * H, 0.0f, rng), d_w_c((I + H) * H, 0.0f, rng), d_b_ru(2 * H, 0.0f, rng),
      d_b_c(H, 0.0f, rng);
  const BlockGRUDims d{T, B, I, H, T, nullptr};
  BlockGRUFwdArgs<float> fa{};
  fa.x = x.get();
  fa.h_prev = h0.get();
  fa.w_ru = w_ru.get();
  fa.w_c = w_c.get();
  fa.b_ru = b_ru.get();
  fa.b_c = b_c.get();
  fa.r = r.get();
  fa.u = u.get();
  fa.c = c.get();
  fa.h = h.get();
  BlockGRUBwdArgs<float> ba{};
  ba.x = x.get();
  ba.h_prev = h0.get();
  ba.w_ru = w_ru.get();
  ba.w_c = w_c.get();
  ba.r = r.get();
  ba.u = u.get();
  ba.c = c.get();
  ba.h = h.get();
  ba.d_h = d_h.get();
  ba.d_x = d_x.get();
  ba.d_h_prev = d_h0.get();
  ba.d_w_ru = d_w_ru.get();
  ba.d_w_c = d_w_c.get();
  ba.d_b_ru = d_b_ru.get();
  ba.d_b_c = d_b_c.get();
  const Ctx fwd_ctx{"BlockGRU", stream, blas, false};
  const Ctx bwd_ctx{"BlockGRUGrad", stream, blas, false};
  auto fwd = [&] { blockrnn::cuda::detail::persistent_gru_fwd<float>(fwd_ctx, d, fa); };
  auto fwd_bwd = [&] {
    fwd();
    blockrnn::cuda::detail::persistent_gru_bwd<float>(bwd_ctx, d, ba);
  };
  time_passes("gru_rb", fwd, fwd_bwd, timer, report);
}

void run(const Options& o) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  std::uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
        "cudaMemPoolSetAttribute");

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  constexpr std::size_t kBlasWorkspace = std::size_t(4) << 20;
  void* blas_ws = nullptr;
  check(cudaMalloc(&blas_ws, kBlasWorkspace), "cudaMalloc");
  cublasHandle_t blas = nullptr;
  check(cublasCreate(&blas), "cublasCreate");
  check(cublasSetStream(blas, stream), "cublasSetStream");
  check(cublasSetWorkspace(blas, blas_ws, kBlasWorkspace), "cublasSetWorkspace");
  {
    Timer timer(stream, o);
    Report report(o, prop.name);
    time_lstm(o, stream, blas, timer, report);
    time_gru(o, stream, blas, timer, report);
  }
  check(cublasDestroy(blas), "cublasDestroy");
  check(cudaFree(blas_ws), "cudaFree");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "blockrnn_persistent_timing: no CUDA device\n");
    return 77;
  }
  try {
    run(o);
  } catch (const blockrnn::Error& e) {
    die(e.what());
  }
  return 0;
}
