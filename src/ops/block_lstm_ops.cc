// BlockLSTM, BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2 (SPEC §7–§8): the typed C++ functions
// of blockrnn/sequence.h (validation of the named fields, §7.3, §8.3 plus the checks TensorFlow
// misses, A3, and the kernel call) and their rows of the name table. V1 uses the ICFO gate
// layout, V2 IFCO (SPEC §1.3).
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max. H comes from cs_prev in the
// forward ops and from w (w.dim(1) / 4, which must be a positive integer) in the grads, as in
// TensorFlow. Validation order: ranks of every input (seq_len_max a scalar), then dimensions,
// then dtypes (seq_len_max int64, every other input one floating dtype), then
// 0 ≤ seq_len_max ≤ T. The grads check what TensorFlow does not (SPEC §8.3): cs_prev and h_prev
// are [B, H], the peephole vectors [H], b exactly [4H], and every per-step tensor [T, B, H].
#include "blockrnn/sequence.h"

#include "core/op_impl.h"
#include "kernel/block_lstm.h"
#include "ops/checks.h"
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/lstm_attrs.h"
#include "ops/typed_defaults.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = SeqInputs<BlockLSTMInputs>;
using GradIn = SeqInputs<BlockLSTMGradInputs>;
constexpr auto kInputs = ops::sequence_rows<In>(ops::kLSTMInputs<In>);
constexpr auto kGradInputs = ops::sequence_rows<GradIn>(
    ops::kLSTMInputs<GradIn>, ops::kLSTMGates<GradIn>,
    {BLOCKRNN_INPUT(GradIn, h), BLOCKRNN_INPUT(GradIn, cs_grad), BLOCKRNN_INPUT(GradIn, h_grad)});

using Out = BlockLSTMOutputs;
using Res = BlockLSTMResult;
constexpr auto& kOutputs = ops::kLSTMOutputs<Out, Res>;
using GradOut = BlockLSTMGradOutputs;
using GradRes = BlockLSTMGradResult;
constexpr core::OutputField<GradOut, GradRes> kGradOutputs[] = {
    BLOCKRNN_OUTPUT(GradOut, GradRes, x_grad),      BLOCKRNN_OUTPUT(GradOut, GradRes, cs_prev_grad),
    BLOCKRNN_OUTPUT(GradOut, GradRes, h_prev_grad), BLOCKRNN_OUTPUT(GradOut, GradRes, w_grad),
    BLOCKRNN_OUTPUT(GradOut, GradRes, wci_grad),    BLOCKRNN_OUTPUT(GradOut, GradRes, wcf_grad),
    BLOCKRNN_OUTPUT(GradOut, GradRes, wco_grad),    BLOCKRNN_OUTPUT(GradOut, GradRes, b_grad)};

constexpr core::AttrField<BlockLSTMAttrs> kAttrs[] = {
    core::attr<&BlockLSTMAttrs::forget_bias>("forget_bias"),
    core::attr<&BlockLSTMAttrs::cell_clip>("cell_clip"),
    core::attr<&BlockLSTMAttrs::use_peephole>("use_peephole")};
constexpr core::AttrField<BlockLSTMV2Attrs> kV2Attrs[] = {
    core::attr<&BlockLSTMV2Attrs::cell_clip>("cell_clip"),
    core::attr<&BlockLSTMV2Attrs::use_peephole>("use_peephole")};
constexpr core::AttrField<PeepholeAttr> kGradAttrs[] = {
    core::attr<&PeepholeAttr::use_peephole>("use_peephole", true)};

template <class Fields>
ops::LSTMState state_of(const Fields& in, bool grad) {
  return ops::LSTMState::of(in, grad, false);
}

template <LSTMLayout L, class A>
Plan validate_fwd(const In& in, const A&) {
  const ops::SeqDims d = ops::check_sequence(Checker(block_lstm_op_name(L, false)), kInputs, in, {},
                                             state_of(in, false));
  const Shape tbh{d.T, d.B, d.H};
  Plan p(d.dtype, {tbh, tbh, tbh, tbh, tbh, tbh, tbh});
  p.sizes(d.T, d.B, d.I, d.H).lengths = !is_absent_input(in.seq_lengths);
  return p;
}

template <LSTMLayout L>
Plan validate_grad(const GradIn& in, const PeepholeAttr&) {
  const ops::Named steps[] = {{"i", in.i}, {"cs", in.cs},           {"f", in.f},
                              {"o", in.o}, {"ci", in.ci},           {"co", in.co},
                              {"h", in.h}, {"cs_grad", in.cs_grad}, {"h_grad", in.h_grad}};
  const ops::SeqDims d = ops::check_sequence(Checker(block_lstm_op_name(L, true)), kGradInputs, in,
                                             steps, state_of(in, true));
  // Each gradient has the shape of its input.
  Plan p(d.dtype, {in.x.shape, in.cs_prev.shape, in.h_prev.shape, in.w.shape, in.wci.shape,
                   in.wcf.shape, in.wco.shape, in.b.shape});
  p.sizes(d.T, d.B, d.I, d.H).lengths = !is_absent_input(in.seq_lengths);
  return p;
}

