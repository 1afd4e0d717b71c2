// blockrnn._core's layer objects and RNN stack (blockrnn/layer.h): LSTMLayer, GRULayer,
// GRUResetAfterLayer, the cell layers LSTMCellLayer and GRUCellLayer, and RNN, set up once and
// called many times.
//
// Every array crosses without a copy: inputs and outputs must be C-contiguous CPU arrays of the
// layer's dtype (numpy arrays, or torch tensors through .numpy()); the Python wrappers
// (blockrnn.layers, blockrnn.torch) allocate the outputs and make inputs contiguous where they
// are not. The GIL is released while the library computes; Ctrl-C cancels at a step boundary.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "blockrnn/blockrnn.h"

namespace nb = nanobind;

namespace {

using In = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Out = nb::ndarray<nb::c_contig, nb::device::cpu>;
using OptIn = std::optional<In>;

blockrnn::DType dtype_of(nb::dlpack::dtype t, const char* what) {
  using nb::dlpack::dtype_code;
  // bfloat16: a DLPack bfloat16 array, or a uint16 view of the bits of an ml_dtypes.bfloat16
  // array (numpy cannot export those; blockrnn.layers passes the view, as the raw ops do).
  if (t.lanes == 1 && t.bits == 16 &&
      (t.code == static_cast<uint8_t>(dtype_code::Bfloat) ||
       t.code == static_cast<uint8_t>(dtype_code::UInt))) {
    return blockrnn::DType::kBFloat16;
  }
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(dtype_code::Float)) {
    if (t.bits == 16) return blockrnn::DType::kFloat16;
    if (t.bits == 32) return blockrnn::DType::kFloat32;
    if (t.bits == 64) return blockrnn::DType::kFloat64;
  }
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(dtype_code::Int) && t.bits == 64) {
    return blockrnn::DType::kInt64;
  }
  throw blockrnn::Error(
      blockrnn::ErrorCode::kInvalidArgument,
      std::string(what) + " must be float16, bfloat16, float32, float64 or int64");
}

template <typename A>
blockrnn::Shape shape_of(const A& a) {
  std::vector<int64_t> dims(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) dims[d] = static_cast<int64_t>(a.shape(d));
  return blockrnn::Shape::from_dims(dims.data(), static_cast<int>(dims.size()));
}

blockrnn::TensorView view(const In& a) {
  return {a.data(), dtype_of(a.dtype(), "an input"), shape_of(a)};
}
blockrnn::TensorView view(const OptIn& a) {
  return a ? view(*a) : blockrnn::TensorView();
}
blockrnn::MutableTensorView mview(const Out& a) {
  return {a.data(), dtype_of(a.dtype(), "an output"), shape_of(a)};
}

blockrnn::DType parse_dtype(const std::string& s) {
  if (s == "float32") return blockrnn::DType::kFloat32;
  if (s == "float64") return blockrnn::DType::kFloat64;
  if (s == "float16") return blockrnn::DType::kFloat16;
  if (s == "bfloat16") return blockrnn::DType::kBFloat16;
  throw blockrnn::Error(
      blockrnn::ErrorCode::kInvalidArgument,
      "dtype must be 'float16', 'bfloat16', 'float32' or 'float64', got '" + s + "'");
}

bool signal_pending(void*) {
  nb::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

// Runs f without the GIL, with Ctrl-C as the cancel check.
template <typename F>
void compute(F&& f) {
  nb::gil_scoped_release release;
  blockrnn::set_cancel_check(signal_pending, nullptr);
  struct Reset {
    ~Reset() { blockrnn::set_cancel_check(nullptr, nullptr); }
  } reset;
  f();
}

blockrnn::LayerShape layer_shape(int64_t I, int64_t H, const std::string& dtype, int64_t max_time,
                                 int64_t max_batch) {
  return {.input_size = I,
          .hidden_size = H,
          .dtype = parse_dtype(dtype),
          .max_time = max_time,
          .max_batch = max_batch};
}

blockrnn::ParamLayout parse_param_layout(const std::string& s) {
  if (s == "ops") return blockrnn::ParamLayout::kOps;
  if (s == "torch") return blockrnn::ParamLayout::kTorch;
  throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                        "RNN.create: param_layout must be 'ops' or 'torch', got '" + s + "'");
}

