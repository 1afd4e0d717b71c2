// The fused float32 element-wise kernels (src/cpu/pointwise_table.h) are compiled once per ISA
// path from one generic source, vectorised for AVX-512 and AVX2 and scalar on the baseline
// path: every path's table must give the baseline table's bits, for every function, at sizes that
// leave vector tails, over inputs that reach every branch of the activations (cpu/fast_math.h:
// the small and large tanh cases, exp's clamps, ±inf, NaN, signed zeros) and with every
// compile-time variant of the LSTM rows (peepholes, bias given or folded, a cell clip or none,
// gradient carries or none). A path this CPU lacks is skipped (its table is never run here).
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/isa.h"
#include "cpu/gru_pointwise.h"
#include "cpu/lstm_pointwise.h"
#include "cpu/pointwise_dispatch.h"
#include "test_util.h"

namespace blockrnn {
namespace {

using Table = cpu::PointwiseF32;
using Buf = std::vector<float>;

// Values that reach every case of the activations, then uniform draws of widening ranges.
Buf inputs(std::mt19937_64& rng, std::size_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::array<float, 22> special = {
      0.0f,  -0.0f,     0.49999997f, 0.5f,   -0.5f,         1e-30f, -1e-30f, 88.37626f,
      88.5f, 88.72283f, 88.8f,       -87.3f, -87.33654f,    -87.4f, -100.0f, 100.0f,
      inf,   -inf,      1e-3f,       -20.0f, std::nanf(""), 44.0f};
  Buf v(n);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t k = 0; k < n; ++k) {
    const float scale = k % 3 == 0 ? 1.0f : k % 3 == 1 ? 8.0f : 60.0f;
    v[k] = k % 7 == 3 ? special[(k / 7) % special.size()] : scale * u(rng);
  }
  return v;
}

// Bitwise equal, a NaN matching any NaN (payloads are not part of the contract).
void expect_same(const Buf& got, const Buf& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t k = 0; k < got.size(); ++k) {
    if (std::isnan(got[k]) && std::isnan(want[k])) continue;
    std::uint32_t a, b;
    std::memcpy(&a, &got[k], 4);
    std::memcpy(&b, &want[k], 4);
    ASSERT_EQ(a, b) << what << ": element " << k << " is " << got[k] << ", baseline " << want[k];
  }
}

