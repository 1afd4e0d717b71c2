// Tensor basics: float16 and bfloat16 conversion, shapes, overflow checks.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/bfloat16.h"
#include "core/lowp.h"
#include "gemm/bf16.h"
#include "test_util.h"

namespace blockrnn {
namespace {

TEST(Half, RoundTripsEveryHalfValue) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const Half h{static_cast<std::uint16_t>(bits)};
    const float f = half_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << bits;
      continue;
    }
    EXPECT_EQ(float_to_half(f).bits, bits) << "bits " << bits << " value " << f;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 2048)), 1.0f);  // tie -> even (1.0)
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_EQ(half_to_float(float_to_half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(65520.0f))));
  EXPECT_EQ(half_to_float(float_to_half(65519.0f)), 65504.0f);
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(float_to_half(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_EQ(half_to_float(float_to_half(-0.0f)), 0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(float_to_half(-0.0f))));
}

float float_of_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The value of the float32 bit pattern `bits` (sign dropped) in double, continued past the
// largest finite float: exponent field 255 with a zero significand reads as 2^128, the next step
// of the binade below, which is what rounding compares against before it overflows to infinity.
double magnitude_of_bits(std::uint32_t bits) {
  const int exponent = static_cast<int>((bits >> 23) & 0xffu);
  const double significand = static_cast<double>(bits & 0x7fffffu);
  if (exponent == 0) return std::ldexp(significand, -149);
  return std::ldexp(1.0 + significand / 8388608.0, exponent - 127);
}

// float_to_bfloat16 by another route: the two bfloat16 neighbours of |f| compared in double,
// ties to the one whose last significand bit is even.
std::uint16_t bfloat16_bits_by_comparison(std::uint32_t x) {
  const std::uint32_t sign = x & 0x80000000u, abs = x & 0x7fffffffu;
  const std::uint32_t below = abs & 0xffff0000u, above = below + 0x10000u;
  const double v = magnitude_of_bits(abs);
  const double down = v - magnitude_of_bits(below), up = magnitude_of_bits(above) - v;
  const bool even_below = ((below >> 16) & 1u) == 0;
  const std::uint32_t pick = down < up || (down == up && even_below) ? below : above;
  return static_cast<std::uint16_t>((sign | pick) >> 16);
}

TEST(BFloat16, RoundTripsEveryBFloat16Value) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const BFloat16 b{static_cast<std::uint16_t>(bits)};
    const float f = bfloat16_to_float(b);
    std::uint32_t widened;
    std::memcpy(&widened, &f, sizeof widened);
    EXPECT_EQ(widened, bits << 16) << bits;  // the upper half of a binary32, exactly
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(f)))) << bits;
      continue;
    }
    EXPECT_EQ(float_to_bfloat16(f).bits, bits) << "bits " << bits << " value " << f;
  }
}

// Every finite float32 whose dropped 16 bits are a tie, just below one or just above one, and a
// spread of others, against rounding by comparison in double.
TEST(BFloat16, RoundsToNearestEvenLikeAComparisonInDouble) {
  int checked = 0;
  for (std::uint32_t upper = 0; upper < 0x10000u; ++upper) {
    if ((upper & 0x7f80u) == 0x7f80u) continue;  // infinity and NaN: tested below
    for (std::uint32_t lower :
         {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, (upper * 40503u) & 0xffffu}) {
      const std::uint32_t x = (upper << 16) | lower;
      ASSERT_EQ(float_to_bfloat16(float_of_bits(x)).bits, bfloat16_bits_by_comparison(x))
          << std::hex << "float bits 0x" << x;
      ++checked;
    }
  }
  EXPECT_GT(checked, 7 * 65000);
}

