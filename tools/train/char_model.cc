// CharModel: embedding → BlockLSTM/BlockGRU layers → softmax, forward and backward (see
// char_model.h for the equations and shapes). The recurrent layers are a blockrnn::RNN; the
// embedding gather/scatter and the output layer are done here (blockrnn::matmul for its three
// products).
#include "train/char_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "blockrnn/layer.h"
#include "blockrnn/matmul.h"
#include "blockrnn/tensor.h"
#include "train/softmax_xent.h"

namespace blockrnn::train {
namespace {

// Uniform in [lo, hi) from the top 53 bits of one draw: the same values on every platform
// (std::uniform_real_distribution is implementation-defined).
double uniform(std::mt19937_64& rng, double lo, double hi) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

void check_range(const char* what, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    throw std::invalid_argument(std::string("model ") + what + " must be in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                std::to_string(value));
  }
}

// Parameters per recurrent layer in specs() (LSTM w, b; GRU w_ru, w_c, b_ru, b_c): the order of
// RNN::set_weights for the LSTM without peepholes and for the GRU.
size_t layer_params(CellKind cell) {
  return cell == CellKind::kLstm ? 2 : 4;
}

}  // namespace

const char* cell_name(CellKind cell) {
  return cell == CellKind::kLstm ? "lstm" : "gru";
}

std::optional<CellKind> parse_cell(std::string_view name) {
  if (name == "lstm") return CellKind::kLstm;
  if (name == "gru") return CellKind::kGru;
  return std::nullopt;
}

void validate_config(const ModelConfig& c) {
  check_range("vocabulary size", c.vocab_size, 1, 256);
  check_range("embedding size", c.embed, 1, kMaxEmbed);
  check_range("hidden size", c.hidden, 1, kMaxHidden);
  check_range("number of layers", c.layers, 1, kMaxLayers);
}

int64_t ParamSpec::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ParamSpec> param_specs(const ModelConfig& c) {
  validate_config(c);
  const int64_t V = c.vocab_size, D = c.embed, H = c.hidden;
  std::vector<ParamSpec> specs;
  specs.push_back({"embedding", {V, D}});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int64_t K = (l == 0 ? D : H) + H;  // I_l + H
    if (c.cell == CellKind::kLstm) {
      specs.push_back({p + "w", {K, 4 * H}});
      specs.push_back({p + "b", {4 * H}});
    } else {
      specs.push_back({p + "w_ru", {K, 2 * H}});
      specs.push_back({p + "w_c", {K, H}});
      specs.push_back({p + "b_ru", {2 * H}});
      specs.push_back({p + "b_c", {H}});
    }
  }
  specs.push_back({"softmax.w", {H, V}});
  specs.push_back({"softmax.b", {V}});
  return specs;
}

template <typename T>
CharModel<T>::CharModel(const ModelConfig& config) : config_(config), specs_(param_specs(config)) {
  int64_t total = 0;
  for (const ParamSpec& s : specs_) total += s.size();
  param_storage_.assign(total, T(0));
  grad_storage_.assign(total, T(0));
  int64_t offset = 0;
  for (const ParamSpec& s : specs_) {
    params_.emplace_back(param_storage_.data() + offset, s.size());
    grads_.emplace_back(grad_storage_.data() + offset, s.size());
    offset += s.size();
  }
}

template <typename T>
int64_t CharModel<T>::num_parameters() const {
  return static_cast<int64_t>(param_storage_.size());
}

template <typename T>
void CharModel<T>::init(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double ws = 1.0 / std::sqrt(static_cast<double>(config_.hidden));
  for (size_t k = 0; k < specs_.size(); ++k) {
    const std::string& name = specs_[k].name;
    const bool is_bias = name.ends_with(".b") || name.ends_with(".b_ru") || name.ends_with(".b_c");
    double lo = -ws, hi = ws;
    if (name == "embedding") lo = -std::sqrt(3.0), hi = std::sqrt(3.0);
    for (T& v : params_[k]) {
      if (is_bias) {
        v = T(name.ends_with(".b_ru") ? 1 : 0);
      } else {
        v = static_cast<T>(uniform(rng, lo, hi));
      }
    }
  }
}

template <typename T>
size_t CharModel<T>::index_of(std::string_view name) const {
  for (size_t k = 0; k < specs_.size(); ++k) {
    if (specs_[k].name == name) return k;
  }
  throw std::out_of_range("model has no parameter '" + std::string(name) + "'");
}

