// The entry points of blockrnn/cuda.h: the typed API's defaults, then the CPU path's own
// validation (the typed op's checks of src/ops, core::check_outputs and the alias check: the same
// checks in the same order, the same messages), then the CUDA-only checks (device memory), then
// the kernels of src/cuda/kernels.cu on the caller's stream, their argument structs filled from
// the named fields. Validation reads no tensor data: only the host integer seq_len_max.
//
// Plain C++ (compiled by the host compiler, not nvcc): only the CUDA runtime and cuBLAS APIs.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/cuda.h"
#include "blockrnn/error.h"
#include "core/op_impl.h"
#include "cuda/kernels.h"
#include "ops/lstm_attrs.h"
#include "ops/typed_ops.h"

namespace blockrnn::cuda {

namespace {

using detail::check_blas;
using detail::check_cuda;
using detail::Ctx;
using detail::Workspace;

std::atomic<int> g_math_mode{static_cast<int>(MathMode::kExactFP32)};

// One cuBLAS handle per thread and device, created on first use (cuBLAS handles must not be
// shared by threads that use them concurrently; each call sets its stream and math mode).
class Handles {
 public:
  ~Handles() {
    for (cublasHandle_t h : handles_) {
      if (h != nullptr) cublasDestroy(h);
    }
  }
  cublasHandle_t get(const char* op) {
    int device = 0;
    check_cuda(op, cudaGetDevice(&device), "cudaGetDevice");
    if (static_cast<std::size_t>(device) >= handles_.size()) handles_.resize(device + 1, nullptr);
    if (handles_[device] == nullptr) {
      check_blas(op, cublasCreate(&handles_[device]), "cublasCreate");
    }
    return handles_[device];
  }

