// bfloat16 products of the fast sequence kernels (src/cpu/bf16_products.h): with
// `bf16_products` set (what the ops do for a bfloat16 call) the kernels' GEMMs take bfloat16
// operands — BlockLSTM: the input projection and each step's h[t−1]·w_h forward,
// carry_h = d_gates·w_hᵀ and the weight gradients backward; BlockGRU: the same with hr for the
// candidate's product and d_c_bar, d_ru backward; BlockGRUResetAfter: h[t−1] forward, d_gh and
// d_gi backward — and the bits do not depend on the thread count. Checked on the kernels directly,
// against float64 sums of the bfloat16-rounded operands, so that the place of every rounding is
// pinned (an operand left unrounded moves a result by ~2⁻⁹ relative, far above the float32
// accumulation error the comparisons allow).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "blockrnn/context.h"
#include "core/isa.h"
#include "gemm/bf16.h"
#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"

namespace blockrnn {
namespace {

using gemm::bf16_round;
using Vec = std::vector<float>;

Vec random_vec(std::size_t n, std::mt19937_64& rng, double scale) {
  std::uniform_real_distribution<double> dist(-scale, scale);
  Vec v(n);
  for (float& e : v) e = static_cast<float>(dist(rng));
  return v;
}

Vec rounded(const Vec& v) {
  Vec r(v);
  for (float& e : r) e = bf16_round(e);
  return r;
}

double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

// f(isa) on every ISA path this CPU has (the one BLOCKRNN_ISA names when set), then the path
// the environment asks for again.
template <class F>
void on_every_isa(F&& f) {
  const char* env = std::getenv("BLOCKRNN_ISA");
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline}) {
    if (env && *env ? isa != core::active_isa() : !core::isa_supported(isa)) continue;
    set_isa(isa_name(isa));
    f(isa);
  }
  set_isa(env ? env : "");
}

// The bits of a kernel's outputs with bfloat16 products do not depend on the thread count:
// on every ISA path, without lengths and with prefix and unordered lengths of 16 examples of up
// to 5 steps, run(lengths, threads) at 2 and 3 threads returns exactly what it returned at 1
// (run may check more at threads == 1: it runs first).
template <class Run>
void expect_same_bits_at_every_thread_count(Run&& run) {
  const int saved_threads = get_num_threads();
  const std::vector<std::int64_t> prefix = {5, 5, 4, 4, 3, 3, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0};
  const std::vector<std::int64_t> unordered = {1, 5, 0, 3, 5, 2, 4, 4, 1, 0, 5, 3, 2, 2, 1, 5};
  on_every_isa([&](Isa isa) {
    SCOPED_TRACE(isa_name(isa));
    for (const std::vector<std::int64_t>* lengths :
         {(const std::vector<std::int64_t>*)nullptr, &prefix, &unordered}) {
      const std::int64_t* len = lengths ? lengths->data() : nullptr;
      std::vector<Vec> first;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        const std::vector<Vec> got = run(len, threads);
        if (first.empty()) {
          first = got;
          continue;
        }
        for (std::size_t k = 0; k < got.size(); ++k) {
          EXPECT_EQ(got[k], first[k]) << isa_name(isa) << " output " << k << " threads " << threads
                                      << " lengths " << (lengths != nullptr);
        }
      }
    }
  });
  set_num_threads(saved_threads);
}

// One LSTM problem (BlockLSTM, ICFO, forget_bias 0, no clip, no peepholes) and its forward
// outputs.
struct Lstm {
  std::int64_t T, B, I, H;
  Vec x, cs_prev, h_prev, w, b, wc;
  Vec i, cs, f, o, ci, co, h;

