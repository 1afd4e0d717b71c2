// LSTMBlockCell, LSTMBlockCellGrad and gradients.LSTMBlockCell: the typed C++ functions of
// blockrnn/lstm.h (validation of the named fields, docs/ops.md, and the kernel call) and
// their rows of the name table.
//
// Shape letters: B batch, I input size, H cell size (H is taken from cs_prev, as TensorFlow
// does). Validation order: the ranks of every input, then dimensions (B = 0 or H = 0 is
// rejected: "cs_prev is empty"), then dtypes. Stricter than TensorFlow at revision 14f3ab74, as
// newer TensorFlow is: peephole vectors must be [H] even without peepholes, b exactly [4H], and
// every gate tensor of the grads [B, H].
//
// Attrs are converted to the op's dtype before use, as TensorFlow's kernel does (so a float16
// op uses half(forget_bias) and half(cell_clip), and the arithmetic then runs in float32).
#include "blockrnn/lstm.h"

#include <array>
#include <vector>

#include "kernel/lstm_cell.h"
#include "ops/checks.h"
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/lstm_attrs.h"
#include "ops/op_impl.h"
#include "ops/typed_defaults.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = LSTMBlockCellInputs;
constexpr auto kInputs = ops::lstm_inputs<In>();
using Out = LSTMBlockCellOutputs;
using Res = LSTMBlockCellResult;
constexpr auto kOutputs = ops::lstm_outputs<Out, Res>();

// The grads take the forward op's inputs, and per step [B, H] its outputs but h and the
// gradients of cs and h.
using GradIn = LSTMBlockCellGradInputs;
constexpr auto kGradSteps =
    ops::rows(ops::lstm_gate_inputs<GradIn>(),
              std::to_array<InputField<GradIn>>(
                  {{"cs_grad", &GradIn::cs_grad}, {"h_grad", &GradIn::h_grad}}));
constexpr auto kGradInputs = ops::rows(ops::lstm_inputs<GradIn>(), kGradSteps);
using GradOut = LSTMBlockCellGradOutputs;
using GradRes = LSTMBlockCellGradResult;
constexpr OutputField<GradOut, GradRes> kGradOutputs[] = {
    {"cs_prev_grad", &GradOut::cs_prev_grad, &GradRes::cs_prev_grad},
    {"dicfo", &GradOut::dicfo, &GradRes::dicfo},
    {"wci_grad", &GradOut::wci_grad, &GradRes::wci_grad},
    {"wcf_grad", &GradOut::wcf_grad, &GradRes::wcf_grad},
    {"wco_grad", &GradOut::wco_grad, &GradRes::wco_grad}};

// gradients.LSTMBlockCell: one gradient per forward input, named as the input.
using BackOut = LSTMBlockCellBackwardOutputs;
using BackRes = LSTMBlockCellBackwardResult;
constexpr OutputField<BackOut, BackRes> kBackwardOutputs[] = {
    {"x", &BackOut::x, &BackRes::x},
    {"cs_prev", &BackOut::cs_prev, &BackRes::cs_prev},
    {"h_prev", &BackOut::h_prev, &BackRes::h_prev},
    {"w", &BackOut::w, &BackRes::w},
    {"wci", &BackOut::wci, &BackRes::wci},
    {"wcf", &BackOut::wcf, &BackRes::wcf},
    {"wco", &BackOut::wco, &BackRes::wco},
    {"b", &BackOut::b, &BackRes::b}};

using Attrs = LSTMBlockCellAttrs;
constexpr core::AttrField<Attrs> kAttrs[] = {core::attr<&Attrs::forget_bias>("forget_bias"),
                                             core::attr<&Attrs::cell_clip>("cell_clip"),
                                             core::attr<&Attrs::use_peephole>("use_peephole")};
// LSTMBlockCellGrad's only attr, required as in TensorFlow.
using ops::PeepholeAttr;
constexpr core::AttrField<PeepholeAttr> kGradAttrs[] = {
    core::attr<&PeepholeAttr::use_peephole>("use_peephole", true)};

// H from cs_prev; B = 0 or H = 0 is refused.
template <class Fields>
ops::LSTMState state_of(const Fields& in) {
  return ops::LSTMState::of(in, false, true);
}

// The attrs first, as the name table resolves them before the inputs are validated.
CallShape validate_fwd(const In& in, const Attrs& attrs) {
  const Checker check("LSTMBlockCell");
  ops::check_lstm_attrs(check, attrs.forget_bias, attrs.cell_clip);
  return ops::cell_shape(ops::check_cell(check, kInputs, in, state_of(in)), std::size(kOutputs));
}

ops::CellSizes check_grad(const char* op, const GradIn& in) {
  return ops::check_cell(Checker(op), kGradInputs, in, state_of(in), kGradSteps);
}

CallShape validate_grad(const GradIn& in, const PeepholeAttr&) {
  const ops::CellSizes d = check_grad("LSTMBlockCellGrad", in);
  return ops::cell_shape(
      d, {Shape{d.B, d.H}, Shape{d.B, 4 * d.H}, Shape{d.H}, Shape{d.H}, Shape{d.H}});
}

