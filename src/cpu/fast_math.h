// Branch-free float32 exp, sigmoid and tanh that compilers vectorize inside fused element-wise
// loops (no libm calls, no data-dependent branches: both sides of every case are computed and
// selected). Accuracy, measured by tests/cpp/test_fast_math.cc against libm in double over the
// whole useful range: exp ≤ 2 ulp on [−87.3, 88.37], sigmoid ≤ 3 ulp, tanh ≤ 3 ulp — the "few ulp"
// of docs/ops.md. NaN propagates; ±inf give the limits. float64 uses libm (it is for checking, not
// speed).
//
//   exp(x):     x = n·ln2 + r, |r| ≤ ln2/2;  e^r by a degree-7 Taylor polynomial (truncation
//               error < 5e-9 relative), scaled by 2^n built in the exponent bits.
//   sigmoid(x): 1 / (1 + exp(−x))
//   tanh(x):    |x| < 0.5: odd Taylor series through x^17 (error < 2e-8 relative);
//               otherwise sign(x)·(1 − 2/(exp(2|x|) + 1)).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace blockrnn::cpu {

inline float fast_exp(float x) {
  // Work on x clamped into the range where 2^n is a normal float, then select the limits:
  // +inf above the overflow threshold, 0 below the smallest normal (results there would be
  // subnormal; flushing them to zero is within 1.2e-38 absolute). Each select is written so
  // that a NaN (every comparison false) passes through as NaN.
  const float x_in = x;
  x = x > 88.37626f ? 88.37626f : x;
  x = x < -87.33654f ? -87.33654f : x;
  const float shifter = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  const float t = x * 1.44269504088896341f + shifter;
  const float n = t - shifter;
  float r = std::fma(n, -0.693145751953125f, x);  // ln2 split: hi part exact in n·hi
  r = std::fma(n, -1.428606765330187e-06f, r);
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  std::int32_t bits;
  std::memcpy(&bits, &t, sizeof bits);  // low bits of t hold n + 2^22 + 2^23 (two's compl.)
  const std::int32_t e = (bits - 0x4b400000) + 127;
  const std::int32_t scale_bits = e << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const float result = p * scale;
  const float hi = x_in > 88.72283f ? std::numeric_limits<float>::infinity() : result;
  return x_in < -87.33654f ? 0.0f : hi;
}

inline float fast_sigmoid(float x) {
  return 1.0f / (1.0f + fast_exp(-x));
}

inline float fast_tanh(float x) {
  const float ax = std::fabs(x);
  // Large branch: 1 − 2/(e^{2|x|} + 1), sign restored.
  const float big = 1.0f - 2.0f / (fast_exp(2.0f * ax) + 1.0f);
  // Small branch: x + x·z·q(z), z = x², with tanh's Taylor coefficients through x^17.
  const float z = x * x;
  float q = 6404582.0f / 10854718875.0f;
  q = std::fma(q, z, -929569.0f / 638512875.0f);
  q = std::fma(q, z, 21844.0f / 6081075.0f);
  q = std::fma(q, z, -1382.0f / 155925.0f);
  q = std::fma(q, z, 62.0f / 2835.0f);
  q = std::fma(q, z, -17.0f / 315.0f);
  q = std::fma(q, z, 2.0f / 15.0f);
  q = std::fma(q, z, -1.0f / 3.0f);
  const float small = std::fma(x * z, q, x);
  const float signed_big = std::copysign(big, x);
  // NaN: ax < 0.5 is false, so the big branch (NaN) is taken.
  return ax < 0.5f ? small : signed_big;
}

// Overloads so templated kernels can call one name for float and double.
inline float act_sigmoid(float x) {
  return fast_sigmoid(x);
}
inline float act_tanh(float x) {
  return fast_tanh(x);
}
inline double act_sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
inline double act_tanh(double x) {
  return std::tanh(x);
}

}  // namespace blockrnn::cpu
