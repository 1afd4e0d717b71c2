// LSTMBlockCell, LSTMBlockCellGrad and gradients.LSTMBlockCell: validation (SPEC §5.3, §6.3,
// A3), registration, and the typed C++ entry points of blockrnn/lstm.h.
//
// Shape letters: B batch, I input size, H cell size (H is taken from cs_prev, as TensorFlow
// does). Validation order: the ranks of every input, then dimensions (B = 0 or H = 0 is
// rejected: "cs_prev is empty"), then dtypes. Stricter than TensorFlow at revision 14f3ab74, as
// newer TensorFlow is: peephole vectors must be [H] even without peepholes, b exactly [4H], and
// every gate tensor of the grads [B, H].
//
// Attrs are converted to the op's dtype before use, as TensorFlow's kernel does (so a float16
// op uses half(forget_bias) and half(cell_clip), and the arithmetic then runs in float32).
#include <array>
#include <limits>
#include <string>

#include "blockrnn/context.h"
#include "blockrnn/lstm.h"
#include "blockrnn/ops.h"
#include "core/op_impl.h"
#include "ops/lstm_attrs.h"
#include "ops/typed_defaults.h"
#include "kernel/lstm_cell.h"

namespace blockrnn {
namespace {

using core::Checker;

constexpr std::array<const char*, 8> kFwdNames = {"x",   "cs_prev", "h_prev", "w",
                                                  "wci", "wcf",     "wco",    "b"};
constexpr std::array<const char*, 16> kGradNames = {
    "x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco",     "b",
    "i", "cs",      "f",      "o", "ci",  "co",  "cs_grad", "h_grad"};
constexpr int kNumFwdInputs = 8;
constexpr int kNumGradInputs = 16;

// Checks x, cs_prev, h_prev, w, wci, wcf, wco, b (inputs 0..7): ranks, then dims. Returns B, I,
// H. The caller checks the ranks of any further inputs before calling this.
LSTMDims check_lstm_weights(const Checker& check, std::span<const TensorView> in) {
  const TensorView &x = in[0], &cs_prev = in[1], &h_prev = in[2], &w = in[3], &wci = in[4],
                   &wcf = in[5], &wco = in[6], &b = in[7];
  check.rank("x", x, 2);
  check.rank("cs_prev", cs_prev, 2);
  check.rank("h_prev", h_prev, 2);
  check.rank("w", w, 2);
  check.rank("wci", wci, 1);
  check.rank("wcf", wcf, 1);
  check.rank("wco", wco, 1);
  check.rank("b", b, 1);
  const std::int64_t B = x.shape[0], I = x.shape[1], H = cs_prev.shape[1];
  const std::int64_t K = core::checked_add(check.op(), "input_size + cell_size (rows of w)", I, H);
  const std::int64_t G = core::checked_mul(check.op(), "4 * cell_size (columns of w)", 4, H);
  check.shape("cs_prev", cs_prev, {B, H}, "batch_size, cell_size");
  if (B == 0 || H == 0) {
    check.fail("cs_prev is empty, got shape " + cs_prev.shape.to_string() +
               " (batch_size and cell_size must be positive)");
  }
  check.shape("h_prev", h_prev, {B, H}, "batch_size, cell_size");
  check.input_weight("w", w, {K, G}, "input_size + cell_size, 4 * cell_size", x, H);
  check.shape("wci", wci, {H}, "cell_size");
  check.shape("wcf", wcf, {H}, "cell_size");
  check.shape("wco", wco, {H}, "cell_size");
  check.shape("b", b, {G}, "4 * cell_size");
  return {B, I, H};
}

OutputSpec infer_fwd(std::span<const TensorView> in, const core::Attrs&) {
  const Checker check("LSTMBlockCell");
  const LSTMDims d = check_lstm_weights(check, in);
  const DType dtype = check.same_float_dtype(kFwdNames, in);
  const Shape bh{d.B, d.H};
  return {dtype, {bh, bh, bh, bh, bh, bh, bh}};
}

// The grads' 16 inputs: the forward inputs, then i, cs, f, o, ci, co, cs_grad, h_grad.
LSTMDims check_grad(const char* op, std::span<const TensorView> in, DType* dtype) {
  const Checker check(op);
  for (int k = kNumFwdInputs; k < kNumGradInputs; ++k) check.rank(kGradNames[k], in[k], 2);
  const LSTMDims d = check_lstm_weights(check, in);
  const Shape bh{d.B, d.H};
  for (int k = kNumFwdInputs; k < kNumGradInputs; ++k) {
    check.shape(kGradNames[k], in[k], bh, "batch_size, cell_size");
  }
  *dtype = check.same_float_dtype(kGradNames, in);
  return d;
}

OutputSpec infer_grad(std::span<const TensorView> in, const core::Attrs&) {
  DType dtype;
  const LSTMDims d = check_grad("LSTMBlockCellGrad", in, &dtype);
  return {dtype, {Shape{d.B, d.H}, Shape{d.B, 4 * d.H}, Shape{d.H}, Shape{d.H}, Shape{d.H}}};
}

OutputSpec infer_backward(std::span<const TensorView> in, const core::Attrs&) {
  DType dtype;
  const LSTMDims d = check_grad("gradients.LSTMBlockCell", in, &dtype);
  const Shape bh{d.B, d.H}, h{d.H};
  return {dtype, {Shape{d.B, d.I}, bh, bh, Shape{d.I + d.H, 4 * d.H}, h, h, h, Shape{4 * d.H}}};
}

LSTMDims dims_of(std::span<const TensorView> in) {
  return {in[0].shape[0], in[0].shape[1], in[1].shape[1]};
}

using ops::attr_in_dtype;
using ops::clip_in_dtype;

void compute_fwd(std::span<const TensorView> in, const core::Attrs& attrs,
                 std::span<const MutableTensorView> out) {
  const LSTMDims d = dims_of(in);
  const DType dtype = in[0].dtype;
  core::dispatch_float(dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    LSTMCellFwdArgs<T> a{b.in[0],  b.in[1],  b.in[2],  b.in[3],  b.in[4],
                         b.in[5],  b.in[6],  b.in[7],  b.out[0], b.out[1],
                         b.out[2], b.out[3], b.out[4], b.out[5], b.out[6]};
    a.forget_bias = attr_in_dtype<T>(attrs[0], dtype);
    a.cell_clip = clip_in_dtype<T>(attrs[1], dtype);
    a.use_peephole = attrs[2] != 0.0;
    if (force_reference()) {
      ref::lstm_cell_fwd<T>(d, a);
    } else {
      cpu::lstm_cell_fwd<T>(d, a);
    }
  });
}

template <typename T>
LSTMCellBwdArgs<T> bwd_args(const core::Buffers<T>& b, bool use_peephole) {
  LSTMCellBwdArgs<T> a{};
  a.x = b.in[0];
  a.cs_prev = b.in[1];
  a.h_prev = b.in[2];
  a.w = b.in[3];
  a.wci = b.in[4];
  a.wcf = b.in[5];
  a.wco = b.in[6];
  a.i = b.in[8];
  a.cs = b.in[9];
  a.f = b.in[10];
  a.o = b.in[11];
  a.ci = b.in[12];
  a.co = b.in[13];
  a.cs_grad = b.in[14];
  a.h_grad = b.in[15];
  a.use_peephole = use_peephole;
  a.layout = LSTMLayout::kICFO;
  return a;
}

template <typename T>
void run_bwd(const LSTMDims& d, const LSTMCellBwdArgs<T>& a) {
  if (force_reference()) {
    ref::lstm_cell_bwd<T>(d, a);
  } else {
    cpu::lstm_cell_bwd<T>(d, a);
  }
}

// LSTMBlockCellGrad: attrs {use_peephole}; outputs cs_prev_grad, dicfo, wci_grad, wcf_grad,
// wco_grad.
void compute_grad(std::span<const TensorView> in, const core::Attrs& attrs,
                  std::span<const MutableTensorView> out) {
  const LSTMDims d = dims_of(in);
  core::dispatch_float(in[0].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    LSTMCellBwdArgs<T> a = bwd_args(b, attrs[0] != 0.0);
    a.cs_prev_grad = b.out[0];
    a.dgates = b.out[1];
    a.wci_grad = b.out[2];
    a.wcf_grad = b.out[3];
    a.wco_grad = b.out[4];
    run_bwd<T>(d, a);
  });
}

