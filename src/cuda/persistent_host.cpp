// The host driver of the persistent BlockLSTM bodies (src/cuda/persistent_host.h).
#include "cuda/persistent_host.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <deque>
#include <initializer_list>
#include <latch>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "blockrnn/error.h"
#include "cuda/persistent_gru.h"
#include "cuda/persistent_lstm.h"

namespace blockrnn::cuda::persistent {

namespace {

// The bodies' Sync on the host: std::barrier for the CTA and the grid (arrive_and_wait orders
// every write before it with every read after it, as __syncthreads and grid.sync do), and random
// pauses at the jitter points: a yield one time in four, a sleep of up to 50 µs one time in 64.
class HostSync {
 public:
  HostSync(std::barrier<>& cta, std::barrier<>& grid, std::uint64_t seed)
      : cta_(cta), grid_(grid), jitter_(seed != 0), rng_(seed) {}
  void cta() { cta_.arrive_and_wait(); }
  void grid() { grid_.arrive_and_wait(); }
  void jitter() {
    if (!jitter_) return;
    const std::uint64_t r = rng_();
    if (r % 64 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds((r >> 8) % 50));
    } else if (r % 4 == 0) {
      std::this_thread::yield();
    }
  }

 private:
  std::barrier<>& cta_;
  std::barrier<>& grid_;
  bool jitter_;
  std::mt19937_64 rng_;
};

void check_grid(const char* op, const BlockLSTMDims& d, const HostGrid& g) {
  const auto bad = [&](const char* what, std::int64_t v) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + " (persistent, host): " + what +
                                                 " must be at least 1, got " + std::to_string(v));
  };
  if (g.ctas < 1) bad("ctas", g.ctas);
  if (g.threads_per_cta < 1) bad("threads_per_cta", g.threads_per_cta);
  if (g.k_chunk < 1) bad("k_chunk", g.k_chunk);
  if (d.lengths != nullptr) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(op) + " (persistent): seq_lengths is not supported yet");
  }
}

// Runs body(CtaIndex, resident, sync) on ctas × threads_per_cta threads, each CTA with its own
// resident buffer of `resident` elements. The threads wait at a start gate until all exist, so a
// thread that cannot be created leaves none of them blocked in a barrier.
template <typename T, typename Body>
void run_grid(const char* op, const HostGrid& g, std::int64_t resident, const Body& body) {
  const std::int64_t n = g.ctas * g.threads_per_cta;
  std::vector<std::vector<T>> shared(static_cast<std::size_t>(g.ctas),
                                     std::vector<T>(static_cast<std::size_t>(resident)));
  std::deque<std::barrier<>> cta_barriers;  // a deque: barriers cannot move
  for (std::int64_t c = 0; c < g.ctas; ++c) cta_barriers.emplace_back(g.threads_per_cta);
  std::barrier<> grid_barrier(n);
  std::latch start(1);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  auto finish = [&] {
    start.count_down();
    for (std::thread& t : threads) t.join();
  };
  try {
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t c = k / g.threads_per_cta, tid = k % g.threads_per_cta;
      threads.emplace_back([&, c, tid, k] {
        start.wait();
        if (!go.load()) return;
        const std::uint64_t seed =
            g.jitter_seed == 0 ? 0 : g.jitter_seed * 0x9E3779B97F4A7C15ull + std::uint64_t(k) + 1;
        HostSync sync(cta_barriers[static_cast<std::size_t>(c)], grid_barrier, seed);
        body(CtaIndex{c, g.ctas, tid, g.threads_per_cta},
             shared[static_cast<std::size_t>(c)].data(), sync);
      });
    }
  } catch (const std::system_error& e) {
    finish();
    throw Error(ErrorCode::kResourceExhausted, std::string(op) +
                                                   " (persistent, host): cannot create " +
                                                   std::to_string(n) + " threads: " + e.what());
  }
  go.store(true);
  finish();
}

// C[m, j] = Σ_{k = 0 … K−1} a(m, k)·b(k, j) summed in increasing k from 0, for m < M, j < N
// (row-major C): the GEMMs that cuBLAS does on a GPU, in the reference's summation order.
template <typename T, typename MatA, typename MatB>
void product(std::int64_t M, std::int64_t N, std::int64_t K, const MatA& a, const MatB& b, T* C) {
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t j = 0; j < N; ++j) {
      T acc = T(0);
      for (std::int64_t k = 0; k < K; ++k) acc += a(m, k) * b(k, j);
      C[m * N + j] = acc;
    }
  }
}

}  // namespace

template <typename T>
void run_lstm_fwd_grid(const char* op, const FwdParams<T>& p, const HostGrid& grid) {
  run_grid<T>(
      op, grid, resident_elems(p.H, grid.ctas),
      [&](const CtaIndex& c, T* resident, HostSync& sync) { lstm_fwd_cta(p, c, resident, sync); });
}

