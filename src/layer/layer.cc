// The layer objects of blockrnn/layer.h: BlockLSTM(V2), BlockGRU and BlockGRUResetAfter set up
// once (validated sizes and attrs, weights copied and packed: cpu::*Plan, a workspace sized for
// the largest call) and run many times on the kernels of src/cpu (src/ref in reference mode),
// exactly as the one-shot ops of src/ops run them.
#include <algorithm>
#include <cmath>
#include <string>

#include "blockrnn/context.h"
#include "blockrnn/layer.h"
#include "core/isa.h"
#include "core/op_impl.h"
#include "cpu/sequence_plan.h"
#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"
#include "layer/layer_common.h"
#include "ops/kernel_args.h"

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

// ---- LSTMLayer --------------------------------------------------------------------------------

struct LSTMLayer::Impl {
  Tensor w, b, wci, wcf, wco;
  layer::Plans<cpu::LSTMPlan> plans;
  double forget_bias = 0, cell_clip = 0;
  template <typename T>
  void pack(cpu::LSTMPlan<T>& p, const LayerShape& s) {
    p.pack(s.input_size, s.hidden_size, w.data_as<T>());
  }
};

namespace {
const char* lstm_name(const LSTMLayerAttrs& a) {
  return a.v2 ? "LSTMLayer(V2)" : "LSTMLayer";
}
}  // namespace

LSTMLayer::LSTMLayer(const LayerShape& shape, const LSTMLayerAttrs& attrs)
    : SequenceLayer(lstm_name(attrs), shape, cpu::block_lstm_workspace_elems),
      attrs_(attrs),
      impl_(std::make_unique<Impl>()) {
  const Check check{name_, "create"};
  if (attrs.v2 && attrs.forget_bias.has_value() && *attrs.forget_bias != 0.0) {
    check.fail("forget_bias must be unset or 0 for BlockLSTMV2 (it has no forget bias), got " +
               std::to_string(*attrs.forget_bias));
  }
  impl_->forget_bias = attrs.v2 ? 0.0 : attrs.forget_bias.value_or(1.0);
  impl_->cell_clip = attrs.cell_clip.value_or(attrs.v2 ? 0.0 : 3.0);
  if (std::isnan(impl_->forget_bias) || std::isinf(impl_->forget_bias)) {
    check.fail("forget_bias must be finite, got " + std::to_string(impl_->forget_bias));
  }
}

LSTMLayer::~LSTMLayer() = default;

void LSTMLayer::set_weights(TensorView w, TensorView b, TensorView wci, TensorView wcf,
                            TensorView wco) {
  const Check check{name_, "set_weights"};
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  Impl& m = *impl_;
  m.w =
      layer::copy_weight(check, "w", w, {I + H, 4 * H}, "input_size + hidden_size, 4 * hidden", dt);
  m.b = layer::copy_weight(check, "b", b, {4 * H}, "4 * hidden_size", dt);
  const TensorView* peep[3] = {&wci, &wcf, &wco};
  Tensor* own[3] = {&m.wci, &m.wcf, &m.wco};
  const char* names[3] = {"wci", "wcf", "wco"};
  for (int k = 0; k < 3; ++k) {
    if (attrs_.use_peephole) {
      *own[k] = layer::copy_weight(check, names[k], *peep[k], {H}, "hidden_size", dt);
    } else {
      *own[k] = Tensor(dt, {H});  // zeros, as the ops use for omitted peepholes
    }
  }
  layer::pack_plan(m, shape_);
  has_weights_ = true;
}

void LSTMLayer::forward(const LSTMLayerInputs& in, const BlockLSTMOutputs& out,
                        LayerWorkspace workspace) {
  const Check check{name_, "forward"};
  const layer::CallDims c = layer::begin_call(check, *this, in, workspace, own_workspace_);
  const std::int64_t H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const Shape bh{c.B, H}, tbh{c.T, c.B, H};
  check.tensors({{"cs_prev", in.cs_prev}, {"h_prev", in.h_prev}}, bh, "batch, hidden_size", dt);
  check.tensors({{"i", out.i},
                 {"cs", out.cs},
                 {"f", out.f},
                 {"o", out.o},
                 {"ci", out.ci},
                 {"co", out.co},
                 {"h", out.h}},
                tbh, "time, batch, hidden", dt);
  Impl& m = *impl_;
  const BlockLSTMDims d{c.T, c.B, shape_.input_size, H, c.S, c.lengths};
  layer::with_dtype(dt, [&]<typename T>() {
    BlockLSTMFwdArgs<T> a = ops::lstm_fwd_args<BlockLSTMFwdArgs, T>(
        BlockLSTMInputs{.x = in.x,
                        .cs_prev = in.cs_prev,
                        .h_prev = in.h_prev,
                        .w = m.w.view(),
                        .wci = m.wci.view(),
                        .wcf = m.wcf.view(),
                        .wco = m.wco.view(),
                        .b = m.b.view()},
        out, m.forget_bias, m.cell_clip, attrs_.use_peephole,
        attrs_.v2 ? LSTMLayout::kIFCO : LSTMLayout::kICFO, dt);
    layer::run_kernel<T>(ref::block_lstm_fwd<T>, cpu::block_lstm_fwd<T>, d, a, m, shape_,
                         c.workspace);
  });
}

