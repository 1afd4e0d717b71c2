// CharModel: embedding → BlockLSTM/BlockGRU layers → softmax, forward and backward (see
// char_model.h for the equations and shapes). The recurrent layers are the library's sequence
// ops; the embedding gather/scatter and the output layer are done here (the library's GEMM engine
// for the two output GEMMs).
#include "train/char_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "blockrnn/layer.h"
#include "blockrnn/sequence.h"
#include "blockrnn/tensor.h"
#include "gemm/gemm.h"
#include "train/softmax_xent.h"

namespace blockrnn::train {
namespace {

// Row-major C[m,n] = op(A)[m,k]·op(B)[k,n] + beta·C, for the output layer, on the library's
// GEMM engine (deterministic across thread counts like the ops).
template <typename T>
void gemm_rm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
             int64_t ldb, T beta, T* c, int64_t ldc) {
  using blockrnn::gemm::Trans;
  blockrnn::gemm::gemm<T>(ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, m, n, k, a,
                          lda, b, ldb, beta, c, ldc);
}

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

// Number of per-step forward tensors each cell's op returns (LSTM i, cs, f, o, ci, co, h;
// GRU r, u, c, h) and the index of h among them.
int num_fwd(CellKind cell) {
  return cell == CellKind::kLstm ? 7 : 4;
}
int h_index(CellKind cell) {
  return cell == CellKind::kLstm ? 6 : 3;
}
constexpr int kCsIndex = 1;  // LSTM cs

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
  fw_.resize(config_.layers);
  h0_.resize(config_.layers);
  cs0_.resize(config_.layers);
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
void CharModel<T>::forward(std::span<const int32_t> inputs, int64_t steps, int64_t batch,
                           State& state, bool planned) {
  planned = planned && !planned_.empty() && steps <= planned_steps_ && batch <= planned_batch_;
  const int64_t Tn = steps, B = batch, D = config_.embed, H = config_.hidden,
                V = config_.vocab_size, L = config_.layers;
  const int64_t TBH = Tn * B * H, nf = num_fwd(config_.cell);
  if (ws_steps_ != Tn || ws_batch_ != B) {
    x0_.assign(Tn * B * D, T(0));
    for (auto& f : fw_) f.assign(nf * TBH, T(0));
    logits_.assign(Tn * B * V, T(0));
    dh_.assign(Tn * B * std::max(D, H), T(0));
    dx_.assign(Tn * B * std::max(D, H), T(0));
    zeros_tbh_.assign(TBH, T(0));
    zeros_h_.assign(H, T(0));
    scratch_bh_.assign(2 * B * H, T(0));
    scratch_h_.assign(3 * H, T(0));
    ws_steps_ = Tn;
    ws_batch_ = B;
  }

  // x0[t, b] = E[ids[t, b]]
  const T* E = params_[0].data();
  for (int64_t n = 0; n < Tn * B; ++n) {
    std::copy_n(E + inputs[n] * D, D, x0_.data() + n * D);
  }

  const DType dt = dtype_of<T>();
  const Shape tbh{Tn, B, H}, bh{B, H};
  size_t k = 1;  // parameter index of the current layer's first tensor
  for (int64_t l = 0; l < L; ++l) {
    const int64_t I = l == 0 ? D : H;
    const T* x = l == 0 ? x0_.data() : fw_[l - 1].data() + h_index(config_.cell) * TBH;
    T* f = fw_[l].data();
    h0_[l] = state.h[l];
    const TensorView xv(x, dt, Shape{Tn, B, I});
    if (config_.cell == CellKind::kLstm) {
      cs0_[l] = state.cs[l];
      BlockLSTMInputs in;
      layer_inputs(in, l, k, xv);
      BlockLSTMOutputs out;
      MutableTensorView* outs[] = {&out.i, &out.cs, &out.f, &out.o, &out.ci, &out.co, &out.h};
      for (int j = 0; j < 7; ++j) *outs[j] = MutableTensorView(f + j * TBH, dt, tbh);
      if (planned) {
        static_cast<LSTMLayer&>(*planned_[l])
            .forward({.seq_len_max = Tn,
                      .x = xv,
                      .cs_prev = in.cs_prev,
                      .h_prev = in.h_prev,
                      .seq_lengths = {}},
                     out);
      } else {
        BlockLSTMAttrs attrs;
        attrs.forget_bias = kForgetBias;
        attrs.cell_clip = -1.0;  // disabled
        attrs.use_peephole = false;
        block_lstm(in, out, attrs);
      }
      std::copy_n(f + kCsIndex * TBH + (Tn - 1) * B * H, B * H, state.cs[l].data());
      k += 2;
    } else {
      BlockGRUInputs in;
      layer_inputs(in, l, k, xv);
      BlockGRUOutputs out;
      MutableTensorView* outs[] = {&out.r, &out.u, &out.c, &out.h};
      for (int j = 0; j < 4; ++j) *outs[j] = MutableTensorView(f + j * TBH, dt, tbh);
      if (planned) {
        static_cast<GRULayer&>(*planned_[l])
            .forward({.seq_len_max = Tn, .x = xv, .h_prev = in.h_prev, .seq_lengths = {}}, out);
      } else {
        block_gru(in, out);
      }
      k += 4;
    }
    std::copy_n(f + h_index(config_.cell) * TBH + (Tn - 1) * B * H, B * H, state.h[l].data());
  }

  // logits = h_top·W + b      [T·B, V] = [T·B, H]·[H, V]
  const T* h_top = fw_[L - 1].data() + h_index(config_.cell) * TBH;
  const T* W = params_[k].data();
  const T* bias = params_[k + 1].data();
  for (int64_t n = 0; n < Tn * B; ++n) std::copy_n(bias, V, logits_.data() + n * V);
  gemm_rm(false, false, Tn * B, V, H, h_top, H, W, V, T(1), logits_.data(), V);
}

template <typename T>
void CharModel<T>::backward(std::span<const int32_t> inputs, int64_t steps, int64_t batch) {
  const int64_t Tn = steps, B = batch, D = config_.embed, H = config_.hidden,
                V = config_.vocab_size, L = config_.layers;
  const int64_t TBH = Tn * B * H;
  const size_t ksoft = specs_.size() - 2;
  const T* dlogits = logits_.data();  // [T·B, V], written by the loss
  const T* h_top = fw_[L - 1].data() + h_index(config_.cell) * TBH;

  // dW = h_topᵀ·dlogits      [H, V] = [H, T·B]·[T·B, V]
  gemm_rm(true, false, H, V, Tn * B, h_top, H, dlogits, V, T(0), grads_[ksoft].data(), V);
  // db = Σ_rows dlogits       [V]
  T* db = grads_[ksoft + 1].data();
  std::fill_n(db, V, T(0));
  for (int64_t n = 0; n < Tn * B; ++n) {
    for (int64_t v = 0; v < V; ++v) db[v] += dlogits[n * V + v];
  }
  // dh_top = dlogits·Wᵀ       [T·B, H] = [T·B, V]·[V, H]
  gemm_rm(false, true, Tn * B, H, V, dlogits, V, params_[ksoft].data(), V, T(0), dh_.data(), H);

  const DType dt = dtype_of<T>();
  const Shape tbh{Tn, B, H}, bh{B, H}, sh{H};
  T* dh = dh_.data();  // ∂L/∂h of the current layer  [T, B, H]
  T* dx = dx_.data();  // ∂L/∂x of the current layer  [T, B, I]
  const int per_layer = config_.cell == CellKind::kLstm ? 2 : 4;
  for (int64_t l = L - 1; l >= 0; --l) {
    const int64_t I = l == 0 ? D : H;
    const size_t k = 1 + static_cast<size_t>(l) * per_layer;
    const T* x = l == 0 ? x0_.data() : fw_[l - 1].data() + h_index(config_.cell) * TBH;
    const T* f = fw_[l].data();
    const TensorView xv(x, dt, Shape{Tn, B, I});
    const MutableTensorView dxv(dx, dt, Shape{Tn, B, I});
    const MutableTensorView dh_prev(scratch_bh_.data(), dt, bh);
    if (config_.cell == CellKind::kLstm) {
      BlockLSTMGradInputs in;
      layer_inputs(in, l, k, xv);
      TensorView* fwd[] = {&in.i, &in.cs, &in.f, &in.o, &in.ci, &in.co, &in.h};
      for (int j = 0; j < 7; ++j) *fwd[j] = TensorView(f + j * TBH, dt, tbh);
      in.cs_grad = TensorView(zeros_tbh_.data(), dt, tbh);
      in.h_grad = TensorView(dh, dt, tbh);
      BlockLSTMGradOutputs out;
      out.x_grad = dxv;
      out.cs_prev_grad = MutableTensorView(scratch_bh_.data() + B * H, dt, bh);
      out.h_prev_grad = dh_prev;
      out.w_grad = MutableTensorView(grads_[k].data(), dt, Shape{I + H, 4 * H});
      out.wci_grad = MutableTensorView(scratch_h_.data(), dt, sh);
      out.wcf_grad = MutableTensorView(scratch_h_.data() + H, dt, sh);
      out.wco_grad = MutableTensorView(scratch_h_.data() + 2 * H, dt, sh);
      out.b_grad = MutableTensorView(grads_[k + 1].data(), dt, Shape{4 * H});
      block_lstm_grad(in, out, /*use_peephole=*/false);
    } else {
      BlockGRUGradInputs in;
      layer_inputs(in, l, k, xv);
      TensorView* fwd[] = {&in.r, &in.u, &in.c, &in.h};
      for (int j = 0; j < 4; ++j) *fwd[j] = TensorView(f + j * TBH, dt, tbh);
      in.h_grad = TensorView(dh, dt, tbh);
      BlockGRUGradOutputs out;
      out.x_grad = dxv;
      out.h_prev_grad = dh_prev;
      out.w_ru_grad = MutableTensorView(grads_[k].data(), dt, Shape{I + H, 2 * H});
      out.w_c_grad = MutableTensorView(grads_[k + 1].data(), dt, Shape{I + H, H});
      out.b_ru_grad = MutableTensorView(grads_[k + 2].data(), dt, Shape{2 * H});
      out.b_c_grad = MutableTensorView(grads_[k + 3].data(), dt, Shape{H});
      block_gru_grad(in, out);
    }
    std::swap(dh, dx);  // this layer's x_grad is the h_grad of the layer below
  }

  // dE[ids[t, b]] += x_grad_0[t, b]      (dh now holds layer 0's x_grad, [T, B, D])
  T* dE = grads_[0].data();
  std::fill(grads_[0].begin(), grads_[0].end(), T(0));
  for (int64_t n = 0; n < Tn * B; ++n) {
    T* row = dE + inputs[n] * D;
    const T* g = dh + n * D;
    for (int64_t j = 0; j < D; ++j) row[j] += g[j];
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
template <class In>
void CharModel<T>::layer_weights(In& in, size_t k, int64_t I) const {
  const int64_t H = config_.hidden;
  const DType dt = dtype_of<T>();
  const auto param = [&](size_t j, Shape shape) {
    return TensorView(params_[k + j].data(), dt, std::move(shape));
  };
  if constexpr (requires { in.w; }) {  // LSTM: w, b; no peepholes
    in.w = param(0, Shape{I + H, 4 * H});
    in.wci = in.wcf = in.wco = TensorView(zeros_h_.data(), dt, Shape{H});
    in.b = param(1, Shape{4 * H});
  } else {  // GRU: w_ru, w_c, b_ru, b_c
    in.w_ru = param(0, Shape{I + H, 2 * H});
    in.w_c = param(1, Shape{I + H, H});
    in.b_ru = param(2, Shape{2 * H});
    in.b_c = param(3, Shape{H});
  }
}

template <typename T>
template <class In>
void CharModel<T>::layer_inputs(In& in, int64_t l, size_t k, const TensorView& x) const {
  const DType dt = dtype_of<T>();
  const Shape bh{x.shape[1], config_.hidden};
  in.seq_len_max = x.shape[0];
  in.x = x;
  in.h_prev = TensorView(h0_[l].data(), dt, bh);
  if constexpr (requires { in.cs_prev; }) in.cs_prev = TensorView(cs0_[l].data(), dt, bh);
  layer_weights(in, k, x.shape[2]);
}

template <typename T>
void CharModel<T>::plan_inference(int64_t max_steps, int64_t max_batch) {
  planned_.clear();
  const int64_t D = config_.embed, H = config_.hidden, L = config_.layers;
  const bool lstm = config_.cell == CellKind::kLstm;
  const DType dt = dtype_of<T>();
  for (int64_t l = 0; l < L; ++l) {
    const int64_t I = l == 0 ? D : H;
    const size_t k = 1 + static_cast<size_t>(l) * (lstm ? 2 : 4);
    const LayerShape shape{.input_size = I,
                           .hidden_size = H,
                           .dtype = dt,
                           .max_time = max_steps,
                           .max_batch = max_batch};
    if (lstm) {
      auto layer = std::make_unique<LSTMLayer>(
          shape, LSTMLayerAttrs{.forget_bias = kForgetBias, .cell_clip = -1.0});
      BlockLSTMInputs w;
      layer_weights(w, k, I);
      layer->set_weights(w.w, w.b);
      planned_.push_back(std::move(layer));
    } else {
      auto layer = std::make_unique<GRULayer>(shape);
      BlockGRUInputs w;
      layer_weights(w, k, I);
      layer->set_weights(w.w_ru, w.w_c, w.b_ru, w.b_c);
      planned_.push_back(std::move(layer));
    }
  }
  planned_steps_ = max_steps;
  planned_batch_ = max_batch;
}

template class CharModel<float>;
template class CharModel<double>;

}  // namespace blockrnn::train
