// Peer benchmark: oneDNN RNN primitives (LSTM, vanilla GRU) and a pure-GEMM
// floor (OpenBLAS and oneDNN sgemm) for one unidirectional f32 layer.
//
// Prints one JSON object per line on stdout. See README.md in this folder.

#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

struct Options {
  std::string cell = "lstm";
  long T = 50;
  long B = 64;
  long I = 512;
  long H = 512;
  int threads = 1;
  int reps = 10;
  int warmup = 2;
  bool gemm_floor = false;
  std::string gemm_backend = "both";  // openblas | onednn | both
  long gemm_ld_pad = 0;               // extra floats per leading dimension
};

[[noreturn]] void Usage(const char* argv0, const std::string& msg) {
  if (!msg.empty()) std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::fprintf(stderr,
               "usage: %s [--cell lstm|gru] [--T n] [--B n] [--I n] [--H n]\n"
               "          [--threads n] [--reps n] [--warmup n]\n"
               "          [--gemm-floor [--gemm-backend openblas|onednn|both] [--gemm-ld-pad n]]\n",
               argv0);
  std::exit(2);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage(argv[0], "missing value for " + a);
      return argv[++i];
    };
    auto next_long = [&]() -> long {
      const std::string v = next();
      char* end = nullptr;
      const long r = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || r <= 0) Usage(argv[0], "bad value for " + a);
      return r;
    };
    if (a == "--cell") {
      o.cell = next();
    } else if (a == "--T") {
      o.T = next_long();
    } else if (a == "--B") {
      o.B = next_long();
    } else if (a == "--I") {
      o.I = next_long();
    } else if (a == "--H") {
      o.H = next_long();
    } else if (a == "--threads") {
      o.threads = static_cast<int>(next_long());
    } else if (a == "--reps") {
      o.reps = static_cast<int>(next_long());
    } else if (a == "--warmup") {
      const std::string v = next();
      o.warmup = std::atoi(v.c_str());
      if (o.warmup < 0) Usage(argv[0], "bad value for --warmup");
    } else if (a == "--gemm-floor") {
      o.gemm_floor = true;
    } else if (a == "--gemm-backend") {
      o.gemm_backend = next();
    } else if (a == "--gemm-ld-pad") {
      const std::string v = next();
      o.gemm_ld_pad = std::atol(v.c_str());
      if (o.gemm_ld_pad < 0) Usage(argv[0], "bad value for --gemm-ld-pad");
    } else if (a == "-h" || a == "--help") {
      Usage(argv[0], "");
    } else {
      Usage(argv[0], "unknown argument " + a);
    }
  }
  if (o.cell != "lstm" && o.cell != "gru") Usage(argv[0], "--cell must be lstm or gru");
  if (o.gemm_backend != "openblas" && o.gemm_backend != "onednn" && o.gemm_backend != "both") {
    Usage(argv[0], "--gemm-backend must be openblas, onednn or both");
  }
  return o;
}

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Min(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

double PeakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void FillUniform(float* p, size_t n, float bound, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-bound, bound);
  for (size_t i = 0; i < n; ++i) p[i] = d(rng);
}

void FillUniform(std::vector<float>& v, float bound, std::mt19937& rng) {
  FillUniform(v.data(), v.size(), bound, rng);
}

// Fills a oneDNN memory whose layout is dense (any permutation of dims).
void FillUniform(const memory& m, float bound, std::mt19937& rng) {
  const size_t n = m.get_desc().get_size() / sizeof(float);
  FillUniform(static_cast<float*>(m.get_data_handle()), n, bound, rng);
}

void ZeroMemory(const memory& m) {
  std::memset(m.get_data_handle(), 0, m.get_desc().get_size());
}

std::string JsonEscape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    r += c;
  }
  return r;
}

