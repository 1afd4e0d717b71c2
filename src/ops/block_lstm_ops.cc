// BlockLSTM, BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2 (docs/ops.md): the typed C++ functions
// of blockrnn/sequence.h (validation of the named fields, §7.3, §8.3 plus the checks TensorFlow
// misses, A3, and the kernel call) and their rows of the name table. V1 uses the ICFO gate
// layout, V2 IFCO (docs/ops.md).
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max. H comes from cs_prev in the
// forward ops and from w (w.dim(1) / 4, which must be a positive integer) in the grads, as in
// TensorFlow. Validation order: ranks of every input (seq_len_max a scalar), then dimensions,
// then dtypes (seq_len_max int64, every other input one floating dtype), then
// 0 ≤ seq_len_max ≤ T. The grads check what TensorFlow does not (docs/ops.md): cs_prev and h_prev
// are [B, H], the peephole vectors [H], b exactly [4H], and every per-step tensor [T, B, H].
#include "blockrnn/sequence.h"

#include <array>
#include <type_traits>

#include "kernel/block_lstm.h"
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

using In = SeqInputs<BlockLSTMInputs>;
constexpr auto kInputs = ops::sequence_rows(ops::lstm_inputs<In>());
using Out = BlockLSTMOutputs;
using Res = BlockLSTMResult;
constexpr auto kOutputs = ops::lstm_outputs<Out, Res>();

// The grads take the forward op's inputs, and per step [T, B, H] its outputs and the gradients
// of cs and h.
using GradIn = SeqInputs<BlockLSTMGradInputs>;
constexpr auto kGradSteps =
    ops::rows(ops::lstm_gate_inputs<GradIn>(),
              std::to_array<InputField<GradIn>>(
                  {{"h", &GradIn::h}, {"cs_grad", &GradIn::cs_grad}, {"h_grad", &GradIn::h_grad}}));
constexpr auto kGradInputs = ops::sequence_rows(ops::lstm_inputs<GradIn>(), kGradSteps);
using GradOut = BlockLSTMGradOutputs;
using GradRes = BlockLSTMGradResult;
constexpr OutputField<GradOut, GradRes> kGradOutputs[] = {
    {"x_grad", &GradOut::x_grad, &GradRes::x_grad},
    {"cs_prev_grad", &GradOut::cs_prev_grad, &GradRes::cs_prev_grad},
    {"h_prev_grad", &GradOut::h_prev_grad, &GradRes::h_prev_grad},
    {"w_grad", &GradOut::w_grad, &GradRes::w_grad},
    {"wci_grad", &GradOut::wci_grad, &GradRes::wci_grad},
    {"wcf_grad", &GradOut::wcf_grad, &GradRes::wcf_grad},
    {"wco_grad", &GradOut::wco_grad, &GradRes::wco_grad},
    {"b_grad", &GradOut::b_grad, &GradRes::b_grad}};

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

// The attrs first, as the name table resolves them before the inputs are validated.
// BlockLSTMV2 has no forget_bias.
template <LSTMLayout L, class A>
CallShape validate_fwd(const In& in, const A& attrs) {
  const Checker check(block_lstm_op_name(L, false));
  double forget_bias = 0.0;
  if constexpr (requires { attrs.forget_bias; }) forget_bias = attrs.forget_bias;
  ops::check_lstm_attrs(check, forget_bias, attrs.cell_clip);
  const ops::SeqSizes d = ops::check_sequence(check, kInputs, in, state_of(in, false));
  return ops::with_bf16_operands(ops::sequence_shape(d, in.seq_lengths, std::size(kOutputs)), d,
                                 cpu::block_lstm_bf16_fwd_workspace_floats);
}

// Each gradient has the shape of its input.
template <LSTMLayout L>
CallShape validate_grad(const GradIn& in, const PeepholeAttr&) {
  const ops::SeqSizes d = ops::check_sequence(Checker(block_lstm_op_name(L, true)), kGradInputs, in,
                                              state_of(in, true), kGradSteps);
  return ops::with_bf16_operands(
      ops::sequence_shape(d, in.seq_lengths,
                          {in.x.shape, in.cs_prev.shape, in.h_prev.shape, in.w.shape, in.wci.shape,
                           in.wcf.shape, in.wco.shape, in.b.shape}),
      d, cpu::block_lstm_bf16_bwd_workspace_floats);
}