template <typename T>
std::span<T> CharModel<T>::param(std::string_view name) {
  return params_[index_of(name)];
}

template <typename T>
std::span<T> CharModel<T>::grad(std::string_view name) {
  return grads_[index_of(name)];
}

template <typename T>
typename CharModel<T>::State CharModel<T>::zero_state(int64_t batch) const {
  if (batch < 1) throw std::invalid_argument("batch must be >= 1, got " + std::to_string(batch));
  State s;
  s.batch = batch;
  const size_t n = static_cast<size_t>(batch * config_.hidden);
  s.h.assign(config_.layers, std::vector<T>(n, T(0)));
  if (config_.cell == CellKind::kLstm) s.cs.assign(config_.layers, std::vector<T>(n, T(0)));
  return s;
}

template <typename T>
void CharModel<T>::check_batch(std::span<const int32_t> inputs, std::span<const int32_t>* targets,
                               int64_t steps, int64_t batch, const State& state) const {
  if (steps < 1 || batch < 1) {
    throw std::invalid_argument("steps and batch must be >= 1, got " + std::to_string(steps) +
                                " and " + std::to_string(batch));
  }
  const size_t n = static_cast<size_t>(steps * batch);
  if (inputs.size() != n || (targets != nullptr && targets->size() != n)) {
    throw std::invalid_argument(
        "inputs and targets must hold steps * batch = " + std::to_string(n) + " ids");
  }
  const size_t bh = static_cast<size_t>(batch * config_.hidden);
  bool state_ok = state.batch == batch && static_cast<int64_t>(state.h.size()) == config_.layers;
  for (const auto& h : state.h) state_ok = state_ok && h.size() == bh;
  if (config_.cell == CellKind::kLstm) {
    state_ok = state_ok && static_cast<int64_t>(state.cs.size()) == config_.layers;
    for (const auto& cs : state.cs) state_ok = state_ok && cs.size() == bh;
  }
  if (!state_ok) {
    throw std::invalid_argument("state does not match the model for batch " +
                                std::to_string(batch));
  }
  for (int32_t id : inputs) {
    if (id < 0 || id >= config_.vocab_size) {
      throw std::invalid_argument("input id " + std::to_string(id) + " is outside [0, " +
                                  std::to_string(config_.vocab_size) + ")");
    }
  }
}

template <typename T>
std::unique_ptr<RNN> CharModel<T>::make_rnn(int64_t max_steps, int64_t max_batch) const {
  const bool lstm = config_.cell == CellKind::kLstm;
  RNNOptions o;
  o.mode = lstm ? RNNMode::kLSTM : RNNMode::kGRU;
  o.input_size = config_.embed;
  o.hidden_size = config_.hidden;
  o.num_layers = config_.layers;
  o.dtype = dtype_of<T>();
  o.max_time = max_steps;
  o.max_batch = max_batch;
  o.lstm = LSTMLayerAttrs{.forget_bias = kForgetBias, .cell_clip = -1.0};  // clip disabled
  return std::make_unique<RNN>(o);
}

template <typename T>
void CharModel<T>::set_weights(RNN& rnn) const {
  const int64_t D = config_.embed, H = config_.hidden;
  const DType dt = dtype_of<T>();
  const size_t per_layer = layer_params(config_.cell);
  for (int64_t l = 0; l < config_.layers; ++l) {
    const size_t k = 1 + static_cast<size_t>(l) * per_layer;  // the layer's first parameter
    const int64_t I = l == 0 ? D : H;
    const auto param = [&](size_t j, Shape shape) {
      return TensorView(params_[k + j].data(), dt, std::move(shape));
    };
    if (config_.cell == CellKind::kLstm) {
      const TensorView p[] = {param(0, Shape{I + H, 4 * H}), param(1, Shape{4 * H})};
      rnn.set_weights(l, 0, p);
    } else {
      const TensorView p[] = {param(0, Shape{I + H, 2 * H}), param(1, Shape{I + H, H}),
                              param(2, Shape{2 * H}), param(3, Shape{H})};
      rnn.set_weights(l, 0, p);
    }
  }
}

template <typename T>
RNNInputs CharModel<T>::rnn_inputs() const {
  const int64_t Tn = ws_steps_, B = ws_batch_, L = config_.layers, H = config_.hidden;
  const DType dt = dtype_of<T>();
  RNNInputs in;
  in.x = TensorView(x0_.data(), dt, Shape{Tn, B, config_.embed});
  in.h0 = TensorView(h0_.data(), dt, Shape{L, B, H});
  if (config_.cell == CellKind::kLstm) in.c0 = TensorView(c0_.data(), dt, Shape{L, B, H});
  return in;
}