// Names the layout of an RNN weights descriptor of dims {1, 1, in, G, H}:
// "ldigo" / "ldgoi" when it is exactly that plain layout, otherwise the
// strides of the i, g and o dimensions (oneDNN pads leading dimensions).
std::string WeightsLayoutName(const memory::desc& md, const memory::dims& dims) {
  if (md == memory::desc(dims, Dt::f32, Tag::ldigo)) return "ldigo";
  if (md == memory::desc(dims, Dt::f32, Tag::ldgoi)) return "ldgoi";
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims != 5) return "non-plain";
  const auto& s = d.format_desc.blocking.strides;
  char buf[128];
  std::snprintf(buf, sizeof(buf), "strided(i:%lld,g:%lld,o:%lld%s)", static_cast<long long>(s[2]),
                static_cast<long long>(s[3]), static_cast<long long>(s[4]),
                d.format_desc.blocking.inner_nblks ? ",blocked" : "");
  return buf;
}

// ---------------------------------------------------------------------------
// oneDNN RNN primitives.
// ---------------------------------------------------------------------------

int RunRnn(const Options& o) {
  const bool lstm = o.cell == "lstm";
  const long G = lstm ? 4 : 3;
  const long T = o.T, B = o.B, I = o.I, H = o.H;

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::mt19937 rng(12345);

  const memory::dims src_layer_dims{T, B, I};
  const memory::dims iter_dims{1, 1, B, H};
  const memory::dims wl_dims{1, 1, I, G, H};
  const memory::dims wi_dims{1, 1, H, G, H};
  const memory::dims bias_dims{1, 1, G, H};
  const memory::dims dst_layer_dims{T, B, H};

  // Activations use the plain user layouts; weights and weight gradients use
  // format_tag::any so that oneDNN picks its preferred layout.
  const memory::desc src_layer_md(src_layer_dims, Dt::f32, Tag::tnc);
  const memory::desc iter_md(iter_dims, Dt::f32, Tag::ldnc);
  const memory::desc wl_any(wl_dims, Dt::f32, Tag::any);
  const memory::desc wi_any(wi_dims, Dt::f32, Tag::any);
  const memory::desc bias_md(bias_dims, Dt::f32, Tag::ldgo);
  const memory::desc dst_layer_md(dst_layer_dims, Dt::f32, Tag::tnc);
  const memory::desc none;  // zero md: final state not requested / not fed back

  const auto dir = dnnl::rnn_direction::unidirectional_left2right;
  const auto fwd_kind = dnnl::prop_kind::forward_training;
  const auto bwd_kind = dnnl::prop_kind::backward;

  dnnl::primitive fwd, bwd;
  // Sliced copies of the concrete primitive descriptors (they share the
  // underlying handle); the base class exposes every query used below.
  dnnl::rnn_primitive_desc_base fpd, bpd;
  if (lstm) {
    dnnl::lstm_forward::desc fd(fwd_kind, dir, src_layer_md, iter_md, iter_md, wl_any, wi_any,
                                bias_md, dst_layer_md, none, none);
    dnnl::lstm_forward::primitive_desc lfpd(fd, eng);
    dnnl::lstm_backward::desc bd(bwd_kind, dir, src_layer_md, iter_md, iter_md, wl_any, wi_any,
                                 bias_md, dst_layer_md, none, none, src_layer_md, iter_md, iter_md,
                                 wl_any, wi_any, bias_md, dst_layer_md, none, none);
    dnnl::lstm_backward::primitive_desc lbpd(bd, eng, lfpd);
    fwd = dnnl::lstm_forward(lfpd);
    bwd = dnnl::lstm_backward(lbpd);
    fpd = lfpd;
    bpd = lbpd;
  } else {
    dnnl::gru_forward::desc fd(fwd_kind, dir, src_layer_md, iter_md, wl_any, wi_any, bias_md,
                               dst_layer_md, none);
    dnnl::gru_forward::primitive_desc gfpd(fd, eng);
    dnnl::gru_backward::desc bd(bwd_kind, dir, src_layer_md, iter_md, wl_any, wi_any, bias_md,
                                dst_layer_md, none, src_layer_md, iter_md, wl_any, wi_any, bias_md,
                                dst_layer_md, none);
    dnnl::gru_backward::primitive_desc gbpd(bd, eng, gfpd);
    fwd = dnnl::gru_forward(gfpd);
    bwd = dnnl::gru_backward(gbpd);
    fpd = gfpd;
    bpd = gbpd;
  }

  // User-side weights in the canonical ldigo layout, U(+-1/sqrt(I+H)).
  const float wbound = 1.0f / std::sqrt(static_cast<float>(I + H));
  memory user_wl({wl_dims, Dt::f32, Tag::ldigo}, eng);
  memory user_wi({wi_dims, Dt::f32, Tag::ldigo}, eng);
  FillUniform(user_wl, wbound, rng);
  FillUniform(user_wi, wbound, rng);

  // Each primitive's operands, allocated in the layout it chose. The backward reads the forward's
  // tensors and workspace; only its weights may need another layout.
  auto allocate = [&](const dnnl::rnn_primitive_desc_base& pd, std::vector<int> args,
                      int lstm_arg) {
    if (lstm) args.push_back(lstm_arg);  // the cell state
    std::unordered_map<int, memory> m;
    for (int arg : args) m.emplace(arg, memory(pd.query_md(dnnl::query::exec_arg_md, arg), eng));
    return m;
  };
  std::unordered_map<int, memory> fwd_args =
      allocate(fpd,
               {DNNL_ARG_SRC_LAYER, DNNL_ARG_SRC_ITER, DNNL_ARG_WEIGHTS_LAYER,
                DNNL_ARG_WEIGHTS_ITER, DNNL_ARG_BIAS, DNNL_ARG_DST_LAYER, DNNL_ARG_WORKSPACE},
               DNNL_ARG_SRC_ITER_C);
  std::unordered_map<int, memory> bwd_args =
      allocate(bpd,
               {DNNL_ARG_WEIGHTS_LAYER, DNNL_ARG_WEIGHTS_ITER, DNNL_ARG_DIFF_SRC_LAYER,
                DNNL_ARG_DIFF_SRC_ITER, DNNL_ARG_DIFF_WEIGHTS_LAYER, DNNL_ARG_DIFF_WEIGHTS_ITER,
                DNNL_ARG_DIFF_BIAS, DNNL_ARG_DIFF_DST_LAYER},
               DNNL_ARG_DIFF_SRC_ITER_C);
  for (const auto& [arg, mem] : fwd_args) bwd_args.emplace(arg, mem);  // all but the weights

  FillUniform(fwd_args.at(DNNL_ARG_SRC_LAYER), 1.0f, rng);
  FillUniform(fwd_args.at(DNNL_ARG_SRC_ITER), 1.0f, rng);
  FillUniform(fwd_args.at(DNNL_ARG_BIAS), wbound, rng);
  if (lstm) FillUniform(fwd_args.at(DNNL_ARG_SRC_ITER_C), 1.0f, rng);
  FillUniform(bwd_args.at(DNNL_ARG_DIFF_DST_LAYER), 1.0f, rng);
  memory &fwd_wl = fwd_args.at(DNNL_ARG_WEIGHTS_LAYER),
         &fwd_wi = fwd_args.at(DNNL_ARG_WEIGHTS_ITER);
  memory &bwd_wl = bwd_args.at(DNNL_ARG_WEIGHTS_LAYER),
         &bwd_wi = bwd_args.at(DNNL_ARG_WEIGHTS_ITER);

  // Bring user weights into the forward layout once (one-time setup cost).
  dnnl::reorder(user_wl, fwd_wl).execute(strm, user_wl, fwd_wl);
  dnnl::reorder(user_wi, fwd_wi).execute(strm, user_wi, fwd_wi);
  strm.wait();

  // Per-iteration backward preparation (not in the timed region, reported
  // separately as bwd_prep_ms): weights forward layout -> backward layout,
  // and zeroing of the weight gradients, which oneDNN 2.x accumulates into.
  dnnl::reorder wl_to_bwd(fwd_wl, bwd_wl), wi_to_bwd(fwd_wi, bwd_wi);
  auto prepare_bwd = [&]() {
    wl_to_bwd.execute(strm, fwd_wl, bwd_wl);
    wi_to_bwd.execute(strm, fwd_wi, bwd_wi);
    strm.wait();
    for (int arg : {DNNL_ARG_DIFF_WEIGHTS_LAYER, DNNL_ARG_DIFF_WEIGHTS_ITER, DNNL_ARG_DIFF_BIAS}) {
      ZeroMemory(bwd_args.at(arg));
    }
  };

  std::vector<double> fwd_ms, fwdbwd_ms, prep_ms;
  for (int r = 0; r < o.warmup + o.reps; ++r) {
    const auto p0 = Clock::now();
    prepare_bwd();
    const auto p1 = Clock::now();

    const auto t0 = Clock::now();
    fwd.execute(strm, fwd_args);
    strm.wait();
    const auto t1 = Clock::now();
    bwd.execute(strm, bwd_args);
    strm.wait();
    const auto t2 = Clock::now();
    if (r >= o.warmup) {
      fwd_ms.push_back(Ms(t0, t1));
      fwdbwd_ms.push_back(Ms(t0, t2));
      prep_ms.push_back(Ms(p0, p1));
    }
  }

  // Touch a result so nothing can be considered dead.
  const float* dx =
      static_cast<const float*>(bwd_args.at(DNNL_ARG_DIFF_SRC_LAYER).get_data_handle());
  if (!std::isfinite(dx[0])) std::fprintf(stderr, "warning: non-finite diff_src_layer\n");

  std::printf(
      "{\"peer\":\"onednn\",\"cell\":\"%s\",\"T\":%ld,\"B\":%ld,\"I\":%ld,\"H\":%ld,"
      "\"threads\":%d,\"fwd_ms\":%.4f,\"fwdbwd_ms\":%.4f,\"reps\":%d,\"warmup\":%d,"
      "\"fwd_min_ms\":%.4f,\"fwdbwd_min_ms\":%.4f,\"bwd_prep_ms\":%.4f,"
      "\"peak_rss_mb\":%.1f,\"onednn_version\":\"%d.%d.%d\",\"algorithm\":\"%s\","
      "\"fwd_impl\":\"%s\",\"bwd_impl\":\"%s\",\"fwd_weights_layout\":\"%s\","
      "\"bwd_weights_layout\":\"%s\",\"diff_weights_layout\":\"%s\",\"workspace_mb\":%.2f}\n",
      o.cell.c_str(), T, B, I, H, o.threads, Median(fwd_ms), Median(fwdbwd_ms), o.reps, o.warmup,
      Min(fwd_ms), Min(fwdbwd_ms), Median(prep_ms), PeakRssMb(), dnnl_version()->major,
      dnnl_version()->minor, dnnl_version()->patch, lstm ? "vanilla_lstm" : "vanilla_gru",
      JsonEscape(fpd.impl_info_str()).c_str(), JsonEscape(bpd.impl_info_str()).c_str(),
      WeightsLayoutName(fpd.weights_layer_desc(), wl_dims).c_str(),
      WeightsLayoutName(bpd.weights_layer_desc(), wl_dims).c_str(),
      WeightsLayoutName(bpd.diff_weights_layer_desc(), wl_dims).c_str(),
      static_cast<double>(fpd.workspace_desc().get_size()) / (1024.0 * 1024.0));
  return 0;
}

