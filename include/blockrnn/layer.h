// blockrnn/layer.h — plan once, run many: layer objects for the sequence ops and the cell ops, and
// a stack of them.
//
// A layer object is the sequence op of blockrnn/sequence.h set up once for many calls:
//   - created from sizes (input_size I, hidden_size H), a dtype and the op's attrs, all validated
//     at creation (blockrnn::Error naming the layer and the argument);
//   - weights set once: copied into the layer and packed for the fast kernels (the recurrent
//     weights by gate block and transposed, the input projection), work each one-shot call
//     redoes; set them again whenever they change (after an optimiser step);
//   - a workspace sized to the call: owned by the layer and grown, at a call that needs more
//     than it holds, to exactly what that call needs (workspace_bytes(S, B) of its seq_len_max S
//     and batch B), so it never exceeds the largest single call's need; or, with
//     caller_workspace, passed by the caller to each call. Nothing is sized for max_time ×
//     max_batch: those are bounds a call's T and B are checked against, not a reservation;
//   - forward / backward check only what changes per call (x's T ≤ max_time and B ≤ max_batch,
//     the shapes, dtypes and data of the per-call views, that no output overlaps an input or
//     another output, seq_len_max and seq_lengths' values, the call's memory), then run the
//     kernel: no registry lookup and, once the workspace holds the call, no allocation of data
//     (the backward packs the gate gradients for its weight-gradient products into the
//     workspace; the index of seq_lengths' active rows is kept by the layer, in buffers that
//     keep their capacity; a bfloat16 call's bfloat16 product operands live in the workspace);
//   - the weights packed transposed, which only the backward multiplies by (its d_x and carry
//     products), are packed at the first backward after set_weights that needs them (the input
//     rows' only when x_grad is wanted), not by set_weights: a layer that only runs forward (a
//     model loaded for inference) never holds them, and a backward without x_grad never packs
//     the input rows transposed. The bits are the same either way.
// Memory: every allocation is counted against get_memory_limit() (blockrnn/context.h) by the
// accounting the one-shot ops use, before anything is allocated: at creation the weights the
// layer will hold (their copies and packed panels), at set_weights the same, at a call the
// one-shot op's bound for the call's shapes plus the workspace it grows by. Too much is
// Error(kResourceExhausted) naming the layer, the entry point and the bytes, e.g.
// "LSTMLayer.forward: this call needs 37.5 TiB (…), more than the memory limit of 64 MiB …".
// Every entry point throws only blockrnn::Error.
// Results are bit for bit those of the one-shot ops for the same inputs (the forward returns
// the op's outputs, which are what the backward reads), in every ISA path and the reference
// mode (set_force_reference). dtypes: float32, float64, float16 and bfloat16. The 16-bit layers
// compute as their one-shot ops do (docs/design.md): the weights are widened to float32 once, at
// set_weights (and packed as float32 weights); each call widens its 16-bit views into float32
// copies inside the workspace, runs the float32 kernel and rounds each output once into the
// caller's view. Their workspace_bytes(T, B) therefore counts those copies too, for x's T (not
// seq_len_max: every step of x and of the outputs is staged), and a caller's workspace must be
// aligned to 4 bytes. A bfloat16 layer whose op multiplies bfloat16 operands ("bfloat16
// products": BlockLSTM(V2), BlockGRU, BlockGRUResetAfter on the fast path) packs its weights for
// those products once, at set_weights, and takes the products' per-call bfloat16 operands from
// the workspace (workspace_bytes counts them); the same bits as the op, which packs and
// allocates them per call.
// One call at a time per layer object (it owns one workspace): set_weights, forward or backward
// started while another call on the same object runs (another thread) throws
// Error(kInvalidArgument) "<Layer>.<fn>: another call on this object is running …"; RNN alike.
//
// RNN stacks layer objects as torch.nn.LSTM / torch.nn.GRU do: num_layers, bidirectional,
// dropout between layers, per-example lengths and initial states, with a backward that returns
// the gradients of x, the initial states and every weight and bias. See RNN below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "blockrnn/export.h"
#include "blockrnn/gru.h"
#include "blockrnn/lstm.h"
#include "blockrnn/sequence.h"
#include "blockrnn/tensor.h"

