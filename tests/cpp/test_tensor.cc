// Tensor basics: half conversion, shapes, overflow checks.
#include <cmath>
#include <cstring>
#include <limits>

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
