// The layer objects of blockrnn/layer.h: BlockLSTM(V2), BlockGRU and BlockGRUResetAfter set up
// once (validated sizes and attrs, weights copied and packed: cpu::*Plan, a workspace sized for
// the largest call) and run many times on the kernels of src/cpu (src/ref in reference mode),
// exactly as the one-shot ops of src/ops run them.
#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <string>
#include <utility>

#include "blockrnn/context.h"
#include "blockrnn/layer.h"
#include "core/isa.h"
#include "cpu/sequence_plan.h"
#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"
#include "layer/layer_common.h"
#include "ops/kernel_args.h"
#include "ops/op_impl.h"

namespace blockrnn {

namespace layer {

void Check::fail(const std::string& msg) const {
  throw Error(ErrorCode::kInvalidArgument, std::string(layer) + "." + fn + ": " + msg);
}

void Check::tensor(const char* arg, const TensorView& t, const Shape& want, const char* dims,
                   DType dtype) const {
  if (t.shape != want) {
    fail(std::string(arg) + " must have shape " + want.to_string() + " (" + dims + "), got " +
         t.shape.to_string());
  }
  if (t.dtype != dtype) {
    fail(std::string(arg) + " must have dtype " + dtype_name(dtype) + " (the layer's), got " +
         dtype_name(t.dtype));
  }
  if (t.data == nullptr && want.num_elements() > 0) fail(std::string(arg) + " has no data");
}

CallDims check_call(const Check& check, const LayerShape& shape, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths) {
  if (x.shape.rank() != 3) {
    check.fail("x must have rank 3 [time, batch, input_size], got shape " + x.shape.to_string());
  }
  CallDims d;
  d.T = x.shape[0];
  d.B = x.shape[1];
  if (d.T < 0 || d.T > shape.max_time) {
    check.fail("x has " + std::to_string(d.T) + " time steps, the layer was created for at most " +
               std::to_string(shape.max_time) + " (max_time)");
  }
  if (d.B < 0 || d.B > shape.max_batch) {
    check.fail("x has batch " + std::to_string(d.B) + ", the layer was created for at most " +
               std::to_string(shape.max_batch) + " (max_batch)");
  }
  check.tensor("x", x, Shape{d.T, d.B, shape.input_size}, "time, batch, input_size", shape.dtype);
  d.S = seq_len_max.value_or(d.T);
  if (d.S < 0 || d.S > d.T) {
    check.fail("seq_len_max must be between 0 and " + std::to_string(d.T) + " (time of x), got " +
               std::to_string(d.S));
  }
  if (!is_absent_input(seq_lengths)) {
    if (seq_lengths.shape != Shape{d.B} || seq_lengths.dtype != DType::kInt64 ||
        (seq_lengths.data == nullptr && d.B > 0)) {
      check.fail("seq_lengths must be an int64 tensor of shape [" + std::to_string(d.B) +
                 "] (batch), got " + dtype_name(seq_lengths.dtype) + " " +
                 seq_lengths.shape.to_string());
    }
    const auto* L = static_cast<const std::int64_t*>(seq_lengths.data);
    for (std::int64_t b = 0; b < d.B; ++b) {
      if (L[b] < 0 || L[b] > d.T) {
        check.fail("seq_lengths must be between 0 and " + std::to_string(d.T) +
                   " (time of x), got seq_lengths[" + std::to_string(b) +
                   "] = " + std::to_string(L[b]));
      }
    }
    d.lengths = core::effective_lengths(seq_lengths, d.S);
  }
  return d;
}

void* call_workspace(const Check& check, const LayerShape& shape, LayerWorkspace given,
                     std::size_t bytes, Tensor& own) {
  if (given.data != nullptr) {
    if (given.bytes < bytes) {
      check.fail("the workspace has " + std::to_string(given.bytes) + " bytes, this call needs " +
                 std::to_string(bytes) + " (workspace_bytes(T, B))");
    }
    if (reinterpret_cast<std::uintptr_t>(given.data) % dtype_size(shape.dtype) != 0) {
      check.fail("the workspace must be aligned to " + std::to_string(dtype_size(shape.dtype)) +
                 " bytes");
    }
    return given.data;
  }
  if (shape.caller_workspace) {
    check.fail("the layer was created with caller_workspace: pass a workspace of " +
               std::to_string(bytes) + " bytes");
  }
  return own.data();
}

CallDims begin_call(const Check& check, const SequenceLayer& layer, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths,
                    LayerWorkspace given, Tensor& own) {
  if (!layer.has_weights()) check.fail("set_weights has not been called");
  CallDims c = check_call(check, layer.shape(), x, seq_len_max, seq_lengths);
  c.workspace = call_workspace(check, layer.shape(), given, layer.workspace_bytes(c.S, c.B), own);
  return c;
}

Tensor copy_weight(const Check& check, const char* arg, const TensorView& t, const Shape& want,
                   const char* dims, DType dtype) {
  check.tensor(arg, t, want, dims, dtype);
  Tensor copy(dtype, want);
  if (copy.num_bytes() > 0)
    std::copy_n(static_cast<const char*>(t.data), copy.num_bytes(),
                static_cast<char*>(copy.data()));
  return copy;
}

}  // namespace layer

using core::data;
using layer::Check;

// ---- SequenceLayer ----------------------------------------------------------------------------

SequenceLayer::SequenceLayer(const char* name, const LayerShape& shape,
                             std::int64_t (*elems)(std::int64_t, std::int64_t, std::int64_t,
                                                   std::int64_t))
    : name_(name), shape_(shape), elems_(elems) {
  const Check check{name, "create"};
  if (shape.input_size < 0) {
    check.fail("input_size must be >= 0, got " + std::to_string(shape.input_size));
  }
  if (shape.hidden_size < 1) {
    check.fail("hidden_size must be >= 1, got " + std::to_string(shape.hidden_size));
  }
  if (shape.max_time < 0 || shape.max_batch < 0) {
    check.fail("max_time and max_batch must be >= 0, got " + std::to_string(shape.max_time) +
               " and " + std::to_string(shape.max_batch));
  }
  if (shape.dtype != DType::kFloat32 && shape.dtype != DType::kFloat64) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(name) + ".create: dtype must be float32 or float64, got " +
                    dtype_name(shape.dtype) + " (float16: use the one-shot ops)");
  }
  const std::int64_t I = shape.input_size, H = shape.hidden_size;
  const std::int64_t lim = std::int64_t(1) << 40;  // keeps the workspace bound from overflowing
  if (I > lim || H > lim || shape.max_time > lim || shape.max_batch > lim ||
      double(shape.max_time) * double(shape.max_batch) * double(I + 8 * H + 64) > 1e17) {
    throw Error(ErrorCode::kResourceExhausted,
                std::string(name) + ".create: the sizes are too large for a workspace");
  }
  if (!shape.caller_workspace) {
    own_workspace_ = Tensor(shape.dtype, {elems(shape.max_time, shape.max_batch, I, H)});
  }
}