// BlockLSTMV2's kernel uses forget_bias 0.
template <LSTMLayout L, class A>
void compute_fwd(const In& in, const Out& out, const A& attrs, DType dtype) {
  double forget_bias = 0.0;
  if constexpr (requires { attrs.forget_bias; }) forget_bias = attrs.forget_bias;
  ops::compute(ops::seq_dims<BlockLSTMDims>(in), dtype, kInputs, in, kOutputs, out,
               [&]<typename T>(const In& i, const Out& o) {
                 auto args = ops::lstm_fwd_args<BlockLSTMFwdArgs, T>(
                     i, o, forget_bias, attrs.cell_clip, attrs.use_peephole, L, dtype);
                 ops::set_bf16_products(args, dtype);
                 return args;
               });
}

template <LSTMLayout L>
void compute_grad(const GradIn& in, const GradOut& out, const PeepholeAttr& attrs, DType dtype) {
  ops::compute(ops::seq_dims<BlockLSTMDims>(in), dtype, kGradInputs, in, kGradOutputs, out,
               [&]<typename T>(const GradIn& i, const GradOut& o) {
                 auto args = ops::block_lstm_bwd_args<T>(i, o, attrs.use_peephole, L);
                 ops::set_bf16_products(args, dtype);
                 return args;
               });
}

// BlockLSTM and BlockLSTMV2 (kICFO, kIFCO), and their grads: the same fields, validation and
// compute but for the gate layout L.
template <LSTMLayout L, class A, std::size_t N>
constexpr core::TypedOp<In, Out, Res, A> fwd_op(const char* name,
                                                const core::AttrField<A> (&attrs)[N]) {
  return {name, kInputs, kOutputs, attrs, validate_fwd<L, A>, compute_fwd<L, A>};
}
template <LSTMLayout L>
constexpr core::TypedOp<GradIn, GradOut, GradRes, PeepholeAttr> grad_op(const char* name) {
  return {name, kGradInputs, kGradOutputs, kGradAttrs, validate_grad<L>, compute_grad<L>};
}

}  // namespace

namespace ops {
constexpr core::TypedOp<In, Out, Res, BlockLSTMAttrs> kBlockLSTM =
    fwd_op<LSTMLayout::kICFO>("BlockLSTM", kAttrs);
constexpr core::TypedOp<In, Out, Res, BlockLSTMV2Attrs> kBlockLSTMV2 =
    fwd_op<LSTMLayout::kIFCO>("BlockLSTMV2", kV2Attrs);
constexpr core::TypedOp<GradIn, GradOut, GradRes, PeepholeAttr> kBlockLSTMGrad =
    grad_op<LSTMLayout::kICFO>("BlockLSTMGrad");
constexpr core::TypedOp<GradIn, GradOut, GradRes, PeepholeAttr> kBlockLSTMGradV2 =
    grad_op<LSTMLayout::kIFCO>("BlockLSTMGradV2");
}  // namespace ops

namespace {

// op.run after the typed API's defaults (ops/typed_ops.h), into the caller's outputs (`out`) or
// allocated ones.
template <class Op, class Typed, class... Out>
auto run_op(const Op& op, const Typed& in, const typename Op::Attrs& attrs, const Out&... out) {
  const bool grad = std::is_same_v<Typed, BlockLSTMGradInputs>;
  return op.run(ops::LSTMSeqCall<Typed>(op.name, in, attrs.use_peephole, grad).in(), out..., attrs);
}

}  // namespace

void block_lstm(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                const BlockLSTMAttrs& attrs) {
  run_op(ops::kBlockLSTM, in, attrs, out);
}

BlockLSTMResult block_lstm(const BlockLSTMInputs& in, const BlockLSTMAttrs& attrs) {
  return run_op(ops::kBlockLSTM, in, attrs);
}

void block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                   const BlockLSTMV2Attrs& attrs) {
  run_op(ops::kBlockLSTMV2, in, attrs, out);
}

BlockLSTMResult block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMV2Attrs& attrs) {
  return run_op(ops::kBlockLSTMV2, in, attrs);
}

void block_lstm_grad(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                     bool use_peephole) {
  run_op(ops::kBlockLSTMGrad, in, {use_peephole}, out);
}

BlockLSTMGradResult block_lstm_grad(const BlockLSTMGradInputs& in, bool use_peephole) {
  return run_op(ops::kBlockLSTMGrad, in, {use_peephole});
}

void block_lstm_grad_v2(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                        bool use_peephole) {
  run_op(ops::kBlockLSTMGradV2, in, {use_peephole}, out);
}

BlockLSTMGradResult block_lstm_grad_v2(const BlockLSTMGradInputs& in, bool use_peephole) {
  return run_op(ops::kBlockLSTMGradV2, in, {use_peephole});
}

}  // namespace blockrnn