  Lstm(std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_, std::uint64_t seed)
      : T(T_), B(B_), I(I_), H(H_) {
    std::mt19937_64 rng(seed);
    x = random_vec(T * B * I, rng, 1.0);
    cs_prev = random_vec(B * H, rng, 1.0);
    h_prev = random_vec(B * H, rng, 1.0);
    w = random_vec((I + H) * 4 * H, rng, 1.0 / std::sqrt(double(I + H)));
    b = random_vec(4 * H, rng, 0.5);
    wc = Vec(H, 0.0f);
  }
  BlockLSTMDims dims(const std::int64_t* lengths = nullptr) const {
    return {T, B, I, H, T, lengths};
  }
  void forward(bool bf16, const std::int64_t* lengths = nullptr) {
    for (Vec* v : {&i, &cs, &f, &o, &ci, &co, &h}) v->assign(T * B * H, 0.0f);
    BlockLSTMFwdArgs<float> a{x.data(),  cs_prev.data(), h_prev.data(), w.data(),  wc.data(),
                              wc.data(), wc.data(),      b.data(),      i.data(),  cs.data(),
                              f.data(),  o.data(),       ci.data(),     co.data(), h.data()};
    a.bf16_products = bf16;
    cpu::block_lstm_fwd(dims(lengths), a);
  }
  // Its gradients for upstream gradients d_cs, d_h [T, B, H].
  struct Grads {
    Vec d_x, d_cs_prev, d_h_prev, d_w, d_wci, d_wcf, d_wco, d_b;
  };
  Grads backward(bool bf16, const Vec& d_cs, const Vec& d_h,
                 const std::int64_t* lengths = nullptr) const {
    Grads g{Vec(T * B * I), Vec(B * H), Vec(B * H), Vec((I + H) * 4 * H),
            Vec(H),         Vec(H),     Vec(H),     Vec(4 * H)};
    BlockLSTMBwdArgs<float> a{x.data(),       cs_prev.data(),     h_prev.data(),     w.data(),
                              wc.data(),      wc.data(),          wc.data(),         i.data(),
                              cs.data(),      f.data(),           o.data(),          ci.data(),
                              co.data(),      h.data(),           d_cs.data(),       d_h.data(),
                              g.d_x.data(),   g.d_cs_prev.data(), g.d_h_prev.data(), g.d_w.data(),
                              g.d_wci.data(), g.d_wcf.data(),     g.d_wco.data(),    g.d_b.data()};
    a.bf16_products = bf16;
    cpu::block_lstm_bwd(dims(lengths), a);
    return g;
  }
};

double max_abs_diff(const Vec& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t k = 0; k < a.size(); ++k) m = std::max(m, std::abs(double(a[k]) - b[k]));
  return m;
}

// Step t's input gate i[t] = σ(x[t]·w_x + h[t−1]·w_h + b) (ICFO: columns [0, H)) in float64
// from the given operands, h[t−1] = hp [B, H].
std::vector<double> input_gate(const Lstm& c, std::int64_t t, const Vec& x, const Vec& w,
                               const Vec& hp) {
  const std::int64_t G = 4 * c.H;
  std::vector<double> out(c.B * c.H);
  for (std::int64_t r = 0; r < c.B; ++r) {
    for (std::int64_t j = 0; j < c.H; ++j) {
      double z = c.b[j];
      for (std::int64_t k = 0; k < c.I; ++k) z += double(x[(t * c.B + r) * c.I + k]) * w[k * G + j];
      for (std::int64_t k = 0; k < c.H; ++k) z += double(hp[r * c.H + k]) * w[(c.I + k) * G + j];
      out[r * c.H + j] = sigmoid(z);
    }
  }
  return out;
}

