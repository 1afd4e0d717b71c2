// blockrnn_cuda_timing: times blockrnn's per-step CUDA path (the runbook's `bench` stage,
// scripts/gpu_runbook.sh; docs/cuda.md, "On a GPU").
//
//   blockrnn_cuda_timing [--csv FILE] [--cells lstm,gru,gru_rb] [--modes fp32,tf32,fp16]
//                        [--warmup N] [--min-reps N] [--max-reps N] [--target-ms MS] [--graphs]
//                        T B H
//
// --graphs: each configuration also with the per-step loops as CUDA Graphs
// (cuda::set_step_graphs; CSV impl blockrnn_graph; the warm-up call captures, the timed calls
// replay).
//
// For each cell and mode: the forward (BlockLSTM, BlockGRUResetAfter — the GRU that cuDNN
// computes — or BlockGRU, the reset-before GRU) and the forward + backward (the op and its Grad),
// at I = H, on one non-blocking stream. Each configuration is warmed up (`--warmup` calls, 2 by
// default: handle creation, the memory pool's first allocations), then timed with CUDA events
// around each call; the number of timed calls is chosen from the warm-up's time so that the
// timed calls take about `--target-ms` (default 1000) within [min-reps, max-reps] (3, 20), and
// the median is reported. Every CUDA call is checked: a failure stops the program with the call's
// name and CUDA's error (exit 1); an error of blockrnn (Error) likewise.
//
// The device's default memory pool gets an unlimited release threshold first: the backend's
// stream-ordered workspace (cudaMallocAsync) then stays in the pool between calls instead of
// going back to the driver at every synchronisation, which would time the driver's allocator.
//
// Output: one line per measurement on stdout, and with --csv one CSV row per measurement
// (appended as it is measured; the header written when the file is new), the columns of kCsvHeader.
// tflops counts the GEMM arithmetic of the step (2·B·(I+H)·G per forward step, G = 4H for the LSTM
// and 3H for the GRUs; the backward twice that), so fraction-of-peak figures are computed from it
// by the runbook's table, which knows the device's peak. Without a CUDA device it says so and exits
// with status 77 (not a result).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "blockrnn/cuda.h"
#include "blockrnn/error.h"

