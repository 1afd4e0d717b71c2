// BlockLSTM, BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2 (SPEC §7–§8): validation (§7.3,
// §8.3 plus the checks TensorFlow misses, A3), registration, and the typed C++ entry points of
// blockrnn/sequence.h. V1 uses the ICFO gate layout, V2 IFCO (SPEC §1.3).
//
// Shape letters: T time, B batch, I input, H cell, S = seq_len_max. H comes from cs_prev in the
// forward ops and from w (w.dim(1) / 4, which must be a positive integer) in the grads, as in
// TensorFlow. Validation order: ranks of every input (seq_len_max a scalar), then dimensions,
// then dtypes (seq_len_max int64, every other input one floating dtype), then
// 0 ≤ seq_len_max ≤ T. The grads check what TensorFlow does not (SPEC §8.3): cs_prev and h_prev
// are [B, H], the peephole vectors [H], b exactly [4H], and every per-step tensor [T, B, H].
#include <array>
#include <limits>
#include <string>

#include "blockrnn/context.h"
#include "blockrnn/ops.h"
#include "blockrnn/sequence.h"
#include "core/op_impl.h"
#include "ops/lstm_attrs.h"
#include "ops/typed_defaults.h"
#include "kernel/block_lstm.h"

namespace blockrnn {
namespace {

using core::Checker;

constexpr std::array<const char*, 18> kNames = {
    "seq_len_max", "x",  "cs_prev", "h_prev", "w",  "wci", "wcf", "wco",     "b",
    "i",           "cs", "f",       "o",      "ci", "co",  "h",   "cs_grad", "h_grad"};
constexpr int kFwdInputs = 9;
constexpr int kGradInputs = 18;

constexpr const char* kBH = "batch_size, cell_size";

// Validates the inputs of the forward ops (grad = false) or the grads. Returns the dims.
BlockLSTMDims check_block_lstm(const char* op, std::span<const TensorView> in, bool grad,
                               DType* dtype) {
  const Checker check(op);
  const int n = grad ? kGradInputs : kFwdInputs;
  const core::SeqLengthsCheck lengths{check, in[n]};
  check.scalar("seq_len_max", in[0]);
  check.rank("x", in[1], 3);
  check.rank("cs_prev", in[2], 2);
  check.rank("h_prev", in[3], 2);
  check.rank("w", in[4], 2);
  for (int k = 5; k < 9; ++k) check.rank(kNames[k], in[k], 1);
  for (int k = kFwdInputs; k < n; ++k) check.rank(kNames[k], in[k], 3);
  lengths.rank();
  const TensorView &x = in[1], &w = in[4];
  const std::int64_t T = x.shape[0], B = x.shape[1], I = x.shape[2];
  std::int64_t H;
  if (grad) {
    if (w.shape[1] <= 0 || w.shape[1] % 4 != 0) {
      check.fail("w must have a positive multiple of 4 columns (4 * cell_size), got shape " +
                 w.shape.to_string());
    }
    H = w.shape[1] / 4;
  } else {
    H = in[2].shape[1];
  }
  const std::int64_t K = core::checked_add(op, "input_size + cell_size (rows of w)", I, H);
  const std::int64_t G = core::checked_mul(op, "4 * cell_size (columns of w)", 4, H);
  check.shape("cs_prev", in[2], {B, H}, kBH);
  check.shape("h_prev", in[3], {B, H}, kBH);
  check.input_weight("w", w, {K, G}, "input_size + cell_size, 4 * cell_size", x, H);
  for (int k = 5; k < 8; ++k) check.shape(kNames[k], in[k], {H}, "cell_size");
  check.shape("b", in[8], {G}, "4 * cell_size");
  for (int k = kFwdInputs; k < n; ++k) {
    check.shape(kNames[k], in[k], {T, B, H}, "time_len, batch_size, cell_size");
  }
  lengths.shape(B);
  check.int64("seq_len_max", in[0]);
  lengths.dtype();
  *dtype = check.same_float_dtype(std::span(kNames).subspan(1, n - 1), in.subspan(1, n - 1));
  const std::int64_t S = core::read_int64_scalar(in[0]);
  if (S < 0 || S > T) {
    check.fail("seq_len_max must be between 0 and " + std::to_string(T) + " (time_len of x), got " +
               std::to_string(S));
  }
  lengths.values(T);
  return {T, B, I, H, S};
}

OutputSpec infer_fwd(const char* op, std::span<const TensorView> in) {
  DType dtype;
  const BlockLSTMDims d = check_block_lstm(op, in, false, &dtype);
  const Shape tbh{d.T, d.B, d.H};
  return {dtype, {tbh, tbh, tbh, tbh, tbh, tbh, tbh}};
}

OutputSpec infer_grad(const char* op, std::span<const TensorView> in) {
  DType dtype;
  check_block_lstm(op, in, true, &dtype);
  // Each gradient has the shape of its input: x, cs_prev, h_prev, w, wci, wcf, wco, b.
  std::vector<Shape> shapes;
  for (int k = 1; k < 9; ++k) shapes.push_back(in[k].shape);
  return {dtype, shapes};
}

// in.back() is seq_lengths (the last input of every op here).
BlockLSTMDims dims_of(std::span<const TensorView> in) {
  const std::int64_t S = core::read_int64_scalar(in[0]);
  return {in[1].shape[0],
          in[1].shape[1],
          in[1].shape[2],
          in[3].shape[1],
          S,
          core::effective_lengths(in.back(), S)};
}

using ops::attr_in_dtype;
using ops::clip_in_dtype;

// attrs: forget_bias, cell_clip, use_peephole (V1) or cell_clip, use_peephole (V2, whose
// kernel uses forget_bias 0).
void compute_fwd(LSTMLayout layout, std::span<const TensorView> in, const core::Attrs& attrs,
                 std::span<const MutableTensorView> out) {
  const BlockLSTMDims d = dims_of(in);
  const DType dtype = in[1].dtype;
  const bool v1 = layout == LSTMLayout::kICFO;
  const double forget_bias = v1 ? attrs[0] : 0.0;
  const double cell_clip = attrs[v1 ? 1 : 0];
  const bool use_peephole = attrs[v1 ? 2 : 1] != 0.0;
  core::dispatch_float(in[1].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    BlockLSTMFwdArgs<T> a{b.in[1],  b.in[2],  b.in[3],  b.in[4],  b.in[5],
                          b.in[6],  b.in[7],  b.in[8],  b.out[0], b.out[1],
                          b.out[2], b.out[3], b.out[4], b.out[5], b.out[6]};
    a.forget_bias = attr_in_dtype<T>(forget_bias, dtype);
    a.cell_clip = clip_in_dtype<T>(cell_clip, dtype);
    a.use_peephole = use_peephole;
    a.layout = layout;
    if (force_reference()) {
      ref::block_lstm_fwd<T>(d, a);
    } else {
      cpu::block_lstm_fwd<T>(d, a);
    }
  });
}

void compute_grad(LSTMLayout layout, std::span<const TensorView> in, const core::Attrs& attrs,
                  std::span<const MutableTensorView> out) {
  const BlockLSTMDims d = dims_of(in);
  core::dispatch_float(in[1].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    BlockLSTMBwdArgs<T> a{b.in[1],  b.in[2],  b.in[3],  b.in[4],  b.in[5],  b.in[6],
                          b.in[7],  b.in[9],  b.in[10], b.in[11], b.in[12], b.in[13],
                          b.in[14], b.in[15], b.in[16], b.in[17], b.out[0], b.out[1],
                          b.out[2], b.out[3], b.out[4], b.out[5], b.out[6], b.out[7]};
    a.use_peephole = attrs[0] != 0.0;
    a.layout = layout;
    if (force_reference()) {
      ref::block_lstm_bwd<T>(d, a);
    } else {
      cpu::block_lstm_bwd<T>(d, a);
    }
  });
}

