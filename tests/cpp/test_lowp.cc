// The float16 array conversions (core/lowp.h): the F16C loops (lowp_avx2.cc) give the scalar
// half_to_float / float_to_half bits for every half, for every class of float (each exponent
// and upper mantissa with the rounding bits at and around the halfway point, NaNs quiet and
// signalling), also with the host's flush-to-zero and denormals-are-zero modes on; and the
// array functions every op stages through give those bits on every path, at any thread count
// and length (vector body and scalar tail).
#include <gtest/gtest.h>
#include <pmmintrin.h>
#include <xmmintrin.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "blockrnn/context.h"
#include "core/isa.h"
#include "core/lowp.h"
#include "core/lowp_f16c.h"

namespace blockrnn {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

float float_of(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::vector<Half> every_half() {
  std::vector<Half> h(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) h[i].bits = static_cast<std::uint16_t>(i);
  return h;
}

// Every sign, exponent and upper 10 mantissa bits, with the 13 bits float_to_half rounds away
// at and around the halfway point (0x1000) and at the ends: 3.7 million floats, every NaN
// pattern class and the subnormal-half range included.
std::vector<float> every_float_class() {
  const std::uint32_t low[] = {0x0, 0x1, 0x7ff, 0xfff, 0x1000, 0x1001, 0x1fff};
  std::vector<float> out;
  out.reserve(2u * 256u * 1024u * 7u);
  for (std::uint32_t upper = 0; upper < (1u << 19); ++upper) {
    for (std::uint32_t l : low) out.push_back(float_of((upper << 13) | l));
  }
  return out;
}

// Sets the host's flush-to-zero and denormals-are-zero modes for its lifetime, then restores
// the MXCSR it found.
struct FlushDenormals {
  unsigned saved = _mm_getcsr();
  FlushDenormals() {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  }
  ~FlushDenormals() { _mm_setcsr(saved); }
};

// Mismatches of the F16C loops against the scalar conversions over every half and every
// float class (the first few described in `first`).
long f16c_mismatches(std::string& first) {
  long bad = 0;
  const auto note = [&](const std::string& what) {
    if (bad++ < 5) first += what + "\n";
  };
  const std::vector<Half> halves = every_half();
  std::vector<float> widened(halves.size());
  core::widen_half_f16c(halves.data(), widened.data(), std::int64_t(halves.size()));
  for (std::size_t i = 0; i < halves.size(); ++i) {
    if (bits_of(widened[i]) != bits_of(half_to_float(halves[i]))) {
      note("widen " + std::to_string(i));
    }
  }
  const std::vector<float> floats = every_float_class();
  std::vector<Half> narrowed(floats.size());
  core::narrow_half_f16c(floats.data(), narrowed.data(), std::int64_t(floats.size()));
  for (std::size_t i = 0; i < floats.size(); ++i) {
    if (narrowed[i].bits != float_to_half(floats[i]).bits) {
      note("narrow " + std::to_string(bits_of(floats[i])));
    }
  }
  return bad;
}

TEST(HalfArrays, F16cGivesTheScalarBits) {
  if (!core::cpu_has_f16c()) GTEST_SKIP() << "this CPU has no F16C";
  std::string first;
  EXPECT_EQ(f16c_mismatches(first), 0) << first;
}

TEST(HalfArrays, F16cGivesTheScalarBitsWithDenormalsFlushed) {
  if (!core::cpu_has_f16c()) GTEST_SKIP() << "this CPU has no F16C";
  const FlushDenormals flush;
  std::string first;
  EXPECT_EQ(f16c_mismatches(first), 0) << first;
}

TEST(HalfArrays, EveryPathAndThreadCountConvertsAlike) {
  const int threads = get_num_threads();
  const std::vector<Half> halves = every_half();
  std::vector<float> floats = every_float_class();
  floats.resize(200003);  // an odd length: each thread's share ends in a scalar tail
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline}) {
    if (!core::isa_supported(isa)) continue;
    set_isa(isa_name(isa));
    EXPECT_EQ(core::has_f16c_conversions(), isa != Isa::kBaseline && core::cpu_has_f16c());
    for (int t : {1, 3}) {
      set_num_threads(t);
      std::vector<float> widened(halves.size() - 1);  // 65535: odd
      core::widen_to_float(DType::kFloat16, halves.data(), widened.data(),
                           std::int64_t(widened.size()));
      for (std::size_t i = 0; i < widened.size(); ++i) {
        ASSERT_EQ(bits_of(widened[i]), bits_of(half_to_float(halves[i])))
            << isa_name(isa) << " threads " << t << " half " << i;
      }
      std::vector<Half> narrowed(floats.size());
      core::narrow_from_float(DType::kFloat16, floats.data(), narrowed.data(),
                              std::int64_t(floats.size()));
      for (std::size_t i = 0; i < floats.size(); ++i) {
        ASSERT_EQ(narrowed[i].bits, float_to_half(floats[i]).bits)
            << isa_name(isa) << " threads " << t << " float bits " << bits_of(floats[i]);
      }
    }
  }
  set_isa("");
  set_num_threads(threads);
}

}  // namespace
}  // namespace blockrnn