void LSTMLayer::backward(const LSTMLayerGradInputs& in, const BlockLSTMGradOutputs& out,
                         LayerWorkspace workspace) {
  const Check check{name_, "backward"};
  const layer::CallDims c = layer::begin_call(check, *this, in, workspace, own_workspace_);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const Shape bh{c.B, H}, tbh{c.T, c.B, H};
  check.tensors({{"cs_prev", in.cs_prev}, {"h_prev", in.h_prev}}, bh, "batch, hidden_size", dt);
  check.tensors({{"i", in.i},
                 {"cs", in.cs},
                 {"f", in.f},
                 {"o", in.o},
                 {"ci", in.ci},
                 {"co", in.co},
                 {"h", in.h},
                 {"cs_grad", in.cs_grad},
                 {"h_grad", in.h_grad}},
                tbh, "time, batch, hidden", dt);
  check.tensor("x_grad", out.x_grad, in.x.shape, "time, batch, input_size", dt);
  check.tensor("cs_prev_grad", out.cs_prev_grad, bh, "batch, hidden_size", dt);
  check.tensor("h_prev_grad", out.h_prev_grad, bh, "batch, hidden_size", dt);
  check.tensor("w_grad", out.w_grad, {I + H, 4 * H}, "input_size + hidden_size, 4 * hidden", dt);
  check.tensor("wci_grad", out.wci_grad, {H}, "hidden_size", dt);
  check.tensor("wcf_grad", out.wcf_grad, {H}, "hidden_size", dt);
  check.tensor("wco_grad", out.wco_grad, {H}, "hidden_size", dt);
  check.tensor("b_grad", out.b_grad, {4 * H}, "4 * hidden_size", dt);
  Impl& m = *impl_;
  const BlockLSTMDims d{c.T, c.B, I, H, c.S, c.lengths};
  layer::with_dtype(dt, [&]<typename T>() {
    BlockLSTMBwdArgs<T> a = ops::block_lstm_bwd_args<T>(
        BlockLSTMGradInputs{.x = in.x,
                            .cs_prev = in.cs_prev,
                            .h_prev = in.h_prev,
                            .w = m.w.view(),
                            .wci = m.wci.view(),
                            .wcf = m.wcf.view(),
                            .wco = m.wco.view(),
                            .i = in.i,
                            .cs = in.cs,
                            .f = in.f,
                            .o = in.o,
                            .ci = in.ci,
                            .co = in.co,
                            .h = in.h,
                            .cs_grad = in.cs_grad,
                            .h_grad = in.h_grad},
        out, attrs_.use_peephole, attrs_.v2 ? LSTMLayout::kIFCO : LSTMLayout::kICFO);
    layer::run_kernel<T>(ref::block_lstm_bwd<T>, cpu::block_lstm_bwd<T>, d, a, m, shape_,
                         c.workspace);
  });
}

// ---- GRULayer ---------------------------------------------------------------------------------

struct GRULayer::Impl {
  Tensor w_ru, w_c, b_ru, b_c;
  layer::Plans<cpu::GRUPlan> plans;
  template <typename T>
  void pack(cpu::GRUPlan<T>& p, const LayerShape& s) {
    p.pack(s.input_size, s.hidden_size, w_ru.data_as<T>(), w_c.data_as<T>());
  }
};

GRULayer::GRULayer(const LayerShape& shape)
    : SequenceLayer("GRULayer", shape, cpu::block_gru_workspace_elems),
      impl_(std::make_unique<Impl>()) {}

GRULayer::~GRULayer() = default;

void GRULayer::set_weights(TensorView w_ru, TensorView w_c, TensorView b_ru, TensorView b_c) {
  const Check check{name_, "set_weights"};
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  Impl& m = *impl_;
  m.w_ru = layer::copy_weight(check, "w_ru", w_ru, {I + H, 2 * H},
                              "input_size + hidden_size, 2 * hidden_size", dt);
  m.w_c = layer::copy_weight(check, "w_c", w_c, {I + H, H}, "input_size + hidden_size, hidden", dt);
  m.b_ru = layer::copy_weight(check, "b_ru", b_ru, {2 * H}, "2 * hidden_size", dt);
  m.b_c = layer::copy_weight(check, "b_c", b_c, {H}, "hidden_size", dt);
  layer::pack_plan(m, shape_);
  has_weights_ = true;
}

