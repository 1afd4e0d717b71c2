// GRUBlockCell, GRUBlockCellGrad and gradients.GRUBlockCell: the typed C++ functions of
// blockrnn/gru.h (validation of the named fields, SPEC §2.3, §3.3, A3, and the kernel call) and
// their rows of the name table.
//
// Validation order: the ranks of every input, then dimensions, then dtypes.
#include "blockrnn/gru.h"

#include <vector>

#include "core/op_impl.h"
#include "kernel/gru_cell.h"
#include "ops/checks.h"
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = GRUBlockCellInputs;
using GradIn = GRUBlockCellGradInputs;
constexpr auto kGradInputs = ops::rows<InputField<GradIn>>(
    ops::kGRUInputs<GradIn>, {BLOCKRNN_INPUT(GradIn, r), BLOCKRNN_INPUT(GradIn, u),
                              BLOCKRNN_INPUT(GradIn, c), BLOCKRNN_INPUT(GradIn, d_h)});
constexpr auto& kInputs = ops::kGRUInputs<In>;

using Out = GRUBlockCellOutputs;
using Res = GRUBlockCellResult;
constexpr auto& kOutputs = ops::kGRUOutputs<Out, Res>;

using GradOut = GRUBlockCellGradOutputs;
using GradRes = GRUBlockCellGradResult;
constexpr core::OutputField<GradOut, GradRes> kGradOutputs[] = {
    BLOCKRNN_OUTPUT(GradOut, GradRes, d_x), BLOCKRNN_OUTPUT(GradOut, GradRes, d_h_prev),
    BLOCKRNN_OUTPUT(GradOut, GradRes, d_c_bar), BLOCKRNN_OUTPUT(GradOut, GradRes, d_r_bar_u_bar)};

// gradients.GRUBlockCell: one gradient per forward input, named as the input.
using BackOut = GRUBlockCellBackwardOutputs;
using BackRes = GRUBlockCellBackwardResult;
constexpr core::OutputField<BackOut, BackRes> kBackwardOutputs[] = {
    BLOCKRNN_OUTPUT(BackOut, BackRes, x),    BLOCKRNN_OUTPUT(BackOut, BackRes, h_prev),
    BLOCKRNN_OUTPUT(BackOut, BackRes, w_ru), BLOCKRNN_OUTPUT(BackOut, BackRes, w_c),
    BLOCKRNN_OUTPUT(BackOut, BackRes, b_ru), BLOCKRNN_OUTPUT(BackOut, BackRes, b_c)};

Plan validate_fwd(const In& in, const NoAttrs&) {
  const ops::CellDims d =
      ops::check_cell(Checker("GRUBlockCell"), kInputs, in, {}, ops::GRUState::of(in));
  const Shape bh{d.B, d.H};
  return Plan(d.dtype, {bh, bh, bh, bh}).sizes(1, d.B, d.I, d.H);
}

// r, u, c, d_h [B, H] besides the forward inputs.
ops::CellDims check_grad(const char* op, const GradIn& in) {
  const ops::Named steps[] = {{"r", in.r}, {"u", in.u}, {"c", in.c}, {"d_h", in.d_h}};
  return ops::check_cell(Checker(op), kGradInputs, in, steps, ops::GRUState::of(in));
}

Plan validate_grad(const GradIn& in, const NoAttrs&) {
  const ops::CellDims d = check_grad("GRUBlockCellGrad", in);
  return Plan(d.dtype, {Shape{d.B, d.I}, Shape{d.B, d.H}, Shape{d.B, d.H}, Shape{d.B, 2 * d.H}})
      .sizes(1, d.B, d.I, d.H);
}

Plan validate_backward(const GradIn& in, const NoAttrs&) {
  const ops::CellDims d = check_grad("gradients.GRUBlockCell", in);
  const std::int64_t K = d.I + d.H;
  return Plan(d.dtype, {Shape{d.B, d.I}, Shape{d.B, d.H}, Shape{K, 2 * d.H}, Shape{K, d.H},
                        Shape{2 * d.H}, Shape{d.H}})
      .sizes(1, d.B, d.I, d.H);
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
constexpr Op<In, Out, Res, NoAttrs> kGRUBlockCell{"GRUBlockCell", kInputs,    kOutputs, {},
                                                  validate_fwd,   compute_fwd};
constexpr Op<GradIn, GradOut, GradRes, NoAttrs> kGRUBlockCellGrad{
    "GRUBlockCellGrad", kGradInputs, kGradOutputs, {}, validate_grad, compute_grad};
constexpr Op<GradIn, BackOut, BackRes, NoAttrs> kGRUBlockCellBackward{
    "gradients.GRUBlockCell", kGradInputs,     kBackwardOutputs, {},
    validate_backward,        compute_backward};
}  // namespace ops

namespace core {
void register_gru_ops() {
  register_adapter(ops::kGRUBlockCell);
  register_adapter(ops::kGRUBlockCellGrad);
  register_adapter(ops::kGRUBlockCellBackward);
}
}  // namespace core

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
