// GRUBlockCell, GRUBlockCellGrad and gradients.GRUBlockCell: the typed C++ functions of
// blockrnn/gru.h (validation of the named fields, docs/ops.md, and the kernel call) and
// their rows of the name table.
//
// Validation order: the ranks of every input, then dimensions, then dtypes.
#include "blockrnn/gru.h"

#include <array>
#include <vector>

#include "kernel/gru_cell.h"
#include "ops/checks.h"
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/op_impl.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = GRUBlockCellInputs;
constexpr auto kInputs = ops::gru_inputs<In>();
using Out = GRUBlockCellOutputs;
using Res = GRUBlockCellResult;
constexpr auto kOutputs = ops::gru_outputs<Out, Res>();

// The grads take the forward op's inputs, and per step [B, H] its outputs but h and d_h.
using GradIn = GRUBlockCellGradInputs;
constexpr auto kGradSteps = ops::rows(ops::gru_gate_inputs<GradIn>(),
                                      std::to_array<InputField<GradIn>>({{"d_h", &GradIn::d_h}}));
constexpr auto kGradInputs = ops::rows(ops::gru_inputs<GradIn>(), kGradSteps);
using GradOut = GRUBlockCellGradOutputs;
using GradRes = GRUBlockCellGradResult;
constexpr OutputField<GradOut, GradRes> kGradOutputs[] = {
    {"d_x", &GradOut::d_x, &GradRes::d_x},
    {"d_h_prev", &GradOut::d_h_prev, &GradRes::d_h_prev},
    {"d_c_bar", &GradOut::d_c_bar, &GradRes::d_c_bar},
    {"d_r_bar_u_bar", &GradOut::d_r_bar_u_bar, &GradRes::d_r_bar_u_bar}};

// gradients.GRUBlockCell: one gradient per forward input, named as the input.
using BackOut = GRUBlockCellBackwardOutputs;
using BackRes = GRUBlockCellBackwardResult;
constexpr OutputField<BackOut, BackRes> kBackwardOutputs[] = {
    {"x", &BackOut::x, &BackRes::x},          {"h_prev", &BackOut::h_prev, &BackRes::h_prev},
    {"w_ru", &BackOut::w_ru, &BackRes::w_ru}, {"w_c", &BackOut::w_c, &BackRes::w_c},
    {"b_ru", &BackOut::b_ru, &BackRes::b_ru}, {"b_c", &BackOut::b_c, &BackRes::b_c}};

CallShape validate_fwd(const In& in, const NoAttrs&) {
  return ops::cell_shape(
      ops::check_cell(Checker("GRUBlockCell"), kInputs, in, ops::GRUState::of(in)),
      std::size(kOutputs));
}

ops::CellSizes check_grad(const char* op, const GradIn& in) {
  return ops::check_cell(Checker(op), kGradInputs, in, ops::GRUState::of(in), kGradSteps);
}

CallShape validate_grad(const GradIn& in, const NoAttrs&) {
  const ops::CellSizes d = check_grad("GRUBlockCellGrad", in);
  return ops::cell_shape(d,
                         {Shape{d.B, d.I}, Shape{d.B, d.H}, Shape{d.B, d.H}, Shape{d.B, 2 * d.H}});
}

// Each gradient has the shape of its input.
CallShape validate_backward(const GradIn& in, const NoAttrs&) {
  return ops::cell_shape(
      check_grad("gradients.GRUBlockCell", in),
      {in.x.shape, in.h_prev.shape, in.w_ru.shape, in.w_c.shape, in.b_ru.shape, in.b_c.shape});
}

template <class Fields>
GRUDims dims_of(const Fields& in) {
  return {in.x.shape[0], in.x.shape[1], in.h_prev.shape[1]};
}

void compute_fwd(const In& in, const Out& out, const NoAttrs&, DType dtype) {
  ops::compute(dims_of(in), dtype, kInputs, in, kOutputs, out,
               []<typename T>(const In& i, const Out& o) {
                 return ops::gru_fwd_args<GRUCellFwdArgs, T>(i, o);
               });
}

void compute_grad(const GradIn& in, const GradOut& out, const NoAttrs&, DType dtype) {
  ops::compute(dims_of(in), dtype, kGradInputs, in, kGradOutputs, out,
               []<typename T>(const GradIn& i, const GradOut& o) {
                 return ops::gru_cell_grad_args<T>(i, o);
               });
}

// The gate gradients d_c_bar and d_r_bar_u_bar are scratch.
void compute_backward(const GradIn& in, const BackOut& out, const NoAttrs&, DType dtype) {
  const GRUDims d = dims_of(in);
  core::dispatch_float(dtype, kGradInputs, in, kBackwardOutputs, out,
                       [&]<typename T>(const GradIn& i, const BackOut& o) {
                         std::vector<T> d_c_bar(d.B * d.H), d_ru(d.B * 2 * d.H);
                         ops::run_kernel(
                             d, ops::gru_cell_backward_args<T>(i, o, d_c_bar.data(), d_ru.data()));
                       });
}

}  // namespace

namespace ops {
constexpr core::TypedOp<In, Out, Res, NoAttrs> kGRUBlockCell{
    "GRUBlockCell", kInputs, kOutputs, {}, validate_fwd, compute_fwd};
constexpr core::TypedOp<GradIn, GradOut, GradRes, NoAttrs> kGRUBlockCellGrad{
    "GRUBlockCellGrad", kGradInputs, kGradOutputs, {}, validate_grad, compute_grad};
constexpr core::TypedOp<GradIn, BackOut, BackRes, NoAttrs> kGRUBlockCellBackward{
    "gradients.GRUBlockCell", kGradInputs,     kBackwardOutputs, {},
    validate_backward,        compute_backward};
}  // namespace ops

void gru_block_cell(const GRUBlockCellInputs& in, const GRUBlockCellOutputs& out) {
  ops::kGRUBlockCell.run(in, out, {});
}
GRUBlockCellResult gru_block_cell(const GRUBlockCellInputs& in) {
  return ops::kGRUBlockCell.run(in, {});
}
void gru_block_cell_grad(const GRUBlockCellGradInputs& in, const GRUBlockCellGradOutputs& out) {
  ops::kGRUBlockCellGrad.run(in, out, {});
}
GRUBlockCellGradResult gru_block_cell_grad(const GRUBlockCellGradInputs& in) {
  return ops::kGRUBlockCellGrad.run(in, {});
}
void gru_block_cell_backward(const GRUBlockCellBackwardInputs& in,
                             const GRUBlockCellBackwardOutputs& out) {
  ops::kGRUBlockCellBackward.run(in, out, {});
}
GRUBlockCellBackwardResult gru_block_cell_backward(const GRUBlockCellBackwardInputs& in) {
  return ops::kGRUBlockCellBackward.run(in, {});
}

}  // namespace blockrnn
