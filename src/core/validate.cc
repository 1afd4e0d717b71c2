// Validation helpers (see validate.h).
#include "core/validate.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace blockrnn::core {

void Checker::fail(const std::string& message) const {
  throw Error(ErrorCode::kInvalidArgument, std::string(op_) + ": " + message);
}

void Checker::rank(const char* name, const TensorView& t, int rank) const {
  if (t.shape.rank() != rank) {
    fail(std::string(name) + " must be rank " + std::to_string(rank) + ", got rank " +
         std::to_string(t.shape.rank()) + " (shape " + t.shape.to_string() + ")");
  }
  for (int i = 0; i < rank; ++i) {
    if (t.shape[i] < 0) {
      fail(std::string(name) + " has a negative dimension: shape " + t.shape.to_string());
    }
  }
}

void Checker::shape(const char* name, const TensorView& t, const Shape& expected,
                    const char* meaning) const {
  if (t.shape != expected) {
    fail(std::string(name) + " must have shape " + expected.to_string() + " (" + meaning +
         "), got " + t.shape.to_string());
  }
}

void Checker::input_weight(const char* name, const TensorView& w, const Shape& expected,
                           const char* meaning, const TensorView& x, std::int64_t cell_size,
                           const OtherWeight* other) const {
  if (w.shape == expected) return;
  const std::int64_t rows = w.shape[0], K = expected[0];
  const bool rows_only = w.shape.rank() == 2 && w.shape[1] == expected[1] && rows >= cell_size;
  const bool other_agrees_with_x = other != nullptr && other->view.shape[0] == K;
  if (!rows_only || other_agrees_with_x) shape(name, w, expected, meaning);
  const std::int64_t I = x.shape[x.shape.rank() - 1], I_w = rows - cell_size;
  std::int64_t dims[Shape::kMaxRank];
  for (int i = 0; i < x.shape.rank(); ++i) dims[i] = x.shape[i];
  dims[x.shape.rank() - 1] = I_w;
  const Shape x_fit = Shape::from_dims(dims, x.shape.rank());
  const bool both = other != nullptr && other->view.shape == Shape{rows, other->expected[1]};
  const std::string weights = both ? std::string(name) + " and " + other->name : name;
  std::string message = "x and " + std::string(both ? "the weights" : name) +
                        " disagree on input_size: x has input_size " + std::to_string(I) +
                        " (its last dimension), but " +
                        (both ? weights + " have " + std::to_string(rows) + " rows, which"
                              : std::string(name) + "'s " + std::to_string(rows) + " rows") +
                        " are input_size + cell_size for input_size " + std::to_string(I_w) +
                        " (cell_size " + std::to_string(cell_size) + "): either x must be " +
                        x_fit.to_string() + ", or " + name + " must have shape " +
                        expected.to_string() + " (" + meaning + "), got " + w.shape.to_string();
  if (both) message += " and " + std::string(other->name) + " " + other->expected.to_string();
  fail(message);
}

void Checker::scalar(const char* name, const TensorView& t) const {
  if (t.shape.rank() != 0) {
    fail(std::string(name) + " must be a scalar (rank 0), got shape " + t.shape.to_string());
  }
}

DType Checker::same_float_dtype(std::span<const char* const> names,
                                std::span<const TensorView> ts) const {
  const DType first = ts[0].dtype;
  for (std::size_t k = 0; k < ts.size(); ++k) {
    if (!is_floating(ts[k].dtype)) {
      fail(std::string(names[k]) + " must be float16, bfloat16, float32 or float64, got " +
           dtype_name(ts[k].dtype));
    }
    if (ts[k].dtype != first) {
      fail(std::string(names[k]) + " must have the dtype of " + names[0] + " (" +
           dtype_name(first) + "), got " + dtype_name(ts[k].dtype));
    }
  }
  return first;
}

void Checker::int64(const char* name, const TensorView& t) const {
  if (t.dtype != DType::kInt64) {
    fail(std::string(name) + " must be int64, got " + dtype_name(t.dtype));
  }
}

void Checker::storage(const char* name, const TensorView& t) const {
  std::int64_t n = 0;
  try {
    n = t.shape.num_elements();
  } catch (const Error& e) {
    throw Error(e.code(), std::string(op_) + ": " + name + ": " + e.what());
  }
  const std::size_t elem = dtype_size(t.dtype);
  if (static_cast<std::uint64_t>(n) > std::numeric_limits<std::size_t>::max() / 2 / elem) {
    throw Error(ErrorCode::kResourceExhausted, std::string(op_) + ": " + name + " of shape " +
                                                   t.shape.to_string() +
                                                   " needs more bytes than can be addressed");
  }
  if (n > 0 && t.data == nullptr) {
    fail(std::string(name) + " has " + std::to_string(n) + " elements but no data (null pointer)");
  }
}

void check_outputs(const char* op, std::span<const char* const> names, DType dtype,
                   std::span<const Shape> shapes, std::span<const MutableTensorView> outputs) {
  Checker check(op);
  if (outputs.size() != shapes.size()) {
    check.fail("expected " + std::to_string(shapes.size()) + " outputs, got " +
               std::to_string(outputs.size()));
  }
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    // The shapes were checked addressable (check_output_sizes): an output of the dtype and
    // shape with data is fine, and needs no message built.
    const MutableTensorView& o = outputs[k];
    if (o.dtype == dtype && o.shape == shapes[k] && o.data != nullptr) continue;
    const std::string name = std::string("output ") + names[k];
    if (outputs[k].dtype != dtype) {
      check.fail(name + " must be " + dtype_name(dtype) + ", got " + dtype_name(outputs[k].dtype));
    }
    if (outputs[k].shape != shapes[k]) {
      check.fail(name + " must have shape " + shapes[k].to_string() + ", got " +
                 outputs[k].shape.to_string());
    }
    check.storage(name.c_str(), outputs[k]);
  }
}

std::int64_t checked_add(const char* op, const char* what, std::int64_t a, std::int64_t b) {
  if (a > std::numeric_limits<std::int64_t>::max() - b) {
    throw Error(ErrorCode::kResourceExhausted, std::string(op) + ": " + what + " = " +
                                                   std::to_string(a) + " + " + std::to_string(b) +
                                                   " overflows int64");
  }
  return a + b;
}

std::int64_t checked_mul(const char* op, const char* what, std::int64_t a, std::int64_t b) {
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a) {
    throw Error(ErrorCode::kResourceExhausted, std::string(op) + ": " + what + " = " +
                                                   std::to_string(a) + " * " + std::to_string(b) +
                                                   " overflows int64");
  }
  return a * b;
}

void check_float32_attr(const char* op, const char* what, double v) {
  constexpr double kRoundsToInf = 0x1.ffffffp+127;  // 3.4028235677973366e+38
  if (std::isfinite(v) && std::fabs(v) >= kRoundsToInf) {
    char got[32];
    std::snprintf(got, sizeof(got), "%.17g", v);
    throw Error(ErrorCode::kInvalidArgument,
                std::string(op) + ": " + what +
                    " must round to a finite float32 (|value| < 3.4028235677973366e+38; "
                    "TensorFlow's float attrs are float32), got " +
                    got);
  }
}

}  // namespace blockrnn::core
