// Validation helpers shared by every op (SPEC A3): ranks first, then dimensions, then dtypes,
// then values. Each failure throws Error(kInvalidArgument) with a message naming the op, the
// argument, what was expected and what was given.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "blockrnn/error.h"
#include "blockrnn/tensor.h"

namespace blockrnn::core {

class Checker {
 public:
  explicit Checker(const char* op) : op_(op) {}

  [[noreturn]] void fail(const std::string& message) const;

  // "<op>: <name> must be rank <rank>, got rank <r> (shape [...])"
  void rank(const char* name, const TensorView& t, int rank) const;
  // "<op>: <name> must have shape [..] (<meaning>), got [..]"
  void shape(const char* name, const TensorView& t, const Shape& expected,
             const char* meaning) const;
  // "<op>: <name> must be a scalar (rank 0), got shape [..]"
  void scalar(const char* name, const TensorView& t) const;
  // Every view in `ts` must be floating and share the dtype of the first; returns it.
  DType same_float_dtype(std::span<const char* const> names, std::span<const TensorView> ts) const;
  // "<name> must be int64" for integer scalars such as seq_len_max.
  void int64(const char* name, const TensorView& t) const;
  // Non-null data whenever the tensor has elements; element/byte counts must be addressable.
  void storage(const char* name, const TensorView& t) const;

  const char* op() const { return op_; }

 private:
  const char* op_;
};

// Checks the caller's output views against the inferred spec (dtype, shape, storage).
void check_outputs(const char* op, std::span<const char* const> names, DType dtype,
                   std::span<const Shape> shapes, std::span<const MutableTensorView> outputs);

// a + b and a * b on dimensions with overflow checks (throws kResourceExhausted).
std::int64_t checked_add(const char* op, std::int64_t a, std::int64_t b);
std::int64_t checked_mul(const char* op, std::int64_t a, std::int64_t b);

}  // namespace blockrnn::core