blockrnn::RNNMode parse_mode(const std::string& s) {
  if (s == "lstm") return blockrnn::RNNMode::kLSTM;
  if (s == "lstm_v2") return blockrnn::RNNMode::kLSTMV2;
  if (s == "gru") return blockrnn::RNNMode::kGRU;
  if (s == "gru_reset_after") return blockrnn::RNNMode::kGRUResetAfter;
  throw blockrnn::Error(
      blockrnn::ErrorCode::kInvalidArgument,
      "mode must be 'lstm', 'lstm_v2', 'gru' or 'gru_reset_after', got '" + s + "'");
}

// Throws unless the list `what` holds one array per name of `names` (", "-separated).
template <typename A>
void check_count(const std::vector<A>& list, std::size_t n, const char* what,
                 const std::string& names) {
  if (list.size() != n) throw nb::value_error((std::string(what) + ": " + names).c_str());
}

template <std::size_t>
using InArg = In;  // one In parameter per index of a pack

// The struct S of mutable views of a[K]..., in field order.
template <typename S, std::size_t... K>
S mviews(const std::vector<Out>& a, std::index_sequence<K...>) {
  return S{mview(a[K])...};
}

// Defines forward and backward of the layer class L, whose structs hold after x its initial
// states `states` (LSTM: cs_prev, h_prev; GRU: h_prev), in the backward the forward's kOutputs
// outputs `outputs` and the gradients `grads` of the outputs that continue the states (cs_grad,
// h_grad), and whose gradients are the kGrads `grads_out`. Python:
//   forward(x, *states, out, seq_lengths=None)                 out: the outputs
//   backward(x, *states, acts, *grads, out, seq_lengths=None)  acts: the outputs, out: grads_out
template <class L, std::size_t kOutputs, std::size_t kGrads, std::size_t... S>
void def_calls(nb::class_<L>& c, std::index_sequence<S...>,
               std::array<const char*, sizeof...(S)> states,
               std::array<const char*, sizeof...(S)> grads, const std::string& outputs,
               const std::string& grads_out) {
  c.def(
      "forward",
      [outputs](L& l, In x, InArg<S>... s, std::vector<Out> out, OptIn lengths) {
        check_count(out, kOutputs, "out", outputs);
        const typename L::Inputs in{std::nullopt, view(x), view(s)..., view(lengths)};
        const auto o = mviews<typename L::Outputs>(out, std::make_index_sequence<kOutputs>());
        compute([&] { l.forward(in, o); });
      },
      nb::arg("x"), nb::arg(states[S])..., nb::arg("out"), nb::arg("seq_lengths") = nb::none(),
      ("Fills out = [" + outputs + "] (each [T, B, H]).").c_str());
  c.def(
      "backward",
      [outputs, grads_out](L& l, In x, InArg<S>... s, std::vector<In> acts, InArg<S>... g,
                           std::vector<Out> out, OptIn lengths) {
        check_count(acts, kOutputs, "acts", outputs);
        check_count(out, kGrads, "out", grads_out);
        auto grad_inputs = [&]<std::size_t... K>(std::index_sequence<K...>) {
          return typename L::GradInputs{std::nullopt,     view(x),    view(s)...,
                                        view(acts[K])..., view(g)..., view(lengths)};
        };
        const auto in = grad_inputs(std::make_index_sequence<kOutputs>());
        const auto o = mviews<typename L::GradOutputs>(out, std::make_index_sequence<kGrads>());
        compute([&] { l.backward(in, o); });
      },
      nb::arg("x"), nb::arg(states[S])..., nb::arg("acts"), nb::arg(grads[S])..., nb::arg("out"),
      nb::arg("seq_lengths") = nb::none());
}