// gradients.LSTMBlockCell: attrs {forget_bias, cell_clip, use_peephole} (only use_peephole
// matters); outputs one gradient per forward input. dicfo is scratch.
void compute_backward(std::span<const TensorView> in, const core::Attrs& attrs,
                      std::span<const MutableTensorView> out) {
  const LSTMDims d = dims_of(in);
  core::dispatch_float(in[0].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    std::vector<T> dgates(d.B * 4 * d.H);
    LSTMCellBwdArgs<T> a = bwd_args(b, attrs[2] != 0.0);
    a.x_grad = b.out[0];
    a.cs_prev_grad = b.out[1];
    a.h_prev_grad = b.out[2];
    a.w_grad = b.out[3];
    a.wci_grad = b.out[4];
    a.wcf_grad = b.out[5];
    a.wco_grad = b.out[6];
    a.b_grad = b.out[7];
    a.dgates = dgates.data();
    a.full = true;
    run_bwd<T>(d, a);
  });
}

std::vector<std::string> names_of(std::span<const char* const> names) {
  return {names.begin(), names.end()};
}

}  // namespace

namespace core {
void register_lstm_ops() {
  const AttrDef forget_bias{"forget_bias", AttrKind::kFloat, true, 1.0};
  const AttrDef cell_clip{"cell_clip", AttrKind::kFloat, true, 3.0};
  const AttrDef use_peephole{"use_peephole", AttrKind::kBool, true, 0.0};
  const AttrDef use_peephole_required{"use_peephole", AttrKind::kBool, false, 0.0};
  const std::vector<std::string> fwd_inputs = names_of(kFwdNames);
  const std::vector<std::string> grad_inputs = names_of(kGradNames);
  register_op({{"LSTMBlockCell",
                fwd_inputs,
                {forget_bias, cell_clip, use_peephole},
                {"i", "cs", "f", "o", "ci", "co", "h"}},
               infer_fwd,
               compute_fwd});
  register_op({{"LSTMBlockCellGrad",
                grad_inputs,
                {use_peephole_required},
                {"cs_prev_grad", "dicfo", "wci_grad", "wcf_grad", "wco_grad"}},
               infer_grad,
               compute_grad});
  // The forward op's attrs, with its defaults (SPEC A5), so that the keywords of a forward call
  // can be passed through unchanged; forget_bias and cell_clip do not affect the gradients.
  register_op(
      {{"gradients.LSTMBlockCell", grad_inputs, {forget_bias, cell_clip, use_peephole}, fwd_inputs},
       infer_backward,
       compute_backward});
}
}  // namespace core

