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

// A field of the kernel's arguments from the input (i) or output (o) field of the same name.
#define BLOCKRNN_IN(field) .field = data<T>(i.field)
#define BLOCKRNN_OUT(field) .field = data<T>(o.field)
// A kernel field from the typed field of another name (TensorFlow's `x_grad` is the kernel's
// `d_x`).
#define BLOCKRNN_IN_AS(kfield, field) .kfield = data<T>(i.field)
#define BLOCKRNN_OUT_AS(kfield, field) .kfield = data<T>(o.field)

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
  return {BLOCKRNN_IN(x),    BLOCKRNN_IN(h_prev), BLOCKRNN_IN(w_ru), BLOCKRNN_IN(w_c),
          BLOCKRNN_IN(b_ru), BLOCKRNN_IN(b_c),    BLOCKRNN_OUT(r),   BLOCKRNN_OUT(u),
          BLOCKRNN_OUT(c),   BLOCKRNN_OUT(h)};
}

// LSTMCellFwdArgs or BlockLSTMFwdArgs (the same fields). The attrs are converted to the op's
// dtype as TensorFlow's kernel does (ops/lstm_attrs.h).
template <template <class> class Args, class T, class In, class Out>
Args<T> lstm_fwd_args(const In& i, const Out& o, double forget_bias, double cell_clip,
                      bool use_peephole, LSTMLayout layout, DType dtype) {
  return {BLOCKRNN_IN(x),
          BLOCKRNN_IN(cs_prev),
          BLOCKRNN_IN(h_prev),
          BLOCKRNN_IN(w),
          BLOCKRNN_IN(wci),
          BLOCKRNN_IN(wcf),
          BLOCKRNN_IN(wco),
          BLOCKRNN_IN(b),
          BLOCKRNN_OUT(i),
          BLOCKRNN_OUT(cs),
          BLOCKRNN_OUT(f),
          BLOCKRNN_OUT(o),
          BLOCKRNN_OUT(ci),
          BLOCKRNN_OUT(co),
          BLOCKRNN_OUT(h),
          .forget_bias = attr_in_dtype<T>(forget_bias, dtype),
          .cell_clip = clip_in_dtype<T>(cell_clip, dtype),
          .use_peephole = use_peephole,
          .layout = layout};
}

// BlockLSTMGrad(V2).
template <class T, class In, class Out>
BlockLSTMBwdArgs<T> block_lstm_bwd_args(const In& i, const Out& o, bool use_peephole,
                                        LSTMLayout layout) {
  return {BLOCKRNN_IN(x),
          BLOCKRNN_IN(cs_prev),
          BLOCKRNN_IN(h_prev),
          BLOCKRNN_IN(w),
          BLOCKRNN_IN(wci),
          BLOCKRNN_IN(wcf),
          BLOCKRNN_IN(wco),
          BLOCKRNN_IN(i),
          BLOCKRNN_IN(cs),
          BLOCKRNN_IN(f),
          BLOCKRNN_IN(o),
          BLOCKRNN_IN(ci),
          BLOCKRNN_IN(co),
          BLOCKRNN_IN(h),
          BLOCKRNN_IN_AS(d_cs, cs_grad),
          BLOCKRNN_IN_AS(d_h, h_grad),
          BLOCKRNN_OUT_AS(d_x, x_grad),
          BLOCKRNN_OUT_AS(d_cs_prev, cs_prev_grad),
          BLOCKRNN_OUT_AS(d_h_prev, h_prev_grad),
          BLOCKRNN_OUT_AS(d_w, w_grad),
          BLOCKRNN_OUT_AS(d_wci, wci_grad),
          BLOCKRNN_OUT_AS(d_wcf, wcf_grad),
          BLOCKRNN_OUT_AS(d_wco, wco_grad),
          BLOCKRNN_OUT_AS(d_b, b_grad),
          .use_peephole = use_peephole,
          .layout = layout};
}

// BlockGRUGrad.
template <class T, class In, class Out>
BlockGRUBwdArgs<T> block_gru_bwd_args(const In& i, const Out& o) {
  return {BLOCKRNN_IN(x),
          BLOCKRNN_IN(h_prev),
          BLOCKRNN_IN(w_ru),
          BLOCKRNN_IN(w_c),
          BLOCKRNN_IN(r),
          BLOCKRNN_IN(u),
          BLOCKRNN_IN(c),
          BLOCKRNN_IN(h),
          BLOCKRNN_IN_AS(d_h, h_grad),
          BLOCKRNN_OUT_AS(d_x, x_grad),
          BLOCKRNN_OUT_AS(d_h_prev, h_prev_grad),
          BLOCKRNN_OUT_AS(d_w_ru, w_ru_grad),
          BLOCKRNN_OUT_AS(d_w_c, w_c_grad),
          BLOCKRNN_OUT_AS(d_b_ru, b_ru_grad),
          BLOCKRNN_OUT_AS(d_b_c, b_c_grad)};
}

