// Kernel argument structs (src/kernel/*.h) filled from an op's named typed fields, with
// designated initializers: shared by the CPU ops (src/ops/*_ops.cc) and the CUDA entry points
// (src/cuda/api.cpp), which take the same typed structs. `i` holds the inputs, `o` the outputs,
// their floating views already holding data of T (core::dispatch_float or the CUDA staging).
#pragma once

#include "blockrnn/context.h"
#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"
#include "kernel/gru_cell.h"
#include "kernel/lstm_cell.h"
#include "ops/fields.h"
#include "ops/lstm_attrs.h"
#include "ops/op_impl.h"

namespace blockrnn::ops {

using core::data;

// A field of the kernel's arguments from the input (i) or output (o) field of the same name.
#define BLOCKRNN_FIELD(from, field) .field = data<T>(from.field)
#define BLOCKRNN_IN(field) BLOCKRNN_FIELD(i, field)
#define BLOCKRNN_OUT(field) BLOCKRNN_FIELD(o, field)
// The kernel's gradient d_<field> from TensorFlow's <field>_grad, an input (the incoming
// gradients) or an output.
#define BLOCKRNN_GRAD_IN(field) .d_##field = data<T>(i.field##_grad)
#define BLOCKRNN_GRAD_OUT(field) .d_##field = data<T>(o.field##_grad)
// The kernel's gradient d_<field> from the output <field>, the gradient of the input <field>:
// gradients.LSTMBlockCell's and gradients.GRUBlockCell's outputs are named as the inputs.
#define BLOCKRNN_GRAD(field) .d_##field = data<T>(o.field)

// The fields every LSTM kernel's arguments start with: the inputs but b.
#define BLOCKRNN_LSTM_STATE                                                                    \
  BLOCKRNN_IN(x), BLOCKRNN_IN(cs_prev), BLOCKRNN_IN(h_prev), BLOCKRNN_IN(w), BLOCKRNN_IN(wci), \
      BLOCKRNN_IN(wcf), BLOCKRNN_IN(wco)
// The LSTM gates (fields.h's list), the forward kernels' outputs (from o) and the backward
// kernels' inputs (from i).
#define BLOCKRNN_LSTM_GATES_OF(from) BLOCKRNN_LSTM_GATES(BLOCKRNN_FIELD, from)
// The fields every GRU kernel's arguments start with.
#define BLOCKRNN_GRU_STATE BLOCKRNN_IN(x), BLOCKRNN_IN(h_prev), BLOCKRNN_IN(w_ru), BLOCKRNN_IN(w_c)

// run_kernel(d, a): the reference (force_reference(), src/ref) or the fast kernel (src/cpu) of
// the argument struct's kernel (kernel/declare.h).
#define BLOCKRNN_RUN_KERNEL(fn, Dims, Args)              \
  template <typename T>                                  \
  void run_kernel(const Dims& d, const Args<T>& a) {     \
    (force_reference() ? ref::fn<T> : cpu::fn<T>)(d, a); \
  }
BLOCKRNN_RUN_KERNEL(gru_cell_fwd, GRUDims, GRUCellFwdArgs)
BLOCKRNN_RUN_KERNEL(gru_cell_bwd, GRUDims, GRUCellBwdArgs)
BLOCKRNN_RUN_KERNEL(lstm_cell_fwd, LSTMDims, LSTMCellFwdArgs)
BLOCKRNN_RUN_KERNEL(lstm_cell_bwd, LSTMDims, LSTMCellBwdArgs)
BLOCKRNN_RUN_KERNEL(block_gru_fwd, BlockGRUDims, BlockGRUFwdArgs)
BLOCKRNN_RUN_KERNEL(block_gru_bwd, BlockGRUDims, BlockGRUBwdArgs)
BLOCKRNN_RUN_KERNEL(block_gru_reset_after_fwd, BlockGRUDims, BlockGRUResetAfterFwdArgs)
BLOCKRNN_RUN_KERNEL(block_gru_reset_after_bwd, BlockGRUDims, BlockGRUResetAfterBwdArgs)
BLOCKRNN_RUN_KERNEL(block_lstm_fwd, BlockLSTMDims, BlockLSTMFwdArgs)
BLOCKRNN_RUN_KERNEL(block_lstm_bwd, BlockLSTMDims, BlockLSTMBwdArgs)
#undef BLOCKRNN_RUN_KERNEL

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
  return {BLOCKRNN_GRU_STATE, BLOCKRNN_IN(b_ru), BLOCKRNN_IN(b_c), BLOCKRNN_OUT(r),
          BLOCKRNN_OUT(u),    BLOCKRNN_OUT(c),   BLOCKRNN_OUT(h)};
}

