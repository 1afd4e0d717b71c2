// A BlockGRU problem for the persistent GRU kernel's tests (test_persistent_gru.cc on the host
// driver, test_persistent_device.cc on a GPU): random inputs, the forward's outputs, the kernel
// argument struct pointing at them, and the CPU reference's results (ref::block_gru_fwd,
// src/ref/block_gru.cc).
//
// Inputs are uniform in [−1, 1], the weights scaled by 1/√(I+H) so every pre-activation stays
// O(1). Outputs start as NaN so that an element a kernel fails to write shows.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernel/block_gru.h"
#include "persistent_case.h"  // nan_vector

namespace blockrnn::persistent_test {

struct GRUShape {
  std::int64_t T, B, I, H, S;
  std::uint64_t seed = 1;
};

// The forward's outputs, NaN until written (an element the kernel fails to write shows).
template <typename T>
struct GRUOut {
  std::vector<T> r, u, c, h;
  explicit GRUOut(std::int64_t n)
      : r(nan_vector<T>(n)), u(nan_vector<T>(n)), c(nan_vector<T>(n)), h(nan_vector<T>(n)) {}
};

// The backward's outputs, NaN until written.
template <typename T>
struct GRUBwdOut {
  std::vector<T> d_x, d_h_prev, d_w_ru, d_w_c, d_b_ru, d_b_c;
  GRUBwdOut(std::int64_t T_, std::int64_t B, std::int64_t I, std::int64_t H)
      : d_x(nan_vector<T>(T_ * B * I)),
        d_h_prev(nan_vector<T>(B * H)),
        d_w_ru(nan_vector<T>((I + H) * 2 * H)),
        d_w_c(nan_vector<T>((I + H) * H)),
        d_b_ru(nan_vector<T>(2 * H)),
        d_b_c(nan_vector<T>(H)) {}
  std::vector<const std::vector<T>*> all() const {
    return {&d_x, &d_h_prev, &d_w_ru, &d_w_c, &d_b_ru, &d_b_c};
  }
};
inline const char* const kGRUBwdNames[] = {"d_x", "d_h_prev", "d_w_ru", "d_w_c", "d_b_ru", "d_b_c"};

// Random inputs uniform in [−1, 1], the weights scaled by 1/√(I+H) (pre-activations O(1)).
template <typename T>
struct GRUCase {
  GRUShape s;
  BlockGRUDims d;
  std::vector<T> x, h_prev, w_ru, w_c, b_ru, b_c, d_h;

  explicit GRUCase(const GRUShape& shape)
      : s(shape), d{shape.T, shape.B, shape.I, shape.H, shape.S, nullptr} {
    std::mt19937_64 rng(shape.seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const std::int64_t K = s.I + s.H;
    auto fill = [&](std::int64_t n, double scale) {
      std::vector<T> v(static_cast<std::size_t>(n));
      for (T& e : v) e = static_cast<T>(u(rng) * scale);
      return v;
    };
    const double ws = K > 0 ? 1.0 / std::sqrt(double(K)) : 1.0;
    x = fill(s.T * s.B * s.I, 1.0);
    h_prev = fill(s.B * s.H, 1.0);
    w_ru = fill(K * 2 * s.H, ws);
    w_c = fill(K * s.H, ws);
    b_ru = fill(2 * s.H, 1.0);
    b_c = fill(s.H, 1.0);
    d_h = fill(s.T * s.B * s.H, 1.0);
  }

  BlockGRUFwdArgs<T> args(GRUOut<T>& o) const {
    BlockGRUFwdArgs<T> a{};
    a.x = x.data();
    a.h_prev = h_prev.data();
    a.w_ru = w_ru.data();
    a.w_c = w_c.data();
    a.b_ru = b_ru.data();
    a.b_c = b_c.data();
    a.r = o.r.data();
    a.u = o.u.data();
    a.c = o.c.data();
    a.h = o.h.data();
    return a;
  }

  GRUOut<T> reference() const {
    GRUOut<T> o(s.T * s.B * s.H);
    ref::block_gru_fwd<T>(d, args(o));
    return o;
  }

  // The backward's arguments from the forward's outputs `f`.
  BlockGRUBwdArgs<T> bwd_args(const GRUOut<T>& f, GRUBwdOut<T>& o) const {
    BlockGRUBwdArgs<T> a{};
    a.x = x.data();
    a.h_prev = h_prev.data();
    a.w_ru = w_ru.data();
    a.w_c = w_c.data();
    a.r = f.r.data();
    a.u = f.u.data();
    a.c = f.c.data();
    a.h = f.h.data();
    a.d_h = d_h.data();
    a.d_x = o.d_x.data();
    a.d_h_prev = o.d_h_prev.data();
    a.d_w_ru = o.d_w_ru.data();
    a.d_w_c = o.d_w_c.data();
    a.d_b_ru = o.d_b_ru.data();
    a.d_b_c = o.d_b_c.data();
    return a;
  }

  GRUBwdOut<T> reference_bwd(const GRUOut<T>& f) const {
    GRUBwdOut<T> o(s.T, s.B, s.I, s.H);
    ref::block_gru_bwd<T>(d, bwd_args(f, o));
    return o;
  }
};

}  // namespace blockrnn::persistent_test