SequenceLayer::~SequenceLayer() = default;

std::size_t SequenceLayer::workspace_bytes(std::int64_t T, std::int64_t B) const {
  return static_cast<std::size_t>(elems_(T, B, shape_.input_size, shape_.hidden_size)) *
         dtype_size(shape_.dtype);
}

// ---- Each op's part --------------------------------------------------------------------------

namespace layer {

// One weight of a layer: set_weights' argument `name`, of shape [in_rows·I + h_rows·H, cols·H]
// ([cols·H] when both row counts are 0), and the gradient `grad` the backward writes.
struct WeightSpec {
  const char* name;
  const char* grad;
  int in_rows, h_rows, cols;
  const char* dims;                 // the shape in words, for errors
  const char* grad_dims = nullptr;  // the gradient's, where worded otherwise
  Shape shape(std::int64_t I, std::int64_t H) const {
    if (in_rows == 0 && h_rows == 0) return Shape{cols * H};
    return Shape{in_rows * I + h_rows * H, cols * H};
  }
};

// The ops' argument builders read the inputs by name: a layer's per-call inputs and its weights.
template <typename In, typename Weights>
struct WithWeights : In, Weights {};

// The named views of a call's struct, for the checks.
template <std::size_t N>
using Named = std::array<Check::Arg, N>;

// An op's plan (Plan<T>, packing its first kPacked weights) and workspace bound (elements of T).
template <template <typename> class P, std::size_t kPackedWeights, auto kWorkspaceElems>
struct PlannedOp {
  template <typename T>
  using Plan = P<T>;
  static constexpr std::size_t kPacked = kPackedWeights;
  static constexpr auto workspace_elems = kWorkspaceElems;
};

// What differs between the layers, by the op's outputs: the plan and workspace (PlannedOp), the
// weights (set_weights' order), the per-call views, and the kernels' arguments. The plan packs w
// (LSTM), w_ru and w_c (GRU), w_i and w_h (GRU reset-after).
template <typename Outputs>
struct Op;

template <>
struct Op<BlockLSTMOutputs> : PlannedOp<LSTMPlan, 1, cpu::block_lstm_workspace_elems> {
  // The attrs, resolved at creation.
  struct Config {
    double forget_bias = 0, cell_clip = 0;
    bool use_peephole = false;
    LSTMLayout layout = LSTMLayout::kICFO;
  };
  struct Weights {
    TensorView w, b, wci, wcf, wco;
  };
  static constexpr WeightSpec kWeights[] = {
      {"w", "w_grad", 1, 1, 4, "input_size + hidden_size, 4 * hidden"},
      {"b", "b_grad", 0, 0, 4, "4 * hidden_size"},
      {"wci", "wci_grad", 0, 0, 1, "hidden_size"},
      {"wcf", "wcf_grad", 0, 0, 1, "hidden_size"},
      {"wco", "wco_grad", 0, 0, 1, "hidden_size"}};