TEST(BFloat16, SpecialValues) {
  const auto round = [](float f) { return bfloat16_to_float(float_to_bfloat16(f)); };
  EXPECT_EQ(round(1.0f + 1.0f / 256), 1.0f);                             // tie -> even (1.0)
  EXPECT_EQ(round(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);                // tie -> even (1 + 2^-6)
  EXPECT_EQ(round(1.0f + 1.0f / 256 + 1.0f / 4096), 1.0f + 2.0f / 256);  // above the tie
  const float max_bf16 = bfloat16_to_float(BFloat16{0x7f7fu});
  EXPECT_EQ(round(max_bf16), max_bf16);
  EXPECT_TRUE(std::isinf(round(std::numeric_limits<float>::max())));  // rounds past the largest
  EXPECT_TRUE(std::isinf(round(std::numeric_limits<float>::infinity())));
  EXPECT_EQ(round(-std::numeric_limits<float>::infinity()),
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(round(std::numeric_limits<float>::denorm_min()), 0.0f);  // 2^-149 < half of 2^-133
  EXPECT_EQ(round(std::ldexp(1.0f, -133)), std::ldexp(1.0f, -133));  // bfloat16's own subnormal
  EXPECT_EQ(round(-0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(round(-0.0f)));
  // NaN stays NaN, with its sign, also when its payload is only in the dropped bits (a naive
  // truncation would make infinity of 0x7f800001).
  for (std::uint32_t nan : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu, 0xffffffffu}) {
    const float r = round(float_of_bits(nan));
    EXPECT_TRUE(std::isnan(r)) << std::hex << nan;
    EXPECT_EQ(std::signbit(r), (nan >> 31) != 0) << std::hex << nan;
  }
}

// The library has one bfloat16 rounding (core/bfloat16.h): the public float_to_bfloat16, the
// ops' array conversions (core/lowp.h: narrow_from_float, widen_to_float, round_to_dtype) and
// the GEMM's operand rounding (gemm::bf16_from_float) give the same bits on every tie, both
// neighbours of every tie, NaNs (payload only in the dropped bits too), infinities, the largest
// finite values, subnormals and zeros, and the rounding is the comparison in double above.
TEST(BFloat16, EveryConversionIsTheOneRounding) {
  std::vector<float> in;
  for (std::uint32_t upper = 0; upper < 0x10000u; ++upper) {
    for (std::uint32_t lower : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      in.push_back(float_of_bits((upper << 16) | lower));
    }
  }
  std::vector<BFloat16> narrowed(in.size());
  core::narrow_from_float(DType::kBFloat16, in.data(), narrowed.data(),
                          static_cast<std::int64_t>(in.size()));
  std::vector<float> widened(in.size());
  core::widen_to_float(DType::kBFloat16, narrowed.data(), widened.data(),
                       static_cast<std::int64_t>(in.size()));
  for (std::size_t e = 0; e < in.size(); ++e) {
    std::uint32_t x;
    std::memcpy(&x, &in[e], sizeof x);
    const std::uint16_t want = float_to_bfloat16(in[e]).bits;
    ASSERT_EQ(core::bf16_from_float(in[e]), want) << std::hex << x;
    ASSERT_EQ(gemm::bf16_from_float(in[e]), want) << std::hex << x;
    ASSERT_EQ(narrowed[e].bits, want) << std::hex << x;
    if ((x & 0x7fffffffu) <= 0x7f800000u) {
      ASSERT_EQ(want, bfloat16_bits_by_comparison(x)) << std::hex << x;
    } else {  // NaN: quiet, same sign, upper payload kept
      ASSERT_EQ(want, static_cast<std::uint16_t>((x >> 16) | 0x0040u)) << std::hex << x;
    }
    const float back = bfloat16_to_float(BFloat16{want});
    ASSERT_EQ(std::memcmp(&widened[e], &back, sizeof back), 0) << std::hex << x;
    const float r = core::round_to_dtype(DType::kBFloat16, in[e]);
    ASSERT_EQ(std::memcmp(&r, &back, sizeof r), 0) << std::hex << x;
    const float g = gemm::bf16_round(in[e]);
    ASSERT_EQ(std::memcmp(&g, &back, sizeof g), 0) << std::hex << x;
  }
}

TEST(DType, NamesAndSizes) {
  EXPECT_STREQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_TRUE(is_floating(DType::kBFloat16));
  EXPECT_EQ(dtype_of<BFloat16>(), DType::kBFloat16);
  EXPECT_STREQ(dtype_name(DType::kFloat16), "float16");
  EXPECT_EQ(dtype_size(DType::kFloat16), 2u);
  EXPECT_FALSE(is_floating(DType::kInt64));
}

TEST(Shape, BasicsAndOverflow) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.to_string(), "[2, 3, 4]");
  EXPECT_EQ(Shape{}.num_elements(), 1);
  EXPECT_EQ((Shape{5, 0, 7}).num_elements(), 0);
  const std::int64_t big = std::int64_t{1} << 40;
  try {
    (void)Shape{big, big}.num_elements();
    ADD_FAILURE() << "overflow not detected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  }
  const std::int64_t dims[9] = {};
  EXPECT_THROW(Shape::from_dims(dims, 9), Error);
}

// A size computed from dimensions (here I + H, the rows of w_ru) that overflows int64 is refused
// naming the op, the quantity and both operands; empty tensors make such dimensions cheap.
TEST(Shape, DerivedSizeOverflowNamesTheQuantity) {
  const std::int64_t big = std::int64_t{1} << 62;
  const float* none = nullptr;
  const TensorView x(none, Shape{0, big}), h_prev(none, Shape{0, big});
  const TensorView w(none, Shape{0, 0}), b(none, Shape{0});
  const TensorView inputs[] = {x, h_prev, w, w, b, b};
  try {
    (void)infer_outputs("GRUBlockCell", inputs, {});
    ADD_FAILURE() << "overflow not detected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find(
                  "GRUBlockCell: input_size + cell_size (rows of w_ru) = " + std::to_string(big) +
                  " + " + std::to_string(big) + " overflows int64"),
              std::string::npos)
        << e.what();
  }
}

