// blockrnn/tensor.h — dtypes, shapes and the tensor views every op takes.
//
// Views are non-owning and describe dense row-major (C-order) memory: the last dimension is
// contiguous. The caller owns all memory. `Tensor` is a small owning convenience for callers
// that want the library to allocate (the allocating overloads of each op return Tensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "blockrnn/export.h"

namespace blockrnn {

// The values are stable (the C ABI's blockrnn_dtype has the same ones): a new dtype is appended.
enum class DType : std::uint8_t { kFloat16, kFloat32, kFloat64, kInt64, kBFloat16 };

BLOCKRNN_API const char* dtype_name(DType dtype) noexcept;  // "float16", "bfloat16", ...
BLOCKRNN_API std::size_t dtype_size(DType dtype) noexcept;  // bytes per element
BLOCKRNN_API bool is_floating(DType dtype) noexcept;

// IEEE binary16 storage type. Arithmetic is never done on it: kernels widen to float32.
struct Half {
  std::uint16_t bits;
};
BLOCKRNN_API float half_to_float(Half h) noexcept;
BLOCKRNN_API Half float_to_half(float f) noexcept;  // round to nearest, ties to even

// bfloat16 storage type: the upper 16 bits of an IEEE binary32 (float32's 8-bit exponent, an
// 8-bit significand). Arithmetic is never done on it either: kernels widen to float32.
struct BFloat16 {
  std::uint16_t bits;
};
BLOCKRNN_API float bfloat16_to_float(BFloat16 b) noexcept;  // exact
// Round to nearest, ties to even; values past the largest finite bfloat16 round to ±infinity,
// and a NaN stays a (quiet) NaN of the same sign.
BLOCKRNN_API BFloat16 float_to_bfloat16(float f) noexcept;

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<Half>() {
  return DType::kFloat16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBFloat16;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::kInt64;
}

// A shape of rank 0..kMaxRank. Dimensions are signed so that negative values coming from
// untrusted callers can be reported instead of wrapping around.
class BLOCKRNN_API Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  // Throws Error(kInvalidArgument) when rank > kMaxRank or rank < 0.
  static Shape from_dims(const std::int64_t* dims, int rank);

  int rank() const noexcept { return rank_; }
  std::int64_t dim(int i) const noexcept { return dims_[i]; }
  std::int64_t operator[](int i) const noexcept { return dims_[i]; }
  const std::int64_t* dims() const noexcept { return dims_; }
  // Product of the dimensions; throws Error(kResourceExhausted) on overflow and
  // Error(kInvalidArgument) on a negative dimension.
  std::int64_t num_elements() const;
  std::string to_string() const;  // "[4, 16]"

  friend BLOCKRNN_API bool operator==(const Shape& a, const Shape& b) noexcept;
  friend bool operator!=(const Shape& a, const Shape& b) noexcept { return !(a == b); }

 private:
  int rank_ = 0;
  std::int64_t dims_[kMaxRank] = {};
};

// Read-only view of a dense row-major tensor.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;

  TensorView() = default;
  TensorView(const void* d, DType t, Shape s) : data(d), dtype(t), shape(s) {}
  template <typename T>
  TensorView(const T* d, Shape s) : data(d), dtype(dtype_of<T>()), shape(s) {}
};

// Writable view of a dense row-major tensor.
struct MutableTensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;

  MutableTensorView() = default;
  MutableTensorView(void* d, DType t, Shape s) : data(d), dtype(t), shape(s) {}
  template <typename T>
  MutableTensorView(T* d, Shape s) : data(d), dtype(dtype_of<T>()), shape(s) {}
  operator TensorView() const { return TensorView(data, dtype, shape); }  // NOLINT
};

// Owning dense tensor, 64-byte aligned, zero-initialised.
class BLOCKRNN_API Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  std::int64_t num_elements() const noexcept { return num_elements_; }
  std::size_t num_bytes() const noexcept { return num_elements_ * dtype_size(dtype_); }
  void* data() noexcept { return data_.get(); }
  const void* data() const noexcept { return data_.get(); }
  // The data as T* (T: Half, BFloat16, float, double or std::int64_t, as dtype_of). T must
  // match dtype(): anything else throws Error(kInvalidArgument) naming both dtypes.
  template <typename T>
  T* data_as() {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    check_dtype(dtype_of<T>());
    return static_cast<const T*>(data());
  }

  TensorView view() const { return TensorView(data(), dtype_, shape_); }
  MutableTensorView mutable_view() { return MutableTensorView(data(), dtype_, shape_); }
  operator TensorView() const { return view(); }  // NOLINT

 private:
  void check_dtype(DType requested) const {
    if (requested != dtype_) throw_dtype_mismatch(requested);
  }
  [[noreturn]] void throw_dtype_mismatch(DType requested) const;

  struct Free {
    void operator()(void* p) const noexcept;
  };
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::int64_t num_elements_ = 0;
  std::unique_ptr<void, Free> data_;
};

}  // namespace blockrnn
