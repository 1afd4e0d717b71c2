// The character-level language model of `blockrnn train` / `blockrnn sample`, with its forward
// and backward pass built on the sequence ops (blockrnn/sequence.h):
//
//   ids [T, B] → embedding E[ids]                x0 [T, B, D]
//             → L recurrent layers (BlockLSTM ICFO, forget_bias 1, no clip, no peepholes;
//               or BlockGRU), layer l reads the h of layer l−1   h_l [T, B, H]
//             → logits = h_{L−1}·W + b                           [T·B, V]
//             → mean softmax cross-entropy against the next character.
//
// Shape letters: T time steps (seq_len), B batch (parallel streams), V vocabulary, D embedding,
// H hidden, L layers, I_l = D for layer 0 and H above. Time-major throughout, as the ops.
//
// Parameters (names are the checkpoint's tensor names, layouts the ops' own; the last part of a
// layer's name is the parameter's name in blockrnn.layers.LSTM / GRU):
//   embedding       [V, D]
//   layers.<l>.w    [I_l+H, 4H]   LSTM, rows [x; h], gate columns ICFO = [i, ci, f, o]
//   layers.<l>.b    [4H]          LSTM
//   layers.<l>.w_ru [I_l+H, 2H]   GRU, columns [r | u]
//   layers.<l>.w_c  [I_l+H, H]    GRU
//   layers.<l>.b_ru [2H]          GRU
//   layers.<l>.b_c  [H]           GRU
//   softmax.w       [H, V]
//   softmax.b       [V]
//
// Backward (truncated BPTT: the incoming state is a constant, its gradient is dropped):
//   dlogits = (softmax − onehot) / (T·B)
//   dW = h_topᵀ·dlogits, db = Σ_rows dlogits, dh_top = dlogits·Wᵀ
//   layer l = L−1 … 0: BlockLSTMGrad / BlockGRUGrad with h_grad = dh (cs_grad = 0), whose
//   x_grad is the h_grad of layer l−1; dE[ids[t, b]] += x_grad_0[t, b].
//
// The element type is float (training, sampling) or double (finite-difference tests).
#ifndef BLOCKRNN_TOOLS_TRAIN_CHAR_MODEL_H_
#define BLOCKRNN_TOOLS_TRAIN_CHAR_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "blockrnn/layer.h"

namespace blockrnn::train {

enum class CellKind { kLstm, kGru };

const char* cell_name(CellKind cell);                       // "lstm" / "gru"
std::optional<CellKind> parse_cell(std::string_view name);  // nullopt if unknown

// Limits that keep a model's sizes sane (and its buffers' byte counts far from overflow).
inline constexpr int64_t kMaxHidden = 8192;
inline constexpr int64_t kMaxEmbed = 8192;
inline constexpr int64_t kMaxLayers = 16;

struct ModelConfig {
  CellKind cell = CellKind::kLstm;
  int64_t vocab_size = 0;  // V, 1 .. 256
  int64_t embed = 64;      // D, 1 .. kMaxEmbed
  int64_t hidden = 256;    // H, 1 .. kMaxHidden
  int64_t layers = 1;      // L, 1 .. kMaxLayers
};

// Throws std::invalid_argument naming the first field out of range.
void validate_config(const ModelConfig& config);

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t size() const;  // product of shape
};

// The parameters of a model, in the order CharModel stores them (embedding, layers bottom-up,
// softmax). Validates the config.
std::vector<ParamSpec> param_specs(const ModelConfig& config);

// The BlockLSTM forget bias the model uses (the op's default; added at run time, not in b).
inline constexpr double kForgetBias = 1.0;

template <typename T>
class CharModel {
 public:
  // Recurrent state of every layer for B streams: h[l] and (LSTM only) cs[l], each [B, H].
  struct State {
    int64_t batch = 0;
    std::vector<std::vector<T>> h, cs;
  };

