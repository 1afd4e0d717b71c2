// blockrnn/ops.h — the generic, name-based interface to every op.
//
// Each op is described by an OpDef (TensorFlow's input, attr and output names, in TensorFlow's
// order, with the op definition's attr defaults). `run_op` validates and runs any op by name;
// the Python bindings, the fuzzer and the command-line tool use this interface, while C++
// users normally call the typed functions of gru.h, lstm.h and sequence.h. This interface is a
// thin layer over those: it maps the names onto the typed functions' fields and adds nothing
// (except that it keeps TensorFlow's required inputs where the typed API has defaults).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "blockrnn/export.h"
#include "blockrnn/tensor.h"

namespace blockrnn {

enum class AttrKind { kFloat, kBool };

struct AttrDef {
  std::string name;
  AttrKind kind;
  bool has_default;
  double default_value;  // bools as 0 / 1
};

struct OpDef {
  std::string name;                  // e.g. "GRUBlockCell", or "gradients.GRUBlockCell"
  std::vector<std::string> inputs;   // TF's input names, in order
  std::vector<AttrDef> attrs;        // TF's attrs (excluding the dtype attr T)
  std::vector<std::string> outputs;  // TF's output names, in order
  // How many of the last inputs are optional (blockrnn's extensions beyond TensorFlow, e.g. the
  // sequence ops' seq_lengths). A caller may omit them (pass fewer inputs) or pass an absent
  // view (see is_absent_input); either means "not given".
  int num_optional_inputs = 0;
  // Its position in list_ops(). The overloads below that take an OpDef (find_op's or an entry
  // of list_ops()) run the op it names without looking its name up again: a binding looks an op
  // up once and calls it many times.
  std::size_t index = 0;
};

// An optional input that is given but absent: no data and rank 0 (a default TensorView).
inline bool is_absent_input(const TensorView& t) {
  return t.data == nullptr && t.shape.rank() == 0;
}

// Attr values by name; bools are 0 or 1. Missing attrs take the op's default; a missing
// required attr or an unknown name is an InvalidArgument error.
using AttrMap = std::map<std::string, double, std::less<>>;

// All ops, in a stable order.
BLOCKRNN_API const std::vector<OpDef>& list_ops();
// Throws Error(kInvalidArgument) for an unknown name.
BLOCKRNN_API const OpDef& find_op(std::string_view name);

struct OutputSpec {
  DType dtype;
  std::vector<Shape> shapes;  // one per output
};

// Validates inputs and attrs and returns the outputs' dtype and shapes.
BLOCKRNN_API OutputSpec infer_outputs(std::string_view op, std::span<const TensorView> inputs,
                                      const AttrMap& attrs = {});
// Memory a caller allocates for a call besides what the op allocates itself (e.g. contiguous
// copies of strided inputs), counted against get_memory_limit() by prepare_call.
struct ExtraBytes {
  std::string what;  // e.g. "a contiguous copy of input x"
  long long bytes;
};
// infer_outputs, plus the memory check of a call: its outputs (when `allocates_outputs`: the
// caller will allocate them for this call), its workspace (an upper bound for the path the op
// will take) and `extra` together must fit in get_memory_limit(), else Error(kResourceExhausted)
// naming the op, the largest part and the bytes. Nothing is allocated.
BLOCKRNN_API OutputSpec prepare_call(std::string_view op, std::span<const TensorView> inputs,
                                     const AttrMap& attrs, std::span<const ExtraBytes> extra = {},
                                     bool allocates_outputs = true);
// Validates, then computes into caller-owned outputs (which must match infer_outputs).
BLOCKRNN_API void run_op(std::string_view op, std::span<const TensorView> inputs,
                         const AttrMap& attrs, std::span<const MutableTensorView> outputs);
// Validates (the memory limit included), allocates the outputs and computes.
BLOCKRNN_API std::vector<Tensor> run_op(std::string_view op, std::span<const TensorView> inputs,
                                        const AttrMap& attrs = {});

// Called by the run_op below once the call is validated: returns the output views (of the
// spec's dtype and shapes) and may point `inputs` (all of the op's inputs, omitted optional ones
// absent) at copies holding the same values, e.g. dense copies of strided arrays.
using CallSetup = std::function<std::vector<MutableTensorView>(const OutputSpec& spec,
                                                               std::span<TensorView> inputs)>;
// prepare_call and run_op with one validation, for callers that allocate the outputs or copy
// inputs themselves (the Python binding, the C API): validates and checks the memory of the call
// (as prepare_call with `extra` and `allocates_outputs`), calls `setup`, then checks the outputs
// it returned as run_op does and computes. With `allocates_outputs` the outputs `setup` returns
// must be fresh allocations for this call (they are not checked for overlap with the inputs);
// otherwise they are the caller's memory and must not overlap an input or each other.
BLOCKRNN_API void run_op(std::string_view op, std::span<const TensorView> inputs,
                         const AttrMap& attrs, std::span<const ExtraBytes> extra,
                         bool allocates_outputs, const CallSetup& setup);

// The same five calls on an op already found (find_op, list_ops): no name lookup. An OpDef that
// is not one of the table's (its index and name do not match an op) is an InvalidArgument error.
BLOCKRNN_API OutputSpec infer_outputs(const OpDef& op, std::span<const TensorView> inputs,
                                      const AttrMap& attrs = {});
BLOCKRNN_API OutputSpec prepare_call(const OpDef& op, std::span<const TensorView> inputs,
                                     const AttrMap& attrs, std::span<const ExtraBytes> extra = {},
                                     bool allocates_outputs = true);
BLOCKRNN_API void run_op(const OpDef& op, std::span<const TensorView> inputs, const AttrMap& attrs,
                         std::span<const MutableTensorView> outputs);
BLOCKRNN_API std::vector<Tensor> run_op(const OpDef& op, std::span<const TensorView> inputs,
                                        const AttrMap& attrs = {});
BLOCKRNN_API void run_op(const OpDef& op, std::span<const TensorView> inputs, const AttrMap& attrs,
                         std::span<const ExtraBytes> extra, bool allocates_outputs,
                         const CallSetup& setup);

}  // namespace blockrnn
