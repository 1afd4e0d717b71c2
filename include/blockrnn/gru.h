// blockrnn/gru.h — the GRU block cell: GRUBlockCell, GRUBlockCellGrad and the full cell backward.
//
// Shape letters: B batch, I input size, H cell size. Gate layout of w_ru / b_ru: [r | u].
//   ru_bar = [x, h_prev]·w_ru + b_ru;  r = σ(ru_bar[:, :H]);  u = σ(ru_bar[:, H:])
//   c      = tanh([x, h_prev⊙r]·w_c + b_c)
//   h      = u⊙(h_prev − c) + c
// Exactly TensorFlow's kernels (docs/ops.md). dtypes: float16, bfloat16, float32, float64.
// Every function validates first and throws blockrnn::Error on bad input. Outputs passed by the
// caller must have the documented shapes and the inputs' dtype and must not alias the inputs.
#pragma once

#include "blockrnn/export.h"
#include "blockrnn/tensor.h"

namespace blockrnn {

struct GRUBlockCellInputs {
  TensorView x;       // [B, I]
  TensorView h_prev;  // [B, H]
  TensorView w_ru;    // [I+H, 2H]
  TensorView w_c;     // [I+H, H]
  TensorView b_ru;    // [2H]
  TensorView b_c;     // [H]
};
struct GRUBlockCellOutputs {
  MutableTensorView r, u, c, h;  // each [B, H]
};
struct GRUBlockCellResult {
  Tensor r, u, c, h;
};
BLOCKRNN_API void gru_block_cell(const GRUBlockCellInputs& in, const GRUBlockCellOutputs& out);
BLOCKRNN_API GRUBlockCellResult gru_block_cell(const GRUBlockCellInputs& in);

// TensorFlow's GRUBlockCellGrad kernel: gradients w.r.t. x, h_prev and the gate
// pre-activations. x, b_ru and b_c are only shape-checked (the kernel never reads them).
struct GRUBlockCellGradInputs {
  TensorView x, h_prev, w_ru, w_c, b_ru, b_c;  // as GRUBlockCellInputs
  TensorView r, u, c;                          // [B, H], forward outputs
  TensorView d_h;                              // [B, H], ∂L/∂h
};
struct GRUBlockCellGradOutputs {
  MutableTensorView d_x;            // [B, I]
  MutableTensorView d_h_prev;       // [B, H]
  MutableTensorView d_c_bar;        // [B, H]
  MutableTensorView d_r_bar_u_bar;  // [B, 2H]
};
struct GRUBlockCellGradResult {
  Tensor d_x, d_h_prev, d_c_bar, d_r_bar_u_bar;
};
BLOCKRNN_API void gru_block_cell_grad(const GRUBlockCellGradInputs& in,
                                      const GRUBlockCellGradOutputs& out);
BLOCKRNN_API GRUBlockCellGradResult gru_block_cell_grad(const GRUBlockCellGradInputs& in);

// The full backward of GRUBlockCell: the kernel above plus the parameter gradients that
// TensorFlow computed in Python (docs/ops.md). One gradient per forward input.
using GRUBlockCellBackwardInputs = GRUBlockCellGradInputs;
struct GRUBlockCellBackwardOutputs {
  // One gradient per forward input, named and shaped as that input (GRUBlockCellInputs).
  MutableTensorView x, h_prev, w_ru, w_c, b_ru, b_c;
};
struct GRUBlockCellBackwardResult {
  Tensor x, h_prev, w_ru, w_c, b_ru, b_c;
};
BLOCKRNN_API void gru_block_cell_backward(const GRUBlockCellBackwardInputs& in,
                                          const GRUBlockCellBackwardOutputs& out);
BLOCKRNN_API GRUBlockCellBackwardResult
gru_block_cell_backward(const GRUBlockCellBackwardInputs& in);

}  // namespace blockrnn
