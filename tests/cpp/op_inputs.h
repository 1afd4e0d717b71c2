// Consistent random inputs for any op, built from TensorFlow's input names (see
// tests/python/opinputs.py for the Python twin), for suites that cover every op.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "op_shapes.h"
#include "test_util.h"

namespace blockrnn::testing {

struct OpCall {
  std::string op;
  std::vector<Tensor> inputs;
  AttrMap attrs;
  std::vector<TensorView> views() const { return {inputs.begin(), inputs.end()}; }
};

inline OpCall make_call(const OpDef& def, std::mt19937_64& rng, std::int64_t T, std::int64_t B,
                        std::int64_t I, std::int64_t H, DType dtype = DType::kFloat32) {
  OpCall c{def.name, {}, {}};
  // The optional trailing inputs (seq_lengths) are omitted: the op's TensorFlow behaviour.
  const std::size_t required = def.inputs.size() - std::size_t(def.num_optional_inputs);
  for (std::size_t k = 0; k < required; ++k) {
    const std::string& name = def.inputs[k];
    if (name == "seq_len_max") {
      c.inputs.push_back(scalar_int64(T));
    } else {
      c.inputs.push_back(random_tensor(dtype, input_shape(def.name, name, T, B, I, H), rng));
    }
  }
  for (const AttrDef& a : def.attrs) {
    if (!a.has_default) c.attrs[a.name] = 0;  // use_peephole on the grads
  }
  return c;
}

}  // namespace blockrnn::testing