// Each gradient has the shape of its input.
CallShape validate_backward(const GradIn& in, const Attrs& attrs) {
  ops::check_lstm_attrs(Checker("gradients.LSTMBlockCell"), attrs.forget_bias, attrs.cell_clip);
  return ops::cell_shape(check_grad("gradients.LSTMBlockCell", in),
                         {in.x.shape, in.cs_prev.shape, in.h_prev.shape, in.w.shape, in.wci.shape,
                          in.wcf.shape, in.wco.shape, in.b.shape});
}

template <class Fields>
LSTMDims dims_of(const Fields& in) {
  return {in.x.shape[0], in.x.shape[1], in.cs_prev.shape[1]};
}

void compute_fwd(const In& in, const Out& out, const Attrs& attrs, DType dtype) {
  ops::compute(
      dims_of(in), dtype, kInputs, in, kOutputs, out, [&]<typename T>(const In& i, const Out& o) {
        return ops::lstm_fwd_args<LSTMCellFwdArgs, T>(i, o, attrs.forget_bias, attrs.cell_clip,
                                                      attrs.use_peephole, LSTMLayout::kICFO, dtype);
      });
}

void compute_grad(const GradIn& in, const GradOut& out, const PeepholeAttr& attrs, DType dtype) {
  ops::compute(dims_of(in), dtype, kGradInputs, in, kGradOutputs, out,
               [&]<typename T>(const GradIn& i, const GradOut& o) {
                 return ops::lstm_cell_grad_args<T>(i, o, attrs.use_peephole);
               });
}

// Only use_peephole matters; the gate gradient dicfo is scratch.
void compute_backward(const GradIn& in, const BackOut& out, const Attrs& attrs, DType dtype) {
  const LSTMDims d = dims_of(in);
  core::dispatch_float(dtype, kGradInputs, in, kBackwardOutputs, out,
                       [&]<typename T>(const GradIn& i, const BackOut& o) {
                         std::vector<T> d_gates(d.B * 4 * d.H);
                         ops::run_kernel(d, ops::lstm_cell_backward_args<T>(
                                                i, o, attrs.use_peephole, d_gates.data()));
                       });
}

}  // namespace

namespace ops {
constexpr core::TypedOp<In, Out, Res, Attrs> kLSTMBlockCell{
    "LSTMBlockCell", kInputs, kOutputs, kAttrs, validate_fwd, compute_fwd};
constexpr core::TypedOp<GradIn, GradOut, GradRes, PeepholeAttr> kLSTMBlockCellGrad{
    "LSTMBlockCellGrad", kGradInputs, kGradOutputs, kGradAttrs, validate_grad, compute_grad};
// The forward op's attrs, with its defaults (docs/ops.md), so that the keywords of a forward call
// can be passed through unchanged; forget_bias and cell_clip do not affect the gradients.
constexpr core::TypedOp<GradIn, BackOut, BackRes, Attrs> kLSTMBlockCellBackward{
    "gradients.LSTMBlockCell", kGradInputs,     kBackwardOutputs, kAttrs,
    validate_backward,         compute_backward};
}  // namespace ops

namespace {

// op.run after the typed API's default (ops/typed_defaults.h): peephole vectors omitted without
// use_peephole are zeros [H]. Into the caller's outputs (`out`) or allocated ones.
template <class Op, class... Out>
auto run_op(const Op& op, const typename Op::Inputs& in, const typename Op::Attrs& attrs,
            const Out&... out) {
  const ops::WithPeepholes<typename Op::Inputs> p(op.name, in, attrs.use_peephole, 2);
  return op.run(p.in, out..., attrs);
}

}  // namespace

void lstm_block_cell(const LSTMBlockCellInputs& in, const LSTMBlockCellOutputs& out,
                     const LSTMBlockCellAttrs& attrs) {
  run_op(ops::kLSTMBlockCell, in, attrs, out);
}

LSTMBlockCellResult lstm_block_cell(const LSTMBlockCellInputs& in,
                                    const LSTMBlockCellAttrs& attrs) {
  return run_op(ops::kLSTMBlockCell, in, attrs);
}

void lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, const LSTMBlockCellGradOutputs& out,
                          bool use_peephole) {
  run_op(ops::kLSTMBlockCellGrad, in, {use_peephole}, out);
}

LSTMBlockCellGradResult lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, bool use_peephole) {
  return run_op(ops::kLSTMBlockCellGrad, in, {use_peephole});
}

void lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                              const LSTMBlockCellBackwardOutputs& out,
                              const LSTMBlockCellAttrs& attrs) {
  run_op(ops::kLSTMBlockCellBackward, in, attrs, out);
}

LSTMBlockCellBackwardResult lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                                                     const LSTMBlockCellAttrs& attrs) {
  return run_op(ops::kLSTMBlockCellBackward, in, attrs);
}

}  // namespace blockrnn