namespace {

using namespace blockrnn;

// The CSV columns, shared with scripts/gpu_bench_torch.py and scripts/gpu_bench_table.py.
constexpr const char* kCsvHeader =
    "impl,cell,mode,T,B,H,I,pass,us_per_call,us_per_step,tflops,reps,device,status";

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "blockrnn_cuda_timing: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    die(std::string(what) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

// Device memory filled from a small random host pattern (uniform in [−0.1, 0.1]), copied over
// the buffer in pieces: filling gigabytes from the host element by element would take longer
// than the timing.
class Buf {
 public:
  Buf(DType t, Shape s, const std::vector<unsigned char>& pattern) : dtype_(t), shape_(s) {
    const std::size_t bytes = static_cast<std::size_t>(s.num_elements()) * dtype_size(t);
    if (bytes == 0) return;
    check(cudaMalloc(&p_, bytes), "cudaMalloc");
    auto* dst = static_cast<unsigned char*>(p_);
    for (std::size_t off = 0; off < bytes; off += pattern.size()) {
      check(cudaMemcpy(dst + off, pattern.data(), std::min(pattern.size(), bytes - off),
                       cudaMemcpyHostToDevice),
            "cudaMemcpy");
    }
  }
  ~Buf() {
    if (p_ != nullptr) check(cudaFree(p_), "cudaFree");
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  TensorView v() const { return TensorView(p_, dtype_, shape_); }
  MutableTensorView m() const { return MutableTensorView(p_, dtype_, shape_); }

 private:
  DType dtype_;
  Shape shape_;
  void* p_ = nullptr;
};

// 1 MiB of random elements of dtype t (a whole number of elements of either size).
std::vector<unsigned char> random_pattern(DType t) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::vector<unsigned char> bytes(std::size_t(1) << 20);
  if (t == DType::kFloat16) {
    auto* h = reinterpret_cast<Half*>(bytes.data());
    for (std::size_t e = 0; e < bytes.size() / sizeof(Half); ++e) h[e] = float_to_half(u(rng));
  } else {
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (std::size_t e = 0; e < bytes.size() / sizeof(float); ++e) f[e] = u(rng);
  }
  return bytes;
}

struct Options {
  std::string csv;
  std::vector<std::string> cells{"lstm", "gru", "gru_rb"};
  std::vector<std::string> modes{"fp32", "tf32", "fp16"};
  int warmup = 2, min_reps = 3, max_reps = 20;
  bool graphs = false;  // also time with cuda::set_step_graphs(true) (impl blockrnn_graph)
  double target_ms = 1000;
  std::int64_t T = 100, B = 16, H = 512;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

[[noreturn]] void usage(const std::string& why) {
  die(why +
      "\nusage: blockrnn_cuda_timing [--csv FILE] [--cells lstm,gru,gru_rb] "
      "[--modes fp32,tf32,fp16] [--warmup N] [--min-reps N] [--max-reps N] [--target-ms MS] "
      "[--graphs] T B H");
}

std::int64_t positive(const char* s, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v <= 0) usage(std::string(what) + " must be a positive integer");
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::int64_t> dims;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    auto value = [&]() -> const char* {
      if (k + 1 >= argc) usage(a + " needs a value");
      return argv[++k];
    };
    if (a == "--csv") {
      o.csv = value();
    } else if (a == "--cells") {
      o.cells = split(value());
    } else if (a == "--modes") {
      o.modes = split(value());
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(positive(value(), "--warmup"));
    } else if (a == "--min-reps") {
      o.min_reps = static_cast<int>(positive(value(), "--min-reps"));
    } else if (a == "--max-reps") {
      o.max_reps = static_cast<int>(positive(value(), "--max-reps"));
    } else if (a == "--graphs") {
      o.graphs = true;
    } else if (a == "--target-ms") {
      o.target_ms = static_cast<double>(positive(value(), "--target-ms"));
    } else if (!a.empty() && a[0] == '-') {
      usage("unknown option " + a);
    } else {
      dims.push_back(positive(a.c_str(), "T, B and H"));
    }
  }
  if (dims.size() > 3) usage("at most three sizes (T B H)");
  if (dims.size() > 0) o.T = dims[0];
  if (dims.size() > 1) o.B = dims[1];
  if (dims.size() > 2) o.H = dims[2];
  if (o.min_reps > o.max_reps) usage("--min-reps exceeds --max-reps");
  for (const std::string& c : o.cells) {
    if (c != "lstm" && c != "gru" && c != "gru_rb") usage("unknown cell " + c);
  }
  for (const std::string& m : o.modes) {
    if (m != "fp32" && m != "tf32" && m != "fp16") usage("unknown mode " + m);
  }
  return o;
}

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

// The GEMM arithmetic of one forward step (the input projection and the recurrent product).
double fwd_step_flops(const std::string& cell, std::int64_t B, std::int64_t I, std::int64_t H) {
  const double G = cell == "lstm" ? 4.0 * H : 3.0 * H;
  return 2.0 * double(B) * double(I + H) * G;
}

