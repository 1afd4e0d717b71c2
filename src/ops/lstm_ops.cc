// LSTMBlockCell, LSTMBlockCellGrad and gradients.LSTMBlockCell: the typed C++ functions of
// blockrnn/lstm.h (validation of the named fields, SPEC §5.3, §6.3, A3, and the kernel call) and
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

#include <vector>

#include "core/op_impl.h"
#include "kernel/lstm_cell.h"
#include "ops/checks.h"
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/lstm_attrs.h"
#include "ops/typed_defaults.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = LSTMBlockCellInputs;
using GradIn = LSTMBlockCellGradInputs;
constexpr auto& kInputs = ops::kLSTMInputs<In>;
constexpr auto kGradInputs = ops::rows<InputField<GradIn>>(
    ops::kLSTMInputs<GradIn>, ops::kLSTMGates<GradIn>,
    {BLOCKRNN_INPUT(GradIn, cs_grad), BLOCKRNN_INPUT(GradIn, h_grad)});

using Out = LSTMBlockCellOutputs;
using Res = LSTMBlockCellResult;
constexpr auto& kOutputs = ops::kLSTMOutputs<Out, Res>;

using GradOut = LSTMBlockCellGradOutputs;
using GradRes = LSTMBlockCellGradResult;
constexpr core::OutputField<GradOut, GradRes> kGradOutputs[] = {
    BLOCKRNN_OUTPUT(GradOut, GradRes, cs_prev_grad), BLOCKRNN_OUTPUT(GradOut, GradRes, dicfo),
    BLOCKRNN_OUTPUT(GradOut, GradRes, wci_grad), BLOCKRNN_OUTPUT(GradOut, GradRes, wcf_grad),
    BLOCKRNN_OUTPUT(GradOut, GradRes, wco_grad)};

// gradients.LSTMBlockCell: one gradient per forward input, named as the input.
using BackOut = LSTMBlockCellBackwardOutputs;
using BackRes = LSTMBlockCellBackwardResult;
constexpr core::OutputField<BackOut, BackRes> kBackwardOutputs[] = {
    BLOCKRNN_OUTPUT(BackOut, BackRes, x),      BLOCKRNN_OUTPUT(BackOut, BackRes, cs_prev),
    BLOCKRNN_OUTPUT(BackOut, BackRes, h_prev), BLOCKRNN_OUTPUT(BackOut, BackRes, w),
    BLOCKRNN_OUTPUT(BackOut, BackRes, wci),    BLOCKRNN_OUTPUT(BackOut, BackRes, wcf),
    BLOCKRNN_OUTPUT(BackOut, BackRes, wco),    BLOCKRNN_OUTPUT(BackOut, BackRes, b)};

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

Plan validate_fwd(const In& in, const Attrs&) {
  const ops::CellDims d = ops::check_cell(Checker("LSTMBlockCell"), kInputs, in, {}, state_of(in));
  const Shape bh{d.B, d.H};
  return Plan(d.dtype, {bh, bh, bh, bh, bh, bh, bh}).sizes(1, d.B, d.I, d.H);
}

// The grads: i, cs, f, o, ci, co, cs_grad, h_grad [B, H] besides the forward inputs.
ops::CellDims check_grad(const char* op, const GradIn& in) {
  const ops::Named steps[] = {
      {"i", in.i},   {"cs", in.cs},           {"f", in.f},          {"o", in.o}, {"ci", in.ci},
      {"co", in.co}, {"cs_grad", in.cs_grad}, {"h_grad", in.h_grad}};
  return ops::check_cell(Checker(op), kGradInputs, in, steps, state_of(in));
}

Plan validate_grad(const GradIn& in, const PeepholeAttr&) {
  const ops::CellDims d = check_grad("LSTMBlockCellGrad", in);
  return Plan(d.dtype, {Shape{d.B, d.H}, Shape{d.B, 4 * d.H}, Shape{d.H}, Shape{d.H}, Shape{d.H}})
      .sizes(1, d.B, d.I, d.H);
}

