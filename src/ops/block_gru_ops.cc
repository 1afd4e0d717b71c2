// BlockGRU and BlockGRUGrad (SPEC A6): the typed C++ functions of blockrnn/sequence.h
// (validation of the named fields, as BlockLSTM's, stricter per A3, and the kernel call) and
// their rows of the name table.
//
// Shape letters: T time, B batch, I input, H cell (from h_prev), S = seq_len_max.
// Validation order: ranks of every input (seq_len_max a scalar), then dimensions, then dtypes
// (seq_len_max int64, every other input one floating dtype), then 0 ≤ seq_len_max ≤ T.
#include "blockrnn/sequence.h"

#include "core/op_impl.h"
#include "kernel/block_gru.h"
#include "ops/checks.h"
#include "ops/kernel_args.h"
#include "ops/typed_defaults.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using core::Checker;
using core::data;
using core::InputField;
using core::InputKind;
using core::Plan;
using ops::NoAttrs;
using ops::SeqInputs;

using In = SeqInputs<BlockGRUInputs>;
using GradIn = SeqInputs<BlockGRUGradInputs>;
// seq_lengths, blockrnn's optional last input, follows the TensorFlow-style inputs.
constexpr InputField<In> kInputs[] = {
    {"seq_len_max", &In::seq_len_max_tensor, InputKind::kInt64},
    {"x", &BlockGRUInputs::x},
    {"h_prev", &BlockGRUInputs::h_prev},
    {"w_ru", &BlockGRUInputs::w_ru},
    {"w_c", &BlockGRUInputs::w_c},
    {"b_ru", &BlockGRUInputs::b_ru},
    {"b_c", &BlockGRUInputs::b_c},
    {"seq_lengths", &BlockGRUInputs::seq_lengths, InputKind::kOptional}};
constexpr InputField<GradIn> kGradInputs[] = {
    {"seq_len_max", &GradIn::seq_len_max_tensor, InputKind::kInt64},
    {"x", &BlockGRUGradInputs::x},
    {"h_prev", &BlockGRUGradInputs::h_prev},
    {"w_ru", &BlockGRUGradInputs::w_ru},
    {"w_c", &BlockGRUGradInputs::w_c},
    {"b_ru", &BlockGRUGradInputs::b_ru},
    {"b_c", &BlockGRUGradInputs::b_c},
    {"r", &BlockGRUGradInputs::r},
    {"u", &BlockGRUGradInputs::u},
    {"c", &BlockGRUGradInputs::c},
    {"h", &BlockGRUGradInputs::h},
    {"h_grad", &BlockGRUGradInputs::h_grad},
    {"seq_lengths", &BlockGRUGradInputs::seq_lengths, InputKind::kOptional}};

using Out = BlockGRUOutputs;
using Res = BlockGRUResult;
constexpr core::OutputField<Out, Res> kOutputs[] = {{"r", &Out::r, &Res::r},
                                                    {"u", &Out::u, &Res::u},
                                                    {"c", &Out::c, &Res::c},
                                                    {"h", &Out::h, &Res::h}};
using GradOut = BlockGRUGradOutputs;
using GradRes = BlockGRUGradResult;
constexpr core::OutputField<GradOut, GradRes> kGradOutputs[] = {
    {"x_grad", &GradOut::x_grad, &GradRes::x_grad},
    {"h_prev_grad", &GradOut::h_prev_grad, &GradRes::h_prev_grad},
    {"w_ru_grad", &GradOut::w_ru_grad, &GradRes::w_ru_grad},
    {"w_c_grad", &GradOut::w_c_grad, &GradRes::w_c_grad},
    {"b_ru_grad", &GradOut::b_ru_grad, &GradRes::b_ru_grad},
    {"b_c_grad", &GradOut::b_c_grad, &GradRes::b_c_grad}};

template <class Fields>
ops::GRUState state_of(const Fields& in) {
  return {in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c};
}

Plan validate_fwd(const In& in, const NoAttrs&) {
  const ops::SeqDims d = ops::check_sequence(Checker("BlockGRU"), kInputs, in, {}, state_of(in));
  const Shape tbh{d.T, d.B, d.H};
  Plan p(d.dtype, {tbh, tbh, tbh, tbh});
  p.sizes(d.T, d.B, d.I, d.H).lengths = !is_absent_input(in.seq_lengths);
  return p;
}

Plan validate_grad(const GradIn& in, const NoAttrs&) {
  const ops::Named steps[] = {
      {"r", in.r}, {"u", in.u}, {"c", in.c}, {"h", in.h}, {"h_grad", in.h_grad}};
  const ops::SeqDims d =
      ops::check_sequence(Checker("BlockGRUGrad"), kGradInputs, in, steps, state_of(in));
  const std::int64_t K = d.I + d.H;
  Plan p(d.dtype, {Shape{d.T, d.B, d.I}, Shape{d.B, d.H}, Shape{K, 2 * d.H}, Shape{K, d.H},
                   Shape{2 * d.H}, Shape{d.H}});
  p.sizes(d.T, d.B, d.I, d.H).lengths = !is_absent_input(in.seq_lengths);
  return p;
}

void compute_fwd(const In& in, const Out& out, const NoAttrs&, DType dtype) {
  const BlockGRUDims d = ops::seq_dims<BlockGRUDims>(in);
  core::dispatch_float(
      dtype, kInputs, in, kOutputs, out, [&]<typename T>(const In& i, const Out& o) {
        const auto a = ops::gru_fwd_args<BlockGRUFwdArgs, T>(i, o);
        ops::run_kernel([&] { ref::block_gru_fwd<T>(d, a); }, [&] { cpu::block_gru_fwd<T>(d, a); });
      });
}

void compute_grad(const GradIn& in, const GradOut& out, const NoAttrs&, DType dtype) {
  const BlockGRUDims d = ops::seq_dims<BlockGRUDims>(in);
  core::dispatch_float(dtype, kGradInputs, in, kGradOutputs, out,
                       [&]<typename T>(const GradIn& i, const GradOut& o) {
                         const auto a = ops::block_gru_bwd_args<T>(i, o);
                         ops::run_kernel([&] { ref::block_gru_bwd<T>(d, a); },
                                         [&] { cpu::block_gru_bwd<T>(d, a); });
                       });
}

}  // namespace

namespace ops {
constexpr Op<In, Out, Res, NoAttrs> kBlockGRU{"BlockGRU", kInputs,      kOutputs,
                                              {},         validate_fwd, compute_fwd};
constexpr Op<GradIn, GradOut, GradRes, NoAttrs> kBlockGRUGrad{
    "BlockGRUGrad", kGradInputs, kGradOutputs, {}, validate_grad, compute_grad};
}  // namespace ops

namespace core {
void register_block_gru_ops() {
  register_adapter(ops::kBlockGRU, 1);
  register_adapter(ops::kBlockGRUGrad, 1);
}
}  // namespace core

void block_gru(const BlockGRUInputs& in, const BlockGRUOutputs& out) {
  ops::kBlockGRU.run(ops::SeqCall(in).in, out, {});
}

BlockGRUResult block_gru(const BlockGRUInputs& in) {
  return ops::kBlockGRU.run(ops::SeqCall(in).in, {});
}

void block_gru_grad(const BlockGRUGradInputs& in, const BlockGRUGradOutputs& out) {
  ops::kBlockGRUGrad.run(ops::SeqCall(in).in, out, {});
}

BlockGRUGradResult block_gru_grad(const BlockGRUGradInputs& in) {
  return ops::kBlockGRUGrad.run(ops::SeqCall(in).in, {});
}

}  // namespace blockrnn
