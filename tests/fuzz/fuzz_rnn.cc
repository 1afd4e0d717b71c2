// libFuzzer target: blockrnn::RNN (blockrnn/layer.h), the stack of layer objects under the C ABI's
// and Java's RNN handles and blockrnn.torch: creation from arbitrary options (every mode, sizes
// up to INT64_MAX, num_layers huge, float16/int64 dtypes, NaN/inf/huge attrs), set_weights with
// wrong shapes or dtypes, forward and backward with wrong or overlapping views, lengths out of
// range, dropout masks, caller reserves, under a memory limit, on the fast and the reference
// path. Every call must succeed or throw blockrnn::Error — never a crash, a leak, a sanitizer
// report, a hang or another exception type (the binary is built with ASan + UBSan;
// scripts/test.sh runs it with -timeout=10). Properties checked besides: a backward whose x has
// one step fewer than its forward is refused (but for empty work); an output placed on x is
// refused.
//
// Input layout (missing bytes read as 0):
//   u8 mode (mod 4: LSTM, LSTMV2, GRU, GRUResetAfter); bit2 param_layout kTorch (torch.nn's
//             tensors; refused but for LSTMV2 and GRUResetAfter), bit3 then the biases absent
//   u8 flags: bit0 bidirectional; bit1 caller reserve; bit2 float64 (else float32); bit3
//             float16 (computed in float32) or int64 (refused), bit2 picks; bit4 use_peephole; bit5
//             sizes from kSizes (huge ones); bit6 reference mode; bit7 the backward's x has T − 1
//             steps
//   u8 I, u8 H, u8 num_layers, u8 max_time, u8 max_batch   (each mod 6, or kSizes[v % 8])
//   u8 T, u8 B (the call's, mod 6)
//   u8 forget_bias selector, u8 cell_clip selector: 0 unset, else kAttr[(s - 1) % 8]
//   u8 mutation: 0-159 none; else view ((m - 160) % 12) of the list in mutate() is changed
//             by kind ((m - 160) / 12 % 4): a wrong dimension, a wrong dtype, absent, or placed
//             on x's memory
//   u8 seq_lengths: 0 absent; else example b gets (s + 5·b) % (T + 2) steps (T + 1 is refused)
//   u8 dropout: bit0 a mask given (its values from the bytes)
//   u8 memory limit: 0 the default, else 1 KiB << ((m - 1) % 25)
//   the rest: element values (f32 bit patterns, cycled over the whole input)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "blockrnn/layer.h"
#include "fuzz_bytes.h"

namespace {

using blockrnn::DType;
using blockrnn::MutableTensorView;
using blockrnn::Shape;
using blockrnn::Tensor;
using blockrnn::TensorView;
using blockrnn::fuzz::Bytes;

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
// Flags bit5: sizes beside zero and one that no call can back (options are only validated).
constexpr std::int64_t kSizes[8] = {
    0, 1, 3, 4096, std::int64_t{1} << 31, std::int64_t{1} << 40, kI64Max, 1000000000};
constexpr double kAttr[8] = {0.0,
                             1.0,
                             3.0,
                             -1.0,
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             3.4028234663852886e38,
                             1e300};
// Elements we allocate per tensor at most: a configuration needing more is only validated.
constexpr std::int64_t kMaxBacked = 1 << 15;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_rnn: %s\n", what);
  std::abort();
}

// The reference mode and the memory limit of one run, restored when it ends.
struct RunSettings {
  RunSettings(bool reference, int memory) {
    blockrnn::set_force_reference(reference);
    if (memory > 0) blockrnn::set_memory_limit(1024ll << ((memory - 1) % 25));
  }
  ~RunSettings() {
    blockrnn::set_force_reference(false);
    blockrnn::set_memory_limit(0);
  }
};

// The tensors of one call: each allocated once, filled from the input's bytes.
class Arena {
 public:
  explicit Arena(Bytes& bytes) : bytes_(bytes) {}
  // make() keeps pointers valid only up to this many tensors.
  void reserve(std::size_t n) { tensors_.reserve(n); }
  // A tensor of `shape` in `dt`, or nullptr when it is too large to back.
  Tensor* make(DType dt, const Shape& shape) {
    if (shape.num_elements() > kMaxBacked) return nullptr;
    Tensor& t = tensors_.emplace_back(dt, shape);
    for (std::int64_t e = 0; e < t.num_elements(); ++e) {
      const float v = bytes_.value();
      if (dt == DType::kFloat64) t.data_as<double>()[e] = v;
      if (dt == DType::kFloat32) t.data_as<float>()[e] = v;
    }
    return &t;
  }