// ---------------------------------------------------------------------------
// GEMM floor: the matrix-multiply volume of one layer, nothing else.
// ---------------------------------------------------------------------------

// Row-major C[M,N] = op(A) * op(B) + beta * C.
using Sgemm = std::function<void(bool ta, bool tb, long M, long N, long K, const float* A, long lda,
                                 const float* B, long ldb, float beta, float* C, long ldc)>;

void OpenblasSgemm(bool ta, bool tb, long M, long N, long K, const float* A, long lda,
                   const float* B, long ldb, float beta, float* C, long ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

void OnednnSgemm(bool ta, bool tb, long M, long N, long K, const float* A, long lda, const float* B,
                 long ldb, float beta, float* C, long ldc) {
  const dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success) throw std::runtime_error("dnnl_sgemm failed");
}

// Buffers for one layer's GEMMs, row-major. Every leading dimension is the
// dense one plus `pad` floats (pad 0 = plain dense matrices).
struct GemmLayer {
  long T, B, I, H, G, pad;
  long ld_i, ld_h, ld_gh;  // leading dims of [*, I], [*, H] and [*, G*H] matrices
  std::vector<float> x, wx, wh, hs, gates, dgates, dhs, dx, dwx, dwh;

  GemmLayer(const Options& o, long g)
      : T(o.T),
        B(o.B),
        I(o.I),
        H(o.H),
        G(g),
        pad(o.gemm_ld_pad),
        ld_i(o.I + o.gemm_ld_pad),
        ld_h(o.H + o.gemm_ld_pad),
        ld_gh(g * o.H + o.gemm_ld_pad) {
    const long TB = T * B;
    std::mt19937 rng(777);
    const float wb = 1.0f / std::sqrt(static_cast<float>(I + H));
    x.resize(TB * ld_i);
    wx.resize(I * ld_gh);
    wh.resize(H * ld_gh);
    hs.resize(TB * ld_h);  // h_{t-1} for every step
    gates.resize(TB * ld_gh);
    dgates.resize(TB * ld_gh);
    dhs.resize(TB * ld_h);
    dx.resize(TB * ld_i);
    dwx.resize(I * ld_gh);
    dwh.resize(H * ld_gh);
    FillUniform(x, 1.0f, rng);
    FillUniform(wx, wb, rng);
    FillUniform(wh, wb, rng);
    FillUniform(hs, 1.0f, rng);
    FillUniform(dgates, 1.0f, rng);
  }

