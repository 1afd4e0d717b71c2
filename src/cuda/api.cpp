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
#include <type_traits>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/cuda.h"
#include "blockrnn/error.h"
#include "cuda/kernels.h"
#include "ops/kernel_args.h"
#include "ops/op_impl.h"
#include "ops/typed_ops.h"

namespace blockrnn::cuda {

namespace {

using detail::check_blas;
using detail::check_cuda;
using detail::Ctx;
using detail::Workspace;

std::atomic<int> g_math_mode{static_cast<int>(MathMode::kExactFP32)};
std::atomic<bool> g_step_graphs{false};

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

// The cuBLAS workspace of every call that runs a GEMM. cuBLAS guarantees bitwise identical
// results run to run only when a workspace is used by one stream at a time; with none set, a
// handle uses its own default pool across all the streams it is given. 4 MiB is the size of
// that default pool (cuBLAS recommends 32 MiB on Hopper for its fastest split-K algorithms; not
// measured here).
constexpr std::size_t kBlasWorkspaceBytes = std::size_t(4) << 20;

// The calling thread's handle on the current device, set to `stream` and the math mode. Every
// call sets the stream (cuBLAS keeps the last one given) and then, in run(), its own workspace.
Ctx make_ctx(const char* op, cudaStream_t stream) {
  thread_local Handles handles;
  Ctx ctx{op, stream, handles.get(op), get_math_mode() == MathMode::kTF32, get_step_graphs()};
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
  const core::CallShape p = op.call_shape(in, attrs);
  const char* out_names[core::kMaxOutputs];
  const std::span<const char* const> outputs = op.output_names(out_names);
  MutableTensorView outs[core::kMaxOutputs];
  for (std::size_t k = 0; k < outputs.size(); ++k) outs[k] = out.*op.outputs[k].view;
  const std::span<const MutableTensorView> out_views(outs, outputs.size());
  core::check_outputs(op.name, outputs, p.dtype, p.output_shapes(), out_views);
  // Whatever the size of the work: empty work still zero-fills the outputs, and some of them
  // (w_grad with B = 0) are not empty, so an output on an input would zero that input.
  {
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
  // cuBLAS's workspace for this call, on the call's stream (set after cublasSetStream, which
  // resets it): stream-ordered memory, so no two streams ever share a workspace.
  Workspace blas_workspace(ctx, kBlasWorkspaceBytes);
  check_blas(op.name, cublasSetWorkspace(ctx.blas, blas_workspace.as<void>(), kBlasWorkspaceBytes),
             "cublasSetWorkspace");
  Ctx call_ctx = ctx;  // with the workspace: a captured graph's GEMMs use it
  call_ctx.blas_workspace = blas_workspace.as<void>();
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
      return f.template operator()<float>(call_ctx, dev, out, p.dtype);
    case DType::kFloat64:
      return f.template operator()<double>(call_ctx, dev, out, p.dtype);
    case DType::kFloat16: {
      // float32 staging in one workspace: the inputs read, then every output.
      std::size_t total = 0;
      for (const TensorView* t : read) total += t->shape.num_elements();
      for (const MutableTensorView& o : out_views) total += o.shape.num_elements();
      Workspace ws(call_ctx, sizeof(float) * total);
      float* next = ws.as<float>();
      for (TensorView* t : read) {
        const std::int64_t n = t->shape.num_elements();
        detail::half_to_float(call_ctx, t->data, next, n);
        *t = TensorView(next, DType::kFloat32, t->shape);
        next += n;
      }
      Out staged = out;
      for (const auto& field : op.outputs) {
        MutableTensorView& o = staged.*field.view;
        o = MutableTensorView(next, DType::kFloat32, o.shape);
        next += o.shape.num_elements();
      }
      f.template operator()<float>(call_ctx, dev, staged, p.dtype);
      for (const auto& field : op.outputs) {
        const MutableTensorView& o = staged.*field.view;
        detail::float_to_half(call_ctx, data<float>(o), (out.*field.view).data,
                              o.shape.num_elements());
      }
      return;
    }
    case DType::kBFloat16:
      throw Error(ErrorCode::kUnimplemented,
                  std::string(op.name) + ": bfloat16 is not supported on the CUDA backend yet");
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

// LSTMBlockCellGrad (the gate gradient dicfo as an output) or gradients.LSTMBlockCell (full):
// the sequence kernel's one step, with the cell's gradients as the sequence grad's outputs.
struct LSTMCellAsStep : LSTMBlockCellGradInputs {
  TensorView h;  // a cell has no forward h input
};
template <typename T, class Out>
void lstm_cell_bwd(const Ctx& ctx, const LSTMBlockCellGradInputs& i, const Out& o,
                   bool use_peephole) {
  const std::int64_t B = i.x.shape[0], I = i.x.shape[1], H = i.cs_prev.shape[1];
  detail::LSTMBwdExtra<T> extra;
  extra.cell = true;
  BlockLSTMGradOutputs grads;
  if constexpr (std::is_same_v<Out, LSTMBlockCellBackwardOutputs>) {
    grads = {o.x, o.cs_prev, o.h_prev, o.w, o.wci, o.wcf, o.wco, o.b};
  } else {
    extra.full = false;
    extra.d_gates = data<T>(o.dicfo);
    grads.cs_prev_grad = o.cs_prev_grad;
    grads.wci_grad = o.wci_grad;
    grads.wcf_grad = o.wcf_grad;
    grads.wco_grad = o.wco_grad;
  }
  detail::lstm_bwd<T>(
      ctx, {1, B, I, H, 1},
      ops::block_lstm_bwd_args<T>(LSTMCellAsStep{i, {}}, grads, use_peephole, LSTMLayout::kICFO),
      extra);
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
        detail::lstm_fwd<T>(
            ctx, d,
            ops::lstm_fwd_args<BlockLSTMFwdArgs, T>(i, o, forget_bias, attrs.cell_clip,
                                                    attrs.use_peephole, layout, dtype));
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
        detail::lstm_bwd<T>(ctx, d, ops::block_lstm_bwd_args<T>(i, o, use_peephole, layout), {});
      });
}

// ---- GRU --------------------------------------------------------------------------------------

// GRUBlockCellGrad (d_c_bar and d_r_bar_u_bar as outputs) or gradients.GRUBlockCell (full): the
// sequence kernel's one step, with the cell's gradients as the sequence grad's outputs.
template <typename T, class Out>
void gru_cell_bwd(const Ctx& ctx, const GRUBlockCellGradInputs& i, const Out& o) {
  const std::int64_t B = i.x.shape[0], I = i.x.shape[1], H = i.h_prev.shape[1];
  detail::GRUBwdExtra<T> extra;
  extra.cell = true;
  const BlockGRUGradInputs step{.seq_len_max = {},
                                .x = i.x,
                                .h_prev = i.h_prev,
                                .w_ru = i.w_ru,
                                .w_c = i.w_c,
                                .b_ru = i.b_ru,
                                .b_c = i.b_c,
                                .r = i.r,
                                .u = i.u,
                                .c = i.c,
                                .h = {},
                                .h_grad = i.d_h,
                                .seq_lengths = {}};
  BlockGRUGradOutputs grads;
  if constexpr (std::is_same_v<Out, GRUBlockCellBackwardOutputs>) {
    grads = {o.x, o.h_prev, o.w_ru, o.w_c, o.b_ru, o.b_c};
  } else {
    extra.full = false;
    grads.x_grad = o.d_x;
    grads.h_prev_grad = o.d_h_prev;
    extra.d_c_bar = data<T>(o.d_c_bar);
    extra.d_r_bar_u_bar = data<T>(o.d_r_bar_u_bar);
  }
  detail::gru_bwd<T>(ctx, {1, B, I, H, 1}, ops::block_gru_bwd_args<T>(step, grads), extra);
}

// BlockGRU(Grad) and BlockGRUResetAfter(Grad) on their typed call `in`: seq_lengths refused first,
// then run() and the op's driver on the kernel arguments of its fields.
template <class Op>
void gru_seq(const Op& op, const typename Op::Inputs& in, const typename Op::Outputs& out,
             cudaStream_t stream) {
  using In = typename Op::Inputs;
  using Out = typename Op::Outputs;
  refuse_seq_lengths(op.name, in.seq_lengths);
  run(op, in, out, {}, {}, stream,
      [&]<typename T>(const Ctx& ctx, const In& i, const Out& o, DType) {
        const BlockGRUDims d{i.x.shape[0], i.x.shape[1], i.x.shape[2], i.h_prev.shape[1],
                             core::read_int64_scalar(i.seq_len_max_tensor)};
        if constexpr (std::is_same_v<Out, BlockGRUOutputs>) {
          detail::gru_fwd<T>(ctx, d, ops::gru_fwd_args<BlockGRUFwdArgs, T>(i, o));
        } else if constexpr (std::is_same_v<Out, BlockGRUGradOutputs>) {
          detail::gru_bwd<T>(ctx, d, ops::block_gru_bwd_args<T>(i, o), {});
        } else if constexpr (std::is_same_v<Out, BlockGRUResetAfterOutputs>) {
          detail::gru_reset_after_fwd<T>(ctx, d, ops::gru_reset_after_fwd_args<T>(i, o));
        } else {
          detail::gru_reset_after_bwd<T>(ctx, d, ops::gru_reset_after_bwd_args<T>(i, o));
        }
      });
}

// ---- by name ----------------------------------------------------------------------------------

// The typed call of `op` from the name-based one: each input and output view into its typed field
// (the op's own tables, in TensorFlow's order; omitted optional inputs stay absent), each given
// attr set through its field, then f(inputs, outputs, attrs). The caller validated the call
// (infer_outputs), so the counts and names match the tables.
template <class Op, class F>
void by_name(const Op& op, std::span<const TensorView> inputs, const AttrMap& attrs,
             std::span<const MutableTensorView> outputs, F&& f) {
  typename Op::Inputs in{};
  for (std::size_t k = 0; k < op.inputs.size() && k < inputs.size(); ++k) {
    in.*op.inputs[k].view = inputs[k];
  }
  typename Op::Outputs out{};
  for (std::size_t k = 0; k < op.outputs.size(); ++k) out.*op.outputs[k].view = outputs[k];
  typename Op::Attrs a{};
  for (const auto& field : op.attrs) {
    const auto given = attrs.find(field.name);
    if (given != attrs.end()) field.set(a, given->second);
  }
  f(in, out, a);
}

// A sequence op's typed struct from its name-based inputs: seq_len_max (TensorFlow's int64 scalar
// in host memory, validated by infer_outputs) into the typed field.
template <class Typed>
Typed typed_seq(const ops::SeqInputs<Typed>& in) {
  Typed typed = in;
  typed.seq_len_max = core::read_int64_scalar(in.seq_len_max_tensor);
  return typed;
}

}  // namespace

// ---- public -----------------------------------------------------------------------------------

void set_step_graphs(bool on) {
  g_step_graphs.store(on);
}
bool get_step_graphs() {
  return g_step_graphs.load();
}

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
        detail::gru_fwd<T>(ctx, {1, B, I, H, 1}, ops::gru_fwd_args<BlockGRUFwdArgs, T>(i, o));
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
        detail::lstm_fwd<T>(
            ctx, {1, B, I, H, 1},
            ops::lstm_fwd_args<BlockLSTMFwdArgs, T>(i, o, attrs.forget_bias, attrs.cell_clip,
                                                    attrs.use_peephole, LSTMLayout::kICFO, dtype));
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
  gru_seq(ops::kBlockGRU, ops::SeqCall(in).in, out, stream);
}

