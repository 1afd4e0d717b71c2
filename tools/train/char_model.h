// The character-level language model of `blockrnn train` / `blockrnn sample`, a client of the
// library's public API only: the recurrent layers are a blockrnn::RNN (blockrnn/layer.h) and the
// output layer's products are blockrnn::matmul (blockrnn/matmul.h).
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
//   layers L−1 … 0: RNN::backward with y_grad = dh_top (no gradient into the final state),
//   which runs BlockLSTMGrad / BlockGRUGrad per layer, the x_grad of layer l being the h_grad of
//   layer l−1; dE[ids[t, b]] += x_grad_0[t, b].
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

  // Plan once, run many (blockrnn/layer.h): sets up a second RNN with the current weights
  // (packed once) for calls of at most max_steps x max_batch; last_logits then runs on it
  // without setting the weights again, bit for bit what it computes without. Call it again
  // after the weights change (training and loss() never use the plan).
  void plan_inference(int64_t max_steps, int64_t max_batch);

 private:
  void check_batch(std::span<const int32_t> inputs, std::span<const int32_t>* targets,
                   int64_t steps, int64_t batch, const State& state) const;
  void forward(std::span<const int32_t> inputs, int64_t steps, int64_t batch, State& state,
               bool planned = false);
  void backward(std::span<const int32_t> inputs, int64_t steps, int64_t batch);
  size_t index_of(std::string_view name) const;
  // An RNN of the model's layers for calls of at most max_steps x max_batch, without weights.
  std::unique_ptr<RNN> make_rnn(int64_t max_steps, int64_t max_batch) const;
  // Copies (and packs) the current recurrent weights into `rnn`.
  void set_weights(RNN& rnn) const;
  // The views of the batch's tensors: inputs x0 [T, B, D] and the initial state [L, B, H];
  // outputs y [T, B, H] (the top layer's h) and the final state [L, B, H].
  RNNInputs rnn_inputs() const;

  ModelConfig config_;
  std::vector<ParamSpec> specs_;
  std::vector<T> param_storage_, grad_storage_;
  std::vector<std::span<T>> params_, grads_;

  // The RNN of training and loss(): its weights are set from the parameters on every call, and
  // it is made again, larger, when a call exceeds the steps or batch it was made for.
  std::unique_ptr<RNN> rnn_;
  // plan_inference's RNN and its limits.
  std::unique_ptr<RNN> planned_;
  int64_t planned_steps_ = 0, planned_batch_ = 0;

  // Workspace, resized when T or B change (no allocation between same-shaped calls apart
  // from setting the RNN's weights).
  int64_t ws_steps_ = -1, ws_batch_ = -1;
  std::vector<T> x0_;             // [T, B, D]   embedded inputs
  std::vector<T> h0_, c0_;        // [L, B, H]   the state the batch started from (c0: LSTM)
  std::vector<T> hn_, cn_;        // [L, B, H]   the state it ended in
  std::vector<T> y_;              // [T, B, H]   the top layer's h
  std::vector<T> logits_;         // [T·B, V]  (then dlogits)
  std::vector<T> dy_, dx_;        // [T, B, H], [T, B, D]
  std::vector<T> peephole_grad_;  // [L, 3, H]   discarded (the LSTM has no peepholes)
  std::vector<MutableTensorView> param_grads_;  // the views of grads_ RNN::backward writes
};

extern template class CharModel<float>;
extern template class CharModel<double>;

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_CHAR_MODEL_H_