// BlockLSTMV2's kernel uses forget_bias 0.
template <LSTMLayout L, class A>
void compute_fwd(const In& in, const Out& out, const A& attrs, DType dtype) {
  double forget_bias = 0.0;
  if constexpr (requires { attrs.forget_bias; }) forget_bias = attrs.forget_bias;
  ops::compute(ops::seq_dims<BlockLSTMDims>(in), dtype, kInputs, in, kOutputs, out,
               [&]<typename T>(const In& i, const Out& o) {
                 return ops::lstm_fwd_args<BlockLSTMFwdArgs, T>(i, o, forget_bias, attrs.cell_clip,
                                                                attrs.use_peephole, L, dtype);
               });
}

template <LSTMLayout L>
void compute_grad(const GradIn& in, const GradOut& out, const PeepholeAttr& attrs, DType dtype) {
  ops::compute(ops::seq_dims<BlockLSTMDims>(in), dtype, kGradInputs, in, kGradOutputs, out,
               [&]<typename T>(const GradIn& i, const GradOut& o) {
                 return ops::block_lstm_bwd_args<T>(i, o, attrs.use_peephole, L);
               });
}

constexpr auto kICFO = LSTMLayout::kICFO;
constexpr auto kIFCO = LSTMLayout::kIFCO;

}  // namespace

namespace ops {
constexpr Op<In, Out, Res, BlockLSTMAttrs> kBlockLSTM{"BlockLSTM",
                                                      kInputs,
                                                      kOutputs,
                                                      kAttrs,
                                                      validate_fwd<kICFO, BlockLSTMAttrs>,
                                                      compute_fwd<kICFO, BlockLSTMAttrs>};
constexpr Op<In, Out, Res, BlockLSTMV2Attrs> kBlockLSTMV2{"BlockLSTMV2",
                                                          kInputs,
                                                          kOutputs,
                                                          kV2Attrs,
                                                          validate_fwd<kIFCO, BlockLSTMV2Attrs>,
                                                          compute_fwd<kIFCO, BlockLSTMV2Attrs>};
constexpr Op<GradIn, GradOut, GradRes, PeepholeAttr> kBlockLSTMGrad{
    "BlockLSTMGrad", kGradInputs,          kGradOutputs,
    kGradAttrs,      validate_grad<kICFO>, compute_grad<kICFO>};
constexpr Op<GradIn, GradOut, GradRes, PeepholeAttr> kBlockLSTMGradV2{
    "BlockLSTMGradV2", kGradInputs,          kGradOutputs,
    kGradAttrs,        validate_grad<kIFCO>, compute_grad<kIFCO>};
}  // namespace ops

namespace {

// The typed API's defaults (ops/typed_ops.h).
using FwdCall = ops::LSTMSeqCall<BlockLSTMInputs>;
using GradCall = ops::LSTMSeqCall<BlockLSTMGradInputs>;

}  // namespace

namespace core {
void register_block_lstm_ops() {
  register_adapter(ops::kBlockLSTM, 1);
  register_adapter(ops::kBlockLSTMGrad, 1);
  register_adapter(ops::kBlockLSTMV2, 1);
  register_adapter(ops::kBlockLSTMGradV2, 1);
}
}  // namespace core

void block_lstm(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                const BlockLSTMAttrs& attrs) {
  ops::kBlockLSTM.run(FwdCall("BlockLSTM", in, attrs.use_peephole, false).in(), out, attrs);
}

BlockLSTMResult block_lstm(const BlockLSTMInputs& in, const BlockLSTMAttrs& attrs) {
  return ops::kBlockLSTM.run(FwdCall("BlockLSTM", in, attrs.use_peephole, false).in(), attrs);
}

void block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                   const BlockLSTMV2Attrs& attrs) {
  ops::kBlockLSTMV2.run(FwdCall("BlockLSTMV2", in, attrs.use_peephole, false).in(), out, attrs);
}

BlockLSTMResult block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMV2Attrs& attrs) {
  return ops::kBlockLSTMV2.run(FwdCall("BlockLSTMV2", in, attrs.use_peephole, false).in(), attrs);
}

void block_lstm_grad(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                     bool use_peephole) {
  ops::kBlockLSTMGrad.run(GradCall("BlockLSTMGrad", in, use_peephole, true).in(), out,
                          {use_peephole});
}

BlockLSTMGradResult block_lstm_grad(const BlockLSTMGradInputs& in, bool use_peephole) {
  return ops::kBlockLSTMGrad.run(GradCall("BlockLSTMGrad", in, use_peephole, true).in(),
                                 {use_peephole});
}

void block_lstm_grad_v2(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                        bool use_peephole) {
  ops::kBlockLSTMGradV2.run(GradCall("BlockLSTMGradV2", in, use_peephole, true).in(), out,
                            {use_peephole});
}

BlockLSTMGradResult block_lstm_grad_v2(const BlockLSTMGradInputs& in, bool use_peephole) {
  return ops::kBlockLSTMGradV2.run(GradCall("BlockLSTMGradV2", in, use_peephole, true).in(),
                                   {use_peephole});
}

}  // namespace blockrnn
