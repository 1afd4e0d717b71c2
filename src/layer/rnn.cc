// blockrnn::RNN (blockrnn/layer.h): torch.nn.LSTM / torch.nn.GRU's stack of layers, directions
// and dropout on blockrnn's layer objects. No buffer is sized at creation: each (the reserve,
// the layers' one shared workspace, the gradient scratch) grows at a call that needs more than
// it holds to exactly that call's need, after the memory check; forward and backward carve
// views of the call's shape from them. What the backward reads (the activations, the reversed
// inputs and the inputs of layers above the first) lives in the reserve (RNN::reserve_elems), the
// RNN's own or the caller's: [L·D][A] activations [T, B, H], then (bidirectional) the reversed
// input of each layer [T, B, I_l], then y_l for l < L − 1, then y_l ⊙ mask_l for l < L − 1, each
// [T, B, D·H].
//
// Data path of one call, layer l, direction d (t < L_b of example b; rows past it are zero):
//   forward   in_l = x (l = 0) or y_{l−1} ⊙ mask_{l−1}       [T, B, I_l]
//             d = 1: xr[t, b] = in_l[L_b − 1 − t, b]           (reversed within its length)
//             acts = layer(l, d).forward(in_l or xr, h0[l·D+d], c0[l·D+d], lengths)
//             y_l[t, b, dH:(d+1)H] = h[t, b] (d = 0) or h[L_b − 1 − t, b] (d = 1)
//             h_n[l·D+d, b] = h[L_b − 1, b] (h0 when L_b = 0); c_n from cs likewise
//   backward  hg[t, b] = dy_l[t or L_b − 1 − t, b, dH:(d+1)H] (+ h_n_grad at t = L_b − 1);
//             cg = c_n_grad at t = L_b − 1, else 0
//             layer(l, d).backward → x grad (reversed back for d = 1, summed over d),
//             h0_grad, c0_grad (+ h_n_grad, c_n_grad of examples with L_b = 0), weight grads
//             dy_{l−1} = dx_l ⊙ mask_{l−1}
//
// float16 and bfloat16: the activations between layers, the reserve and the gradient scratch are
// in the 16-bit dtype, and each layer object stages its call through float32 as the one-shot op
// does, so each layer's outputs are those of its op on the 16-bit inputs. The stack's own
// arithmetic (the dropout products, the sums of h_n_grad into a step's h_grad and of the two
// directions' input gradients) is one float32 operation on the 16-bit operands, rounded once to
// the dtype: what torch computes for the same elementwise ops on 16-bit tensors.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "blockrnn/layer.h"
#include "core/lowp.h"
#include "gemm/gemm.h"
#include "layer/layer_common.h"
#include "ops/checks.h"

namespace blockrnn {

using layer::Check;

namespace {

// The words of the stack's own shapes, in its creation options' names: the initial and final
// states [num_layers · directions, B, hidden_size] and the output y [T, B, directions ·
// hidden_size] (and their gradients).
constexpr char kStackStateDims[] = "num_layers * directions, batch, hidden_size";
constexpr char kStackOutputDims[] = "time, batch, directions * hidden_size";

const char* mode_name(RNNMode m) {
  switch (m) {
    case RNNMode::kLSTM:
      return "BlockLSTM";
    case RNNMode::kLSTMV2:
      return "BlockLSTMV2";
    case RNNMode::kGRU:
      return "BlockGRU";
    case RNNMode::kGRUResetAfter:
      return "BlockGRUResetAfter";
  }
  return "?";
}

// The stack's element type of each dtype: float, double, or the 16-bit storage types, and its
// arithmetic: a * b and a + b natively, or for the 16-bit types in float32 rounded once.
float widen(Half v) {
  return half_to_float(v);
}
float widen(BFloat16 v) {
  return core::bf16_to_float(v.bits);
}
template <typename T>
T narrow(float v) {
  if constexpr (std::is_same_v<T, Half>) {
    return float_to_half(v);
  } else {
    return BFloat16{core::bf16_from_float(v)};
  }
}
template <typename T>
T mul(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a * b;
  } else {
    return narrow<T>(widen(a) * widen(b));
  }
}
template <typename T>
void add_to(T& a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    a += b;
  } else {
    a = narrow<T>(widen(a) + widen(b));
  }
}

// dst [cols, rows] = srcᵀ (row strides lds, ldd) on the stack's element type: gemm::transpose,
// the 16-bit types as their bits.
template <typename T>
void transpose(std::int64_t rows, std::int64_t cols, const T* src, std::int64_t lds, T* dst,
               std::int64_t ldd) {
  if constexpr (std::is_floating_point_v<T>) {
    gemm::transpose(rows, cols, src, lds, dst, ldd);
  } else {
    static_assert(sizeof(T) == sizeof(std::uint16_t));
    gemm::transpose(rows, cols, reinterpret_cast<const std::uint16_t*>(src), lds,
                    reinterpret_cast<std::uint16_t*>(dst), ldd);
  }
}

// ---- torch.nn's parameter layout (ParamLayout::kTorch) -------------------------------------
//
// One (layer, direction)'s parameters as torch.nn holds them, and where each lands in the layer
// objects' layout. The layers' weights are [weight_ihᵀ; weight_hhᵀ], [I + H, G] (the LSTM's w;
// the reset-after GRU's w_i [I, G] followed by w_h [H, G]), then the biases (LSTM: b = bias_ih +
// bias_hh; GRU: b_i = bias_ih, b_h = bias_hh), then the LSTM's peepholes. The stack stages one
// (layer, direction) in a buffer of that layout (Impl::ops_params): set_weights converts the
// caller's tensors into it and hands its views to the layer, which copies them; backward has the
// layer write its gradients there and converts them into the caller's tensors.
constexpr const char* kTorchParamNames[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                            "wci",       "wcf",       "wco"};

struct TorchLayout {
  bool lstm;
  std::int64_t I, H, G;  // G: 4H (LSTM), 3H (GRU)
  std::int64_t bias_offset() const { return (I + H) * G; }
  std::int64_t elems() const { return bias_offset() + (lstm ? G + 3 * H : 2 * G); }
  // The shape of torch.nn's parameter k and its words.
  Shape shape(std::size_t k) const {
    if (k == 0) return Shape{G, I};
    if (k == 1) return Shape{G, H};
    return k < 4 ? Shape{G} : Shape{H};
  }
  const char* dims(std::size_t k) const {
    if (k == 0)
      return lstm ? "4 * hidden_size, layer input size" : "3 * hidden_size, layer input size";
    if (k == 1) return lstm ? "4 * hidden_size, hidden_size" : "3 * hidden_size, hidden_size";
    if (k < 4) return lstm ? "4 * hidden_size" : "3 * hidden_size";
    return "hidden_size";
  }
};

