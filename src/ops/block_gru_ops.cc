// BlockGRU and BlockGRUGrad (SPEC A6): validation (as BlockLSTM's, stricter per A3),
// registration, and the typed C++ entry points of blockrnn/sequence.h.
//
// Shape letters: T time, B batch, I input, H cell (from h_prev), S = seq_len_max.
// Validation order: ranks of every input (seq_len_max a scalar), then dimensions, then dtypes
// (seq_len_max int64, every other input one floating dtype), then 0 ≤ seq_len_max ≤ T.
#include <array>

#include "blockrnn/context.h"
#include "blockrnn/ops.h"
#include "blockrnn/sequence.h"
#include "core/op_impl.h"
#include "ops/typed_defaults.h"
#include "kernel/block_gru.h"

namespace blockrnn {
namespace {

using core::Checker;

constexpr std::array<const char*, 12> kNames = {
    "seq_len_max", "x", "h_prev", "w_ru", "w_c", "b_ru", "b_c", "r", "u", "c", "h", "h_grad"};
constexpr int kFwdInputs = 7;
constexpr int kGradInputs = 12;

// Validates the inputs of BlockGRU (n = 7) or BlockGRUGrad (n = 12). Returns the dims.
BlockGRUDims check_block_gru(const char* op, std::span<const TensorView> in, int n, DType* dtype) {
  const Checker check(op);
  const core::SeqLengthsCheck lengths{check, in[n]};  // seq_lengths follows the n inputs
  check.scalar("seq_len_max", in[0]);
  check.rank("x", in[1], 3);
  check.rank("h_prev", in[2], 2);
  check.rank("w_ru", in[3], 2);
  check.rank("w_c", in[4], 2);
  check.rank("b_ru", in[5], 1);
  check.rank("b_c", in[6], 1);
  for (int k = kFwdInputs; k < n; ++k) check.rank(kNames[k], in[k], 3);
  lengths.rank();
  const std::int64_t T = in[1].shape[0], B = in[1].shape[1], I = in[1].shape[2];
  const std::int64_t H = in[2].shape[1];
  const std::int64_t K = core::checked_add(op, "input_size + cell_size (rows of w_ru)", I, H);
  const std::int64_t H2 = core::checked_mul(op, "2 * cell_size (columns of w_ru)", 2, H);
  check.shape("h_prev", in[2], {B, H}, "batch_size, cell_size");
  const Checker::OtherWeight other{"w_c", in[4], {K, H}};
  check.input_weight("w_ru", in[3], {K, H2}, "input_size + cell_size, 2 * cell_size", in[1], H,
                     &other);
  check.shape("w_c", in[4], {K, H}, "input_size + cell_size, cell_size");
  check.shape("b_ru", in[5], {H2}, "2 * cell_size");
  check.shape("b_c", in[6], {H}, "cell_size");
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
  const BlockGRUDims d = check_block_gru("BlockGRU", in, kFwdInputs, &dtype);
  const Shape tbh{d.T, d.B, d.H};
  return {dtype, {tbh, tbh, tbh, tbh}};
}

OutputSpec infer_grad(std::span<const TensorView> in, const core::Attrs&) {
  DType dtype;
  const BlockGRUDims d = check_block_gru("BlockGRUGrad", in, kGradInputs, &dtype);
  const std::int64_t K = d.I + d.H;
  return {dtype,
          {Shape{d.T, d.B, d.I}, Shape{d.B, d.H}, Shape{K, 2 * d.H}, Shape{K, d.H}, Shape{2 * d.H},
           Shape{d.H}}};
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
    const BlockGRUFwdArgs<T> a{b.in[1], b.in[2],  b.in[3],  b.in[4],  b.in[5],
                               b.in[6], b.out[0], b.out[1], b.out[2], b.out[3]};
    if (force_reference()) {
      ref::block_gru_fwd<T>(d, a);
    } else {
      cpu::block_gru_fwd<T>(d, a);
    }
  });
}

void compute_grad(std::span<const TensorView> in, const core::Attrs&,
                  std::span<const MutableTensorView> out) {
  const BlockGRUDims d = dims_of(in);
  core::dispatch_float(in[1].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    const BlockGRUBwdArgs<T> a{b.in[1],  b.in[2],  b.in[3],  b.in[4],  b.in[7],
                               b.in[8],  b.in[9],  b.in[10], b.in[11], b.out[0],
                               b.out[1], b.out[2], b.out[3], b.out[4], b.out[5]};
    if (force_reference()) {
      ref::block_gru_bwd<T>(d, a);
    } else {
      cpu::block_gru_bwd<T>(d, a);
    }
  });
}

}  // namespace

namespace core {
void register_block_gru_ops() {
  // seq_lengths, blockrnn's optional last input, follows the TensorFlow-style inputs.
  std::vector<std::string> names(kNames.begin(), kNames.end());
  std::vector<std::string> fwd_names(kNames.begin(), kNames.begin() + kFwdInputs);
  names.push_back("seq_lengths");
  fwd_names.push_back("seq_lengths");
  register_op({{"BlockGRU", fwd_names, {}, {"r", "u", "c", "h"}, 1}, infer_fwd, compute_fwd});
  register_op({{"BlockGRUGrad",
                names,
                {},
                {"x_grad", "h_prev_grad", "w_ru_grad", "w_c_grad", "b_ru_grad", "b_c_grad"},
                1},
               infer_grad,
               compute_grad});
}
}  // namespace core

void block_gru(const BlockGRUInputs& in, const BlockGRUOutputs& out) {
  const std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  const TensorView ins[] = {
      TensorView(&S, Shape{}), in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c, in.seq_lengths};
  const MutableTensorView outs[] = {out.r, out.u, out.c, out.h};
  run_op("BlockGRU", ins, {}, outs);
}

BlockGRUResult block_gru(const BlockGRUInputs& in) {
  const std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  const TensorView ins[] = {
      TensorView(&S, Shape{}), in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c, in.seq_lengths};
  std::vector<Tensor> t = run_op("BlockGRU", ins);
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3])};
}

void block_gru_grad(const BlockGRUGradInputs& in, const BlockGRUGradOutputs& out) {
  const std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  const TensorView ins[] = {TensorView(&S, Shape{}),
                            in.x,
                            in.h_prev,
                            in.w_ru,
                            in.w_c,
                            in.b_ru,
                            in.b_c,
                            in.r,
                            in.u,
                            in.c,
                            in.h,
                            in.h_grad,
                            in.seq_lengths};
  const MutableTensorView outs[] = {out.x_grad,   out.h_prev_grad, out.w_ru_grad,
                                    out.w_c_grad, out.b_ru_grad,   out.b_c_grad};
  run_op("BlockGRUGrad", ins, {}, outs);
}

BlockGRUGradResult block_gru_grad(const BlockGRUGradInputs& in) {
  const std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  const TensorView ins[] = {TensorView(&S, Shape{}),
                            in.x,
                            in.h_prev,
                            in.w_ru,
                            in.w_c,
                            in.b_ru,
                            in.b_c,
                            in.r,
                            in.u,
                            in.c,
                            in.h,
                            in.h_grad,
                            in.seq_lengths};
  std::vector<Tensor> t = run_op("BlockGRUGrad", ins);
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]),
          std::move(t[3]), std::move(t[4]), std::move(t[5])};
}

}  // namespace blockrnn
