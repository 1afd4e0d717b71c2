// The cell layer objects of blockrnn/layer.h: LSTMBlockCell and GRUBlockCell set up once
// (validated sizes and attrs, weights copied and packed: cpu::*CellPlan) and run many times on
// the cell kernels of src/cpu (src/ref in reference mode), with the arguments the one-shot ops
// of src/ops/lstm_ops.cc and src/ops/gru_ops.cc build (ops/kernel_args.h), plus the plan and the
// workspace.
//
// Workspace of a call of B examples (elements of the dtype):
//   LSTM: [the kernel's: lstm_cell_workspace_elems(B, I, H)] [d_gates B·4H]
//   GRU:  [the kernel's: gru_cell_workspace_elems(B, I, H)] [d_c_bar B·H] [d_r_bar_u_bar B·2H]
// The gate gradients live there unless the caller asks for them (dicfo; d_c_bar, d_r_bar_u_bar).
#include <array>
#include <cstdio>
#include <string>

#include "blockrnn/context.h"
#include "blockrnn/layer.h"
#include "core/isa.h"
#include "cpu/cell_plan.h"
#include "kernel/gru_cell.h"
#include "kernel/lstm_cell.h"
#include "layer/layer_common.h"
#include "ops/checks.h"
#include "ops/kernel_args.h"
#include "ops/op_impl.h"