  template <typename In>
  static Named<2> states(const In& in) {
    return {{{"cs_prev", in.cs_prev}, {"h_prev", in.h_prev}}};
  }
  static Named<7> outputs(const BlockLSTMOutputs& o) {
    return {
        {{"i", o.i}, {"cs", o.cs}, {"f", o.f}, {"o", o.o}, {"ci", o.ci}, {"co", o.co}, {"h", o.h}}};
  }
  static Named<9> steps(const LSTMLayerGradInputs& in) {
    return {{{"i", in.i},
             {"cs", in.cs},
             {"f", in.f},
             {"o", in.o},
             {"ci", in.ci},
             {"co", in.co},
             {"h", in.h},
             {"cs_grad", in.cs_grad},
             {"h_grad", in.h_grad}}};
  }
  static Named<2> state_grads(const BlockLSTMGradOutputs& o) {
    return {{{"cs_prev_grad", o.cs_prev_grad}, {"h_prev_grad", o.h_prev_grad}}};
  }
  static std::array<TensorView, 5> weight_grads(const BlockLSTMGradOutputs& o) {
    return {o.w_grad, o.b_grad, o.wci_grad, o.wcf_grad, o.wco_grad};
  }

  template <typename T>
  static auto kernel_args(const auto& in, const BlockLSTMOutputs& out, const Config& c, DType dt) {
    return ops::lstm_fwd_args<BlockLSTMFwdArgs, T>(in, out, c.forget_bias, c.cell_clip,
                                                   c.use_peephole, c.layout, dt);
  }
  template <typename T>
  static auto kernel_args(const auto& in, const BlockLSTMGradOutputs& out, const Config& c, DType) {
    return ops::block_lstm_bwd_args<T>(in, out, c.use_peephole, c.layout);
  }
};

// The GRU layers' common part: no attrs, the initial state h_prev.
struct GRUOp {
  struct Config {};
  template <typename In>
  static Named<1> states(const In& in) {
    return {{{"h_prev", in.h_prev}}};
  }
  template <typename GradOut>
  static Named<1> state_grads(const GradOut& o) {
    return {{{"h_prev_grad", o.h_prev_grad}}};
  }
};

template <>
struct Op<BlockGRUOutputs> : GRUOp, PlannedOp<GRUPlan, 2, cpu::block_gru_workspace_elems> {
  struct Weights {
    TensorView w_ru, w_c, b_ru, b_c;
  };
  static constexpr WeightSpec kWeights[] = {
      {"w_ru", "w_ru_grad", 1, 1, 2, "input_size + hidden_size, 2 * hidden_size",
       "input_size + hidden, 2 * hidden"},
      {"w_c", "w_c_grad", 1, 1, 1, "input_size + hidden_size, hidden",
       "input_size + hidden, hidden"},
      {"b_ru", "b_ru_grad", 0, 0, 2, "2 * hidden_size"},
      {"b_c", "b_c_grad", 0, 0, 1, "hidden_size"}};

