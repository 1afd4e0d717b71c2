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
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/typed_defaults.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = SeqInputs<BlockGRUInputs>;
using GradIn = SeqInputs<BlockGRUGradInputs>;
constexpr auto kInputs = ops::sequence_rows<In>(ops::kGRUInputs<In>);
constexpr auto kGradInputs = ops::sequence_rows<GradIn>(
    ops::kGRUInputs<GradIn>,
    {BLOCKRNN_INPUT(GradIn, r), BLOCKRNN_INPUT(GradIn, u), BLOCKRNN_INPUT(GradIn, c),
     BLOCKRNN_INPUT(GradIn, h), BLOCKRNN_INPUT(GradIn, h_grad)});

using Out = BlockGRUOutputs;
using Res = BlockGRUResult;
constexpr auto& kOutputs = ops::kGRUOutputs<Out, Res>;
using GradOut = BlockGRUGradOutputs;
using GradRes = BlockGRUGradResult;
constexpr core::OutputField<GradOut, GradRes> kGradOutputs[] = {
    BLOCKRNN_OUTPUT(GradOut, GradRes, x_grad),    BLOCKRNN_OUTPUT(GradOut, GradRes, h_prev_grad),
    BLOCKRNN_OUTPUT(GradOut, GradRes, w_ru_grad), BLOCKRNN_OUTPUT(GradOut, GradRes, w_c_grad),
    BLOCKRNN_OUTPUT(GradOut, GradRes, b_ru_grad), BLOCKRNN_OUTPUT(GradOut, GradRes, b_c_grad)};

Plan validate_fwd(const In& in, const NoAttrs&) {
  const ops::SeqDims d =
      ops::check_sequence(Checker("BlockGRU"), kInputs, in, {}, ops::GRUState::of(in));
  const Shape tbh{d.T, d.B, d.H};
  Plan p(d.dtype, {tbh, tbh, tbh, tbh});
  p.sizes(d.T, d.B, d.I, d.H).lengths = !is_absent_input(in.seq_lengths);
  return p;
}

Plan validate_grad(const GradIn& in, const NoAttrs&) {
  const ops::Named steps[] = {
      {"r", in.r}, {"u", in.u}, {"c", in.c}, {"h", in.h}, {"h_grad", in.h_grad}};
  const ops::SeqDims d =
      ops::check_sequence(Checker("BlockGRUGrad"), kGradInputs, in, steps, ops::GRUState::of(in));
  const std::int64_t K = d.I + d.H;
  Plan p(d.dtype, {Shape{d.T, d.B, d.I}, Shape{d.B, d.H}, Shape{K, 2 * d.H}, Shape{K, d.H},
                   Shape{2 * d.H}, Shape{d.H}});
  p.sizes(d.T, d.B, d.I, d.H).lengths = !is_absent_input(in.seq_lengths);
  return p;
}

void compute_fwd(const In& in, const Out& out, const NoAttrs&, DType dtype) {
  ops::compute(ops::seq_dims<BlockGRUDims>(in), dtype, kInputs, in, kOutputs, out,
               []<typename T>(const In& i, const Out& o) {
                 return ops::gru_fwd_args<BlockGRUFwdArgs, T>(i, o);
               });
}

void compute_grad(const GradIn& in, const GradOut& out, const NoAttrs&, DType dtype) {
  ops::compute(ops::seq_dims<BlockGRUDims>(in), dtype, kGradInputs, in, kGradOutputs, out,
               []<typename T>(const GradIn& i, const GradOut& o) {
                 return ops::block_gru_bwd_args<T>(i, o);
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