namespace blockrnn {

using layer::Check;

namespace {

// Elements of each cell layer's workspace for B examples (see the file's header).
std::int64_t lstm_layer_elems(std::int64_t B, std::int64_t I, std::int64_t H) {
  return cpu::lstm_cell_workspace_elems(B, I, H) + B * 4 * H;
}
std::int64_t gru_layer_elems(std::int64_t B, std::int64_t I, std::int64_t H) {
  return cpu::gru_cell_workspace_elems(B, I, H) + B * 3 * H;
}

// An optional output: absent when it has neither data nor a shape (blockrnn/ops.h).
bool absent(const MutableTensorView& v) {
  return is_absent_input(TensorView(v));
}

// What a cell layer holds besides its workspace, in bytes (in double: it may exceed any
// integer): the object, its weights' copies (`copied` elements) and a bound of their packed
// panels, each given as its (K, N).
double held_bytes(double copied, std::initializer_list<std::array<double, 2>> packed, DType dtype) {
  double elems = copied;
  for (const auto& [k, n] : packed) elems += k * (n + 64.0);
  return elems * double(dtype_size(dtype)) + double(layer::kObjectBytes);
}

void check_held(const Check& check, double bytes, const CellLayerShape& s) {
  const ExtraBytes weights{"the weights for input_size " + std::to_string(s.input_size) +
                               " and hidden_size " + std::to_string(s.hidden_size) +
                               " (copies and packed panels)",
                           layer::clamp_bytes(bytes)};
  layer::check_allocation(check, {&weights, 1});
}

// The batch of a call: x's first dimension (x [B, I]), in [min_batch, max_batch].
std::int64_t batch_of(const Check& check, const CellLayerShape& shape, std::int64_t min_batch,
                      const TensorView& x) {
  check.rank("x", x, 2);
  const std::int64_t B = x.shape[0];
  if (B < min_batch || B > shape.max_batch) {
    check.fail("x has batch " + std::to_string(B) + ", the layer was created for " +
               std::to_string(min_batch) + " to " + std::to_string(shape.max_batch) +
               " (max_batch)");
  }
  check.tensor("x", x, Shape{B, shape.input_size}, "batch, input_size", shape.dtype);
  return B;
}

// The batch of an LSTM cell call (batch_of, from 1): an empty one is refused as LSTMBlockCell
// refuses it, in the op's words (ops::empty_lstm_cell_state), once cs_prev agrees with x.
std::int64_t lstm_batch_of(const Check& check, const CellLayerShape& shape, const TensorView& x,
                           const TensorView& cs_prev) {
  check.rank("x", x, 2);
  if (x.shape[0] == 0) {
    check.tensor("cs_prev", cs_prev, Shape{0, shape.hidden_size}, ops::kStateDims, shape.dtype);
    check.fail(ops::empty_lstm_cell_state(cs_prev.shape));
  }
  return batch_of(check, shape, 1, x);
}

// The end of every call's checks, then its workspace: the caller's (checked: at least
// workspace_bytes(B), aligned, overlapping none of the call's views) or the layer's own `own`,
// grown to exactly this call's need (after the memory check) when it holds less.
void* prepare_workspace(const Check& check, const CellLayer& l, std::int64_t B,
                        layer::CallArgs& args, LayerWorkspace given, Tensor& own) {
  const CellLayerShape& shape = l.shape();
  const std::size_t bytes = l.workspace_bytes(B);
  const std::size_t elem = dtype_size(shape.dtype);
  layer::take_given_workspace(check, given, bytes, shape.dtype, shape.caller_workspace,
                              "workspace_bytes(B)", args);
  args.check_no_alias(check);
  if (given.data != nullptr) return given.data;
  if (own.num_bytes() < bytes) {
    const ExtraBytes growth{"the layer's workspace, grown to this call",
                            static_cast<long long>(bytes)};
    layer::check_allocation(check, {&growth, 1});
    layer::grow(own, shape.dtype, static_cast<std::int64_t>(bytes / elem));
  }
  return own.data();
}

// The weights set_weights copies: one per argument, `dims` in words for the errors.
struct CellWeight {
  const char* name;
  Shape shape;
  const char* dims;
};

// set_weights' copies: the first n given weights checked against spec, all before any is
// replaced (a refused call leaves the layer's weights and plan as they were), then copied into
// own, zeros past n (an LSTM's peepholes without use_peephole, as the op uses for omitted ones).
// Past the checks only an allocation can fail, and the layer has no weights (has_weights false)
// until its caller has packed the plan, as the sequence layers.
void replace_weights(const Check& check, std::span<const CellWeight> spec,
                     std::span<const TensorView> given, std::span<Tensor* const> own, std::size_t n,
                     DType dt, bool& has_weights) {
  for (std::size_t k = 0; k < n; ++k) {
    check.tensor(spec[k].name, given[k], spec[k].shape, spec[k].dims, dt);
  }
  has_weights = false;
  for (std::size_t k = 0; k < spec.size(); ++k) {
    if (k < n) {
      layer::copy_weight(check, spec[k].name, given[k], spec[k].shape, spec[k].dims, dt, *own[k]);
    } else {
      *own[k] = Tensor(dt, spec[k].shape);
    }
  }
}

}  // namespace

// ---- CellLayer -----------------------------------------------------------------------------

CellLayer::CellLayer(const char* name, const CellLayerShape& shape, std::int64_t min_batch,
                     std::int64_t (*elems)(std::int64_t, std::int64_t, std::int64_t))
    : name_(name), shape_(shape), elems_(elems) {
  const Check check{name, "create"};
  if (shape.input_size < 0) {
    check.fail("input_size must be >= 0, got " + std::to_string(shape.input_size));
  }
  if (shape.hidden_size < 1) {
    check.fail("hidden_size must be >= 1, got " + std::to_string(shape.hidden_size));
  }
  if (shape.max_batch < min_batch) {
    check.fail("max_batch must be >= " + std::to_string(min_batch) + ", got " +
               std::to_string(shape.max_batch) +
               (min_batch > 0 ? " (LSTMBlockCell refuses an empty batch)" : ""));
  }
  if (shape.dtype != DType::kFloat32 && shape.dtype != DType::kFloat64) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(name) + ".create: dtype must be float32 or float64, got " +
                    dtype_name(shape.dtype) + " (float16 and bfloat16: use the one-shot ops)");
  }
  // A call of max_batch examples: its workspace (under B·(I + 12H + 256) elements) and its
  // views must be addressable, so that no size a call computes overflows. A bound, not an
  // allocation. Then the weights' (layer::check_sizes, whose call bound this one implies).
  const double call = double(shape.max_batch) *
                      (double(shape.input_size) + 12.0 * double(shape.hidden_size) + 256.0);
  if (8.0 * call > 0x1p60) {
    char bytes[48];
    std::snprintf(bytes, sizeof(bytes), "%.3g bytes", 8.0 * call);
    throw Error(ErrorCode::kResourceExhausted,
                check.op() + ": max_batch " + std::to_string(shape.max_batch) +
                    " is too large: a call of that size would need " + bytes +
                    " of workspace and views, more than can be addressed (input_size " +
                    std::to_string(shape.input_size) + ", hidden_size " +
                    std::to_string(shape.hidden_size) + ")");
  }
  layer::check_sizes(check, shape.input_size, shape.hidden_size, 1, shape.max_batch);
}

CellLayer::~CellLayer() = default;

