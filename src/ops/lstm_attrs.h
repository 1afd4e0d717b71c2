// The LSTM attrs forget_bias and cell_clip in an op's dtype, shared by the cell ops
// (lstm_ops.cc) and the sequence ops (block_lstm_ops.cc), so BlockLSTM at T = 1 equals
// LSTMBlockCell in every dtype.
#pragma once

#include <cmath>
#include <limits>

#include "blockrnn/tensor.h"
#include "core/lowp.h"

namespace blockrnn::ops {

// The attrs of the LSTM grads, whose use_peephole is required (no default), as in TensorFlow.
struct PeepholeAttr {
  bool use_peephole = false;
};

// An attr in the op's dtype, as TensorFlow's kernel converts it (T(forget_bias)); float16 and
// bfloat16 round to their precision, and the kernel (which computes in float32 for them) widens
// the rounded value back exactly.
//
// Denormals: TensorFlow runs its CPU kernels with denormals flushed to zero (FTZ + DAZ), and its
// float attrs are float32, so an attr whose float32 value is subnormal acts as zero there: a
// cell_clip of 1e-39 does not clip (the kernel's cell_clip > 0 is false) and a forget_bias of
// 1e-39 adds nothing. blockrnn flushes such attrs to ±0 the same way, in every dtype. Tensor
// data is not flushed (docs/reliability.md, "Denormals").
inline double flush_subnormal_attr(double v) {
  const float f = static_cast<float>(v);
  return (f != 0.0f && std::fabs(f) < std::numeric_limits<float>::min()) ? std::copysign(0.0, v)
                                                                         : v;
}

template <typename T>
T attr_in_dtype(double v, DType dtype) {
  v = flush_subnormal_attr(v);
  if (core::is_16bit_float(dtype)) return core::round_to_dtype(dtype, static_cast<float>(v));
  return static_cast<T>(v);
}

// cell_clip in the op's dtype. TensorFlow decides whether to clip from the float attr
// (cell_clip > 0) and then clips at T(cell_clip): a positive clip below half's smallest
// subnormal clips to ±0 in float16. Clipping at float's smallest subnormal instead gives the
// same half outputs (every value it leaves rounds to ±0 when stored). bfloat16 has float32's
// exponent range: a positive clip stays positive there.
template <typename T>
T clip_in_dtype(double v, DType dtype) {
  v = flush_subnormal_attr(v);
  T c = attr_in_dtype<T>(v, dtype);
  if (dtype == DType::kFloat16 && static_cast<float>(v) > 0.0f && !(c > T(0))) {
    c = std::numeric_limits<float>::denorm_min();
  }
  return c;
}

}  // namespace blockrnn::ops