// The forward's products use x, w and h[t−1] rounded to bfloat16: the kernel's input gate of
// step 0 (h_prev) and step 1 (its own h[0]) is that of the rounded operands to float32 accuracy,
// and far from that of the unrounded ones.
TEST(Bf16Products, ForwardRoundsEveryOperand) {
  on_every_isa([&](Isa isa) {
    Lstm c(2, 7, 37, 45, 1);
    c.forward(true);
    const Vec h0(c.h.begin(), c.h.begin() + c.B * c.H);
    const std::int64_t BH = c.B * c.H;
    for (std::int64_t t = 0; t < 2; ++t) {
      const Vec& hp = t == 0 ? c.h_prev : h0;
      const std::vector<double> want = input_gate(c, t, rounded(c.x), rounded(c.w), rounded(hp));
      const std::vector<double> unrounded = input_gate(c, t, c.x, c.w, hp);
      const Vec got(c.i.begin() + t * BH, c.i.begin() + (t + 1) * BH);
      // σ' ≤ 1/4 of a pre-activation error ≤ (K + 1)·2⁻²⁴·Σ|terms| (K = I + H + 1 ≤ 83 terms
      // of magnitude ≤ 1 each): 1e-5 holds with room; the unrounded operands are ~1e-3 away.
      EXPECT_LE(max_abs_diff(got, want), 1e-5) << isa_name(isa) << " step " << t;
      double far = 0;
      for (std::size_t k = 0; k < got.size(); ++k)
        far = std::max(far, std::abs(want[k] - unrounded[k]));
      EXPECT_GE(far, 1e-4) << isa_name(isa) << " step " << t;
    }
  });
}

// The backward's products use d_gates rounded to bfloat16. With one example and one step,
// d_b = d_gates exactly (a column sum of one row), so: every d_w element is the product of two
// bfloat16 values (exact in float32), d_h_prev = bf16(d_gates)·w_hᵀ and d_x = bf16(d_gates)·w_xᵀ
// to float32 accuracy; and without bf16_products d_w is x·d_gates unrounded.
TEST(Bf16Products, BackwardRoundsDGates) {
  on_every_isa([&](Isa isa) {
    Lstm c(1, 1, 29, 38, 2);
    c.x = rounded(c.x);  // a bfloat16 call's inputs are bfloat16 values
    c.w = rounded(c.w);
    c.h_prev = rounded(c.h_prev);
    c.forward(true);
    std::mt19937_64 rng(3);
    const Vec d_cs = random_vec(c.H, rng, 1.0), d_h = random_vec(c.H, rng, 1.0);
    const Lstm::Grads g = c.backward(true, d_cs, d_h);
    const Lstm::Grads g32 = c.backward(false, d_cs, d_h);
    const std::int64_t I = c.I, H = c.H, G = 4 * H;
    EXPECT_EQ(g.d_b, g32.d_b);  // the reductions stay float32
    const Vec dg = rounded(g.d_b);
    int differs = 0;
    for (std::int64_t k = 0; k < I + H; ++k) {
      const float in = k < I ? c.x[k] : c.h_prev[k - I];
      for (std::int64_t j = 0; j < G; ++j) {
        EXPECT_EQ(g.d_w[k * G + j], in * dg[j]) << isa_name(isa) << " d_w " << k << "," << j;
        EXPECT_EQ(g32.d_w[k * G + j], in * g.d_b[j]);
        differs += g.d_w[k * G + j] != g32.d_w[k * G + j];
      }
    }
    EXPECT_GT(differs, 0);
    std::vector<double> want_dh(H), want_dx(I);
    double scale_dh = 0, scale_dx = 0;
    for (std::int64_t k = 0; k < H; ++k) {
      for (std::int64_t j = 0; j < G; ++j) {
        want_dh[k] += double(dg[j]) * c.w[(I + k) * G + j];
        scale_dh = std::max(scale_dh, std::abs(double(dg[j]) * c.w[(I + k) * G + j]) * G);
      }
    }
    for (std::int64_t k = 0; k < I; ++k) {
      for (std::int64_t j = 0; j < G; ++j) {
        want_dx[k] += double(dg[j]) * c.w[k * G + j];
        scale_dx = std::max(scale_dx, std::abs(double(dg[j]) * c.w[k * G + j]) * G);
      }
    }
    // G float32 additions: ≤ G·2⁻²⁴·Σ|terms|, Σ|terms| ≤ G·max|term|.
    EXPECT_LE(max_abs_diff(g.d_h_prev, want_dh), G * 0x1p-24 * scale_dh) << isa_name(isa);
    EXPECT_LE(max_abs_diff(g.d_x, want_dx), G * 0x1p-24 * scale_dx) << isa_name(isa);
  });
}