  // Parameters start at zero; call init() or set them through param().
  explicit CharModel(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  int64_t num_parameters() const;

  // Deterministic initialisation from `seed` (same values on every platform):
  //   embedding ~ U(−√3, √3) (unit variance), weights ~ U(±1/√H), LSTM b = 0,
  //   GRU b_ru = 1 and b_c = 0 (as TensorFlow's GRUBlockCell), softmax/b = 0.
  void init(uint64_t seed);

  // Parameter / gradient k (in specs() order), or by name (std::out_of_range if unknown).
  std::span<T> param(size_t k) { return params_[k]; }
  std::span<const T> param(size_t k) const { return params_[k]; }
  std::span<T> grad(size_t k) { return grads_[k]; }
  std::span<T> param(std::string_view name);
  std::span<T> grad(std::string_view name);
  size_t num_tensors() const { return specs_.size(); }

  State zero_state(int64_t batch) const;

  // One training batch: inputs/targets [T, B] time-major ids in [0, V). Computes the mean
  // cross-entropy, writes every gradient (overwriting), and replaces `state` (which must
  // have batch B) by the final state. Throws std::invalid_argument on bad sizes or ids.
  double forward_backward(std::span<const int32_t> inputs, std::span<const int32_t> targets,
                          int64_t steps, int64_t batch, State& state);

  // The same loss without gradients (state updated likewise).
  double loss(std::span<const int32_t> inputs, std::span<const int32_t> targets, int64_t steps,
              int64_t batch, State& state);

  // Logits of the last time step, [B, V], after running `inputs` [T, B] (T ≥ 1) from `state`
  // (updated). For sampling.
  std::vector<T> last_logits(std::span<const int32_t> inputs, int64_t steps, int64_t batch,
                             State& state);

  // Plan once, run many (blockrnn/layer.h): sets up the recurrent layers as layer objects with
  // the current weights (packed once) for calls of at most max_steps x max_batch; last_logits
  // then runs on them, bit for bit what it computes without. Call it again after the weights
  // change (training and loss() never use the plan).
  void plan_inference(int64_t max_steps, int64_t max_batch);

 private:
  void check_batch(std::span<const int32_t> inputs, std::span<const int32_t>* targets,
                   int64_t steps, int64_t batch, const State& state) const;
  void forward(std::span<const int32_t> inputs, int64_t steps, int64_t batch, State& state,
               bool planned = false);
  void backward(std::span<const int32_t> inputs, int64_t steps, int64_t batch);
  size_t index_of(std::string_view name) const;
  // Fills what layer l's forward and backward share: seq_len_max and x (from x's shape
  // [T, B, I]), the state the batch started from, and the weights, whose first tensor is at
  // parameter index k. `In` is BlockLSTM(Grad)Inputs or BlockGRU(Grad)Inputs.
  template <class In>
  void layer_inputs(In& in, int64_t l, size_t k, const TensorView& x) const;
  // The weights of that layer alone, for input size I.
  template <class In>
  void layer_weights(In& in, size_t k, int64_t I) const;

  ModelConfig config_;
  std::vector<ParamSpec> specs_;
  std::vector<T> param_storage_, grad_storage_;
  std::vector<std::span<T>> params_, grads_;

  // Workspace, resized when T or B change (no allocation between same-shaped calls apart
  // from what the ops allocate internally).
  int64_t ws_steps_ = -1, ws_batch_ = -1;
  std::vector<T> x0_;                      // [T, B, D]   embedded inputs
  std::vector<std::vector<T>> h0_, cs0_;   // per layer [B, H]: the state the batch started from
  std::vector<std::vector<T>> fw_;         // per layer: LSTM i, cs, f, o, ci, co, h; GRU r, u, c, h
  std::vector<T> logits_;                  // [T·B, V]  (then dlogits)
  std::vector<T> dh_, dx_;                 // [T, B, H], [T, B, max(D, H)]
  std::vector<T> zeros_tbh_;               // [T, B, H]  cs_grad = 0
  std::vector<T> zeros_h_;                 // [H]        peephole inputs (unused)
  std::vector<T> scratch_bh_, scratch_h_;  // discarded state and peephole gradients
  // plan_inference's layer objects (LSTMLayer or GRULayer), one per layer, and their limits.
  std::vector<std::unique_ptr<SequenceLayer>> planned_;
  int64_t planned_steps_ = 0, planned_batch_ = 0;
};

extern template class CharModel<float>;
extern template class CharModel<double>;

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_CHAR_MODEL_H_