const std::vector<std::string> kOutputs = {"i", "cs", "f", "o", "ci", "co", "h"};
const std::vector<std::string> kGradOutputs = {"x_grad",   "cs_prev_grad", "h_prev_grad", "w_grad",
                                               "wci_grad", "wcf_grad",     "wco_grad",    "b_grad"};

// The inputs of a typed call in the op's order, with the typed API's defaults applied
// (ops/typed_defaults.h): seq_len_max unset means T, and without peepholes omitted peephole
// vectors are zeros. Holds the storage the views point to, so it must outlive the call.
class TypedInputs {
 public:
  TypedInputs(const char* op, const BlockLSTMInputs& in, bool use_peephole)
      : seq_len_max_(ops::seq_len_or_time(in.seq_len_max, in.x)),
        views_{TensorView(&seq_len_max_, Shape{}),
               in.x,
               in.cs_prev,
               in.h_prev,
               in.w,
               in.wci,
               in.wcf,
               in.wco,
               in.b,
               in.seq_lengths},
        // The forward ops take H from cs_prev.
        peepholes_(op, use_peephole, dim_or(in.x, 3, 2), dim_or(in.cs_prev, 2, 1), in.w, in.x.dtype,
                   &views_[5], &views_[6], &views_[7]) {}
  TypedInputs(const char* op, const BlockLSTMGradInputs& in, bool use_peephole)
      : seq_len_max_(ops::seq_len_or_time(in.seq_len_max, in.x)),
        views_{TensorView(&seq_len_max_, Shape{}),
               in.x,
               in.cs_prev,
               in.h_prev,
               in.w,
               in.wci,
               in.wcf,
               in.wco,
               in.b,
               in.i,
               in.cs,
               in.f,
               in.o,
               in.ci,
               in.co,
               in.h,
               in.cs_grad,
               in.h_grad,
               in.seq_lengths},
        // The grads take H from w.
        peepholes_(op, use_peephole, dim_or(in.x, 3, 2), cell_size_of_w(in.w), in.w, in.x.dtype,
                   &views_[5], &views_[6], &views_[7]) {}
  TypedInputs(const TypedInputs&) = delete;
  TypedInputs& operator=(const TypedInputs&) = delete;