// The bits of BlockLSTM(Grad) with bfloat16 products do not depend on the thread count.
TEST(Bf16Products, SameBitsAtEveryThreadCount) {
  expect_same_bits_at_every_thread_count([](const std::int64_t* len, int) {
    Lstm c(5, 16, 67, 131, 4);
    c.forward(true, len);
    std::mt19937_64 rng(5);
    const Vec d_cs = random_vec(c.T * c.B * c.H, rng, 1.0);
    const Vec d_h = random_vec(c.T * c.B * c.H, rng, 1.0);
    const Lstm::Grads g = c.backward(true, d_cs, d_h, len);
    return std::vector<Vec>{c.h, c.cs, g.d_x, g.d_cs_prev, g.d_h_prev, g.d_w, g.d_b};
  });
}

// One BlockGRU problem and its forward outputs.
struct Gru {
  std::int64_t T, B, I, H;
  Vec x, h_prev, w_ru, w_c, b_ru, b_c;
  Vec r, u, c, h;

  Gru(std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_, std::uint64_t seed)
      : T(T_), B(B_), I(I_), H(H_) {
    std::mt19937_64 rng(seed);
    const double ws = 1.0 / std::sqrt(double(I + H));
    x = rounded(random_vec(T * B * I, rng, 1.0));  // a bfloat16 call's inputs
    h_prev = random_vec(B * H, rng, 1.0);          // unrounded: the kernel must round it
    w_ru = rounded(random_vec((I + H) * 2 * H, rng, ws));
    w_c = rounded(random_vec((I + H) * H, rng, ws));
    b_ru = random_vec(2 * H, rng, 0.5);
    b_c = random_vec(H, rng, 0.5);
  }
  void forward(bool bf16, const std::int64_t* lengths = nullptr) {
    for (Vec* v : {&r, &u, &c, &h}) v->assign(T * B * H, 0.0f);
    BlockGRUFwdArgs<float> a{x.data(),   h_prev.data(), w_ru.data(), w_c.data(), b_ru.data(),
                             b_c.data(), r.data(),      u.data(),    c.data(),   h.data()};
    a.bf16_products = bf16;
    cpu::block_gru_fwd(BlockGRUDims{T, B, I, H, T, lengths}, a);
  }
  struct Grads {
    Vec d_x, d_h_prev, d_w_ru, d_w_c, d_b_ru, d_b_c;
  };
  Grads backward(bool bf16, const Vec& d_h, const std::int64_t* lengths = nullptr) const {
    Grads g{Vec(T * B * I), Vec(B * H), Vec((I + H) * 2 * H), Vec((I + H) * H), Vec(2 * H), Vec(H)};
    BlockGRUBwdArgs<float> a{x.data(),       h_prev.data(),   w_ru.data(),       w_c.data(),
                             r.data(),       u.data(),        c.data(),          h.data(),
                             d_h.data(),     g.d_x.data(),    g.d_h_prev.data(), g.d_w_ru.data(),
                             g.d_w_c.data(), g.d_b_ru.data(), g.d_b_c.data()};
    a.bf16_products = bf16;
    cpu::block_gru_bwd(BlockGRUDims{T, B, I, H, T, lengths}, a);
    return g;
  }
};