// torch.nn's name of parameter k of every (layer, direction), layer-major: weight_ih_l0,
// bias_hh_l1_reverse, ... (wci_l0 for the LSTM's peepholes).
std::string torch_param_name(std::int64_t k, std::int64_t D, int P) {
  const std::int64_t l = k / (D * P), d = k / P % D;
  return std::string(kTorchParamNames[k % P]) + "_l" + std::to_string(l) +
         (d == 1 ? "_reverse" : "");
}

// f.template operator()<T>() with T the stack's element type of `dtype`.
template <typename F>
void with_element(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kFloat16:
      return f.template operator()<Half>();
    case DType::kBFloat16:
      return f.template operator()<BFloat16>();
    default:
      return f.template operator()<float>();
  }
}

bool is_lstm(RNNMode m) {
  return m == RNNMode::kLSTM || m == RNNMode::kLSTMV2;
}

// How the stack creates, sets and calls the layer of each mode. kActs consecutive [T, B, H]
// blocks hold the activations of a layer and direction (the op's outputs, in order); params are
// in set_weights' order.
template <class Layer>
struct Stacked;

// The views of one layer call: its input, initial states and lengths, and (backward) the
// gradients that reach its outputs.
struct LayerCall {
  TensorView x, h0, c0, lengths;
  TensorView h_grad = {}, cs_grad = {};
};

template <>
struct Stacked<LSTMLayer> {
  static constexpr int kActs = 7;  // i, cs, f, o, ci, co, h
  static std::unique_ptr<SequenceLayer> make(const LayerShape& s, const LSTMLayerAttrs& attrs) {
    return std::make_unique<LSTMLayer>(s, attrs);
  }
  static void set_weights(LSTMLayer& l, std::span<const TensorView> p) {
    const TensorView none;
    l.set_weights(p[0], p[1], p.size() > 2 ? p[2] : none, p.size() > 2 ? p[3] : none,
                  p.size() > 2 ? p[4] : none);
  }
  static LSTMLayerInputs inputs(const LayerCall& c) {
    return {.seq_len_max = std::nullopt,
            .x = c.x,
            .cs_prev = c.c0,
            .h_prev = c.h0,
            .seq_lengths = c.lengths};
  }
  template <typename... Acts>
  static LSTMLayerGradInputs grad_inputs(const LayerCall& c, const Acts&... acts) {
    return {std::nullopt, c.x, c.c0, c.h0, acts..., c.cs_grad, c.h_grad, c.lengths};
  }
  static BlockLSTMGradOutputs grad_outputs(const MutableTensorView& x_grad,
                                           const MutableTensorView& h0_grad,
                                           const MutableTensorView& c0_grad,
                                           std::span<const MutableTensorView> p) {
    return {x_grad, c0_grad, h0_grad, p[0], p[2], p[3], p[4], p[1]};  // w, wci, wcf, wco, b
  }
};

// The GRU layers: A activations, four parameters, the state h.
template <class Layer, int A>
struct StackedGRU {
  static constexpr int kActs = A;
  static std::unique_ptr<SequenceLayer> make(const LayerShape& s, const LSTMLayerAttrs&) {
    return std::make_unique<Layer>(s);
  }
  static void set_weights(Layer& l, std::span<const TensorView> p) {
    l.set_weights(p[0], p[1], p[2], p[3]);
  }
  static GRULayerInputs inputs(const LayerCall& c) {
    return {.seq_len_max = std::nullopt, .x = c.x, .h_prev = c.h0, .seq_lengths = c.lengths};
  }
  template <typename... Acts>
  static typename Layer::GradInputs grad_inputs(const LayerCall& c, const Acts&... acts) {
    return {std::nullopt, c.x, c.h0, acts..., c.h_grad, c.lengths};
  }
  static typename Layer::GradOutputs grad_outputs(const MutableTensorView& x_grad,
                                                  const MutableTensorView& h0_grad,
                                                  const MutableTensorView&,
                                                  std::span<const MutableTensorView> p) {
    return {x_grad, h0_grad, p[0], p[1], p[2], p[3]};
  }
};
template <>
struct Stacked<GRULayer> : StackedGRU<GRULayer, 4> {};  // r, u, c, h
template <>
struct Stacked<GRUResetAfterLayer> : StackedGRU<GRUResetAfterLayer, 5> {};  // r, u, n, hn, h

// f.template operator()<L>() with L the layer class of the mode.
template <typename F>
void with_layer(RNNMode m, F&& f) {
  switch (m) {
    case RNNMode::kLSTM:
    case RNNMode::kLSTMV2:
      return f.template operator()<LSTMLayer>();
    case RNNMode::kGRU:
      return f.template operator()<GRULayer>();
    case RNNMode::kGRUResetAfter:
      return f.template operator()<GRUResetAfterLayer>();
  }
}

// Activations (the op's outputs) per layer and direction, and which of them is h / cs.
int num_acts(RNNMode m) {
  int a = 0;
  with_layer(m, [&]<class L>() { a = Stacked<L>::kActs; });
  return a;
}
int h_index(RNNMode m) {
  return num_acts(m) - 1;
}  // h is every op's last output
constexpr int kCsIndex = 1;  // LSTM: i, cs, f, o, ci, co, h

}  // namespace

struct RNN::Impl {
  RNNOptions o;
  std::int64_t D = 1, L = 1, H = 0;
  int P = 0, A = 0;
  std::vector<std::unique_ptr<SequenceLayer>> layers;  // [L·D]
  // Each buffer holds at least the current call's elements (grown by the calls, never sized
  // for max_time × max_batch): T, B of the call, F = max(I, D·H).
  Tensor reserve;    // reserve_elems(T, B) (the RNN's own reserve)
  Tensor workspace;  // the layers' (one call at a time): the largest workspace_bytes(T, B)
  std::atomic<bool> busy{false};   // a call is running (layer::OneCall)
  Tensor zeros_bh;                 // [B, H]
  Tensor hg, cg;                   // [T, B, H]  (backward)
  Tensor dx, dy, xg_rev;           // [T, B, F]  (backward)
  std::vector<std::int64_t> lens;  // [B]  L_b of the call
  layer::CallArgs args;            // the views of the current call
  // The forward call the own reserve holds (the backward must repeat it).
  bool forward_done = false;
  std::int64_t forward_T = 0, forward_B = 0;
  bool forward_dropout = false;
  std::vector<std::string> param_names;  // "params[k]", for the overlap check's messages
  // ParamLayout::kTorch: torch.nn's name of each parameter ("weight_ih_l0"), and one (layer,
  // direction)'s parameters in the layers' layout (TorchLayout: set_weights' staging, backward's
  // gradient scratch).
  std::vector<std::string> torch_names;
  Tensor ops_params;