namespace {

// t.dim(i) when t has the given rank, else -1 (unknown: validation reports t).
std::int64_t dim_or(const TensorView& t, int rank, int i) {
  return t.shape.rank() == rank ? t.shape[i] : -1;
}

// The inputs of a typed call in the op's order, with the peephole vectors filled in when they
// are omitted without use_peephole (ops/typed_defaults.h; I from x, H from cs_prev). Holds the
// storage the views point to, so it must outlive the call.
class TypedInputs {
 public:
  TypedInputs(const char* op, const LSTMBlockCellInputs& in, bool use_peephole)
      : views_{in.x, in.cs_prev, in.h_prev, in.w, in.wci, in.wcf, in.wco, in.b},
        peepholes_(op, use_peephole, dim_or(in.x, 2, 1), dim_or(in.cs_prev, 2, 1), in.w, in.x.dtype,
                   &views_[4], &views_[5], &views_[6]) {}
  TypedInputs(const char* op, const LSTMBlockCellGradInputs& in, bool use_peephole)
      : views_{in.x, in.cs_prev, in.h_prev, in.w, in.wci, in.wcf, in.wco,     in.b,
               in.i, in.cs,      in.f,      in.o, in.ci,  in.co,  in.cs_grad, in.h_grad},
        peepholes_(op, use_peephole, dim_or(in.x, 2, 1), dim_or(in.cs_prev, 2, 1), in.w, in.x.dtype,
                   &views_[4], &views_[5], &views_[6]) {}
  TypedInputs(const TypedInputs&) = delete;
  TypedInputs& operator=(const TypedInputs&) = delete;

