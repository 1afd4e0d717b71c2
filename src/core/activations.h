// Scalar activations used by the reference kernels and the scalar fallback of the fast path.
// Accurate to a few ulp (libm exp/tanh), which docs/ops.md asks for instead of Eigen's
// approximations.
#pragma once

#include <cmath>

namespace blockrnn::core {

template <typename T>
inline T sigmoid(T z) {
  return T(1) / (T(1) + std::exp(-z));
}

template <typename T>
inline T tanh_act(T z) {
  return std::tanh(z);
}

}  // namespace blockrnn::core