  bool torch_layout() const { return o.param_layout == ParamLayout::kTorch; }
  TorchLayout torch_layout(std::int64_t I) const {
    return {is_lstm(o.mode), I, H, (is_lstm(o.mode) ? 4 : 3) * H};
  }
  // The layer's views of ops_params: LSTM w, b, wci, wcf, wco; GRU w_i, w_h, b_i, b_h.
  std::array<MutableTensorView, 5> ops_views(const TorchLayout& t) {
    char* const base = static_cast<char*>(ops_params.data());
    auto at = [&](std::int64_t offset, Shape shape) {
      return MutableTensorView(base + offset * std::int64_t(dtype_size(o.dtype)), o.dtype, shape);
    };
    const std::int64_t bo = t.bias_offset(), G = t.G;
    if (t.lstm) {
      return {at(0, Shape{t.I + H, G}), at(bo, Shape{G}), at(bo + G, Shape{H}),
              at(bo + G + H, Shape{H}), at(bo + G + 2 * H, Shape{H})};
    }
    return {at(0, Shape{t.I, G}), at(t.I * G, Shape{H, G}), at(bo, Shape{G}), at(bo + G, Shape{G}),
            MutableTensorView()};
  }
  void set_torch_weights(const Check& check, std::int64_t ld, std::span<const TensorView> p);
  // The gradients the layer wrote into ops_params, into the caller's views of torch.nn's
  // layout (absent views skipped).
  template <typename T>
  void torch_grads(const TorchLayout& t, std::span<const MutableTensorView> out) const;

  // The elements of the layers' shared workspace for a call of T steps and B examples.
  std::int64_t workspace_elems(std::int64_t T_, std::int64_t B) const {
    std::size_t bytes = 0;
    for (const auto& l : layers) bytes = std::max(bytes, l->workspace_bytes(T_, B));
    return static_cast<std::int64_t>(bytes / dtype_size(o.dtype));
  }
  LayerWorkspace layer_workspace() { return {workspace.data(), workspace.num_bytes()}; }
  // The memory check of a call, then its buffers grown: core::check_memory with the one-shot
  // op's bound of one layer call (the layers run one at a time) and the buffers this call grows.
  void prepare(const Check& check, std::int64_t T_, std::int64_t B, bool has_lengths,
               bool own_reserve, bool backward);

  std::int64_t in_size(std::int64_t l) const { return l == 0 ? o.input_size : D * H; }

  // The reserve's layout for a call with T steps and B examples (offsets in elements).
  struct Layout {
    std::int64_t TB = 0, TBH = 0, rev = 0, out = 0, in = 0, total = 0;
  };
  Layout layout(std::int64_t T_, std::int64_t B) const {
    Layout r;
    r.TB = T_ * B;
    r.TBH = r.TB * H;
    r.rev = L * D * A * r.TBH;
    std::int64_t rev_total = 0;
    if (D == 2) {
      for (std::int64_t l = 0; l < L; ++l) rev_total += r.TB * in_size(l);
    }
    r.out = r.rev + rev_total;
    r.in = r.out + (L - 1) * r.TB * D * H;
    r.total = r.in + (L - 1) * r.TB * D * H;
    return r;
  }
  std::int64_t rev_offset(const Layout& lay, std::int64_t l) const {
    std::int64_t off = lay.rev;
    for (std::int64_t k = 0; k < l; ++k) off += lay.TB * in_size(k);
    return off;
  }

  // The initial state of (l, d) [B, H] in h0 or c0 [L·D, B, H]; zeros when absent.
  template <typename T>
  TensorView initial_state(const TensorView& s, std::int64_t ld, std::int64_t B) const {
    if (is_absent_input(s)) return TensorView(zeros_bh.data(), o.dtype, Shape{B, H});
    return TensorView(layer::data<T>(s) + ld * B * H, o.dtype, Shape{B, H});
  }

  template <typename T>
  void forward_t(const RNNInputs& x, const RNNOutputs& y, std::int64_t T_, std::int64_t B, T* res);
  template <typename T>
  void backward_t(const RNNInputs& x, const RNNGradInputs& g, const RNNGradOutputs& out,
                  std::int64_t T_, std::int64_t B, const T* res);
  // acts: the A activations of (l, d), consecutive [T, B, H] blocks.
  void layer_forward(std::int64_t ld, const TensorView& x, const TensorView& h0,
                     const TensorView& c0, const TensorView& lengths, const Shape& tbh, void* acts);
  void layer_backward(std::int64_t ld, const TensorView& x, const TensorView& h0,
                      const TensorView& c0, const TensorView& lengths, const Shape& tbh,
                      const void* acts, const MutableTensorView& x_grad,
                      const MutableTensorView& h0_grad, const MutableTensorView& c0_grad,
                      std::span<const MutableTensorView> params);
};

