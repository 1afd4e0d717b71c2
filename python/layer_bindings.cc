// blockrnn._core's layer objects and RNN stack (blockrnn/layer.h): LSTMLayer, GRULayer,
// GRUResetAfterLayer and RNN, set up once and called many times.
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

#include <optional>
#include <string>
#include <vector>

#include "blockrnn/blockrnn.h"

namespace nb = nanobind;

namespace {

using In = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Out = nb::ndarray<nb::c_contig, nb::device::cpu>;
using OptIn = std::optional<In>;

blockrnn::DType dtype_of(nb::dlpack::dtype t, const char* what) {
  using nb::dlpack::dtype_code;
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(dtype_code::Float)) {
    if (t.bits == 16) return blockrnn::DType::kFloat16;
    if (t.bits == 32) return blockrnn::DType::kFloat32;
    if (t.bits == 64) return blockrnn::DType::kFloat64;
  }
  if (t.lanes == 1 && t.code == static_cast<uint8_t>(dtype_code::Int) && t.bits == 64) {
    return blockrnn::DType::kInt64;
  }
  throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                        std::string(what) + " must be float16, float32, float64 or int64");
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
  throw blockrnn::Error(blockrnn::ErrorCode::kInvalidArgument,
                        "dtype must be 'float32' or 'float64', got '" + s + "'");
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

blockrnn::RNNMode parse_mode(const std::string& s) {
  if (s == "lstm") return blockrnn::RNNMode::kLSTM;
  if (s == "lstm_v2") return blockrnn::RNNMode::kLSTMV2;
  if (s == "gru") return blockrnn::RNNMode::kGRU;
  if (s == "gru_reset_after") return blockrnn::RNNMode::kGRUResetAfter;
  throw blockrnn::Error(
      blockrnn::ErrorCode::kInvalidArgument,
      "mode must be 'lstm', 'lstm_v2', 'gru' or 'gru_reset_after', got '" + s + "'");
}

}  // namespace