template <typename T>
void CharModel<T>::forward(std::span<const int32_t> inputs, int64_t steps, int64_t batch,
                           State& state, bool planned) {
  planned = planned && planned_ && steps <= planned_steps_ && batch <= planned_batch_;
  const int64_t Tn = steps, B = batch, D = config_.embed, H = config_.hidden,
                V = config_.vocab_size, L = config_.layers;
  const bool lstm = config_.cell == CellKind::kLstm;
  if (ws_steps_ != Tn || ws_batch_ != B) {
    x0_.assign(Tn * B * D, T(0));
    y_.assign(Tn * B * H, T(0));
    logits_.assign(Tn * B * V, T(0));
    dy_.assign(Tn * B * H, T(0));
    dx_.assign(Tn * B * D, T(0));
    for (auto* v : {&h0_, &c0_, &hn_, &cn_}) v->assign(L * B * H, T(0));
    peephole_grad_.assign(L * 3 * H, T(0));
    ws_steps_ = Tn;
    ws_batch_ = B;
  }

  // x0[t, b] = E[ids[t, b]]
  const T* E = params_[0].data();
  for (int64_t n = 0; n < Tn * B; ++n) {
    std::copy_n(E + inputs[n] * D, D, x0_.data() + n * D);
  }
  // The initial state [L, B, H], layer by layer.
  const int64_t BH = B * H;
  for (int64_t l = 0; l < L; ++l) {
    std::copy_n(state.h[l].data(), BH, h0_.data() + l * BH);
    if (lstm) std::copy_n(state.cs[l].data(), BH, c0_.data() + l * BH);
  }

  RNN* rnn = planned_.get();
  if (!planned) {
    if (!rnn_ || Tn > rnn_->options().max_time || B > rnn_->options().max_batch) {
      const int64_t max_steps = rnn_ ? std::max(Tn, rnn_->options().max_time) : Tn;
      const int64_t max_batch = rnn_ ? std::max(B, rnn_->options().max_batch) : B;
      rnn_.reset();  // its reserve goes before the larger one is allocated
      rnn_ = make_rnn(max_steps, max_batch);
    }
    set_weights(*rnn_);
    rnn = rnn_.get();
  }
  const DType dt = dtype_of<T>();
  RNNOutputs out;
  out.y = MutableTensorView(y_.data(), dt, Shape{Tn, B, H});
  out.h_n = MutableTensorView(hn_.data(), dt, Shape{L, B, H});
  if (lstm) out.c_n = MutableTensorView(cn_.data(), dt, Shape{L, B, H});
  rnn->forward(rnn_inputs(), out);
  for (int64_t l = 0; l < L; ++l) {
    std::copy_n(hn_.data() + l * BH, BH, state.h[l].data());
    if (lstm) std::copy_n(cn_.data() + l * BH, BH, state.cs[l].data());
  }

  // logits = h_top·W + b      [T·B, V] = [T·B, H]·[H, V]
  const size_t ksoft = specs_.size() - 2;
  const T* bias = params_[ksoft + 1].data();
  for (int64_t n = 0; n < Tn * B; ++n) std::copy_n(bias, V, logits_.data() + n * V);
  matmul(TensorView(y_.data(), dt, Shape{Tn * B, H}),
         TensorView(params_[ksoft].data(), dt, Shape{H, V}),
         MutableTensorView(logits_.data(), dt, Shape{Tn * B, V}), {.beta = 1.0});
}