 private:
  Bytes& bytes_;
  std::vector<Tensor> tensors_;
};

// The parameters of a layer with input size Il, in set_weights' order (blockrnn/layer.h).
std::vector<Shape> param_shapes(const blockrnn::RNNOptions& o, std::int64_t Il, std::int64_t H) {
  if (o.param_layout == blockrnn::ParamLayout::kTorch) {  // weight_ih, weight_hh, biases, peepholes
    const std::int64_t G = (o.mode == blockrnn::RNNMode::kLSTMV2 ? 4 : 3) * H;
    if (o.mode != blockrnn::RNNMode::kLSTMV2)
      return {Shape{G, Il}, Shape{G, H}, Shape{G}, Shape{G}};
    return {Shape{G, Il}, Shape{G, H}, Shape{G}, Shape{G}, Shape{H}, Shape{H}, Shape{H}};
  }
  switch (o.mode) {
    case blockrnn::RNNMode::kLSTM:
    case blockrnn::RNNMode::kLSTMV2:
      return {Shape{Il + H, 4 * H}, Shape{4 * H}, Shape{H}, Shape{H}, Shape{H}};
    case blockrnn::RNNMode::kGRU:
      return {Shape{Il + H, 2 * H}, Shape{Il + H, H}, Shape{2 * H}, Shape{H}};
    case blockrnn::RNNMode::kGRUResetAfter:
      break;
  }
  return {Shape{Il, 3 * H}, Shape{H, 3 * H}, Shape{3 * H}, Shape{3 * H}};
}