// Every function of `t` on fixed inputs (the same for every table), outputs appended to `out`
// in a fixed order, each output buffer named in `names`.
void run_table(const Table& t, std::vector<Buf>& out, std::vector<std::string>& names) {
  constexpr std::int64_t B = 3, H = 45, G = 4 * H;
  std::mt19937_64 rng(29);
  const Buf gates = inputs(rng, B * G), bias = inputs(rng, G), cs_prev = inputs(rng, B * H),
            wci = inputs(rng, H), wcf = inputs(rng, H), wco = inputs(rng, H);
  const Buf d_cs = inputs(rng, B * H), d_h = inputs(rng, B * H), carry_cs = inputs(rng, B * H),
            carry_h = inputs(rng, B * H);
  auto keep = [&](Buf b, std::string name) {
    out.push_back(std::move(b));
    names.push_back(std::move(name));
  };
  for (bool peephole : {false, true}) {
    for (bool with_bias : {false, true}) {
      for (float clip : {0.0f, 0.75f, std::nanf("")}) {
        const std::string tag = std::string("peephole ") + (peephole ? "on" : "off") + ", bias " +
                                (with_bias ? "given" : "folded") + ", clip " + std::to_string(clip);
        const cpu::LSTMFwdParams<float> fp{
            H,          LSTMLayout::kICFO, 0.5f,
            clip,       peephole,          with_bias ? bias.data() : nullptr,
            wci.data(), wcf.data(),        wco.data()};
        std::array<Buf, 7> o;
        for (Buf& b : o) b.assign(B * H, -1.0f);
        const cpu::LSTMFwdStep<float> s{gates.data(), cs_prev.data(), o[0].data(),
                                        o[1].data(),  o[2].data(),    o[3].data(),
                                        o[4].data(),  o[5].data(),    o[6].data()};
        t.lstm_fwd_rows(fp, s, 0, B, 0, H);
        // The backward on the forward's activations, with carries and without.
        const cpu::LSTMBwdParams<float> bp{H,          LSTMLayout::kICFO, peephole,
                                           wci.data(), wcf.data(),        wco.data()};
        for (bool carries : {false, true}) {
          Buf dg(B * G, -1.0f), dcsp(B * H, -1.0f);
          const cpu::LSTMBwdStep<float> bs{cs_prev.data(),
                                           o[0].data(),
                                           o[1].data(),
                                           o[2].data(),
                                           o[3].data(),
                                           o[4].data(),
                                           o[5].data(),
                                           d_cs.data(),
                                           d_h.data(),
                                           carries ? carry_cs.data() : nullptr,
                                           carries ? carry_h.data() : nullptr,
                                           dg.data(),
                                           dcsp.data()};
          t.lstm_bwd_rows(bp, bs, 0, B, 0, H);
          keep(dg, "lstm_bwd_rows d_gates, " + tag);
          keep(dcsp, "lstm_bwd_rows d_cs_prev, " + tag);
        }
        for (int k = 0; k < 7; ++k)
          keep(o[k], "lstm_fwd_rows output " + std::to_string(k) + ", " + tag);
      }
    }
  }
  // GRU rows (one row of H columns each; the gates row on n = H − 2 columns: a partial row).
  const Buf ru_bar = inputs(rng, 2 * H), b_ru = inputs(rng, 2 * H), h_prev = inputs(rng, H),
            b_c = inputs(rng, H), c_in = inputs(rng, H), d_hr = inputs(rng, H),
            g_in = inputs(rng, H), gi = inputs(rng, 3 * H), b_i = inputs(rng, 3 * H),
            gh_rz = inputs(rng, 2 * H), b_h = inputs(rng, 3 * H), hn_in = inputs(rng, H),
            carry_in = inputs(rng, H);
  Buf r(H, -1.0f), u(H, -1.0f), hr(H, -1.0f);
  t.gru_fwd_gates_row(H - 2, H, ru_bar.data(), b_ru.data(), h_prev.data(), r.data(), u.data(),
                      hr.data());
  Buf c = c_in, h(H, -1.0f);
  t.gru_fwd_candidate_row(H, b_c.data(), u.data(), h_prev.data(), c.data(), h.data());
  Buf d_c_bar(H, -1.0f), d_u_bar(H, -1.0f), d_r_bar(H, -1.0f), g = g_in;
  t.gru_bwd_cu_row(H, u.data(), c.data(), h_prev.data(), d_h.data(), d_c_bar.data(),
                   d_u_bar.data());
  t.gru_bwd_r_row(H, d_hr.data(), h_prev.data(), r.data(), d_r_bar.data());
  t.gru_bwd_h_prev_row(H, d_hr.data(), r.data(), d_h.data(), u.data(), g.data());
  Buf ra(H, -1.0f), ua(H, -1.0f), nn(H, -1.0f), hn = hn_in, ha(H, -1.0f);
  t.gru_reset_after_fwd_row(H - 2, H, gi.data(), b_i.data(), gh_rz.data(), b_h.data(),
                            h_prev.data(), ra.data(), ua.data(), nn.data(), hn.data(), ha.data());
  Buf carry = carry_in, d_gh(3 * H, -1.0f), d_n_bar(H, -1.0f);
  t.gru_reset_after_bwd_row(H - 2, H, ra.data(), ua.data(), nn.data(), hn.data(), h_prev.data(),
                            d_h.data(), carry.data(), d_gh.data(), d_n_bar.data());
  for (auto& [b, name] :
       std::vector<std::pair<Buf*, const char*>>{{&r, "gru_fwd_gates_row r"},
                                                 {&u, "gru_fwd_gates_row u"},
                                                 {&hr, "gru_fwd_gates_row hr"},
                                                 {&c, "gru_fwd_candidate_row c"},
                                                 {&h, "gru_fwd_candidate_row h"},
                                                 {&d_c_bar, "gru_bwd_cu_row d_c_bar"},
                                                 {&d_u_bar, "gru_bwd_cu_row d_u_bar"},
                                                 {&d_r_bar, "gru_bwd_r_row d_r_bar"},
                                                 {&g, "gru_bwd_h_prev_row g"},
                                                 {&ra, "gru_reset_after_fwd_row r"},
                                                 {&ua, "gru_reset_after_fwd_row u"},
                                                 {&nn, "gru_reset_after_fwd_row n"},
                                                 {&hn, "gru_reset_after_fwd_row hn"},
                                                 {&ha, "gru_reset_after_fwd_row h"},
                                                 {&carry, "gru_reset_after_bwd_row carry"},
                                                 {&d_gh, "gru_reset_after_bwd_row d_gh"},
                                                 {&d_n_bar, "gru_reset_after_bwd_row d_n_bar"}}) {
    keep(*b, name);
  }
}

TEST(PointwisePaths, EveryVectorTableGivesTheBaselineBits) {
  std::vector<Buf> want;
  std::vector<std::string> names;
  run_table(cpu::kBaselinePointwise, want, names);
  int compared = 0;
  for (auto [isa, table] : {std::pair{Isa::kAvx2, &cpu::kAvx2Pointwise},
                            std::pair{Isa::kAvx512, &cpu::kAvx512Pointwise}}) {
    if (!core::isa_supported(isa)) continue;
    std::vector<Buf> got;
    std::vector<std::string> got_names;
    run_table(*table, got, got_names);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      expect_same(got[k], want[k], std::string(isa_name(isa)) + " " + names[k]);
    }
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "this CPU has no vector path";
}

}  // namespace
}  // namespace blockrnn