// A GRU layer class: created from sizes, its weights named `weights` (set_weights' order), one
// state h, kOutputs outputs.
template <class L, std::size_t kOutputs>
void def_gru_layer(nb::module_& m, const char* name, std::array<const char*, 4> weights,
                   const std::string& outputs, const std::string& grads_out) {
  nb::class_<L> c(m, name);
  c.def(
       "__init__",
       [](L* self, int64_t I, int64_t H, const std::string& dtype, int64_t max_time,
          int64_t max_batch) { new (self) L(layer_shape(I, H, dtype, max_time, max_batch)); },
       nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("dtype"), nb::arg("max_time"),
       nb::arg("max_batch"))
      .def(
          "set_weights",
          [](L& l, In w0, In w1, In b0, In b1) {
            l.set_weights(view(w0), view(w1), view(b0), view(b1));
          },
          nb::arg(weights[0]), nb::arg(weights[1]), nb::arg(weights[2]), nb::arg(weights[3]));
  def_calls<L, kOutputs, 6>(c, std::index_sequence<0>(), {"h_prev"}, {"h_grad"}, outputs,
                            grads_out);
}

blockrnn::MutableTensorView mview(const std::optional<Out>& a) {
  return a ? mview(*a) : blockrnn::MutableTensorView();
}