  std::span<const TensorView> views() const { return views_; }

 private:
  // t.dim(i) when t has the given rank, else -1 (unknown: validation reports t).
  static std::int64_t dim_or(const TensorView& t, int rank, int i) {
    return t.shape.rank() == rank ? t.shape[i] : -1;
  }
  static std::int64_t cell_size_of_w(const TensorView& w) {
    if (w.shape.rank() != 2 || w.shape[1] <= 0 || w.shape[1] % 4 != 0) return -1;
    return w.shape[1] / 4;
  }

  std::int64_t seq_len_max_;
  std::vector<TensorView> views_;
  ops::PeepholeDefaults peepholes_;
};

BlockLSTMResult to_result(std::vector<Tensor> t) {
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3]),
          std::move(t[4]), std::move(t[5]), std::move(t[6])};
}

BlockLSTMGradResult to_grad_result(std::vector<Tensor> t) {
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3]),
          std::move(t[4]), std::move(t[5]), std::move(t[6]), std::move(t[7])};
}

void run_grad(const char* op, const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
              bool use_peephole) {
  const TypedInputs ins(op, in, use_peephole);
  const MutableTensorView outs[] = {out.x_grad,   out.cs_prev_grad, out.h_prev_grad, out.w_grad,
                                    out.wci_grad, out.wcf_grad,     out.wco_grad,    out.b_grad};
  run_op(op, ins.views(), {{"use_peephole", use_peephole ? 1.0 : 0.0}}, outs);
}

}  // namespace