 private:
  std::vector<cublasHandle_t> handles_;
};

Ctx make_ctx(const char* op, cudaStream_t stream) {
  thread_local Handles handles;
  Ctx ctx{op, stream, handles.get(op), get_math_mode() == MathMode::kTF32};
  check_blas(op, cublasSetStream(ctx.blas, stream), "cublasSetStream");
  check_blas(
      op, cublasSetMathMode(ctx.blas, ctx.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
      "cublasSetMathMode");
  return ctx;
}

std::size_t bytes_of(const TensorView& t) {
  return static_cast<std::size_t>(t.shape.num_elements()) * dtype_size(t.dtype);
}

// "<op>: <what> <name> is not device memory (...)" for a pointer the kernels cannot read.
void check_device_memory(const char* op, const char* what, const std::string& name, const void* p) {
  cudaPointerAttributes attr{};
  check_cuda(op, cudaPointerGetAttributes(&attr, p), "cudaPointerGetAttributes");
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) return;
  throw Error(ErrorCode::kInvalidArgument,
              std::string(op) + ": " + what + name +
                  " is not device memory (the CUDA entry points of blockrnn/cuda.h take "
                  "cudaMalloc'd or managed memory; for host memory use the CPU API)");
}

using core::data;

// Validates as the CPU path does (the typed op's checks, the caller's outputs, aliasing), then
// the CUDA-only checks, and runs f.template operator()<T>(ctx, in, out, dtype) with T = float or
// double on copies of the typed structs whose floating views hold device data of T; float16 is
// staged through float32 device workspace. `unread`: inputs the kernels never read (the stand-in
// zeros of omitted peephole vectors, host memory): not checked, and null for f.
template <class Op, class F>
void run(const Op& op, const typename Op::Inputs& in, const typename Op::Outputs& out,
         const typename Op::Attrs& attrs, std::span<TensorView Op::Inputs::*const> unread,
         cudaStream_t stream, F&& f) {
  using In = typename Op::Inputs;
  using Out = typename Op::Outputs;
  op.check_storage(in);
  const core::Plan p = op.plan(in, attrs);
  const char* out_names[core::kMaxOutputs];
  const std::span<const char* const> outputs = op.output_names(out_names);
  MutableTensorView outs[core::kMaxOutputs];
  for (std::size_t k = 0; k < outputs.size(); ++k) outs[k] = out.*op.outputs[k].view;
  const std::span<const MutableTensorView> out_views(outs, outputs.size());
  core::check_outputs(op.name, outputs, p.dtype, p.output_shapes(), out_views);
  // Empty work (h_prev without elements, as the CPU path): every output is zeros.
  if (!p.empty()) {
    const char* in_names[core::kMaxInputs];
    TensorView views[core::kMaxInputs];
    for (std::size_t k = 0; k < op.inputs.size(); ++k) in_names[k] = op.inputs[k].name;
    core::check_no_alias(op.name, std::span(in_names, op.inputs.size()), op.gather(in, views),
                         outputs, out_views);
  }
  if (device_count() == 0) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(op.name) + ": no CUDA device is available (blockrnn/cuda.h needs one)");
  }
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    if (outs[k].shape.num_elements() > 0) {
      check_device_memory(op.name, "output ", outputs[k], outs[k].data);
    }
  }
  const Ctx ctx = make_ctx(op.name, stream);
  if (p.empty()) {
    for (const MutableTensorView& o : out_views) {
      if (bytes_of(o) > 0) {
        check_cuda(op.name, cudaMemsetAsync(o.data, 0, bytes_of(o), stream), "cudaMemsetAsync");
      }
    }
    return;
  }
  // The inputs the kernels read: the floating ones, less `unread`, whose views become null.
  In dev = in;
  std::vector<TensorView*> read;
  for (const auto& field : op.inputs) {
    TensorView& t = dev.*field.view;
    if (field.kind != core::InputKind::kFloat) continue;
    if (std::find(unread.begin(), unread.end(), field.view) != unread.end()) {
      t.data = nullptr;
      continue;
    }
    if (t.shape.num_elements() > 0) check_device_memory(op.name, "", field.name, t.data);
    read.push_back(&t);
  }
  switch (p.dtype) {
    case DType::kFloat32:
      return f.template operator()<float>(ctx, dev, out, p.dtype);
    case DType::kFloat64:
      return f.template operator()<double>(ctx, dev, out, p.dtype);
    case DType::kFloat16: {
      // float32 staging in one workspace: the inputs read, then every output.
      std::size_t total = 0;
      for (const TensorView* t : read) total += t->shape.num_elements();
      for (const MutableTensorView& o : out_views) total += o.shape.num_elements();
      Workspace ws(ctx, sizeof(float) * total);
      float* next = ws.as<float>();
      for (TensorView* t : read) {
        const std::int64_t n = t->shape.num_elements();
        detail::half_to_float(ctx, t->data, next, n);
        *t = TensorView(next, DType::kFloat32, t->shape);
        next += n;
      }
      Out staged = out;
      for (const auto& field : op.outputs) {
        MutableTensorView& o = staged.*field.view;
        o = MutableTensorView(next, DType::kFloat32, o.shape);
        next += o.shape.num_elements();
      }
      f.template operator()<float>(ctx, dev, staged, p.dtype);
      for (const auto& field : op.outputs) {
        const MutableTensorView& o = staged.*field.view;
        detail::float_to_half(ctx, data<float>(o), (out.*field.view).data, o.shape.num_elements());
      }
      return;
    }
    case DType::kInt64:
      break;
  }
  throw Error(ErrorCode::kInternal, std::string(op.name) + ": not a floating dtype");
}

// seq_lengths (blockrnn's per-example lengths) has no CUDA kernel yet: refused before anything
// else, never ignored.
void refuse_seq_lengths(const char* op, const TensorView& seq_lengths) {
  if (!is_absent_input(seq_lengths)) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(op) +
                    ": seq_lengths is not supported on the CUDA backend yet (docs/cuda.md); "
                    "omit it, or run the op on the CPU");
  }
}

// The peephole vectors, when the kernels do not read them (no use_peephole).
template <class In>
std::span<TensorView In::*const> peepholes_unless(bool use_peephole) {
  static constexpr TensorView In::*kPeepholes[] = {&In::wci, &In::wcf, &In::wco};
  if (use_peephole) return {};
  return kPeepholes;
}

// ---- LSTM -------------------------------------------------------------------------------------