std::size_t CellLayer::workspace_bytes(std::int64_t B) const {
  if (B < 0 || B > shape_.max_batch) {
    Check{name_, "workspace_bytes"}.fail("B must be in [0, " + std::to_string(shape_.max_batch) +
                                         "] (max_batch), got " + std::to_string(B));
  }
  return static_cast<std::size_t>(elems_(B, shape_.input_size, shape_.hidden_size)) *
         dtype_size(shape_.dtype);
}

namespace {

// Sets a cell call's plan `p` and the kernel's workspace on its arguments `a`, unless in
// reference mode: the plan repacked when the ISA path changed since set_weights, and for a
// backward the transposes it multiplies by, packed at the first one (cpu/cell_plan.h).
// `weights`: the layer's weight copies, as the plan's pack functions take them.
template <typename T, typename Args, typename Plan, typename... W>
void use_plan(Args& a, Plan& p, const CellLayerShape& s, void* workspace, const W*... weights) {
  if (force_reference()) return;
  if (p.isa != core::active_isa()) p.pack(s.input_size, s.hidden_size, weights...);
  if constexpr (requires { a.d_x; }) p.pack_transposed(s.input_size, s.hidden_size, weights...);
  a.plan = &p;
  a.workspace = static_cast<T*>(workspace);
}

}  // namespace

// ---- LSTMCellLayer ---------------------------------------------------------------------------

struct LSTMCellLayer::Impl {
  Tensor w, b, wci, wcf, wco;  // [I+H, 4H], [4H], [H] ×3
  layer::Plans<LSTMCellPlan> plans;
  layer::CallArgs args;  // the views of the current call (kept: no allocation per call)
  std::string forward_name, backward_name;
  std::atomic<bool> busy{false};

  // The one-shot op's inputs: the call's views and the layer's weights.
  LSTMBlockCellGradInputs op_inputs(const TensorView& x, const TensorView& cs_prev,
                                    const TensorView& h_prev) const {
    LSTMBlockCellGradInputs in;
    in.x = x;
    in.cs_prev = cs_prev;
    in.h_prev = h_prev;
    in.w = w.view();
    in.wci = wci.view();
    in.wcf = wcf.view();
    in.wco = wco.view();
    in.b = b.view();
    return in;
  }
  template <typename T, typename Args>
  void plan(Args& a, const CellLayerShape& s, void* workspace) {
    use_plan<T>(a, plans.template get<T>(), s, workspace, w.data_as<T>());
  }
};

LSTMCellLayer::LSTMCellLayer(const CellLayerShape& shape, const LSTMBlockCellAttrs& attrs)
    : CellLayer("LSTMCellLayer", shape, 1, lstm_layer_elems), attrs_(attrs) {
  const Check check{name_, "create"};
  const std::string op = check.op();
  ops::check_lstm_attrs(core::Checker(op.c_str()), attrs.forget_bias, attrs.cell_clip);
  const double i = double(shape.input_size), h = double(shape.hidden_size);
  check_held(check,
             held_bytes((i + h) * 4.0 * h + 7.0 * h, {{i + h, 4 * h}, {4 * h, i}, {4 * h, h}},
                        shape.dtype),
             shape_);
  impl_ = std::make_unique<Impl>();
  impl_->forward_name = std::string(name_) + ".forward";
  impl_->backward_name = std::string(name_) + ".backward";
}

LSTMCellLayer::~LSTMCellLayer() = default;

void LSTMCellLayer::set_weights(TensorView w, TensorView b, TensorView wci, TensorView wcf,
                                TensorView wco) {
  const Check check{name_, "set_weights"};
  Impl& m = *impl_;
  const layer::OneCall one(check, m.busy);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const double i = double(I), h = double(H);
  check_held(check,
             held_bytes((i + h) * 4.0 * h + 7.0 * h, {{i + h, 4 * h}, {4 * h, i}, {4 * h, h}},
                        shape_.dtype),
             shape_);
  const DType dt = shape_.dtype;
  const CellWeight spec[] = {
      {"w", Shape{I + H, 4 * H}, "input_size + hidden_size, 4 * hidden_size"},
      {"b", Shape{4 * H}, "4 * hidden_size"},
      {"wci", Shape{H}, "hidden_size"},
      {"wcf", Shape{H}, "hidden_size"},
      {"wco", Shape{H}, "hidden_size"}};
  const TensorView given[] = {w, b, wci, wcf, wco};
  Tensor* const own[] = {&m.w, &m.b, &m.wci, &m.wcf, &m.wco};
  replace_weights(check, spec, given, own, attrs_.use_peephole ? 5 : 2, dt, has_weights_);
  layer::with_dtype(dt,
                    [&]<typename T>() { m.plans.template get<T>().pack(I, H, m.w.data_as<T>()); });
  has_weights_ = true;
}