RNN::RNN(const RNNOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.o = options;
  const Check check{"RNN", "create"};
  // Every size first, then the memory the stack will hold, then the layer objects: nothing is
  // allocated for sizes that cannot work.
  if (options.mode != RNNMode::kLSTM && options.mode != RNNMode::kLSTMV2 &&
      options.mode != RNNMode::kGRU && options.mode != RNNMode::kGRUResetAfter) {
    check.fail("mode must be kLSTM, kLSTMV2, kGRU or kGRUResetAfter, got " +
               std::to_string(static_cast<int>(options.mode)));
  }
  if (options.param_layout != ParamLayout::kOps && options.param_layout != ParamLayout::kTorch) {
    check.fail("param_layout must be kOps or kTorch, got " +
               std::to_string(static_cast<int>(options.param_layout)));
  }
  if (options.param_layout == ParamLayout::kTorch && options.mode != RNNMode::kLSTMV2 &&
      options.mode != RNNMode::kGRUResetAfter) {
    check.fail(std::string("param_layout kTorch (torch.nn's parameters) is for the torch.nn "
                           "variants, modes kLSTMV2 and kGRUResetAfter; got mode ") +
               (options.mode == RNNMode::kLSTM ? "kLSTM" : "kGRU"));
  }
  if (options.num_layers < 1) {
    check.fail("num_layers must be >= 1, got " + std::to_string(options.num_layers));
  }
  if (options.input_size < 0) {
    check.fail("input_size must be >= 0, got " + std::to_string(options.input_size));
  }
  if (options.hidden_size < 1) {
    check.fail("hidden_size must be >= 1, got " + std::to_string(options.hidden_size));
  }
  if (options.max_time < 0 || options.max_batch < 0) {
    check.fail("max_time and max_batch must be >= 0, got " + std::to_string(options.max_time) +
               " and " + std::to_string(options.max_batch));
  }
  if (options.dtype != DType::kFloat32 && options.dtype != DType::kFloat64 &&
      !core::is_16bit_float(options.dtype)) {
    check.fail(std::string("dtype must be float16, bfloat16, float32 or float64, got ") +
               dtype_name(options.dtype));
  }
  m.D = options.bidirectional ? 2 : 1;
  m.L = options.num_layers;
  m.H = options.hidden_size;
  m.A = num_acts(options.mode);
  m.P = m.torch_layout() ? (is_lstm(options.mode) ? 7 : 4) : (is_lstm(options.mode) ? 5 : 4);
  m.o.lstm.v2 = options.mode == RNNMode::kLSTMV2;
  // Counts and sizes that are products of the options, before any bound on them: each in checked
  // arithmetic (the RNN fuzzer found both overflowing int64).
  const std::int64_t layer_objects =
      core::checked_mul("RNN.create", "num_layers * directions", m.L, m.D);
  // The widest layer's sizes (the upper layers read D·H features, a product that may overflow
  // before check_sizes bounds H).
  const std::int64_t upper_input =
      core::checked_mul("RNN.create", "2 * hidden_size (the upper layers' input)", m.D, m.H);
  layer::check_sizes(check, std::max(options.input_size, upper_input), m.H, options.max_time,
                     options.max_batch);
  // The reserve of the largest call (Impl::layout, in double) must be addressable too: then so
  // is every size a call computes. Like check_sizes, a bound and not an allocation.
  const double L = double(m.L), D = double(m.D), H = double(m.H);
  const double reserve_per_step = L * D * m.A * H +
                                  (m.D == 2 ? options.input_size + (L - 1) * D * H : 0.0) +
                                  2.0 * (L - 1) * D * H;
  if (8.0 * double(options.max_time) * double(options.max_batch) * reserve_per_step > 0x1p60) {
    throw Error(ErrorCode::kResourceExhausted,
                "RNN.create: num_layers " + std::to_string(m.L) + ", max_time " +
                    std::to_string(options.max_time) + " and max_batch " +
                    std::to_string(options.max_batch) +
                    " are too large: the reserve of a call of that size is more than can be "
                    "addressed");
  }
  // What the layer objects will hold (their weights' copies and packed panels).
  double held = 0.0;
  with_layer(options.mode, [&]<class Layer>() {
    using Out = typename Layer::Outputs;
    held = D * (layer::held_bytes<Out>(options.input_size, m.H, options.dtype) +
                (L - 1) * layer::held_bytes<Out>(m.D * m.H, m.H, options.dtype));
  });
  const ExtraBytes weights{"the " + std::to_string(layer_objects) +
                               " layer objects (num_layers * directions) with their weights' "
                               "copies and packed panels",
                           layer::clamp_bytes(held)};
  layer::check_allocation(check, {&weights, 1});
  m.layers.reserve(static_cast<std::size_t>(m.L * m.D));
  for (std::int64_t k = 0; k < m.L * m.D * m.P; ++k) {
    m.param_names.push_back("params[" + std::to_string(k) + "]");
    if (m.torch_layout()) {
      m.torch_names.push_back(torch_param_name(k, m.D, m.P));
      m.param_names.back() += " (" + m.torch_names.back() + ")";
    }
  }
  for (std::int64_t l = 0; l < m.L; ++l) {
    for (std::int64_t d = 0; d < m.D; ++d) {
      LayerShape s;
      s.input_size = m.in_size(l);
      s.hidden_size = m.H;
      s.dtype = options.dtype;
      s.max_time = options.max_time;
      s.max_batch = options.max_batch;
      s.caller_workspace = true;  // the stack's one workspace (Impl::workspace)
      with_layer(options.mode,
                 [&]<class L>() { m.layers.push_back(Stacked<L>::make(s, m.o.lstm)); });
    }
  }
}

void RNN::Impl::prepare(const Check& check, std::int64_t T_, std::int64_t B, bool has_lengths,
                        bool own_reserve, bool backward) {
  const DType dt = o.dtype;
  const std::int64_t F = std::max(o.input_size, D * H), TB = T_ * B;
  struct Need {
    Tensor* buffer;
    std::int64_t elems;
  };
  const Need needs[] = {{&workspace, workspace_elems(T_, B)},
                        {&zeros_bh, B * H},
                        {&reserve, own_reserve && !backward ? layout(T_, B).total : 0},
                        {&hg, backward ? TB * H : 0},
                        {&cg, backward ? TB * H : 0},
                        {&dx, backward ? TB * F : 0},
                        {&dy, backward ? TB * F : 0},
                        {&xg_rev, backward ? TB * F : 0},
                        {&ops_params, backward && torch_layout() ? torch_layout(F).elems() : 0}};
  double grown = 0.0;
  for (const Need& n : needs) {
    if (n.buffer->num_elements() < n.elems) grown += double(n.elems) * double(dtype_size(dt));
  }
  // One layer call's bound (the layers run one at a time, on the shared workspace counted
  // above), for the widest layer.
  core::CallShape call;
  call.dtype = dt;
  call.sizes(T_, B, F, H);
  call.lengths = has_lengths;
  std::string buffer;
  const char* op = check.op_name(buffer);
  if (grown > 0.0) {
    const ExtraBytes buffers{
        "the stack's buffers (reserve, workspace, gradient scratch) grown to "
        "this call",
        layer::clamp_bytes(grown)};
    core::check_memory(op, args.input_views(), {}, call, false, {&buffers, 1});
  } else {
    core::check_memory(op, args.input_views(), {}, call, false, {});
  }
  for (const Need& n : needs) {
    if (n.elems > 0) layer::grow(*n.buffer, dt, n.elems);
  }
  lens.resize(static_cast<std::size_t>(B));
}

RNN::~RNN() = default;

const RNNOptions& RNN::options() const noexcept {
  return impl_->o;
}
std::int64_t RNN::num_directions() const noexcept {
  return impl_->D;
}
int RNN::params_per_layer() const noexcept {
  return impl_->P;
}
std::int64_t RNN::reserve_elems(std::int64_t T, std::int64_t B) const {
  const RNNOptions& o = impl_->o;
  if (T < 0 || T > o.max_time || B < 0 || B > o.max_batch) {
    Check{"RNN", "reserve_elems"}.fail("T and B must be in [0, " + std::to_string(o.max_time) +
                                       "] and [0, " + std::to_string(o.max_batch) +
                                       "] (max_time, max_batch), got " + std::to_string(T) +
                                       " and " + std::to_string(B));
  }
  return impl_->layout(T, B).total;  // addressable: checked at creation for the largest call
}