template <typename T, class In>
BlockLSTMFwdArgs<T> lstm_fwd_args(const In& i, const auto& o, LSTMLayout layout, double forget_bias,
                                  double cell_clip, bool use_peephole, DType dtype) {
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
          .forget_bias = ops::attr_in_dtype<T>(forget_bias, dtype),
          .cell_clip = ops::clip_in_dtype<T>(cell_clip, dtype),
          .use_peephole = use_peephole,
          .layout = layout};
}

// The inputs' part of the LSTM backward's arguments (h: the sequence ops' forward output, null
// for the cells); the caller adds the outputs.
template <typename T, class In>
BlockLSTMBwdArgs<T> lstm_bwd_args(const In& i, const T* h, bool use_peephole, LSTMLayout layout) {
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
          .h = h,
          .cs_grad = data<T>(i.cs_grad),
          .h_grad = data<T>(i.h_grad),
          .x_grad = nullptr,
          .cs_prev_grad = nullptr,
          .h_prev_grad = nullptr,
          .w_grad = nullptr,
          .wci_grad = nullptr,
          .wcf_grad = nullptr,
          .wco_grad = nullptr,
          .b_grad = nullptr,
          .use_peephole = use_peephole,
          .layout = layout};
}

// LSTMBlockCellGrad (the gate gradient dicfo as an output) or gradients.LSTMBlockCell (full).
template <typename T, class Out>
void lstm_cell_bwd(const Ctx& ctx, const LSTMBlockCellGradInputs& i, const Out& o,
                   bool use_peephole) {
  const std::int64_t B = i.x.shape[0], I = i.x.shape[1], H = i.cs_prev.shape[1];
  BlockLSTMBwdArgs<T> a = lstm_bwd_args<T>(i, nullptr, use_peephole, LSTMLayout::kICFO);
  detail::LSTMBwdExtra<T> extra;
  extra.cell = true;
  if constexpr (std::is_same_v<Out, LSTMBlockCellBackwardOutputs>) {
    extra.full = true;
    a.x_grad = data<T>(o.x);
    a.cs_prev_grad = data<T>(o.cs_prev);
    a.h_prev_grad = data<T>(o.h_prev);
    a.w_grad = data<T>(o.w);
    a.wci_grad = data<T>(o.wci);
    a.wcf_grad = data<T>(o.wcf);
    a.wco_grad = data<T>(o.wco);
    a.b_grad = data<T>(o.b);
  } else {
    extra.full = false;
    a.cs_prev_grad = data<T>(o.cs_prev_grad);
    extra.dgates = data<T>(o.dicfo);
    a.wci_grad = data<T>(o.wci_grad);
    a.wcf_grad = data<T>(o.wcf_grad);
    a.wco_grad = data<T>(o.wco_grad);
  }
  detail::lstm_bwd<T>(ctx, {1, B, I, H, 1}, a, extra);
}

template <class Op, class A>
void lstm_seq_fwd(const Op& op, LSTMLayout layout, const BlockLSTMInputs& in,
                  const BlockLSTMOutputs& out, double forget_bias, const A& attrs,
                  cudaStream_t stream) {
  refuse_seq_lengths(op.name, in.seq_lengths);
  const ops::LSTMSeqCall<BlockLSTMInputs> call(op.name, in, attrs.use_peephole, false);
  using In = ops::SeqInputs<BlockLSTMInputs>;
  run(op, call.in(), out, attrs, peepholes_unless<In>(attrs.use_peephole), stream,
      [&]<typename T>(const Ctx& ctx, const In& i, const BlockLSTMOutputs& o, DType dtype) {
        const BlockLSTMDims d{i.x.shape[0], i.x.shape[1], i.x.shape[2], i.cs_prev.shape[1],
                              call.seq.S};
        detail::lstm_fwd<T>(ctx, d,
                            lstm_fwd_args<T>(i, o, layout, forget_bias, attrs.cell_clip,
                                             attrs.use_peephole, dtype));
      });
}

