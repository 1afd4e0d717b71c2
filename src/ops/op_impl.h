// How an op is put together. An op is its typed function: a struct of named inputs, one of
// named outputs and one of attrs (blockrnn/{lstm,gru,sequence}.h), a validation of those named
// fields, and a compute that fills the kernel's argument struct from them. TypedOp runs the steps
// every op shares around those two (storage, output checks, aliasing, the memory limit, empty
// work, the thread team). Its tables give each field TensorFlow's name, in TensorFlow's order:
// the typed path uses the names in messages, and the name-based run_op of ops.h is the thin
// Adapter below, which maps the names onto the fields and calls the typed op.
//
// float32 and float64 run natively. float16 (docs/design.md) is computed in float32: the half
// inputs are widened once per call, the float32 kernel runs, and each stored output is rounded to
// half once (dispatch_float). Non-floating inputs (seq_len_max, seq_lengths) are passed untouched.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/ops.h"
#include "core/first_touch.h"
#include "core/lowp.h"
#include "core/validate.h"

namespace blockrnn::core {

// The most inputs and outputs of an op (BlockLSTMGrad: 18 and seq_lengths; 8), the size of the
// per-call arrays of names and views; register_adapter checks every op against them.
constexpr std::size_t kMaxInputs = 20;
constexpr std::size_t kMaxOutputs = 8;

enum class InputKind : std::uint8_t {
  kFloat,     // floating; every floating input of an op has the same dtype
  kInt64,     // seq_len_max, TensorFlow's int64 scalar
  kOptional,  // seq_lengths, blockrnn's optional trailing int64 input (absent: not given)
};

// A row of an op's table of inputs, e.g. {"x", &In::x}, or of outputs, e.g.
// {"h", &Out::h, &Result::h}. The name is the field's own but for seq_len_max (the field
// seq_len_max_tensor of ops::SeqInputs); the tests compare every op's names with TensorFlow's.
template <class In>
struct InputField {
  const char* name;  // TensorFlow's
  TensorView In::*view;
  InputKind kind = InputKind::kFloat;
};

template <class Out, class Result>
struct OutputField {
  const char* name;  // TensorFlow's
  MutableTensorView Out::*view;
  Tensor Result::*tensor;
};

// An attr: a float (a double field) or a bool (a bool field) of A. Its default is its value in
// a default A{}, the op definition's; `required` attrs have none. Made by attr<&A::field>().
template <class A>
struct AttrField {
  const char* name;  // TensorFlow's
  AttrKind kind;
  double (*get)(const A&);
  void (*set)(A&, double);  // bools as 0 / 1
  bool required = false;
};

template <auto Member>
struct MemberOf;
template <class C, class T, T C::*Member>
struct MemberOf<Member> {
  using Class = C;
  using Type = T;
};

template <auto Member>
constexpr AttrField<typename MemberOf<Member>::Class> attr(const char* name,
                                                           bool required = false) {
  using A = typename MemberOf<Member>::Class;
  constexpr bool flag = std::is_same_v<typename MemberOf<Member>::Type, bool>;
  return {name, flag ? AttrKind::kBool : AttrKind::kFloat,
          [](const A& a) { return double(a.*Member); },
          [](A& a, double v) {
            if constexpr (flag) {
              a.*Member = v != 0.0;
            } else {
              a.*Member = v;
            }
          },
          required};
}

// What validation of a call found: the outputs' dtype and shapes, and the sizes of its work
// (T = 1 for the cell ops; `lengths`: seq_lengths is given) for the memory bound.
struct CallShape {
  DType dtype = DType::kFloat32;
  int num_outputs = 0;
  std::array<Shape, kMaxOutputs> shapes;
  std::int64_t T = 1, B = 0, I = 0, H = 0;
  bool lengths = false;
  // A bfloat16 call of an op whose fast path takes bfloat16 products (BlockLSTM(V2), BlockGRU,
  // BlockGRUResetAfter and their grads): the bytes of its bfloat16 product operands, at most
  // (kernel/block_*.h, block_*_bf16_{fwd,bwd}_workspace_floats; ops::with_bf16_operands sets it).
  // The memory check counts them unless the reference path runs; 0 for every other call.
  double bf16_operand_bytes = 0.0;