namespace core {
void register_block_lstm_ops() {
  // seq_lengths, blockrnn's optional last input, follows TensorFlow's inputs.
  std::vector<std::string> inputs(kNames.begin(), kNames.begin() + kFwdInputs);
  std::vector<std::string> grad_inputs(kNames.begin(), kNames.end());
  inputs.push_back("seq_lengths");
  grad_inputs.push_back("seq_lengths");
  const AttrDef peephole{"use_peephole", AttrKind::kBool, true, 0.0};
  const AttrDef peephole_required{"use_peephole", AttrKind::kBool, false, 0.0};
  register_op(
      {{"BlockLSTM",
        inputs,
        {{"forget_bias", AttrKind::kFloat, true, 1.0},
         {"cell_clip", AttrKind::kFloat, true, 3.0},
         peephole},
        kOutputs,
        1},
       [](std::span<const TensorView> in, const Attrs&) { return infer_fwd("BlockLSTM", in); },
       [](std::span<const TensorView> in, const Attrs& attrs,
          std::span<const MutableTensorView> out) {
         compute_fwd(LSTMLayout::kICFO, in, attrs, out);
       }});
  register_op(
      {{"BlockLSTMGrad", grad_inputs, {peephole_required}, kGradOutputs, 1},
       [](std::span<const TensorView> in, const Attrs&) { return infer_grad("BlockLSTMGrad", in); },
       [](std::span<const TensorView> in, const Attrs& attrs,
          std::span<const MutableTensorView> out) {
         compute_grad(LSTMLayout::kICFO, in, attrs, out);
       }});
  register_op(
      {{"BlockLSTMV2", inputs, {{"cell_clip", AttrKind::kFloat, true, 0.0}, peephole}, kOutputs, 1},
       [](std::span<const TensorView> in, const Attrs&) { return infer_fwd("BlockLSTMV2", in); },
       [](std::span<const TensorView> in, const Attrs& attrs,
          std::span<const MutableTensorView> out) {
         compute_fwd(LSTMLayout::kIFCO, in, attrs, out);
       }});
  register_op({{"BlockLSTMGradV2", grad_inputs, {peephole_required}, kGradOutputs, 1},
               [](std::span<const TensorView> in, const Attrs&) {
                 return infer_grad("BlockLSTMGradV2", in);
               },
               [](std::span<const TensorView> in, const Attrs& attrs,
                  std::span<const MutableTensorView> out) {
                 compute_grad(LSTMLayout::kIFCO, in, attrs, out);
               }});
}
}  // namespace core

void block_lstm(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                const BlockLSTMAttrs& attrs) {
  const TypedInputs ins("BlockLSTM", in, attrs.use_peephole);
  const MutableTensorView outs[] = {out.i, out.cs, out.f, out.o, out.ci, out.co, out.h};
  run_op("BlockLSTM", ins.views(),
         {{"forget_bias", attrs.forget_bias},
          {"cell_clip", attrs.cell_clip},
          {"use_peephole", attrs.use_peephole ? 1.0 : 0.0}},
         outs);
}

BlockLSTMResult block_lstm(const BlockLSTMInputs& in, const BlockLSTMAttrs& attrs) {
  const TypedInputs ins("BlockLSTM", in, attrs.use_peephole);
  return to_result(run_op("BlockLSTM", ins.views(),
                          {{"forget_bias", attrs.forget_bias},
                           {"cell_clip", attrs.cell_clip},
                           {"use_peephole", attrs.use_peephole ? 1.0 : 0.0}}));
}

void block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                   const BlockLSTMV2Attrs& attrs) {
  const TypedInputs ins("BlockLSTMV2", in, attrs.use_peephole);
  const MutableTensorView outs[] = {out.i, out.cs, out.f, out.o, out.ci, out.co, out.h};
  run_op("BlockLSTMV2", ins.views(),
         {{"cell_clip", attrs.cell_clip}, {"use_peephole", attrs.use_peephole ? 1.0 : 0.0}}, outs);
}

BlockLSTMResult block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMV2Attrs& attrs) {
  const TypedInputs ins("BlockLSTMV2", in, attrs.use_peephole);
  return to_result(
      run_op("BlockLSTMV2", ins.views(),
             {{"cell_clip", attrs.cell_clip}, {"use_peephole", attrs.use_peephole ? 1.0 : 0.0}}));
}

void block_lstm_grad(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                     bool use_peephole) {
  run_grad("BlockLSTMGrad", in, out, use_peephole);
}

BlockLSTMGradResult block_lstm_grad(const BlockLSTMGradInputs& in, bool use_peephole) {
  const TypedInputs ins("BlockLSTMGrad", in, use_peephole);
  return to_grad_result(
      run_op("BlockLSTMGrad", ins.views(), {{"use_peephole", use_peephole ? 1.0 : 0.0}}));
}

void block_lstm_grad_v2(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                        bool use_peephole) {
  run_grad("BlockLSTMGradV2", in, out, use_peephole);
}

BlockLSTMGradResult block_lstm_grad_v2(const BlockLSTMGradInputs& in, bool use_peephole) {
  const TypedInputs ins("BlockLSTMGradV2", in, use_peephole);
  return to_grad_result(
      run_op("BlockLSTMGradV2", ins.views(), {{"use_peephole", use_peephole ? 1.0 : 0.0}}));
}

}  // namespace blockrnn