void register_layers(nb::module_& m) {
  using blockrnn::GRULayer;
  using blockrnn::GRUResetAfterLayer;
  using blockrnn::LSTMLayer;
  using blockrnn::RNN;

  nb::class_<LSTMLayer>(m, "LSTMLayer")
      .def(
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
          nb::arg("wco") = nb::none())
      .def(
          "forward",
          [](LSTMLayer& l, In x, In cs_prev, In h_prev, std::vector<Out> out, OptIn lengths) {
            if (out.size() != 7) throw nb::value_error("out: i, cs, f, o, ci, co, h");
            const blockrnn::LSTMLayerInputs in{.x = view(x),
                                               .cs_prev = view(cs_prev),
                                               .h_prev = view(h_prev),
                                               .seq_lengths = view(lengths)};
            const blockrnn::BlockLSTMOutputs o{mview(out[0]), mview(out[1]), mview(out[2]),
                                               mview(out[3]), mview(out[4]), mview(out[5]),
                                               mview(out[6])};
            compute([&] { l.forward(in, o); });
          },
          nb::arg("x"), nb::arg("cs_prev"), nb::arg("h_prev"), nb::arg("out"),
          nb::arg("seq_lengths") = nb::none(),
          "Fills out = [i, cs, f, o, ci, co, h] (each [T, B, H]).")
      .def(
          "backward",
          [](LSTMLayer& l, In x, In cs_prev, In h_prev, std::vector<In> acts, In cs_grad, In h_grad,
             std::vector<Out> out, OptIn lengths) {
            if (acts.size() != 7) throw nb::value_error("acts: i, cs, f, o, ci, co, h");
            if (out.size() != 8) {
              throw nb::value_error(
                  "out: x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, "
                  "wco_grad, b_grad");
            }
            const blockrnn::LSTMLayerGradInputs in{.x = view(x),
                                                   .cs_prev = view(cs_prev),
                                                   .h_prev = view(h_prev),
                                                   .i = view(acts[0]),
                                                   .cs = view(acts[1]),
                                                   .f = view(acts[2]),
                                                   .o = view(acts[3]),
                                                   .ci = view(acts[4]),
                                                   .co = view(acts[5]),
                                                   .h = view(acts[6]),
                                                   .cs_grad = view(cs_grad),
                                                   .h_grad = view(h_grad),
                                                   .seq_lengths = view(lengths)};
            const blockrnn::BlockLSTMGradOutputs o{mview(out[0]), mview(out[1]), mview(out[2]),
                                                   mview(out[3]), mview(out[4]), mview(out[5]),
                                                   mview(out[6]), mview(out[7])};
            compute([&] { l.backward(in, o); });
          },
          nb::arg("x"), nb::arg("cs_prev"), nb::arg("h_prev"), nb::arg("acts"), nb::arg("cs_grad"),
          nb::arg("h_grad"), nb::arg("out"), nb::arg("seq_lengths") = nb::none());

  nb::class_<GRULayer>(m, "GRULayer")
      .def(
          "__init__",
          [](GRULayer* self, int64_t I, int64_t H, const std::string& dtype, int64_t max_time,
             int64_t max_batch) {
            new (self) GRULayer(layer_shape(I, H, dtype, max_time, max_batch));
          },
          nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("dtype"), nb::arg("max_time"),
          nb::arg("max_batch"))
      .def(
          "set_weights",
          [](GRULayer& l, In w_ru, In w_c, In b_ru, In b_c) {
            l.set_weights(view(w_ru), view(w_c), view(b_ru), view(b_c));
          },
          nb::arg("w_ru"), nb::arg("w_c"), nb::arg("b_ru"), nb::arg("b_c"))
      .def(
          "forward",
          [](GRULayer& l, In x, In h_prev, std::vector<Out> out, OptIn lengths) {
            if (out.size() != 4) throw nb::value_error("out: r, u, c, h");
            const blockrnn::GRULayerInputs in{
                .x = view(x), .h_prev = view(h_prev), .seq_lengths = view(lengths)};
            const blockrnn::BlockGRUOutputs o{mview(out[0]), mview(out[1]), mview(out[2]),
                                              mview(out[3])};
            compute([&] { l.forward(in, o); });
          },
          nb::arg("x"), nb::arg("h_prev"), nb::arg("out"), nb::arg("seq_lengths") = nb::none())
      .def(
          "backward",
          [](GRULayer& l, In x, In h_prev, std::vector<In> acts, In h_grad, std::vector<Out> out,
             OptIn lengths) {
            if (acts.size() != 4) throw nb::value_error("acts: r, u, c, h");
            if (out.size() != 6) {
              throw nb::value_error(
                  "out: x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, "
                  "b_c_grad");
            }
            const blockrnn::GRULayerGradInputs in{.x = view(x),
                                                  .h_prev = view(h_prev),
                                                  .r = view(acts[0]),
                                                  .u = view(acts[1]),
                                                  .c = view(acts[2]),
                                                  .h = view(acts[3]),
                                                  .h_grad = view(h_grad),
                                                  .seq_lengths = view(lengths)};
            const blockrnn::BlockGRUGradOutputs o{mview(out[0]), mview(out[1]), mview(out[2]),
                                                  mview(out[3]), mview(out[4]), mview(out[5])};
            compute([&] { l.backward(in, o); });
          },
          nb::arg("x"), nb::arg("h_prev"), nb::arg("acts"), nb::arg("h_grad"), nb::arg("out"),
          nb::arg("seq_lengths") = nb::none());

  nb::class_<GRUResetAfterLayer>(m, "GRUResetAfterLayer")
      .def(
          "__init__",
          [](GRUResetAfterLayer* self, int64_t I, int64_t H, const std::string& dtype,
             int64_t max_time, int64_t max_batch) {
            new (self) GRUResetAfterLayer(layer_shape(I, H, dtype, max_time, max_batch));
          },
          nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("dtype"), nb::arg("max_time"),
          nb::arg("max_batch"))
      .def(
          "set_weights",
          [](GRUResetAfterLayer& l, In w_i, In w_h, In b_i, In b_h) {
            l.set_weights(view(w_i), view(w_h), view(b_i), view(b_h));
          },
          nb::arg("w_i"), nb::arg("w_h"), nb::arg("b_i"), nb::arg("b_h"))
      .def(
          "forward",
          [](GRUResetAfterLayer& l, In x, In h_prev, std::vector<Out> out, OptIn lengths) {
            if (out.size() != 5) throw nb::value_error("out: r, u, n, hn, h");
            const blockrnn::GRULayerInputs in{
                .x = view(x), .h_prev = view(h_prev), .seq_lengths = view(lengths)};
            const blockrnn::BlockGRUResetAfterOutputs o{mview(out[0]), mview(out[1]), mview(out[2]),
                                                        mview(out[3]), mview(out[4])};
            compute([&] { l.forward(in, o); });
          },
          nb::arg("x"), nb::arg("h_prev"), nb::arg("out"), nb::arg("seq_lengths") = nb::none())
      .def(
          "backward",
          [](GRUResetAfterLayer& l, In x, In h_prev, std::vector<In> acts, In h_grad,
             std::vector<Out> out, OptIn lengths) {
            if (acts.size() != 5) throw nb::value_error("acts: r, u, n, hn, h");
            if (out.size() != 6) {
              throw nb::value_error(
                  "out: x_grad, h_prev_grad, w_i_grad, w_h_grad, b_i_grad, "
                  "b_h_grad");
            }
            const blockrnn::GRUResetAfterLayerGradInputs in{.x = view(x),
                                                            .h_prev = view(h_prev),
                                                            .r = view(acts[0]),
                                                            .u = view(acts[1]),
                                                            .n = view(acts[2]),
                                                            .hn = view(acts[3]),
                                                            .h = view(acts[4]),
                                                            .h_grad = view(h_grad),
                                                            .seq_lengths = view(lengths)};
            const blockrnn::BlockGRUResetAfterGradOutputs o{mview(out[0]), mview(out[1]),
                                                            mview(out[2]), mview(out[3]),
                                                            mview(out[4]), mview(out[5])};
            compute([&] { l.backward(in, o); });
          },
          nb::arg("x"), nb::arg("h_prev"), nb::arg("acts"), nb::arg("h_grad"), nb::arg("out"),
          nb::arg("seq_lengths") = nb::none());

  nb::class_<RNN>(m, "RNN")
      .def(
          "__init__",
          [](RNN* self, const std::string& mode, int64_t I, int64_t H, int64_t num_layers,
             bool bidirectional, const std::string& dtype, int64_t max_time, int64_t max_batch,
             std::optional<double> forget_bias, std::optional<double> cell_clip, bool use_peephole,
             bool caller_reserve) {
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
                            .caller_reserve = caller_reserve});
          },
          nb::arg("mode"), nb::arg("input_size"), nb::arg("hidden_size"), nb::arg("num_layers"),
          nb::arg("bidirectional"), nb::arg("dtype"), nb::arg("max_time"), nb::arg("max_batch"),
          nb::arg("forget_bias") = nb::none(), nb::arg("cell_clip") = nb::none(),
          nb::arg("use_peephole") = false, nb::arg("caller_reserve") = false)
      .def_prop_ro("params_per_layer", &RNN::params_per_layer)
      .def_prop_ro("num_directions", &RNN::num_directions)
      .def("reserve_elems", &RNN::reserve_elems, nb::arg("T"), nb::arg("B"))
      .def(
          "set_weights",
          [](RNN& r, int64_t layer, int64_t direction, std::vector<In> params) {
            std::vector<blockrnn::TensorView> v;
            for (const In& p : params) v.push_back(view(p));
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
             OptIn c_n_grad, Out x_grad, Out h0_grad, std::optional<Out> c0_grad,
             std::vector<Out> param_grads, OptIn reserve) {
            const blockrnn::RNNInputs in{.x = view(x),
                                         .h0 = view(h0),
                                         .c0 = view(c0),
                                         .seq_lengths = view(lengths),
                                         .dropout_mask = view(mask)};
            const blockrnn::RNNGradInputs g{view(y_grad), view(h_n_grad), view(c_n_grad)};
            std::vector<blockrnn::MutableTensorView> pv;
            for (const Out& p : param_grads) pv.push_back(mview(p));
            const blockrnn::RNNGradOutputs o{
                mview(x_grad), mview(h0_grad),
                c0_grad ? mview(*c0_grad) : blockrnn::MutableTensorView(), pv};
            const blockrnn::TensorView res = view(reserve);
            compute([&] { r.backward(in, g, o, res); });
          },
          nb::arg("x"), nb::arg("h0").none(), nb::arg("c0").none(), nb::arg("seq_lengths").none(),
          nb::arg("dropout_mask").none(), nb::arg("y_grad"), nb::arg("h_n_grad").none(),
          nb::arg("c_n_grad").none(), nb::arg("x_grad"), nb::arg("h0_grad"),
          nb::arg("c0_grad").none(), nb::arg("param_grads"), nb::arg("reserve").none() = nb::none(),
          "Fills x_grad, h0_grad, c0_grad and param_grads (set_weights' order, layer-major).");
}
