// Kernel argument structs (src/kernel/*.h) filled from an op's named typed fields, with
// designated initializers: shared by the CPU ops (src/ops/*_ops.cc), the CUDA entry points
// (src/cuda/api.cpp) and the layer objects (src/layer/layer.cc), which take the same typed
// structs. `i` holds the inputs, `o` the outputs, their floating views already holding data of T
// (core::dispatch_float or the CUDA staging).
//
// Names: a kernel field takes the op field of the same name (`.x = data<T>(i.x)`); a kernel
// gradient d_<name> takes TensorFlow's <name>_grad (`.d_x = data<T>(o.x_grad)`), except in the
// outputs of gradients.LSTMBlockCell and gradients.GRUBlockCell, which are named as the inputs
// they are the gradients of (`.d_x = data<T>(o.x)`).
#pragma once

#include "blockrnn/context.h"
#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"
#include "kernel/gru_cell.h"
#include "kernel/lstm_cell.h"
#include "ops/lstm_attrs.h"
#include "ops/op_impl.h"

namespace blockrnn::ops {

using core::data;

// run_kernel(d, a): the reference (force_reference(), src/ref) or the fast kernel (src/cpu) of
// the argument struct's kernel (src/kernel/*.h). T is deduced from `a`.
template <typename T>
void run_kernel(const GRUDims& d, const GRUCellFwdArgs<T>& a) {
  force_reference() ? ref::gru_cell_fwd(d, a) : cpu::gru_cell_fwd(d, a);
}
template <typename T>
void run_kernel(const GRUDims& d, const GRUCellBwdArgs<T>& a) {
  force_reference() ? ref::gru_cell_bwd(d, a) : cpu::gru_cell_bwd(d, a);
}
template <typename T>
void run_kernel(const LSTMDims& d, const LSTMCellFwdArgs<T>& a) {
  force_reference() ? ref::lstm_cell_fwd(d, a) : cpu::lstm_cell_fwd(d, a);
}
template <typename T>
void run_kernel(const LSTMDims& d, const LSTMCellBwdArgs<T>& a) {
  force_reference() ? ref::lstm_cell_bwd(d, a) : cpu::lstm_cell_bwd(d, a);
}
template <typename T>
void run_kernel(const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  force_reference() ? ref::block_gru_fwd(d, a) : cpu::block_gru_fwd(d, a);
}
template <typename T>
void run_kernel(const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  force_reference() ? ref::block_gru_bwd(d, a) : cpu::block_gru_bwd(d, a);
}
template <typename T>
void run_kernel(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a) {
  force_reference() ? ref::block_gru_reset_after_fwd(d, a) : cpu::block_gru_reset_after_fwd(d, a);
}
template <typename T>
void run_kernel(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a) {
  force_reference() ? ref::block_gru_reset_after_bwd(d, a) : cpu::block_gru_reset_after_bwd(d, a);
}
template <typename T>
void run_kernel(const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  force_reference() ? ref::block_lstm_fwd(d, a) : cpu::block_lstm_fwd(d, a);
}
template <typename T>
void run_kernel(const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  force_reference() ? ref::block_lstm_bwd(d, a) : cpu::block_lstm_bwd(d, a);
}

// "bfloat16 products" (docs/design.md): on a bfloat16 call, the fast kernels whose arguments have
// bf16_products multiply bfloat16 operands (src/cpu/bf16_products.h); every other call, and every
// kernel without the field, computes float32 products. The one-shot ops and the layer objects
// (src/layer) both take the choice from here, so that a layer does exactly what its op does.
template <class Args>
constexpr bool uses_bf16_products(DType dtype) {
  return requires(Args a) {
    a.bf16_products;
  }
  &&dtype == DType::kBFloat16;
}
template <class Args>
void set_bf16_products(Args& a, DType dtype) {
  if constexpr (requires { a.bf16_products; }) a.bf16_products = uses_bf16_products<Args>(dtype);
}

// An op's compute: the kernel of the arguments `args.template operator()<T>(i, o)` fills, run
// on `d` for the call's float type T (core::dispatch_float).
template <class Dims, class InFields, class In, class OutFields, class Out, class MakeArgs>
void compute(const Dims& d, DType dtype, const InFields& in_fields, const In& in,
             const OutFields& out_fields, const Out& out, MakeArgs&& args) {
  core::dispatch_float(dtype, in_fields, in, out_fields, out,
                       [&]<typename T>(const In& i, const Out& o) {
                         run_kernel(d, args.template operator()<T>(i, o));
                       });
}

// GRUCellFwdArgs or BlockGRUFwdArgs (the same fields).
template <template <class> class Args, class T, class In, class Out>
Args<T> gru_fwd_args(const In& i, const Out& o) {
  return {.x = data<T>(i.x),
          .h_prev = data<T>(i.h_prev),
          .w_ru = data<T>(i.w_ru),
          .w_c = data<T>(i.w_c),
          .b_ru = data<T>(i.b_ru),
          .b_c = data<T>(i.b_c),
          .r = data<T>(o.r),
          .u = data<T>(o.u),
          .c = data<T>(o.c),
          .h = data<T>(o.h)};
}

// LSTMCellFwdArgs or BlockLSTMFwdArgs (the same fields). The attrs are converted to the op's
// dtype as TensorFlow's kernel does (ops/lstm_attrs.h).
template <template <class> class Args, class T, class In, class Out>
Args<T> lstm_fwd_args(const In& i, const Out& o, double forget_bias, double cell_clip,
                      bool use_peephole, LSTMLayout layout, DType dtype) {
  return {.x = data<T>(i.x),
          .cs_prev = data<T>(i.cs_prev),
          .h_prev = data<T>(i.h_prev),
          .w = data<T>(i.w),
          .wci = data<T>(i.wci),
          .wcf = data<T>(i.wcf),
          .wco = data<T>(i.wco),
          .b = data<T>(i.b),
          .i = data<T>(o.i),
          .cs = data<T>(o.cs),
          .f = data<T>(o.f),
          .o = data<T>(o.o),
          .ci = data<T>(o.ci),
          .co = data<T>(o.co),
          .h = data<T>(o.h),
          .forget_bias = attr_in_dtype<T>(forget_bias, dtype),
          .cell_clip = clip_in_dtype<T>(cell_clip, dtype),
          .use_peephole = use_peephole,
          .layout = layout};
}

// BlockLSTMGrad(V2).
template <class T, class In, class Out>
BlockLSTMBwdArgs<T> block_lstm_bwd_args(const In& i, const Out& o, bool use_peephole,
                                        LSTMLayout layout) {
  return {.x = data<T>(i.x),
          .cs_prev = data<T>(i.cs_prev),
          .h_prev = data<T>(i.h_prev),
          .w = data<T>(i.w),
          .wci = data<T>(i.wci),
          .wcf = data<T>(i.wcf),
          .wco = data<T>(i.wco),
          .i = data<T>(i.i),
          .cs = data<T>(i.cs),
          .f = data<T>(i.f),
          .o = data<T>(i.o),
          .ci = data<T>(i.ci),
          .co = data<T>(i.co),
          .h = data<T>(i.h),
          .d_cs = data<T>(i.cs_grad),
          .d_h = data<T>(i.h_grad),
          .d_x = data<T>(o.x_grad),
          .d_cs_prev = data<T>(o.cs_prev_grad),
          .d_h_prev = data<T>(o.h_prev_grad),
          .d_w = data<T>(o.w_grad),
          .d_wci = data<T>(o.wci_grad),
          .d_wcf = data<T>(o.wcf_grad),
          .d_wco = data<T>(o.wco_grad),
          .d_b = data<T>(o.b_grad),
          .use_peephole = use_peephole,
          .layout = layout};
}

// BlockGRUGrad.
template <class T, class In, class Out>
BlockGRUBwdArgs<T> block_gru_bwd_args(const In& i, const Out& o) {
  return {.x = data<T>(i.x),
          .h_prev = data<T>(i.h_prev),
          .w_ru = data<T>(i.w_ru),
          .w_c = data<T>(i.w_c),
          .r = data<T>(i.r),
          .u = data<T>(i.u),
          .c = data<T>(i.c),
          .h = data<T>(i.h),
          .d_h = data<T>(i.h_grad),
          .d_x = data<T>(o.x_grad),
          .d_h_prev = data<T>(o.h_prev_grad),
          .d_w_ru = data<T>(o.w_ru_grad),
          .d_w_c = data<T>(o.w_c_grad),
          .d_b_ru = data<T>(o.b_ru_grad),
          .d_b_c = data<T>(o.b_c_grad)};
}

// BlockGRUResetAfter.
template <class T, class In, class Out>
BlockGRUResetAfterFwdArgs<T> gru_reset_after_fwd_args(const In& i, const Out& o) {
  return {.x = data<T>(i.x),
          .h_prev = data<T>(i.h_prev),
          .w_i = data<T>(i.w_i),
          .w_h = data<T>(i.w_h),
          .b_i = data<T>(i.b_i),
          .b_h = data<T>(i.b_h),
          .r = data<T>(o.r),
          .u = data<T>(o.u),
          .n = data<T>(o.n),
          .hn = data<T>(o.hn),
          .h = data<T>(o.h)};
}

// BlockGRUResetAfterGrad.
template <class T, class In, class Out>
BlockGRUResetAfterBwdArgs<T> gru_reset_after_bwd_args(const In& i, const Out& o) {
  return {.x = data<T>(i.x),
          .h_prev = data<T>(i.h_prev),
          .w_i = data<T>(i.w_i),
          .w_h = data<T>(i.w_h),
          .r = data<T>(i.r),
          .u = data<T>(i.u),
          .n = data<T>(i.n),
          .hn = data<T>(i.hn),
          .h = data<T>(i.h),
          .d_h = data<T>(i.h_grad),
          .d_x = data<T>(o.x_grad),
          .d_h_prev = data<T>(o.h_prev_grad),
          .d_w_i = data<T>(o.w_i_grad),
          .d_w_h = data<T>(o.w_h_grad),
          .d_b_i = data<T>(o.b_i_grad),
          .d_b_h = data<T>(o.b_h_grad)};
}

// GRUBlockCellGrad's.
template <class T, class In, class Out>
GRUCellBwdArgs<T> gru_cell_grad_args(const In& i, const Out& o) {
  return {.x = data<T>(i.x),
          .h_prev = data<T>(i.h_prev),
          .w_ru = data<T>(i.w_ru),
          .w_c = data<T>(i.w_c),
          .r = data<T>(i.r),
          .u = data<T>(i.u),
          .c = data<T>(i.c),
          .d_h = data<T>(i.d_h),
          .d_x = data<T>(o.d_x),
          .d_h_prev = data<T>(o.d_h_prev),
          .d_c_bar = data<T>(o.d_c_bar),
          .d_r_bar_u_bar = data<T>(o.d_r_bar_u_bar)};
}

// gradients.GRUBlockCell's: every gradient (`full`), given the caller's scratch for the gate
// gradients GRUBlockCellGrad returns. Its outputs are named as the inputs.
template <class T, class In, class Out>
GRUCellBwdArgs<T> gru_cell_backward_args(const In& i, const Out& o, T* d_c_bar, T* d_r_bar_u_bar) {
  return {.x = data<T>(i.x),
          .h_prev = data<T>(i.h_prev),
          .w_ru = data<T>(i.w_ru),
          .w_c = data<T>(i.w_c),
          .r = data<T>(i.r),
          .u = data<T>(i.u),
          .c = data<T>(i.c),
          .d_h = data<T>(i.d_h),
          .d_x = data<T>(o.x),
          .d_h_prev = data<T>(o.h_prev),
          .d_c_bar = d_c_bar,
          .d_r_bar_u_bar = d_r_bar_u_bar,
          .full = true,
          .d_w_ru = data<T>(o.w_ru),
          .d_w_c = data<T>(o.w_c),
          .d_b_ru = data<T>(o.b_ru),
          .d_b_c = data<T>(o.b_c)};
}

// LSTMBlockCellGrad's.
template <class T, class In, class Out>
LSTMCellBwdArgs<T> lstm_cell_grad_args(const In& i, const Out& o, bool use_peephole) {
  return {.x = data<T>(i.x),
          .cs_prev = data<T>(i.cs_prev),
          .h_prev = data<T>(i.h_prev),
          .w = data<T>(i.w),
          .wci = data<T>(i.wci),
          .wcf = data<T>(i.wcf),
          .wco = data<T>(i.wco),
          .i = data<T>(i.i),
          .cs = data<T>(i.cs),
          .f = data<T>(i.f),
          .o = data<T>(i.o),
          .ci = data<T>(i.ci),
          .co = data<T>(i.co),
          .d_cs = data<T>(i.cs_grad),
          .d_h = data<T>(i.h_grad),
          .d_cs_prev = data<T>(o.cs_prev_grad),
          .d_gates = data<T>(o.dicfo),
          .d_wci = data<T>(o.wci_grad),
          .d_wcf = data<T>(o.wcf_grad),
          .d_wco = data<T>(o.wco_grad),
          .use_peephole = use_peephole};
}

// gradients.LSTMBlockCell's: every gradient (`full`), given the caller's scratch for the gate
// gradient LSTMBlockCellGrad returns. Its outputs are named as the inputs.
template <class T, class In, class Out>
LSTMCellBwdArgs<T> lstm_cell_backward_args(const In& i, const Out& o, bool use_peephole,
                                           T* d_gates) {
  return {.x = data<T>(i.x),
          .cs_prev = data<T>(i.cs_prev),
          .h_prev = data<T>(i.h_prev),
          .w = data<T>(i.w),
          .wci = data<T>(i.wci),
          .wcf = data<T>(i.wcf),
          .wco = data<T>(i.wco),
          .i = data<T>(i.i),
          .cs = data<T>(i.cs),
          .f = data<T>(i.f),
          .o = data<T>(i.o),
          .ci = data<T>(i.ci),
          .co = data<T>(i.co),
          .d_cs = data<T>(i.cs_grad),
          .d_h = data<T>(i.h_grad),
          .d_cs_prev = data<T>(o.cs_prev),
          .d_gates = d_gates,
          .d_wci = data<T>(o.wci),
          .d_wcf = data<T>(o.wcf),
          .d_wco = data<T>(o.wco),
          .use_peephole = use_peephole,
          .full = true,
          .d_x = data<T>(o.x),
          .d_h_prev = data<T>(o.h_prev),
          .d_w = data<T>(o.w),
          .d_b = data<T>(o.b)};
}

}  // namespace blockrnn::ops