  CallShape() = default;
  CallShape(DType d, std::initializer_list<Shape> outputs) : dtype(d) {
    for (const Shape& s : outputs) shapes[num_outputs++] = s;
  }
  // `n` outputs of one shape (a forward op's).
  CallShape(DType d, std::size_t n, const Shape& each) : dtype(d) {
    while (std::size_t(num_outputs) < n) shapes[num_outputs++] = each;
  }
  CallShape& sizes(std::int64_t t, std::int64_t b, std::int64_t i, std::int64_t h) {
    T = t, B = b, I = i, H = h;
    return *this;
  }
  // Every op has h_prev [B, H]; when it is empty every step of the op is empty work: the outputs
  // are zeros (or empty), whatever seq_len_max or the other dimensions say.
  bool empty() const { return B == 0 || H == 0; }
  std::span<const Shape> output_shapes() const { return {shapes.data(), std::size_t(num_outputs)}; }
  OutputSpec spec() const { return {dtype, {shapes.begin(), shapes.begin() + num_outputs}}; }
};

// The checks every op shares, on its views in its order (registry.cc).
void check_output_sizes(const char* op, std::span<const char* const> output_names,
                        const CallShape& call);
// Outputs must not overlap inputs or each other: two views overlap when their byte ranges
// [data, data + bytes) intersect. An empty view occupies no bytes, whatever its pointer, so it
// overlaps nothing (nothing is read or written through it); an absent optional input neither.
void check_no_alias(const char* op, std::span<const char* const> input_names,
                    std::span<const TensorView> inputs, std::span<const char* const> output_names,
                    std::span<const MutableTensorView> outputs);
// The call's memory against get_memory_limit(), before anything is allocated.
void check_memory(const char* op, std::span<const TensorView> inputs,
                  std::span<const char* const> output_names, const CallShape& call,
                  bool allocates_outputs, std::span<const ExtraBytes> extra);
// Before computing: empty work (CallShape::empty) only zero-fills the outputs and returns false.
// (Thread teams need no check here: every parallel region takes its team from the thread
// budget, core/parallel.h.)
bool begin_compute(const CallShape& call, std::span<const MutableTensorView> outputs);

template <class T>
const T* data(const TensorView& t) {
  return static_cast<const T*>(t.data);
}
template <class T>
T* data(const MutableTensorView& t) {
  return static_cast<T*>(t.data);
}

// Calls f.template operator()<T>(in, out) with T = float or double, on views whose floating data
// is T: float32 and float64 natively; float16 and bfloat16 through float32 copies of the 16-bit
// inputs and float32 scratch outputs, each rounded to the 16-bit dtype once afterwards.
template <class InFields, class In, class OutFields, class Out, class F>
void dispatch_float(DType dtype, const InFields& in_fields, const In& in,
                    const OutFields& out_fields, const Out& out, F&& f) {
  if (dtype == DType::kFloat32) return f.template operator()<float>(in, out);
  if (dtype == DType::kFloat64) return f.template operator()<double>(in, out);
  if (!is_16bit_float(dtype)) {
    throw Error(ErrorCode::kInternal, "dispatch_float: not a floating dtype");
  }
  // float16 and bfloat16 alike (core/lowp.h): widened once, computed in float32, rounded once.
  // The copies are left uninitialised: each input's is widened into, each output's written
  // whole by the kernel (as a caller's float32 outputs are).
  In in32 = in;
  Out out32 = out;
  std::vector<std::unique_ptr<float[]>> copies;
  copies.reserve(std::size(in_fields) + std::size(out_fields));
  for (const auto& field : in_fields) {
    TensorView& t = in32.*field.view;
    // Only the floating inputs: an omitted seq_lengths may carry any dtype (a zeroed C tensor
    // says float16) and no data.
    if (field.kind != InputKind::kFloat || t.dtype != dtype) continue;
    const std::int64_t n = t.shape.num_elements();
    float* const copy =
        copies.emplace_back(std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(n)))
            .get();
    widen_to_float(dtype, t.data, copy, n);
    t = TensorView(copy, DType::kFloat32, t.shape);
  }
  const std::size_t first_out = copies.size();
  for (const auto& field : out_fields) {
    MutableTensorView& t = out32.*field.view;
    const std::size_t n = static_cast<std::size_t>(t.shape.num_elements());
    float* const scratch = copies.emplace_back(std::make_unique_for_overwrite<float[]>(n)).get();
    fault_in(scratch, n * sizeof(float));  // written by the kernel's loops
    t = MutableTensorView(scratch, DType::kFloat32, t.shape);
  }
  f.template operator()<float>(in32, out32);
  std::size_t k = first_out;
  for (const auto& field : out_fields) {
    const MutableTensorView& t = out32.*field.view;
    narrow_from_float(dtype, copies[k++].get(), (out.*field.view).data, t.shape.num_elements());
  }
}