namespace blockrnn {

// Sizes and workspace of every layer object.
struct LayerShape {
  std::int64_t input_size = 0;   // I ≥ 0
  std::int64_t hidden_size = 0;  // H ≥ 1
  DType dtype = DType::kFloat32;
  // The largest T and B a call may have (≥ 0; each call is checked against them). Nothing is
  // allocated for them: the workspace follows the calls (see above).
  std::int64_t max_time = 1;
  std::int64_t max_batch = 1;
  // false: the layer owns its workspace (grown to the largest call). true: it allocates none
  // and every call passes one of at least workspace_bytes(S, B) bytes, aligned to the dtype's
  // size (float16, bfloat16: 4, they stage through float32), overlapping none of the call's views.
  bool caller_workspace = false;
};

// A caller-owned workspace for one call (absent: the layer's own).
struct LayerWorkspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

class BLOCKRNN_API SequenceLayer {
 public:
  virtual ~SequenceLayer();
  SequenceLayer(const SequenceLayer&) = delete;
  SequenceLayer& operator=(const SequenceLayer&) = delete;

  const LayerShape& shape() const noexcept { return shape_; }
  // Bytes of workspace one call with T steps (seq_len_max) and B examples needs (forward or
  // backward); T and B in [0, max_time] and [0, max_batch]. A bfloat16 layer's bfloat16
  // product operands are sized for the active CPU path (set_isa), read at each call.
  std::size_t workspace_bytes(std::int64_t T, std::int64_t B) const;
  bool has_weights() const noexcept { return has_weights_; }

 protected:
  SequenceLayer(const char* name, const LayerShape& shape,
                std::int64_t (*elems)(std::int64_t, std::int64_t, std::int64_t, std::int64_t));
  const char* name_;
  LayerShape shape_;
  bool has_weights_ = false;
  std::int64_t (*elems_)(std::int64_t, std::int64_t, std::int64_t, std::int64_t);
  Tensor own_workspace_;
};

// ---- The per-call structs of each layer -----------------------------------------------------

struct LSTMLayerAttrs {
  bool v2 = false;  // false: BlockLSTM (gates ICFO); true: BlockLSTMV2 (IFCO, PyTorch's)
  // Unset: the op's default (BlockLSTM: forget_bias 1.0, cell_clip 3.0; BlockLSTMV2: cell_clip
  // 0.0 and no forget bias, so forget_bias must stay unset or be 0 there).
  std::optional<double> forget_bias;
  std::optional<double> cell_clip;
  bool use_peephole = false;
};

struct LSTMLayerInputs {
  std::optional<std::int64_t> seq_len_max;  // S in [0, T]; unset: T
  TensorView x;                             // [T, B, I]
  TensorView cs_prev;                       // [B, H]
  TensorView h_prev;                        // [B, H]
  TensorView seq_lengths;                   // [B] int64, optional (blockrnn/sequence.h)
};
struct LSTMLayerGradInputs {
  std::optional<std::int64_t> seq_len_max;
  TensorView x, cs_prev, h_prev;      // as the forward
  TensorView i, cs, f, o, ci, co, h;  // [T, B, H], the forward's outputs
  TensorView cs_grad, h_grad;         // [T, B, H]
  TensorView seq_lengths;
};

// GRULayer and GRUResetAfterLayer (the same forward inputs).
struct GRULayerInputs {
  std::optional<std::int64_t> seq_len_max;
  TensorView x;            // [T, B, I]
  TensorView h_prev;       // [B, H]
  TensorView seq_lengths;  // [B] int64, optional
};
struct GRULayerGradInputs {
  std::optional<std::int64_t> seq_len_max;
  TensorView x, h_prev;
  TensorView r, u, c, h;  // [T, B, H], the forward's outputs
  TensorView h_grad;      // [T, B, H]
  TensorView seq_lengths;
};
struct GRUResetAfterLayerGradInputs {
  std::optional<std::int64_t> seq_len_max;
  TensorView x, h_prev;
  TensorView r, u, n, hn, h;  // [T, B, H], the forward's outputs
  TensorView h_grad;          // [T, B, H]
  TensorView seq_lengths;
};

// ---- The layer objects ------------------------------------------------------------------------
//
// What every layer object does, for the per-call structs of its op (the classes below set it up
// with their attrs and weights; src/layer/layer.cc has each op's kernels and weight shapes).
template <class In, class Out, class GradIn, class GradOut>
class BLOCKRNN_API BlockLayer : public SequenceLayer {
 public:
  using Inputs = In;
  using Outputs = Out;
  using GradInputs = GradIn;
  using GradOutputs = GradOut;
  ~BlockLayer() override;
  // The op (BlockLSTM(V2), BlockGRU, BlockGRUResetAfter): fills out, each [T, B, H].
  void forward(const Inputs& in, const Outputs& out, LayerWorkspace workspace = {});
  // The op's grad: every gradient of out (the weights' in the op's layout). An absent x_grad
  // (a default view): the input gradient is not computed (its products are skipped). An absent
  // h_prev_grad (or the LSTM's cs_prev_grad): that initial-state gradient is not computed
  // (without h_prev_grad the first step's recurrent product is skipped). The other gradients
  // are bit for bit those of a call with every output.
  void backward(const GradInputs& in, const GradOutputs& out, LayerWorkspace workspace = {});

