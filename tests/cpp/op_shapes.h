// The shape of any op input from its TensorFlow name, for consistent (T, B, I, H) problems.
// Shared by the generic test suites (op_inputs.h), the fuzzer and the benchmarks. No GoogleTest.
#pragma once

#include <cstdint>
#include <string>

#include "blockrnn/tensor.h"

namespace blockrnn::testing {

inline bool is_sequence_op(const std::string& op) {
  return op.rfind("Block", 0) == 0;
}

inline Shape input_shape(const std::string& op, const std::string& name, std::int64_t T,
                         std::int64_t B, std::int64_t I, std::int64_t H) {
  const bool seq = is_sequence_op(op);
  const std::int64_t K = I + H;
  if (name == "seq_len_max") return Shape{};
  if (name == "seq_lengths") return Shape{B};  // the sequence ops' optional lengths (int64)
  if (name == "x") return seq ? Shape{T, B, I} : Shape{B, I};
  if (name == "cs_prev" || name == "h_prev") return Shape{B, H};
  if (name == "w") return Shape{K, 4 * H};
  if (name == "w_ru") return Shape{K, 2 * H};
  if (name == "w_c") return Shape{K, H};
  if (name == "wci" || name == "wcf" || name == "wco" || name == "b_c") return Shape{H};
  if (name == "b") return Shape{4 * H};
  if (name == "b_ru") return Shape{2 * H};
  if (name == "w_i") return Shape{I, 3 * H};  // BlockGRUResetAfter(Grad)
  if (name == "w_h") return Shape{H, 3 * H};
  if (name == "b_i" || name == "b_h") return Shape{3 * H};
  return seq ? Shape{T, B, H} : Shape{B, H};  // gates, states and their gradients
}

}  // namespace blockrnn::testing
