// The layer objects of blockrnn/layer.h: BlockLSTM(V2), BlockGRU and BlockGRUResetAfter set up
// once (validated sizes and attrs, weights copied and packed: cpu::*Plan, a workspace sized for
// the largest call) and run many times on the kernels of src/cpu (src/ref in reference mode),
// exactly as the one-shot ops of src/ops run them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <utility>

#include "blockrnn/context.h"
#include "blockrnn/layer.h"
#include "core/isa.h"
#include "cpu/sequence_common.h"
#include "cpu/sequence_plan.h"
#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"
#include "layer/layer_common.h"
#include "ops/checks.h"
#include "ops/kernel_args.h"
#include "ops/op_impl.h"

namespace blockrnn {

namespace layer {

void Check::fail(const std::string& msg) const {
  throw Error(ErrorCode::kInvalidArgument, std::string(layer) + "." + fn + ": " + msg);
}

OneCall::OneCall(const Check& check, std::atomic<bool>& busy) : busy_(busy) {
  if (busy_.exchange(true, std::memory_order_acquire)) {
    check.fail("another call on this object is running (one call at a time per object)");
  }
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

void Check::output(const char* arg, const TensorView& t, const Shape& want, DType dtype) const {
  const char* const names[] = {arg};
  // The check only reads the view: it is the caller's writable output.
  const MutableTensorView views[] = {
      MutableTensorView(const_cast<void*>(t.data), t.dtype, t.shape)};
  std::string buffer;
  core::check_outputs(op_name(buffer), names, dtype, std::span(&want, 1), views);
}

CallDims check_call(const Check& check, const LayerShape& shape, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths) {
  check.rank("x", x, 3);
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
  // seq_len_max and seq_lengths: the sequence ops' rules and messages (ops/checks.h).
  std::string buffer;
  const core::Checker op(check.op_name(buffer));
  d.S = seq_len_max.value_or(d.T);
  ops::check_seq_len_max_value(op, d.S, d.T);
  ops::check_seq_lengths(op, seq_lengths, d.B, d.T);
  if (!is_absent_input(seq_lengths)) {
    d.has_lengths = true;
    d.lengths = core::effective_lengths(seq_lengths, d.S);
  }
  return d;
}

CallDims begin_call(const Check& check, const SequenceLayer& layer, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths) {
  if (!layer.has_weights()) check.fail("set_weights has not been called");
  return check_call(check, layer.shape(), x, seq_len_max, seq_lengths);
}

void CallArgs::clear() {
  in_names_.clear();
  out_names_.clear();
  ins_.clear();
  outs_.clear();
}

void CallArgs::input(const char* name, const TensorView& v) {
  if (is_absent_input(v)) return;
  in_names_.push_back(name);
  ins_.push_back(v);
}

void CallArgs::output(const char* name, const TensorView& v) {
  out_names_.push_back(name);
  // The checks only compare addresses: the view is the caller's writable output.
  outs_.push_back(MutableTensorView(const_cast<void*>(v.data), v.dtype, v.shape));
}

void CallArgs::check_no_alias(const Check& check) const {
  std::string buffer;
  core::check_no_alias(check.op_name(buffer), in_names_, ins_, out_names_, outs_);
}

void grow(Tensor& t, DType dtype, std::int64_t elems) {
  if (t.num_elements() >= elems && t.dtype() == dtype) return;
  t = Tensor();  // free first: the peak is the new buffer, not both
  t = Tensor(dtype, {elems});
}

void check_allocation(const Check& check, std::span<const ExtraBytes> extra) {
  std::string buffer;
  core::check_memory(check.op_name(buffer), {}, {}, core::CallShape(), false, extra);
}

void take_given_workspace(const Check& check, LayerWorkspace given, std::size_t bytes, DType dtype,
                          bool caller_workspace, const char* formula, CallArgs& args) {
  const std::size_t elem = dtype_size(dtype);
  if (given.data != nullptr) {
    if (given.bytes < bytes) {
      check.fail("the workspace has " + std::to_string(given.bytes) + " bytes, this call needs " +
                 std::to_string(bytes) + " (" + formula + ")");
    }
    if (reinterpret_cast<std::uintptr_t>(given.data) % elem != 0) {
      check.fail("the workspace must be aligned to " + std::to_string(elem) + " bytes");
    }
    args.output("workspace",
                TensorView(given.data, dtype, Shape{static_cast<std::int64_t>(bytes / elem)}));
  } else if (caller_workspace && bytes > 0) {  // a call that needs none may pass none
    check.fail("the layer was created with caller_workspace: pass a workspace of " +
               std::to_string(bytes) + " bytes");
  }
}

void prepare_call(const Check& check, const SequenceLayer& layer, CallDims& c, CallArgs& args,
                  LayerWorkspace given, Tensor& own) {
  const LayerShape& shape = layer.shape();
  // float16 and bfloat16 stage x and every output through the workspace: it covers all T steps.
  const std::size_t bytes =
      layer.workspace_bytes(core::is_16bit_float(shape.dtype) ? c.T : c.S, c.B);
  const DType ws_dtype = compute_dtype(shape.dtype);
  const std::size_t elem = dtype_size(ws_dtype);
  take_given_workspace(check, given, bytes, ws_dtype, shape.caller_workspace,
                       "workspace_bytes(T, B)", args);
  args.check_no_alias(check);
  // The one-shot op's bound for the call's shapes (what its kernels allocate), plus what the
  // layer's own workspace grows by.
  core::CallShape call;
  call.dtype = shape.dtype;
  call.sizes(c.S, c.B, shape.input_size, shape.hidden_size);
  call.lengths = c.has_lengths;
  const bool grows = given.data == nullptr && own.num_bytes() < bytes;
  std::string buffer;
  const char* op = check.op_name(buffer);
  if (grows) {
    const ExtraBytes growth{"the layer's workspace, grown to this call",
                            static_cast<long long>(bytes)};
    core::check_memory(op, args.input_views(), {}, call, false, {&growth, 1});
    grow(own, ws_dtype, static_cast<std::int64_t>(bytes / elem));
  } else {
    core::check_memory(op, args.input_views(), {}, call, false, {});
  }
  c.workspace = given.data != nullptr ? given.data : own.data();
}

void copy_weight(const Check& check, const char* arg, const TensorView& t, const Shape& want,
                 const char* dims, DType dtype, Tensor& own) {
  check.tensor(arg, t, want, dims, dtype);
  if (own.dtype() != compute_dtype(dtype) || own.shape() != want) {
    own = Tensor();  // free first: the peak is the new copy, not both
    own = Tensor(compute_dtype(dtype), want);
  }
  if (core::is_16bit_float(dtype)) {
    core::widen_to_float(dtype, t.data, own.data_as<float>(), own.num_elements());
  } else if (own.num_bytes() > 0) {
    std::copy_n(static_cast<const char*>(t.data), own.num_bytes(), static_cast<char*>(own.data()));
  }
}

namespace {
// "1.2e+21 bytes" for the messages of sizes past any memory.
std::string approx_bytes(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.3g bytes", bytes);
  return buf;
}
}  // namespace

void check_sizes(const Check& check, std::int64_t I, std::int64_t H, std::int64_t max_time,
                 std::int64_t max_batch) {
  // Every op's workspace for S steps and B examples is under S·B·(I + 9H + 32) + B·(2H + 16)
  // elements (cpu/sequence_plan.cc) and its weights under (I + H)·4H: when that is addressable
  // in bytes for the largest call, every size a call computes fits int64. A bound, not an
  // allocation: nothing is sized for max_time × max_batch.
  const double i = double(I), h = double(H), b = double(max_batch);
  const double call = double(max_time) * b * (i + 9.0 * h + 32.0) + b * (2.0 * h + 16.0);
  const double weights = (i + h) * 4.0 * h;
  const double addressable = 0x1p60;  // bytes, with room for float64 and the packed panels
  if (8.0 * weights > addressable) {
    throw Error(ErrorCode::kResourceExhausted,
                check.op() + ": input_size " + std::to_string(I) + " and hidden_size " +
                    std::to_string(H) + " are too large: the weights alone would need " +
                    approx_bytes(8.0 * weights) + ", more than can be addressed");
  }
  if (8.0 * call > addressable) {
    throw Error(ErrorCode::kResourceExhausted,
                check.op() + ": max_time " + std::to_string(max_time) + " and max_batch " +
                    std::to_string(max_batch) + " are too large: a call of that size would need " +
                    approx_bytes(8.0 * call) +
                    " of workspace, more than can be addressed (input_size " + std::to_string(I) +
                    ", hidden_size " + std::to_string(H) + ")");
  }
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
  if (shape.dtype != DType::kFloat32 && shape.dtype != DType::kFloat64 &&
      !core::is_16bit_float(shape.dtype)) {
    check.fail(std::string("dtype must be float16, bfloat16, float32 or float64, got ") +
               dtype_name(shape.dtype));
  }
  layer::check_sizes(check, shape.input_size, shape.hidden_size, shape.max_time, shape.max_batch);
}

SequenceLayer::~SequenceLayer() = default;

std::size_t SequenceLayer::workspace_bytes(std::int64_t T, std::int64_t B) const {
  if (T < 0 || T > shape_.max_time || B < 0 || B > shape_.max_batch) {
    Check{name_, "workspace_bytes"}.fail(
        "T and B must be in [0, " + std::to_string(shape_.max_time) + "] and [0, " +
        std::to_string(shape_.max_batch) + "] (max_time, max_batch), got " + std::to_string(T) +
        " and " + std::to_string(B));
  }
  return static_cast<std::size_t>(elems_(T, B, shape_.input_size, shape_.hidden_size)) *
         dtype_size(layer::compute_dtype(shape_.dtype));
}

// ---- Each op's part --------------------------------------------------------------------------

namespace layer {

// One weight of a layer: set_weights' argument `name`, of shape [in_rows·I + h_rows·H, cols·H]
// ([cols·H] when both row counts are 0), and the gradient `grad` the backward writes.
struct WeightSpec {
  const char* name;
  const char* grad;
  int in_rows, h_rows, cols;
  const char* dims;  // the shape in words, for set_weights' errors
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

// A family's plan (Plan<T>, packing its first kPacked weights) and workspace bound (elements of
// T).
// kPackedColumns·H columns of weights are packed (LSTM: w's 4H; GRU: w_ru's and w_c's 3H; GRU
// reset-after: w_i's and w_h's 3H).
template <template <typename> class P, std::size_t kPackedWeights, int kPackedColumns,
          auto kWorkspaceElems, auto kBf16FwdWorkspaceFloats, auto kBf16BwdWorkspaceFloats>
struct PlannedFamily {
  template <typename T>
  using Plan = P<T>;
  static constexpr std::size_t kPacked = kPackedWeights;
  static constexpr int kPackedCols = kPackedColumns;
  static constexpr auto workspace_elems = kWorkspaceElems;
  // The bfloat16 product operands (the kernel's bf16_workspace) of a forward and of a backward,
  // in floats.
  static constexpr auto bf16_fwd_workspace_floats = kBf16FwdWorkspaceFloats;
  static constexpr auto bf16_bwd_workspace_floats = kBf16BwdWorkspaceFloats;
};

// A layer family, one per sequence op (named by the op's outputs): what differs between the
// layers: the plan and workspace (PlannedFamily), the weights (set_weights' order), the per-call
// views, and the kernels' arguments. The plan packs w (LSTM), w_ru and w_c (GRU), w_i and w_h
// (GRU reset-after).
template <typename Outputs>
struct Family;

template <>
struct Family<BlockLSTMOutputs> : PlannedFamily<LSTMPlan, 1, 4, cpu::block_lstm_workspace_elems,
                                                cpu::block_lstm_bf16_fwd_workspace_floats,
                                                cpu::block_lstm_bf16_bwd_workspace_floats> {
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
      {"w", "w_grad", 1, 1, 4, "input_size + hidden_size, 4 * hidden_size"},
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
  // f on each floating view of a call's struct (a float16 or bfloat16 call stages them).
  template <typename F>
  static void float_views(LSTMLayerInputs& in, F&& f) {
    for (TensorView* v : {&in.x, &in.cs_prev, &in.h_prev}) f(*v);
  }
  template <typename F>
  static void float_views(LSTMLayerGradInputs& in, F&& f) {
    for (TensorView* v : {&in.x, &in.cs_prev, &in.h_prev, &in.i, &in.cs, &in.f, &in.o, &in.ci,
                          &in.co, &in.h, &in.cs_grad, &in.h_grad}) {
      f(*v);
    }
  }
  template <typename F>
  static void float_views(BlockLSTMOutputs& o, F&& f) {
    for (MutableTensorView* v : {&o.i, &o.cs, &o.f, &o.o, &o.ci, &o.co, &o.h}) f(*v);
  }
  template <typename F>
  static void float_views(BlockLSTMGradOutputs& o, F&& f) {
    for (MutableTensorView* v : {&o.x_grad, &o.cs_prev_grad, &o.h_prev_grad, &o.w_grad, &o.wci_grad,
                                 &o.wcf_grad, &o.wco_grad, &o.b_grad}) {
      f(*v);
    }
  }

  template <typename T>
  using FwdArgs = BlockLSTMFwdArgs<T>;
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
struct GRUFamily {
  struct Config {};
  template <typename In>
  static Named<1> states(const In& in) {
    return {{{"h_prev", in.h_prev}}};
  }
  template <typename GradOut>
  static Named<1> state_grads(const GradOut& o) {
    return {{{"h_prev_grad", o.h_prev_grad}}};
  }
  template <typename F>
  static void float_views(GRULayerInputs& in, F&& f) {
    for (TensorView* v : {&in.x, &in.h_prev}) f(*v);
  }
};

template <>
struct Family<BlockGRUOutputs> : GRUFamily,
                                 PlannedFamily<GRUPlan, 2, 3, cpu::block_gru_workspace_elems,
                                               cpu::block_gru_bf16_fwd_workspace_floats,
                                               cpu::block_gru_bf16_bwd_workspace_floats> {
  struct Weights {
    TensorView w_ru, w_c, b_ru, b_c;
  };
  static constexpr WeightSpec kWeights[] = {
      {"w_ru", "w_ru_grad", 1, 1, 2, "input_size + hidden_size, 2 * hidden_size"},
      {"w_c", "w_c_grad", 1, 1, 1, "input_size + hidden_size, hidden_size"},
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
  using GRUFamily::float_views;
  template <typename F>
  static void float_views(GRULayerGradInputs& in, F&& f) {
    for (TensorView* v : {&in.x, &in.h_prev, &in.r, &in.u, &in.c, &in.h, &in.h_grad}) f(*v);
  }
  template <typename F>
  static void float_views(BlockGRUOutputs& o, F&& f) {
    for (MutableTensorView* v : {&o.r, &o.u, &o.c, &o.h}) f(*v);
  }
  template <typename F>
  static void float_views(BlockGRUGradOutputs& o, F&& f) {
    for (MutableTensorView* v :
         {&o.x_grad, &o.h_prev_grad, &o.w_ru_grad, &o.w_c_grad, &o.b_ru_grad, &o.b_c_grad}) {
      f(*v);
    }
  }

  template <typename T>
  using FwdArgs = BlockGRUFwdArgs<T>;
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
struct Family<BlockGRUResetAfterOutputs>
    : GRUFamily,
      PlannedFamily<GRUResetAfterPlan, 2, 3, cpu::block_gru_reset_after_workspace_elems,
                    cpu::block_gru_reset_after_bf16_fwd_workspace_floats,
                    cpu::block_gru_reset_after_bf16_bwd_workspace_floats> {
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
  using GRUFamily::float_views;
  template <typename F>
  static void float_views(GRUResetAfterLayerGradInputs& in, F&& f) {
    for (TensorView* v : {&in.x, &in.h_prev, &in.r, &in.u, &in.n, &in.hn, &in.h, &in.h_grad}) {
      f(*v);
    }
  }
  template <typename F>
  static void float_views(BlockGRUResetAfterOutputs& o, F&& f) {
    for (MutableTensorView* v : {&o.r, &o.u, &o.n, &o.hn, &o.h}) f(*v);
  }
  template <typename F>
  static void float_views(BlockGRUResetAfterGradOutputs& o, F&& f) {
    for (MutableTensorView* v :
         {&o.x_grad, &o.h_prev_grad, &o.w_i_grad, &o.w_h_grad, &o.b_i_grad, &o.b_h_grad}) {
      f(*v);
    }
  }

  template <typename T>
  using FwdArgs = BlockGRUResetAfterFwdArgs<T>;
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

// What a layer object of the op with outputs `Outputs` holds besides its workspace, in bytes: the
// object, the copies of its weights (kWeights' shapes) and their packed panels. A bound: every
// packed row is packed at most twice (the recurrent rows by gate block and transposed, the input
// rows as they are and transposed for d_x), each matrix padded to whole panels of at most 64
// columns and to an even number of rows.
template <class Outputs>
double held_bytes(std::int64_t I, std::int64_t H, DType dtype) {
  using O = Family<Outputs>;
  const double i = double(I), h = double(H);
  double elems = 0.0;
  for (const WeightSpec& w : O::kWeights) {
    const double rows = w.in_rows == 0 && w.h_rows == 0 ? 1.0 : w.in_rows * i + w.h_rows * h;
    elems += rows * w.cols * h;
  }
  const double packed_cols = O::kPackedCols * h;
  elems += 2.0 * (i + h) * packed_cols + 64.0 * (2.0 * i + 4.0 * packed_cols);
  return elems * double(dtype_size(compute_dtype(dtype))) + double(kObjectBytes);
}
template double held_bytes<BlockLSTMOutputs>(std::int64_t, std::int64_t, DType);
template double held_bytes<BlockGRUOutputs>(std::int64_t, std::int64_t, DType);
template double held_bytes<BlockGRUResetAfterOutputs>(std::int64_t, std::int64_t, DType);

// Runs the kernel of a layer's call on its arguments `a` (ops::run_kernel: the reference in
// reference mode, else the fast kernel). The layer's Impl holds `plans` (Plans) and packs a plan
// with pack(plan, shape); the fast kernel runs on the plan (repacked when the ISA path changed
// since it was packed) and the call's workspace, which the reference does not use.
// A bfloat16 call whose op multiplies bfloat16 operands (ops::uses_bf16_products) runs on the
// plan's bfloat16 packs (pack_bf16: the packs the op's kernel makes per call, so the same bits).
template <typename T, typename Args, typename Impl>
void run(Args& a, const CallDims& c, Impl& impl, const LayerShape& shape) {
  ops::set_bf16_products(a, shape.dtype);
  if (!force_reference()) {
    auto& plan = impl.plans.template get<T>();
    if (plan.isa != core::active_isa()) impl.pack(plan, shape);
    // A backward: the transposed packs it multiplies by, made at the first backward that needs
    // them (cpu/sequence_plan.h): the carry's always, the input rows' when d_x is wanted.
    if constexpr (requires { a.d_x; }) impl.pack_transposed(plan, shape, a.d_x != nullptr);
    a.plan = &plan;
    a.workspace = static_cast<T*>(c.workspace);
  }
  ops::run_kernel(SequenceDims{c.T, c.B, shape.input_size, shape.hidden_size, c.S, c.lengths,
                               &impl.active_rows},
                  a);
}

}  // namespace layer

// ---- BlockLayer -------------------------------------------------------------------------------

template <class In, class Out, class GradIn, class GradOut>
struct BlockLayer<In, Out, GradIn, GradOut>::Impl {
  using Family = layer::Family<Out>;
  std::array<Tensor, std::size(Family::kWeights)> own;
  typename Family::Weights weights;  // views of `own`
  layer::Plans<Family::template Plan> plans;
  typename Family::Config config;
  layer::CallArgs args;         // the views of the current call (kept: no allocation per call)
  ActiveRowsIndex active_rows;  // the index of a call's seq_lengths (kept: its capacity)
  std::string forward_name, backward_name;  // "LSTMLayer.forward", "LSTMLayer.backward"
  std::atomic<bool> busy{false};            // a call is running (layer::OneCall)

  template <typename T>
  void pack(typename Family::template Plan<T>& p, const LayerShape& s) {
    pack(p, s, std::make_index_sequence<Family::kPacked>());
  }
  template <typename T, std::size_t... K>
  void pack(typename Family::template Plan<T>& p, const LayerShape& s, std::index_sequence<K...>) {
    if constexpr (std::is_same_v<T, float>) {
      if (bf16_products(s.dtype)) {
        return p.pack_bf16(s.input_size, s.hidden_size, own[K].template data_as<float>()...);
      }
    }
    p.pack(s.input_size, s.hidden_size, own[K].template data_as<T>()...);
  }
  template <typename T>
  void pack_transposed(typename Family::template Plan<T>& p, const LayerShape& s, bool x_t) {
    pack_transposed(p, s, x_t, std::make_index_sequence<Family::kPacked>());
  }
  template <typename T, std::size_t... K>
  void pack_transposed(typename Family::template Plan<T>& p, const LayerShape& s, bool x_t,
                       std::index_sequence<K...>) {
    p.pack_transposed(s.input_size, s.hidden_size, own[K].template data_as<T>()..., x_t, true);
  }
  template <std::size_t... K>
  void view_weights(std::index_sequence<K...>) {
    weights = {own[K].view()...};
  }

  // The checks every call starts with: begin_call's, then the initial states. `args` gets the
  // inputs every call reads (x, the initial states, seq_lengths).
  template <typename CallIn>
  layer::CallDims begin(const Check& check, const SequenceLayer& l, const CallIn& in,
                        layer::CallArgs& args) const {
    args.clear();
    const layer::CallDims c = layer::begin_call(check, l, in);
    const auto states = Family::states(in);
    check.tensors(states, Shape{c.B, l.shape().hidden_size}, ops::kStateDims, l.shape().dtype);
    args.input("x", in.x);
    args.inputs(states);
    args.input("seq_lengths", in.seq_lengths);
    return c;
  }
  // Runs the kernel of a call (Family::kernel_args: the forward's or the backward's, by out's
  // type) on its inputs and the weights.
  template <typename CallIn, typename CallOut>
  void run(const CallIn& in, const CallOut& out, const layer::CallDims& c, const LayerShape& s) {
    if (core::is_16bit_float(s.dtype)) return run_staged(in, out, c, s);
    layer::with_dtype(s.dtype, [&]<typename T>() {
      auto a = Family::template kernel_args<T>(
          layer::WithWeights<CallIn, typename Family::Weights>{in, weights}, out, config, s.dtype);
      layer::run<T>(a, c, *this, s);
    });
  }
  // A float16 or bfloat16 call, as the one-shot op computes it (core::dispatch_float): every
  // floating view widened to float32 once, the float32 kernel, each output rounded once. The
  // float32 copies are slices of the workspace past the kernel's part (staged_elems).
  template <typename CallIn, typename CallOut>
  void run_staged(const CallIn& in, const CallOut& out, const layer::CallDims& c,
                  const LayerShape& s) {
    float* next = static_cast<float*>(c.workspace) +
                  Family::workspace_elems(c.S, c.B, s.input_size, s.hidden_size);
    CallIn in32 = in;
    Family::float_views(in32, [&](TensorView& t) {
      const std::int64_t n = t.shape.num_elements();
      core::widen_to_float(s.dtype, t.data, next, n);
      t = TensorView(next, DType::kFloat32, t.shape);
      next += n;
    });
    CallOut out32 = out;
    Family::float_views(out32, [&](MutableTensorView& t) {
      if (is_absent_input(t)) return;  // an output not wanted (x_grad) stays absent
      t = MutableTensorView(next, DType::kFloat32, t.shape);
      next += t.shape.num_elements();
    });
    auto a = Family::template kernel_args<float>(
        layer::WithWeights<CallIn, typename Family::Weights>{in32, weights}, out32, config,
        s.dtype);
    if constexpr (requires { a.bf16_workspace; }) {
      // A call with bfloat16 products: its operands past the staged copies (the workspace holds
      // them, staged_bf16_elems), so the call allocates nothing.
      if (bf16_products(s.dtype)) a.bf16_workspace = next;
    }
    layer::run<float>(a, c, *this, s);
    std::array<MutableTensorView, layer::kMaxCallOutputs> staged;
    std::size_t k = 0;
    Family::float_views(out32, [&](MutableTensorView& t) { staged[k++] = t; });
    CallOut dst = out;
    k = 0;
    Family::float_views(dst, [&](MutableTensorView& t) {
      const MutableTensorView& from = staged[k++];
      if (is_absent_input(t)) return;
      core::narrow_from_float(s.dtype, static_cast<const float*>(from.data), t.data,
                              t.shape.num_elements());
    });
  }
  // Elements of float32 workspace of a float16 or bfloat16 call with T steps and B examples: the
  // kernel's, then the float32 copies of the floating views of its largest call (the backward:
  // x, the initial states, the forward's outputs and the gradients in; x_grad, the states' and
  // the weights' gradients out).
  static std::int64_t staged_elems(std::int64_t T, std::int64_t B, std::int64_t I, std::int64_t H) {
    const std::int64_t states = std::tuple_size_v<decltype(Family::states(GradIn{}))>;
    const std::int64_t steps = std::tuple_size_v<decltype(Family::steps(GradIn{}))>;
    std::int64_t weights_elems = 0;
    for (const layer::WeightSpec& w : Family::kWeights) {
      weights_elems += w.shape(I, H).num_elements();
    }
    return Family::workspace_elems(T, B, I, H) + 2 * T * B * I + 2 * states * B * H +
           steps * T * B * H + weights_elems;
  }
  // The same for a bfloat16 layer with bfloat16 products: a call's product operands after the
  // staged copies (the larger of the forward's and the backward's; the forward stages less than
  // the backward, so its operands fit past its copies too).
  static std::int64_t staged_bf16_elems(std::int64_t T, std::int64_t B, std::int64_t I,
                                        std::int64_t H) {
    return staged_elems(T, B, I, H) + std::max(Family::bf16_fwd_workspace_floats(T, B, I, H),
                                               Family::bf16_bwd_workspace_floats(T, B, I, H));
  }
  // Whether the plan packs the weights for bfloat16 products (pack_bf16): a bfloat16 layer
  // whose op multiplies bfloat16 operands.
  static bool bf16_products(DType dtype) {
    return ops::uses_bf16_products<typename Family::template FwdArgs<float>>(dtype);
  }
};

template <class In, class Out, class GradIn, class GradOut>
BlockLayer<In, Out, GradIn, GradOut>::BlockLayer(const char* name, const LayerShape& shape)
    : SequenceLayer(name, shape,
                    Impl::bf16_products(shape.dtype)    ? Impl::staged_bf16_elems
                    : core::is_16bit_float(shape.dtype) ? Impl::staged_elems
                                                        : Impl::Family::workspace_elems) {
  static_assert(sizeof(Impl) + sizeof(LSTMLayer) <= layer::kObjectBytes);
  check_weights_memory("create");
  impl_ = std::make_unique<Impl>();
  impl_->forward_name = std::string(name) + ".forward";
  impl_->backward_name = std::string(name) + ".backward";
}

template <class In, class Out, class GradIn, class GradOut>
void BlockLayer<In, Out, GradIn, GradOut>::check_weights_memory(const char* fn) const {
  const ExtraBytes weights{"the weights for input_size " + std::to_string(shape_.input_size) +
                               " and hidden_size " + std::to_string(shape_.hidden_size) +
                               " (copies and packed panels)",
                           layer::clamp_bytes(layer::held_bytes<Out>(
                               shape_.input_size, shape_.hidden_size, shape_.dtype))};
  layer::check_allocation(Check{name_, fn}, {&weights, 1});
}

template <class In, class Out, class GradIn, class GradOut>
BlockLayer<In, Out, GradIn, GradOut>::~BlockLayer() = default;

template <class In, class Out, class GradIn, class GradOut>
void BlockLayer<In, Out, GradIn, GradOut>::set_weight_views(std::span<const TensorView> weights) {
  const Check check{name_, "set_weights"};
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  Impl& m = *impl_;
  const layer::OneCall one(check, m.busy);
  check_weights_memory("set_weights");
  // Every given weight is checked before any is replaced: a refused call leaves the layer's
  // weights (and plan) as they were. Past the checks only an allocation can fail; from the first
  // replaced copy until the plan is packed the layer has no weights, so a failure there leaves it
  // refusing calls ("set_weights has not been called"), never running on a freed or half-set copy.
  for (std::size_t k = 0; k < m.own.size() && k < weights.size(); ++k) {
    const layer::WeightSpec& w = Impl::Family::kWeights[k];
    check.tensor(w.name, weights[k], w.shape(I, H), w.dims, shape_.dtype);
  }
  has_weights_ = false;
  for (std::size_t k = 0; k < m.own.size(); ++k) {
    const layer::WeightSpec& w = Impl::Family::kWeights[k];
    if (k < weights.size()) {
      layer::copy_weight(check, w.name, weights[k], w.shape(I, H), w.dims, shape_.dtype, m.own[k]);
    } else {
      m.own[k] = Tensor(shape_.dtype, w.shape(I, H));
    }
  }
  m.view_weights(std::make_index_sequence<std::size(Impl::Family::kWeights)>());
  layer::pack_plan(m, shape_);
  has_weights_ = true;
}

template <class In, class Out, class GradIn, class GradOut>
void BlockLayer<In, Out, GradIn, GradOut>::forward(const In& in, const Out& out,
                                                   LayerWorkspace workspace) {
  const Check check{name_, "forward", impl_->forward_name.c_str()};
  const layer::OneCall one(check, impl_->busy);
  layer::CallArgs& args = impl_->args;
  layer::CallDims c = impl_->begin(check, *this, in, args);
  const auto outputs = Impl::Family::outputs(out);
  check.outputs(outputs, Shape{c.T, c.B, shape_.hidden_size}, shape_.dtype);
  args.outputs(outputs);
  layer::prepare_call(check, *this, c, args, workspace, own_workspace_);
  impl_->run(in, out, c, shape_);
}

template <class In, class Out, class GradIn, class GradOut>
void BlockLayer<In, Out, GradIn, GradOut>::backward(const GradIn& in, const GradOut& out,
                                                    LayerWorkspace workspace) {
  using Family = typename Impl::Family;
  const Check check{name_, "backward", impl_->backward_name.c_str()};
  const layer::OneCall one(check, impl_->busy);
  layer::CallArgs& args = impl_->args;
  layer::CallDims c = impl_->begin(check, *this, in, args);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const auto steps = Family::steps(in);
  check.tensors(steps, Shape{c.T, c.B, H}, ops::kStepDims, dt);
  args.inputs(steps);
  // An absent x_grad: the input gradient is not computed (a stack's first layer, whose input
  // needs none).
  if (!is_absent_input(out.x_grad)) {
    check.output("x_grad", out.x_grad, in.x.shape, dt);
    args.output("x_grad", out.x_grad);
  }
  // An absent state gradient (h_prev_grad; the LSTM's cs_prev_grad): not computed (a stack whose
  // initial states need none). Without h_prev_grad the last step's recurrent product is skipped.
  for (const Check::Arg& state_grad : Family::state_grads(out)) {
    if (is_absent_input(state_grad.view)) continue;
    check.output(state_grad.name, state_grad.view, Shape{c.B, H}, dt);
    args.output(state_grad.name, state_grad.view);
  }
  const auto grads = Family::weight_grads(out);
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const layer::WeightSpec& w = Family::kWeights[k];
    check.output(w.grad, grads[k], w.shape(I, H), dt);
    args.output(w.grad, grads[k]);
  }
  layer::prepare_call(check, *this, c, args, workspace, own_workspace_);
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
  // Unset attrs take the op's defaults (its attrs struct's), and the op's rule checks them.
  Impl::Family::Config& c = impl_->config;
  c.forget_bias = attrs.v2 ? 0.0 : attrs.forget_bias.value_or(BlockLSTMAttrs{}.forget_bias);
  c.cell_clip = attrs.cell_clip.value_or(attrs.v2 ? BlockLSTMV2Attrs{}.cell_clip
                                                  : BlockLSTMAttrs{}.cell_clip);
  c.use_peephole = attrs.use_peephole;
  c.layout = attrs.v2 ? LSTMLayout::kIFCO : LSTMLayout::kICFO;
  const std::string op = check.op();
  ops::check_lstm_attrs(core::Checker(op.c_str()), c.forget_bias, c.cell_clip);
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