// An op: its names (TensorFlow's), its validation and its compute. The public typed functions
// call run(); the name table calls the same steps through Adapter.
template <class In, class Out, class Result, class A>
struct TypedOp {
  using Inputs = In;
  using Outputs = Out;
  using Results = Result;
  using Attrs = A;

  const char* name;
  std::span<const InputField<In>> inputs;
  std::span<const OutputField<Out, Result>> outputs;
  std::span<const AttrField<A>> attrs;
  // Ranks, then dimensions, then dtypes, then values (docs/design.md), of the named fields.
  CallShape (*validate)(const In&, const A&);
  // Computes validated inputs into outputs of the CallShape's shapes; `dtype` is the call's.
  void (*compute)(const In&, const Out&, const A&, DType dtype);

  // Caller-owned outputs.
  void run(const In& in, const Out& out, const A& a) const {
    check_storage(in);
    const CallShape p = call_shape(in, a);
    MutableTensorView outs[kMaxOutputs];
    for (std::size_t k = 0; k < outputs.size(); ++k) outs[k] = out.*outputs[k].view;
    finish(p, in, std::span(outs, outputs.size()), a, /*memory=*/true, /*fresh=*/false);
  }
  // Allocated outputs.
  Result run(const In& in, const A& a) const {
    check_storage(in);
    return finish(call_shape(in, a), in, a);
  }

  // The steps of run, for Adapter. First every input's storage (a null pointer with elements, a
  // negative dimension, an element count that overflows), an absent optional input skipped.
  void check_storage(const In& in) const {
    const Checker check(name);
    for (const InputField<In>& f : inputs) {
      if (f.kind == InputKind::kOptional && is_absent_input(in.*f.view)) continue;
      check.storage(f.name, in.*f.view);
    }
  }
  // Then the op's validation and the outputs' sizes.
  CallShape call_shape(const In& in, const A& a) const {
    const CallShape p = validate(in, a);
    const char* names[kMaxOutputs];
    check_output_sizes(name, output_names(names), p);
    return p;
  }
  // Then, allocating the outputs: the memory limit, and the compute.
  Result finish(const CallShape& p, const In& in, const A& a) const {
    TensorView views[kMaxInputs];
    const char* names[kMaxOutputs];
    check_memory(name, gather(in, views), output_names(names), p, true, {});
    Result result;
    Out out;
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      Tensor& t = result.*outputs[k].tensor;
      t = Tensor(p.dtype, p.shapes[k]);
      out.*outputs[k].view = t.mutable_view();
    }
    execute(p, in, out, a);
    return result;
  }
  // Or, into given outputs: the outputs, overlap and (with `memory`) the memory limit, and the
  // compute. Outputs that are not `fresh` (the caller's memory) must not overlap the inputs or
  // each other, whatever the size of the work: empty work still zero-fills them, which would
  // zero an input underneath. `fresh` outputs were allocated for this call by a binding after
  // the memory check (the Python one), so they cannot overlap anything; that binding passes the
  // strided inputs of empty work uncopied, whose dense extent says nothing about their memory.
  void finish(const CallShape& p, const In& in, std::span<const MutableTensorView> outs, const A& a,
              bool memory, bool fresh) const {
    const char* out_names[kMaxOutputs];
    check_outputs(name, output_names(out_names), p.dtype, p.output_shapes(), outs);
    TensorView views[kMaxInputs];
    const std::span<const TensorView> ins = gather(in, views);
    if (!fresh) {
      const char* in_names[kMaxInputs];
      for (std::size_t k = 0; k < inputs.size(); ++k) in_names[k] = inputs[k].name;
      check_no_alias(name, std::span(in_names, inputs.size()), ins, output_names(out_names), outs);
    }
    if (memory) check_memory(name, ins, output_names(out_names), p, false, {});
    Out out;
    for (std::size_t k = 0; k < outputs.size(); ++k) out.*outputs[k].view = outs[k];
    execute(p, in, out, a);
  }
  void execute(const CallShape& p, const In& in, const Out& out, const A& a) const {
    MutableTensorView outs[kMaxOutputs];
    for (std::size_t k = 0; k < outputs.size(); ++k) outs[k] = out.*outputs[k].view;
    if (begin_compute(p, std::span(outs, outputs.size()))) compute(in, out, a, p.dtype);
  }

  std::span<const TensorView> gather(const In& in, TensorView* views) const {
    for (std::size_t k = 0; k < inputs.size(); ++k) views[k] = in.*inputs[k].view;
    return {views, inputs.size()};
  }
  std::span<const char* const> output_names(const char** names) const {
    for (std::size_t k = 0; k < outputs.size(); ++k) names[k] = outputs[k].name;
    return {names, outputs.size()};
  }
};