template <typename T>
void CharModel<T>::backward(std::span<const int32_t> inputs, int64_t steps, int64_t batch) {
  const int64_t Tn = steps, B = batch, D = config_.embed, H = config_.hidden,
                V = config_.vocab_size, L = config_.layers;
  const size_t ksoft = specs_.size() - 2;
  const DType dt = dtype_of<T>();
  const TensorView dlogits(logits_.data(), dt, Shape{Tn * B, V});  // written by the loss
  const TensorView h_top(y_.data(), dt, Shape{Tn * B, H});

  // dW = h_topᵀ·dlogits      [H, V] = [H, T·B]·[T·B, V]
  matmul(h_top, dlogits, MutableTensorView(grads_[ksoft].data(), dt, Shape{H, V}),
         {.transpose_a = true});
  // db = Σ_rows dlogits       [V]
  T* db = grads_[ksoft + 1].data();
  std::fill_n(db, V, T(0));
  for (int64_t n = 0; n < Tn * B; ++n) {
    for (int64_t v = 0; v < V; ++v) db[v] += logits_[n * V + v];
  }
  // dh_top = dlogits·Wᵀ       [T·B, H] = [T·B, V]·[V, H]
  matmul(dlogits, TensorView(params_[ksoft].data(), dt, Shape{H, V}),
         MutableTensorView(dy_.data(), dt, Shape{Tn * B, H}), {.transpose_b = true});

  // The recurrent layers, top to bottom, in one call (the forward was this batch's, on rnn_).
  RNNGradInputs g;
  g.y_grad = TensorView(dy_.data(), dt, Shape{Tn, B, H});
  std::vector<MutableTensorView>& param_grads = param_grads_;  // params_per_layer() per layer
  param_grads.clear();
  const size_t per_layer = layer_params(config_.cell);
  const Shape sh{H};
  for (int64_t l = 0; l < L; ++l) {
    const size_t k = 1 + static_cast<size_t>(l) * per_layer;
    const int64_t I = l == 0 ? D : H;
    const auto grad = [&](size_t j, Shape shape) {
      return MutableTensorView(grads_[k + j].data(), dt, std::move(shape));
    };
    if (config_.cell == CellKind::kLstm) {  // w, b, then the peepholes' (discarded)
      T* peep = peephole_grad_.data() + l * 3 * H;
      param_grads.insert(
          param_grads.end(),
          {grad(0, Shape{I + H, 4 * H}), grad(1, Shape{4 * H}), MutableTensorView(peep, dt, sh),
           MutableTensorView(peep + H, dt, sh), MutableTensorView(peep + 2 * H, dt, sh)});
    } else {  // w_ru, w_c, b_ru, b_c
      param_grads.insert(param_grads.end(), {grad(0, Shape{I + H, 2 * H}), grad(1, Shape{I + H, H}),
                                             grad(2, Shape{2 * H}), grad(3, Shape{H})});
    }
  }
  // No h0_grad / c0_grad: the carried state is a constant of this window (truncated
  // backpropagation through time), so its gradients are not computed.
  RNNGradOutputs out;
  out.x_grad = MutableTensorView(dx_.data(), dt, Shape{Tn, B, D});
  out.params = param_grads;
  rnn_->backward(rnn_inputs(), g, out);

  // dE[ids[t, b]] += x_grad_0[t, b]
  T* dE = grads_[0].data();
  std::fill(grads_[0].begin(), grads_[0].end(), T(0));
  for (int64_t n = 0; n < Tn * B; ++n) {
    T* row = dE + inputs[n] * D;
    const T* g0 = dx_.data() + n * D;
    for (int64_t j = 0; j < D; ++j) row[j] += g0[j];
  }
}

template <typename T>
double CharModel<T>::forward_backward(std::span<const int32_t> inputs,
                                      std::span<const int32_t> targets, int64_t steps,
                                      int64_t batch, State& state) {
  check_batch(inputs, &targets, steps, batch, state);
  forward(inputs, steps, batch, state);
  const double loss = softmax_xent_forward_backward(logits_.data(), targets.data(), steps * batch,
                                                    config_.vocab_size, logits_.data());
  backward(inputs, steps, batch);
  return loss;
}

template <typename T>
double CharModel<T>::loss(std::span<const int32_t> inputs, std::span<const int32_t> targets,
                          int64_t steps, int64_t batch, State& state) {
  check_batch(inputs, &targets, steps, batch, state);
  forward(inputs, steps, batch, state);
  return softmax_xent_forward_backward(logits_.data(), targets.data(), steps * batch,
                                       config_.vocab_size, static_cast<T*>(nullptr));
}

template <typename T>
std::vector<T> CharModel<T>::last_logits(std::span<const int32_t> inputs, int64_t steps,
                                         int64_t batch, State& state) {
  check_batch(inputs, nullptr, steps, batch, state);
  forward(inputs, steps, batch, state, /*planned=*/true);
  const int64_t V = config_.vocab_size;
  const T* last = logits_.data() + (steps - 1) * batch * V;
  return std::vector<T>(last, last + batch * V);
}

template <typename T>
void CharModel<T>::plan_inference(int64_t max_steps, int64_t max_batch) {
  planned_.reset();
  planned_ = make_rnn(max_steps, max_batch);
  set_weights(*planned_);
  planned_steps_ = max_steps;
  planned_batch_ = max_batch;
}

template class CharModel<float>;
template class CharModel<double>;

}  // namespace blockrnn::train