 protected:
  struct Impl;
  BlockLayer(const char* name, const LayerShape& shape);
  // Copies, checks and packs the weights in set_weights' order; those past weights.size() (an
  // LSTM's peepholes without use_peephole) are zeros, as the ops use for omitted peepholes.
  void set_weight_views(std::span<const TensorView> weights);
  // The memory the weights will take (their copies and packed panels) against the memory limit.
  void check_weights_memory(const char* fn) const;
  std::unique_ptr<Impl> impl_;
};

extern template class BLOCKRNN_API
    BlockLayer<LSTMLayerInputs, BlockLSTMOutputs, LSTMLayerGradInputs, BlockLSTMGradOutputs>;
extern template class BLOCKRNN_API
    BlockLayer<GRULayerInputs, BlockGRUOutputs, GRULayerGradInputs, BlockGRUGradOutputs>;
extern template class BLOCKRNN_API
    BlockLayer<GRULayerInputs, BlockGRUResetAfterOutputs, GRUResetAfterLayerGradInputs,
               BlockGRUResetAfterGradOutputs>;

// BlockLSTM / BlockLSTMV2: forward fills BlockLSTMOutputs (i, cs, f, o, ci, co, h), backward
// BlockLSTMGradOutputs (w_grad, b_grad in the op's layout).
class BLOCKRNN_API LSTMLayer : public BlockLayer<LSTMLayerInputs, BlockLSTMOutputs,
                                                 LSTMLayerGradInputs, BlockLSTMGradOutputs> {
 public:
  LSTMLayer(const LayerShape& shape, const LSTMLayerAttrs& attrs = {});
  // w [I+H, 4H], b [4H] (the op's layout); wci, wcf, wco [H] with use_peephole (else omitted).
  void set_weights(TensorView w, TensorView b, TensorView wci = {}, TensorView wcf = {},
                   TensorView wco = {});
  const LSTMLayerAttrs& attrs() const noexcept { return attrs_; }

 private:
  LSTMLayerAttrs attrs_;
};

// BlockGRU.
class BLOCKRNN_API GRULayer
    : public BlockLayer<GRULayerInputs, BlockGRUOutputs, GRULayerGradInputs, BlockGRUGradOutputs> {
 public:
  explicit GRULayer(const LayerShape& shape);
  // w_ru [I+H, 2H], w_c [I+H, H], b_ru [2H], b_c [H].
  void set_weights(TensorView w_ru, TensorView w_c, TensorView b_ru, TensorView b_c);
};

// BlockGRUResetAfter (PyTorch's GRU).
class BLOCKRNN_API GRUResetAfterLayer
    : public BlockLayer<GRULayerInputs, BlockGRUResetAfterOutputs, GRUResetAfterLayerGradInputs,
                        BlockGRUResetAfterGradOutputs> {
 public:
  explicit GRUResetAfterLayer(const LayerShape& shape);
  // w_i [I, 3H], w_h [H, 3H], b_i [3H], b_h [3H] (gate blocks [r | z | n]).
  void set_weights(TensorView w_i, TensorView w_h, TensorView b_i, TensorView b_h);
};

// ---- Cell layer objects: LSTMBlockCell and GRUBlockCell set up once ------------------------
//
// The cell ops of blockrnn/lstm.h and blockrnn/gru.h (one step on [B, ·] tensors), set up once for
// many calls in the same way as the sequence layers above: sizes, dtype (float32 or float64) and
// attrs validated at creation; set_weights copies the weights and packs every matrix a call
// multiplies by (w and its row blocks transposed), which the one-shot op packs again at each call;
// forward and backward check only the call's views (B ≤ max_batch, shapes, dtypes, no output
// overlapping an input or another output, the memory of a workspace that grows) and run the
// op's kernel on the packed weights and the workspace. Once the workspace holds the call (the
// layer's own, grown to exactly workspace_bytes(B) of the largest B so far, or the caller's with
// caller_workspace), a call allocates nothing on the heap, forward and backward alike (the
// backward packs its per-call operand of the weight gradients into the workspace). The
// reference mode (set_force_reference) runs the reference kernels, as the ops do.
// Results are bit for bit those of lstm_block_cell / lstm_block_cell_backward (and the
// LSTMBlockCellGrad gate gradient dicfo) and gru_block_cell / gru_block_cell_backward (and
// GRUBlockCellGrad's d_c_bar, d_r_bar_u_bar), in every ISA path, for every thread count.
// One call at a time per object, as the sequence layers.
struct CellLayerShape {
  std::int64_t input_size = 0;   // I ≥ 0
  std::int64_t hidden_size = 0;  // H ≥ 1
  DType dtype = DType::kFloat32;
  // The largest B a call may have (≥ 1 for the LSTM cell, which refuses an empty batch as
  // LSTMBlockCell does; ≥ 0 for the GRU cell). Nothing is allocated for it.
  std::int64_t max_batch = 1;
  // As LayerShape::caller_workspace: every call passes a workspace of workspace_bytes(B).
  bool caller_workspace = false;
};

// What both cell layers share: sizes, the workspace and the weights' state.
class BLOCKRNN_API CellLayer {
 public:
  virtual ~CellLayer();
  CellLayer(const CellLayer&) = delete;
  CellLayer& operator=(const CellLayer&) = delete;