  static Named<4> outputs(const BlockGRUOutputs& o) {
    return {{{"r", o.r}, {"u", o.u}, {"c", o.c}, {"h", o.h}}};
  }
  static Named<5> steps(const GRULayerGradInputs& in) {
    return {{{"r", in.r}, {"u", in.u}, {"c", in.c}, {"h", in.h}, {"h_grad", in.h_grad}}};
  }
  static std::array<TensorView, 4> weight_grads(const BlockGRUGradOutputs& o) {
    return {o.w_ru_grad, o.w_c_grad, o.b_ru_grad, o.b_c_grad};
  }

  template <typename T>
  static auto kernel_args(const auto& in, const BlockGRUOutputs& out, const Config&, DType) {
    return ops::gru_fwd_args<BlockGRUFwdArgs, T>(in, out);
  }
  template <typename T>
  static auto kernel_args(const auto& in, const BlockGRUGradOutputs& out, const Config&, DType) {
    return ops::block_gru_bwd_args<T>(in, out);
  }
};

template <>
struct Op<BlockGRUResetAfterOutputs>
    : GRUOp, PlannedOp<GRUResetAfterPlan, 2, cpu::block_gru_reset_after_workspace_elems> {
  struct Weights {
    TensorView w_i, w_h, b_i, b_h;
  };
  static constexpr WeightSpec kWeights[] = {
      {"w_i", "w_i_grad", 1, 0, 3, "input_size, 3 * hidden_size"},
      {"w_h", "w_h_grad", 0, 1, 3, "hidden_size, 3 * hidden_size"},
      {"b_i", "b_i_grad", 0, 0, 3, "3 * hidden_size"},
      {"b_h", "b_h_grad", 0, 0, 3, "3 * hidden_size"}};

  static Named<5> outputs(const BlockGRUResetAfterOutputs& o) {
    return {{{"r", o.r}, {"u", o.u}, {"n", o.n}, {"hn", o.hn}, {"h", o.h}}};
  }
  static Named<6> steps(const GRUResetAfterLayerGradInputs& in) {
    return {
        {{"r", in.r}, {"u", in.u}, {"n", in.n}, {"hn", in.hn}, {"h", in.h}, {"h_grad", in.h_grad}}};
  }
  static std::array<TensorView, 4> weight_grads(const BlockGRUResetAfterGradOutputs& o) {
    return {o.w_i_grad, o.w_h_grad, o.b_i_grad, o.b_h_grad};
  }

  template <typename T>
  static auto kernel_args(const auto& in, const BlockGRUResetAfterOutputs& out, const Config&,
                          DType) {
    return ops::gru_reset_after_fwd_args<T>(in, out);
  }
  template <typename T>
  static auto kernel_args(const auto& in, const BlockGRUResetAfterGradOutputs& out, const Config&,
                          DType) {
    return ops::gru_reset_after_bwd_args<T>(in, out);
  }
};

// Runs the kernel of a layer's call on its arguments `a` (ops::run_kernel: the reference in
// reference mode, else the fast kernel). The layer's Impl holds `plans` (Plans) and packs a plan
// with pack(plan, shape); the fast kernel runs on the plan (repacked when the ISA path changed
// since it was packed) and the call's workspace, which the reference does not use.
template <typename T, typename Args, typename Impl>
void run(Args& a, const CallDims& c, Impl& impl, const LayerShape& shape) {
  if (!force_reference()) {
    auto& plan = impl.plans.template get<T>();
    if (plan.isa != core::active_isa()) impl.pack(plan, shape);
    a.plan = &plan;
    a.workspace = static_cast<T*>(c.workspace);
  }
  ops::run_kernel(SequenceDims{c.T, c.B, shape.input_size, shape.hidden_size, c.S, c.lengths}, a);
}

}  // namespace layer

