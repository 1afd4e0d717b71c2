// blockrnn/sequence.h — the sequence ops: BlockLSTM, BlockLSTMGrad (ICFO), BlockLSTMV2,
// BlockLSTMGradV2 (IFCO), and the new BlockGRU, BlockGRUGrad (docs/ops.md), and
// BlockGRUResetAfter, BlockGRUResetAfterGrad (blockrnn's extension, docs/ops.md: PyTorch's GRU).
//
// Shape letters: T time steps, B batch, I input size, H cell size, S = seq_len_max (0 ≤ S ≤ T).
// x is time-major [T, B, I]. Steps t < S run the cell (LSTMBlockCell / GRUBlockCell) on x[t]
// with the state of step t−1 (the initial state at t = 0); every output of a step t ≥ S is zero.
// The grads run t = S−1 … 0, ignore incoming gradients at t ≥ S, return zero x_grad there, and
// sum the weight, bias and peephole gradients over the steps.
//
// LSTM, per step (gate column blocks of w/b: ICFO = [i, ci, f, o], IFCO = [i, f, ci, o]):
//   gates = x[t]·w_x + h[t−1]·w_h + b;  i = σ(g_i [+ cs[t−1]⊙wci]);  ci = tanh(g_c)
//   f = σ(g_f + forget_bias [+ cs[t−1]⊙wcf]);  cs = clip(i⊙ci + f⊙cs[t−1]);  co = tanh(cs)
//   o = σ(g_o [+ cs⊙wco]);  h = o⊙co          (clip at ±cell_clip only when cell_clip > 0)
// GRU, per step: as blockrnn/gru.h.
//
// Exactly TensorFlow's kernels (docs/ops.md lists the deliberate differences, docs/ops.md: all
// outputs past S are zero; BlockLSTMGradV2 is the correct IFCO gradient). dtypes: float16,
// bfloat16, float32, float64. Every function validates first and throws blockrnn::Error on bad
// input. Outputs passed by the caller must have the documented shapes and the inputs' dtype and
// must not alias the inputs; every element of them is written.
//
// Per-example lengths (blockrnn's extension beyond TensorFlow; docs/ops.md): every Inputs and
// GradInputs struct has an optional `seq_lengths` view, int64 [B]; default-constructed it is
// absent and the op is exactly TensorFlow's. Given, each L_b must be in [0, T] (else
// InvalidArgument naming the op, seq_lengths, the index and the value) and example b runs
// E_b = min(L_b, S) steps: its outputs at t ≥ E_b are zero; the grads ignore h_grad/cs_grad
// there, return zero x_grad there and add nothing to the parameter gradients from those steps;
// h_prev_grad/cs_prev_grad of an example with E_b = 0 are zero. The final state of example b
// is h[E_b − 1, b] (cs likewise; the initial state when E_b = 0): gather it yourself. Nothing
// past E_b is read, so NaN/Inf padding in x, h_grad, cs_grad or the forward outputs never
// leaks. Lengths all ≥ S give bit for bit the call without lengths.
//
// Defaults of this typed API that TensorFlow's ops do not have (the name-based run_op of ops.h
// keeps TensorFlow's contract, where seq_len_max and the peephole vectors are required):
//   - seq_len_max is optional and defaults to T, x's time dimension: every step runs. (It was
//     an int64 defaulting to 0, which silently ran no step and returned zeros.)
//   - Without use_peephole, wci, wcf and wco may be omitted and stand for zeros [H]; with it, a
//     peephole vector without data is an error naming it.
#pragma once

#include <cstdint>
#include <optional>

#include "blockrnn/export.h"
#include "blockrnn/tensor.h"