TEST(Tensor, RefusesUnaddressableSizes) {
  const std::int64_t big = std::int64_t{1} << 61;
  EXPECT_THROW(Tensor(DType::kFloat64, Shape{big}), Error);
}

// data_as<T> checks T against the tensor's dtype: reading float32 storage as double
// would read past the end.
TEST(Tensor, DataAsChecksTheDtype) {
  Tensor f(DType::kFloat32, Shape{3});
  EXPECT_EQ(f.data_as<float>(), f.data());
  const Tensor& cf = f;
  EXPECT_EQ(cf.data_as<float>(), cf.data());
  testing::expect_invalid([&] { (void)f.data_as<double>(); },
                          "Tensor::data_as: asked for float64 data, but the tensor is float32");
  testing::expect_invalid([&] { (void)cf.data_as<Half>(); }, "asked for float16 data");
  testing::expect_invalid([&] { (void)cf.data_as<std::int64_t>(); }, "asked for int64 data");
  Tensor h(DType::kFloat16, Shape{2});
  EXPECT_EQ(h.data_as<Half>(), h.data());
  testing::expect_invalid([&] { (void)h.data_as<float>(); },
                          "asked for float32 data, but the tensor is float16");
  Tensor bf(DType::kBFloat16, Shape{2});
  EXPECT_EQ(bf.data_as<BFloat16>(), bf.data());
  EXPECT_EQ(bf.num_bytes(), 4u);
  testing::expect_invalid([&] { (void)bf.data_as<Half>(); },
                          "asked for float16 data, but the tensor is bfloat16");
  testing::expect_invalid([&] { (void)h.data_as<BFloat16>(); }, "asked for bfloat16 data");
  Tensor i(DType::kInt64, Shape{});
  EXPECT_EQ(i.data_as<std::int64_t>(), i.data());
  EXPECT_EQ(Tensor(DType::kFloat64, Shape{0}).data_as<double>() != nullptr, true);
}

TEST(Ops, UnknownOpAndAttrs) {
  testing::expect_invalid([] { find_op("NoSuchOp"); }, "unknown op 'NoSuchOp'");
  testing::expect_invalid([] { run_op("GRUBlockCell", {}, {}); }, "expected 6 inputs, got 0");
}

TEST(Context, Threads) {
  const int saved = get_num_threads();
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  set_num_threads(saved);
  // The maximum: 4 x the cores, at least 16, at most kMaxThreads.
  EXPECT_GE(max_threads(), 16);
  EXPECT_LE(max_threads(), kMaxThreads);
  const std::string range = "must be in [1, " + std::to_string(max_threads()) + "]";
  testing::expect_invalid([] { set_num_threads(0); }, range + ", got 0");
  testing::expect_invalid([] { set_num_threads(max_threads() + 1); },
                          "got " + std::to_string(max_threads() + 1));
  set_num_threads(max_threads());
  EXPECT_EQ(get_num_threads(), max_threads());
  set_num_threads(saved);
}

}  // namespace
}  // namespace blockrnn