// BlockGRU's forward products use h[t−1] and hr = h[t−1]⊙r rounded to bfloat16: r of step 0
// and the candidate c (given the kernel's own r) are those of the rounded operands to float32
// accuracy, and far from those of the unrounded ones.
TEST(Bf16Products, GruForwardRoundsHAndHr) {
  on_every_isa([&](Isa isa) {
    Gru g(1, 6, 35, 41, 6);
    g.forward(true);
    const std::int64_t B = g.B, I = g.I, H = g.H;
    const Vec hp = rounded(g.h_prev);
    Vec hr(B * H), hr_exact(B * H);
    for (std::int64_t e = 0; e < B * H; ++e) {
      hr_exact[e] = g.h_prev[e] * g.r[e];
      hr[e] = bf16_round(hr_exact[e]);
    }
    double r_err = 0, c_err = 0, r_far = 0, c_far = 0;
    for (std::int64_t n = 0; n < B; ++n) {
      for (std::int64_t j = 0; j < H; ++j) {
        double zr = g.b_ru[j], zr_exact = g.b_ru[j], zc = g.b_c[j], zc_exact = g.b_c[j];
        for (std::int64_t k = 0; k < I; ++k) {
          const double xk = g.x[n * I + k];
          zr += xk * g.w_ru[k * 2 * H + j];
          zc += xk * g.w_c[k * H + j];
        }
        zr_exact = zr;
        zc_exact = zc;
        for (std::int64_t k = 0; k < H; ++k) {
          zr += double(hp[n * H + k]) * g.w_ru[(I + k) * 2 * H + j];
          zr_exact += double(g.h_prev[n * H + k]) * g.w_ru[(I + k) * 2 * H + j];
          zc += double(hr[n * H + k]) * g.w_c[(I + k) * H + j];
          zc_exact += double(hr_exact[n * H + k]) * g.w_c[(I + k) * H + j];
        }
        const std::int64_t e = n * H + j;
        r_err = std::max(r_err, std::abs(g.r[e] - sigmoid(zr)));
        c_err = std::max(c_err, std::abs(g.c[e] - std::tanh(zc)));
        r_far = std::max(r_far, std::abs(sigmoid(zr) - sigmoid(zr_exact)));
        c_far = std::max(c_far, std::abs(std::tanh(zc) - std::tanh(zc_exact)));
      }
    }
    // A pre-activation of ≤ 77 unit-scale terms in float32: far below 1e-5; unrounded
    // operands move the gates by ~1e-3.
    EXPECT_LE(r_err, 1e-5) << isa_name(isa);
    EXPECT_LE(c_err, 1e-5) << isa_name(isa);
    EXPECT_GE(r_far, 1e-4) << isa_name(isa);
    EXPECT_GE(c_far, 1e-4) << isa_name(isa);
  });
}

// BlockGRUGrad's weight gradients take d_ru, d_c_bar and hr rounded to bfloat16. With one
// example and one step d_b_ru = d_ru and d_b_c = d_c_bar exactly (column sums of one row, in
// float32), so every d_w element is one product of two bfloat16 values, exact in float32:
// d_w_ru = [x, h_prev]ᵀ·bf16(d_ru), d_w_c = [x, bf16(h_prev⊙r)]ᵀ·bf16(d_c_bar).
TEST(Bf16Products, GruBackwardRoundsEveryWeightGradientOperand) {
  on_every_isa([&](Isa isa) {
    Gru g(1, 1, 23, 37, 9);
    g.h_prev = rounded(g.h_prev);  // a bfloat16 call's input
    g.forward(true);
    std::mt19937_64 rng(10);
    const Vec d_h = random_vec(g.H, rng, 1.0);
    const Gru::Grads gr = g.backward(true, d_h);
    const std::int64_t I = g.I, H = g.H;
    const Vec d_ru = rounded(gr.d_b_ru), d_c = rounded(gr.d_b_c);
    int differs = 0;
    for (std::int64_t k = 0; k < I + H; ++k) {
      const float in = k < I ? g.x[k] : g.h_prev[k - I];
      const float in_c = k < I ? g.x[k] : bf16_round(g.h_prev[k - I] * g.r[k - I]);
      for (std::int64_t j = 0; j < 2 * H; ++j) {
        EXPECT_EQ(gr.d_w_ru[k * 2 * H + j], in * d_ru[j]) << isa_name(isa) << " " << k << "," << j;
        differs += gr.d_w_ru[k * 2 * H + j] != in * gr.d_b_ru[j];
      }
      for (std::int64_t j = 0; j < H; ++j) {
        EXPECT_EQ(gr.d_w_c[k * H + j], in_c * d_c[j]) << isa_name(isa) << " " << k << "," << j;
      }
    }
    EXPECT_GT(differs, 0) << isa_name(isa);
  });
}

