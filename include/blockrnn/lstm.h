// blockrnn/lstm.h — the LSTM block cell: LSTMBlockCell, LSTMBlockCellGrad and the full cell
// backward.
//
// Shape letters: B batch, I input size, H cell size. Gate layout of w / b: ICFO, i.e. column
// blocks [i | ci | f | o] (TensorFlow's api_def says [i, f, ci, o]; the kernel is ICFO).
//   gates = [x, h_prev]·w + b
//   i  = σ(g_i [+ cs_prev⊙wci]);  ci = tanh(g_c);  f = σ((g_f + forget_bias) [+ cs_prev⊙wcf])
//   cs = i⊙ci + f⊙cs_prev, clipped to [−cell_clip, cell_clip] when cell_clip > 0
//   co = tanh(cs);  o = σ(g_o [+ cs⊙wco]);  h = o⊙co
// [..] only with use_peephole. Exactly TensorFlow's kernels (docs/ops.md), including
// the straight-through clip in the backward. dtypes: float16, bfloat16, float32, float64.
// Every function validates first and throws blockrnn::Error on bad input (B = 0 or H = 0 is an
// error, "cs_prev is empty", as in TensorFlow). Outputs passed by the caller must have the
// documented shapes and the inputs' dtype and must not alias the inputs.
#pragma once

#include "blockrnn/export.h"
#include "blockrnn/tensor.h"

namespace blockrnn {

struct LSTMBlockCellInputs {
  TensorView x;        // [B, I]
  TensorView cs_prev;  // [B, H]
  TensorView h_prev;   // [B, H]
  TensorView w;        // [I+H, 4H]  ICFO
  // [H] each, the peephole vectors, read only with use_peephole. Without use_peephole they may
  // be omitted (left default, or any view with no data or no elements) and zeros [H] are used,
  // as TensorFlow requires them (the name-based run_op of ops.h keeps that: there they are
  // required). With use_peephole, a vector without data is an error naming it.
  TensorView wci;  // [H]
  TensorView wcf;  // [H]
  TensorView wco;  // [H]
  TensorView b;    // [4H]  ICFO
};
// The op definition's attrs and defaults. Note that the op clips at ±3 by default; TensorFlow's
// Python layers passed cell_clip = −1 (no clipping) unless told otherwise (docs/ops.md).
// TensorFlow's float attrs are float32: NaN and ±inf keep their meaning, and a finite value that
// does not round to a finite float32 is refused (as by name, and by the layer objects).
struct LSTMBlockCellAttrs {
  double forget_bias = 1.0;  // added to the forget gate's pre-activation after b
  double cell_clip = 3.0;    // clip cs only when > 0 (0, negative and NaN disable it)
  bool use_peephole = false;
};
struct LSTMBlockCellOutputs {
  MutableTensorView i, cs, f, o, ci, co, h;  // each [B, H]
};
struct LSTMBlockCellResult {
  Tensor i, cs, f, o, ci, co, h;
};
BLOCKRNN_API void lstm_block_cell(const LSTMBlockCellInputs& in, const LSTMBlockCellOutputs& out,
                                  const LSTMBlockCellAttrs& attrs = {});
BLOCKRNN_API LSTMBlockCellResult lstm_block_cell(const LSTMBlockCellInputs& in,
                                                 const LSTMBlockCellAttrs& attrs = {});

// TensorFlow's LSTMBlockCellGrad kernel: ∂L/∂cs_prev, the gate gradient dicfo and the peephole
// gradients (zeros without peepholes). Derivatives come from the stored gate values; x, h_prev,
// w and b are only shape-checked. use_peephole is required, as in TensorFlow.
struct LSTMBlockCellGradInputs {
  TensorView x, cs_prev, h_prev, w, wci, wcf, wco, b;  // as LSTMBlockCellInputs (peepholes too)
  TensorView i, cs, f, o, ci, co;                      // [B, H], forward outputs
  TensorView cs_grad;                                  // [B, H], total ∂L/∂cs
  TensorView h_grad;                                   // [B, H], ∂L/∂h
};
struct LSTMBlockCellGradOutputs {
  MutableTensorView cs_prev_grad;  // [B, H]
  MutableTensorView dicfo;         // [B, 4H], ∂L/∂gates (pre-activations), ICFO
  MutableTensorView wci_grad;      // [H]
  MutableTensorView wcf_grad;      // [H]
  MutableTensorView wco_grad;      // [H]
};
struct LSTMBlockCellGradResult {
  Tensor cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad;
};
BLOCKRNN_API void lstm_block_cell_grad(const LSTMBlockCellGradInputs& in,
                                       const LSTMBlockCellGradOutputs& out, bool use_peephole);
BLOCKRNN_API LSTMBlockCellGradResult lstm_block_cell_grad(const LSTMBlockCellGradInputs& in,
                                                          bool use_peephole);

// The full backward of LSTMBlockCell: the kernel above plus the input and parameter gradients
// that TensorFlow computed in Python (docs/ops.md). One gradient per forward input. Takes the
// forward call's attrs; only use_peephole affects the result (forget_bias and cell_clip are
// accepted so the same attrs can be passed to both; the clip is straight-through).
using LSTMBlockCellBackwardInputs = LSTMBlockCellGradInputs;
struct LSTMBlockCellBackwardOutputs {
  // One gradient per forward input, named and shaped as that input (LSTMBlockCellInputs).
  MutableTensorView x, cs_prev, h_prev, w, wci, wcf, wco, b;
};
struct LSTMBlockCellBackwardResult {
  Tensor x, cs_prev, h_prev, w, wci, wcf, wco, b;
};
BLOCKRNN_API void lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                                           const LSTMBlockCellBackwardOutputs& out,
                                           const LSTMBlockCellAttrs& attrs = {});
BLOCKRNN_API LSTMBlockCellBackwardResult lstm_block_cell_backward(
    const LSTMBlockCellBackwardInputs& in, const LSTMBlockCellAttrs& attrs = {});

}  // namespace blockrnn
