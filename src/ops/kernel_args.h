// Kernel argument structs (src/kernel/*.h) filled from an op's named typed fields, with
// designated initializers: shared by the CPU ops (src/ops/*_ops.cc) and the CUDA entry points
// (src/cuda/api.cpp), which take the same typed structs. `i` holds the inputs, `o` the outputs,
// their floating views already holding data of T (core::dispatch_float or the CUDA staging).
#pragma once

#include "blockrnn/context.h"
#include "core/op_impl.h"
#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"
#include "kernel/gru_cell.h"
#include "kernel/lstm_cell.h"
#include "ops/lstm_attrs.h"

namespace blockrnn::ops {

using core::data;

// The reference (force_reference(), src/ref) or the fast kernel (src/cpu).
template <class Ref, class Cpu>
void run_kernel(Ref&& ref, Cpu&& cpu) {
  if (force_reference()) {
    ref();
  } else {
    cpu();
  }
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
          .cs_grad = data<T>(i.cs_grad),
          .h_grad = data<T>(i.h_grad),
          .x_grad = data<T>(o.x_grad),
          .cs_prev_grad = data<T>(o.cs_prev_grad),
          .h_prev_grad = data<T>(o.h_prev_grad),
          .w_grad = data<T>(o.w_grad),
          .wci_grad = data<T>(o.wci_grad),
          .wcf_grad = data<T>(o.wcf_grad),
          .wco_grad = data<T>(o.wco_grad),
          .b_grad = data<T>(o.b_grad),
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
          .h_grad = data<T>(i.h_grad),
          .x_grad = data<T>(o.x_grad),
          .h_prev_grad = data<T>(o.h_prev_grad),
          .w_ru_grad = data<T>(o.w_ru_grad),
          .w_c_grad = data<T>(o.w_c_grad),
          .b_ru_grad = data<T>(o.b_ru_grad),
          .b_c_grad = data<T>(o.b_c_grad)};
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
          .h_grad = data<T>(i.h_grad),
          .x_grad = data<T>(o.x_grad),
          .h_prev_grad = data<T>(o.h_prev_grad),
          .w_i_grad = data<T>(o.w_i_grad),
          .w_h_grad = data<T>(o.w_h_grad),
          .b_i_grad = data<T>(o.b_i_grad),
          .b_h_grad = data<T>(o.b_h_grad)};
}

}  // namespace blockrnn::ops