void LSTMCellLayer::forward(const LSTMCellLayerInputs& in, const LSTMBlockCellOutputs& out,
                            LayerWorkspace workspace) {
  Impl& m = *impl_;
  const Check check{name_, "forward", m.forward_name.c_str()};
  const layer::OneCall one(check, m.busy);
  if (!has_weights_) check.fail("set_weights has not been called");
  const std::int64_t B = lstm_batch_of(check, shape_, in.x, in.cs_prev);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const std::array<Check::Arg, 2> states{{{"cs_prev", in.cs_prev}, {"h_prev", in.h_prev}}};
  check.tensors(states, Shape{B, H}, ops::kStateDims, dt);
  const std::array<Check::Arg, 7> outputs{{{"i", out.i},
                                           {"cs", out.cs},
                                           {"f", out.f},
                                           {"o", out.o},
                                           {"ci", out.ci},
                                           {"co", out.co},
                                           {"h", out.h}}};
  check.outputs(outputs, Shape{B, H}, dt);
  layer::CallArgs& args = m.args;
  args.clear();
  args.input("x", in.x);
  args.inputs(states);
  args.outputs(outputs);
  void* ws = prepare_workspace(check, *this, B, args, workspace, own_workspace_);
  const LSTMBlockCellGradInputs op_in = m.op_inputs(in.x, in.cs_prev, in.h_prev);
  layer::with_dtype(dt, [&]<typename T>() {
    auto a =
        ops::lstm_fwd_args<LSTMCellFwdArgs, T>(op_in, out, attrs_.forget_bias, attrs_.cell_clip,
                                               attrs_.use_peephole, LSTMLayout::kICFO, dt);
    m.plan<T>(a, shape_, ws);
    ops::run_kernel(LSTMDims{B, I, H}, a);
  });
}

void LSTMCellLayer::backward(const LSTMCellLayerGradInputs& in, const LSTMCellLayerGradOutputs& out,
                             LayerWorkspace workspace) {
  Impl& m = *impl_;
  const Check check{name_, "backward", m.backward_name.c_str()};
  const layer::OneCall one(check, m.busy);
  if (!has_weights_) check.fail("set_weights has not been called");
  const std::int64_t B = lstm_batch_of(check, shape_, in.x, in.cs_prev);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const std::array<Check::Arg, 10> steps{{{"cs_prev", in.cs_prev},
                                          {"h_prev", in.h_prev},
                                          {"i", in.i},
                                          {"cs", in.cs},
                                          {"f", in.f},
                                          {"o", in.o},
                                          {"ci", in.ci},
                                          {"co", in.co},
                                          {"cs_grad", in.cs_grad},
                                          {"h_grad", in.h_grad}}};
  check.tensors(steps, Shape{B, H}, ops::kStateDims, dt);
  layer::CallArgs& args = m.args;
  args.clear();
  args.input("x", in.x);
  args.inputs(steps);
  check.output("x_grad", out.x_grad, Shape{B, I}, dt);
  args.output("x_grad", out.x_grad);
  const std::array<Check::Arg, 2> state_grads{
      {{"cs_prev_grad", out.cs_prev_grad}, {"h_prev_grad", out.h_prev_grad}}};
  check.outputs(state_grads, Shape{B, H}, dt);
  args.outputs(state_grads);
  check.output("w_grad", out.w_grad, Shape{I + H, 4 * H}, dt);
  args.output("w_grad", out.w_grad);
  const std::array<Check::Arg, 3> peephole_grads{
      {{"wci_grad", out.wci_grad}, {"wcf_grad", out.wcf_grad}, {"wco_grad", out.wco_grad}}};
  check.outputs(peephole_grads, Shape{H}, dt);
  args.outputs(peephole_grads);
  check.output("b_grad", out.b_grad, Shape{4 * H}, dt);
  args.output("b_grad", out.b_grad);
  const bool dicfo = !absent(out.dicfo);
  if (dicfo) {
    check.output("dicfo", out.dicfo, Shape{B, 4 * H}, dt);
    args.output("dicfo", out.dicfo);
  }
  void* ws = prepare_workspace(check, *this, B, args, workspace, own_workspace_);
  LSTMBlockCellGradInputs op_in = m.op_inputs(in.x, in.cs_prev, in.h_prev);
  op_in.i = in.i;
  op_in.cs = in.cs;
  op_in.f = in.f;
  op_in.o = in.o;
  op_in.ci = in.ci;
  op_in.co = in.co;
  op_in.cs_grad = in.cs_grad;
  op_in.h_grad = in.h_grad;
  const LSTMBlockCellBackwardOutputs op_out{out.x_grad,   out.cs_prev_grad, out.h_prev_grad,
                                            out.w_grad,   out.wci_grad,     out.wcf_grad,
                                            out.wco_grad, out.b_grad};
  layer::with_dtype(dt, [&]<typename T>() {
    T* d_gates = dicfo ? static_cast<T*>(out.dicfo.data)
                       : static_cast<T*>(ws) + cpu::lstm_cell_workspace_elems(B, I, H);
    auto a = ops::lstm_cell_backward_args<T>(op_in, op_out, attrs_.use_peephole, d_gates);
    m.plan<T>(a, shape_, ws);
    ops::run_kernel(LSTMDims{B, I, H}, a);
  });
}