// BlockGRU(Grad) with bfloat16 products: the same bits at every thread count; and the products
// differ from the float32 ones (they are used).
TEST(Bf16Products, GruSameBitsAtEveryThreadCount) {
  expect_same_bits_at_every_thread_count([](const std::int64_t* len, int threads) {
    Gru g(5, 16, 67, 131, 7);
    g.forward(true, len);
    std::mt19937_64 rng(8);
    const Vec d_h = random_vec(g.T * g.B * g.H, rng, 1.0);
    const Gru::Grads gr = g.backward(true, d_h, len);
    if (threads == 1) {
      const Gru::Grads g32 = g.backward(false, d_h, len);
      EXPECT_NE(gr.d_w_c, g32.d_w_c);
      EXPECT_NE(gr.d_h_prev, g32.d_h_prev);
    }
    return std::vector<Vec>{g.h,       g.c,      gr.d_x,    gr.d_h_prev,
                            gr.d_w_ru, gr.d_w_c, gr.d_b_ru, gr.d_b_c};
  });
}

// One BlockGRUResetAfter problem (gate blocks [r | z | n]) and its forward outputs.
struct GruResetAfter {
  std::int64_t T, B, I, H;
  Vec x, h_prev, w_i, w_h, b_i, b_h;
  Vec r, u, n, hn, h;

  GruResetAfter(std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_,
                std::uint64_t seed)
      : T(T_), B(B_), I(I_), H(H_) {
    std::mt19937_64 rng(seed);
    const double ws = 1.0 / std::sqrt(double(I + H));
    x = rounded(random_vec(T * B * I, rng, 1.0));  // a bfloat16 call's inputs
    h_prev = random_vec(B * H, rng, 1.0);          // unrounded: the kernel must round it
    w_i = rounded(random_vec(I * 3 * H, rng, ws));
    w_h = rounded(random_vec(H * 3 * H, rng, ws));
    b_i = random_vec(3 * H, rng, 0.5);
    b_h = random_vec(3 * H, rng, 0.5);
  }
  void forward(bool bf16, const std::int64_t* lengths = nullptr) {
    for (Vec* v : {&r, &u, &n, &hn, &h}) v->assign(T * B * H, 0.0f);
    BlockGRUResetAfterFwdArgs<float> a{x.data(),   h_prev.data(), w_i.data(), w_h.data(),
                                       b_i.data(), b_h.data(),    r.data(),   u.data(),
                                       n.data(),   hn.data(),     h.data()};
    a.bf16_products = bf16;
    cpu::block_gru_reset_after_fwd(BlockGRUDims{T, B, I, H, T, lengths}, a);
  }
  struct Grads {
    Vec d_x, d_h_prev, d_w_i, d_w_h, d_b_i, d_b_h;
  };
  Grads backward(bool bf16, const Vec& d_h, const std::int64_t* lengths = nullptr) const {
    Grads g{Vec(T * B * I), Vec(B * H), Vec(I * 3 * H), Vec(H * 3 * H), Vec(3 * H), Vec(3 * H)};
    BlockGRUResetAfterBwdArgs<float> a{
        x.data(),       h_prev.data(),  w_i.data(),     w_h.data(),
        r.data(),       u.data(),       n.data(),       hn.data(),
        h.data(),       d_h.data(),     g.d_x.data(),   g.d_h_prev.data(),
        g.d_w_i.data(), g.d_w_h.data(), g.d_b_i.data(), g.d_b_h.data()};
    a.bf16_products = bf16;
    cpu::block_gru_reset_after_bwd(BlockGRUDims{T, B, I, H, T, lengths}, a);
    return g;
  }
};