void RNN::set_weights(std::int64_t layer, std::int64_t direction, std::span<const TensorView> p) {
  Impl& m = *impl_;
  const Check check{"RNN", "set_weights"};
  const layer::OneCall one(check, m.busy);
  if (layer < 0 || layer >= m.L || direction < 0 || direction >= m.D) {
    check.fail("(layer, direction) must be in [0, " + std::to_string(m.L) + ") x [0, " +
               std::to_string(m.D) + "), got (" + std::to_string(layer) + ", " +
               std::to_string(direction) + ")");
  }
  const bool lstm = is_lstm(m.o.mode);
  // Without peepholes an LSTM may leave out their three views: w, b (kOps) or weight_ih,
  // weight_hh, bias_ih, bias_hh (kTorch).
  const std::size_t short_lstm = m.torch_layout() ? 4 : 2;
  if (!(p.size() == std::size_t(m.P) || (lstm && p.size() == short_lstm))) {
    check.fail(std::string(mode_name(m.o.mode)) + " layers take " + std::to_string(m.P) +
               " parameters" +
               (!lstm              ? ""
                : m.torch_layout() ? " (or 4: weight_ih, weight_hh, bias_ih, bias_hh without "
                                     "peepholes)"
                                   : " (or 2: w, b without peepholes)") +
               ", got " + std::to_string(p.size()));
  }
  if (m.torch_layout()) return m.set_torch_weights(check, layer * m.D + direction, p);
  SequenceLayer& s = *m.layers[static_cast<std::size_t>(layer * m.D + direction)];
  with_layer(m.o.mode, [&]<class L>() { Stacked<L>::set_weights(static_cast<L&>(s), p); });
}

void RNN::Impl::set_torch_weights(const Check& check, std::int64_t ld,
                                  std::span<const TensorView> p) {
  const TorchLayout t = torch_layout(in_size(ld / D));
  const std::string* const names = &torch_names[static_cast<std::size_t>(ld * P)];
  // Every view is checked before anything is written: a refused call leaves the layer's weights
  // as they were.
  for (std::size_t k = 0; k < p.size(); ++k) {
    if (is_absent_input(p[k])) {
      if (k < 2) check.fail(names[k] + " is required (absent: only the biases and peepholes)");
      if (k >= 4 && o.lstm.use_peephole) {
        check.fail(names[k] + " is required (the LSTM was created with use_peephole)");
      }
      continue;
    }
    check.tensor(names[k].c_str(), p[k], t.shape(k), t.dims(k), o.dtype);
  }
  if (t.lstm && o.lstm.use_peephole && p.size() < 7) {
    check.fail(names[4] + " is required (the LSTM was created with use_peephole), got " +
               std::to_string(p.size()) + " parameters");
  }
  if (ops_params.num_elements() < t.elems()) {
    const ExtraBytes staging{"the stack's staging of one layer's parameters in the layers' layout",
                             layer::clamp_bytes(double(t.elems()) * double(dtype_size(o.dtype)))};
    layer::check_allocation(check, {&staging, 1});
    layer::grow(ops_params, o.dtype, t.elems());
  }
  const std::array<MutableTensorView, 5> ops = ops_views(t);
  with_element(o.dtype, [&]<typename T>() {
    T* const w = layer::data<T>(ops[0]);
    transpose(t.G, t.I, layer::data<T>(p[0]), t.I, w, t.G);
    transpose(t.G, H, layer::data<T>(p[1]), H, w + t.I * t.G, t.G);
    auto bias = [&](std::size_t k) {
      return k < p.size() && !is_absent_input(p[k]) ? layer::data<T>(p[k]) : nullptr;
    };
    const T *const b_ih = bias(2), *const b_hh = bias(3);
    T* const b = w + t.bias_offset();
    for (std::int64_t j = 0; j < t.G; ++j) {
      if (t.lstm) {  // b = bias_ih + bias_hh, one addition in the dtype as torch.nn's
        b[j] = b_ih ? b_ih[j] : b_hh ? b_hh[j] : T{};
        if (b_ih && b_hh) add_to(b[j], b_hh[j]);
      } else {
        b[j] = b_ih ? b_ih[j] : T{};
        b[t.G + j] = b_hh ? b_hh[j] : T{};
      }
    }
  });
  // The layers' order: LSTM w, b, then the caller's peepholes as they are; GRU w_i, w_h, b_i, b_h.
  std::array<TensorView, 5> views;
  for (std::size_t k = 0; k < views.size(); ++k) views[k] = TensorView(ops[k]);
  if (t.lstm) {
    for (std::size_t k = 4; k < p.size(); ++k) views[k - 2] = p[k];
  }
  const std::size_t n = t.lstm ? (p.size() > 4 ? 5 : 2) : 4;
  SequenceLayer& s = *layers[static_cast<std::size_t>(ld)];
  with_layer(o.mode, [&]<class L>() {
    Stacked<L>::set_weights(static_cast<L&>(s), std::span<const TensorView>(views.data(), n));
  });
}

template <typename T>
void RNN::Impl::torch_grads(const TorchLayout& t, std::span<const MutableTensorView> out) const {
  const T* const w = ops_params.data_as<T>();
  const T* const b = w + t.bias_offset();
  auto to = [&](std::size_t k) {
    return is_absent_input(out[k]) ? nullptr : layer::data<T>(out[k]);
  };
  if (T* const d = to(0)) transpose(t.I, t.G, w, t.G, d, t.I);
  if (T* const d = to(1)) transpose(H, t.G, w + t.I * t.G, t.G, d, H);
  // The LSTM's two biases have b's gradient each; the GRU's b_i's and b_h's.
  if (T* const d = to(2)) std::copy_n(b, t.G, d);
  if (T* const d = to(3)) std::copy_n(t.lstm ? b : b + t.G, t.G, d);
  for (std::size_t k = 4; t.lstm && k < out.size(); ++k) {
    if (T* const d = to(k)) std::copy_n(b + t.G + std::int64_t(k - 4) * H, H, d);
  }
}

void RNN::Impl::layer_forward(std::int64_t ld, const TensorView& x, const TensorView& h0,
                              const TensorView& c0, const TensorView& lengths, const Shape& tbh,
                              void* acts) {
  const std::size_t step = static_cast<std::size_t>(tbh.num_elements()) * dtype_size(o.dtype);
  auto mv = [&](std::size_t k) {
    return MutableTensorView(static_cast<char*>(acts) + k * step, o.dtype, tbh);
  };
  SequenceLayer& s = *layers[static_cast<std::size_t>(ld)];
  with_layer(o.mode, [&]<class L>() {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      static_cast<L&>(s).forward(Stacked<L>::inputs({x, h0, c0, lengths}),
                                 typename L::Outputs{mv(K)...}, layer_workspace());
    }
    (std::make_index_sequence<Stacked<L>::kActs>());
  });
}