// ---- GRUCellLayer ----------------------------------------------------------------------------

struct GRUCellLayer::Impl {
  Tensor w_ru, w_c, b_ru, b_c;  // [I+H, 2H], [I+H, H], [2H], [H]
  layer::Plans<GRUCellPlan> plans;
  layer::CallArgs args;
  std::string forward_name, backward_name;
  std::atomic<bool> busy{false};

  GRUBlockCellGradInputs op_inputs(const TensorView& x, const TensorView& h_prev) const {
    GRUBlockCellGradInputs in;
    in.x = x;
    in.h_prev = h_prev;
    in.w_ru = w_ru.view();
    in.w_c = w_c.view();
    in.b_ru = b_ru.view();
    in.b_c = b_c.view();
    return in;
  }
  template <typename T, typename Args>
  void plan(Args& a, const CellLayerShape& s, void* workspace) {
    use_plan<T>(a, plans.template get<T>(), s, workspace, w_ru.data_as<T>(), w_c.data_as<T>());
  }
};

namespace {
double gru_held_bytes(const CellLayerShape& s) {
  const double i = double(s.input_size), h = double(s.hidden_size);
  return held_bytes((i + h) * 3.0 * h + 3.0 * h,
                    {{i + h, 2 * h}, {i + h, h}, {2 * h, i}, {2 * h, h}, {h, i}, {h, h}}, s.dtype);
}
}  // namespace

GRUCellLayer::GRUCellLayer(const CellLayerShape& shape)
    : CellLayer("GRUCellLayer", shape, 0, gru_layer_elems) {
  check_held(Check{name_, "create"}, gru_held_bytes(shape_), shape_);
  impl_ = std::make_unique<Impl>();
  impl_->forward_name = std::string(name_) + ".forward";
  impl_->backward_name = std::string(name_) + ".backward";
}

GRUCellLayer::~GRUCellLayer() = default;

void GRUCellLayer::set_weights(TensorView w_ru, TensorView w_c, TensorView b_ru, TensorView b_c) {
  const Check check{name_, "set_weights"};
  Impl& m = *impl_;
  const layer::OneCall one(check, m.busy);
  check_held(check, gru_held_bytes(shape_), shape_);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const CellWeight spec[] = {
      {"w_ru", Shape{I + H, 2 * H}, "input_size + hidden_size, 2 * hidden_size"},
      {"w_c", Shape{I + H, H}, "input_size + hidden_size, hidden_size"},
      {"b_ru", Shape{2 * H}, "2 * hidden_size"},
      {"b_c", Shape{H}, "hidden_size"}};
  const TensorView given[] = {w_ru, w_c, b_ru, b_c};
  Tensor* const own[] = {&m.w_ru, &m.w_c, &m.b_ru, &m.b_c};
  replace_weights(check, spec, given, own, 4, dt, has_weights_);
  layer::with_dtype(dt, [&]<typename T>() {
    m.plans.template get<T>().pack(I, H, m.w_ru.data_as<T>(), m.w_c.data_as<T>());
  });
  has_weights_ = true;
}

