// Helpers for the C++ tests: seeded random tensors, poisoned outputs, comparisons, and a
// finite-difference driver. Seeds are printed on failure (SCOPED_TRACE) so a case replays.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "blockrnn/blockrnn.h"

namespace blockrnn::testing {

inline void set(Tensor& t, std::int64_t e, double v) {
  switch (t.dtype()) {
    case DType::kFloat16:
      t.data_as<Half>()[e] = float_to_half(static_cast<float>(v));
      break;
    case DType::kBFloat16:
      t.data_as<BFloat16>()[e] = float_to_bfloat16(static_cast<float>(v));
      break;
    case DType::kFloat32:
      t.data_as<float>()[e] = static_cast<float>(v);
      break;
    case DType::kFloat64:
      t.data_as<double>()[e] = v;
      break;
    case DType::kInt64:
      t.data_as<std::int64_t>()[e] = static_cast<std::int64_t>(v);
      break;
  }
}

inline Tensor random_tensor(DType dtype, Shape shape, std::mt19937_64& rng, double lo = -1,
                            double hi = 1) {
  Tensor t(dtype, shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (std::int64_t e = 0; e < t.num_elements(); ++e) set(t, e, dist(rng));
  return t;
}

inline double get(const Tensor& t, std::int64_t e) {
  switch (t.dtype()) {
    case DType::kFloat16:
      return half_to_float(t.data_as<Half>()[e]);
    case DType::kBFloat16:
      return bfloat16_to_float(t.data_as<BFloat16>()[e]);
    case DType::kFloat32:
      return t.data_as<float>()[e];
    case DType::kFloat64:
      return t.data_as<double>()[e];
    case DType::kInt64:
      return static_cast<double>(t.data_as<std::int64_t>()[e]);
  }
  return 0;
}

// Fills with NaN so that an element an op forgets to write fails the comparison.
inline Tensor poisoned(DType dtype, Shape shape) {
  Tensor t(dtype, shape);
  for (std::int64_t e = 0; e < t.num_elements(); ++e) {
    set(t, e, std::numeric_limits<double>::quiet_NaN());
  }
  return t;
}

// poisoned() tensors of `dtype`, one per shape (the outputs of a kernel call).
inline std::vector<Tensor> poisoned_each(DType dtype, const std::vector<Shape>& shapes) {
  std::vector<Tensor> r;
  for (const Shape& s : shapes) r.push_back(poisoned(dtype, s));
  return r;
}

inline Tensor scalar_int64(std::int64_t v) {
  Tensor t(DType::kInt64, Shape{});
  t.data_as<std::int64_t>()[0] = v;
  return t;
}

// |a - b| <= atol + rtol * |b| elementwise; NaN never matches.
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol,
                                            double atol) {
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << a.shape().to_string() << " vs " << b.shape().to_string();
  }
  for (std::int64_t e = 0; e < a.num_elements(); ++e) {
    const double x = get(a, e), y = get(b, e);
    if (!(std::abs(x - y) <= atol + rtol * std::abs(y))) {
      return ::testing::AssertionFailure() << "element " << e << ": " << x << " vs " << y
                                           << " (rtol " << rtol << ", atol " << atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// True where every element from `from` on is zero (the steps past seq_len_max, say).
inline bool all_zero(const Tensor& t, std::int64_t from = 0) {
  for (std::int64_t e = from; e < t.num_elements(); ++e) {
    if (get(t, e) != 0.0) return false;
  }
  return true;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         (a.num_bytes() == 0 || std::memcmp(a.data(), b.data(), a.num_bytes()) == 0);
}

// Expects a[k] and b[k] equal bit for bit for every k (as many tensors on each side).
inline void expect_bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k)
    EXPECT_TRUE(bitwise_equal(a[k], b[k])) << "tensor " << k;
}

// Expects `f` to throw blockrnn::Error(kInvalidArgument) whose message contains `needle`.
template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected InvalidArgument containing '" << needle << "', nothing thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' lacks '" << needle << "'";
  }
}