// ---- the name table -----------------------------------------------------------------------

// The name-based interface of one op (ops.h).
class OpAdapter {
 public:
  explicit OpAdapter(OpDef def) : def_(std::move(def)) {}
  virtual ~OpAdapter() = default;
  const OpDef& def() const { return def_; }
  void set_index(std::size_t index) { def_.index = index; }

  // infer_outputs (memory == nullptr) and prepare_call.
  struct Memory {
    std::span<const ExtraBytes> extra;
    bool allocates_outputs;
  };
  virtual OutputSpec prepare(std::span<const TensorView> inputs, const AttrMap& attrs,
                             const Memory* memory) const = 0;
  virtual void run(std::span<const TensorView> inputs, const AttrMap& attrs,
                   std::span<const MutableTensorView> outputs) const = 0;
  virtual std::vector<Tensor> run(std::span<const TensorView> inputs,
                                  const AttrMap& attrs) const = 0;
  virtual void run(std::span<const TensorView> inputs, const AttrMap& attrs, const Memory& memory,
                   const CallSetup& setup) const = 0;

 protected:
  // The given inputs padded to the op's count with absent views, after checking the count (the
  // trailing optional inputs may be omitted).
  std::vector<TensorView> full_inputs(std::span<const TensorView> inputs) const;
  // Attr values in def().attrs order: defaults applied, unknown or missing required names and
  // bad values refused.
  std::vector<double> resolve_attrs(const AttrMap& given) const;

 private:
  OpDef def_;
};

void register_op(std::unique_ptr<OpAdapter> op);

// Maps TensorFlow's input, attr and output names onto an op's typed fields (Op::inputs,
// Op::attrs, Op::outputs) and calls the typed op's steps; adds nothing else.
template <class Op>
class Adapter final : public OpAdapter {
  using In = typename Op::Inputs;
  using Out = typename Op::Outputs;
  using A = typename Op::Attrs;

 public:
  explicit Adapter(const Op& op) : OpAdapter(def_of(op)), op_(op) {}

