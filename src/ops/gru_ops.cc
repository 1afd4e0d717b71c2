// GRUBlockCell, GRUBlockCellGrad and gradients.GRUBlockCell: validation (SPEC §2.3, §3.3, A3),
// registration, and the typed C++ entry points of blockrnn/gru.h.
#include <array>

#include "blockrnn/context.h"
#include "blockrnn/gru.h"
#include "blockrnn/ops.h"
#include "core/op_impl.h"
#include "kernel/gru_cell.h"

namespace blockrnn {
namespace {

using core::Checker;

// Checks x, h_prev, w_ru, w_c, b_ru, b_c (inputs 0..5): ranks, then dims. Returns B, I, H.
GRUDims check_gru_weights(const Checker& check, std::span<const TensorView> in) {
  const TensorView &x = in[0], &h_prev = in[1], &w_ru = in[2], &w_c = in[3], &b_ru = in[4],
                   &b_c = in[5];
  check.rank("x", x, 2);
  check.rank("h_prev", h_prev, 2);
  check.rank("w_ru", w_ru, 2);
  check.rank("w_c", w_c, 2);
  check.rank("b_ru", b_ru, 1);
  check.rank("b_c", b_c, 1);
  const std::int64_t B = x.shape[0], I = x.shape[1], H = h_prev.shape[1];
  const std::int64_t K =
      core::checked_add(check.op(), "input_size + cell_size (rows of w_ru)", I, H);
  const std::int64_t H2 = core::checked_mul(check.op(), "2 * cell_size (columns of w_ru)", 2, H);
  check.shape("h_prev", h_prev, {B, H}, "batch_size, cell_size");
  const Checker::OtherWeight other{"w_c", w_c, {K, H}};
  check.input_weight("w_ru", w_ru, {K, H2}, "input_size + cell_size, 2 * cell_size", x, H, &other);
  check.shape("w_c", w_c, {K, H}, "input_size + cell_size, cell_size");
  check.shape("b_ru", b_ru, {H2}, "2 * cell_size");
  check.shape("b_c", b_c, {H}, "cell_size");
  return {B, I, H};
}

constexpr std::array<const char*, 6> kFwdNames = {"x", "h_prev", "w_ru", "w_c", "b_ru", "b_c"};
constexpr std::array<const char*, 10> kGradNames = {"x",   "h_prev", "w_ru", "w_c", "b_ru",
                                                    "b_c", "r",      "u",    "c",   "d_h"};

OutputSpec infer_fwd(std::span<const TensorView> in, const core::Attrs&) {
  const Checker check("GRUBlockCell");
  const GRUDims d = check_gru_weights(check, in);
  const DType dtype = check.same_float_dtype(kFwdNames, in);
  const Shape bh{d.B, d.H};
  return {dtype, {bh, bh, bh, bh}};
}

GRUDims check_grad(const char* op, std::span<const TensorView> in, DType* dtype) {
  const Checker check(op);
  for (int k = 6; k < 10; ++k) check.rank(kGradNames[k], in[k], 2);
  const GRUDims d = check_gru_weights(check, in);
  const Shape bh{d.B, d.H};
  for (int k = 6; k < 10; ++k) check.shape(kGradNames[k], in[k], bh, "batch_size, cell_size");
  *dtype = check.same_float_dtype(kGradNames, in);
  return d;
}

OutputSpec infer_grad(std::span<const TensorView> in, const core::Attrs&) {
  DType dtype;
  const GRUDims d = check_grad("GRUBlockCellGrad", in, &dtype);
  return {dtype, {Shape{d.B, d.I}, Shape{d.B, d.H}, Shape{d.B, d.H}, Shape{d.B, 2 * d.H}}};
}

OutputSpec infer_backward(std::span<const TensorView> in, const core::Attrs&) {
  DType dtype;
  const GRUDims d = check_grad("gradients.GRUBlockCell", in, &dtype);
  const std::int64_t K = d.I + d.H;
  return {dtype,
          {Shape{d.B, d.I}, Shape{d.B, d.H}, Shape{K, 2 * d.H}, Shape{K, d.H}, Shape{2 * d.H},
           Shape{d.H}}};
}

GRUDims dims_of(std::span<const TensorView> in) {
  return {in[0].shape[0], in[0].shape[1], in[1].shape[1]};
}

void compute_fwd(std::span<const TensorView> in, const core::Attrs&,
                 std::span<const MutableTensorView> out) {
  const GRUDims d = dims_of(in);
  core::dispatch_float(in[0].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    const GRUCellFwdArgs<T> a{b.in[0], b.in[1],  b.in[2],  b.in[3],  b.in[4],
                              b.in[5], b.out[0], b.out[1], b.out[2], b.out[3]};
    if (force_reference()) {
      ref::gru_cell_fwd<T>(d, a);
    } else {
      cpu::gru_cell_fwd<T>(d, a);
    }
  });
}

template <typename T>
void run_bwd(const GRUDims& d, const GRUCellBwdArgs<T>& a) {
  if (force_reference()) {
    ref::gru_cell_bwd<T>(d, a);
  } else {
    cpu::gru_cell_bwd<T>(d, a);
  }
}

void compute_grad(std::span<const TensorView> in, const core::Attrs&,
                  std::span<const MutableTensorView> out) {
  const GRUDims d = dims_of(in);
  core::dispatch_float(in[0].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    const GRUCellBwdArgs<T> a{b.in[0], b.in[1], b.in[2],  b.in[3],  b.in[6],  b.in[7],
                              b.in[8], b.in[9], b.out[0], b.out[1], b.out[2], b.out[3]};
    run_bwd<T>(d, a);
  });
}