// Central differences in float64: for every element of `param`, (L(p+ε) − L(p−ε)) / 2ε
// against the analytic `grad`. Returns the largest absolute difference and the largest
// |numeric| value (docs/tolerances.md compares the first against 1e-6 · max(1, the second)).
struct FiniteDifference {
  double max_err = 0, max_ref = 0;
  bool within(double rel) const { return max_err <= rel * std::max(1.0, max_ref); }
};
template <typename F>
FiniteDifference finite_difference(Tensor& param, const Tensor& grad, F&& loss, double eps = 1e-6) {
  FiniteDifference r;
  for (std::int64_t e = 0; e < param.num_elements(); ++e) {
    double* v = param.data_as<double>() + e;
    const double saved = *v;
    *v = saved + eps;
    const double lp = loss();
    *v = saved - eps;
    const double lm = loss();
    *v = saved;
    const double num = (lp - lm) / (2 * eps);
    r.max_err = std::max(r.max_err, std::abs(num - grad.data_as<double>()[e]));
    r.max_ref = std::max(r.max_ref, std::abs(num));
  }
  return r;
}

// Restores the reference switch on scope exit.
class ReferenceMode {
 public:
  explicit ReferenceMode(bool on) : saved_(force_reference()) { set_force_reference(on); }
  ~ReferenceMode() { set_force_reference(saved_); }

 private:
  bool saved_;
};

// Runs `f` on the fast path, then with the reference path forced (every op has both).
template <typename F>
void on_both_paths(F&& f) {
  for (bool reference : {false, true}) {
    SCOPED_TRACE(reference ? "reference path" : "fast path");
    ReferenceMode mode(reference);
    f();
  }
}

// `call` must throw Error(kCancelled) whose message starts "<op>: cancelled after" (the
// cancellation of blockrnn/context.h).
template <typename F>
void expect_cancelled(F&& call, const std::string& op) {
  try {
    call();
    ADD_FAILURE() << op << " was not cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(op + ": cancelled after", 0), 0u) << e.what();
  }
}

// What the fast path of a bfloat16 call allocates for its bfloat16 products (src/cpu/
// bf16_products.h), at most, in float32 elements, on the active path's bfloat16 kernel
// (`dp`: vdpbf16ps, operands as bfloat16 pairs; else widened to float32): two [B, k] buffers for
// the left operand of each recurrent product (2·B·k floats; k = H forward: LSTM h, GRU h and hr,
// reset-after GRU h; backward: LSTM d_gates 4H, GRU d_c_bar H and d_ru 2H, reset-after GRU d_gh
// 3H); the forward's x rounded for the input projection ([S·B, I]); the grads' gate gradients
// packed for the weight gradients (per packed [S·B, n]: panels of 64 columns of ⌈S·B/2⌉ pairs,
// or the widened copy S·B·n and its panels of S·B rows), the bfloat16 copy of
// [h_prev; h[0:S−1]] (two values a float) and one rounded left operand, the largest of the
// products after the loop. 0 for the other ops.
inline std::int64_t bf16_operand_floats(const std::string& op, std::int64_t S, std::int64_t B,
                                        std::int64_t I, std::int64_t H, bool dp) {
  const std::int64_t BH = B * H, SB = S * B, prev_h = (SB * H + 1) / 2;
  const auto panels64 = [](std::int64_t n) { return (n + 63) / 64 * 64; };
  // A rounded left operand [m, k]; a packed [SB, n].
  const auto lhs = [dp](std::int64_t m, std::int64_t k) { return dp ? m * ((k + 1) / 2) : m * k; };
  const auto packed = [&](std::int64_t n) {
    return dp ? (SB + 1) / 2 * panels64(n) : SB * n + SB * panels64(n);
  };
  std::int64_t floats = 0;
  if (op == "BlockLSTM" || op == "BlockLSTMV2" || op == "BlockGRUResetAfter") {
    floats = lhs(SB, I) + 2 * BH;
  } else if (op == "BlockGRU") {
    floats = lhs(SB, I) + 2 * 2 * BH;
  } else if (op == "BlockLSTMGrad" || op == "BlockLSTMGradV2") {
    floats =
        2 * 4 * BH + std::max({lhs(SB, 4 * H), lhs(I, SB), lhs(H, SB)}) + packed(4 * H) + prev_h;
  } else if (op == "BlockGRUGrad") {
    floats = 2 * BH + 2 * 2 * BH + std::max({lhs(SB, 2 * H), lhs(I, SB), lhs(H, SB)}) +
             packed(2 * H) + packed(H) + prev_h;
  } else if (op == "BlockGRUResetAfterGrad") {
    floats =
        2 * 3 * BH + std::max({lhs(SB, 3 * H), lhs(I, SB), lhs(H, SB)}) + packed(3 * H) + prev_h;
  }
  return floats;
}

}  // namespace blockrnn::testing