  double FwdFlop() const {
    const double TB = T * B, GH = G * H;
    return 2.0 * TB * GH * I + T * (2.0 * B * GH * H);
  }
  double BwdFlop() const {
    const double TB = T * B, GH = G * H;
    return T * (2.0 * B * H * GH) + 2.0 * TB * I * GH + 2.0 * I * GH * TB + 2.0 * H * GH * TB;
  }

  void Forward(const Sgemm& gemm) {
    const long TB = T * B, GH = G * H;
    // Input projection for all steps: [TB, I] x [I, GH].
    gemm(false, false, TB, GH, I, x.data(), ld_i, wx.data(), ld_gh, 0.0f, gates.data(), ld_gh);
    // Recurrent projection, one step at a time: [B, H] x [H, GH], added to the gates.
    for (long t = 0; t < T; ++t) {
      gemm(false, false, B, GH, H, hs.data() + t * B * ld_h, ld_h, wh.data(), ld_gh, 1.0f,
           gates.data() + t * B * ld_gh, ld_gh);
    }
  }

  void Backward(const Sgemm& gemm) {
    const long TB = T * B, GH = G * H;
    // dh_{t-1} = dgates_t x Wh^T: [B, GH] x [GH, H], one step at a time.
    for (long t = T - 1; t >= 0; --t) {
      gemm(false, true, B, H, GH, dgates.data() + t * B * ld_gh, ld_gh, wh.data(), ld_gh, 0.0f,
           dhs.data() + t * B * ld_h, ld_h);
    }
    // dx = dgates x Wx^T: [TB, GH] x [GH, I].
    gemm(false, true, TB, I, GH, dgates.data(), ld_gh, wx.data(), ld_gh, 0.0f, dx.data(), ld_i);
    // dWx = x^T x dgates: [I, TB] x [TB, GH].
    gemm(true, false, I, GH, TB, x.data(), ld_i, dgates.data(), ld_gh, 0.0f, dwx.data(), ld_gh);
    // dWh = hs^T x dgates: [H, TB] x [TB, GH].
    gemm(true, false, H, GH, TB, hs.data(), ld_h, dgates.data(), ld_gh, 0.0f, dwh.data(), ld_gh);
  }
};

