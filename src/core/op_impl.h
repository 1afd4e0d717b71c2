// The internal op table: how an op family registers its validation and compute functions,
// and the dtype dispatch every op shares.
//
// float32 and float64 run natively. float16 (SPEC A2) is computed in float32: the half inputs
// are widened once per call, the float32 kernel runs, and each stored output is rounded to half
// once. Non-floating inputs (seq_len_max) are passed through untouched.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "blockrnn/ops.h"
#include "core/validate.h"

namespace blockrnn::core {

// Attr values in OpDef::attrs order, defaults applied.
using Attrs = std::vector<double>;

struct OpImpl {
  OpDef def;
  // Validates inputs (ranks, dims, dtypes, values) and returns the output spec.
  std::function<OutputSpec(std::span<const TensorView>, const Attrs&)> infer;
  // Computes; inputs and outputs are already validated against `infer`.
  std::function<void(std::span<const TensorView>, const Attrs&, std::span<const MutableTensorView>)>
      compute;
};

void register_op(OpImpl impl);

// Registration functions of each op family (called once, in order, by the registry).
void register_gru_ops();
void register_lstm_ops();
void register_sequence_ops();

// Typed pointer tables handed to kernels: in[k] / out[k] follow the op's input / output order;
// non-floating inputs are nullptr.
template <typename T>
struct Buffers {
  std::vector<const T*> in;
  std::vector<T*> out;
};

namespace detail {
template <typename T>
Buffers<T> native_buffers(std::span<const TensorView> inputs,
                          std::span<const MutableTensorView> outputs) {
  Buffers<T> b;
  for (const TensorView& t : inputs) {
    b.in.push_back(is_floating(t.dtype) ? static_cast<const T*>(t.data) : nullptr);
  }
  for (const MutableTensorView& t : outputs) b.out.push_back(static_cast<T*>(t.data));
  return b;
}

// Widened copies of half inputs and float32 scratch for half outputs.
struct HalfStaging {
  std::vector<std::vector<float>> in_copies, out_copies;
  Buffers<float> buffers;
  HalfStaging(std::span<const TensorView> inputs, std::span<const MutableTensorView> outputs);
  void store(std::span<const MutableTensorView> outputs) const;
};
}  // namespace detail

// Calls f.template operator()<T>(Buffers<T>&) with T = float or double, staging float16
// through float32.
template <typename F>
void dispatch_float(DType dtype, std::span<const TensorView> inputs,
                    std::span<const MutableTensorView> outputs, F&& f) {
  switch (dtype) {
    case DType::kFloat32: {
      auto b = detail::native_buffers<float>(inputs, outputs);
      f.template operator()<float>(b);
      return;
    }
    case DType::kFloat64: {
      auto b = detail::native_buffers<double>(inputs, outputs);
      f.template operator()<double>(b);
      return;
    }
    case DType::kFloat16: {
      detail::HalfStaging staging(inputs, outputs);
      f.template operator()<float>(staging.buffers);
      staging.store(outputs);
      return;
    }
    case DType::kInt64:
      break;
  }
  throw Error(ErrorCode::kInternal, "dispatch_float: not a floating dtype");
}

// Reads an int64 scalar (seq_len_max).
inline std::int64_t read_int64_scalar(const TensorView& t) {
  return *static_cast<const std::int64_t*>(t.data);
}

// seq_lengths, the sequence ops' optional per-example lengths [B] (blockrnn's extension beyond
// TensorFlow, docs/ops.md). Each phase of validation checks its part, so that the order of
// SPEC A3 holds (ranks, then dimensions, then dtypes, then values); an absent view passes.
struct SeqLengthsCheck {
  const Checker& check;
  const TensorView& t;
  bool present() const { return !is_absent_input(t); }
  void rank() const {
    if (present()) check.rank("seq_lengths", t, 1);
  }
  void shape(std::int64_t B) const {
    if (present()) check.shape("seq_lengths", t, {B}, "batch_size");
  }
  void dtype() const {
    if (present()) check.int64("seq_lengths", t);
  }
  // Every L_b in [0, T].
  void values(std::int64_t T) const {
    if (!present()) return;
    const auto* L = static_cast<const std::int64_t*>(t.data);
    for (std::int64_t b = 0; b < t.shape[0]; ++b) {
      if (L[b] < 0 || L[b] > T) {
        check.fail("seq_lengths must be between 0 and " + std::to_string(T) +
                   " (time_len of x), got seq_lengths[" + std::to_string(b) +
                   "] = " + std::to_string(L[b]));
      }
    }
  }
};

// The lengths a kernel sees: nullptr when seq_lengths is absent or no example ends before S
// (then every step runs on every example, exactly the path without lengths, bit for bit).
inline const std::int64_t* effective_lengths(const TensorView& t, std::int64_t S) {
  if (is_absent_input(t)) return nullptr;
  const auto* L = static_cast<const std::int64_t*>(t.data);
  for (std::int64_t b = 0; b < t.shape[0]; ++b) {
    if (L[b] < S) return L;
  }
  return nullptr;
}

}  // namespace blockrnn::core
