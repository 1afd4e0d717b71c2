// The entry points of blockrnn/cuda.h: the typed API's defaults, then the CPU path's own
// validation (infer_outputs and core::check_outputs: the same checks in the same order, the same
// messages), then the CUDA-only checks (device memory), then the kernels of src/cuda/kernels.cu
// on the caller's stream. Validation reads no tensor data: only the host integer seq_len_max.
//
// Plain C++ (compiled by the host compiler, not nvcc): only the CUDA runtime and cuBLAS APIs.
#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/cuda.h"
#include "blockrnn/error.h"
#include "blockrnn/ops.h"
#include "core/validate.h"
#include "cuda/kernels.h"
#include "ops/lstm_attrs.h"
#include "ops/typed_defaults.h"

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

// Outputs must not overlap inputs or each other (the CPU path's rule, src/core/registry.cc).
void check_no_alias(const OpDef& def, std::span<const TensorView> inputs,
                    std::span<const MutableTensorView> outputs) {
  auto range = [](const TensorView& t) {
    const auto begin = reinterpret_cast<std::uintptr_t>(t.data);
    return std::pair<std::uintptr_t, std::uintptr_t>(begin, begin + bytes_of(t));
  };
  auto overlap = [](auto a, auto b) { return a.first < b.second && b.first < a.second; };
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const auto o = range(outputs[k]);
    if (o.first == o.second) continue;
    for (std::size_t j = 0; j < inputs.size(); ++j) {
      const auto i = range(inputs[j]);
      if (i.first != i.second && overlap(o, i)) {
        throw Error(ErrorCode::kInvalidArgument, def.name + ": output " + def.outputs[k] +
                                                     " overlaps input " + def.inputs[j] +
                                                     " in memory; outputs must not alias inputs");
      }
    }
    for (std::size_t j = 0; j < k; ++j) {
      const auto p = range(outputs[j]);
      if (p.first != p.second && overlap(o, p)) {
        throw Error(ErrorCode::kInvalidArgument, def.name + ": outputs " + def.outputs[j] +
                                                     " and " + def.outputs[k] +
                                                     " overlap in memory");
      }
    }
  }
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

// Typed device pointers in the op's input and output order; skipped and non-floating inputs are
// null.
template <typename T>
struct Ptrs {
  std::vector<const T*> in;
  std::vector<T*> out;
};

// A validated call: the op's inputs (the typed API's defaults applied), attrs, outputs, and
// which inputs are never read (the stand-in zeros of omitted peephole vectors, host memory).
struct Call {
  const char* op;
  std::span<const TensorView> in;
  AttrMap attrs;
  std::span<const MutableTensorView> out;
  std::vector<bool> unread;  // per input; empty: every floating input is read
};