// The cell layers (LSTMCellLayer, GRUCellLayer). Python:
//   forward(x, *states, out)                                out: the op's outputs
//   backward(x, *states, acts, *grads, out, *gate_grads)    acts: the forward's outputs (its
//       last, h, is not read), out: the gradients of x, the states and the weights, gate_grads:
//       the grad op's gate gradients, optional
void register_cell_layers(nb::module_& m) {
  using blockrnn::CellLayerShape;
  using blockrnn::GRUCellLayer;
  using blockrnn::LSTMCellLayer;
  auto shape = [](int64_t I, int64_t H, const std::string& dtype, int64_t max_batch) {
    return CellLayerShape{
        .input_size = I, .hidden_size = H, .dtype = parse_dtype(dtype), .max_batch = max_batch};
  };
  nb::class_<LSTMCellLayer>(m, "LSTMCellLayer")
      .def(
          "__init__",
          [shape](LSTMCellLayer* self, int64_t I, int64_t H, const std::string& dtype,
                  int64_t max_batch, double forget_bias, double cell_clip, bool use_peephole) {
            new (self) LSTMCellLayer(
                shape(I, H, dtype, max_batch),
                {.forget_bias = forget_bias, .cell_clip = cell_clip, .use_peephole = use_peephole});
          },
          nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("dtype"), nb::arg("max_batch"),
          nb::arg("forget_bias") = 1.0, nb::arg("cell_clip") = 3.0, nb::arg("use_peephole") = false)
      .def("workspace_bytes", &LSTMCellLayer::workspace_bytes, nb::arg("B"))
      .def(
          "set_weights",
          [](LSTMCellLayer& l, In w, In b, OptIn wci, OptIn wcf, OptIn wco) {
            l.set_weights(view(w), view(b), view(wci), view(wcf), view(wco));
          },
          nb::arg("w"), nb::arg("b"), nb::arg("wci") = nb::none(), nb::arg("wcf") = nb::none(),
          nb::arg("wco") = nb::none())
      .def(
          "forward",
          [](LSTMCellLayer& l, In x, In cs_prev, In h_prev, std::vector<Out> out) {
            check_count(out, 7, "out", "i, cs, f, o, ci, co, h");
            const blockrnn::LSTMCellLayerInputs in{view(x), view(cs_prev), view(h_prev)};
            const auto o =
                mviews<blockrnn::LSTMBlockCellOutputs>(out, std::make_index_sequence<7>());
            compute([&] { l.forward(in, o); });
          },
          nb::arg("x"), nb::arg("cs_prev"), nb::arg("h_prev"), nb::arg("out"),
          "Fills out = [i, cs, f, o, ci, co, h] (each [B, H]).")
      .def(
          "backward",
          [](LSTMCellLayer& l, In x, In cs_prev, In h_prev, std::vector<In> acts, In cs_grad,
             In h_grad, std::vector<Out> out, std::optional<Out> dicfo) {
            check_count(acts, 7, "acts", "i, cs, f, o, ci, co, h");
            check_count(out, 8, "out",
                        "x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, "
                        "wco_grad, b_grad");
            const blockrnn::LSTMCellLayerGradInputs in{view(x),       view(cs_prev), view(h_prev),
                                                       view(acts[0]), view(acts[1]), view(acts[2]),
                                                       view(acts[3]), view(acts[4]), view(acts[5]),
                                                       view(cs_grad), view(h_grad)};
            const blockrnn::LSTMCellLayerGradOutputs o{mview(out[0]), mview(out[1]), mview(out[2]),
                                                       mview(out[3]), mview(out[4]), mview(out[5]),
                                                       mview(out[6]), mview(out[7]), mview(dicfo)};
            compute([&] { l.backward(in, o); });
          },
          nb::arg("x"), nb::arg("cs_prev"), nb::arg("h_prev"), nb::arg("acts"), nb::arg("cs_grad"),
          nb::arg("h_grad"), nb::arg("out"), nb::arg("dicfo").none() = nb::none(),
          "Fills out = [x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, "
          "wco_grad, b_grad] and, when given, dicfo [B, 4H].");
  nb::class_<GRUCellLayer>(m, "GRUCellLayer")
      .def(
          "__init__",
          [shape](GRUCellLayer* self, int64_t I, int64_t H, const std::string& dtype,
                  int64_t max_batch) { new (self) GRUCellLayer(shape(I, H, dtype, max_batch)); },
          nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("dtype"), nb::arg("max_batch"))
      .def("workspace_bytes", &GRUCellLayer::workspace_bytes, nb::arg("B"))
      .def(
          "set_weights",
          [](GRUCellLayer& l, In w_ru, In w_c, In b_ru, In b_c) {
            l.set_weights(view(w_ru), view(w_c), view(b_ru), view(b_c));
          },
          nb::arg("w_ru"), nb::arg("w_c"), nb::arg("b_ru"), nb::arg("b_c"))
      .def(
          "forward",
          [](GRUCellLayer& l, In x, In h_prev, std::vector<Out> out) {
            check_count(out, 4, "out", "r, u, c, h");
            const blockrnn::GRUCellLayerInputs in{view(x), view(h_prev)};
            const auto o =
                mviews<blockrnn::GRUBlockCellOutputs>(out, std::make_index_sequence<4>());
            compute([&] { l.forward(in, o); });
          },
          nb::arg("x"), nb::arg("h_prev"), nb::arg("out"),
          "Fills out = [r, u, c, h] (each [B, H]).")
      .def(
          "backward",
          [](GRUCellLayer& l, In x, In h_prev, std::vector<In> acts, In h_grad,
             std::vector<Out> out, std::optional<Out> d_c_bar, std::optional<Out> d_r_bar_u_bar) {
            check_count(acts, 4, "acts", "r, u, c, h");
            check_count(out, 6, "out",
                        "x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad");
            const blockrnn::GRUCellLayerGradInputs in{view(x),       view(h_prev),  view(acts[0]),
                                                      view(acts[1]), view(acts[2]), view(h_grad)};
            const blockrnn::GRUCellLayerGradOutputs o{
                mview(out[0]), mview(out[1]), mview(out[2]),  mview(out[3]),
                mview(out[4]), mview(out[5]), mview(d_c_bar), mview(d_r_bar_u_bar)};
            compute([&] { l.backward(in, o); });
          },
          nb::arg("x"), nb::arg("h_prev"), nb::arg("acts"), nb::arg("h_grad"), nb::arg("out"),
          nb::arg("d_c_bar").none() = nb::none(), nb::arg("d_r_bar_u_bar").none() = nb::none(),
          "Fills out = [x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad] and, when "
          "given, d_c_bar [B, H] and d_r_bar_u_bar [B, 2H].");
}

}  // namespace

