// Helpers of the layer objects (src/layer/*.cc, blockrnn/layer.h): the per-call checks, the
// workspace a call runs on, and the dtype switch.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/layer.h"
#include "blockrnn/ops.h"
#include "ops/op_impl.h"

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
  // tensor() on each of several arguments of one shape, in order.
  struct Arg {
    const char* name;
    TensorView view;
  };
  void tensors(std::span<const Arg> args, const Shape& want, const char* dims, DType dtype) const {
    for (const Arg& a : args) tensor(a.name, a.view, want, dims, dtype);
  }
};

// The per-call sizes of a sequence call: T, B from x, S, and the lengths the kernel sees.
struct CallDims {
  std::int64_t T = 0, B = 0, S = 0;
  const std::int64_t* lengths = nullptr;  // nullptr when absent or none ends before S
  void* workspace = nullptr;              // the call's (begin_call)
};

// Checks x [T, B, I] against the layer's shape (T ≤ max_time, B ≤ max_batch), seq_len_max in
// [0, T] and seq_lengths ([B] int64, each in [0, T]).
CallDims check_call(const Check& check, const LayerShape& shape, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths);

// The checks every forward and backward starts with: weights set, check_call, and the call's
// workspace (call_workspace) in CallDims::workspace.
CallDims begin_call(const Check& check, const SequenceLayer& layer, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths,
                    LayerWorkspace given, Tensor& own);
// The same on a call's inputs (every layer's have x, seq_len_max and seq_lengths).
template <typename In>
CallDims begin_call(const Check& check, const SequenceLayer& layer, const In& in,
                    LayerWorkspace given, Tensor& own) {
  return begin_call(check, layer, in.x, in.seq_len_max, in.seq_lengths, given, own);
}

// The plan of each dtype of a layer (LSTMPlan, GRUPlan, GRUResetAfterPlan).
template <template <typename> class Plan>
struct Plans {
  Plan<float> f;
  Plan<double> d;
  template <typename T>
  Plan<T>& get() {
    if constexpr (std::is_same_v<T, float>) {
      return f;
    } else {
      return d;
    }
  }
};

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

// Packs the plan of the layer's dtype from the weights its Impl holds (set_weights).
template <typename Impl>
void pack_plan(Impl& impl, const LayerShape& shape) {
  with_dtype(shape.dtype, [&]<typename T>() { impl.pack(impl.plans.template get<T>(), shape); });
}

// Typed data of a view: the ops' own accessor.
using core::data;

}  // namespace blockrnn::layer
