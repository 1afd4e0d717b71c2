// A BlockLSTM problem for the persistent kernels' tests (test_persistent.cc on the host driver,
// test_persistent_device.cc on a GPU): random inputs, the outputs of the forward and the
// backward, the kernel argument structs pointing at them, and the CPU reference's results
// (blockrnn::ref::block_lstm_fwd / block_lstm_bwd, src/ref/block_lstm.cc).
//
// Inputs are uniform in [−1, 1], w scaled by 1/√(I+H) so every pre-activation stays O(1) (the
// recurrence then contracts rather than amplifying rounding differences over the steps).
// Outputs start as NaN so that an element a kernel fails to write shows.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernel/block_lstm.h"

namespace blockrnn::persistent_test {

struct CaseShape {
  std::int64_t T, B, I, H, S;
  bool use_peephole = true;
  LSTMLayout layout = LSTMLayout::kICFO;
  double forget_bias = 1.0;
  double cell_clip = 0.5;  // active: |cs| exceeds 0.5 at these inputs
  std::uint64_t seed = 1;
};

template <typename T>
std::vector<T> nan_vector(std::int64_t n) {
  return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN());
}

template <typename T>
struct FwdOut {
  std::vector<T> i, cs, f, o, ci, co, h;
  explicit FwdOut(std::int64_t n)
      : i(nan_vector<T>(n)),
        cs(nan_vector<T>(n)),
        f(nan_vector<T>(n)),
        o(nan_vector<T>(n)),
        ci(nan_vector<T>(n)),
        co(nan_vector<T>(n)),
        h(nan_vector<T>(n)) {}
  std::vector<const std::vector<T>*> all() const { return {&i, &cs, &f, &o, &ci, &co, &h}; }
};

template <typename T>
struct BwdOut {
  std::vector<T> d_x, d_cs_prev, d_h_prev, d_w, d_wci, d_wcf, d_wco, d_b;
  BwdOut(std::int64_t T_, std::int64_t B, std::int64_t I, std::int64_t H)
      : d_x(nan_vector<T>(T_ * B * I)),
        d_cs_prev(nan_vector<T>(B * H)),
        d_h_prev(nan_vector<T>(B * H)),
        d_w(nan_vector<T>((I + H) * 4 * H)),
        d_wci(nan_vector<T>(H)),
        d_wcf(nan_vector<T>(H)),
        d_wco(nan_vector<T>(H)),
        d_b(nan_vector<T>(4 * H)) {}
};
// The backward's outputs by name, for messages.
inline const char* const kBwdNames[] = {"d_x",   "d_cs_prev", "d_h_prev", "d_w",
                                        "d_wci", "d_wcf",     "d_wco",    "d_b"};
inline const char* const kFwdNames[] = {"i", "cs", "f", "o", "ci", "co", "h"};

template <typename T>
std::vector<const std::vector<T>*> all(const BwdOut<T>& o) {
  return {&o.d_x, &o.d_cs_prev, &o.d_h_prev, &o.d_w, &o.d_wci, &o.d_wcf, &o.d_wco, &o.d_b};
}

template <typename T>
struct Case {
  CaseShape s;
  BlockLSTMDims d;
  std::vector<T> x, cs_prev, h_prev, w, wci, wcf, wco, b, d_cs, d_h;

  explicit Case(const CaseShape& shape)
      : s(shape), d{shape.T, shape.B, shape.I, shape.H, shape.S, nullptr} {
    std::mt19937_64 rng(shape.seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const std::int64_t T_ = s.T, B = s.B, I = s.I, H = s.H, K = I + H;
    auto fill = [&](std::int64_t n, double scale) {
      std::vector<T> v(static_cast<std::size_t>(n));
      for (T& e : v) e = static_cast<T>(u(rng) * scale);
      return v;
    };
    x = fill(T_ * B * I, 1.0);
    cs_prev = fill(B * H, 1.0);
    h_prev = fill(B * H, 1.0);
    w = fill(K * 4 * H, K > 0 ? 1.0 / std::sqrt(double(K)) : 1.0);
    wci = fill(H, 1.0);
    wcf = fill(H, 1.0);
    wco = fill(H, 1.0);
    b = fill(4 * H, 1.0);
    d_cs = fill(T_ * B * H, 1.0);
    d_h = fill(T_ * B * H, 1.0);
  }

  BlockLSTMFwdArgs<T> fwd_args(FwdOut<T>& o) const {
    BlockLSTMFwdArgs<T> a{};
    a.x = x.data();
    a.cs_prev = cs_prev.data();
    a.h_prev = h_prev.data();
    a.w = w.data();
    a.wci = wci.data();
    a.wcf = wcf.data();
    a.wco = wco.data();
    a.b = b.data();
    a.i = o.i.data();
    a.cs = o.cs.data();
    a.f = o.f.data();
    a.o = o.o.data();
    a.ci = o.ci.data();
    a.co = o.co.data();
    a.h = o.h.data();
    a.forget_bias = static_cast<T>(s.forget_bias);
    a.cell_clip = static_cast<T>(s.cell_clip);
    a.use_peephole = s.use_peephole;
    a.layout = s.layout;
    return a;
  }

  BlockLSTMBwdArgs<T> bwd_args(const FwdOut<T>& f, BwdOut<T>& g) const {
    BlockLSTMBwdArgs<T> a{};
    a.x = x.data();
    a.cs_prev = cs_prev.data();
    a.h_prev = h_prev.data();
    a.w = w.data();
    a.wci = wci.data();
    a.wcf = wcf.data();
    a.wco = wco.data();
    a.i = f.i.data();
    a.cs = f.cs.data();
    a.f = f.f.data();
    a.o = f.o.data();
    a.ci = f.ci.data();
    a.co = f.co.data();
    a.h = f.h.data();
    a.d_cs = d_cs.data();
    a.d_h = d_h.data();
    a.d_x = g.d_x.data();
    a.d_cs_prev = g.d_cs_prev.data();
    a.d_h_prev = g.d_h_prev.data();
    a.d_w = g.d_w.data();
    a.d_wci = g.d_wci.data();
    a.d_wcf = g.d_wcf.data();
    a.d_wco = g.d_wco.data();
    a.d_b = g.d_b.data();
    a.use_peephole = s.use_peephole;
    a.layout = s.layout;
    return a;
  }

  FwdOut<T> reference_fwd() const {
    FwdOut<T> o(s.T * s.B * s.H);
    ref::block_lstm_fwd<T>(d, fwd_args(o));
    return o;
  }
  BwdOut<T> reference_bwd(const FwdOut<T>& f) const {
    BwdOut<T> g(s.T, s.B, s.I, s.H);
    ref::block_lstm_bwd<T>(d, bwd_args(f, g));
    return g;
  }
};

}  // namespace blockrnn::persistent_test