template <class Op>
void lstm_seq_bwd(const Op& op, LSTMLayout layout, const BlockLSTMGradInputs& in,
                  const BlockLSTMGradOutputs& out, bool use_peephole, cudaStream_t stream) {
  refuse_seq_lengths(op.name, in.seq_lengths);
  const ops::LSTMSeqCall<BlockLSTMGradInputs> call(op.name, in, use_peephole, true);
  using In = ops::SeqInputs<BlockLSTMGradInputs>;
  run(op, call.in(), out, {use_peephole}, peepholes_unless<In>(use_peephole), stream,
      [&]<typename T>(const Ctx& ctx, const In& i, const BlockLSTMGradOutputs& o, DType) {
        const BlockLSTMDims d{i.x.shape[0], i.x.shape[1], i.x.shape[2], i.w.shape[1] / 4,
                              call.seq.S};
        BlockLSTMBwdArgs<T> a = lstm_bwd_args<T>(i, data<T>(i.h), use_peephole, layout);
        a.x_grad = data<T>(o.x_grad);
        a.cs_prev_grad = data<T>(o.cs_prev_grad);
        a.h_prev_grad = data<T>(o.h_prev_grad);
        a.w_grad = data<T>(o.w_grad);
        a.wci_grad = data<T>(o.wci_grad);
        a.wcf_grad = data<T>(o.wcf_grad);
        a.wco_grad = data<T>(o.wco_grad);
        a.b_grad = data<T>(o.b_grad);
        detail::lstm_bwd<T>(ctx, d, a, {});
      });
}

// ---- GRU --------------------------------------------------------------------------------------

// GRUBlockCellGrad (d_c_bar and d_r_bar_u_bar as outputs) or gradients.GRUBlockCell (full).
template <typename T, class Out>
void gru_cell_bwd(const Ctx& ctx, const GRUBlockCellGradInputs& i, const Out& o) {
  const std::int64_t B = i.x.shape[0], I = i.x.shape[1], H = i.h_prev.shape[1];
  BlockGRUBwdArgs<T> a{.x = data<T>(i.x),
                       .h_prev = data<T>(i.h_prev),
                       .w_ru = data<T>(i.w_ru),
                       .w_c = data<T>(i.w_c),
                       .r = data<T>(i.r),
                       .u = data<T>(i.u),
                       .c = data<T>(i.c),
                       .h = nullptr,
                       .h_grad = data<T>(i.d_h),
                       .x_grad = nullptr,
                       .h_prev_grad = nullptr,
                       .w_ru_grad = nullptr,
                       .w_c_grad = nullptr,
                       .b_ru_grad = nullptr,
                       .b_c_grad = nullptr};
  detail::GRUBwdExtra<T> extra;
  extra.cell = true;
  if constexpr (std::is_same_v<Out, GRUBlockCellBackwardOutputs>) {
    extra.full = true;
    a.x_grad = data<T>(o.x);
    a.h_prev_grad = data<T>(o.h_prev);
    a.w_ru_grad = data<T>(o.w_ru);
    a.w_c_grad = data<T>(o.w_c);
    a.b_ru_grad = data<T>(o.b_ru);
    a.b_c_grad = data<T>(o.b_c);
  } else {
    extra.full = false;
    a.x_grad = data<T>(o.d_x);
    a.h_prev_grad = data<T>(o.d_h_prev);
    extra.d_c_bar = data<T>(o.d_c_bar);
    extra.d_r_bar_u_bar = data<T>(o.d_r_bar_u_bar);
  }
  detail::gru_bwd<T>(ctx, {1, B, I, H, 1}, a, extra);
}

template <class In>
BlockGRUDims gru_seq_dims(const In& i) {
  return {i.x.shape[0], i.x.shape[1], i.x.shape[2], i.h_prev.shape[1],
          core::read_int64_scalar(i.seq_len_max_tensor)};
}

}  // namespace

// ---- public -----------------------------------------------------------------------------------

void set_math_mode(MathMode mode) {
  g_math_mode.store(static_cast<int>(mode));
}
MathMode get_math_mode() {
  return static_cast<MathMode>(g_math_mode.load());
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the runtime's last-error state
    return 0;
  }
  return n;
}