namespace blockrnn {

// ---- BlockLSTM / BlockLSTMV2 ----------------------------------------------------------------

struct BlockLSTMInputs {
  std::optional<std::int64_t> seq_len_max;  // S, in [0, T]; unset: T, x's time dimension
  TensorView x;                             // [T, B, I]
  TensorView cs_prev;                       // [B, H]  initial cell state
  TensorView h_prev;                        // [B, H]  initial hidden state
  TensorView w;                             // [I+H, 4H]  rows: x part then h part
  // [H] each, the peephole vectors, read only with use_peephole. Without use_peephole they may
  // be omitted (left default, or any view with no data or no elements): zeros [H] are used, as
  // TensorFlow requires them. With use_peephole, a vector without data is an error naming it.
  TensorView wci, wcf, wco;
  TensorView b;            // [4H]
  TensorView seq_lengths;  // [B] int64, optional (default: absent); see the top of this file
};
struct BlockLSTMOutputs {
  MutableTensorView i, cs, f, o, ci, co, h;  // each [T, B, H]
};
struct BlockLSTMResult {
  Tensor i, cs, f, o, ci, co, h;
};
// BlockLSTM (ICFO) and BlockLSTMV2 (IFCO, no forget bias) take the same inputs and outputs; their
// attrs differ. Defaults are the op definition's, not TF's Python wrappers' (docs/ops.md).
// forget_bias and cell_clip are checked as LSTMBlockCellAttrs' are (blockrnn/lstm.h).
struct BlockLSTMAttrs {
  double forget_bias = 1.0;  // added to the forget gate's pre-activation after b
  double cell_clip = 3.0;    // clip cs only when > 0 (0, negative and NaN disable it)
  bool use_peephole = false;
};
struct BlockLSTMV2Attrs {
  double cell_clip = 0.0;
  bool use_peephole = false;
};
BLOCKRNN_API void block_lstm(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                             const BlockLSTMAttrs& attrs = {});
BLOCKRNN_API BlockLSTMResult block_lstm(const BlockLSTMInputs& in,
                                        const BlockLSTMAttrs& attrs = {});
BLOCKRNN_API void block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                                const BlockLSTMV2Attrs& attrs = {});
BLOCKRNN_API BlockLSTMResult block_lstm_v2(const BlockLSTMInputs& in,
                                           const BlockLSTMV2Attrs& attrs = {});

// ---- BlockLSTMGrad / BlockLSTMGradV2 --------------------------------------------------------

struct BlockLSTMGradInputs {
  std::optional<std::int64_t> seq_len_max;             // as BlockLSTMInputs (unset: T)
  TensorView x, cs_prev, h_prev, w, wci, wcf, wco, b;  // as BlockLSTMInputs (peepholes too)
  TensorView i, cs, f, o, ci, co, h;                   // [T, B, H], forward outputs
  TensorView cs_grad;                                  // [T, B, H], external ∂L/∂cs[t]
  TensorView h_grad;                                   // [T, B, H], external ∂L/∂h[t]
  TensorView seq_lengths;                              // [B] int64, optional (as the forward)
};
struct BlockLSTMGradOutputs {
  MutableTensorView x_grad;                        // [T, B, I]
  MutableTensorView cs_prev_grad;                  // [B, H]
  MutableTensorView h_prev_grad;                   // [B, H]
  MutableTensorView w_grad;                        // [I+H, 4H]  in the op's layout
  MutableTensorView wci_grad, wcf_grad, wco_grad;  // [H] each (zero without peepholes)
  MutableTensorView b_grad;                        // [4H]  in the op's layout
};
struct BlockLSTMGradResult {
  Tensor x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad;
};
// use_peephole is required (no default), as in TensorFlow. H = w.dim(1) / 4 must be positive.
BLOCKRNN_API void block_lstm_grad(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                                  bool use_peephole);
BLOCKRNN_API BlockLSTMGradResult block_lstm_grad(const BlockLSTMGradInputs& in, bool use_peephole);
BLOCKRNN_API void block_lstm_grad_v2(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                                     bool use_peephole);
BLOCKRNN_API BlockLSTMGradResult block_lstm_grad_v2(const BlockLSTMGradInputs& in,
                                                    bool use_peephole);

// ---- BlockGRU / BlockGRUGrad (new, docs/ops.md)
// --------------------------------------------------

struct BlockGRUInputs {
  std::optional<std::int64_t> seq_len_max;  // S, in [0, T]; unset: T, x's time dimension
  TensorView x;                             // [T, B, I]
  TensorView h_prev;                        // [B, H]
  TensorView w_ru;                          // [I+H, 2H]  columns [r | u]
  TensorView w_c;                           // [I+H, H]
  TensorView b_ru;                          // [2H]
  TensorView b_c;                           // [H]
  TensorView seq_lengths;                   // [B] int64, optional (default: absent)
};
struct BlockGRUOutputs {
  MutableTensorView r, u, c, h;  // each [T, B, H]
};
struct BlockGRUResult {
  Tensor r, u, c, h;
};
BLOCKRNN_API void block_gru(const BlockGRUInputs& in, const BlockGRUOutputs& out);
BLOCKRNN_API BlockGRUResult block_gru(const BlockGRUInputs& in);

