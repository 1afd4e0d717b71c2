// The C ABI's layer handles (blockrnn/layer_c_api.h) over the layer objects of blockrnn/layer.h
// (LSTMLayer, GRULayer, GRUResetAfterLayer): converts the C descriptors into the layers' per-call
// structs (gathering strided inputs into dense copies), refuses NULL pointers and wrong counts
// by name before reading past what the caller gave, and turns every exception into a status code
// plus the per-thread message (src/capi/capi_internal.h). Everything else — sizes, attrs, shapes,
// dtypes, lengths, aliasing, the workspace, the memory limit, set_weights before a call, one call
// at a time per object — is the layer object's check, whose message names the layer and the
// argument ("GRULayer.forward: h_prev must have shape [3, 4] ..."). The only rule added here
// refuses the LSTM-only tensors (cs_prev, cs_grad) in the GRU kinds, whose structs have no place
// for them.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "blockrnn/c_api.h"
#include "blockrnn/error.h"
#include "blockrnn/layer.h"
#include "blockrnn/layer_c_api.h"
#include "blockrnn/tensor.h"
#include "capi_internal.h"

// The opaque handle of the header: one layer object of its kind.
struct blockrnn_layer {
  template <typename Layer, typename... Args>
  explicit blockrnn_layer(std::in_place_type_t<Layer> type, Args&&... args)
      : layer(type, std::forward<Args>(args)...) {}
  std::variant<blockrnn::LSTMLayer, blockrnn::GRULayer, blockrnn::GRUResetAfterLayer> layer;
};