void compute_backward(std::span<const TensorView> in, const core::Attrs&,
                      std::span<const MutableTensorView> out) {
  const GRUDims d = dims_of(in);
  core::dispatch_float(in[0].dtype, in, out, [&]<typename T>(core::Buffers<T>& b) {
    std::vector<T> d_c_bar(d.B * d.H), d_ru(d.B * 2 * d.H);
    GRUCellBwdArgs<T> a{b.in[0], b.in[1], b.in[2],  b.in[3],  b.in[6],        b.in[7],
                        b.in[8], b.in[9], b.out[0], b.out[1], d_c_bar.data(), d_ru.data()};
    a.full = true;
    a.d_w_ru = b.out[2];
    a.d_w_c = b.out[3];
    a.d_b_ru = b.out[4];
    a.d_b_c = b.out[5];
    run_bwd<T>(d, a);
  });
}

}  // namespace

namespace core {
void register_gru_ops() {
  const std::vector<std::string> weights = {"x", "h_prev", "w_ru", "w_c", "b_ru", "b_c"};
  std::vector<std::string> grad_inputs = weights;
  for (const char* n : {"r", "u", "c", "d_h"}) grad_inputs.emplace_back(n);
  register_op({{"GRUBlockCell", weights, {}, {"r", "u", "c", "h"}}, infer_fwd, compute_fwd});
  register_op(
      {{"GRUBlockCellGrad", grad_inputs, {}, {"d_x", "d_h_prev", "d_c_bar", "d_r_bar_u_bar"}},
       infer_grad,
       compute_grad});
  register_op(
      {{"gradients.GRUBlockCell", grad_inputs, {}, weights}, infer_backward, compute_backward});
}
}  // namespace core

void gru_block_cell(const GRUBlockCellInputs& in, const GRUBlockCellOutputs& out) {
  const TensorView ins[] = {in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c};
  const MutableTensorView outs[] = {out.r, out.u, out.c, out.h};
  run_op("GRUBlockCell", ins, {}, outs);
}

GRUBlockCellResult gru_block_cell(const GRUBlockCellInputs& in) {
  const TensorView ins[] = {in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c};
  std::vector<Tensor> t = run_op("GRUBlockCell", ins);
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3])};
}

void gru_block_cell_grad(const GRUBlockCellGradInputs& in, const GRUBlockCellGradOutputs& out) {
  const TensorView ins[] = {in.x,   in.h_prev, in.w_ru, in.w_c, in.b_ru,
                            in.b_c, in.r,      in.u,    in.c,   in.d_h};
  const MutableTensorView outs[] = {out.d_x, out.d_h_prev, out.d_c_bar, out.d_r_bar_u_bar};
  run_op("GRUBlockCellGrad", ins, {}, outs);
}

GRUBlockCellGradResult gru_block_cell_grad(const GRUBlockCellGradInputs& in) {
  const TensorView ins[] = {in.x,   in.h_prev, in.w_ru, in.w_c, in.b_ru,
                            in.b_c, in.r,      in.u,    in.c,   in.d_h};
  std::vector<Tensor> t = run_op("GRUBlockCellGrad", ins);
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]), std::move(t[3])};
}

void gru_block_cell_backward(const GRUBlockCellBackwardInputs& in,
                             const GRUBlockCellBackwardOutputs& out) {
  const TensorView ins[] = {in.x,   in.h_prev, in.w_ru, in.w_c, in.b_ru,
                            in.b_c, in.r,      in.u,    in.c,   in.d_h};
  const MutableTensorView outs[] = {out.x, out.h_prev, out.w_ru, out.w_c, out.b_ru, out.b_c};
  run_op("gradients.GRUBlockCell", ins, {}, outs);
}

GRUBlockCellBackwardResult gru_block_cell_backward(const GRUBlockCellBackwardInputs& in) {
  const TensorView ins[] = {in.x,   in.h_prev, in.w_ru, in.w_c, in.b_ru,
                            in.b_c, in.r,      in.u,    in.c,   in.d_h};
  std::vector<Tensor> t = run_op("gradients.GRUBlockCell", ins);
  return {std::move(t[0]), std::move(t[1]), std::move(t[2]),
          std::move(t[3]), std::move(t[4]), std::move(t[5])};
}

}  // namespace blockrnn
