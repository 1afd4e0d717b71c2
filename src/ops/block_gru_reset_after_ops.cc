// BlockGRUResetAfter and BlockGRUResetAfterGrad (blockrnn's extension, docs/ops.md; not TensorFlow
// ops): the typed C++ functions of blockrnn/sequence.h (validation of the named fields and the
// kernel call) and their rows of the name table. The math is in src/ref/block_gru_reset_after.h.
//
// Shape letters: T time, B batch, I input, H cell (from h_prev), S = seq_len_max.
// Validation order, as BlockGRU's: ranks of every input (seq_len_max a scalar), then dimensions,
// then dtypes (seq_len_max int64, every other input one floating dtype), then 0 ≤ S ≤ T.
#include "blockrnn/sequence.h"

#include <array>

#include "kernel/block_gru_reset_after.h"
#include "ops/checks.h"
#include "ops/fields.h"
#include "ops/kernel_args.h"
#include "ops/op_impl.h"
#include "ops/typed_ops.h"

namespace blockrnn {
namespace {

using namespace ops::op_names;  // NOLINT(build/namespaces)

using In = SeqInputs<BlockGRUResetAfterInputs>;
constexpr auto kInputs = ops::sequence_rows(ops::gru_reset_after_inputs<In>());
using Out = BlockGRUResetAfterOutputs;
using Res = BlockGRUResetAfterResult;
constexpr OutputField<Out, Res> kOutputs[] = {{"r", &Out::r, &Res::r},
                                              {"u", &Out::u, &Res::u},
                                              {"n", &Out::n, &Res::n},
                                              {"hn", &Out::hn, &Res::hn},
                                              {"h", &Out::h, &Res::h}};

// The grad takes the forward op's inputs, and per step [T, B, H] its outputs and h_grad.
using GradIn = SeqInputs<BlockGRUResetAfterGradInputs>;
constexpr auto kGradSteps = std::to_array<InputField<GradIn>>({{"r", &GradIn::r},
                                                               {"u", &GradIn::u},
                                                               {"n", &GradIn::n},
                                                               {"hn", &GradIn::hn},
                                                               {"h", &GradIn::h},
                                                               {"h_grad", &GradIn::h_grad}});
constexpr auto kGradInputs = ops::sequence_rows(ops::gru_reset_after_inputs<GradIn>(), kGradSteps);
using GradOut = BlockGRUResetAfterGradOutputs;
using GradRes = BlockGRUResetAfterGradResult;
constexpr OutputField<GradOut, GradRes> kGradOutputs[] = {
    {"x_grad", &GradOut::x_grad, &GradRes::x_grad},
    {"h_prev_grad", &GradOut::h_prev_grad, &GradRes::h_prev_grad},
    {"w_i_grad", &GradOut::w_i_grad, &GradRes::w_i_grad},
    {"w_h_grad", &GradOut::w_h_grad, &GradRes::w_h_grad},
    {"b_i_grad", &GradOut::b_i_grad, &GradRes::b_i_grad},
    {"b_h_grad", &GradOut::b_h_grad, &GradRes::b_h_grad}};

// h_prev [B, H], w_i [I, 3H], w_h [H, 3H], b_i and b_h [3H]; H is h_prev's.
struct State {
  const TensorView &h_prev, &w_i, &w_h, &b_i, &b_h;