void GRULayer::forward(const GRULayerInputs& in, const BlockGRUOutputs& out,
                       LayerWorkspace workspace) {
  const Check check{name_, "forward"};
  const layer::CallDims c = layer::begin_call(check, *this, in, workspace, own_workspace_);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const Shape tbh{c.T, c.B, H};
  check.tensor("h_prev", in.h_prev, {c.B, H}, "batch, hidden_size", dt);
  check.tensors({{"r", out.r}, {"u", out.u}, {"c", out.c}, {"h", out.h}}, tbh,
                "time, batch, hidden", dt);
  Impl& m = *impl_;
  const BlockGRUDims d{c.T, c.B, I, H, c.S, c.lengths};
  layer::with_dtype(dt, [&]<typename T>() {
    BlockGRUFwdArgs<T> a =
        ops::gru_fwd_args<BlockGRUFwdArgs, T>(BlockGRUInputs{.x = in.x,
                                                             .h_prev = in.h_prev,
                                                             .w_ru = m.w_ru.view(),
                                                             .w_c = m.w_c.view(),
                                                             .b_ru = m.b_ru.view(),
                                                             .b_c = m.b_c.view()},
                                              out);
    layer::run_kernel<T>(ref::block_gru_fwd<T>, cpu::block_gru_fwd<T>, d, a, m, shape_,
                         c.workspace);
  });
}

void GRULayer::backward(const GRULayerGradInputs& in, const BlockGRUGradOutputs& out,
                        LayerWorkspace workspace) {
  const Check check{name_, "backward"};
  const layer::CallDims c = layer::begin_call(check, *this, in, workspace, own_workspace_);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const Shape bh{c.B, H}, tbh{c.T, c.B, H};
  check.tensor("h_prev", in.h_prev, bh, "batch, hidden_size", dt);
  check.tensors({{"r", in.r}, {"u", in.u}, {"c", in.c}, {"h", in.h}, {"h_grad", in.h_grad}}, tbh,
                "time, batch, hidden", dt);
  check.tensor("x_grad", out.x_grad, in.x.shape, "time, batch, input_size", dt);
  check.tensor("h_prev_grad", out.h_prev_grad, bh, "batch, hidden_size", dt);
  check.tensor("w_ru_grad", out.w_ru_grad, {I + H, 2 * H}, "input_size + hidden, 2 * hidden", dt);
  check.tensor("w_c_grad", out.w_c_grad, {I + H, H}, "input_size + hidden, hidden", dt);
  check.tensor("b_ru_grad", out.b_ru_grad, {2 * H}, "2 * hidden_size", dt);
  check.tensor("b_c_grad", out.b_c_grad, {H}, "hidden_size", dt);
  Impl& m = *impl_;
  const BlockGRUDims d{c.T, c.B, I, H, c.S, c.lengths};
  layer::with_dtype(dt, [&]<typename T>() {
    BlockGRUBwdArgs<T> a = ops::block_gru_bwd_args<T>(BlockGRUGradInputs{.x = in.x,
                                                                         .h_prev = in.h_prev,
                                                                         .w_ru = m.w_ru.view(),
                                                                         .w_c = m.w_c.view(),
                                                                         .r = in.r,
                                                                         .u = in.u,
                                                                         .c = in.c,
                                                                         .h = in.h,
                                                                         .h_grad = in.h_grad},
                                                      out);
    layer::run_kernel<T>(ref::block_gru_bwd<T>, cpu::block_gru_bwd<T>, d, a, m, shape_,
                         c.workspace);
  });
}

// ---- GRUResetAfterLayer -----------------------------------------------------------------------

struct GRUResetAfterLayer::Impl {
  Tensor w_i, w_h, b_i, b_h;
  layer::Plans<cpu::GRUResetAfterPlan> plans;
  template <typename T>
  void pack(cpu::GRUResetAfterPlan<T>& p, const LayerShape& s) {
    p.pack(s.input_size, s.hidden_size, w_i.data_as<T>(), w_h.data_as<T>());
  }
};

GRUResetAfterLayer::GRUResetAfterLayer(const LayerShape& shape)
    : SequenceLayer("GRUResetAfterLayer", shape, cpu::block_gru_reset_after_workspace_elems),
      impl_(std::make_unique<Impl>()) {}

GRUResetAfterLayer::~GRUResetAfterLayer() = default;

