// BlockGRUResetAfter and BlockGRUResetAfterGrad (blockrnn's extension, SPEC A9; not TensorFlow
// ops): validation, registration, and the typed C++ entry points of blockrnn/sequence.h. The
// math is in src/ref/block_gru_reset_after.h.
//
// Shape letters: T time, B batch, I input, H cell (from h_prev), S = seq_len_max.
// Validation order, as BlockGRU's: ranks of every input (seq_len_max a scalar), then dimensions,
// then dtypes (seq_len_max int64, every other input one floating dtype), then 0 ≤ S ≤ T.
#include <array>

#include "blockrnn/context.h"
#include "blockrnn/ops.h"
#include "blockrnn/sequence.h"
#include "core/op_impl.h"
#include "kernel/block_gru_reset_after.h"

namespace blockrnn {
namespace {

using core::Checker;

constexpr std::array<const char*, 13> kNames = {
    "seq_len_max", "x", "h_prev", "w_i", "w_h", "b_i", "b_h", "r", "u", "n", "hn", "h", "h_grad"};
constexpr int kFwdInputs = 7;
constexpr int kGradInputs = 13;

// Validates the inputs of BlockGRUResetAfter (n = 7) or BlockGRUResetAfterGrad (n = 13).
BlockGRUDims check_block_gru_ra(const char* op, std::span<const TensorView> in, int n,
                                DType* dtype) {
  const Checker check(op);
  const core::SeqLengthsCheck lengths{check, in[n]};  // seq_lengths follows the n inputs
  check.scalar("seq_len_max", in[0]);
  check.rank("x", in[1], 3);
  check.rank("h_prev", in[2], 2);
  check.rank("w_i", in[3], 2);
  check.rank("w_h", in[4], 2);
  check.rank("b_i", in[5], 1);
  check.rank("b_h", in[6], 1);
  for (int k = kFwdInputs; k < n; ++k) check.rank(kNames[k], in[k], 3);
  lengths.rank();
  const std::int64_t T = in[1].shape[0], B = in[1].shape[1], I = in[1].shape[2];
  const std::int64_t H = in[2].shape[1];
  const std::int64_t H3 = core::checked_mul(op, "3 * cell_size (h_prev's last dimension)", 3, H);
  check.shape("h_prev", in[2], {B, H}, "batch_size, cell_size");
  check.shape("w_i", in[3], {I, H3}, "input_size, 3 * cell_size");
  check.shape("w_h", in[4], {H, H3}, "cell_size, 3 * cell_size");
  check.shape("b_i", in[5], {H3}, "3 * cell_size");
  check.shape("b_h", in[6], {H3}, "3 * cell_size");
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

OutputSpec infer_fwd(std::span<const TensorView> in, const core::Attrs&) {
  DType dtype;
  const BlockGRUDims d = check_block_gru_ra("BlockGRUResetAfter", in, kFwdInputs, &dtype);
  const Shape tbh{d.T, d.B, d.H};
  return {dtype, {tbh, tbh, tbh, tbh, tbh}};
}

OutputSpec infer_grad(std::span<const TensorView> in, const core::Attrs&) {
  DType dtype;
  const BlockGRUDims d = check_block_gru_ra("BlockGRUResetAfterGrad", in, kGradInputs, &dtype);
  return {dtype,
          {Shape{d.T, d.B, d.I}, Shape{d.B, d.H}, Shape{d.I, 3 * d.H}, Shape{d.H, 3 * d.H},
           Shape{3 * d.H}, Shape{3 * d.H}}};
}

// Inputs are validated by infer before compute runs.
BlockGRUDims dims_of(std::span<const TensorView> in) {
  return {in[1].shape[0],
          in[1].shape[1],
          in[1].shape[2],
          in[2].shape[1],
          core::read_int64_scalar(in[0]),
          core::effective_lengths(in.back(), core::read_int64_scalar(in[0]))};
}

void compute_fwd(std::span<const TensorView> in, const core::Attrs&,
                 std::span<const MutableTensorView> out) {
  const BlockGRUDims d = dims_of(in);
  core::dispatch_float(in[1].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    const BlockGRUResetAfterFwdArgs<T> a{b.in[1],  b.in[2],  b.in[3],  b.in[4],  b.in[5], b.in[6],
                                         b.out[0], b.out[1], b.out[2], b.out[3], b.out[4]};
    if (force_reference()) {
      ref::block_gru_reset_after_fwd<T>(d, a);
    } else {
      cpu::block_gru_reset_after_fwd<T>(d, a);
    }
  });
}

void compute_grad(std::span<const TensorView> in, const core::Attrs&,
                  std::span<const MutableTensorView> out) {
  const BlockGRUDims d = dims_of(in);
  core::dispatch_float(in[1].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    const BlockGRUResetAfterBwdArgs<T> a{b.in[1],  b.in[2],  b.in[3],  b.in[4],  b.in[7],  b.in[8],
                                         b.in[9],  b.in[10], b.in[11], b.in[12], b.out[0], b.out[1],
                                         b.out[2], b.out[3], b.out[4], b.out[5]};
    if (force_reference()) {
      ref::block_gru_reset_after_bwd<T>(d, a);
    } else {
      cpu::block_gru_reset_after_bwd<T>(d, a);
    }
  });
}

}  // namespace