// BlockGRUResetAfter's forward products use x, w_i, w_h (bfloat16 inputs, exact) and h[t−1]
// rounded to bfloat16: at step 0 (h_prev) and step 1 (the kernel's own h[0]) hn = h[t−1]·w_h_n
// + b_h_n and r = σ(x·w_i_r + b_i_r + h[t−1]·w_h_r + b_h_r) are those of the rounded h[t−1] to
// float32 accuracy, and far from those of the unrounded one.
TEST(Bf16Products, GruResetAfterForwardRoundsH) {
  on_every_isa([&](Isa isa) {
    GruResetAfter g(2, 6, 35, 41, 11);
    g.forward(true);
    const std::int64_t B = g.B, I = g.I, H = g.H, H3 = 3 * H, BH = B * H;
    for (std::int64_t t = 0; t < 2; ++t) {
      const Vec hp_exact = t == 0 ? g.h_prev : Vec(g.h.begin(), g.h.begin() + BH);
      const Vec hp = rounded(hp_exact);
      double hn_err = 0, hn_bound = 0, r_err = 0, hn_far = 0, r_far = 0;
      for (std::int64_t m = 0; m < B; ++m) {
        for (std::int64_t j = 0; j < H; ++j) {
          double zr = double(g.b_i[j]) + g.b_h[j], zn = g.b_h[2 * H + j], terms = std::abs(zn);
          for (std::int64_t k = 0; k < I; ++k)
            zr += double(g.x[(t * B + m) * I + k]) * g.w_i[k * H3 + j];
          double zr_exact = zr, zn_exact = zn;
          for (std::int64_t k = 0; k < H; ++k) {
            const double wr = g.w_h[k * H3 + j], wn = g.w_h[k * H3 + 2 * H + j];
            zr += hp[m * H + k] * wr;
            zn += hp[m * H + k] * wn;
            terms += std::abs(hp[m * H + k] * wn);
            zr_exact += hp_exact[m * H + k] * wr;
            zn_exact += hp_exact[m * H + k] * wn;
          }
          const std::int64_t e = t * BH + m * H + j;
          hn_err = std::max(hn_err, std::abs(g.hn[e] - zn));
          // H float32 additions and the bias: ≤ (H + 1)·2⁻²⁴·Σ|terms|.
          hn_bound = std::max(hn_bound, double(H + 1) * 0x1p-24 * terms);
          r_err = std::max(r_err, std::abs(g.r[e] - sigmoid(zr)));
          hn_far = std::max(hn_far, std::abs(zn - zn_exact));
          r_far = std::max(r_far, std::abs(sigmoid(zr) - sigmoid(zr_exact)));
        }
      }
      EXPECT_LE(hn_err, hn_bound) << isa_name(isa) << " step " << t;
      // σ' ≤ 1/4 of a pre-activation of ≤ 78 unit-scale terms in float32: far below 1e-5;
      // an unrounded h[t−1] moves hn and r by ~1e-3.
      EXPECT_LE(r_err, 1e-5) << isa_name(isa) << " step " << t;
      EXPECT_GE(hn_far, 1e-4) << isa_name(isa) << " step " << t;
      EXPECT_GE(r_far, 1e-4) << isa_name(isa) << " step " << t;
    }
  });
}

