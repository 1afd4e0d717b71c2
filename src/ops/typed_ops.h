// The typed ops (src/ops/*_ops.cc): each public typed function of blockrnn/{gru,lstm,sequence}.h
// is its op's run() after the typed API's defaults, and the name table is an Adapter over each.
// Declared here for the backends that validate an op the CPU path's way and run their own
// kernels (src/cuda/api.cpp).
#pragma once

#include "blockrnn/gru.h"
#include "blockrnn/lstm.h"
#include "blockrnn/sequence.h"
#include "ops/lstm_attrs.h"
#include "ops/op_impl.h"
#include "ops/typed_defaults.h"

namespace blockrnn::ops {

// A sequence op's inputs as validation and the name table see them: the typed struct, with
// seq_len_max as TensorFlow's int64 scalar tensor (the typed functions make it from the struct's
// seq_len_max; TensorFlow's callers give it).
template <class Typed>
struct SeqInputs : Typed {
  TensorView seq_len_max_tensor;
};

struct NoAttrs {};

// The names every op file (src/ops/*_ops.cc) uses: `using namespace ops::op_names;`.
namespace op_names {
using core::CallShape;
using core::Checker;
using core::data;
using core::InputField;
using core::InputKind;
using core::OutputField;
using ops::NoAttrs;
using ops::PeepholeAttr;
using ops::SeqInputs;
}  // namespace op_names

// A sequence op's typed call with the typed API's default seq_len_max (unset: T, x's time
// dimension). Holds S, so it must outlive the call.
template <class Typed>
struct SeqCall {
  std::int64_t S;
  SeqInputs<Typed> in;
  explicit SeqCall(const Typed& given)
      : S(seq_len_or_time(given.seq_len_max, given.x)), in{given, TensorView(&S, Shape{})} {}
  SeqCall(const SeqCall&) = delete;
  SeqCall& operator=(const SeqCall&) = delete;
  // The inputs, for a callee taking SeqInputs (the temporary SeqCall lives to the end of the
  // full expression, as long as the call).
  operator const SeqInputs<Typed>&() const { return in; }  // NOLINT(google-explicit-constructor)
};

// An LSTM sequence op's typed call: also the peephole defaults (H from cs_prev in the forward
// ops, from w in the grads). Holds what the views point to, so it must outlive the call.
template <class Typed>
struct LSTMSeqCall {
  SeqCall<Typed> seq;
  WithPeepholes<SeqInputs<Typed>> with;
  LSTMSeqCall(const char* op, const Typed& given, bool use_peephole, bool grad)
      : seq(given), with(op, seq.in, use_peephole, 3, grad) {}
  const SeqInputs<Typed>& in() const { return with.in; }
};

// The same call under its former name, for the callers of the reset-after GRU ops written when
// their seq_len_max was a plain int64: a SeqCall, which gives its inputs where they are expected.
template <class Typed>
SeqCall<Typed> seq_inputs(const Typed& in) {
  return SeqCall<Typed>(in);
}

extern const core::TypedOp<GRUBlockCellInputs, GRUBlockCellOutputs, GRUBlockCellResult, NoAttrs>
    kGRUBlockCell;
extern const core::TypedOp<GRUBlockCellGradInputs, GRUBlockCellGradOutputs, GRUBlockCellGradResult,
                           NoAttrs>
    kGRUBlockCellGrad;
extern const core::TypedOp<GRUBlockCellGradInputs, GRUBlockCellBackwardOutputs,
                           GRUBlockCellBackwardResult, NoAttrs>
    kGRUBlockCellBackward;

extern const core::TypedOp<LSTMBlockCellInputs, LSTMBlockCellOutputs, LSTMBlockCellResult,
                           LSTMBlockCellAttrs>
    kLSTMBlockCell;
extern const core::TypedOp<LSTMBlockCellGradInputs, LSTMBlockCellGradOutputs,
                           LSTMBlockCellGradResult, PeepholeAttr>
    kLSTMBlockCellGrad;
extern const core::TypedOp<LSTMBlockCellGradInputs, LSTMBlockCellBackwardOutputs,
                           LSTMBlockCellBackwardResult, LSTMBlockCellAttrs>
    kLSTMBlockCellBackward;

extern const core::TypedOp<SeqInputs<BlockLSTMInputs>, BlockLSTMOutputs, BlockLSTMResult,
                           BlockLSTMAttrs>
    kBlockLSTM;
extern const core::TypedOp<SeqInputs<BlockLSTMInputs>, BlockLSTMOutputs, BlockLSTMResult,
                           BlockLSTMV2Attrs>
    kBlockLSTMV2;
extern const core::TypedOp<SeqInputs<BlockLSTMGradInputs>, BlockLSTMGradOutputs,
                           BlockLSTMGradResult, PeepholeAttr>
    kBlockLSTMGrad;
extern const core::TypedOp<SeqInputs<BlockLSTMGradInputs>, BlockLSTMGradOutputs,
                           BlockLSTMGradResult, PeepholeAttr>
    kBlockLSTMGradV2;

extern const core::TypedOp<SeqInputs<BlockGRUInputs>, BlockGRUOutputs, BlockGRUResult, NoAttrs>
    kBlockGRU;
extern const core::TypedOp<SeqInputs<BlockGRUGradInputs>, BlockGRUGradOutputs, BlockGRUGradResult,
                           NoAttrs>
    kBlockGRUGrad;

extern const core::TypedOp<SeqInputs<BlockGRUResetAfterInputs>, BlockGRUResetAfterOutputs,
                           BlockGRUResetAfterResult, NoAttrs>
    kBlockGRUResetAfter;
extern const core::TypedOp<SeqInputs<BlockGRUResetAfterGradInputs>, BlockGRUResetAfterGradOutputs,
                           BlockGRUResetAfterGradResult, NoAttrs>
    kBlockGRUResetAfterGrad;

}  // namespace blockrnn::ops