void RNN::Impl::layer_backward(std::int64_t ld, const TensorView& x, const TensorView& h0,
                               const TensorView& c0, const TensorView& lengths, const Shape& tbh,
                               const void* acts, const MutableTensorView& x_grad,
                               const MutableTensorView& h0_grad, const MutableTensorView& c0_grad,
                               std::span<const MutableTensorView> p) {
  const std::size_t step = static_cast<std::size_t>(tbh.num_elements()) * dtype_size(o.dtype);
  auto v = [&](std::size_t k) {
    return TensorView(static_cast<const char*>(acts) + k * step, o.dtype, tbh);
  };
  SequenceLayer& s = *layers[static_cast<std::size_t>(ld)];
  const LayerCall call{
      x, h0, c0, lengths, TensorView(hg.data(), o.dtype, tbh), TensorView(cg.data(), o.dtype, tbh)};
  with_layer(o.mode, [&]<class L>() {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      static_cast<L&>(s).backward(Stacked<L>::grad_inputs(call, v(K)...),
                                  Stacked<L>::grad_outputs(x_grad, h0_grad, c0_grad, p),
                                  layer_workspace());
    }
    (std::make_index_sequence<Stacked<L>::kActs>());
  });
}

namespace {

// dst[t, b, dst_col:dst_col+n] = src[t', b, src_col:src_col+n] with t' = t, or L_b − 1 − t when
// reverse; zero for t ≥ L_b. Row strides fs (src) and fd (dst).
template <typename T>
void copy_steps(const T* src, std::int64_t fs, std::int64_t src_col, T* dst, std::int64_t fd,
                std::int64_t dst_col, std::int64_t n, std::int64_t T_, std::int64_t B,
                const std::int64_t* lens, bool reverse) {
  for (std::int64_t t = 0; t < T_; ++t) {
    for (std::int64_t b = 0; b < B; ++b) {
      T* d = dst + (t * B + b) * fd + dst_col;
      if (t < lens[b]) {
        const std::int64_t ts = reverse ? lens[b] - 1 - t : t;
        const T* s = src + (ts * B + b) * fs + src_col;
        std::copy(s, s + n, d);
      } else {
        std::fill(d, d + n, T{});
      }
    }
  }
}

}  // namespace

template <typename T>
void RNN::Impl::forward_t(const RNNInputs& x, const RNNOutputs& y, std::int64_t T_, std::int64_t B,
                          T* res) {
  const Layout lay = layout(T_, B);
  const std::int64_t DH = D * H, BH = B * H;
  const Shape tbh{T_, B, H};
  const bool lstm = is_lstm(o.mode);
  std::fill_n(zeros_bh.data_as<T>(), BH, T{});
  // Without dropout the masked inputs are the layer outputs themselves: their part of the
  // reserve is unused, zeroed so that every element of a caller's reserve is defined.
  if (is_absent_input(x.dropout_mask)) std::fill(res + lay.in, res + lay.total, T{});
  for (std::int64_t l = 0; l < L; ++l) {
    const std::int64_t I_l = in_size(l);
    TensorView in_l = x.x;
    if (l > 0) {
      const bool dropout = !is_absent_input(x.dropout_mask);
      if (dropout) {
        const T* yl = res + lay.out + (l - 1) * lay.TB * DH;
        const T* mask = layer::data<T>(x.dropout_mask) + (l - 1) * T_ * B * DH;
        T* dst = res + lay.in + (l - 1) * lay.TB * DH;
        for (std::int64_t e = 0; e < T_ * B * DH; ++e) dst[e] = mul(yl[e], mask[e]);
        in_l = TensorView(dst, o.dtype, Shape{T_, B, DH});
      } else {
        in_l = TensorView(res + lay.out + (l - 1) * lay.TB * DH, o.dtype, Shape{T_, B, DH});
      }
    }
    T* y_l = l + 1 < L ? res + lay.out + l * lay.TB * DH : layer::data<T>(y.y);
    for (std::int64_t d = 0; d < D; ++d) {
      const std::int64_t ld = l * D + d;
      TensorView src = in_l;
      if (d == 1) {
        T* r = res + rev_offset(lay, l);
        copy_steps(layer::data<T>(in_l), I_l, 0, r, I_l, 0, I_l, T_, B, lens.data(), true);
        src = TensorView(r, o.dtype, Shape{T_, B, I_l});
      }
      const TensorView h0 = initial_state<T>(x.h0, ld, B);
      const TensorView c0 = initial_state<T>(lstm ? x.c0 : TensorView(), ld, B);
      T* const a = res + ld * A * lay.TBH;  // the A activations of (l, d)
      layer_forward(ld, src, h0, c0, x.seq_lengths, tbh, a);
      const T* h = a + h_index(o.mode) * lay.TBH;
      copy_steps(h, H, 0, y_l, DH, d * H, H, T_, B, lens.data(), d == 1);
      // The final states: each example's last step (its initial state when L_b = 0).
      T* hn = layer::data<T>(y.h_n) + ld * BH;
      T* cn = lstm ? layer::data<T>(y.c_n) + ld * BH : nullptr;
      const T* cs = lstm ? a + kCsIndex * lay.TBH : nullptr;
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t t = lens[static_cast<std::size_t>(b)] - 1;
        const T* hs = t >= 0 ? h + (t * B + b) * H : layer::data<T>(h0) + b * H;
        std::copy(hs, hs + H, hn + b * H);
        if (lstm) {
          const T* css = t >= 0 ? cs + (t * B + b) * H : layer::data<T>(c0) + b * H;
          std::copy(css, css + H, cn + b * H);
        }
      }
    }
  }
}

