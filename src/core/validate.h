// Validation helpers shared by every op (docs/design.md): ranks first, then dimensions, then
// dtypes, then values. Each failure throws Error(kInvalidArgument) with a message naming the op,
// the argument, what was expected and what was given.
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
  // A weight whose rows are input_size + cell_size, where input_size is x's last dimension
  // (TensorFlow takes it from x): shape()'s check of w against `expected`, except that when w
  // has the expected columns and R ≥ cell_size rows, R ≠ input_size + cell_size, x and w
  // disagree on input_size and either may be the wrong one. The message then names both, x
  // first (it is where input_size comes from):
  //   "<op>: x and w disagree on input_size: x has input_size 3 (its last dimension), but w's 18
  //   rows are input_size + cell_size for input_size 2 (cell_size 16): either x must be [4, 2],
  //   or w must have shape [19, 64] (input_size + cell_size, 4 * cell_size), got [18, 64]"
  // `other` is the op's other weight of input_size + cell_size rows, if any (GRU's w_c, with
  // its expected shape): when its rows agree with x, w alone is wrong (shape()'s message); when
  // they agree with w, both weights are named ("w_ru and w_c have 18 rows").
  struct OtherWeight {
    const char* name;
    const TensorView& view;
    Shape expected;
  };
  void input_weight(const char* name, const TensorView& w, const Shape& expected,
                    const char* meaning, const TensorView& x, std::int64_t cell_size,
                    const OtherWeight* other = nullptr) const;
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
// a + b and a * b for sizes; an overflow is kResourceExhausted naming the op and `what`, the
// quantity in the op's terms (e.g. "input_size + cell_size"), with both operands.
std::int64_t checked_add(const char* op, const char* what, std::int64_t a, std::int64_t b);
std::int64_t checked_mul(const char* op, const char* what, std::int64_t a, std::int64_t b);

// A float attr, which TensorFlow keeps as float32 (its Python layer turns a finite value too
// large for float32 into inf): NaN and ±inf keep their meaning; a finite value must round to a
// finite float32, |v| < 0x1.ffffffp+127 (float32's largest plus half its last step), so
// 3.4028235e+38, float32's largest as numpy prints it, is accepted. Else throws
// Error(kInvalidArgument): "<op>: <what> must round to a finite float32 (|value| <
// 3.4028235677973366e+38; TensorFlow's float attrs are float32), got 1e+39".
void check_float32_attr(const char* op, const char* what, double v);

}  // namespace blockrnn::core