  const CellLayerShape& shape() const noexcept { return shape_; }
  // Bytes of workspace one call (forward or backward) of B examples needs; B in [0, max_batch].
  std::size_t workspace_bytes(std::int64_t B) const;
  bool has_weights() const noexcept { return has_weights_; }

 protected:
  CellLayer(const char* name, const CellLayerShape& shape, std::int64_t min_batch,
            std::int64_t (*elems)(std::int64_t, std::int64_t, std::int64_t));
  const char* name_;
  CellLayerShape shape_;
  bool has_weights_ = false;
  std::int64_t (*elems_)(std::int64_t, std::int64_t, std::int64_t);
  Tensor own_workspace_;
};

struct LSTMCellLayerInputs {
  TensorView x;        // [B, I]
  TensorView cs_prev;  // [B, H]
  TensorView h_prev;   // [B, H]
};
// The forward fills LSTMBlockCellOutputs (i, cs, f, o, ci, co, h, each [B, H]).
struct LSTMCellLayerGradInputs {
  TensorView x, cs_prev, h_prev;   // as the forward
  TensorView i, cs, f, o, ci, co;  // [B, H], the forward's outputs
  TensorView cs_grad, h_grad;      // [B, H], total ∂L/∂cs and ∂L/∂h
};
// gradients.LSTMBlockCell's gradients, named <input>_grad.
struct LSTMCellLayerGradOutputs {
  MutableTensorView x_grad;                        // [B, I]
  MutableTensorView cs_prev_grad, h_prev_grad;     // [B, H]
  MutableTensorView w_grad;                        // [I+H, 4H]
  MutableTensorView wci_grad, wcf_grad, wco_grad;  // [H] (zeros without use_peephole)
  MutableTensorView b_grad;                        // [4H]
  // Optional (absent: kept in the workspace): LSTMBlockCellGrad's gate gradient [B, 4H], ICFO.
  MutableTensorView dicfo;
};

// LSTMBlockCell (gate layout ICFO) with its attrs (forget_bias, cell_clip, use_peephole).
class BLOCKRNN_API LSTMCellLayer : public CellLayer {
 public:
  struct Impl;
  LSTMCellLayer(const CellLayerShape& shape, const LSTMBlockCellAttrs& attrs = {});
  ~LSTMCellLayer() override;
  // w [I+H, 4H], b [4H]; wci, wcf, wco [H] with use_peephole (else omitted: zeros).
  void set_weights(TensorView w, TensorView b, TensorView wci = {}, TensorView wcf = {},
                   TensorView wco = {});
  void forward(const LSTMCellLayerInputs& in, const LSTMBlockCellOutputs& out,
               LayerWorkspace workspace = {});
  void backward(const LSTMCellLayerGradInputs& in, const LSTMCellLayerGradOutputs& out,
                LayerWorkspace workspace = {});
  const LSTMBlockCellAttrs& attrs() const noexcept { return attrs_; }