// Validates (the CPU path's checks, then device memory) and runs f.template operator()<T>(ctx,
// ptrs, dtype) with T = float or double; float16 is staged through float32 device workspace.
template <typename F>
void run(const Call& c, cudaStream_t stream, F&& f) {
  const OutputSpec spec = infer_outputs(c.op, c.in, c.attrs);
  const OpDef& def = find_op(c.op);
  std::vector<const char*> names;
  for (const std::string& n : def.outputs) names.push_back(n.c_str());
  core::check_outputs(c.op, names, spec.dtype, spec.shapes, c.out);
  auto unread = [&](std::size_t k) {
    return !is_floating(c.in[k].dtype) || (!c.unread.empty() && c.unread[k]);
  };
  // Empty work (h_prev without elements, as the CPU path): every output is zeros.
  bool empty = false;
  for (std::size_t k = 0; k < def.inputs.size(); ++k) {
    if (def.inputs[k] == "h_prev") empty = c.in[k].shape.num_elements() == 0;
  }
  if (!empty) check_no_alias(def, c.in, c.out);
  if (device_count() == 0) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(c.op) + ": no CUDA device is available (blockrnn/cuda.h needs one)");
  }
  for (std::size_t k = 0; k < c.out.size(); ++k) {
    if (c.out[k].shape.num_elements() > 0) {
      check_device_memory(c.op, "output ", def.outputs[k], c.out[k].data);
    }
  }
  const Ctx ctx = make_ctx(c.op, stream);
  if (empty) {
    for (const MutableTensorView& o : c.out) {
      if (bytes_of(o) > 0) {
        check_cuda(c.op, cudaMemsetAsync(o.data, 0, bytes_of(o), stream), "cudaMemsetAsync");
      }
    }
    return;
  }
  for (std::size_t k = 0; k < c.in.size(); ++k) {
    if (!unread(k) && c.in[k].shape.num_elements() > 0) {
      check_device_memory(c.op, "", def.inputs[k], c.in[k].data);
    }
  }
  switch (spec.dtype) {
    case DType::kFloat32:
    case DType::kFloat64: {
      auto go = [&]<typename T>() {
        Ptrs<T> p;
        for (std::size_t k = 0; k < c.in.size(); ++k) {
          p.in.push_back(unread(k) ? nullptr : static_cast<const T*>(c.in[k].data));
        }
        for (const MutableTensorView& o : c.out) p.out.push_back(static_cast<T*>(o.data));
        f.template operator()<T>(ctx, p, spec.dtype);
      };
      if (spec.dtype == DType::kFloat32) {
        go.template operator()<float>();
      } else {
        go.template operator()<double>();
      }
      return;
    }
    case DType::kFloat16: {
      // float32 staging in one workspace: the inputs read, then every output.
      std::size_t total = 0;
      for (std::size_t k = 0; k < c.in.size(); ++k) {
        if (!unread(k)) total += c.in[k].shape.num_elements();
      }
      for (const MutableTensorView& o : c.out) total += o.shape.num_elements();
      Workspace ws(ctx, sizeof(float) * total);
      float* next = ws.as<float>();
      Ptrs<float> p;
      for (std::size_t k = 0; k < c.in.size(); ++k) {
        if (unread(k)) {
          p.in.push_back(nullptr);
          continue;
        }
        const std::int64_t n = c.in[k].shape.num_elements();
        detail::half_to_float(ctx, c.in[k].data, next, n);
        p.in.push_back(next);
        next += n;
      }
      for (const MutableTensorView& o : c.out) {
        p.out.push_back(next);
        next += o.shape.num_elements();
      }
      f.template operator()<float>(ctx, p, spec.dtype);
      for (std::size_t k = 0; k < c.out.size(); ++k) {
        detail::float_to_half(ctx, p.out[k], c.out[k].data, c.out[k].shape.num_elements());
      }
      return;
    }
    case DType::kInt64:
      break;
  }
  throw Error(ErrorCode::kInternal, std::string(c.op) + ": not a floating dtype");
}

std::int64_t dim_or(const TensorView& t, int rank, int i) {
  return t.shape.rank() == rank ? t.shape[i] : -1;
}
std::int64_t cell_size_of_w(const TensorView& w) {
  if (w.shape.rank() != 2 || w.shape[1] <= 0 || w.shape[1] % 4 != 0) return -1;
  return w.shape[1] / 4;
}

// Omitted peephole vectors without use_peephole: the CPU API's stand-in (host zeros, for
// validation only; the kernels never read them).
std::vector<bool> peephole_unread(std::size_t n, std::size_t first, bool use_peephole) {
  std::vector<bool> unread(n, false);
  if (!use_peephole) {
    for (std::size_t k = first; k < first + 3; ++k) unread[k] = true;
  }
  return unread;
}

AttrMap lstm_attr_map(double forget_bias, double cell_clip, bool use_peephole) {
  return {{"forget_bias", forget_bias},
          {"cell_clip", cell_clip},
          {"use_peephole", use_peephole ? 1.0 : 0.0}};
}

// ---- LSTM -------------------------------------------------------------------------------------

// Inputs of the LSTM cell ops, in the op's order (x, cs_prev, h_prev, w, wci, wcf, wco, b[, i,
// cs, f, o, ci, co, cs_grad, h_grad]).
struct LSTMCellViews {
  std::vector<TensorView> v;
  std::unique_ptr<ops::PeepholeDefaults> peep;
  LSTMCellViews(const char* op, const LSTMBlockCellGradInputs* g, const LSTMBlockCellInputs* f,
                bool use_peephole) {
    if (f != nullptr) {
      v = {f->x, f->cs_prev, f->h_prev, f->w, f->wci, f->wcf, f->wco, f->b};
    } else {
      v = {g->x, g->cs_prev, g->h_prev, g->w, g->wci, g->wcf, g->wco,     g->b,
           g->i, g->cs,      g->f,      g->o, g->ci,  g->co,  g->cs_grad, g->h_grad};
    }
    peep = std::make_unique<ops::PeepholeDefaults>(op, use_peephole, dim_or(v[0], 2, 1),
                                                   dim_or(v[1], 2, 1), v[3], v[0].dtype, &v[4],
                                                   &v[5], &v[6]);
  }
};