Plan validate_backward(const GradIn& in, const Attrs&) {
  const ops::CellDims d = check_grad("gradients.LSTMBlockCell", in);
  const Shape bh{d.B, d.H}, h{d.H};
  return Plan(d.dtype,
              {Shape{d.B, d.I}, bh, bh, Shape{d.I + d.H, 4 * d.H}, h, h, h, Shape{4 * d.H}})
      .sizes(1, d.B, d.I, d.H);
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
constexpr Op<In, Out, Res, Attrs> kLSTMBlockCell{"LSTMBlockCell", kInputs,      kOutputs,
                                                 kAttrs,          validate_fwd, compute_fwd};
constexpr Op<GradIn, GradOut, GradRes, PeepholeAttr> kLSTMBlockCellGrad{
    "LSTMBlockCellGrad", kGradInputs, kGradOutputs, kGradAttrs, validate_grad, compute_grad};
// The forward op's attrs, with its defaults (SPEC A5), so that the keywords of a forward call can
// be passed through unchanged; forget_bias and cell_clip do not affect the gradients.
constexpr Op<GradIn, BackOut, BackRes, Attrs> kLSTMBlockCellBackward{
    "gradients.LSTMBlockCell", kGradInputs,     kBackwardOutputs, kAttrs,
    validate_backward,         compute_backward};
}  // namespace ops

namespace {

// The typed API's default (ops/typed_defaults.h): peephole vectors omitted without use_peephole
// are zeros [H].
template <class Fields>
struct WithPeepholes : ops::WithPeepholes<Fields> {
  WithPeepholes(const char* op, const Fields& given, bool use_peephole)
      : ops::WithPeepholes<Fields>(op, given, use_peephole, 2) {}
};

}  // namespace

namespace core {
void register_lstm_ops() {
  register_adapter(ops::kLSTMBlockCell);
  register_adapter(ops::kLSTMBlockCellGrad);
  register_adapter(ops::kLSTMBlockCellBackward);
}
}  // namespace core

void lstm_block_cell(const LSTMBlockCellInputs& in, const LSTMBlockCellOutputs& out,
                     const LSTMBlockCellAttrs& attrs) {
  const WithPeepholes<In> p("LSTMBlockCell", in, attrs.use_peephole);
  ops::kLSTMBlockCell.run(p.in, out, attrs);
}

LSTMBlockCellResult lstm_block_cell(const LSTMBlockCellInputs& in,
                                    const LSTMBlockCellAttrs& attrs) {
  const WithPeepholes<In> p("LSTMBlockCell", in, attrs.use_peephole);
  return ops::kLSTMBlockCell.run(p.in, attrs);
}

void lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, const LSTMBlockCellGradOutputs& out,
                          bool use_peephole) {
  const WithPeepholes<GradIn> p("LSTMBlockCellGrad", in, use_peephole);
  ops::kLSTMBlockCellGrad.run(p.in, out, {use_peephole});
}

LSTMBlockCellGradResult lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, bool use_peephole) {
  const WithPeepholes<GradIn> p("LSTMBlockCellGrad", in, use_peephole);
  return ops::kLSTMBlockCellGrad.run(p.in, {use_peephole});
}

void lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                              const LSTMBlockCellBackwardOutputs& out,
                              const LSTMBlockCellAttrs& attrs) {
  const WithPeepholes<GradIn> p("gradients.LSTMBlockCell", in, attrs.use_peephole);
  ops::kLSTMBlockCellBackward.run(p.in, out, attrs);
}

LSTMBlockCellBackwardResult lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                                                     const LSTMBlockCellAttrs& attrs) {
  const WithPeepholes<GradIn> p("gradients.LSTMBlockCell", in, attrs.use_peephole);
  return ops::kLSTMBlockCellBackward.run(p.in, attrs);
}

}  // namespace blockrnn