void gru_block_cell(const GRUBlockCellInputs& in, const GRUBlockCellOutputs& out,
                    cudaStream_t stream) {
  run(ops::kGRUBlockCell, in, out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const GRUBlockCellInputs& i, const GRUBlockCellOutputs& o,
                      DType) {
        const std::int64_t B = i.x.shape[0], I = i.x.shape[1], H = i.h_prev.shape[1];
        detail::gru_fwd<T>(ctx, {1, B, I, H, 1},
                           {.x = data<T>(i.x),
                            .h_prev = data<T>(i.h_prev),
                            .w_ru = data<T>(i.w_ru),
                            .w_c = data<T>(i.w_c),
                            .b_ru = data<T>(i.b_ru),
                            .b_c = data<T>(i.b_c),
                            .r = data<T>(o.r),
                            .u = data<T>(o.u),
                            .c = data<T>(o.c),
                            .h = data<T>(o.h)});
      });
}

void gru_block_cell_grad(const GRUBlockCellGradInputs& in, const GRUBlockCellGradOutputs& out,
                         cudaStream_t stream) {
  run(ops::kGRUBlockCellGrad, in, out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const GRUBlockCellGradInputs& i,
                      const GRUBlockCellGradOutputs& o, DType) { gru_cell_bwd<T>(ctx, i, o); });
}

void gru_block_cell_backward(const GRUBlockCellBackwardInputs& in,
                             const GRUBlockCellBackwardOutputs& out, cudaStream_t stream) {
  run(ops::kGRUBlockCellBackward, in, out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const GRUBlockCellGradInputs& i,
                      const GRUBlockCellBackwardOutputs& o, DType) { gru_cell_bwd<T>(ctx, i, o); });
}

void lstm_block_cell(const LSTMBlockCellInputs& in, const LSTMBlockCellOutputs& out,
                     const LSTMBlockCellAttrs& attrs, cudaStream_t stream) {
  const ops::WithPeepholes<LSTMBlockCellInputs> p("LSTMBlockCell", in, attrs.use_peephole, 2);
  run(ops::kLSTMBlockCell, p.in, out, attrs,
      peepholes_unless<LSTMBlockCellInputs>(attrs.use_peephole), stream,
      [&]<typename T>(const Ctx& ctx, const LSTMBlockCellInputs& i, const LSTMBlockCellOutputs& o,
                      DType dtype) {
        const std::int64_t B = i.x.shape[0], I = i.x.shape[1], H = i.cs_prev.shape[1];
        detail::lstm_fwd<T>(ctx, {1, B, I, H, 1},
                            lstm_fwd_args<T>(i, o, LSTMLayout::kICFO, attrs.forget_bias,
                                             attrs.cell_clip, attrs.use_peephole, dtype));
      });
}

void lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, const LSTMBlockCellGradOutputs& out,
                          bool use_peephole, cudaStream_t stream) {
  const ops::WithPeepholes<LSTMBlockCellGradInputs> p("LSTMBlockCellGrad", in, use_peephole, 2);
  run(ops::kLSTMBlockCellGrad, p.in, out, {use_peephole},
      peepholes_unless<LSTMBlockCellGradInputs>(use_peephole), stream,
      [&]<typename T>(const Ctx& ctx, const LSTMBlockCellGradInputs& i,
                      const LSTMBlockCellGradOutputs& o,
                      DType) { lstm_cell_bwd<T>(ctx, i, o, use_peephole); });
}

void lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                              const LSTMBlockCellBackwardOutputs& out,
                              const LSTMBlockCellAttrs& attrs, cudaStream_t stream) {
  const ops::WithPeepholes<LSTMBlockCellGradInputs> p("gradients.LSTMBlockCell", in,
                                                      attrs.use_peephole, 2);
  run(ops::kLSTMBlockCellBackward, p.in, out, attrs,
      peepholes_unless<LSTMBlockCellGradInputs>(attrs.use_peephole), stream,
      [&]<typename T>(const Ctx& ctx, const LSTMBlockCellGradInputs& i,
                      const LSTMBlockCellBackwardOutputs& o,
                      DType) { lstm_cell_bwd<T>(ctx, i, o, attrs.use_peephole); });
}

void block_lstm(const BlockLSTMInputs& in, const BlockLSTMOutputs& out, const BlockLSTMAttrs& attrs,
                cudaStream_t stream) {
  lstm_seq_fwd(ops::kBlockLSTM, LSTMLayout::kICFO, in, out, attrs.forget_bias, attrs, stream);
}