// ---- BlockLayer -------------------------------------------------------------------------------

template <class In, class Out, class GradIn, class GradOut>
struct BlockLayer<In, Out, GradIn, GradOut>::Impl {
  using Op = layer::Op<Out>;
  std::array<Tensor, std::size(Op::kWeights)> own;
  typename Op::Weights weights;  // views of `own`
  layer::Plans<Op::template Plan> plans;
  typename Op::Config config;

  template <typename T>
  void pack(typename Op::template Plan<T>& p, const LayerShape& s) {
    pack(p, s, std::make_index_sequence<Op::kPacked>());
  }
  template <typename T, std::size_t... K>
  void pack(typename Op::template Plan<T>& p, const LayerShape& s, std::index_sequence<K...>) {
    p.pack(s.input_size, s.hidden_size, own[K].template data_as<T>()...);
  }
  template <std::size_t... K>
  void view_weights(std::index_sequence<K...>) {
    weights = {own[K].view()...};
  }

  // The checks every call starts with: begin_call's, then the initial states.
  template <typename CallIn>
  layer::CallDims begin(const Check& check, const SequenceLayer& l, const CallIn& in,
                        LayerWorkspace given, Tensor& own_workspace) const {
    const layer::CallDims c = layer::begin_call(check, l, in, given, own_workspace);
    check.tensors(Op::states(in), Shape{c.B, l.shape().hidden_size}, "batch, hidden_size",
                  l.shape().dtype);
    return c;
  }
  // Runs the kernel of a call (Op::kernel_args: the forward's or the backward's, by out's
  // type) on its inputs and the weights.
  template <typename CallIn, typename CallOut>
  void run(const CallIn& in, const CallOut& out, const layer::CallDims& c, const LayerShape& s) {
    layer::with_dtype(s.dtype, [&]<typename T>() {
      auto a = Op::template kernel_args<T>(
          layer::WithWeights<CallIn, typename Op::Weights>{in, weights}, out, config, s.dtype);
      layer::run<T>(a, c, *this, s);
    });
  }
};

template <class In, class Out, class GradIn, class GradOut>
BlockLayer<In, Out, GradIn, GradOut>::BlockLayer(const char* name, const LayerShape& shape)
    : SequenceLayer(name, shape, Impl::Op::workspace_elems), impl_(std::make_unique<Impl>()) {}

template <class In, class Out, class GradIn, class GradOut>
BlockLayer<In, Out, GradIn, GradOut>::~BlockLayer() = default;

template <class In, class Out, class GradIn, class GradOut>
void BlockLayer<In, Out, GradIn, GradOut>::set_weight_views(std::span<const TensorView> weights) {
  const Check check{name_, "set_weights"};
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  Impl& m = *impl_;
  for (std::size_t k = 0; k < m.own.size(); ++k) {
    const layer::WeightSpec& w = Impl::Op::kWeights[k];
    m.own[k] = k < weights.size() ? layer::copy_weight(check, w.name, weights[k], w.shape(I, H),
                                                       w.dims, shape_.dtype)
                                  : Tensor(shape_.dtype, w.shape(I, H));
  }
  m.view_weights(std::make_index_sequence<std::size(Impl::Op::kWeights)>());
  layer::pack_plan(m, shape_);
  has_weights_ = true;
}

template <class In, class Out, class GradIn, class GradOut>
void BlockLayer<In, Out, GradIn, GradOut>::forward(const In& in, const Out& out,
                                                   LayerWorkspace workspace) {
  const Check check{name_, "forward"};
  const layer::CallDims c = impl_->begin(check, *this, in, workspace, own_workspace_);
  check.tensors(Impl::Op::outputs(out), Shape{c.T, c.B, shape_.hidden_size}, "time, batch, hidden",
                shape_.dtype);
  impl_->run(in, out, c, shape_);
}

