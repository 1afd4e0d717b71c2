// The C ABI's RNN handles (blockrnn/rnn_c_api.h) over blockrnn::RNN (blockrnn/layer.h):
// converts the C descriptors into views (gathering strided inputs into dense copies), refuses
// NULL pointers by name, and turns every exception into a status code plus the per-thread
// message (src/capi/capi_internal.h). Adds no semantics of its own beyond refusing the LSTM-only
// tensors (c0, c_n, c_n_grad, c0_grad) in the GRU modes, which the C++ stack would ignore.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/layer.h"
#include "blockrnn/rnn_c_api.h"
#include "blockrnn/tensor.h"
#include "capi_internal.h"

// The opaque handle of the header. `busy` is set while a call that uses the workspace, the
// reserve or the weights (set_weights, forward, backward) runs, so that a second such call at
// the same time is refused instead of corrupting the first.
struct blockrnn_rnn {
  explicit blockrnn_rnn(const blockrnn::RNNOptions& options) : rnn(options) {}
  blockrnn::RNN rnn;
  std::atomic<bool> busy{false};
};

namespace blockrnn::capi {
namespace {

// Holds the handle for one call that changes it: one call at a time per handle.
class InUse {
 public:
  InUse(blockrnn_rnn* rnn, const char* fn) : rnn_(rnn) {
    require(rnn, fn, "rnn");
    if (rnn_->busy.exchange(true, std::memory_order_acquire)) {
      invalid(std::string(fn) +
              ": the handle is running another call (one call at a time per handle)");
    }
  }
  ~InUse() { rnn_->busy.store(false, std::memory_order_release); }
  InUse(const InUse&) = delete;
  InUse& operator=(const InUse&) = delete;
  RNN& rnn() const { return rnn_->rnn; }

 private:
  blockrnn_rnn* rnn_;
};

RNNMode checked_mode(int32_t mode) {
  switch (mode) {
    case BLOCKRNN_RNN_LSTM:
      return RNNMode::kLSTM;
    case BLOCKRNN_RNN_LSTM_V2:
      return RNNMode::kLSTMV2;
    case BLOCKRNN_RNN_GRU:
      return RNNMode::kGRU;
    case BLOCKRNN_RNN_GRU_RESET_AFTER:
      return RNNMode::kGRUResetAfter;
    default:
      invalid("blockrnn_rnn_create: options->mode " + std::to_string(mode) +
              " is not a blockrnn_rnn_mode (0..3)");
  }
}

bool is_lstm(const RNN& rnn) {
  const RNNMode m = rnn.options().mode;
  return m == RNNMode::kLSTM || m == RNNMode::kLSTMV2;
}

// The LSTM-only tensors must be absent in the GRU modes: the C++ stack ignores them, and a C
// caller who passed c_n would otherwise read a buffer nothing wrote.
void require_absent_unless_lstm(const RNN& rnn, const blockrnn_tensor& t, const char* fn,
                                const char* name) {
  if (!is_lstm(rnn) && !is_absent(t)) {
    invalid(std::string(fn) + ": " + name +
            " must be absent (data NULL, rank 0) in the GRU modes, which have no cell state");
  }
}

// The reserve argument: NULL or absent means the handle's own.
MutableTensorView reserve_view(const blockrnn_tensor* reserve, const char* fn) {
  return reserve == nullptr ? MutableTensorView{} : output_view(*reserve, fn, "reserve");
}

RNNInputs rnn_inputs(const RNN& rnn, const blockrnn_rnn_inputs& c, const char* fn,
                     std::deque<Tensor>& copies) {
  require_absent_unless_lstm(rnn, c.c0, fn, "c0");
  RNNInputs in;
  in.x = input_view(c.x, fn, "x", copies);
  in.h0 = input_view(c.h0, fn, "h0", copies);
  in.c0 = input_view(c.c0, fn, "c0", copies);
  in.seq_lengths = input_view(c.seq_lengths, fn, "seq_lengths", copies);
  in.dropout_mask = input_view(c.dropout_mask, fn, "dropout_mask", copies);
  return in;
}

// The shape of parameter k of `layer`, as the layer objects' set_weights take them (K: the
// layer's input size).
Shape param_shape(const RNN& rnn, std::int64_t layer, int k) {
  const RNNOptions& o = rnn.options();
  const std::int64_t H = o.hidden_size;
  const std::int64_t K = layer == 0 ? o.input_size : rnn.num_directions() * H;
  if (o.param_layout == ParamLayout::kTorch) {  // weight_ih, weight_hh, bias_ih, bias_hh, peepholes
    const std::int64_t G = (o.mode == RNNMode::kLSTMV2 ? 4 : 3) * H;
    const Shape shapes[] = {{G, K}, {G, H}, {G}, {G}, {H}, {H}, {H}};
    return shapes[k];
  }
  switch (o.mode) {
    case RNNMode::kLSTM:
    case RNNMode::kLSTMV2: {
      const Shape shapes[] = {{K + H, 4 * H}, {4 * H}, {H}, {H}, {H}};  // w, b, wci, wcf, wco
      return shapes[k];
    }
    case RNNMode::kGRU: {
      const Shape shapes[] = {{K + H, 2 * H}, {K + H, H}, {2 * H}, {H}};  // w_ru, w_c, b_ru, b_c
      return shapes[k];
    }
    case RNNMode::kGRUResetAfter: {
      const Shape shapes[] = {{K, 3 * H}, {H, 3 * H}, {3 * H}, {3 * H}};  // w_i, w_h, b_i, b_h
      return shapes[k];
    }
  }
  throw Error(ErrorCode::kInternal, "RNN.param_shape: unknown mode");
}

}  // namespace
}  // namespace blockrnn::capi