// BlockGRUResetAfterGrad's products take d_gh and d_gi rounded to bfloat16. With one example
// and one step d_b_h = d_gh and d_b_i = d_gi exactly (column sums of one row), so every weight
// gradient element is one product of two bfloat16 values, exact in float32:
// d_w_h = h_prevᵀ·bf16(d_gh), d_w_i = xᵀ·bf16(d_gi); and d_h_prev = d_h⊙u + bf16(d_gh)·w_hᵀ,
// d_x = bf16(d_gi)·w_iᵀ to float32 accuracy.
TEST(Bf16Products, GruResetAfterBackwardRoundsEveryProductOperand) {
  on_every_isa([&](Isa isa) {
    GruResetAfter g(1, 1, 23, 37, 12);
    g.h_prev = rounded(g.h_prev);  // a bfloat16 call's input
    g.forward(true);
    std::mt19937_64 rng(13);
    const Vec d_h = random_vec(g.H, rng, 1.0);
    const GruResetAfter::Grads gr = g.backward(true, d_h);
    const GruResetAfter::Grads g32 = g.backward(false, d_h);
    const std::int64_t I = g.I, H = g.H, H3 = 3 * H;
    EXPECT_EQ(gr.d_b_h, g32.d_b_h);  // the reductions stay float32
    EXPECT_EQ(gr.d_b_i, g32.d_b_i);
    const Vec d_gh = rounded(gr.d_b_h), d_gi = rounded(gr.d_b_i);
    int differs = 0;
    for (std::int64_t k = 0; k < H; ++k) {
      for (std::int64_t j = 0; j < H3; ++j) {
        EXPECT_EQ(gr.d_w_h[k * H3 + j], g.h_prev[k] * d_gh[j])
            << isa_name(isa) << " " << k << "," << j;
        differs += gr.d_w_h[k * H3 + j] != g.h_prev[k] * gr.d_b_h[j];
      }
    }
    for (std::int64_t k = 0; k < I; ++k) {
      for (std::int64_t j = 0; j < H3; ++j) {
        EXPECT_EQ(gr.d_w_i[k * H3 + j], g.x[k] * d_gi[j]) << isa_name(isa) << " " << k << "," << j;
        differs += gr.d_w_i[k * H3 + j] != g.x[k] * gr.d_b_i[j];
      }
    }
    EXPECT_GT(differs, 0) << isa_name(isa);
    // H3 float32 additions (one more for d_h⊙u): ≤ (H3 + 1)·2⁻²⁴·Σ|terms|, per element.
    for (std::int64_t k = 0; k < H; ++k) {
      const double seed = float(d_h[k] * g.u[k]);
      double want = seed, terms = std::abs(seed);
      for (std::int64_t j = 0; j < H3; ++j) {
        want += double(d_gh[j]) * g.w_h[k * H3 + j];
        terms += std::abs(double(d_gh[j]) * g.w_h[k * H3 + j]);
      }
      EXPECT_LE(std::abs(gr.d_h_prev[k] - want), double(H3 + 1) * 0x1p-24 * terms)
          << isa_name(isa) << " d_h_prev " << k;
    }
    for (std::int64_t k = 0; k < I; ++k) {
      double want = 0, terms = 0;
      for (std::int64_t j = 0; j < H3; ++j) {
        want += double(d_gi[j]) * g.w_i[k * H3 + j];
        terms += std::abs(double(d_gi[j]) * g.w_i[k * H3 + j]);
      }
      EXPECT_LE(std::abs(gr.d_x[k] - want), double(H3) * 0x1p-24 * terms)
          << isa_name(isa) << " d_x " << k;
    }
  });
}

// BlockGRUResetAfter(Grad) with bfloat16 products: the same bits at every thread count; and the
// products differ from the float32 ones (they are used).
TEST(Bf16Products, GruResetAfterSameBitsAtEveryThreadCount) {
  expect_same_bits_at_every_thread_count([](const std::int64_t* len, int threads) {
    GruResetAfter g(5, 16, 67, 131, 14);
    g.forward(true, len);
    std::mt19937_64 rng(15);
    const Vec d_h = random_vec(g.T * g.B * g.H, rng, 1.0);
    const GruResetAfter::Grads gr = g.backward(true, d_h, len);
    if (threads == 1) {
      const GruResetAfter::Grads g32 = g.backward(false, d_h, len);
      EXPECT_NE(gr.d_w_h, g32.d_w_h);
      EXPECT_NE(gr.d_w_i, g32.d_w_i);
      EXPECT_NE(gr.d_h_prev, g32.d_h_prev);
      GruResetAfter f32 = g;
      f32.forward(false, len);
      EXPECT_NE(g.h, f32.h);
    }
    return std::vector<Vec>{g.h, g.hn, gr.d_x, gr.d_h_prev, gr.d_w_i, gr.d_w_h, gr.d_b_i, gr.d_b_h};
  });
}

}  // namespace
}  // namespace blockrnn