template <typename T>
void run_lstm_bwd_grid(const char* op, const BwdParams<T>& p, const HostGrid& grid) {
  run_grid<T>(
      op, grid, resident_elems(p.H, grid.ctas),
      [&](const CtaIndex& c, T* resident, HostSync& sync) { lstm_bwd_cta(p, c, resident, sync); });
}

template <typename T>
void lstm_fwd_host(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a, const HostGrid& grid) {
  const char* op = block_lstm_op_name(a.layout, false);
  check_grid(op, d, grid);
  const std::int64_t S = d.seq_len_max, B = d.B, I = d.I, H = d.H, G = 4 * H, BH = B * H;
  for (T* p : {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h}) std::fill(p + S * BH, p + d.T * BH, T(0));
  // The input projection of all steps: gates[r] = x[r]·w_x, r = t·B + n < S·B.
  std::vector<T> gates(static_cast<std::size_t>(S * B * G));
  product<T>(
      S * B, G, I, [&](std::int64_t r, std::int64_t k) { return a.x[r * I + k]; },
      [&](std::int64_t k, std::int64_t g) { return a.w[k * G + g]; }, gates.data());
  run_lstm_fwd_grid(op, fwd_params(d, a, gates.data()), grid);
}

template <typename T>
void lstm_bwd_host(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a, const HostGrid& grid) {
  const char* op = block_lstm_op_name(a.layout, true);
  check_grid(op, d, grid);
  const std::int64_t S = d.seq_len_max, B = d.B, I = d.I, H = d.H, G = 4 * H, K = I + H;
  std::vector<T> d_gates(static_cast<std::size_t>(S * B * G));
  std::vector<T> partial(static_cast<std::size_t>(B * H * k_chunks(H, grid.k_chunk)));
  run_lstm_bwd_grid(op, bwd_params(d, a, grid.k_chunk, d_gates.data(), partial.data()), grid);
  const T* dg = d_gates.data();
  auto d_gate = [&](std::int64_t r, std::int64_t g) { return dg[r * G + g]; };
  // d_x[r] = d_gates[r]·w_xᵀ for the rows r = t·B + n < S·B, zero after.
  product<T>(
      S * B, I, G, d_gate, [&](std::int64_t g, std::int64_t m) { return a.w[m * G + g]; }, a.d_x);
  std::fill(a.d_x + S * B * I, a.d_x + d.T * B * I, T(0));
  // d_w = Σ_r [x[r], h_prev of r]ᵀ·d_gates[r], one product over all S·B rows in increasing r;
  // the h_prev of row r is h_prev[n] at t = 0, else h[t − 1][n] = h[r − B].
  auto xh = [&](std::int64_t k, std::int64_t r) {
    if (k < I) return a.x[r * I + k];
    return r < B ? a.h_prev[r * H + k - I] : a.h[(r - B) * H + k - I];
  };
  product<T>(K, G, S * B, xh, d_gate, a.d_w);
}

template <typename T>
void run_gru_fwd_grid(const char* op, const GRUFwdParams<T>& p, const HostGrid& grid) {
  run_grid<T>(
      op, grid, gru_resident_elems(p.H, grid.ctas),
      [&](const CtaIndex& c, T* resident, HostSync& sync) { gru_fwd_cta(p, c, resident, sync); });
}

template <typename T>
void gru_fwd_host(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a, const HostGrid& grid) {
  const char* op = "BlockGRU";
  check_grid(op, d, grid);
  const std::int64_t S = d.seq_len_max, B = d.B, I = d.I, H = d.H, BH = B * H;
  for (T* p : {a.r, a.u, a.c, a.h}) std::fill(p + S * BH, p + d.T * BH, T(0));
  // The input projections of all steps: xw_ru[r] = x[r]·w_ru[:I], xw_c[r] = x[r]·w_c[:I] for
  // the rows r = t·B + n < S·B.
  std::vector<T> xw_ru(static_cast<std::size_t>(S * B * 2 * H));
  std::vector<T> xw_c(static_cast<std::size_t>(S * BH));
  auto x = [&](std::int64_t r, std::int64_t k) { return a.x[r * I + k]; };
  product<T>(
      S * B, 2 * H, I, x, [&](std::int64_t k, std::int64_t g) { return a.w_ru[k * 2 * H + g]; },
      xw_ru.data());
  product<T>(
      S * B, H, I, x, [&](std::int64_t k, std::int64_t g) { return a.w_c[k * H + g]; },
      xw_c.data());
  run_gru_fwd_grid(op, gru_fwd_params(d, a, xw_ru.data(), xw_c.data()), grid);
}

template <typename T>
void run_gru_bwd_grid(const char* op, const GRUBwdParams<T>& p, const HostGrid& grid) {
  run_grid<T>(
      op, grid, gru_resident_elems(p.H, grid.ctas),
      [&](const CtaIndex& c, T* resident, HostSync& sync) { gru_bwd_cta(p, c, resident, sync); });
}