  template <class Fields>
  static State of(const Fields& in) {
    return {in.h_prev, in.w_i, in.w_h, in.b_i, in.b_h};
  }
  void ranks(const Checker& check) const {
    ops::check_ranks(check, 2, {{"h_prev", h_prev}, {"w_i", w_i}, {"w_h", w_h}});
    ops::check_ranks(check, 1, {{"b_i", b_i}, {"b_h", b_h}});
  }
  std::int64_t cell_size(const Checker&) const { return h_prev.shape[1]; }
  void shapes(const Checker& check, const TensorView&, std::int64_t B, std::int64_t I,
              std::int64_t H) const {
    const std::int64_t H3 =
        core::checked_mul(check.op(), "3 * cell_size (h_prev's last dimension)", 3, H);
    check.shape("h_prev", h_prev, {B, H}, ops::kStateDims);
    check.shape("w_i", w_i, {I, H3}, "input_size, 3 * cell_size");
    check.shape("w_h", w_h, {H, H3}, "cell_size, 3 * cell_size");
    check.shape("b_i", b_i, {H3}, "3 * cell_size");
    check.shape("b_h", b_h, {H3}, "3 * cell_size");
  }
};

CallShape validate_fwd(const In& in, const NoAttrs&) {
  const ops::SeqSizes d =
      ops::check_sequence(Checker("BlockGRUResetAfter"), kInputs, in, State::of(in));
  return ops::with_bf16_operands(ops::sequence_shape(d, in.seq_lengths, std::size(kOutputs)), d,
                                 cpu::block_gru_reset_after_bf16_fwd_workspace_floats);
}

// Each gradient has the shape of its input.
CallShape validate_grad(const GradIn& in, const NoAttrs&) {
  const ops::SeqSizes d = ops::check_sequence(Checker("BlockGRUResetAfterGrad"), kGradInputs, in,
                                              State::of(in), kGradSteps);
  return ops::with_bf16_operands(ops::sequence_shape(d, in.seq_lengths,
                                                     {in.x.shape, in.h_prev.shape, in.w_i.shape,
                                                      in.w_h.shape, in.b_i.shape, in.b_h.shape}),
                                 d, cpu::block_gru_reset_after_bf16_bwd_workspace_floats);
}

void compute_fwd(const In& in, const Out& out, const NoAttrs&, DType dtype) {
  ops::compute(ops::seq_dims<BlockGRUDims>(in), dtype, kInputs, in, kOutputs, out,
               [&]<typename T>(const In& i, const Out& o) {
                 auto args = ops::gru_reset_after_fwd_args<T>(i, o);
                 ops::set_bf16_products(args, dtype);
                 return args;
               });
}

void compute_grad(const GradIn& in, const GradOut& out, const NoAttrs&, DType dtype) {
  ops::compute(ops::seq_dims<BlockGRUDims>(in), dtype, kGradInputs, in, kGradOutputs, out,
               [&]<typename T>(const GradIn& i, const GradOut& o) {
                 auto args = ops::gru_reset_after_bwd_args<T>(i, o);
                 ops::set_bf16_products(args, dtype);
                 return args;
               });
}

}  // namespace

namespace ops {
constexpr core::TypedOp<In, Out, Res, NoAttrs> kBlockGRUResetAfter{
    "BlockGRUResetAfter", kInputs, kOutputs, {}, validate_fwd, compute_fwd};
constexpr core::TypedOp<GradIn, GradOut, GradRes, NoAttrs> kBlockGRUResetAfterGrad{
    "BlockGRUResetAfterGrad", kGradInputs, kGradOutputs, {}, validate_grad, compute_grad};
}  // namespace ops

void block_gru_reset_after(const BlockGRUResetAfterInputs& in,
                           const BlockGRUResetAfterOutputs& out) {
  ops::kBlockGRUResetAfter.run(ops::SeqCall(in).in, out, {});
}

BlockGRUResetAfterResult block_gru_reset_after(const BlockGRUResetAfterInputs& in) {
  return ops::kBlockGRUResetAfter.run(ops::SeqCall(in).in, {});
}

void block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in,
                                const BlockGRUResetAfterGradOutputs& out) {
  ops::kBlockGRUResetAfterGrad.run(ops::SeqCall(in).in, out, {});
}

BlockGRUResetAfterGradResult block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in) {
  return ops::kBlockGRUResetAfterGrad.run(ops::SeqCall(in).in, {});
}

}  // namespace blockrnn
