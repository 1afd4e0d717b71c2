// Shapes, dtypes, float16 and bfloat16 conversion and the owning Tensor.
#include "blockrnn/tensor.h"

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <new>

#include "blockrnn/error.h"
#include "core/bfloat16.h"
#include "core/enum_table.h"

namespace blockrnn {

namespace {
// Per dtype, in the enum's order.
constexpr const char* kDTypeNames[] = {"float16", "float32", "float64", "int64", "bfloat16"};
constexpr std::size_t kDTypeSizes[] = {2, 4, 8, 8, 2};
static_assert(std::size(kDTypeNames) == static_cast<std::size_t>(DType::kBFloat16) + 1);
static_assert(std::size(kDTypeSizes) == std::size(kDTypeNames));
}  // namespace

const char* dtype_name(DType dtype) noexcept {
  return core::enum_lookup(dtype, kDTypeNames, "unknown");
}

std::size_t dtype_size(DType dtype) noexcept {
  return core::enum_lookup(dtype, kDTypeSizes, std::size_t{0});
}

bool is_floating(DType dtype) noexcept {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

float half_to_float(Half h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  std::uint32_t exponent = (h.bits >> 10) & 0x1fu;
  std::uint32_t mantissa = h.bits & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {  // inf or nan
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
    bits = sign | (exponent << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

Half float_to_half(float f) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet and non-zero)
    const std::uint16_t payload = abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0;
    return Half{static_cast<std::uint16_t>(sign | 0x7c00u | payload)};
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};
  }
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) return Half{sign};  // < 2^-25 rounds to zero
    const std::uint32_t exponent = abs >> 23;
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(exponent);  // in [14, 24]
    std::uint32_t value = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (value & 1u))) ++value;
    return Half{static_cast<std::uint16_t>(sign | value)};
  }
  // Normal: rebias exponent 127 -> 15 and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t value = ((abs >> 13) - (112u << 10));
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (value & 1u))) ++value;
  return Half{static_cast<std::uint16_t>(sign | value)};
}

// The library's one bfloat16 rounding (core/bfloat16.h), out of line for the public API.
float bfloat16_to_float(BFloat16 b) noexcept {
  return core::bf16_to_float(b.bits);
}

BFloat16 float_to_bfloat16(float f) noexcept {
  return BFloat16{core::bf16_from_float(f)};
}

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
    throw Error(ErrorCode::kInvalidArgument, "Shape: rank " + std::to_string(dims.size()) +
                                                 " exceeds the maximum of " +
                                                 std::to_string(kMaxRank));
  }
  for (std::int64_t d : dims) dims_[rank_++] = d;
}

Shape Shape::from_dims(const std::int64_t* dims, int rank) {
  if (rank < 0 || rank > kMaxRank) {
    throw Error(ErrorCode::kInvalidArgument, "Shape: rank " + std::to_string(rank) +
                                                 " is outside [0, " + std::to_string(kMaxRank) +
                                                 "]");
  }
  Shape s;
  s.rank_ = rank;
  for (int i = 0; i < rank; ++i) s.dims_[i] = dims[i];
  return s;
}

std::int64_t Shape::num_elements() const {
  bool zero = false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "Shape " + to_string() + " has a negative dimension");
    }
    zero = zero || dims_[i] == 0;
  }
  if (zero) return 0;
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (__builtin_mul_overflow(n, dims_[i], &n)) {
      throw Error(ErrorCode::kResourceExhausted,
                  "Shape " + to_string() + " has more elements than can be addressed");
    }
  }
  return n;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) noexcept {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i) {
    if (a.dims_[i] != b.dims_[i]) return false;
  }
  return true;
}

void Tensor::Free::operator()(void* p) const noexcept {
  std::free(p);
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(shape) {
  num_elements_ = shape.num_elements();
  const std::size_t elem = dtype_size(dtype);
  if (static_cast<std::uint64_t>(num_elements_) >
      (std::numeric_limits<std::size_t>::max() - 64) / elem) {
    throw Error(ErrorCode::kResourceExhausted, "Tensor: " + shape.to_string() + " of " +
                                                   dtype_name(dtype) +
                                                   " needs more bytes than can be addressed");
  }
  std::size_t bytes = static_cast<std::size_t>(num_elements_) * elem;
  bytes = (bytes + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) {
    throw Error(ErrorCode::kResourceExhausted, "Tensor: cannot allocate " + std::to_string(bytes) +
                                                   " bytes for " + shape.to_string() + " " +
                                                   dtype_name(dtype));
  }
  std::memset(p, 0, bytes);
  data_.reset(p);
}

void Tensor::throw_dtype_mismatch(DType requested) const {
  throw Error(ErrorCode::kInvalidArgument, std::string("Tensor::data_as: asked for ") +
                                               dtype_name(requested) + " data, but the tensor is " +
                                               dtype_name(dtype_));
}

}  // namespace blockrnn