void GRUCellLayer::forward(const GRUCellLayerInputs& in, const GRUBlockCellOutputs& out,
                           LayerWorkspace workspace) {
  Impl& m = *impl_;
  const Check check{name_, "forward", m.forward_name.c_str()};
  const layer::OneCall one(check, m.busy);
  if (!has_weights_) check.fail("set_weights has not been called");
  const std::int64_t B = batch_of(check, shape_, 0, in.x);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  check.tensor("h_prev", in.h_prev, Shape{B, H}, ops::kStateDims, dt);
  const std::array<Check::Arg, 4> outputs{{{"r", out.r}, {"u", out.u}, {"c", out.c}, {"h", out.h}}};
  check.outputs(outputs, Shape{B, H}, dt);
  layer::CallArgs& args = m.args;
  args.clear();
  args.input("x", in.x);
  args.input("h_prev", in.h_prev);
  args.outputs(outputs);
  void* ws = prepare_workspace(check, *this, B, args, workspace, own_workspace_);
  const GRUBlockCellGradInputs op_in = m.op_inputs(in.x, in.h_prev);
  layer::with_dtype(dt, [&]<typename T>() {
    auto a = ops::gru_fwd_args<GRUCellFwdArgs, T>(op_in, out);
    m.plan<T>(a, shape_, ws);
    ops::run_kernel(GRUDims{B, I, H}, a);
  });
}

void GRUCellLayer::backward(const GRUCellLayerGradInputs& in, const GRUCellLayerGradOutputs& out,
                            LayerWorkspace workspace) {
  Impl& m = *impl_;
  const Check check{name_, "backward", m.backward_name.c_str()};
  const layer::OneCall one(check, m.busy);
  if (!has_weights_) check.fail("set_weights has not been called");
  const std::int64_t B = batch_of(check, shape_, 0, in.x);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const std::array<Check::Arg, 5> steps{
      {{"h_prev", in.h_prev}, {"r", in.r}, {"u", in.u}, {"c", in.c}, {"h_grad", in.h_grad}}};
  check.tensors(steps, Shape{B, H}, ops::kStateDims, dt);
  layer::CallArgs& args = m.args;
  args.clear();
  args.input("x", in.x);
  args.inputs(steps);
  check.output("x_grad", out.x_grad, Shape{B, I}, dt);
  args.output("x_grad", out.x_grad);
  check.output("h_prev_grad", out.h_prev_grad, Shape{B, H}, dt);
  args.output("h_prev_grad", out.h_prev_grad);
  check.output("w_ru_grad", out.w_ru_grad, Shape{I + H, 2 * H}, dt);
  args.output("w_ru_grad", out.w_ru_grad);
  check.output("w_c_grad", out.w_c_grad, Shape{I + H, H}, dt);
  args.output("w_c_grad", out.w_c_grad);
  check.output("b_ru_grad", out.b_ru_grad, Shape{2 * H}, dt);
  args.output("b_ru_grad", out.b_ru_grad);
  check.output("b_c_grad", out.b_c_grad, Shape{H}, dt);
  args.output("b_c_grad", out.b_c_grad);
  const bool gates = !absent(out.d_c_bar) || !absent(out.d_r_bar_u_bar);
  if (gates) {
    check.output("d_c_bar", out.d_c_bar, Shape{B, H}, dt);
    check.output("d_r_bar_u_bar", out.d_r_bar_u_bar, Shape{B, 2 * H}, dt);
    args.output("d_c_bar", out.d_c_bar);
    args.output("d_r_bar_u_bar", out.d_r_bar_u_bar);
  }
  void* ws = prepare_workspace(check, *this, B, args, workspace, own_workspace_);
  GRUBlockCellGradInputs op_in = m.op_inputs(in.x, in.h_prev);
  op_in.r = in.r;
  op_in.u = in.u;
  op_in.c = in.c;
  op_in.d_h = in.h_grad;
  const GRUBlockCellBackwardOutputs op_out{out.x_grad,   out.h_prev_grad, out.w_ru_grad,
                                           out.w_c_grad, out.b_ru_grad,   out.b_c_grad};
  layer::with_dtype(dt, [&]<typename T>() {
    T* const scratch = static_cast<T*>(ws) + cpu::gru_cell_workspace_elems(B, I, H);
    T* const d_c_bar = gates ? static_cast<T*>(out.d_c_bar.data) : scratch;  // [B, H]
    T* const d_ru = gates ? static_cast<T*>(out.d_r_bar_u_bar.data) : scratch + B * H;
    auto a = ops::gru_cell_backward_args<T>(op_in, op_out, d_c_bar, d_ru);
    m.plan<T>(a, shape_, ws);
    ops::run_kernel(GRUDims{B, I, H}, a);
  });
}

}  // namespace blockrnn