// BlockGRUResetAfter.
template <class T, class In, class Out>
BlockGRUResetAfterFwdArgs<T> gru_reset_after_fwd_args(const In& i, const Out& o) {
  return {BLOCKRNN_IN(x),   BLOCKRNN_IN(h_prev), BLOCKRNN_IN(w_i), BLOCKRNN_IN(w_h),
          BLOCKRNN_IN(b_i), BLOCKRNN_IN(b_h),    BLOCKRNN_OUT(r),  BLOCKRNN_OUT(u),
          BLOCKRNN_OUT(n),  BLOCKRNN_OUT(hn),    BLOCKRNN_OUT(h)};
}

// BlockGRUResetAfterGrad.
template <class T, class In, class Out>
BlockGRUResetAfterBwdArgs<T> gru_reset_after_bwd_args(const In& i, const Out& o) {
  return {BLOCKRNN_IN(x),
          BLOCKRNN_IN(h_prev),
          BLOCKRNN_IN(w_i),
          BLOCKRNN_IN(w_h),
          BLOCKRNN_IN(r),
          BLOCKRNN_IN(u),
          BLOCKRNN_IN(n),
          BLOCKRNN_IN(hn),
          BLOCKRNN_IN(h),
          BLOCKRNN_IN_AS(d_h, h_grad),
          BLOCKRNN_OUT_AS(d_x, x_grad),
          BLOCKRNN_OUT_AS(d_h_prev, h_prev_grad),
          BLOCKRNN_OUT_AS(d_w_i, w_i_grad),
          BLOCKRNN_OUT_AS(d_w_h, w_h_grad),
          BLOCKRNN_OUT_AS(d_b_i, b_i_grad),
          BLOCKRNN_OUT_AS(d_b_h, b_h_grad)};
}

// GRUBlockCellGrad's, given its outputs; gradients.GRUBlockCell adds the parameter gradients.
template <class T, class In>
GRUCellBwdArgs<T> gru_cell_bwd_args(const In& i, T* d_x, T* d_h_prev, T* d_c_bar,
                                    T* d_r_bar_u_bar) {
  return {BLOCKRNN_IN(x), BLOCKRNN_IN(h_prev),  BLOCKRNN_IN(w_ru),  BLOCKRNN_IN(w_c),
          BLOCKRNN_IN(r), BLOCKRNN_IN(u),       BLOCKRNN_IN(c),     BLOCKRNN_IN(d_h),
          .d_x = d_x,     .d_h_prev = d_h_prev, .d_c_bar = d_c_bar, .d_r_bar_u_bar = d_r_bar_u_bar};
}

// LSTMBlockCellGrad's, given its outputs; gradients.LSTMBlockCell adds the input and parameter
// gradients.
template <class T, class In>
LSTMCellBwdArgs<T> lstm_cell_bwd_args(const In& i, bool use_peephole, T* d_cs_prev, T* d_gates,
                                      T* d_wci, T* d_wcf, T* d_wco) {
  return {BLOCKRNN_IN(x),
          BLOCKRNN_IN(cs_prev),
          BLOCKRNN_IN(h_prev),
          BLOCKRNN_IN(w),
          BLOCKRNN_IN(wci),
          BLOCKRNN_IN(wcf),
          BLOCKRNN_IN(wco),
          BLOCKRNN_IN(i),
          BLOCKRNN_IN(cs),
          BLOCKRNN_IN(f),
          BLOCKRNN_IN(o),
          BLOCKRNN_IN(ci),
          BLOCKRNN_IN(co),
          BLOCKRNN_IN_AS(d_cs, cs_grad),
          BLOCKRNN_IN_AS(d_h, h_grad),
          .d_cs_prev = d_cs_prev,
          .d_gates = d_gates,
          .d_wci = d_wci,
          .d_wcf = d_wcf,
          .d_wco = d_wco,
          .use_peephole = use_peephole,
          .layout = LSTMLayout::kICFO};
}

#undef BLOCKRNN_IN
#undef BLOCKRNN_OUT

}  // namespace blockrnn::ops