template <typename T>
void gru_bwd_host(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a, const HostGrid& grid) {
  const char* op = "BlockGRUGrad";
  check_grid(op, d, grid);
  const std::int64_t S = d.seq_len_max, B = d.B, I = d.I, H = d.H, BH = B * H, K = I + H;
  const std::int64_t H2 = 2 * H;
  std::vector<T> d_c_bar(static_cast<std::size_t>(S * BH)), hr(static_cast<std::size_t>(S * BH));
  std::vector<T> d_ru(static_cast<std::size_t>(S * B * H2)), d_hr(static_cast<std::size_t>(BH));
  run_gru_bwd_grid(op, gru_bwd_params(d, a, d_c_bar.data(), d_ru.data(), hr.data(), d_hr.data()),
                   grid);
  // d_x[r] = d_ru[r]·w_ru[:I]ᵀ + d_c_bar[r]·w_c[:I]ᵀ for the rows r = t·B + n < S·B (the
  // reference's g1 + g2), zero after.
  auto dru = [&](std::int64_t r, std::int64_t g) { return d_ru[r * H2 + g]; };
  auto dcb = [&](std::int64_t r, std::int64_t g) { return d_c_bar[r * H + g]; };
  product<T>(
      S * B, I, H2, dru, [&](std::int64_t g, std::int64_t m) { return a.w_ru[m * H2 + g]; }, a.d_x);
  std::vector<T> g2(static_cast<std::size_t>(S * B * I));
  product<T>(
      S * B, I, H, dcb, [&](std::int64_t g, std::int64_t m) { return a.w_c[m * H + g]; },
      g2.data());
  for (std::size_t e = 0; e < g2.size(); ++e) a.d_x[e] = a.d_x[e] + g2[e];
  std::fill(a.d_x + S * B * I, a.d_x + d.T * B * I, T(0));
  // d_w_ru = Σ_r [x[r], h_prev of r]ᵀ·d_ru[r] and d_w_c = Σ_r [x[r], hr[r]]ᵀ·d_c_bar[r], one
  // product each over all S·B rows in increasing r.
  auto xh = [&](std::int64_t k, std::int64_t r) {
    if (k < I) return a.x[r * I + k];
    return r < B ? a.h_prev[r * H + k - I] : a.h[(r - B) * H + k - I];
  };
  auto xhr = [&](std::int64_t k, std::int64_t r) {
    return k < I ? a.x[r * I + k] : hr[static_cast<std::size_t>(r * H + k - I)];
  };
  product<T>(K, H2, S * B, xh, dru, a.d_w_ru);
  product<T>(K, H, S * B, xhr, dcb, a.d_w_c);
}

template void run_lstm_fwd_grid<float>(const char*, const FwdParams<float>&, const HostGrid&);
template void run_lstm_fwd_grid<double>(const char*, const FwdParams<double>&, const HostGrid&);
template void run_lstm_bwd_grid<float>(const char*, const BwdParams<float>&, const HostGrid&);
template void run_lstm_bwd_grid<double>(const char*, const BwdParams<double>&, const HostGrid&);
template void lstm_fwd_host<float>(const BlockLSTMDims&, const BlockLSTMFwdArgs<float>&,
                                   const HostGrid&);
template void lstm_fwd_host<double>(const BlockLSTMDims&, const BlockLSTMFwdArgs<double>&,
                                    const HostGrid&);
template void lstm_bwd_host<float>(const BlockLSTMDims&, const BlockLSTMBwdArgs<float>&,
                                   const HostGrid&);
template void lstm_bwd_host<double>(const BlockLSTMDims&, const BlockLSTMBwdArgs<double>&,
                                    const HostGrid&);
template void run_gru_fwd_grid<float>(const char*, const GRUFwdParams<float>&, const HostGrid&);
template void run_gru_fwd_grid<double>(const char*, const GRUFwdParams<double>&, const HostGrid&);
template void run_gru_bwd_grid<float>(const char*, const GRUBwdParams<float>&, const HostGrid&);
template void run_gru_bwd_grid<double>(const char*, const GRUBwdParams<double>&, const HostGrid&);
template void gru_bwd_host<float>(const BlockGRUDims&, const BlockGRUBwdArgs<float>&,
                                  const HostGrid&);
template void gru_bwd_host<double>(const BlockGRUDims&, const BlockGRUBwdArgs<double>&,
                                   const HostGrid&);
template void gru_fwd_host<float>(const BlockGRUDims&, const BlockGRUFwdArgs<float>&,
                                  const HostGrid&);
template void gru_fwd_host<double>(const BlockGRUDims&, const BlockGRUFwdArgs<double>&,
                                   const HostGrid&);

}  // namespace blockrnn::cuda::persistent