template <typename T>
void RNN::Impl::backward_t(const RNNInputs& x, const RNNGradInputs& g, const RNNGradOutputs& go,
                           std::int64_t T_, std::int64_t B, const T* res) {
  const Layout lay = layout(T_, B);
  const std::int64_t DH = D * H, BH = B * H;
  const Shape tbh{T_, B, H};
  const bool lstm = is_lstm(o.mode);
  T* const hgp = hg.data_as<T>();
  T* const cgp = cg.data_as<T>();
  // dy of the current layer: the caller's y_grad for the top layer, then the dy buffer.
  const T* dy_l = layer::data<T>(g.y_grad);
  for (std::int64_t l = L - 1; l >= 0; --l) {
    const std::int64_t I_l = in_size(l);
    // Layer 0's is the caller's x_grad: null when absent, and then neither direction of layer 0
    // computes one.
    T* const dx_l = l == 0 ? layer::data<T>(go.x_grad) : dx.data_as<T>();
    TensorView in_l = x.x;
    if (l > 0) {
      const std::int64_t off = is_absent_input(x.dropout_mask) ? lay.out : lay.in;
      in_l = TensorView(res + off + (l - 1) * lay.TB * DH, o.dtype, Shape{T_, B, DH});
    }
    for (std::int64_t d = 0; d < D; ++d) {
      const std::int64_t ld = l * D + d;
      const TensorView src =
          d == 1 ? TensorView(res + rev_offset(lay, l), o.dtype, Shape{T_, B, I_l}) : in_l;
      // h_grad and cs_grad of this direction, in its own time order.
      copy_steps(dy_l, DH, d * H, hgp, H, 0, H, T_, B, lens.data(), d == 1);
      std::fill_n(cgp, T_ * BH, T{});
      const T* hng = is_absent_input(g.h_n_grad) ? nullptr : layer::data<T>(g.h_n_grad) + ld * BH;
      const T* cng =
          !lstm || is_absent_input(g.c_n_grad) ? nullptr : layer::data<T>(g.c_n_grad) + ld * BH;
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t t = lens[static_cast<std::size_t>(b)] - 1;
        if (t < 0) continue;
        for (std::int64_t j = 0; j < H; ++j) {
          if (hng) add_to(hgp[(t * B + b) * H + j], hng[b * H + j]);
          if (cng) cgp[(t * B + b) * H + j] = cng[b * H + j];
        }
      }
      const TensorView h0 = initial_state<T>(x.h0, ld, B);
      const TensorView c0 = initial_state<T>(lstm ? x.c0 : TensorView(), ld, B);
      T* const xg = dx_l == nullptr ? nullptr : d == 0 ? dx_l : xg_rev.data_as<T>();
      // The initial states' gradients of (l, d), null when absent (not computed).
      auto state_grad = [&](const MutableTensorView& v) -> T* {
        return is_absent_input(v) ? nullptr : layer::data<T>(v) + ld * BH;
      };
      T* const h0g = state_grad(go.h0_grad);
      T* const c0g = lstm ? state_grad(go.c0_grad) : nullptr;
      auto view_bh = [&](T* p) {
        return p ? MutableTensorView(p, o.dtype, Shape{B, H}) : MutableTensorView();
      };
      const std::span<const MutableTensorView> params =
          go.params.subspan(static_cast<std::size_t>(ld * P), static_cast<std::size_t>(P));
      const TorchLayout torch = torch_layout(I_l);
      const std::array<MutableTensorView, 5> ops =
          torch_layout() ? ops_views(torch) : std::array<MutableTensorView, 5>{};
      layer_backward(ld, src, h0, c0, x.seq_lengths, tbh, res + ld * A * lay.TBH,
                     xg ? MutableTensorView(xg, o.dtype, Shape{T_, B, I_l}) : MutableTensorView(),
                     view_bh(h0g), view_bh(c0g),
                     torch_layout() ? std::span<const MutableTensorView>(ops) : params);
      if (torch_layout()) torch_grads<T>(torch, params);
      // An example with no step returns its final state's gradient to its initial state.
      for (std::int64_t b = 0; b < B; ++b) {
        if (lens[static_cast<std::size_t>(b)] > 0) continue;
        for (std::int64_t j = 0; j < H; ++j) {
          if (hng && h0g) add_to(h0g[b * H + j], hng[b * H + j]);
          if (cng && c0g) add_to(c0g[b * H + j], cng[b * H + j]);
        }
      }
      if (d == 1 && xg) {
        for (std::int64_t b = 0; b < B; ++b) {
          const std::int64_t Lb = lens[static_cast<std::size_t>(b)];
          for (std::int64_t t = 0; t < Lb; ++t) {
            const T* s = xg + ((Lb - 1 - t) * B + b) * I_l;
            T* dst = dx_l + (t * B + b) * I_l;
            for (std::int64_t j = 0; j < I_l; ++j) add_to(dst[j], s[j]);
          }
        }
      }
    }
    if (l > 0) {
      // dy_{l−1} = dx_l ⊙ mask_{l−1}
      T* const next = dy.data_as<T>();
      const std::int64_t n = T_ * B * DH;
      if (is_absent_input(x.dropout_mask)) {
        std::copy(dx_l, dx_l + n, next);
      } else {
        const T* mask = layer::data<T>(x.dropout_mask) + (l - 1) * n;
        for (std::int64_t e = 0; e < n; ++e) next[e] = mul(dx_l[e], mask[e]);
      }
      dy_l = next;
    }
  }
}

namespace {

// The checks of forward and backward on the stack's own views (the layers check the rest).
struct StackDims {
  std::int64_t T, B;
};

StackDims check_inputs(const Check& check, const RNNOptions& o, std::int64_t D,
                       const RNNInputs& in) {
  check.rank("x", in.x, 3);
  const std::int64_t T = in.x.shape[0], B = in.x.shape[1], H = o.hidden_size;
  if (T < 0 || T > o.max_time || B < 0 || B > o.max_batch) {
    check.fail("x has shape " + in.x.shape.to_string() + ", the stack was created for at most " +
               std::to_string(o.max_time) + " steps and batch " + std::to_string(o.max_batch));
  }
  check.tensor("x", in.x, Shape{T, B, o.input_size}, "time, batch, input_size", o.dtype);
  const Shape states{o.num_layers * D, B, H};
  if (!is_absent_input(in.h0)) {
    check.tensor("h0", in.h0, states, kStackStateDims, o.dtype);
  }
  if (is_lstm(o.mode) && !is_absent_input(in.c0)) {
    check.tensor("c0", in.c0, states, kStackStateDims, o.dtype);
  }
  if (!is_absent_input(in.dropout_mask) && o.num_layers > 1) {
    check.tensor("dropout_mask", in.dropout_mask, Shape{o.num_layers - 1, T, B, D * H},
                 "num_layers - 1, time, batch, directions * hidden", o.dtype);
  }
  // The sequence ops' rule and messages (ops/checks.h).
  std::string buffer;
  ops::check_seq_lengths(core::Checker(check.op_name(buffer)), in.seq_lengths, B, T);
  return {T, B};
}

// The reserve of a call: the caller's (1-D, reserve_elems(T, B) of the dtype; returns false) or
// the RNN's own (returns true).
bool check_reserve(const Check& check, const RNN::Impl& m, const TensorView& r,
                   const StackDims& s) {
  if (r.data == nullptr && r.shape.rank() == 0) {
    if (m.o.caller_reserve) {
      check.fail("the RNN was created with caller_reserve: pass a reserve of reserve_elems(T, B)");
    }
    return true;
  }
  check.tensor("reserve", r, Shape{m.layout(s.T, s.B).total}, "reserve_elems(T, B)", m.o.dtype);
  return false;
}

// The inputs of a call that every kernel may read, for the overlap check.
void add_inputs(layer::CallArgs& args, const RNNInputs& in, bool lstm) {
  args.input("x", in.x);
  args.input("h0", in.h0);
  if (lstm) args.input("c0", in.c0);
  args.input("seq_lengths", in.seq_lengths);
  args.input("dropout_mask", in.dropout_mask);
}

}  // namespace