void block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                   const BlockLSTMV2Attrs& attrs, cudaStream_t stream) {
  lstm_seq_fwd(ops::kBlockLSTMV2, LSTMLayout::kIFCO, in, out, 0.0, attrs, stream);
}

void block_lstm_grad(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                     bool use_peephole, cudaStream_t stream) {
  lstm_seq_bwd(ops::kBlockLSTMGrad, LSTMLayout::kICFO, in, out, use_peephole, stream);
}

void block_lstm_grad_v2(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                        bool use_peephole, cudaStream_t stream) {
  lstm_seq_bwd(ops::kBlockLSTMGradV2, LSTMLayout::kIFCO, in, out, use_peephole, stream);
}

void block_gru(const BlockGRUInputs& in, const BlockGRUOutputs& out, cudaStream_t stream) {
  refuse_seq_lengths("BlockGRU", in.seq_lengths);
  using In = ops::SeqInputs<BlockGRUInputs>;
  run(ops::kBlockGRU, ops::SeqCall(in).in, out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const In& i, const BlockGRUOutputs& o, DType) {
        detail::gru_fwd<T>(ctx, gru_seq_dims(i),
                           {.x = data<T>(i.x),
                            .h_prev = data<T>(i.h_prev),
                            .w_ru = data<T>(i.w_ru),
                            .w_c = data<T>(i.w_c),
                            .b_ru = data<T>(i.b_ru),
                            .b_c = data<T>(i.b_c),
                            .r = data<T>(o.r),
                            .u = data<T>(o.u),
                            .c = data<T>(o.c),
                            .h = data<T>(o.h)});
      });
}

void block_gru_grad(const BlockGRUGradInputs& in, const BlockGRUGradOutputs& out,
                    cudaStream_t stream) {
  refuse_seq_lengths("BlockGRUGrad", in.seq_lengths);
  using In = ops::SeqInputs<BlockGRUGradInputs>;
  run(ops::kBlockGRUGrad, ops::SeqCall(in).in, out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const In& i, const BlockGRUGradOutputs& o, DType) {
        detail::gru_bwd<T>(ctx, gru_seq_dims(i),
                           {.x = data<T>(i.x),
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
                            .b_c_grad = data<T>(o.b_c_grad)},
                           {});
      });
}

void block_gru_reset_after(const BlockGRUResetAfterInputs& in, const BlockGRUResetAfterOutputs& out,
                           cudaStream_t stream) {
  refuse_seq_lengths("BlockGRUResetAfter", in.seq_lengths);
  using In = ops::SeqInputs<BlockGRUResetAfterInputs>;
  run(ops::kBlockGRUResetAfter, ops::seq_inputs(in), out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const In& i, const BlockGRUResetAfterOutputs& o, DType) {
        detail::gru_reset_after_fwd<T>(ctx, gru_seq_dims(i),
                                       {.x = data<T>(i.x),
                                        .h_prev = data<T>(i.h_prev),
                                        .w_i = data<T>(i.w_i),
                                        .w_h = data<T>(i.w_h),
                                        .b_i = data<T>(i.b_i),
                                        .b_h = data<T>(i.b_h),
                                        .r = data<T>(o.r),
                                        .u = data<T>(o.u),
                                        .n = data<T>(o.n),
                                        .hn = data<T>(o.hn),
                                        .h = data<T>(o.h)});
      });
}

void block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in,
                                const BlockGRUResetAfterGradOutputs& out, cudaStream_t stream) {
  refuse_seq_lengths("BlockGRUResetAfterGrad", in.seq_lengths);
  using In = ops::SeqInputs<BlockGRUResetAfterGradInputs>;
  run(ops::kBlockGRUResetAfterGrad, ops::seq_inputs(in), out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const In& i, const BlockGRUResetAfterGradOutputs& o, DType) {
        detail::gru_reset_after_bwd<T>(ctx, gru_seq_dims(i),
                                       {.x = data<T>(i.x),
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
                                        .b_h_grad = data<T>(o.b_h_grad)});
      });
}

}  // namespace blockrnn::cuda