void RunGemmBackend(const Options& o, const char* name, const Sgemm& gemm) {
  GemmLayer layer(o, o.cell == "lstm" ? 4 : 3);
  std::vector<double> fwd_ms, fwdbwd_ms;
  for (int r = 0; r < o.warmup + o.reps; ++r) {
    const auto t0 = Clock::now();
    layer.Forward(gemm);
    const auto t1 = Clock::now();
    layer.Backward(gemm);
    const auto t2 = Clock::now();
    if (r >= o.warmup) {
      fwd_ms.push_back(Ms(t0, t1));
      fwdbwd_ms.push_back(Ms(t0, t2));
    }
  }
  const double gf_fwd = layer.FwdFlop() * 1e-9;
  const double gf_all = (layer.FwdFlop() + layer.BwdFlop()) * 1e-9;
  const double f = Median(fwd_ms), fb = Median(fwdbwd_ms);
  std::printf(
      "{\"peer\":\"%s\",\"cell\":\"%s\",\"T\":%ld,\"B\":%ld,\"I\":%ld,\"H\":%ld,"
      "\"threads\":%d,\"fwd_ms\":%.4f,\"fwdbwd_ms\":%.4f,\"reps\":%d,\"warmup\":%d,"
      "\"fwd_min_ms\":%.4f,\"fwdbwd_min_ms\":%.4f,\"gflop_fwd\":%.4f,\"gflop_fwdbwd\":%.4f,"
      "\"gflops_fwd\":%.2f,\"gflops_fwdbwd\":%.2f,\"ld_pad\":%ld,\"peak_rss_mb\":%.1f}\n",
      name, o.cell.c_str(), layer.T, layer.B, layer.I, layer.H, o.threads, f, fb, o.reps, o.warmup,
      Min(fwd_ms), Min(fwdbwd_ms), gf_fwd, gf_all, gf_fwd / (f * 1e-3), gf_all / (fb * 1e-3),
      layer.pad, PeakRssMb());
  std::fflush(stdout);
}