 private:
  LSTMBlockCellAttrs attrs_;
  std::unique_ptr<Impl> impl_;
};

struct GRUCellLayerInputs {
  TensorView x;       // [B, I]
  TensorView h_prev;  // [B, H]
};
// The forward fills GRUBlockCellOutputs (r, u, c, h, each [B, H]).
struct GRUCellLayerGradInputs {
  TensorView x, h_prev;  // as the forward
  TensorView r, u, c;    // [B, H], the forward's outputs
  TensorView h_grad;     // [B, H], ∂L/∂h (GRUBlockCellGrad's d_h)
};
// gradients.GRUBlockCell's gradients, named <input>_grad.
struct GRUCellLayerGradOutputs {
  MutableTensorView x_grad;       // [B, I]
  MutableTensorView h_prev_grad;  // [B, H]
  MutableTensorView w_ru_grad;    // [I+H, 2H]
  MutableTensorView w_c_grad;     // [I+H, H]
  MutableTensorView b_ru_grad;    // [2H]
  MutableTensorView b_c_grad;     // [H]
  // Optional (absent: kept in the workspace): GRUBlockCellGrad's gate gradients.
  MutableTensorView d_c_bar;        // [B, H]
  MutableTensorView d_r_bar_u_bar;  // [B, 2H]
};

// GRUBlockCell.
class BLOCKRNN_API GRUCellLayer : public CellLayer {
 public:
  struct Impl;
  explicit GRUCellLayer(const CellLayerShape& shape);
  ~GRUCellLayer() override;
  // w_ru [I+H, 2H], w_c [I+H, H], b_ru [2H], b_c [H].
  void set_weights(TensorView w_ru, TensorView w_c, TensorView b_ru, TensorView b_c);
  void forward(const GRUCellLayerInputs& in, const GRUBlockCellOutputs& out,
               LayerWorkspace workspace = {});
  void backward(const GRUCellLayerGradInputs& in, const GRUCellLayerGradOutputs& out,
                LayerWorkspace workspace = {});

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- RNN: a stack of layer objects ----------------------------------------------------------
//
// torch.nn.LSTM / torch.nn.GRU's structure on blockrnn's layers. Layer l (0-based) of direction
// d (0 forward, 1 reverse) is a layer object with input size I (l = 0) or D·H (l > 0), D = 2
// when bidirectional. The input of layer l > 0 is the output of layer l − 1, both directions
// concatenated on the feature axis ([T, B, D·H], forward first), times the dropout mask of
// layer l − 1 when given. The reverse direction runs each example backwards within its own
// length L_b (x[L_b − 1 − t, b] at its step t), as PyTorch's packed sequences do, and its
// output is put back in time order. Steps t ≥ L_b of every output are zero.
//
// Dropout: the caller passes the masks, so that any RNG (torch's) can be matched bit for bit:
// dropout_mask [num_layers − 1, T, B, D·H] in the dtype, already scaled (0 or 1/(1 − p), as
// torch's dropout multiplies by); layer l + 1 reads y_l ⊙ mask[l]. Absent: no dropout.
//
// The forward keeps what the backward reads (every layer's activations, the reversed inputs,
// the inputs of the upper layers) in a reserve, as cuDNN does: the RNN's own (grown to the
// forward call that needs it; backward then uses the latest forward call's and checks that its
// x has that call's T and B, the same lengths and the same presence of dropout_mask) or the
// caller's, a 1-D tensor of reserve_elems(T, B) elements of the dtype passed to the forward and
// again, unchanged, to its backward (so that several forward calls can await their backward).
//
// Memory, as the layer objects': nothing is sized for max_time × max_batch; the reserve, the
// layers' one shared workspace and the backward's scratch grow to the call that needs them,
// after the memory check (core::check_memory's accounting: one layer call's bound plus what the
// buffers grow by). Creation checks every size (num_layers included) and the memory of all the
// layer objects' weights before creating any. Every output (y, h_n, c_n, the gradients, each
// params[k], a caller's reserve in the forward) must overlap no input and no other output.
enum class RNNMode : std::uint8_t {
  kLSTM,           // BlockLSTM (ICFO), LSTMLayerAttrs apply
  kLSTMV2,         // BlockLSTMV2 (IFCO, torch.nn.LSTM's gate order)
  kGRU,            // BlockGRU (TensorFlow's reset-before GRU)
  kGRUResetAfter,  // BlockGRUResetAfter (torch.nn.GRU)
};

// How RNN::set_weights takes each (layer, direction)'s parameters and RNN::backward writes their
// gradients.
enum class ParamLayout : std::uint8_t {
  // The layer objects' (their set_weights): LSTM w [I+H, 4H], b [4H], wci, wcf, wco [H]; GRU
  // w_ru [I+H, 2H], w_c [I+H, H], b_ru [2H], b_c [H]; GRU reset-after w_i [I, 3H], w_h [H, 3H],
  // b_i [3H], b_h [3H].
  kOps,
  // torch.nn's, for kLSTMV2 and kGRUResetAfter only: weight_ih [G, I], weight_hh [G, H],
  // bias_ih [G], bias_hh [G] (G = 4H, gates i, f, g, o; or 3H, gates r, z, n), then the LSTM's
  // peepholes wci, wcf, wco [H] — the tensors of torch.nn.LSTM / torch.nn.GRU as they are, with
  // no transposing copy by the caller. The stack converts them to the layers' layout (the
  // weights transposed, the LSTM's two biases summed in the dtype) and the gradients back, so the
  // values are the kOps stack's, bit for bit. Absent biases (bias=False) are zeros; an absent
  // gradient view is not written.
  kTorch,
};

struct RNNOptions {
  RNNMode mode = RNNMode::kLSTMV2;
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 1;
  bool bidirectional = false;
  DType dtype = DType::kFloat32;
  std::int64_t max_time = 1;  // bounds of a call's T and B (nothing is sized for them)
  std::int64_t max_batch = 1;
  LSTMLayerAttrs lstm;  // the LSTM modes' attrs (v2 is set from mode)
  // true: the RNN allocates no reserve of its own; every forward and backward passes one.
  bool caller_reserve = false;
  ParamLayout param_layout = ParamLayout::kOps;
};

struct RNNInputs {
  TensorView x;             // [T, B, I]
  TensorView h0;            // [L·D, B, H]; absent: zeros
  TensorView c0;            // [L·D, B, H] (LSTM modes); absent: zeros
  TensorView seq_lengths;   // [B] int64 in [0, T]; absent: every example runs T steps
  TensorView dropout_mask;  // [L − 1, T, B, D·H], optional (see above)
};
struct RNNOutputs {
  MutableTensorView y;    // [T, B, D·H]
  MutableTensorView h_n;  // [L·D, B, H]  state at each example's last step
  MutableTensorView c_n;  // [L·D, B, H]  (LSTM modes; ignored otherwise)
};
struct RNNGradInputs {
  TensorView y_grad;    // [T, B, D·H]
  TensorView h_n_grad;  // [L·D, B, H]; absent: zeros
  TensorView c_n_grad;  // [L·D, B, H] (LSTM modes); absent: zeros
};
struct RNNGradOutputs {
  MutableTensorView x_grad;   // [T, B, I]; absent: not computed (the first layer's input
                              // gradient products are skipped; nothing else changes)
  MutableTensorView h0_grad;  // [L·D, B, H]; absent: not computed (the first step's recurrent
                              // products are skipped; nothing else changes)
  MutableTensorView c0_grad;  // [L·D, B, H] (LSTM modes; ignored otherwise); absent: not computed
  // The gradients of every layer's parameters, in set_weights' order, layer-major then
  // direction: (l, d) holds params_per_layer() views starting at (l·D + d)·params_per_layer().
  std::span<const MutableTensorView> params;
};

class BLOCKRNN_API RNN {
 public:
  struct Impl;
  explicit RNN(const RNNOptions& options);
  ~RNN();
  RNN(const RNN&) = delete;
  RNN& operator=(const RNN&) = delete;