void RNN::forward(const RNNInputs& in, const RNNOutputs& out, MutableTensorView reserve) {
  Impl& m = *impl_;
  const Check check{"RNN", "forward", "RNN.forward"};
  const layer::OneCall one(check, m.busy);
  const StackDims s = check_inputs(check, m.o, m.D, in);
  const bool lstm = is_lstm(m.o.mode);
  const Shape states{m.L * m.D, s.B, m.H};
  check.tensor("y", out.y, Shape{s.T, s.B, m.D * m.H}, kStackOutputDims, m.o.dtype);
  check.tensor("h_n", out.h_n, states, kStackStateDims, m.o.dtype);
  if (lstm) {
    check.tensor("c_n", out.c_n, states, kStackStateDims, m.o.dtype);
  }
  for (const auto& l : m.layers) {
    if (!l->has_weights()) check.fail("set_weights has not been called for every layer");
  }
  const bool own = check_reserve(check, m, TensorView(reserve), s);
  layer::CallArgs& args = m.args;
  args.clear();
  add_inputs(args, in, lstm);
  args.output("y", out.y);
  args.output("h_n", out.h_n);
  if (lstm) args.output("c_n", out.c_n);
  if (!own) args.output("reserve", reserve);
  args.check_no_alias(check);
  m.prepare(check, s.T, s.B, !is_absent_input(in.seq_lengths), own, false);
  for (std::int64_t b = 0; b < s.B; ++b) {
    m.lens[static_cast<std::size_t>(b)] =
        is_absent_input(in.seq_lengths) ? s.T
                                        : static_cast<const std::int64_t*>(in.seq_lengths.data)[b];
  }
  void* res = own ? m.reserve.data() : reserve.data;
  if (own) m.forward_done = false;
  with_element(m.o.dtype,
               [&]<typename T>() { m.forward_t<T>(in, out, s.T, s.B, static_cast<T*>(res)); });
  if (own) {
    m.forward_done = true;
    m.forward_T = s.T;
    m.forward_B = s.B;
    m.forward_dropout = !is_absent_input(in.dropout_mask);
  }
}

void RNN::backward(const RNNInputs& in, const RNNGradInputs& g, const RNNGradOutputs& out,
                   TensorView reserve) {
  Impl& m = *impl_;
  const Check check{"RNN", "backward", "RNN.backward"};
  const layer::OneCall one(check, m.busy);
  const StackDims s = check_inputs(check, m.o, m.D, in);
  const bool own = check_reserve(check, m, reserve, s);
  const bool dropout = !is_absent_input(in.dropout_mask);
  if (own) {
    // The own reserve holds the latest forward call: `in` must repeat it.
    if (!m.forward_done) {
      check.fail("forward must run (and succeed) on the RNN's own reserve before backward");
    }
    if (s.T != m.forward_T || s.B != m.forward_B) {
      check.fail("x has " + std::to_string(s.T) + " time steps and batch " + std::to_string(s.B) +
                 ", the forward call the RNN's reserve holds had " + std::to_string(m.forward_T) +
                 " and " + std::to_string(m.forward_B) +
                 " (backward must repeat the forward call's inputs)");
    }
    if (m.L > 1 && dropout != m.forward_dropout) {
      check.fail(std::string("dropout_mask is ") + (dropout ? "given" : "absent") +
                 ", the forward call the RNN's reserve holds ran " +
                 (m.forward_dropout ? "with" : "without") +
                 " one (backward must repeat the forward call's inputs)");
    }
  }
  const bool lstm = is_lstm(m.o.mode);
  const Shape states{m.L * m.D, s.B, m.H};
  const DType dt = m.o.dtype;
  check.tensor("y_grad", g.y_grad, Shape{s.T, s.B, m.D * m.H}, kStackOutputDims, dt);
  if (!is_absent_input(g.h_n_grad)) {
    check.tensor("h_n_grad", g.h_n_grad, states, kStackStateDims, dt);
  }
  if (lstm && !is_absent_input(g.c_n_grad)) {
    check.tensor("c_n_grad", g.c_n_grad, states, kStackStateDims, dt);
  }
  // An absent x_grad: the input gradient is not computed (the first layer's d_x products skipped).
  if (!is_absent_input(out.x_grad)) {
    check.tensor("x_grad", out.x_grad, in.x.shape, "time, batch, input_size", dt);
  }
  // An absent h0_grad / c0_grad: not computed (without h0_grad the first step's recurrent
  // products are skipped).
  if (!is_absent_input(out.h0_grad)) {
    check.tensor("h0_grad", out.h0_grad, states, kStackStateDims, dt);
  }
  if (lstm && !is_absent_input(out.c0_grad)) {
    check.tensor("c0_grad", out.c0_grad, states, kStackStateDims, dt);
  }
  const std::size_t want = static_cast<std::size_t>(m.L * m.D * m.P);
  if (out.params.size() != want) {
    check.fail("params must hold " + std::to_string(want) +
               " gradient views (num_layers * directions * params_per_layer), got " +
               std::to_string(out.params.size()));
  }
  for (std::int64_t b = 0; b < s.B; ++b) {
    const std::int64_t L = is_absent_input(in.seq_lengths)
                               ? s.T
                               : static_cast<const std::int64_t*>(in.seq_lengths.data)[b];
    if (own && L != m.lens[static_cast<std::size_t>(b)]) {
      check.fail("seq_lengths differ from the forward call's");
    }
  }
  layer::CallArgs& args = m.args;
  args.clear();
  add_inputs(args, in, lstm);
  args.input("y_grad", g.y_grad);
  args.input("h_n_grad", g.h_n_grad);
  if (lstm) args.input("c_n_grad", g.c_n_grad);
  if (!own) args.input("reserve", reserve);
  if (!is_absent_input(out.x_grad)) args.output("x_grad", out.x_grad);
  if (!is_absent_input(out.h0_grad)) args.output("h0_grad", out.h0_grad);
  if (lstm && !is_absent_input(out.c0_grad)) args.output("c0_grad", out.c0_grad);
  for (std::size_t k = 0; k < out.params.size(); ++k) {
    if (m.torch_layout()) {
      // The stack writes the caller's views (the layers write the kOps layout's, and check
      // those); absent ones are not written.
      if (is_absent_input(out.params[k])) continue;
      const std::int64_t l = std::int64_t(k) / (m.D * m.P);
      check.output(m.param_names[k].c_str(), out.params[k],
                   m.torch_layout(m.in_size(l)).shape(k % std::size_t(m.P)), dt);
    }
    args.output(m.param_names[k].c_str(), out.params[k]);
  }
  args.check_no_alias(check);
  m.prepare(check, s.T, s.B, !is_absent_input(in.seq_lengths), false, true);
  for (std::int64_t b = 0; b < s.B; ++b) {
    m.lens[static_cast<std::size_t>(b)] =
        is_absent_input(in.seq_lengths) ? s.T
                                        : static_cast<const std::int64_t*>(in.seq_lengths.data)[b];
  }
  const void* res = own ? m.reserve.data() : reserve.data;
  with_element(
      dt, [&]<typename T>() { m.backward_t<T>(in, g, out, s.T, s.B, static_cast<const T*>(res)); });
}

}  // namespace blockrnn