template <class In, class Out, class GradIn, class GradOut>
void BlockLayer<In, Out, GradIn, GradOut>::backward(const GradIn& in, const GradOut& out,
                                                    LayerWorkspace workspace) {
  using Op = typename Impl::Op;
  const Check check{name_, "backward"};
  const layer::CallDims c = impl_->begin(check, *this, in, workspace, own_workspace_);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  check.tensors(Op::steps(in), Shape{c.T, c.B, H}, "time, batch, hidden", dt);
  check.tensor("x_grad", out.x_grad, in.x.shape, "time, batch, input_size", dt);
  check.tensors(Op::state_grads(out), Shape{c.B, H}, "batch, hidden_size", dt);
  const auto grads = Op::weight_grads(out);
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const layer::WeightSpec& w = Op::kWeights[k];
    check.tensor(w.grad, grads[k], w.shape(I, H), w.grad_dims ? w.grad_dims : w.dims, dt);
  }
  impl_->run(in, out, c, shape_);
}

template class BlockLayer<LSTMLayerInputs, BlockLSTMOutputs, LSTMLayerGradInputs,
                          BlockLSTMGradOutputs>;
template class BlockLayer<GRULayerInputs, BlockGRUOutputs, GRULayerGradInputs, BlockGRUGradOutputs>;
template class BlockLayer<GRULayerInputs, BlockGRUResetAfterOutputs, GRUResetAfterLayerGradInputs,
                          BlockGRUResetAfterGradOutputs>;

// ---- The layer classes: attrs and set_weights ---------------------------------------------------

namespace {
const char* lstm_name(const LSTMLayerAttrs& a) {
  return a.v2 ? "LSTMLayer(V2)" : "LSTMLayer";
}
}  // namespace

LSTMLayer::LSTMLayer(const LayerShape& shape, const LSTMLayerAttrs& attrs)
    : BlockLayer(lstm_name(attrs), shape), attrs_(attrs) {
  const Check check{name_, "create"};
  if (attrs.v2 && attrs.forget_bias.has_value() && *attrs.forget_bias != 0.0) {
    check.fail("forget_bias must be unset or 0 for BlockLSTMV2 (it has no forget bias), got " +
               std::to_string(*attrs.forget_bias));
  }
  Impl::Op::Config& c = impl_->config;
  c.forget_bias = attrs.v2 ? 0.0 : attrs.forget_bias.value_or(1.0);
  c.cell_clip = attrs.cell_clip.value_or(attrs.v2 ? 0.0 : 3.0);
  c.use_peephole = attrs.use_peephole;
  c.layout = attrs.v2 ? LSTMLayout::kIFCO : LSTMLayout::kICFO;
  if (std::isnan(c.forget_bias) || std::isinf(c.forget_bias)) {
    check.fail("forget_bias must be finite, got " + std::to_string(c.forget_bias));
  }
}

void LSTMLayer::set_weights(TensorView w, TensorView b, TensorView wci, TensorView wcf,
                            TensorView wco) {
  const TensorView weights[] = {w, b, wci, wcf, wco};
  set_weight_views(std::span(weights).first(attrs_.use_peephole ? 5 : 2));
}

GRULayer::GRULayer(const LayerShape& shape) : BlockLayer("GRULayer", shape) {}

void GRULayer::set_weights(TensorView w_ru, TensorView w_c, TensorView b_ru, TensorView b_c) {
  const TensorView weights[] = {w_ru, w_c, b_ru, b_c};
  set_weight_views(weights);
}

GRUResetAfterLayer::GRUResetAfterLayer(const LayerShape& shape)
    : BlockLayer("GRUResetAfterLayer", shape) {}

void GRUResetAfterLayer::set_weights(TensorView w_i, TensorView w_h, TensorView b_i,
                                     TensorView b_h) {
  const TensorView weights[] = {w_i, w_h, b_i, b_h};
  set_weight_views(weights);
}

}  // namespace blockrnn