void block_gru_grad(const BlockGRUGradInputs& in, const BlockGRUGradOutputs& out,
                    cudaStream_t stream) {
  gru_seq(ops::kBlockGRUGrad, ops::SeqCall(in).in, out, stream);
}

void block_gru_reset_after(const BlockGRUResetAfterInputs& in, const BlockGRUResetAfterOutputs& out,
                           cudaStream_t stream) {
  gru_seq(ops::kBlockGRUResetAfter, ops::seq_inputs(in), out, stream);
}

void block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in,
                                const BlockGRUResetAfterGradOutputs& out, cudaStream_t stream) {
  gru_seq(ops::kBlockGRUResetAfterGrad, ops::seq_inputs(in), out, stream);
}

void run_op(const OpDef& op, std::span<const TensorView> inputs, const AttrMap& attrs,
            std::span<const MutableTensorView> outputs, cudaStream_t stream) {
  // The CPU path's validation of the whole call: an unknown op, the input count, names of attrs,
  // ranks, shapes, dtypes, seq_len_max; it reads no tensor data but the host seq_len_max.
  const OutputSpec spec = infer_outputs(op, inputs, attrs);
  if (outputs.size() != spec.shapes.size()) {
    throw Error(ErrorCode::kInvalidArgument, op.name + ": expected " +
                                                 std::to_string(spec.shapes.size()) +
                                                 " outputs, got " + std::to_string(outputs.size()));
  }
  const std::string& name = op.name;
  const auto seq = [&](const auto& typed_op, auto call) {
    by_name(typed_op, inputs, attrs, outputs,
            [&](const auto& in, const auto& out, const auto& a) { call(typed_seq(in), out, a); });
  };
  if (name == ops::kGRUBlockCell.name) {
    by_name(ops::kGRUBlockCell, inputs, attrs, outputs,
            [&](const auto& in, const auto& out, const auto&) { gru_block_cell(in, out, stream); });
  } else if (name == ops::kGRUBlockCellGrad.name) {
    by_name(ops::kGRUBlockCellGrad, inputs, attrs, outputs,
            [&](const auto& in, const auto& out, const auto&) {
              gru_block_cell_grad(in, out, stream);
            });
  } else if (name == ops::kGRUBlockCellBackward.name) {
    by_name(ops::kGRUBlockCellBackward, inputs, attrs, outputs,
            [&](const auto& in, const auto& out, const auto&) {
              gru_block_cell_backward(in, out, stream);
            });
  } else if (name == ops::kLSTMBlockCell.name) {
    by_name(ops::kLSTMBlockCell, inputs, attrs, outputs,
            [&](const auto& in, const auto& out, const auto& a) {
              lstm_block_cell(in, out, a, stream);
            });
  } else if (name == ops::kLSTMBlockCellGrad.name) {
    by_name(ops::kLSTMBlockCellGrad, inputs, attrs, outputs,
            [&](const auto& in, const auto& out, const auto& a) {
              lstm_block_cell_grad(in, out, a.use_peephole, stream);
            });
  } else if (name == ops::kLSTMBlockCellBackward.name) {
    by_name(ops::kLSTMBlockCellBackward, inputs, attrs, outputs,
            [&](const auto& in, const auto& out, const auto& a) {
              lstm_block_cell_backward(in, out, a, stream);
            });
  } else if (name == ops::kBlockLSTM.name) {
    seq(ops::kBlockLSTM,
        [&](const auto& in, const auto& out, const auto& a) { block_lstm(in, out, a, stream); });
  } else if (name == ops::kBlockLSTMV2.name) {
    seq(ops::kBlockLSTMV2,
        [&](const auto& in, const auto& out, const auto& a) { block_lstm_v2(in, out, a, stream); });
  } else if (name == ops::kBlockLSTMGrad.name) {
    seq(ops::kBlockLSTMGrad, [&](const auto& in, const auto& out, const auto& a) {
      block_lstm_grad(in, out, a.use_peephole, stream);
    });
  } else if (name == ops::kBlockLSTMGradV2.name) {
    seq(ops::kBlockLSTMGradV2, [&](const auto& in, const auto& out, const auto& a) {
      block_lstm_grad_v2(in, out, a.use_peephole, stream);
    });
  } else if (name == ops::kBlockGRU.name) {
    seq(ops::kBlockGRU,
        [&](const auto& in, const auto& out, const auto&) { block_gru(in, out, stream); });
  } else if (name == ops::kBlockGRUGrad.name) {
    seq(ops::kBlockGRUGrad,
        [&](const auto& in, const auto& out, const auto&) { block_gru_grad(in, out, stream); });
  } else if (name == ops::kBlockGRUResetAfter.name) {
    seq(ops::kBlockGRUResetAfter, [&](const auto& in, const auto& out, const auto&) {
      block_gru_reset_after(in, out, stream);
    });
  } else if (name == ops::kBlockGRUResetAfterGrad.name) {
    seq(ops::kBlockGRUResetAfterGrad, [&](const auto& in, const auto& out, const auto&) {
      block_gru_reset_after_grad(in, out, stream);
    });
  } else {
    throw Error(ErrorCode::kUnimplemented, name + ": has no CUDA entry point");
  }
}

}  // namespace blockrnn::cuda