using namespace blockrnn;        // NOLINT: the definitions below are the extern "C" functions
using namespace blockrnn::capi;  // NOLINT

extern "C" {

blockrnn_status blockrnn_rnn_create(const blockrnn_rnn_options* options, blockrnn_rnn** out) {
  return blockrnn_rnn_create_with_layout(options, BLOCKRNN_PARAMS_OPS, out);
}

blockrnn_status blockrnn_rnn_create_with_layout(const blockrnn_rnn_options* options,
                                                int32_t param_layout, blockrnn_rnn** out) {
  return guarded([&] {
    const char* fn = param_layout == BLOCKRNN_PARAMS_OPS ? "blockrnn_rnn_create"
                                                         : "blockrnn_rnn_create_with_layout";
    require(options, fn, "options");
    require(out, fn, "out");
    RNNOptions o;
    if (param_layout != BLOCKRNN_PARAMS_OPS && param_layout != BLOCKRNN_PARAMS_TORCH) {
      invalid(std::string(fn) +
              ": param_layout must be BLOCKRNN_PARAMS_OPS (0) or BLOCKRNN_PARAMS_TORCH (1), got " +
              std::to_string(param_layout));
    }
    if (param_layout == BLOCKRNN_PARAMS_TORCH && options->mode != BLOCKRNN_RNN_LSTM_V2 &&
        options->mode != BLOCKRNN_RNN_GRU_RESET_AFTER) {
      invalid(std::string(fn) +
              ": BLOCKRNN_PARAMS_TORCH (torch.nn's parameters) is for the torch.nn variants, "
              "modes BLOCKRNN_RNN_LSTM_V2 and BLOCKRNN_RNN_GRU_RESET_AFTER; got mode " +
              std::to_string(options->mode));
    }
    o.param_layout =
        param_layout == BLOCKRNN_PARAMS_TORCH ? ParamLayout::kTorch : ParamLayout::kOps;
    o.mode = checked_mode(options->mode);
    o.dtype = checked_dtype(options->dtype, std::string(fn) + ": options->dtype");
    o.input_size = options->input_size;
    o.hidden_size = options->hidden_size;
    o.num_layers = options->num_layers;
    o.bidirectional = options->bidirectional != 0;
    o.caller_reserve = options->caller_reserve != 0;
    o.max_time = options->max_time;
    o.max_batch = options->max_batch;
    if (options->has_forget_bias != 0) o.lstm.forget_bias = options->forget_bias;
    if (options->has_cell_clip != 0) o.lstm.cell_clip = options->cell_clip;
    o.lstm.use_peephole = options->use_peephole != 0;
    auto handle = std::make_unique<blockrnn_rnn>(o);
    *out = handle.release();
  });
}

void blockrnn_rnn_free(blockrnn_rnn* rnn) {
  delete rnn;
}

blockrnn_status blockrnn_rnn_params_per_layer(const blockrnn_rnn* rnn, int32_t* n) {
  return guarded([&] {
    const char* fn = "blockrnn_rnn_params_per_layer";
    require(rnn, fn, "rnn");
    require(n, fn, "n");
    *n = rnn->rnn.params_per_layer();
  });
}

blockrnn_status blockrnn_rnn_param_shape(const blockrnn_rnn* rnn, int64_t layer, int32_t k,
                                         blockrnn_shape* shape) {
  return guarded([&] {
    const char* fn = "blockrnn_rnn_param_shape";
    require(rnn, fn, "rnn");
    require(shape, fn, "shape");
    const RNN& r = rnn->rnn;
    if (layer < 0 || layer >= r.options().num_layers) {
      invalid(std::string(fn) + ": layer must be in [0, " + std::to_string(r.options().num_layers) +
              "), got " + std::to_string(layer));
    }
    if (k < 0 || k >= r.params_per_layer()) {
      invalid(std::string(fn) + ": k must be in [0, " + std::to_string(r.params_per_layer()) +
              ") (params_per_layer), got " + std::to_string(k));
    }
    const Shape s = param_shape(r, layer, k);
    shape->rank = s.rank();
    for (int d = 0; d < BLOCKRNN_MAX_RANK; ++d) shape->dims[d] = d < s.rank() ? s.dim(d) : 0;
  });
}

blockrnn_status blockrnn_rnn_set_weights(blockrnn_rnn* rnn, int64_t layer, int64_t direction,
                                         const blockrnn_tensor* params, size_t num_params) {
  return guarded([&] {
    const char* fn = "blockrnn_rnn_set_weights";
    const InUse in_use(rnn, fn);
    RNN& r = in_use.rnn();
    if (num_params > 0) require(params, fn, "params");
    // More views than any mode takes is refused before any is read.
    if (num_params > static_cast<size_t>(r.params_per_layer())) {
      invalid(std::string(fn) + ": the layers take " + std::to_string(r.params_per_layer()) +
              " parameters, got " + std::to_string(num_params));
    }
    std::deque<Tensor> copies;
    std::vector<TensorView> views;
    for (size_t k = 0; k < num_params; ++k) {
      views.push_back(input_view(params[k], fn, "params[" + std::to_string(k) + "]", copies));
    }
    r.set_weights(layer, direction, views);
  });
}

blockrnn_status blockrnn_rnn_reserve_elems(const blockrnn_rnn* rnn, int64_t T, int64_t B,
                                           int64_t* elems) {
  return guarded([&] {
    const char* fn = "blockrnn_rnn_reserve_elems";
    require(rnn, fn, "rnn");
    require(elems, fn, "elems");
    const RNNOptions& o = rnn->rnn.options();
    if (T < 0 || T > o.max_time || B < 0 || B > o.max_batch) {
      invalid(std::string(fn) + ": (T, B) must be within [0, " + std::to_string(o.max_time) +
              "] x [0, " + std::to_string(o.max_batch) +
              "] (the handle's max_time, max_batch), got (" + std::to_string(T) + ", " +
              std::to_string(B) + ")");
    }
    *elems = rnn->rnn.reserve_elems(T, B);
  });
}

blockrnn_status blockrnn_rnn_forward(blockrnn_rnn* rnn, const blockrnn_rnn_inputs* inputs,
                                     const blockrnn_rnn_outputs* outputs,
                                     const blockrnn_tensor* reserve) {
  return guarded([&] {
    const char* fn = "blockrnn_rnn_forward";
    const InUse in_use(rnn, fn);
    RNN& r = in_use.rnn();
    require(inputs, fn, "inputs");
    require(outputs, fn, "outputs");
    require_absent_unless_lstm(r, outputs->c_n, fn, "c_n");
    std::deque<Tensor> copies;
    const RNNInputs in = rnn_inputs(r, *inputs, fn, copies);
    RNNOutputs out;
    out.y = output_view(outputs->y, fn, "y");
    out.h_n = output_view(outputs->h_n, fn, "h_n");
    out.c_n = output_view(outputs->c_n, fn, "c_n");
    r.forward(in, out, reserve_view(reserve, fn));
  });
}

blockrnn_status blockrnn_rnn_backward(blockrnn_rnn* rnn, const blockrnn_rnn_inputs* inputs,
                                      const blockrnn_rnn_grad_inputs* grads,
                                      const blockrnn_rnn_grad_outputs* outputs,
                                      const blockrnn_tensor* reserve) {
  return guarded([&] {
    const char* fn = "blockrnn_rnn_backward";
    const InUse in_use(rnn, fn);
    RNN& r = in_use.rnn();
    require(inputs, fn, "inputs");
    require(grads, fn, "grads");
    require(outputs, fn, "outputs");
    require_absent_unless_lstm(r, grads->c_n_grad, fn, "c_n_grad");
    require_absent_unless_lstm(r, outputs->c0_grad, fn, "c0_grad");
    if (outputs->num_params > 0) require(outputs->params, fn, "outputs->params");
    // The count is checked before the views are built (a wrong count is refused by the stack
    // too, but only after this would have read num_params descriptors).
    const size_t want =
        static_cast<size_t>(r.options().num_layers * r.num_directions() * r.params_per_layer());
    if (outputs->num_params != want) {
      invalid(std::string(fn) + ": outputs->num_params must be " + std::to_string(want) +
              " (num_layers * directions * params_per_layer), got " +
              std::to_string(outputs->num_params));
    }
    std::deque<Tensor> copies;
    const RNNInputs in = rnn_inputs(r, *inputs, fn, copies);
    RNNGradInputs g;
    g.y_grad = input_view(grads->y_grad, fn, "y_grad", copies);
    g.h_n_grad = input_view(grads->h_n_grad, fn, "h_n_grad", copies);
    g.c_n_grad = input_view(grads->c_n_grad, fn, "c_n_grad", copies);
    std::vector<MutableTensorView> params;
    params.reserve(want);
    for (size_t k = 0; k < want; ++k) {
      params.push_back(
          output_view(outputs->params[k], fn, "params[" + std::to_string(k) + "] (gradient)"));
    }
    RNNGradOutputs out;
    out.x_grad = output_view(outputs->x_grad, fn, "x_grad");
    out.h0_grad = output_view(outputs->h0_grad, fn, "h0_grad");
    out.c0_grad = output_view(outputs->c0_grad, fn, "c0_grad");
    out.params = params;
    r.backward(in, g, out, reserve_view(reserve, fn));
  });
}

}  // extern "C"