  const RNNOptions& options() const noexcept;
  std::int64_t num_directions() const noexcept;
  // Parameters per (layer, direction): LSTM 5 (w, b, wci, wcf, wco), GRU 4 (w_ru, w_c, b_ru,
  // b_c), GRU reset-after 4 (w_i, w_h, b_i, b_h); shapes as the layer objects' set_weights.
  // ParamLayout::kTorch: LSTM 7 (weight_ih, weight_hh, bias_ih, bias_hh, wci, wcf, wco), GRU
  // reset-after 4 (weight_ih, weight_hh, bias_ih, bias_hh).
  int params_per_layer() const noexcept;
  // Sets the parameters of (layer, direction), in the order above (LSTM without peepholes: the
  // three peephole views may be absent, or left out: w, b; kTorch: the four without them).
  void set_weights(std::int64_t layer, std::int64_t direction, std::span<const TensorView> params);
  // Elements of the reserve of a call with T steps and B examples (T, B within max_time,
  // max_batch).
  std::int64_t reserve_elems(std::int64_t T, std::int64_t B) const;
  void forward(const RNNInputs& in, const RNNOutputs& out, MutableTensorView reserve = {});
  // Gradients through a forward call, which `in` must repeat (the same views, unchanged: the
  // backward reads x, the initial states, the lengths and the masks again) with its reserve.
  void backward(const RNNInputs& in, const RNNGradInputs& grad, const RNNGradOutputs& out,
                TensorView reserve = {});

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace blockrnn