namespace core {
void register_block_gru_reset_after_ops() {
  // seq_lengths, blockrnn's optional last input, follows the TensorFlow-style inputs.
  std::vector<std::string> names(kNames.begin(), kNames.end());
  std::vector<std::string> fwd_names(kNames.begin(), kNames.begin() + kFwdInputs);
  names.push_back("seq_lengths");
  fwd_names.push_back("seq_lengths");
  register_op({{"BlockGRUResetAfter", fwd_names, {}, {"r", "u", "n", "hn", "h"}, 1},
               infer_fwd,
               compute_fwd});
  register_op({{"BlockGRUResetAfterGrad",
                names,
                {},
                {"x_grad", "h_prev_grad", "w_i_grad", "w_h_grad", "b_i_grad", "b_h_grad"},
                1},
               infer_grad,
               compute_grad});
}
}  // namespace core

namespace {
std::array<TensorView, 8> fwd_views(const BlockGRUResetAfterInputs& in) {
  return {TensorView(&in.seq_len_max, Shape{}),
          in.x,
          in.h_prev,
          in.w_i,
          in.w_h,
          in.b_i,
          in.b_h,
          in.seq_lengths};
}
std::array<TensorView, 14> grad_views(const BlockGRUResetAfterGradInputs& in) {
  return {TensorView(&in.seq_len_max, Shape{}),
          in.x,
          in.h_prev,
          in.w_i,
          in.w_h,
          in.b_i,
          in.b_h,
          in.r,
          in.u,
          in.n,
          in.hn,
          in.h,
          in.h_grad,
          in.seq_lengths};
}
}  // namespace

void block_gru_reset_after(const BlockGRUResetAfterInputs& in,
                           const BlockGRUResetAfterOutputs& out) {
  const std::array<TensorView, 8> ins = fwd_views(in);
  const MutableTensorView outs[] = {out.r, out.u, out.n, out.hn, out.h};
  run_op("BlockGRUResetAfter", ins, {}, outs);
}

BlockGRUResetAfterResult block_gru_reset_after(const BlockGRUResetAfterInputs& in) {
  const std::array<TensorView, 8> ins = fwd_views(in);
  std::vector<Tensor> t = run_op("BlockGRUResetAfter", ins);
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3]), std::move(t[4])};
}

void block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in,
                                const BlockGRUResetAfterGradOutputs& out) {
  const std::array<TensorView, 14> ins = grad_views(in);
  const MutableTensorView outs[] = {out.x_grad,   out.h_prev_grad, out.w_i_grad,
                                    out.w_h_grad, out.b_i_grad,    out.b_h_grad};
  run_op("BlockGRUResetAfterGrad", ins, {}, outs);
}

BlockGRUResetAfterGradResult block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in) {
  const std::array<TensorView, 14> ins = grad_views(in);
  std::vector<Tensor> t = run_op("BlockGRUResetAfterGrad", ins);
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]),
          std::move(t[3]), std::move(t[4]), std::move(t[5])};
}

}  // namespace blockrnn