  OutputSpec prepare(std::span<const TensorView> inputs, const AttrMap& attrs,
                     const Memory* memory) const override {
    In in;
    const A a = map(inputs, attrs, &in);
    const CallShape p = op_.call_shape(in, a);
    if (memory != nullptr) {
      TensorView views[kMaxInputs];
      const char* names[kMaxOutputs];
      check_memory(op_.name, op_.gather(in, views), op_.output_names(names), p,
                   memory->allocates_outputs, memory->extra);
    }
    return p.spec();
  }
  void run(std::span<const TensorView> inputs, const AttrMap& attrs,
           std::span<const MutableTensorView> outputs) const override {
    In in;
    const A a = map(inputs, attrs, &in);
    op_.finish(op_.call_shape(in, a), in, outputs, a, /*memory=*/true, /*fresh=*/false);
  }
  std::vector<Tensor> run(std::span<const TensorView> inputs, const AttrMap& attrs) const override {
    In in;
    const A a = map(inputs, attrs, &in);
    typename Op::Results r = op_.finish(op_.call_shape(in, a), in, a);
    std::vector<Tensor> out;
    for (const auto& f : op_.outputs) out.push_back(std::move(r.*f.tensor));
    return out;
  }
  void run(std::span<const TensorView> inputs, const AttrMap& attrs, const Memory& memory,
           const CallSetup& setup) const override {
    In in;
    const A a = map(inputs, attrs, &in);
    const CallShape p = op_.call_shape(in, a);
    TensorView views[kMaxInputs];
    const char* names[kMaxOutputs];
    check_memory(op_.name, op_.gather(in, views), op_.output_names(names), p,
                 memory.allocates_outputs, memory.extra);
    std::span<TensorView> all(views, op_.inputs.size());
    const std::vector<MutableTensorView> outs = setup(p.spec(), all);
    // Outputs the binding allocated for this call are the op's to write whole: their pages are
    // faulted in now, split over the threads, not by whichever thread first writes each page
    // inside a time loop (core/first_touch.h).
    if (memory.allocates_outputs) {
      for (const MutableTensorView& o : outs) {
        fault_in(o.data, static_cast<std::size_t>(o.shape.num_elements()) * dtype_size(o.dtype));
      }
    }
    for (std::size_t k = 0; k < all.size(); ++k) in.*op_.inputs[k].view = all[k];
    op_.finish(p, in, outs, a, /*memory=*/false, /*fresh=*/memory.allocates_outputs);
  }

 private:
  // The optional inputs (seq_lengths) are the trailing InputKind::kOptional rows.
  static OpDef def_of(const Op& op) {
    OpDef def;
    def.name = op.name;
    for (const auto& f : op.inputs) {
      def.inputs.push_back(f.name);
      def.num_optional_inputs += f.kind == InputKind::kOptional;
    }
    const A defaults{};
    for (const auto& f : op.attrs) {
      def.attrs.push_back({f.name, f.kind, !f.required, f.required ? 0.0 : f.get(defaults)});
    }
    for (const auto& f : op.outputs) def.outputs.push_back(f.name);
    return def;
  }
  // Inputs by position (the count checked, then their storage), then attrs by name.
  A map(std::span<const TensorView> given, const AttrMap& attrs, In* in) const {
    const std::vector<TensorView> full = full_inputs(given);
    for (std::size_t k = 0; k < full.size(); ++k) (*in).*op_.inputs[k].view = full[k];
    op_.check_storage(*in);
    const std::vector<double> values = resolve_attrs(attrs);
    A a{};
    for (std::size_t k = 0; k < values.size(); ++k) op_.attrs[k].set(a, values[k]);
    return a;
  }

  const Op& op_;
};

// Adds an op to the name table (register_adapters: each of several, in order).
template <class Op>
void register_adapter(const Op& op) {
  if (op.inputs.size() > kMaxInputs || op.outputs.size() > kMaxOutputs) {
    throw Error(ErrorCode::kInternal, std::string(op.name) + ": more inputs or outputs than " +
                                          "core::kMaxInputs / kMaxOutputs");
  }
  register_op(std::make_unique<Adapter<Op>>(op));
}
template <class... Op>
void register_adapters(const Op&... op) {
  (register_adapter(op), ...);
}

// Reads an int64 scalar (seq_len_max).
inline std::int64_t read_int64_scalar(const TensorView& t) {
  return *static_cast<const std::int64_t*>(t.data);
}

// seq_lengths, the sequence ops' optional per-example lengths [B] (blockrnn's extension beyond
// TensorFlow, docs/ops.md). Each phase of validation checks its part, so that the order of
// docs/design.md holds (ranks, then dimensions, then dtypes, then values); an absent view passes.
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
