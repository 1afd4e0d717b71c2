// BlockGRU and BlockGRUGrad (docs/ops.md): the typed C++ functions of blockrnn/sequence.h
// (validation of the named fields, as BlockLSTM's, stricter per A3, and the kernel call) and
// their rows of the name table.
//
// Shape letters: T time, B batch, I input, H cell (from h_prev), S = seq_len_max.
// Validation order: ranks of every input (seq_len_max a scalar), then dimensions, then dtypes
// (seq_len_max int64, every other input one floating dtype), then 0 ≤ seq_len_max ≤ T.
#include "blockrnn/sequence.h"

#include <array>

#include "kernel/block_gru.h"
#include "ops/checks.h"
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/op_impl.h"
#include "ops/typed_defaults.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = SeqInputs<BlockGRUInputs>;
constexpr auto kInputs = ops::sequence_rows(ops::gru_inputs<In>());
using Out = BlockGRUOutputs;
using Res = BlockGRUResult;
constexpr auto kOutputs = ops::gru_outputs<Out, Res>();

// The grad takes the forward op's inputs, and per step [T, B, H] its outputs and h_grad.
using GradIn = SeqInputs<BlockGRUGradInputs>;
constexpr auto kGradSteps =
    ops::rows(ops::gru_gate_inputs<GradIn>(),
              std::to_array<InputField<GradIn>>({{"h", &GradIn::h}, {"h_grad", &GradIn::h_grad}}));
constexpr auto kGradInputs = ops::sequence_rows(ops::gru_inputs<GradIn>(), kGradSteps);
using GradOut = BlockGRUGradOutputs;
using GradRes = BlockGRUGradResult;
constexpr OutputField<GradOut, GradRes> kGradOutputs[] = {
    {"x_grad", &GradOut::x_grad, &GradRes::x_grad},
    {"h_prev_grad", &GradOut::h_prev_grad, &GradRes::h_prev_grad},
    {"w_ru_grad", &GradOut::w_ru_grad, &GradRes::w_ru_grad},
    {"w_c_grad", &GradOut::w_c_grad, &GradRes::w_c_grad},
    {"b_ru_grad", &GradOut::b_ru_grad, &GradRes::b_ru_grad},
    {"b_c_grad", &GradOut::b_c_grad, &GradRes::b_c_grad}};

CallShape validate_fwd(const In& in, const NoAttrs&) {
  const ops::SeqSizes d =
      ops::check_sequence(Checker("BlockGRU"), kInputs, in, ops::GRUState::of(in));
  return ops::with_bf16_operands(ops::sequence_shape(d, in.seq_lengths, std::size(kOutputs)), d,
                                 cpu::block_gru_bf16_fwd_workspace_floats);
}

// Each gradient has the shape of its input.
CallShape validate_grad(const GradIn& in, const NoAttrs&) {
  const ops::SeqSizes d = ops::check_sequence(Checker("BlockGRUGrad"), kGradInputs, in,
                                              ops::GRUState::of(in), kGradSteps);
  return ops::with_bf16_operands(ops::sequence_shape(d, in.seq_lengths,
                                                     {in.x.shape, in.h_prev.shape, in.w_ru.shape,
                                                      in.w_c.shape, in.b_ru.shape, in.b_c.shape}),
                                 d, cpu::block_gru_bf16_bwd_workspace_floats);
}

void compute_fwd(const In& in, const Out& out, const NoAttrs&, DType dtype) {
  ops::compute(ops::seq_dims<BlockGRUDims>(in), dtype, kInputs, in, kOutputs, out,
               [&]<typename T>(const In& i, const Out& o) {
                 auto args = ops::gru_fwd_args<BlockGRUFwdArgs, T>(i, o);
                 ops::set_bf16_products(args, dtype);
                 return args;
               });
}

void compute_grad(const GradIn& in, const GradOut& out, const NoAttrs&, DType dtype) {
  ops::compute(ops::seq_dims<BlockGRUDims>(in), dtype, kGradInputs, in, kGradOutputs, out,
               [&]<typename T>(const GradIn& i, const GradOut& o) {
                 auto args = ops::block_gru_bwd_args<T>(i, o);
                 ops::set_bf16_products(args, dtype);
                 return args;
               });
}

}  // namespace

namespace ops {
constexpr core::TypedOp<In, Out, Res, NoAttrs> kBlockGRU{"BlockGRU", kInputs,      kOutputs,
                                                         {},         validate_fwd, compute_fwd};
constexpr core::TypedOp<GradIn, GradOut, GradRes, NoAttrs> kBlockGRUGrad{
    "BlockGRUGrad", kGradInputs, kGradOutputs, {}, validate_grad, compute_grad};
}  // namespace ops

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