// LSTMCellFwdArgs or BlockLSTMFwdArgs (the same fields). The attrs are converted to the op's
// dtype as TensorFlow's kernel does (ops/lstm_attrs.h).
template <template <class> class Args, class T, class In, class Out>
Args<T> lstm_fwd_args(const In& i, const Out& o, double forget_bias, double cell_clip,
                      bool use_peephole, LSTMLayout layout, DType dtype) {
  return {BLOCKRNN_LSTM_STATE,
          BLOCKRNN_IN(b),
          BLOCKRNN_LSTM_GATES_OF(o),
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
  return {BLOCKRNN_LSTM_STATE,        BLOCKRNN_LSTM_GATES_OF(i),    BLOCKRNN_IN(h),
          BLOCKRNN_GRAD_IN(cs),       BLOCKRNN_GRAD_IN(h),          BLOCKRNN_GRAD_OUT(x),
          BLOCKRNN_GRAD_OUT(cs_prev), BLOCKRNN_GRAD_OUT(h_prev),    BLOCKRNN_GRAD_OUT(w),
          BLOCKRNN_GRAD_OUT(wci),     BLOCKRNN_GRAD_OUT(wcf),       BLOCKRNN_GRAD_OUT(wco),
          BLOCKRNN_GRAD_OUT(b),       .use_peephole = use_peephole, .layout = layout};
}

// BlockGRUGrad.
template <class T, class In, class Out>
BlockGRUBwdArgs<T> block_gru_bwd_args(const In& i, const Out& o) {
  return {BLOCKRNN_GRU_STATE,      BLOCKRNN_IN(r),
          BLOCKRNN_IN(u),          BLOCKRNN_IN(c),
          BLOCKRNN_IN(h),          BLOCKRNN_GRAD_IN(h),
          BLOCKRNN_GRAD_OUT(x),    BLOCKRNN_GRAD_OUT(h_prev),
          BLOCKRNN_GRAD_OUT(w_ru), BLOCKRNN_GRAD_OUT(w_c),
          BLOCKRNN_GRAD_OUT(b_ru), BLOCKRNN_GRAD_OUT(b_c)};
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
  return {BLOCKRNN_IN(x),         BLOCKRNN_IN(h_prev),    BLOCKRNN_IN(w_i),
          BLOCKRNN_IN(w_h),       BLOCKRNN_IN(r),         BLOCKRNN_IN(u),
          BLOCKRNN_IN(n),         BLOCKRNN_IN(hn),        BLOCKRNN_IN(h),
          BLOCKRNN_GRAD_IN(h),    BLOCKRNN_GRAD_OUT(x),   BLOCKRNN_GRAD_OUT(h_prev),
          BLOCKRNN_GRAD_OUT(w_i), BLOCKRNN_GRAD_OUT(w_h), BLOCKRNN_GRAD_OUT(b_i),
          BLOCKRNN_GRAD_OUT(b_h)};
}

// GRUBlockCellGrad's.
template <class T, class In, class Out>
GRUCellBwdArgs<T> gru_cell_grad_args(const In& i, const Out& o) {
  return {BLOCKRNN_GRU_STATE,     BLOCKRNN_IN(r),        BLOCKRNN_IN(u),
          BLOCKRNN_IN(c),         BLOCKRNN_IN(d_h),      BLOCKRNN_OUT(d_x),
          BLOCKRNN_OUT(d_h_prev), BLOCKRNN_OUT(d_c_bar), BLOCKRNN_OUT(d_r_bar_u_bar)};
}

// gradients.GRUBlockCell's: every gradient (`full`), given the caller's scratch for the gate
// gradients GRUBlockCellGrad returns.
template <class T, class In, class Out>
GRUCellBwdArgs<T> gru_cell_backward_args(const In& i, const Out& o, T* d_c_bar, T* d_r_bar_u_bar) {
  return {BLOCKRNN_GRU_STATE,    BLOCKRNN_IN(r),      BLOCKRNN_IN(u),
          BLOCKRNN_IN(c),        BLOCKRNN_IN(d_h),    BLOCKRNN_GRAD(x),
          BLOCKRNN_GRAD(h_prev), .d_c_bar = d_c_bar,  .d_r_bar_u_bar = d_r_bar_u_bar,
          .full = true,          BLOCKRNN_GRAD(w_ru), BLOCKRNN_GRAD(w_c),
          BLOCKRNN_GRAD(b_ru),   BLOCKRNN_GRAD(b_c)};
}

// LSTMBlockCellGrad's.
template <class T, class In, class Out>
LSTMCellBwdArgs<T> lstm_cell_grad_args(const In& i, const Out& o, bool use_peephole) {
  return {BLOCKRNN_LSTM_STATE,         BLOCKRNN_LSTM_GATES_OF(i),  BLOCKRNN_GRAD_IN(cs),
          BLOCKRNN_GRAD_IN(h),         BLOCKRNN_GRAD_OUT(cs_prev), .d_gates = data<T>(o.dicfo),
          BLOCKRNN_GRAD_OUT(wci),      BLOCKRNN_GRAD_OUT(wcf),     BLOCKRNN_GRAD_OUT(wco),
          .use_peephole = use_peephole};
}

// gradients.LSTMBlockCell's: every gradient (`full`), given the caller's scratch for the gate
// gradient LSTMBlockCellGrad returns.
template <class T, class In, class Out>
LSTMCellBwdArgs<T> lstm_cell_backward_args(const In& i, const Out& o, bool use_peephole,
                                           T* d_gates) {
  return {BLOCKRNN_LSTM_STATE,    BLOCKRNN_LSTM_GATES_OF(i),
          BLOCKRNN_GRAD_IN(cs),   BLOCKRNN_GRAD_IN(h),
          BLOCKRNN_GRAD(cs_prev), .d_gates = d_gates,
          BLOCKRNN_GRAD(wci),     BLOCKRNN_GRAD(wcf),
          BLOCKRNN_GRAD(wco),     .use_peephole = use_peephole,
          .full = true,           BLOCKRNN_GRAD(x),
          BLOCKRNN_GRAD(h_prev),  BLOCKRNN_GRAD(w),
          BLOCKRNN_GRAD(b)};
}

#undef BLOCKRNN_FIELD
#undef BLOCKRNN_IN
#undef BLOCKRNN_OUT
#undef BLOCKRNN_GRAD_IN
#undef BLOCKRNN_GRAD_OUT
#undef BLOCKRNN_GRAD
#undef BLOCKRNN_LSTM_STATE
#undef BLOCKRNN_LSTM_GATES_OF
#undef BLOCKRNN_GRU_STATE

}  // namespace blockrnn::ops