struct BlockGRUGradInputs {
  std::optional<std::int64_t> seq_len_max;     // as BlockGRUInputs (unset: T)
  TensorView x, h_prev, w_ru, w_c, b_ru, b_c;  // as BlockGRUInputs
  TensorView r, u, c, h;                       // [T, B, H], forward outputs
  TensorView h_grad;                           // [T, B, H], external ∂L/∂h[t]
  TensorView seq_lengths;                      // [B] int64, optional (as the forward)
};
struct BlockGRUGradOutputs {
  MutableTensorView x_grad;       // [T, B, I]
  MutableTensorView h_prev_grad;  // [B, H]
  MutableTensorView w_ru_grad;    // [I+H, 2H]
  MutableTensorView w_c_grad;     // [I+H, H]
  MutableTensorView b_ru_grad;    // [2H]
  MutableTensorView b_c_grad;     // [H]
};
struct BlockGRUGradResult {
  Tensor x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad;
};
BLOCKRNN_API void block_gru_grad(const BlockGRUGradInputs& in, const BlockGRUGradOutputs& out);
BLOCKRNN_API BlockGRUGradResult block_gru_grad(const BlockGRUGradInputs& in);

// ---- BlockGRUResetAfter / BlockGRUResetAfterGrad (blockrnn's, docs/ops.md)
// ------------------------
//
// The reset-after GRU of PyTorch nn.GRU, cuDNN and Keras GRU(reset_after=True), with two bias
// sets. Gate column blocks of w_i, w_h, b_i, b_h in PyTorch's order [r | z | n] (w_i =
// weight_ih_l0ᵀ, w_h = weight_hh_l0ᵀ, b_i = bias_ih_l0, b_h = bias_hh_l0). Per step t < S,
// hp = h[t−1] (h_prev at t = 0):
//   gi = x[t]·w_i + b_i;  gh = hp·w_h + b_h                                  [B, 3H] each
//   r = σ(gi_r + gh_r);  u = σ(gi_z + gh_z);  hn = gh_n;  n = tanh(gi_n + r⊙hn)
//   h = u⊙hp + (1−u)⊙n
// Outputs past S are zero, as BlockGRU's. docs/ops.md has the gradient and Keras' layout.

struct BlockGRUResetAfterInputs {
  std::optional<std::int64_t> seq_len_max;  // S, in [0, T]; unset: T, x's time dimension
  TensorView x;                             // [T, B, I]
  TensorView h_prev;                        // [B, H]
  TensorView w_i;                           // [I, 3H]  columns [r | z | n]
  TensorView w_h;                           // [H, 3H]  columns [r | z | n]
  TensorView b_i;                           // [3H]
  TensorView b_h;                           // [3H]
  TensorView seq_lengths;                   // [B] int64, optional (default: absent)
};
struct BlockGRUResetAfterOutputs {
  MutableTensorView r, u, n;  // each [T, B, H]  reset gate, update gate (PyTorch's z), candidate
  MutableTensorView hn;       // [T, B, H]  h[t−1]·w_h_n + b_h_n (the backward reads it)
  MutableTensorView h;        // [T, B, H]
};
struct BlockGRUResetAfterResult {
  Tensor r, u, n, hn, h;
};
BLOCKRNN_API void block_gru_reset_after(const BlockGRUResetAfterInputs& in,
                                        const BlockGRUResetAfterOutputs& out);
BLOCKRNN_API BlockGRUResetAfterResult block_gru_reset_after(const BlockGRUResetAfterInputs& in);

struct BlockGRUResetAfterGradInputs {
  std::optional<std::int64_t> seq_len_max;   // as BlockGRUResetAfterInputs (unset: T)
  TensorView x, h_prev, w_i, w_h, b_i, b_h;  // as BlockGRUResetAfterInputs
  TensorView r, u, n, hn, h;                 // [T, B, H], forward outputs
  TensorView h_grad;                         // [T, B, H], external ∂L/∂h[t]
  TensorView seq_lengths;                    // [B] int64, optional (as the forward)
};
struct BlockGRUResetAfterGradOutputs {
  MutableTensorView x_grad;       // [T, B, I]
  MutableTensorView h_prev_grad;  // [B, H]
  MutableTensorView w_i_grad;     // [I, 3H]
  MutableTensorView w_h_grad;     // [H, 3H]
  MutableTensorView b_i_grad;     // [3H]
  MutableTensorView b_h_grad;     // [3H]
};
struct BlockGRUResetAfterGradResult {
  Tensor x_grad, h_prev_grad, w_i_grad, w_h_grad, b_i_grad, b_h_grad;
};
BLOCKRNN_API void block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in,
                                             const BlockGRUResetAfterGradOutputs& out);
BLOCKRNN_API BlockGRUResetAfterGradResult
block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in);

}  // namespace blockrnn
