// GRUBlockCell, GRUBlockCellGrad and gradients.GRUBlockCell: the typed C++ functions of
// blockrnn/gru.h (validation of the named fields, SPEC §2.3, §3.3, A3, and the kernel call) and
// their rows of the name table.
//
// Validation order: the ranks of every input, then dimensions, then dtypes.
#include "blockrnn/gru.h"

#include "core/op_impl.h"
#include "kernel/gru_cell.h"
#include "ops/checks.h"
#include "ops/kernel_args.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using core::Checker;
using core::data;
using core::InputField;
using core::Plan;
using ops::NoAttrs;
using ops::SeqInputs;

using In = GRUBlockCellInputs;
using GradIn = GRUBlockCellGradInputs;
constexpr InputField<GradIn> kGradInputs[] = {{"x", &GradIn::x},       {"h_prev", &GradIn::h_prev},
                                              {"w_ru", &GradIn::w_ru}, {"w_c", &GradIn::w_c},
                                              {"b_ru", &GradIn::b_ru}, {"b_c", &GradIn::b_c},
                                              {"r", &GradIn::r},       {"u", &GradIn::u},
                                              {"c", &GradIn::c},       {"d_h", &GradIn::d_h}};
constexpr InputField<In> kInputs[] = {{"x", &In::x},       {"h_prev", &In::h_prev},
                                      {"w_ru", &In::w_ru}, {"w_c", &In::w_c},
                                      {"b_ru", &In::b_ru}, {"b_c", &In::b_c}};

using Out = GRUBlockCellOutputs;
using Res = GRUBlockCellResult;
constexpr core::OutputField<Out, Res> kOutputs[] = {{"r", &Out::r, &Res::r},
                                                    {"u", &Out::u, &Res::u},
                                                    {"c", &Out::c, &Res::c},
                                                    {"h", &Out::h, &Res::h}};

using GradOut = GRUBlockCellGradOutputs;
using GradRes = GRUBlockCellGradResult;
constexpr core::OutputField<GradOut, GradRes> kGradOutputs[] = {
    {"d_x", &GradOut::d_x, &GradRes::d_x},
    {"d_h_prev", &GradOut::d_h_prev, &GradRes::d_h_prev},
    {"d_c_bar", &GradOut::d_c_bar, &GradRes::d_c_bar},
    {"d_r_bar_u_bar", &GradOut::d_r_bar_u_bar, &GradRes::d_r_bar_u_bar}};

// gradients.GRUBlockCell: one gradient per forward input, named as the input.
using BackOut = GRUBlockCellBackwardOutputs;
using BackRes = GRUBlockCellBackwardResult;
constexpr core::OutputField<BackOut, BackRes> kBackwardOutputs[] = {
    {"x", &BackOut::x, &BackRes::x},          {"h_prev", &BackOut::h_prev, &BackRes::h_prev},
    {"w_ru", &BackOut::w_ru, &BackRes::w_ru}, {"w_c", &BackOut::w_c, &BackRes::w_c},
    {"b_ru", &BackOut::b_ru, &BackRes::b_ru}, {"b_c", &BackOut::b_c, &BackRes::b_c}};

template <class Fields>
ops::GRUState state_of(const Fields& in) {
  return {in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c};
}

Plan validate_fwd(const In& in, const NoAttrs&) {
  const ops::CellDims d = ops::check_cell(Checker("GRUBlockCell"), kInputs, in, {}, state_of(in));
  const Shape bh{d.B, d.H};
  return Plan(d.dtype, {bh, bh, bh, bh}).sizes(1, d.B, d.I, d.H);
}

// r, u, c, d_h [B, H] besides the forward inputs.
ops::CellDims check_grad(const char* op, const GradIn& in) {
  const ops::Named steps[] = {{"r", in.r}, {"u", in.u}, {"c", in.c}, {"d_h", in.d_h}};
  return ops::check_cell(Checker(op), kGradInputs, in, steps, state_of(in));
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

GRUDims dims_of(const GradIn& in) {
  return {in.x.shape[0], in.x.shape[1], in.h_prev.shape[1]};
}
GRUDims dims_of(const In& in) {
  return {in.x.shape[0], in.x.shape[1], in.h_prev.shape[1]};
}

template <typename T>
void run_bwd(const GRUDims& d, const GRUCellBwdArgs<T>& a) {
  ops::run_kernel([&] { ref::gru_cell_bwd<T>(d, a); }, [&] { cpu::gru_cell_bwd<T>(d, a); });
}

void compute_fwd(const In& in, const Out& out, const NoAttrs&, DType dtype) {
  const GRUDims d = dims_of(in);
  core::dispatch_float(
      dtype, kInputs, in, kOutputs, out, [&]<typename T>(const In& i, const Out& o) {
        const auto a = ops::gru_fwd_args<GRUCellFwdArgs, T>(i, o);
        ops::run_kernel([&] { ref::gru_cell_fwd<T>(d, a); }, [&] { cpu::gru_cell_fwd<T>(d, a); });
      });
}

void compute_grad(const GradIn& in, const GradOut& out, const NoAttrs&, DType dtype) {
  const GRUDims d = dims_of(in);
  core::dispatch_float(dtype, kGradInputs, in, kGradOutputs, out,
                       [&]<typename T>(const GradIn& i, const GradOut& o) {
                         run_bwd<T>(d, {.x = data<T>(i.x),
                                        .h_prev = data<T>(i.h_prev),
                                        .w_ru = data<T>(i.w_ru),
                                        .w_c = data<T>(i.w_c),
                                        .r = data<T>(i.r),
                                        .u = data<T>(i.u),
                                        .c = data<T>(i.c),
                                        .d_h = data<T>(i.d_h),
                                        .d_x = data<T>(o.d_x),
                                        .d_h_prev = data<T>(o.d_h_prev),
                                        .d_c_bar = data<T>(o.d_c_bar),
                                        .d_r_bar_u_bar = data<T>(o.d_r_bar_u_bar)});
                       });
}

// d_c_bar and d_r_bar_u_bar are scratch.
void compute_backward(const GradIn& in, const BackOut& out, const NoAttrs&, DType dtype) {
  const GRUDims d = dims_of(in);
  core::dispatch_float(dtype, kGradInputs, in, kBackwardOutputs, out,
                       [&]<typename T>(const GradIn& i, const BackOut& o) {
                         std::vector<T> d_c_bar(d.B * d.H), d_ru(d.B * 2 * d.H);
                         run_bwd<T>(d, {.x = data<T>(i.x),
                                        .h_prev = data<T>(i.h_prev),
                                        .w_ru = data<T>(i.w_ru),
                                        .w_c = data<T>(i.w_c),
                                        .r = data<T>(i.r),
                                        .u = data<T>(i.u),
                                        .c = data<T>(i.c),
                                        .d_h = data<T>(i.d_h),
                                        .d_x = data<T>(o.x),
                                        .d_h_prev = data<T>(o.h_prev),
                                        .d_c_bar = d_c_bar.data(),
                                        .d_r_bar_u_bar = d_ru.data(),
                                        .full = true,
                                        .d_w_ru = data<T>(o.w_ru),
                                        .d_w_c = data<T>(o.w_c),
                                        .d_b_ru = data<T>(o.b_ru),
                                        .d_b_c = data<T>(o.b_c)});
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

namespace {}  // namespace

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