// Prints each measurement and appends it to the CSV at once (flushed), so that the rows of a run
// stopped by the runbook's timeout are kept.
class Report {
 public:
  Report(const Options& o, const std::string& device) : o_(o), device_(device) {
    // The device name may hold commas in principle: quoted, with quotes doubled.
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

  // impl: "blockrnn" (direct launches) or "blockrnn_graph" (the per-step loops as CUDA Graphs).
  void add(const char* impl, const std::string& cell, const std::string& mode, const char* pass,
           double us, int reps) {
    const std::int64_t T = o_.T, B = o_.B, H = o_.H;
    const double step_us = us / double(T);
    const double flops =
        fwd_step_flops(cell, B, H, H) * (std::strcmp(pass, "fwd") == 0 ? 1.0 : 3.0);
    const double tflops = flops / (step_us * 1e-6) / 1e12;
    std::printf("%-14s %-6s %-4s %-7s %12.1f us/call %9.2f us/step %8.2f TFLOP/s (%d reps)\n", impl,
                cell.c_str(), mode.c_str(), pass, us, step_us, tflops, reps);
    std::fflush(stdout);
    if (csv_ == nullptr) return;
    std::fprintf(csv_, "%s,%s,%s,%lld,%lld,%lld,%lld,%s,%.3f,%.4f,%.4f,%d,\"%s\",ok\n", impl,
                 cell.c_str(), mode.c_str(), (long long)T, (long long)B, (long long)H, (long long)H,
                 pass, us, step_us, tflops, reps, device_.c_str());
    if (std::fflush(csv_) != 0) die("cannot write " + o_.csv);
  }

 private:
  const Options& o_;
  std::string device_;
  std::FILE* csv_ = nullptr;
};

// Times one cell in the current mode: appends its forward and forward + backward rows.
void time_cell(const char* impl, const std::string& cell, const std::string& mode, DType t,
               const Options& o, Timer& timer, cudaStream_t s, Report& report) {
  const std::int64_t T = o.T, B = o.B, H = o.H, I = H;
  const std::vector<unsigned char> pat = random_pattern(t);
  auto buf = [&](Shape shape) { return std::make_unique<Buf>(t, shape, pat); };
  auto x = buf({T, B, I}), h0 = buf({B, H}), xg = buf({T, B, I}), hpg = buf({B, H});
  int reps = 0;
  if (cell == "lstm") {
    auto cs0 = buf({B, H}), w = buf({I + H, 4 * H}), b = buf({4 * H});
    std::vector<std::unique_ptr<Buf>> seven;
    for (int k = 0; k < 7; ++k) seven.push_back(buf({T, B, H}));
    auto csg = buf({T, B, H}), hg = buf({T, B, H}), cspg = buf({B, H}), wg = buf({I + H, 4 * H}),
         pg1 = buf({H}), pg2 = buf({H}), pg3 = buf({H}), bg = buf({4 * H});
    const BlockLSTMInputs in{std::nullopt, x->v(), cs0->v(), h0->v(), w->v(), {}, {}, {}, b->v()};
    const BlockLSTMOutputs out{seven[0]->m(), seven[1]->m(), seven[2]->m(), seven[3]->m(),
                               seven[4]->m(), seven[5]->m(), seven[6]->m()};
    const BlockLSTMAttrs attrs{1.0, 0.0, false};
    BlockLSTMGradInputs gin{};
    gin.x = x->v();
    gin.cs_prev = cs0->v();
    gin.h_prev = h0->v();
    gin.w = w->v();
    gin.b = b->v();
    gin.i = seven[0]->v();
    gin.cs = seven[1]->v();
    gin.f = seven[2]->v();
    gin.o = seven[3]->v();
    gin.ci = seven[4]->v();
    gin.co = seven[5]->v();
    gin.h = seven[6]->v();
    gin.cs_grad = csg->v();
    gin.h_grad = hg->v();
    const BlockLSTMGradOutputs gout{xg->m(),  cspg->m(), hpg->m(), wg->m(),
                                    pg1->m(), pg2->m(),  pg3->m(), bg->m()};
    const double fwd = timer.median_us([&] { cuda::block_lstm(in, out, attrs, s); }, &reps);
    report.add(impl, cell, mode, "fwd", fwd, reps);
    const double fb = timer.median_us(
        [&] {
          cuda::block_lstm(in, out, attrs, s);
          cuda::block_lstm_grad(gin, gout, false, s);
        },
        &reps);
    report.add(impl, cell, mode, "fwd+bwd", fb, reps);
  } else if (cell == "gru") {
    auto w_i = buf({I, 3 * H}), w_h = buf({H, 3 * H}), b_i = buf({3 * H}), b_h = buf({3 * H});
    std::vector<std::unique_ptr<Buf>> five;
    for (int k = 0; k < 5; ++k) five.push_back(buf({T, B, H}));
    auto hg = buf({T, B, H}), wig = buf({I, 3 * H}), whg = buf({H, 3 * H}), big = buf({3 * H}),
         bhg = buf({3 * H});
    const BlockGRUResetAfterInputs in{T, x->v(), h0->v(), w_i->v(), w_h->v(), b_i->v(), b_h->v()};
    const BlockGRUResetAfterOutputs out{five[0]->m(), five[1]->m(), five[2]->m(), five[3]->m(),
                                        five[4]->m()};
    BlockGRUResetAfterGradInputs gin{};
    gin.seq_len_max = T;
    gin.x = x->v();
    gin.h_prev = h0->v();
    gin.w_i = w_i->v();
    gin.w_h = w_h->v();
    gin.b_i = b_i->v();
    gin.b_h = b_h->v();
    gin.r = five[0]->v();
    gin.u = five[1]->v();
    gin.n = five[2]->v();
    gin.hn = five[3]->v();
    gin.h = five[4]->v();
    gin.h_grad = hg->v();
    const BlockGRUResetAfterGradOutputs gout{xg->m(),  hpg->m(), wig->m(),
                                             whg->m(), big->m(), bhg->m()};
    const double fwd = timer.median_us([&] { cuda::block_gru_reset_after(in, out, s); }, &reps);
    report.add(impl, cell, mode, "fwd", fwd, reps);
    const double fb = timer.median_us(
        [&] {
          cuda::block_gru_reset_after(in, out, s);
          cuda::block_gru_reset_after_grad(gin, gout, s);
        },
        &reps);
    report.add(impl, cell, mode, "fwd+bwd", fb, reps);
  } else {  // gru_rb: the reset-before GRU (BlockGRU), which cuDNN does not compute
    auto w_ru = buf({I + H, 2 * H}), w_c = buf({I + H, H}), b_ru = buf({2 * H}), b_c = buf({H});
    std::vector<std::unique_ptr<Buf>> four;
    for (int k = 0; k < 4; ++k) four.push_back(buf({T, B, H}));
    auto hg = buf({T, B, H}), wrug = buf({I + H, 2 * H}), wcg = buf({I + H, H}),
         brug = buf({2 * H}), bcg = buf({H});
    const BlockGRUInputs in{std::nullopt, x->v(),    h0->v(), w_ru->v(),
                            w_c->v(),     b_ru->v(), b_c->v()};
    const BlockGRUOutputs out{four[0]->m(), four[1]->m(), four[2]->m(), four[3]->m()};
    BlockGRUGradInputs gin{};
    gin.x = x->v();
    gin.h_prev = h0->v();
    gin.w_ru = w_ru->v();
    gin.w_c = w_c->v();
    gin.b_ru = b_ru->v();
    gin.b_c = b_c->v();
    gin.r = four[0]->v();
    gin.u = four[1]->v();
    gin.c = four[2]->v();
    gin.h = four[3]->v();
    gin.h_grad = hg->v();
    const BlockGRUGradOutputs gout{xg->m(), hpg->m(), wrug->m(), wcg->m(), brug->m(), bcg->m()};
    const double fwd = timer.median_us([&] { cuda::block_gru(in, out, s); }, &reps);
    report.add(impl, cell, mode, "fwd", fwd, reps);
    const double fb = timer.median_us(
        [&] {
          cuda::block_gru(in, out, s);
          cuda::block_gru_grad(gin, gout, s);
        },
        &reps);
    report.add(impl, cell, mode, "fwd+bwd", fb, reps);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (cuda::device_count() == 0) {
    std::printf("no CUDA device: nothing timed\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  std::printf("device: %s (%d SMs), driver API %d, runtime %d; T=%lld B=%lld I=H=%lld\n", prop.name,
              prop.multiProcessorCount, driver, runtime, (long long)o.T, (long long)o.B,
              (long long)o.H);
  // Keep freed stream-ordered memory in the pool across synchronisations (see the top).
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
  std::uint64_t threshold = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
        "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");

  Report report(o, prop.name);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  {
    Timer timer(s, o);
    for (const std::string& mode : o.modes) {
      cuda::set_math_mode(mode == "tf32" ? cuda::MathMode::kTF32 : cuda::MathMode::kExactFP32);
      const DType t = mode == "fp16" ? DType::kFloat16 : DType::kFloat32;
      for (const std::string& cell : o.cells) {
        for (bool graphs : {false, true}) {
          if (graphs && !o.graphs) continue;
          cuda::set_step_graphs(graphs);
          try {
            time_cell(graphs ? "blockrnn_graph" : "blockrnn", cell, mode, t, o, timer, s, report);
          } catch (const Error& e) {
            die(cell + " " + mode + ": " + e.what());
          }
        }
      }
    }
  }
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  return 0;
}