void RunGemmBackendByName(const Options& o, const std::string& backend) {
  omp_set_num_threads(o.threads);
  openblas_set_num_threads(o.threads);
  if (backend == "openblas") {
    RunGemmBackend(o, "openblas_gemm_floor", OpenblasSgemm);
  } else {
    RunGemmBackend(o, "onednn_gemm_floor", OnednnSgemm);
  }
}

int RunGemmFloor(const Options& o) {
  if (o.gemm_backend != "both") {
    RunGemmBackendByName(o, o.gemm_backend);
    return 0;
  }
  // Each backend runs in its own child process: the worker threads one
  // library leaves spinning after its calls (OpenBLAS pthreads, libgomp)
  // would otherwise steal cores from the other, and peak RSS stays separate.
  std::fflush(stdout);
  std::fflush(stderr);
  int rc = 0;
  for (const char* backend : {"openblas", "onednn"}) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      int child_rc = 0;
      try {
        RunGemmBackendByName(o, backend);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error (%s): %s\n", backend, e.what());
        child_rc = 1;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(child_rc);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "error: %s GEMM floor child failed\n", backend);
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  try {
    if (o.gemm_floor) return RunGemmFloor(o);  // sets thread counts itself
    omp_set_num_threads(o.threads);
    return RunRnn(o);
  } catch (const dnnl::error& e) {
    std::fprintf(stderr, "oneDNN error: %s (status %d)\n", e.what(), static_cast<int>(e.status));
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