template <typename T>
void lstm_cell_bwd_call(const Ctx& ctx, const Ptrs<T>& p, const LSTMBlockCellGradInputs& in,
                        bool use_peephole, bool full) {
  const std::int64_t B = in.x.shape[0], I = in.x.shape[1], H = in.cs_prev.shape[1];
  BlockLSTMBwdArgs<T> a{p.in[0],  p.in[1], p.in[2],  p.in[3],  p.in[4],  p.in[5],
                        p.in[6],  p.in[8], p.in[9],  p.in[10], p.in[11], p.in[12],
                        p.in[13], nullptr, p.in[14], p.in[15], nullptr,  nullptr,
                        nullptr,  nullptr, nullptr,  nullptr,  nullptr,  nullptr};
  a.use_peephole = use_peephole;
  a.layout = LSTMLayout::kICFO;
  detail::LSTMBwdExtra<T> extra;
  extra.cell = true;
  extra.full = full;
  if (full) {  // outputs x, cs_prev, h_prev, w, wci, wcf, wco, b
    a.x_grad = p.out[0];
    a.cs_prev_grad = p.out[1];
    a.h_prev_grad = p.out[2];
    a.w_grad = p.out[3];
    a.wci_grad = p.out[4];
    a.wcf_grad = p.out[5];
    a.wco_grad = p.out[6];
    a.b_grad = p.out[7];
  } else {  // outputs cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad
    a.cs_prev_grad = p.out[0];
    extra.dgates = p.out[1];
    a.wci_grad = p.out[2];
    a.wcf_grad = p.out[3];
    a.wco_grad = p.out[4];
  }
  detail::lstm_bwd<T>(ctx, {1, B, I, H, 1}, a, extra);
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

void lstm_seq_fwd(const char* op, LSTMLayout layout, const BlockLSTMInputs& in,
                  const BlockLSTMOutputs& out, double forget_bias, double cell_clip,
                  bool use_peephole, AttrMap attrs, cudaStream_t stream) {
  refuse_seq_lengths(op, in.seq_lengths);
  std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  std::vector<TensorView> v = {
      TensorView(&S, Shape{}), in.x, in.cs_prev, in.h_prev, in.w, in.wci, in.wcf, in.wco, in.b};
  const ops::PeepholeDefaults peep(op, use_peephole, dim_or(in.x, 3, 2), dim_or(in.cs_prev, 2, 1),
                                   in.w, in.x.dtype, &v[5], &v[6], &v[7]);
  const MutableTensorView outs[] = {out.i, out.cs, out.f, out.o, out.ci, out.co, out.h};
  const Call c{op, v, std::move(attrs), outs, peephole_unread(v.size(), 5, use_peephole)};
  run(c, stream, [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType dtype) {
    const BlockLSTMDims d{in.x.shape[0], in.x.shape[1], in.x.shape[2], in.cs_prev.shape[1], S};
    BlockLSTMFwdArgs<T> a{p.in[1],  p.in[2],  p.in[3],  p.in[4],  p.in[5],
                          p.in[6],  p.in[7],  p.in[8],  p.out[0], p.out[1],
                          p.out[2], p.out[3], p.out[4], p.out[5], p.out[6]};
    a.forget_bias = ops::attr_in_dtype<T>(forget_bias, dtype);
    a.cell_clip = ops::clip_in_dtype<T>(cell_clip, dtype);
    a.use_peephole = use_peephole;
    a.layout = layout;
    detail::lstm_fwd<T>(ctx, d, a);
  });
}

void lstm_seq_bwd(const char* op, LSTMLayout layout, const BlockLSTMGradInputs& in,
                  const BlockLSTMGradOutputs& out, bool use_peephole, cudaStream_t stream) {
  refuse_seq_lengths(op, in.seq_lengths);
  std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  std::vector<TensorView> v = {TensorView(&S, Shape{}),
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
                               in.h_grad};
  const ops::PeepholeDefaults peep(op, use_peephole, dim_or(in.x, 3, 2), cell_size_of_w(in.w), in.w,
                                   in.x.dtype, &v[5], &v[6], &v[7]);
  const MutableTensorView outs[] = {out.x_grad,   out.cs_prev_grad, out.h_prev_grad, out.w_grad,
                                    out.wci_grad, out.wcf_grad,     out.wco_grad,    out.b_grad};
  const Call c{op,
               v,
               {{"use_peephole", use_peephole ? 1.0 : 0.0}},
               outs,
               peephole_unread(v.size(), 5, use_peephole)};
  run(c, stream, [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
    const BlockLSTMDims d{in.x.shape[0], in.x.shape[1], in.x.shape[2], in.w.shape[1] / 4, S};
    BlockLSTMBwdArgs<T> a{p.in[1],  p.in[2],  p.in[3],  p.in[4],  p.in[5],  p.in[6],
                          p.in[7],  p.in[9],  p.in[10], p.in[11], p.in[12], p.in[13],
                          p.in[14], p.in[15], p.in[16], p.in[17], p.out[0], p.out[1],
                          p.out[2], p.out[3], p.out[4], p.out[5], p.out[6], p.out[7]};
    a.use_peephole = use_peephole;
    a.layout = layout;
    detail::lstm_bwd<T>(ctx, d, a, {});
  });
}

// ---- GRU --------------------------------------------------------------------------------------

std::vector<TensorView> gru_cell_views(const GRUBlockCellGradInputs& in) {
  return {in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c, in.r, in.u, in.c, in.d_h};
}

template <typename T>
void gru_cell_bwd_call(const Ctx& ctx, const Ptrs<T>& p, const GRUBlockCellGradInputs& in,
                       bool full) {
  const std::int64_t B = in.x.shape[0], I = in.x.shape[1], H = in.h_prev.shape[1];
  BlockGRUBwdArgs<T> a{p.in[0], p.in[1],  p.in[2],  p.in[3], p.in[6], p.in[7], p.in[8], nullptr,
                       p.in[9], p.out[0], p.out[1], nullptr, nullptr, nullptr, nullptr};
  detail::GRUBwdExtra<T> extra;
  extra.cell = true;
  extra.full = full;
  if (full) {  // outputs x, h_prev, w_ru, w_c, b_ru, b_c
    a.w_ru_grad = p.out[2];
    a.w_c_grad = p.out[3];
    a.b_ru_grad = p.out[4];
    a.b_c_grad = p.out[5];
  } else {  // outputs d_x, d_h_prev, d_c_bar, d_r_bar_u_bar
    extra.d_c_bar = p.out[2];
    extra.d_r_bar_u_bar = p.out[3];
  }
  detail::gru_bwd<T>(ctx, {1, B, I, H, 1}, a, extra);
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
  const TensorView v[] = {in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c};
  const MutableTensorView outs[] = {out.r, out.u, out.c, out.h};
  run(Call{"GRUBlockCell", v, {}, outs, {}}, stream,
      [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
        const std::int64_t B = in.x.shape[0], I = in.x.shape[1], H = in.h_prev.shape[1];
        const BlockGRUFwdArgs<T> a{p.in[0], p.in[1],  p.in[2],  p.in[3],  p.in[4],
                                   p.in[5], p.out[0], p.out[1], p.out[2], p.out[3]};
        detail::gru_fwd<T>(ctx, {1, B, I, H, 1}, a);
      });
}

void gru_block_cell_grad(const GRUBlockCellGradInputs& in, const GRUBlockCellGradOutputs& out,
                         cudaStream_t stream) {
  const std::vector<TensorView> v = gru_cell_views(in);
  const MutableTensorView outs[] = {out.d_x, out.d_h_prev, out.d_c_bar, out.d_r_bar_u_bar};
  run(Call{"GRUBlockCellGrad", v, {}, outs, {}}, stream,
      [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
        gru_cell_bwd_call<T>(ctx, p, in, false);
      });
}

void gru_block_cell_backward(const GRUBlockCellBackwardInputs& in,
                             const GRUBlockCellBackwardOutputs& out, cudaStream_t stream) {
  const std::vector<TensorView> v = gru_cell_views(in);
  const MutableTensorView outs[] = {out.x, out.h_prev, out.w_ru, out.w_c, out.b_ru, out.b_c};
  run(Call{"gradients.GRUBlockCell", v, {}, outs, {}}, stream,
      [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
        gru_cell_bwd_call<T>(ctx, p, in, true);
      });
}

void lstm_block_cell(const LSTMBlockCellInputs& in, const LSTMBlockCellOutputs& out,
                     const LSTMBlockCellAttrs& attrs, cudaStream_t stream) {
  const LSTMCellViews v("LSTMBlockCell", nullptr, &in, attrs.use_peephole);
  const MutableTensorView outs[] = {out.i, out.cs, out.f, out.o, out.ci, out.co, out.h};
  const Call c{"LSTMBlockCell", v.v,
               lstm_attr_map(attrs.forget_bias, attrs.cell_clip, attrs.use_peephole), outs,
               peephole_unread(v.v.size(), 4, attrs.use_peephole)};
  run(c, stream, [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType dtype) {
    const std::int64_t B = in.x.shape[0], I = in.x.shape[1], H = in.cs_prev.shape[1];
    BlockLSTMFwdArgs<T> a{p.in[0],  p.in[1],  p.in[2],  p.in[3],  p.in[4],
                          p.in[5],  p.in[6],  p.in[7],  p.out[0], p.out[1],
                          p.out[2], p.out[3], p.out[4], p.out[5], p.out[6]};
    a.forget_bias = ops::attr_in_dtype<T>(attrs.forget_bias, dtype);
    a.cell_clip = ops::clip_in_dtype<T>(attrs.cell_clip, dtype);
    a.use_peephole = attrs.use_peephole;
    a.layout = LSTMLayout::kICFO;
    detail::lstm_fwd<T>(ctx, {1, B, I, H, 1}, a);
  });
}

void lstm_block_cell_grad(const LSTMBlockCellGradInputs& in, const LSTMBlockCellGradOutputs& out,
                          bool use_peephole, cudaStream_t stream) {
  const LSTMCellViews v("LSTMBlockCellGrad", &in, nullptr, use_peephole);
  const MutableTensorView outs[] = {out.cs_prev_grad, out.dicfo, out.wci_grad, out.wcf_grad,
                                    out.wco_grad};
  const Call c{"LSTMBlockCellGrad",
               v.v,
               {{"use_peephole", use_peephole ? 1.0 : 0.0}},
               outs,
               peephole_unread(v.v.size(), 4, use_peephole)};
  run(c, stream, [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
    lstm_cell_bwd_call<T>(ctx, p, in, use_peephole, false);
  });
}

void lstm_block_cell_backward(const LSTMBlockCellBackwardInputs& in,
                              const LSTMBlockCellBackwardOutputs& out,
                              const LSTMBlockCellAttrs& attrs, cudaStream_t stream) {
  const LSTMCellViews v("gradients.LSTMBlockCell", &in, nullptr, attrs.use_peephole);
  const MutableTensorView outs[] = {out.x,   out.cs_prev, out.h_prev, out.w,
                                    out.wci, out.wcf,     out.wco,    out.b};
  const Call c{"gradients.LSTMBlockCell", v.v,
               lstm_attr_map(attrs.forget_bias, attrs.cell_clip, attrs.use_peephole), outs,
               peephole_unread(v.v.size(), 4, attrs.use_peephole)};
  run(c, stream, [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
    lstm_cell_bwd_call<T>(ctx, p, in, attrs.use_peephole, true);
  });
}

void block_lstm(const BlockLSTMInputs& in, const BlockLSTMOutputs& out, const BlockLSTMAttrs& attrs,
                cudaStream_t stream) {
  lstm_seq_fwd("BlockLSTM", LSTMLayout::kICFO, in, out, attrs.forget_bias, attrs.cell_clip,
               attrs.use_peephole,
               lstm_attr_map(attrs.forget_bias, attrs.cell_clip, attrs.use_peephole), stream);
}

void block_lstm_v2(const BlockLSTMInputs& in, const BlockLSTMOutputs& out,
                   const BlockLSTMV2Attrs& attrs, cudaStream_t stream) {
  lstm_seq_fwd("BlockLSTMV2", LSTMLayout::kIFCO, in, out, 0.0, attrs.cell_clip, attrs.use_peephole,
               {{"cell_clip", attrs.cell_clip}, {"use_peephole", attrs.use_peephole ? 1.0 : 0.0}},
               stream);
}

void block_lstm_grad(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                     bool use_peephole, cudaStream_t stream) {
  lstm_seq_bwd("BlockLSTMGrad", LSTMLayout::kICFO, in, out, use_peephole, stream);
}

void block_lstm_grad_v2(const BlockLSTMGradInputs& in, const BlockLSTMGradOutputs& out,
                        bool use_peephole, cudaStream_t stream) {
  lstm_seq_bwd("BlockLSTMGradV2", LSTMLayout::kIFCO, in, out, use_peephole, stream);
}

void block_gru(const BlockGRUInputs& in, const BlockGRUOutputs& out, cudaStream_t stream) {
  refuse_seq_lengths("BlockGRU", in.seq_lengths);
  std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  const TensorView v[] = {
      TensorView(&S, Shape{}), in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c};
  const MutableTensorView outs[] = {out.r, out.u, out.c, out.h};
  run(Call{"BlockGRU", v, {}, outs, {}}, stream,
      [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
        const BlockGRUDims d{in.x.shape[0], in.x.shape[1], in.x.shape[2], in.h_prev.shape[1], S};
        const BlockGRUFwdArgs<T> a{p.in[1], p.in[2],  p.in[3],  p.in[4],  p.in[5],
                                   p.in[6], p.out[0], p.out[1], p.out[2], p.out[3]};
        detail::gru_fwd<T>(ctx, d, a);
      });
}

void block_gru_grad(const BlockGRUGradInputs& in, const BlockGRUGradOutputs& out,
                    cudaStream_t stream) {
  refuse_seq_lengths("BlockGRUGrad", in.seq_lengths);
  std::int64_t S = ops::seq_len_or_time(in.seq_len_max, in.x);
  const TensorView v[] = {TensorView(&S, Shape{}),
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
                          in.h_grad};
  const MutableTensorView outs[] = {out.x_grad,   out.h_prev_grad, out.w_ru_grad,
                                    out.w_c_grad, out.b_ru_grad,   out.b_c_grad};
  run(Call{"BlockGRUGrad", v, {}, outs, {}}, stream,
      [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
        const BlockGRUDims d{in.x.shape[0], in.x.shape[1], in.x.shape[2], in.h_prev.shape[1], S};
        const BlockGRUBwdArgs<T> a{p.in[1],  p.in[2],  p.in[3],  p.in[4],  p.in[7],
                                   p.in[8],  p.in[9],  p.in[10], p.in[11], p.out[0],
                                   p.out[1], p.out[2], p.out[3], p.out[4], p.out[5]};
        detail::gru_bwd<T>(ctx, d, a, {});
      });
}

void block_gru_reset_after(const BlockGRUResetAfterInputs& in, const BlockGRUResetAfterOutputs& out,
                           cudaStream_t stream) {
  refuse_seq_lengths("BlockGRUResetAfter", in.seq_lengths);
  const std::int64_t S = in.seq_len_max;
  const TensorView v[] = {TensorView(&S, Shape{}), in.x, in.h_prev, in.w_i, in.w_h, in.b_i, in.b_h};
  const MutableTensorView outs[] = {out.r, out.u, out.n, out.hn, out.h};
  run(Call{"BlockGRUResetAfter", v, {}, outs, {}}, stream,
      [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
        const BlockGRUDims d{in.x.shape[0], in.x.shape[1], in.x.shape[2], in.h_prev.shape[1], S};
        const BlockGRUResetAfterFwdArgs<T> a{p.in[1],  p.in[2],  p.in[3],  p.in[4],
                                             p.in[5],  p.in[6],  p.out[0], p.out[1],
                                             p.out[2], p.out[3], p.out[4]};
        detail::gru_reset_after_fwd<T>(ctx, d, a);
      });
}

void block_gru_reset_after_grad(const BlockGRUResetAfterGradInputs& in,
                                const BlockGRUResetAfterGradOutputs& out, cudaStream_t stream) {
  refuse_seq_lengths("BlockGRUResetAfterGrad", in.seq_lengths);
  const std::int64_t S = in.seq_len_max;
  const TensorView v[] = {TensorView(&S, Shape{}),
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
                          in.h_grad};
  const MutableTensorView outs[] = {out.x_grad,   out.h_prev_grad, out.w_i_grad,
                                    out.w_h_grad, out.b_i_grad,    out.b_h_grad};
  run(Call{"BlockGRUResetAfterGrad", v, {}, outs, {}}, stream,
      [&]<typename T>(const Ctx& ctx, const Ptrs<T>& p, DType) {
        const BlockGRUDims d{in.x.shape[0], in.x.shape[1], in.x.shape[2], in.h_prev.shape[1], S};
        const BlockGRUResetAfterBwdArgs<T> a{
            p.in[1],  p.in[2],  p.in[3],  p.in[4],  p.in[7],  p.in[8],  p.in[9],  p.in[10],
            p.in[11], p.in[12], p.out[0], p.out[1], p.out[2], p.out[3], p.out[4], p.out[5]};
        detail::gru_reset_after_bwd<T>(ctx, d, a);
      });
}

}  // namespace blockrnn::cuda
