// Helpers of the layer objects (src/layer/*.cc, blockrnn/layer.h): the per-call checks, the
// workspace a call runs on, and the dtype switch.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "blockrnn/error.h"
#include "blockrnn/layer.h"
#include "blockrnn/ops.h"

namespace blockrnn::layer {

// Errors of one entry point of one layer: "LSTMLayer.forward: x must have ...".
struct Check {
  const char* layer;
  const char* fn;
  [[noreturn]] void fail(const std::string& msg) const;
  // t has exactly `want` (described by `dims`), the dtype, and data when it has elements.
  void tensor(const char* arg, const TensorView& t, const Shape& want, const char* dims,
              DType dtype) const;
  void tensor(const char* arg, const MutableTensorView& t, const Shape& want, const char* dims,
              DType dtype) const {
    tensor(arg, TensorView(t), want, dims, dtype);
  }
};

// The per-call sizes of a sequence call: T, B from x, S, and the lengths the kernel sees.
struct CallDims {
  std::int64_t T = 0, B = 0, S = 0;
  const std::int64_t* lengths = nullptr;  // nullptr when absent or none ends before S
};

// Checks x [T, B, I] against the layer's shape (T ≤ max_time, B ≤ max_batch), seq_len_max in
// [0, T] and seq_lengths ([B] int64, each in [0, T]).
CallDims check_call(const Check& check, const LayerShape& shape, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths);

// The workspace of a call: the caller's (checked: at least `bytes`, aligned) or the layer's own.
void* call_workspace(const Check& check, const LayerShape& shape, LayerWorkspace given,
                     std::size_t bytes, Tensor& own);

// The weight views set_weights takes: shape, dtype, data; copied into an owned Tensor.
Tensor copy_weight(const Check& check, const char* arg, const TensorView& t, const Shape& want,
                   const char* dims, DType dtype);

// f.template operator()<T>() with T the layer's dtype (float or double).
template <typename F>
void with_dtype(DType dtype, F&& f) {
  if (dtype == DType::kFloat64) {
    f.template operator()<double>();
  } else {
    f.template operator()<float>();
  }
}

template <typename T>
const T* ptr(const TensorView& t) {
  return static_cast<const T*>(t.data);
}
template <typename T>
T* ptr(const MutableTensorView& t) {
  return static_cast<T*>(t.data);
}

}  // namespace blockrnn::layer