namespace blockrnn::capi {
namespace {

// The op's output names (the forward's, then the grad op's), for the messages of this file.
constexpr const char* kLSTMOutputs[] = {"i", "cs", "f", "o", "ci", "co", "h"};
constexpr const char* kGRUOutputs[] = {"r", "u", "c", "h"};
constexpr const char* kGRUResetAfterOutputs[] = {"r", "u", "n", "hn", "h"};
constexpr const char* kLSTMGrads[] = {"x_grad",   "cs_prev_grad", "h_prev_grad", "w_grad",
                                      "wci_grad", "wcf_grad",     "wco_grad",    "b_grad"};
constexpr const char* kGRUGrads[] = {"x_grad",   "h_prev_grad", "w_ru_grad",
                                     "w_c_grad", "b_ru_grad",   "b_c_grad"};
constexpr const char* kGRUResetAfterGrads[] = {"x_grad",   "h_prev_grad", "w_i_grad",
                                               "w_h_grad", "b_i_grad",    "b_h_grad"};

std::span<const char* const> output_names(const blockrnn_layer& h) {
  if (std::holds_alternative<LSTMLayer>(h.layer)) return kLSTMOutputs;
  if (std::holds_alternative<GRULayer>(h.layer)) return kGRUOutputs;
  return kGRUResetAfterOutputs;
}
std::span<const char* const> grad_names(const blockrnn_layer& h) {
  if (std::holds_alternative<LSTMLayer>(h.layer)) return kLSTMGrads;
  if (std::holds_alternative<GRULayer>(h.layer)) return kGRUGrads;
  return kGRUResetAfterGrads;
}

const SequenceLayer& base(const blockrnn_layer& h) {
  return std::visit([](const auto& l) -> const SequenceLayer& { return l; }, h.layer);
}

int num_params(const blockrnn_layer& h) {
  return std::holds_alternative<LSTMLayer>(h.layer) ? 5 : 4;
}

// The shape of parameter k, as set_weights takes it and the backward writes its gradient.
Shape param_shape(const blockrnn_layer& h, int k) {
  const std::int64_t I = base(h).shape().input_size, H = base(h).shape().hidden_size;
  if (std::holds_alternative<LSTMLayer>(h.layer)) {
    const Shape shapes[] = {{I + H, 4 * H}, {4 * H}, {H}, {H}, {H}};  // w, b, wci, wcf, wco
    return shapes[k];
  }
  if (std::holds_alternative<GRULayer>(h.layer)) {
    const Shape shapes[] = {{I + H, 2 * H}, {I + H, H}, {2 * H}, {H}};  // w_ru, w_c, b_ru, b_c
    return shapes[k];
  }
  const Shape shapes[] = {{I, 3 * H}, {H, 3 * H}, {3 * H}, {3 * H}};  // w_i, w_h, b_i, b_h
  return shapes[k];
}

// A count of descriptors the caller passes, checked before any is read.
void require_count(size_t got, size_t want, const char* fn, const char* what, const char* order) {
  if (got != want) {
    invalid(std::string(fn) + ": " + what + " must be " + std::to_string(want) + " (" + order +
            "), got " + std::to_string(got));
  }
}

std::string join(std::span<const char* const> names) {
  std::string s;
  for (const char* n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

// The LSTM-only tensors must be absent in the GRU kinds: the GRU layers' structs have no place
// for them, and a caller who passed cs_prev would otherwise have it ignored.
void require_absent_unless_lstm(const blockrnn_layer& h, const blockrnn_tensor& t, const char* fn,
                                const char* name) {
  if (!std::holds_alternative<LSTMLayer>(h.layer) && !is_absent(t)) {
    invalid(std::string(fn) + ": " + name +
            " must be absent (data NULL, rank 0) in the GRU kinds, which have no cell state");
  }
}

// The inputs every call reads, as views (strided ones gathered into `copies`).
struct CallInputs {
  std::optional<std::int64_t> seq_len_max;
  TensorView x, cs_prev, h_prev, seq_lengths;
};
CallInputs call_inputs(const blockrnn_layer& h, const blockrnn_layer_inputs& c, const char* fn,
                       std::deque<Tensor>& copies) {
  require_absent_unless_lstm(h, c.cs_prev, fn, "cs_prev");
  CallInputs in;
  if (c.has_seq_len_max != 0) in.seq_len_max = c.seq_len_max;
  in.x = input_view(c.x, fn, "x", copies);
  in.cs_prev = input_view(c.cs_prev, fn, "cs_prev", copies);
  in.h_prev = input_view(c.h_prev, fn, "h_prev", copies);
  in.seq_lengths = input_view(c.seq_lengths, fn, "seq_lengths", copies);
  return in;
}

// The caller's workspace (NULL: the layer's own).
LayerWorkspace workspace_of(void* data, size_t bytes) {
  LayerWorkspace w;
  w.data = data;
  w.bytes = data != nullptr ? bytes : 0;
  return w;
}

}  // namespace
}  // namespace blockrnn::capi

using namespace blockrnn;        // NOLINT: the definitions below are the extern "C" functions
using namespace blockrnn::capi;  // NOLINT

extern "C" {

blockrnn_status blockrnn_layer_create(const blockrnn_layer_options* options, blockrnn_layer** out) {
  return guarded([&] {
    const char* fn = "blockrnn_layer_create";
    require(options, fn, "options");
    require(out, fn, "out");
    LayerShape shape;
    shape.dtype = checked_dtype(options->dtype, std::string(fn) + ": options->dtype");
    shape.input_size = options->input_size;
    shape.hidden_size = options->hidden_size;
    shape.max_time = options->max_time;
    shape.max_batch = options->max_batch;
    shape.caller_workspace = options->caller_workspace != 0;
    std::unique_ptr<blockrnn_layer> handle;
    switch (options->kind) {
      case BLOCKRNN_LAYER_LSTM:
      case BLOCKRNN_LAYER_LSTM_V2: {
        LSTMLayerAttrs attrs;
        attrs.v2 = options->kind == BLOCKRNN_LAYER_LSTM_V2;
        if (options->has_forget_bias != 0) attrs.forget_bias = options->forget_bias;
        if (options->has_cell_clip != 0) attrs.cell_clip = options->cell_clip;
        attrs.use_peephole = options->use_peephole != 0;
        handle = std::make_unique<blockrnn_layer>(std::in_place_type<LSTMLayer>, shape, attrs);
        break;
      }
      case BLOCKRNN_LAYER_GRU:
        handle = std::make_unique<blockrnn_layer>(std::in_place_type<GRULayer>, shape);
        break;
      case BLOCKRNN_LAYER_GRU_RESET_AFTER:
        handle = std::make_unique<blockrnn_layer>(std::in_place_type<GRUResetAfterLayer>, shape);
        break;
      default:
        invalid(std::string(fn) + ": options->kind " + std::to_string(options->kind) +
                " is not a blockrnn_layer_kind (0..3)");
    }
    *out = handle.release();
  });
}

void blockrnn_layer_free(blockrnn_layer* layer) {
  delete layer;
}

blockrnn_status blockrnn_layer_num_params(const blockrnn_layer* layer, int32_t* n) {
  return guarded([&] {
    const char* fn = "blockrnn_layer_num_params";
    require(layer, fn, "layer");
    require(n, fn, "n");
    *n = num_params(*layer);
  });
}

blockrnn_status blockrnn_layer_param_shape(const blockrnn_layer* layer, int32_t k,
                                           blockrnn_shape* shape) {
  return guarded([&] {
    const char* fn = "blockrnn_layer_param_shape";
    require(layer, fn, "layer");
    require(shape, fn, "shape");
    if (k < 0 || k >= num_params(*layer)) {
      invalid(std::string(fn) + ": k must be in [0, " + std::to_string(num_params(*layer)) +
              ") (num_params), got " + std::to_string(k));
    }
    const Shape s = param_shape(*layer, k);
    shape->rank = s.rank();
    for (int d = 0; d < BLOCKRNN_MAX_RANK; ++d) shape->dims[d] = d < s.rank() ? s.dim(d) : 0;
  });
}

blockrnn_status blockrnn_layer_set_weights(blockrnn_layer* layer, const blockrnn_tensor* params,
                                           size_t num_params) {
  return guarded([&] {
    const char* fn = "blockrnn_layer_set_weights";
    require(layer, fn, "layer");
    if (num_params > 0) require(params, fn, "params");
    // More views than the layer takes is refused before any is read.
    const size_t most = static_cast<size_t>(capi::num_params(*layer));
    if (num_params > most) {
      invalid(std::string(fn) + ": the layer takes at most " + std::to_string(most) +
              " parameters, got " + std::to_string(num_params));
    }
    std::deque<Tensor> copies;
    TensorView v[5];  // absent past num_params: the layer names the missing one
    for (size_t k = 0; k < num_params; ++k) {
      v[k] = input_view(params[k], fn, "params[" + std::to_string(k) + "]", copies);
    }
    if (auto* l = std::get_if<LSTMLayer>(&layer->layer)) {
      l->set_weights(v[0], v[1], v[2], v[3], v[4]);
    } else if (auto* g = std::get_if<GRULayer>(&layer->layer)) {
      g->set_weights(v[0], v[1], v[2], v[3]);
    } else {
      std::get<GRUResetAfterLayer>(layer->layer).set_weights(v[0], v[1], v[2], v[3]);
    }
  });
}

blockrnn_status blockrnn_layer_workspace_bytes(const blockrnn_layer* layer, int64_t T, int64_t B,
                                               size_t* bytes) {
  return guarded([&] {
    const char* fn = "blockrnn_layer_workspace_bytes";
    require(layer, fn, "layer");
    require(bytes, fn, "bytes");
    *bytes = base(*layer).workspace_bytes(T, B);
  });
}

blockrnn_status blockrnn_layer_forward(blockrnn_layer* layer, const blockrnn_layer_inputs* inputs,
                                       const blockrnn_tensor* outputs, size_t num_outputs,
                                       void* workspace, size_t workspace_bytes) {
  return guarded([&] {
    const char* fn = "blockrnn_layer_forward";
    require(layer, fn, "layer");
    require(inputs, fn, "inputs");
    const std::span<const char* const> names = output_names(*layer);
    require_count(num_outputs, names.size(), fn, "num_outputs", join(names).c_str());
    require(outputs, fn, "outputs");
    std::deque<Tensor> copies;
    const CallInputs c = call_inputs(*layer, *inputs, fn, copies);
    std::vector<MutableTensorView> o;
    for (size_t k = 0; k < names.size(); ++k) {
      o.push_back(
          output_view(outputs[k], fn, "outputs[" + std::to_string(k) + "] (" + names[k] + ")"));
    }
    const LayerWorkspace ws = workspace_of(workspace, workspace_bytes);
    if (auto* l = std::get_if<LSTMLayer>(&layer->layer)) {
      l->forward({c.seq_len_max, c.x, c.cs_prev, c.h_prev, c.seq_lengths},
                 {o[0], o[1], o[2], o[3], o[4], o[5], o[6]}, ws);
    } else if (auto* g = std::get_if<GRULayer>(&layer->layer)) {
      g->forward({c.seq_len_max, c.x, c.h_prev, c.seq_lengths}, {o[0], o[1], o[2], o[3]}, ws);
    } else {
      std::get<GRUResetAfterLayer>(layer->layer)
          .forward({c.seq_len_max, c.x, c.h_prev, c.seq_lengths}, {o[0], o[1], o[2], o[3], o[4]},
                   ws);
    }
  });
}

blockrnn_status blockrnn_layer_backward(blockrnn_layer* layer, const blockrnn_layer_inputs* inputs,
                                        const blockrnn_layer_grad_inputs* grads,
                                        const blockrnn_tensor* outputs, size_t num_outputs,
                                        void* workspace, size_t workspace_bytes) {
  return guarded([&] {
    const char* fn = "blockrnn_layer_backward";
    require(layer, fn, "layer");
    require(inputs, fn, "inputs");
    require(grads, fn, "grads");
    const std::span<const char* const> fwd = output_names(*layer);
    const std::span<const char* const> names = grad_names(*layer);
    require_count(grads->num_outputs, fwd.size(), fn, "grads->num_outputs",
                  ("the forward's outputs: " + join(fwd)).c_str());
    require(grads->outputs, fn, "grads->outputs");
    require_count(num_outputs, names.size(), fn, "num_outputs", join(names).c_str());
    require(outputs, fn, "outputs");
    require_absent_unless_lstm(*layer, grads->cs_grad, fn, "cs_grad");
    std::deque<Tensor> copies;
    const CallInputs c = call_inputs(*layer, *inputs, fn, copies);
    std::vector<TensorView> a;  // the forward's outputs
    for (size_t k = 0; k < fwd.size(); ++k) {
      a.push_back(input_view(grads->outputs[k], fn,
                             "grads->outputs[" + std::to_string(k) + "] (" + fwd[k] + ")", copies));
    }
    const TensorView cs_grad = input_view(grads->cs_grad, fn, "cs_grad", copies);
    const TensorView h_grad = input_view(grads->h_grad, fn, "h_grad", copies);
    std::vector<MutableTensorView> o;
    for (size_t k = 0; k < names.size(); ++k) {
      o.push_back(
          output_view(outputs[k], fn, "outputs[" + std::to_string(k) + "] (" + names[k] + ")"));
    }
    const LayerWorkspace ws = workspace_of(workspace, workspace_bytes);
    if (auto* l = std::get_if<LSTMLayer>(&layer->layer)) {
      LSTMLayerGradInputs in;
      in.seq_len_max = c.seq_len_max;
      in.x = c.x;
      in.cs_prev = c.cs_prev;
      in.h_prev = c.h_prev;
      in.i = a[0];
      in.cs = a[1];
      in.f = a[2];
      in.o = a[3];
      in.ci = a[4];
      in.co = a[5];
      in.h = a[6];
      in.cs_grad = cs_grad;
      in.h_grad = h_grad;
      in.seq_lengths = c.seq_lengths;
      l->backward(in, {o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]}, ws);
    } else if (auto* g = std::get_if<GRULayer>(&layer->layer)) {
      GRULayerGradInputs in;
      in.seq_len_max = c.seq_len_max;
      in.x = c.x;
      in.h_prev = c.h_prev;
      in.r = a[0];
      in.u = a[1];
      in.c = a[2];
      in.h = a[3];
      in.h_grad = h_grad;
      in.seq_lengths = c.seq_lengths;
      g->backward(in, {o[0], o[1], o[2], o[3], o[4], o[5]}, ws);
    } else {
      GRUResetAfterLayerGradInputs in;
      in.seq_len_max = c.seq_len_max;
      in.x = c.x;
      in.h_prev = c.h_prev;
      in.r = a[0];
      in.u = a[1];
      in.n = a[2];
      in.hn = a[3];
      in.h = a[4];
      in.h_grad = h_grad;
      in.seq_lengths = c.seq_lengths;
      std::get<GRUResetAfterLayer>(layer->layer)
          .backward(in, {o[0], o[1], o[2], o[3], o[4], o[5]}, ws);
    }
  });
}

}  // extern "C"