void GRUResetAfterLayer::set_weights(TensorView w_i, TensorView w_h, TensorView b_i,
                                     TensorView b_h) {
  const Check check{name_, "set_weights"};
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  Impl& m = *impl_;
  m.w_i = layer::copy_weight(check, "w_i", w_i, {I, 3 * H}, "input_size, 3 * hidden_size", dt);
  m.w_h = layer::copy_weight(check, "w_h", w_h, {H, 3 * H}, "hidden_size, 3 * hidden_size", dt);
  m.b_i = layer::copy_weight(check, "b_i", b_i, {3 * H}, "3 * hidden_size", dt);
  m.b_h = layer::copy_weight(check, "b_h", b_h, {3 * H}, "3 * hidden_size", dt);
  layer::pack_plan(m, shape_);
  has_weights_ = true;
}

void GRUResetAfterLayer::forward(const GRULayerInputs& in, const BlockGRUResetAfterOutputs& out,
                                 LayerWorkspace workspace) {
  const Check check{name_, "forward"};
  const layer::CallDims c = layer::begin_call(check, *this, in, workspace, own_workspace_);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const Shape tbh{c.T, c.B, H};
  check.tensor("h_prev", in.h_prev, {c.B, H}, "batch, hidden_size", dt);
  check.tensors({{"r", out.r}, {"u", out.u}, {"n", out.n}, {"hn", out.hn}, {"h", out.h}}, tbh,
                "time, batch, hidden", dt);
  Impl& m = *impl_;
  const BlockGRUDims d{c.T, c.B, I, H, c.S, c.lengths};
  layer::with_dtype(dt, [&]<typename T>() {
    BlockGRUResetAfterFwdArgs<T> a =
        ops::gru_reset_after_fwd_args<T>(BlockGRUResetAfterInputs{.x = in.x,
                                                                  .h_prev = in.h_prev,
                                                                  .w_i = m.w_i.view(),
                                                                  .w_h = m.w_h.view(),
                                                                  .b_i = m.b_i.view(),
                                                                  .b_h = m.b_h.view()},
                                         out);
    layer::run_kernel<T>(ref::block_gru_reset_after_fwd<T>, cpu::block_gru_reset_after_fwd<T>, d, a,
                         m, shape_, c.workspace);
  });
}

void GRUResetAfterLayer::backward(const GRUResetAfterLayerGradInputs& in,
                                  const BlockGRUResetAfterGradOutputs& out,
                                  LayerWorkspace workspace) {
  const Check check{name_, "backward"};
  const layer::CallDims c = layer::begin_call(check, *this, in, workspace, own_workspace_);
  const std::int64_t I = shape_.input_size, H = shape_.hidden_size;
  const DType dt = shape_.dtype;
  const Shape bh{c.B, H}, tbh{c.T, c.B, H};
  check.tensor("h_prev", in.h_prev, bh, "batch, hidden_size", dt);
  check.tensors(
      {{"r", in.r}, {"u", in.u}, {"n", in.n}, {"hn", in.hn}, {"h", in.h}, {"h_grad", in.h_grad}},
      tbh, "time, batch, hidden", dt);
  check.tensor("x_grad", out.x_grad, in.x.shape, "time, batch, input_size", dt);
  check.tensor("h_prev_grad", out.h_prev_grad, bh, "batch, hidden_size", dt);
  check.tensor("w_i_grad", out.w_i_grad, {I, 3 * H}, "input_size, 3 * hidden_size", dt);
  check.tensor("w_h_grad", out.w_h_grad, {H, 3 * H}, "hidden_size, 3 * hidden_size", dt);
  check.tensor("b_i_grad", out.b_i_grad, {3 * H}, "3 * hidden_size", dt);
  check.tensor("b_h_grad", out.b_h_grad, {3 * H}, "3 * hidden_size", dt);
  Impl& m = *impl_;
  const BlockGRUDims d{c.T, c.B, I, H, c.S, c.lengths};
  layer::with_dtype(dt, [&]<typename T>() {
    BlockGRUResetAfterBwdArgs<T> a =
        ops::gru_reset_after_bwd_args<T>(BlockGRUResetAfterGradInputs{.x = in.x,
                                                                      .h_prev = in.h_prev,
                                                                      .w_i = m.w_i.view(),
                                                                      .w_h = m.w_h.view(),
                                                                      .r = in.r,
                                                                      .u = in.u,
                                                                      .n = in.n,
                                                                      .hn = in.hn,
                                                                      .h = in.h,
                                                                      .h_grad = in.h_grad},
                                         out);
    layer::run_kernel<T>(ref::block_gru_reset_after_bwd<T>, cpu::block_gru_reset_after_bwd<T>, d, a,
                         m, shape_, c.workspace);
  });
}

}  // namespace blockrnn