// Changes view v by `kind`: 0 its first dimension + 1, 1 another dtype, 2 absent, 3 onto x's
// memory when it fits there (an output there must be refused).
template <class View>
void mutate(View& v, int kind, const TensorView& x) {
  const auto bytes = [](const auto& t) {
    return t.shape.num_elements() * std::int64_t(blockrnn::dtype_size(t.dtype));
  };
  if (kind == 0 && v.shape.rank() > 0) {
    std::int64_t dims[Shape::kMaxRank];
    std::copy(v.shape.dims(), v.shape.dims() + v.shape.rank(), dims);
    dims[0] += 1;
    v.shape = Shape::from_dims(dims, v.shape.rank());
  } else if (kind == 1) {
    v.dtype = v.dtype == DType::kFloat32 ? DType::kFloat64 : DType::kFloat32;
  } else if (kind == 2) {
    v = View{};
  } else if (kind == 3 && v.data != nullptr && x.data != nullptr && bytes(v) <= bytes(x)) {
    v.data = const_cast<void*>(x.data);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  blockrnn::RNNOptions o;
  const std::uint8_t mode = in.u8();
  o.mode = static_cast<blockrnn::RNNMode>(mode % 4);
  if (mode & 4) o.param_layout = blockrnn::ParamLayout::kTorch;
  const bool torch = mode & 4, no_biases = torch && (mode & 8);
  const std::uint8_t flags = in.u8();
  o.bidirectional = flags & 1;
  o.caller_reserve = flags & 2;
  o.dtype = (flags & 4) ? DType::kFloat64 : DType::kFloat32;
  if (flags & 8) o.dtype = (flags & 4) ? DType::kInt64 : DType::kFloat16;
  o.lstm.use_peephole = flags & 16;
  const bool huge = flags & 32, shorter_backward = flags & 128;
  auto size_of = [&](std::uint8_t v) { return huge ? kSizes[v % 8] : std::int64_t(v % 6); };
  o.input_size = size_of(in.u8());
  o.hidden_size = size_of(in.u8());
  o.num_layers = size_of(in.u8());
  o.max_time = size_of(in.u8());
  o.max_batch = size_of(in.u8());
  const std::int64_t T = in.u8() % 6, B = in.u8() % 6;
  if (const std::uint8_t s = in.u8()) o.lstm.forget_bias = kAttr[(s - 1) % 8];
  if (const std::uint8_t s = in.u8()) o.lstm.cell_clip = kAttr[(s - 1) % 8];
  const std::uint8_t mutation = in.u8(), lengths_seed = in.u8(), dropout = in.u8();
  const RunSettings settings(flags & 64, in.u8());

  std::optional<blockrnn::RNN> rnn;
  try {
    rnn.emplace(o);
  } catch (const blockrnn::Error&) {
    return 0;
  }
  const std::int64_t I = o.input_size, H = o.hidden_size, L = o.num_layers;
  const std::int64_t D = rnn->num_directions(), P = rnn->params_per_layer();
  const bool lstm = o.mode == blockrnn::RNNMode::kLSTM || o.mode == blockrnn::RNNMode::kLSTMV2;
  // Only configurations whose every tensor can be backed run further.
  if (L * D > 64 || (I + D * H + H) * 4 * H > kMaxBacked ||
      T * B * std::max(I, D * H) > kMaxBacked) {
    return 0;
  }
  Arena arena(in);
  arena.reserve(std::size_t(2 * L * D * P + 32));  // weights, their gradients, the rest

  // Weights of every (layer, direction), in set_weights' order.
  for (std::int64_t l = 0; l < L; ++l) {
    const std::vector<Shape> shapes = param_shapes(o, l == 0 ? I : D * H, H);
    for (std::int64_t d = 0; d < D; ++d) {
      std::vector<TensorView> params;
      for (const Shape& s : shapes) {
        const Tensor* t = arena.make(o.dtype, s);
        if (t == nullptr) return 0;
        params.push_back(t->view());
      }
      if (lstm && !o.lstm.use_peephole) params.resize(torch ? 4 : 2);
      if (no_biases) params[2] = params[3] = TensorView{};  // torch.nn's bias=False
      try {
        rnn->set_weights(l, d, params);
      } catch (const blockrnn::Error&) {
        return 0;
      }
    }
  }

  // The forward's views; then one of them mutated.
  Tensor* x = arena.make(o.dtype, Shape{T, B, I});
  Tensor* h0 = arena.make(o.dtype, Shape{L * D, B, H});
  Tensor* c0 = arena.make(o.dtype, Shape{L * D, B, H});
  Tensor* lengths = arena.make(DType::kInt64, Shape{B});
  for (std::int64_t b = 0; b < B; ++b) {
    lengths->data_as<std::int64_t>()[b] = (lengths_seed + 5 * b) % (T + 2);
  }
  Tensor* mask = arena.make(o.dtype, Shape{std::max<std::int64_t>(L - 1, 0), T, B, D * H});
  Tensor* y = arena.make(o.dtype, Shape{T, B, D * H});
  Tensor* h_n = arena.make(o.dtype, Shape{L * D, B, H});
  Tensor* c_n = arena.make(o.dtype, Shape{L * D, B, H});
  if (!x || !h0 || !c0 || !lengths || !mask || !y || !h_n || !c_n) return 0;
  blockrnn::RNNInputs fin{x->view(), h0->view(), lstm ? c0->view() : TensorView{},
                          lengths_seed ? lengths->view() : TensorView{},
                          (dropout & 1) ? mask->view() : TensorView{}};
  blockrnn::RNNOutputs fout{y->mutable_view(), h_n->mutable_view(),
                            lstm ? c_n->mutable_view() : MutableTensorView{}};
  Tensor* reserve = nullptr;
  if (o.caller_reserve) {
    std::int64_t n = 0;
    try {
      n = rnn->reserve_elems(T, B);
    } catch (const blockrnn::Error&) {
      return 0;
    }
    reserve = arena.make(o.dtype, Shape{n});
    if (!reserve) return 0;
  }

  // Mutation targets: the forward's views, then the backward's (see below).
  const int target = mutation >= 160 ? (mutation - 160) % 12 : -1;
  const int kind = (mutation - 160) / 12 % 4;
  // c0, c_n and c0_grad (targets 1, 6, 11) are ignored by the GRU modes (blockrnn/layer.h).
  const bool ignored = !lstm && (target == 1 || target == 6 || target == 11);
  const bool output_on_x = target >= 0 && kind == 3 && !ignored;
  const TensorView xv = x->view();
  switch (target) {
    case 0:
      mutate(fin.h0, kind, xv);
      break;
    case 1:
      mutate(fin.c0, kind, xv);
      break;
    case 2:
      mutate(fin.seq_lengths, kind, xv);
      break;
    case 3:
      mutate(fin.dropout_mask, kind, xv);
      break;
    case 4:
      mutate(fout.y, kind, xv);
      break;
    case 5:
      mutate(fout.h_n, kind, xv);
      break;
    case 6:
      mutate(fout.c_n, kind, xv);
      break;
    default:
      break;
  }
  const bool forward_output_on_x = output_on_x && target >= 4 && target <= 6 && T * B * I > 0;
  const MutableTensorView reserve_view = reserve ? reserve->mutable_view() : MutableTensorView{};
  try {
    rnn->forward(fin, fout, reserve_view);
  } catch (const blockrnn::Error&) {
    return 0;
  }
  // An output on x of the same bytes overlaps it whenever both have elements.
  if (forward_output_on_x) {
    const MutableTensorView& v = target == 4 ? fout.y : target == 5 ? fout.h_n : fout.c_n;
    if (v.data == x->data() && v.shape.num_elements() > 0) fail("an output on x was accepted");
  }

  // The backward: gradients of y and the final states, the gradients of everything.
  Tensor* y_grad = arena.make(o.dtype, Shape{T, B, D * H});
  Tensor* h_n_grad = arena.make(o.dtype, Shape{L * D, B, H});
  Tensor* c_n_grad = arena.make(o.dtype, Shape{L * D, B, H});
  Tensor* x_grad = arena.make(o.dtype, Shape{T, B, I});
  Tensor* h0_grad = arena.make(o.dtype, Shape{L * D, B, H});
  Tensor* c0_grad = arena.make(o.dtype, Shape{L * D, B, H});
  if (!y_grad || !h_n_grad || !c_n_grad || !x_grad || !h0_grad || !c0_grad) return 0;
  std::vector<MutableTensorView> param_grads;
  // Parameter gradients with the weights' shapes (set_weights' order, layer-major).
  for (std::int64_t l = 0; l < L; ++l) {
    const std::vector<Shape> shapes = param_shapes(o, l == 0 ? I : D * H, H);
    for (std::int64_t d = 0; d < D; ++d) {
      for (const Shape& s : shapes) {
        Tensor* t = arena.make(o.dtype, s);
        if (t == nullptr) return 0;
        param_grads.push_back(t->mutable_view());
      }
    }
  }
  blockrnn::RNNGradInputs gin{y_grad->view(), h_n_grad->view(),
                              lstm ? c_n_grad->view() : TensorView{}};
  blockrnn::RNNGradOutputs gout{x_grad->mutable_view(), h0_grad->mutable_view(),
                                lstm ? c0_grad->mutable_view() : MutableTensorView{}, param_grads};
  switch (target) {
    case 7:
      mutate(gin.y_grad, kind, xv);
      break;
    case 8:
      mutate(gin.h_n_grad, kind, xv);
      break;
    case 9:
      mutate(gout.x_grad, kind, xv);
      break;
    case 10:
      mutate(gout.h0_grad, kind, xv);
      break;
    case 11:
      mutate(gout.c0_grad, kind, xv);
      break;
    default:
      break;
  }
  // The backward repeats the forward's inputs; with bit7 its x has one step fewer, which the
  // reserve cannot match (the forward kept T steps) and must be refused.
  blockrnn::RNNInputs bin = fin;
  const bool shorter = shorter_backward && T > 0;
  if (shorter) {
    bin.x.shape = Shape{T - 1, B, I};
    gin.y_grad.shape = Shape{T - 1, B, D * H};
    gout.x_grad.shape = Shape{T - 1, B, I};
  }
  try {
    rnn->backward(bin, gin, gout, reserve ? reserve->view() : TensorView{});
  } catch (const blockrnn::Error&) {
    return 0;
  }
  // A caller's reserve is checked by its size, reserve_elems(T, B), which is 0 for any T when
  // B = 0: that backward is empty work, correct for any T.
  if (shorter && (B > 0 || !o.caller_reserve)) {
    fail("a backward with another T than its forward was accepted");
  }
  const bool backward_output_on_x = output_on_x && target >= 9 && T * B * I > 0;
  if (backward_output_on_x) {
    const MutableTensorView& v = target == 9    ? gout.x_grad
                                 : target == 10 ? gout.h0_grad
                                                : gout.c0_grad;
    if (v.data == x->data() && v.shape.num_elements() > 0) fail("a gradient on x was accepted");
  }
  return 0;
}