  std::span<const TensorView> views() const { return views_; }

 private:
  std::vector<TensorView> views_;
  ops::PeepholeDefaults peepholes_;
};

AttrMap attr_map(const LSTMBlockCellAttrs& a) {
  return {{"forget_bias", a.forget_bias},
          {"cell_clip", a.cell_clip},
          {"use_peephole", a.use_peephole ? 1.0 : 0.0}};
}

}  // namespace

void lstm_block_cell(const LSTMBlockCellInputs& in, const LSTMBlockCellOutputs& out,
                     const LSTMBlockCellAttrs& attrs) {
  const TypedInputs ins("LSTMBlockCell", in, attrs.use_peephole);
  const MutableTensorView outs[] = {out.i, out.cs, out.f, out.o, out.ci, out.co, out.h};
  run_op("LSTMBlockCell", ins.views(), attr_map(attrs), outs);
}

LSTMBlockCellResult lstm_block_cell(const LSTMBlockCellInputs& in,
                                    const LSTMBlockCellAttrs& attrs) {
  const TypedInputs ins("LSTMBlockCell", in, attrs.use_peephole);
  std::vector<Tensor> t = run_op("LSTMBlockCell", ins.views(), attr_map(attrs));
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3]),
          std::move(t[4]), std::move(t[5]), std::move(t[6])};
}

void lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, const LSTMBlockCellGradOutputs& out,
                          bool use_peephole) {
  const TypedInputs ins("LSTMBlockCellGrad", in, use_peephole);
  const MutableTensorView outs[] = {out.cs_prev_grad, out.dicfo, out.wci_grad, out.wcf_grad,
                                    out.wco_grad};
  run_op("LSTMBlockCellGrad", ins.views(), {{"use_peephole", use_peephole ? 1.0 : 0.0}}, outs);
}

LSTMBlockCellGradResult lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, bool use_peephole) {
  const TypedInputs ins("LSTMBlockCellGrad", in, use_peephole);
  std::vector<Tensor> t =
      run_op("LSTMBlockCellGrad", ins.views(), {{"use_peephole", use_peephole ? 1.0 : 0.0}});
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3]), std::move(t[4])};
}

void lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                              const LSTMBlockCellBackwardOutputs& out,
                              const LSTMBlockCellAttrs& attrs) {
  const TypedInputs ins("gradients.LSTMBlockCell", in, attrs.use_peephole);
  const MutableTensorView outs[] = {out.x,   out.cs_prev, out.h_prev, out.w,
                                    out.wci, out.wcf,     out.wco,    out.b};
  run_op("gradients.LSTMBlockCell", ins.views(), attr_map(attrs), outs);
}

LSTMBlockCellBackwardResult lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                                                     const LSTMBlockCellAttrs& attrs) {
  const TypedInputs ins("gradients.LSTMBlockCell", in, attrs.use_peephole);
  std::vector<Tensor> t = run_op("gradients.LSTMBlockCell", ins.views(), attr_map(attrs));
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3]),
          std::move(t[4]), std::move(t[5]), std::move(t[6]), std::move(t[7])};
}

}  // namespace blockrnn