void register_layers(nb::module_& m) {
  register_cell_layers(m);
  using blockrnn::GRULayer;
  using blockrnn::GRUResetAfterLayer;
  using blockrnn::LSTMLayer;
  using blockrnn::RNN;

  nb::class_<LSTMLayer> lstm(m, "LSTMLayer");
  lstm.def(
          "__init__",
          [](LSTMLayer* self, int64_t I, int64_t H, const std::string& dtype, int64_t max_time,
             int64_t max_batch, bool v2, std::optional<double> forget_bias,
             std::optional<double> cell_clip, bool use_peephole) {
            new (self) LSTMLayer(layer_shape(I, H, dtype, max_time, max_batch),
                                 {.v2 = v2,
                                  .forget_bias = forget_bias,
                                  .cell_clip = cell_clip,
                                  .use_peephole = use_peephole});
          },
          nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("dtype"), nb::arg("max_time"),
          nb::arg("max_batch"), nb::arg("v2") = false, nb::arg("forget_bias") = nb::none(),
          nb::arg("cell_clip") = nb::none(), nb::arg("use_peephole") = false)
      .def(
          "set_weights",
          [](LSTMLayer& l, In w, In b, OptIn wci, OptIn wcf, OptIn wco) {
            l.set_weights(view(w), view(b), view(wci), view(wcf), view(wco));
          },
          nb::arg("w"), nb::arg("b"), nb::arg("wci") = nb::none(), nb::arg("wcf") = nb::none(),
          nb::arg("wco") = nb::none());
  def_calls<LSTMLayer, 7, 8>(
      lstm, std::index_sequence<0, 1>(), {"cs_prev", "h_prev"}, {"cs_grad", "h_grad"},
      "i, cs, f, o, ci, co, h",
      "x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad");
  def_gru_layer<GRULayer, 4>(m, "GRULayer", {"w_ru", "w_c", "b_ru", "b_c"}, "r, u, c, h",
                             "x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad");
  def_gru_layer<GRUResetAfterLayer, 5>(
      m, "GRUResetAfterLayer", {"w_i", "w_h", "b_i", "b_h"}, "r, u, n, hn, h",
      "x_grad, h_prev_grad, w_i_grad, w_h_grad, b_i_grad, b_h_grad");

  nb::class_<RNN>(m, "RNN")
      .def(
          "__init__",
          [](RNN* self, const std::string& mode, int64_t I, int64_t H, int64_t num_layers,
             bool bidirectional, const std::string& dtype, int64_t max_time, int64_t max_batch,
             std::optional<double> forget_bias, std::optional<double> cell_clip, bool use_peephole,
             bool caller_reserve, const std::string& param_layout) {
            new (self) RNN({.mode = parse_mode(mode),
                            .input_size = I,
                            .hidden_size = H,
                            .num_layers = num_layers,
                            .bidirectional = bidirectional,
                            .dtype = parse_dtype(dtype),
                            .max_time = max_time,
                            .max_batch = max_batch,
                            .lstm = {.forget_bias = forget_bias,
                                     .cell_clip = cell_clip,
                                     .use_peephole = use_peephole},
                            .caller_reserve = caller_reserve,
                            .param_layout = parse_param_layout(param_layout)});
          },
          nb::arg("mode"), nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("num_layers"),
          nb::arg("bidirectional"), nb::arg("dtype"), nb::arg("max_time"), nb::arg("max_batch"),
          nb::arg("forget_bias") = nb::none(), nb::arg("cell_clip") = nb::none(),
          nb::arg("use_peephole") = false, nb::arg("caller_reserve") = false,
          nb::arg("param_layout") = "ops")
      .def_prop_ro("params_per_layer", &RNN::params_per_layer)
      .def_prop_ro("num_directions", &RNN::num_directions)
      .def("reserve_elems", &RNN::reserve_elems, nb::arg("T"), nb::arg("B"))
      .def(
          "set_weights",
          [](RNN& r, int64_t layer, int64_t direction, std::vector<OptIn> params) {
            std::vector<blockrnn::TensorView> v;
            for (const OptIn& p : params) v.push_back(view(p));
            r.set_weights(layer, direction, v);
          },
          nb::arg("layer"), nb::arg("direction"), nb::arg("params"))
      .def(
          "forward",
          [](RNN& r, In x, OptIn h0, OptIn c0, OptIn lengths, OptIn mask, Out y, Out h_n,
             std::optional<Out> c_n, std::optional<Out> reserve) {
            const blockrnn::RNNInputs in{.x = view(x),
                                         .h0 = view(h0),
                                         .c0 = view(c0),
                                         .seq_lengths = view(lengths),
                                         .dropout_mask = view(mask)};
            const blockrnn::RNNOutputs o{mview(y), mview(h_n),
                                         c_n ? mview(*c_n) : blockrnn::MutableTensorView()};
            const blockrnn::MutableTensorView res =
                reserve ? mview(*reserve) : blockrnn::MutableTensorView();
            compute([&] { r.forward(in, o, res); });
          },
          nb::arg("x"), nb::arg("h0").none(), nb::arg("c0").none(), nb::arg("seq_lengths").none(),
          nb::arg("dropout_mask").none(), nb::arg("y"), nb::arg("h_n"), nb::arg("c_n").none(),
          nb::arg("reserve").none() = nb::none(), "Fills y [T, B, D*H], h_n and c_n [L*D, B, H].")
      .def(
          "backward",
          [](RNN& r, In x, OptIn h0, OptIn c0, OptIn lengths, OptIn mask, In y_grad, OptIn h_n_grad,
             OptIn c_n_grad, std::optional<Out> x_grad, std::optional<Out> h0_grad,
             std::optional<Out> c0_grad, std::vector<std::optional<Out>> param_grads,
             OptIn reserve) {
            const blockrnn::RNNInputs in{.x = view(x),
                                         .h0 = view(h0),
                                         .c0 = view(c0),
                                         .seq_lengths = view(lengths),
                                         .dropout_mask = view(mask)};
            const blockrnn::RNNGradInputs g{view(y_grad), view(h_n_grad), view(c_n_grad)};
            std::vector<blockrnn::MutableTensorView> pv;
            for (const std::optional<Out>& p : param_grads) pv.push_back(mview(p));
            const blockrnn::RNNGradOutputs o{mview(x_grad), mview(h0_grad), mview(c0_grad), pv};
            const blockrnn::TensorView res = view(reserve);
            compute([&] { r.backward(in, g, o, res); });
          },
          nb::arg("x"), nb::arg("h0").none(), nb::arg("c0").none(), nb::arg("seq_lengths").none(),
          nb::arg("dropout_mask").none(), nb::arg("y_grad"), nb::arg("h_n_grad").none(),
          nb::arg("c_n_grad").none(), nb::arg("x_grad").none(), nb::arg("h0_grad").none(),
          nb::arg("c0_grad").none(), nb::arg("param_grads"), nb::arg("reserve").none() = nb::none(),
          "Fills x_grad, h0_grad, c0_grad and param_grads (set_weights' order, layer-major); "
          "x_grad None: the input gradient is not computed; h0_grad (c0_grad) None: that initial "
          "state's gradient is not computed.");
}
