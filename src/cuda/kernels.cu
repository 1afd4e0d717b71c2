// The CUDA kernels of every op (docs/cuda.md, "Structure"): TensorFlow's structure, done with
// fewer launches and no atomics.
//   forward:  the input projection of all S steps as ONE cuBLAS GEMM ([S·B, I]·w_x), then per
//             step one recurrent GEMM accumulated into that step's slice (h[t−1]·w_h, beta = 1)
//             and one fused element-wise kernel; the reset-before GRU has two GEMM + kernel
//             pairs per step (r⊙h must exist before the candidate's product).
//   backward: per step t = S−1 … 0 the element-wise kernel(s) and the recurrent GEMM(s) of the
//             dh (and dcs) chain, storing each step's gate gradients; then d_x of all steps
//             and dW as one large GEMM each, and db (and the peephole gradients) as a two-level
//             fixed-order reduction over the S·B rows (colsum below): per-chunk partial sums,
//             then the partials in order, the order set by the number of rows alone. No
//             floating-point atomics anywhere, so results are identical run to run.
// Cells are one-step sequences (S = T = 1), with the cell kernels' exact gradient inputs.
// Element-wise arithmetic follows the groupings of src/ref/*.cc (the spec in code) and is
// compiled with -fmad=false (no FMA contraction). Activations are CUDA's exp/tanh (correctly
// rounded to within 1–2 ulp), so float results differ from the CPU's libm by a few ulp; the
// tests state the tolerances. cell_clip clips with std::min/std::max's NaN behaviour (a NaN cs
// stays NaN), only when cell_clip > 0 (NaN and ≤ 0 disable it).
#include <cuda_fp16.h>
#ifdef BLOCKRNN_CUDA_HOST_EMU
#include "cuda/emu/emu.h"  // kernel qualifiers, built-in variables, cuda_emu::launch
#endif

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "blockrnn/error.h"
#include "cuda/kernels.h"

namespace blockrnn::cuda::detail {

void check_cuda(const char* op, cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  const ErrorCode code =
      status == cudaErrorMemoryAllocation ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
  throw Error(code, std::string(op) + " (CUDA): " + what + " failed: " + cudaGetErrorName(status) +
                        " (" + cudaGetErrorString(status) + ")");
}

void check_blas(const char* op, cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const ErrorCode code =
      status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::kResourceExhausted : ErrorCode::kInternal;
  throw Error(code, std::string(op) + " (CUDA): " + what + " failed: " +
                        cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

Workspace::Workspace(const Ctx& ctx, std::size_t bytes) : ctx_(ctx) {
  if (bytes == 0) return;
  check_cuda(ctx.op, cudaMallocAsync(&ptr_, bytes, ctx.stream), "cudaMallocAsync (workspace)");
}

Workspace::~Workspace() {
  if (ptr_ != nullptr) cudaFreeAsync(ptr_, ctx_.stream);  // stream-ordered; errors surface later
}

// The column offsets (in units of H) of the LSTM's gate blocks in the op's layout. Outside the
// anonymous namespace: the drivers' per-step lambdas capture it.
struct Blocks {
  std::int64_t i, c, f, o;
};

namespace {

using i64 = std::int64_t;

// ---- launch helpers ---------------------------------------------------------------------------

constexpr int kThreads = 256;

unsigned grid_for(i64 n) {
  const i64 blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<i64>(std::max<i64>(blocks, 1), 1 << 20));
}

// The grid of an element-wise kernel over a [rows, cols] matrix: the threads of a block on
// consecutive columns (blockIdx.x), rows across blockIdx.y. The kernels loop over both with the
// grid's strides, so any size is covered, and index an element as row·cols + column: no division
// per element (a 1-D index would need one, and a 64-bit one at that, to split into row and
// column). At most 65535 rows per pass (the limit of gridDim.y) and about 2^20 blocks in all.
dim3 grid_2d(i64 rows, i64 cols) {
  const i64 x = std::min<i64>(std::max<i64>((cols + kThreads - 1) / kThreads, 1), 1 << 16);
  const i64 y = std::min<i64>({std::max<i64>(rows, 1), 65535, std::max<i64>((1 << 20) / x, 1)});
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

// The parameter types of a kernel, not deduced from the arguments (they convert to them).
template <typename T>
struct Param {
  using type = T;
};

// kernel<<<grid, kThreads, 0, ctx.stream>>>(args...), then the launch's error checked (named
// `name`). The only place that launches a kernel. Under the host emulation
// (BLOCKRNN_CUDA_HOST_EMU, docs/cuda.md) the stand-in runtime runs every thread of the grid on
// the host instead, after the same launch checks.
template <typename... Params>
void launch(const Ctx& ctx, const char* name, void (*kernel)(Params...), dim3 grid,
            typename Param<Params>::type... args) {
#ifdef BLOCKRNN_CUDA_HOST_EMU
  // By value: a launch captured into a graph runs after this call has returned.
  cuda_emu::launch(name, grid, dim3(kThreads), 0, ctx.stream, [=] { kernel(args...); });
#else
  // clang-format off
  kernel<<<grid, kThreads, 0, ctx.stream>>>(args...);
  // clang-format on
#endif
  check_cuda(ctx.op, cudaGetLastError(), name);
}

template <typename T>
void zero(const Ctx& ctx, T* p, i64 n) {
  if (n > 0)
    check_cuda(ctx.op, cudaMemsetAsync(p, 0, sizeof(T) * n, ctx.stream), "cudaMemsetAsync");
}

// ---- the per-step loops as CUDA Graphs --------------------------------------------------------

// What a captured per-step loop bakes in: the driver, the sizes and every pointer and value its
// launches and GEMMs use, plus the stream, the cuBLAS handle, its workspace and the math mode. Two
// calls with equal keys enqueue exactly the same work, so the second can replay the first's graph.
// Built from values one by one (never from whole structs, whose padding bytes are unspecified).
class StepKey {
 public:
  StepKey(const Ctx& ctx, const char* driver, std::size_t type_size) {
    bytes_ = driver;
    add(type_size, ctx.stream, ctx.blas, ctx.tf32, ctx.blas_workspace);
  }
  template <typename... Vs>
  StepKey& add(const Vs&... vs) {
    (append(vs), ...);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  template <typename V>
  void append(const V& v) {
    static_assert(std::is_scalar_v<V>, "keys are built from scalars and pointers");
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  std::string bytes_;
};

// The instantiated graphs of one host thread (whose cuBLAS handle they use), most recent last,
// at most kMaxStepGraphs: the oldest is destroyed to make room.
class StepGraphCache {
 public:
  static constexpr std::size_t kMaxStepGraphs = 16;
  ~StepGraphCache() {
    for (const Entry& e : entries_) cudaGraphExecDestroy(e.exec);
  }
  cudaGraphExec_t find(const std::string& key) {
    for (std::size_t k = 0; k < entries_.size(); ++k) {
      if (entries_[k].key == key) {
        const Entry hit = entries_[k];
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(k));
        entries_.push_back(hit);
        return hit.exec;
      }
    }
    return nullptr;
  }
  void insert(const std::string& key, cudaGraphExec_t exec) {
    if (entries_.size() == kMaxStepGraphs) {
      cudaGraphExecDestroy(entries_.front().exec);
      entries_.erase(entries_.begin());
    }
    entries_.push_back({key, exec});
  }

 private:
  struct Entry {
    std::string key;
    cudaGraphExec_t exec;
  };
  std::vector<Entry> entries_;
};

// Enqueues `steps()` (a driver's per-step loop: GEMMs and kernel launches only, no allocation or
// synchronisation) of `count` steps on ctx.stream: directly, or with ctx.step_graphs as a CUDA
// Graph per key, captured on the first call and replayed by later calls with the same key. The
// legacy default stream cannot capture, and a single step (the cells) gains nothing from a graph:
// there the loop always runs directly.
template <typename F>
void run_steps(const Ctx& ctx, const StepKey& key, i64 count, F&& steps) {
  if (!ctx.step_graphs || count < 2 || ctx.stream == nullptr || ctx.stream == cudaStreamLegacy) {
    steps();
    return;
  }
  thread_local StepGraphCache cache;
  if (cudaGraphExec_t exec = cache.find(key.bytes())) {
    check_cuda(ctx.op, cudaGraphLaunch(exec, ctx.stream), "cudaGraphLaunch");
    return;
  }
  check_cuda(ctx.op, cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal),
             "cudaStreamBeginCapture");
  try {
    steps();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    if (cudaStreamEndCapture(ctx.stream, &broken) == cudaSuccess && broken != nullptr) {
      cudaGraphDestroy(broken);
    }
    cudaGetLastError();
    throw;
  }
  cudaGraph_t graph = nullptr;
  check_cuda(ctx.op, cudaStreamEndCapture(ctx.stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(ctx.op, made, "cudaGraphInstantiate");
  cache.insert(key.bytes(), exec);
  check_cuda(ctx.op, cudaGraphLaunch(exec, ctx.stream), "cudaGraphLaunch");
}

// ---- scalar helpers (the reference's, src/core/activations.h) ---------------------------------

__device__ inline float dexp(float z) {
  return expf(z);
}
__device__ inline double dexp(double z) {
  return exp(z);
}
__device__ inline float dtanh(float z) {
  return tanhf(z);
}
__device__ inline double dtanh(double z) {
  return tanh(z);
}
template <typename T>
__device__ inline T sigmoid(T z) {
  return T(1) / (T(1) + dexp(-z));
}
// std::max / std::min, NaN behaviour included (fmax/fmin would drop a NaN).
template <typename T>
__device__ inline T smax(T a, T b) {
  return (a < b) ? b : a;
}
template <typename T>
__device__ inline T smin(T a, T b) {
  return (b < a) ? b : a;
}

}  // namespace

// ---- GEMM (row-major, through column-major cuBLAS) --------------------------------------------

// C[M,N] = op(A)[M,K]·op(B)[K,N] + beta·C, row-major with leading dimensions lda, ldb, ldc.
// A row-major matrix is the column-major matrix of its transpose, so cuBLAS computes
// Cᵀ = op(B)ᵀ·op(A)ᵀ. K = 0 gives beta·C (zeros for beta = 0, without reading C).
template <typename T>
void gemm(const Ctx& ctx, bool ta, bool tb, i64 M, i64 N, i64 K, const T* A, i64 lda, const T* B,
          i64 ldb, T* C, i64 ldc, double beta) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == 0.0) {
      check_cuda(ctx.op, cudaMemset2DAsync(C, sizeof(T) * ldc, 0, sizeof(T) * N, M, ctx.stream),
                 "cudaMemset2DAsync");
    }
    return;
  }
  constexpr bool kDouble = std::is_same_v<T, double>;
  const cudaDataType_t type = kDouble ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute =
      kDouble ? CUBLAS_COMPUTE_64F : (ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const T alpha = T(1), b = T(beta);
  check_blas(ctx.op,
             cublasGemmEx_64(ctx.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                             ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, type, ldb, A, type,
                             lda, &b, C, type, ldc, compute, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx");
}

// Instantiated here for the other kernel files too (src/cuda/persistent_lstm.cu).
template void gemm<float>(const Ctx&, bool, bool, i64, i64, i64, const float*, i64, const float*,
                          i64, float*, i64, double);
template void gemm<double>(const Ctx&, bool, bool, i64, i64, i64, const double*, i64, const double*,
                           i64, double*, i64, double);

namespace {

// ---- fixed-order column sums ------------------------------------------------------------------

// The column sums of the gradient reductions (db, and the peephole gradients) in two levels whose
// summation order depends on the number of rows alone, never on the grid: the rows are tiled
// into chunks of reduction_chunk_rows(rows) consecutive rows; level 1 sums each chunk's rows of
// one column in increasing row order (one thread per (chunk, column): rows/R·cols threads of R
// loads each instead of cols threads of rows loads each); level 2 sums a column's chunk partials
// in increasing chunk order. No atomics: the same bits run to run, on any GPU. The order differs
// from the CPU reference's (per-step sums added from the last step), so results agree with it to
// rounding, as any two summation orders do.
constexpr i64 kMinChunkRows = 32;

// R = max(32, ⌈√rows⌉): both levels then do about √rows additions per thread.
i64 reduction_chunk_rows(i64 rows) {
  i64 r = 1;
  while (r * r < rows) ++r;
  return std::max(r, kMinChunkRows);
}

i64 reduction_chunks(i64 rows) {
  return (rows + reduction_chunk_rows(rows) - 1) / reduction_chunk_rows(rows);
}

// partial[c·cols + j] = Σ_{r = c·R … min(rows, (c+1)·R) − 1} m[r·ld + j], in increasing r.
template <typename T>
__global__ void chunk_colsum_kernel(i64 rows, i64 cols, i64 ld, i64 chunk_rows, const T* m,
                                    T* partial) {
  const i64 chunks = (rows + chunk_rows - 1) / chunk_rows;
  for (i64 c = blockIdx.y; c < chunks; c += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = c * cols + j;
      const i64 end = (c + 1) * chunk_rows < rows ? (c + 1) * chunk_rows : rows;
      T s = T(0);
      for (i64 r = c * chunk_rows; r < end; ++r) s += m[r * ld + j];
      partial[e] = s;
    }
  }
}

// out[j] = Σ_{c = 0 … chunks−1} partial[c·cols + j], in increasing c (0 when chunks = 0).
template <typename T>
__global__ void sum_chunks_kernel(i64 chunks, i64 cols, const T* partial, T* out) {
  for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
       j += i64(gridDim.x) * blockDim.x) {
    T s = T(0);
    for (i64 c = 0; c < chunks; ++c) s += partial[c * cols + j];
    out[j] = s;
  }
}

// out[j] = the column sums of m [rows, cols] (leading dimension ld), in the order above.
template <typename T>
void colsum(const Ctx& ctx, i64 rows, i64 cols, i64 ld, const T* m, T* out) {
  if (cols == 0) return;
  const i64 chunks = reduction_chunks(rows);
  Workspace partial(ctx, sizeof(T) * chunks * cols);
  launch(ctx, "chunk_colsum_kernel", chunk_colsum_kernel<T>, grid_2d(chunks, cols), rows, cols, ld,
         reduction_chunk_rows(rows), m, partial.as<T>());
  launch(ctx, "sum_chunks_kernel", sum_chunks_kernel<T>, grid_for(cols), chunks, cols,
         partial.as<T>(), out);
}

// ---- LSTM -------------------------------------------------------------------------------------

Blocks blocks_of(LSTMLayout layout) {
  const LSTMGateBlocks b = lstm_gate_blocks(layout);
  return {b.i, b.c, b.f, b.o};
}

// One step of LSTMBlockCell (src/ref/lstm_cell.cc), gates = xh·w already in `gates` [B, 4H].
template <typename T>
__global__ void lstm_fwd_kernel(i64 B, i64 H, Blocks blk, const T* gates, const T* bias,
                                const T* cs_prev, const T* wci, const T* wcf, const T* wco,
                                T forget_bias, T cell_clip, bool use_peephole, T* oi, T* ocs, T* of,
                                T* oo, T* oci, T* oco, T* oh) {
  const i64 G = 4 * H;
  const bool clip = cell_clip > T(0);
  for (i64 n = blockIdx.y; n < B; n += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = n * H + j;
      const T* g = gates + n * G;
      const T g_i = g[blk.i * H + j] + bias[blk.i * H + j];
      const T g_c = g[blk.c * H + j] + bias[blk.c * H + j];
      const T g_f = g[blk.f * H + j] + bias[blk.f * H + j];
      const T g_o = g[blk.o * H + j] + bias[blk.o * H + j];
      const T csp = cs_prev[e];
      const T i = sigmoid(use_peephole ? g_i + csp * wci[j] : g_i);
      const T ci = dtanh(g_c);
      const T f = sigmoid(use_peephole ? (g_f + forget_bias) + csp * wcf[j] : g_f + forget_bias);
      T cs = i * ci + f * csp;
      if (clip) cs = smin(smax(cs, -cell_clip), cell_clip);
      const T co = dtanh(cs);
      const T o = sigmoid(use_peephole ? g_o + cs * wco[j] : g_o);
      oi[e] = i;
      ocs[e] = cs;
      of[e] = f;
      oo[e] = o;
      oci[e] = ci;
      oco[e] = co;
      oh[e] = o * co;
    }
  }
}

// One step of LSTMBlockCellGrad. carry_cs / carry_h: the carried gradients (null in cell mode:
// the external gradients are used as they are); d_cs_prev may be carry_cs (in place, one
// element per thread).
template <typename T>
__global__ void lstm_bwd_kernel(i64 B, i64 H, Blocks blk, bool use_peephole, const T* pi,
                                const T* pf, const T* po, const T* pci, const T* pco,
                                const T* cs_prev, const T* d_cs, const T* d_h, const T* carry_cs,
                                const T* carry_h, const T* wci, const T* wcf, const T* wco,
                                T* d_gates, T* d_cs_prev) {
  const i64 G = 4 * H;
  for (i64 n = blockIdx.y; n < B; n += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = n * H + j;
      const T i = pi[e], f = pf[e], o = po[e], ci = pci[e], co = pco[e];
      const T hg = carry_h != nullptr ? carry_h[e] + d_h[e] : d_h[e];
      const T csg = carry_cs != nullptr ? carry_cs[e] + d_cs[e] : d_cs[e];
      const T d_o = ((o * (T(1) - o)) * hg) * co;
      T dcs = ((T(1) - co * co) * hg) * o + csg;
      if (use_peephole) dcs = dcs + d_o * wco[j];
      const T dci = ((T(1) - ci * ci) * dcs) * i;
      const T df = ((f * (T(1) - f)) * dcs) * cs_prev[e];
      const T di = ((i * (T(1) - i)) * dcs) * ci;
      T* dg = d_gates + n * G;
      dg[blk.i * H + j] = di;
      dg[blk.c * H + j] = dci;
      dg[blk.f * H + j] = df;
      dg[blk.o * H + j] = d_o;
      T cpg = dcs * f;
      if (use_peephole) cpg = (cpg + di * wci[j]) + df * wcf[j];
      d_cs_prev[e] = cpg;
    }
  }
}

// Level 1 of the peephole gradients (the order of colsum above, over the S·B rows r = t·B + n):
// partial[(g·chunks + c)·H + j] = Σ_{r in chunk c} d_gates[r, gate g, j]·cs_g[r, j] for the
// gates g = i, f, o, where cs_i = cs_f = cs_prev of step t (cs0 at t = 0, else cs[t−1]) and
// cs_o = cs[t].
template <typename T>
__global__ void lstm_peephole_chunk_kernel(i64 S, i64 B, i64 H, Blocks blk, i64 chunk_rows,
                                           const T* d_gates, const T* cs0, const T* cs,
                                           T* partial) {
  const i64 G = 4 * H, BH = B * H, rows = S * B;
  const i64 chunks = (rows + chunk_rows - 1) / chunk_rows;
  for (i64 c = blockIdx.y; c < chunks; c += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = c * H + j;
      const i64 begin = c * chunk_rows;
      const i64 end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
      T sci = T(0), scf = T(0), sco = T(0);
      i64 t = begin / B, n = begin - t * B;  // row r = t·B + n, advanced without a division
      for (i64 r = begin; r < end; ++r) {
        const T* csp = t == 0 ? cs0 : cs + (t - 1) * BH;
        const T* dg = d_gates + r * G;
        sci += dg[blk.i * H + j] * csp[n * H + j];
        scf += dg[blk.f * H + j] * csp[n * H + j];
        sco += dg[blk.o * H + j] * cs[r * H + j];
        if (++n == B) {
          n = 0;
          ++t;
        }
      }
      partial[e] = sci;
      partial[chunks * H + e] = scf;
      partial[2 * chunks * H + e] = sco;
    }
  }
}

// The peephole gradients d_wci, d_wcf, d_wco from the gate gradients of all S steps.
template <typename T>
void lstm_peephole_grad(const Ctx& ctx, i64 S, i64 B, i64 H, Blocks blk, const T* d_gates,
                        const T* cs0, const T* cs, T* d_wci, T* d_wcf, T* d_wco) {
  const i64 rows = S * B, chunks = reduction_chunks(rows);
  Workspace partial(ctx, sizeof(T) * 3 * chunks * H);
  const T* p = partial.as<T>();
  launch(ctx, "lstm_peephole_chunk_kernel", lstm_peephole_chunk_kernel<T>, grid_2d(chunks, H), S, B,
         H, blk, reduction_chunk_rows(rows), d_gates, cs0, cs, partial.as<T>());
  launch(ctx, "sum_chunks_kernel", sum_chunks_kernel<T>, grid_for(H), chunks, H, p, d_wci);
  launch(ctx, "sum_chunks_kernel", sum_chunks_kernel<T>, grid_for(H), chunks, H, p + chunks * H,
         d_wcf);
  launch(ctx, "sum_chunks_kernel", sum_chunks_kernel<T>, grid_for(H), chunks, H, p + 2 * chunks * H,
         d_wco);
}

// ---- GRU (reset before) -----------------------------------------------------------------------

// r, u = σ(ru_bar + b_ru); hr = h_prev⊙r.
template <typename T>
__global__ void gru_fwd_ru_kernel(i64 B, i64 H, const T* ru_bar, const T* b_ru, const T* hp, T* r,
                                  T* u, T* hr) {
  for (i64 n = blockIdx.y; n < B; n += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = n * H + j;
      const T rv = sigmoid(ru_bar[n * 2 * H + j] + b_ru[j]);
      const T uv = sigmoid(ru_bar[n * 2 * H + H + j] + b_ru[H + j]);
      r[e] = rv;
      u[e] = uv;
      hr[e] = hp[e] * rv;
    }
  }
}

// c = tanh(c_bar + b_c); h = u⊙(h_prev − c) + c.
template <typename T>
__global__ void gru_fwd_c_kernel(i64 B, i64 H, const T* c_bar, const T* b_c, const T* u,
                                 const T* hp, T* c, T* h) {
  for (i64 n = blockIdx.y; n < B; n += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = n * H + j;
      const T cv = dtanh(c_bar[e] + b_c[j]);
      c[e] = cv;
      h[e] = u[e] * (hp[e] - cv) + cv;
    }
  }
}

// d_h = carry + d_h (or d_h in cell mode); d_c_bar; d_u_bar.
template <typename T>
__global__ void gru_bwd_a_kernel(i64 B, i64 H, const T* carry, const T* d_h, const T* u, const T* c,
                                 const T* hp, T* dh_out, T* d_c_bar, T* d_ru) {
  for (i64 n = blockIdx.y; n < B; n += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = n * H + j;
      const T dh = carry != nullptr ? carry[e] + d_h[e] : d_h[e];
      const T uv = u[e], cv = c[e];
      dh_out[e] = dh;
      d_c_bar[e] = (dh * (T(1) - uv)) * (T(1) - cv * cv);
      d_ru[n * 2 * H + H + j] = ((dh * (hp[e] - cv)) * uv) * (T(1) - uv);
    }
  }
}

// d_r_bar = ((d_hr⊙h_prev)⊙r)⊙(1−r); hr = h_prev⊙r (for d_w_c) when hr is set.
template <typename T>
__global__ void gru_bwd_b_kernel(i64 B, i64 H, const T* d_hr, const T* hp, const T* r, T* d_ru,
                                 T* hr) {
  for (i64 n = blockIdx.y; n < B; n += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = n * H + j;
      const T rv = r[e];
      d_ru[n * 2 * H + j] = ((d_hr[e] * hp[e]) * rv) * (T(1) - rv);
      if (hr != nullptr) hr[e] = hp[e] * rv;
    }
  }
}

// d_h_prev = (g1_h + d_hr⊙r) + d_h⊙u.
template <typename T>
__global__ void gru_bwd_c_kernel(i64 n, const T* g1, const T* d_hr, const T* r, const T* dh,
                                 const T* u, T* d_h_prev) {
  for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += i64(gridDim.x) * blockDim.x) {
    d_h_prev[e] = (g1[e] + d_hr[e] * r[e]) + dh[e] * u[e];
  }
}

// ---- GRU (reset after) ------------------------------------------------------------------------

template <typename T>
__global__ void gra_fwd_kernel(i64 B, i64 H, const T* gi, const T* gh, const T* b_i, const T* b_h,
                               const T* hp, T* r, T* u, T* n_out, T* hn, T* h) {
  const i64 H3 = 3 * H;
  for (i64 b = blockIdx.y; b < B; b += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = b * H + j;
      const T* gib = gi + b * H3;
      const T* ghb = gh + b * H3;
      const T rv = sigmoid((gib[j] + b_i[j]) + (ghb[j] + b_h[j]));
      const T uv = sigmoid((gib[H + j] + b_i[H + j]) + (ghb[H + j] + b_h[H + j]));
      const T hnv = ghb[2 * H + j] + b_h[2 * H + j];
      const T nv = dtanh((gib[2 * H + j] + b_i[2 * H + j]) + rv * hnv);
      r[e] = rv;
      u[e] = uv;
      hn[e] = hnv;
      n_out[e] = nv;
      h[e] = uv * hp[e] + (T(1) - uv) * nv;
    }
  }
}

// d_gi, d_gh of one step; carry (in: the carried gradient, out: d_h⊙u, to which the recurrent
// GEMM then adds d_gh·w_hᵀ).
template <typename T>
__global__ void gra_bwd_kernel(i64 B, i64 H, const T* d_h, const T* r, const T* u, const T* n,
                               const T* hn, const T* hp, T* carry, T* d_gi, T* d_gh) {
  const i64 H3 = 3 * H;
  for (i64 b = blockIdx.y; b < B; b += gridDim.y) {
    for (i64 j = i64(blockIdx.x) * blockDim.x + threadIdx.x; j < H;
         j += i64(gridDim.x) * blockDim.x) {
      const i64 e = b * H + j;
      const T dh = carry[e] + d_h[e];
      const T rv = r[e], uv = u[e], nv = n[e], hnv = hn[e];
      const T d_n_bar = (dh * (T(1) - uv)) * (T(1) - nv * nv);
      const T d_u_bar = ((dh * (hp[e] - nv)) * uv) * (T(1) - uv);
      const T d_r_bar = ((d_n_bar * hnv) * rv) * (T(1) - rv);
      d_gi[b * H3 + j] = d_r_bar;
      d_gh[b * H3 + j] = d_r_bar;
      d_gi[b * H3 + H + j] = d_u_bar;
      d_gh[b * H3 + H + j] = d_u_bar;
      d_gi[b * H3 + 2 * H + j] = d_n_bar;
      d_gh[b * H3 + 2 * H + j] = d_n_bar * rv;
      carry[e] = dh * uv;
    }
  }
}

// ---- float16 ----------------------------------------------------------------------------------

__global__ void h2f_kernel(i64 n, const __half* src, float* dst) {
  for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += i64(gridDim.x) * blockDim.x) {
    dst[e] = __half2float(src[e]);
  }
}
__global__ void f2h_kernel(i64 n, const float* src, __half* dst) {
  for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += i64(gridDim.x) * blockDim.x) {
    dst[e] = __float2half_rn(src[e]);
  }
}

}  // namespace

// ---- drivers ----------------------------------------------------------------------------------

template <typename T>
void lstm_fwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  const i64 B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, G = 4 * H;
  T* outs[] = {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h};
  for (T* p : outs) zero(ctx, p + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  const Blocks blk = blocks_of(a.layout);
  Workspace ws(ctx, sizeof(T) * S * B * G);
  T* gates = ws.as<T>();
  gemm<T>(ctx, false, false, S * B, G, I, a.x, I, a.w, G, gates, G, 0.0);  // x·w_x, all steps
  const T* w_h = a.w + I * G;
  StepKey key(ctx, "lstm_fwd", sizeof(T));
  key.add(B, H, S, blk.i, blk.c, blk.f, blk.o, gates, w_h, a.h_prev, a.cs_prev, a.b, a.wci, a.wcf);
  key.add(a.wco, a.forget_bias, a.cell_clip, a.use_peephole, a.i, a.cs, a.f, a.o, a.ci, a.co, a.h);
  run_steps(ctx, key, S, [&] {
    for (i64 t = 0; t < S; ++t) {
      const i64 o = t * BH;
      const T* hp = t == 0 ? a.h_prev : a.h + o - BH;
      const T* csp = t == 0 ? a.cs_prev : a.cs + o - BH;
      T* g = gates + t * B * G;
      gemm<T>(ctx, false, false, B, G, H, hp, H, w_h, G, g, G, 1.0);  // += h[t−1]·w_h
      launch(ctx, "lstm_fwd_kernel", lstm_fwd_kernel<T>, grid_2d(B, H), B, H, blk, g, a.b, csp,
             a.wci, a.wcf, a.wco, a.forget_bias, a.cell_clip, a.use_peephole, a.i + o, a.cs + o,
             a.f + o, a.o + o, a.ci + o, a.co + o, a.h + o);
    }
  });
}

template <typename T>
void lstm_bwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a,
              const LSTMBwdExtra<T>& extra) {
  const i64 B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, G = 4 * H, K = I + H;
  const bool full = extra.full;
  if (full) {
    zero(ctx, a.d_x + S * B * I, (d.T - S) * B * I);
  }
  if (S == 0 || BH == 0) {
    zero(ctx, a.d_cs_prev, BH);
    if (extra.d_gates != nullptr) zero(ctx, extra.d_gates, S * B * G);
    T* const peep[] = {a.d_wci, a.d_wcf, a.d_wco};
    for (T* p : peep) zero(ctx, p, H);
    if (full) {
      zero(ctx, a.d_x, S * B * I);
      zero(ctx, a.d_h_prev, BH);
      zero(ctx, a.d_w, K * G);
      zero(ctx, a.d_b, G);
    }
    return;
  }
  const Blocks blk = blocks_of(a.layout);
  Workspace ws(ctx, extra.d_gates == nullptr ? sizeof(T) * S * B * G : 0);
  T* dg = extra.d_gates != nullptr ? extra.d_gates : ws.as<T>();
  // The carried gradients live in the outputs d_cs_prev and d_h_prev.
  if (!extra.cell) {
    zero(ctx, a.d_cs_prev, BH);
    zero(ctx, a.d_h_prev, BH);
  }
  const T* w_h = a.w + I * G;
  StepKey key(ctx, "lstm_bwd", sizeof(T));
  key.add(B, H, S, blk.i, blk.c, blk.f, blk.o, a.use_peephole, extra.cell, full, dg, w_h);
  key.add(a.i, a.f, a.o, a.ci, a.co, a.cs, a.cs_prev, a.d_cs, a.d_h, a.d_cs_prev, a.d_h_prev);
  key.add(a.wci, a.wcf, a.wco);
  run_steps(ctx, key, S, [&] {
    for (i64 t = S - 1; t >= 0; --t) {
      const i64 o = t * BH;
      const T* csp = t == 0 ? a.cs_prev : a.cs + o - BH;
      T* dg_t = dg + t * B * G;
      launch(ctx, "lstm_bwd_kernel", lstm_bwd_kernel<T>, grid_2d(B, H), B, H, blk, a.use_peephole,
             a.i + o, a.f + o, a.o + o, a.ci + o, a.co + o, csp, a.d_cs + o, a.d_h + o,
             extra.cell ? nullptr : a.d_cs_prev, extra.cell ? nullptr : a.d_h_prev, a.wci, a.wcf,
             a.wco, dg_t, a.d_cs_prev);
      if (full) gemm<T>(ctx, false, true, B, H, G, dg_t, G, w_h, G, a.d_h_prev, H, 0.0);
    }
  });
  if (a.use_peephole) {
    lstm_peephole_grad<T>(ctx, S, B, H, blk, dg, a.cs_prev, a.cs, a.d_wci, a.d_wcf, a.d_wco);
  } else {
    T* const peep[] = {a.d_wci, a.d_wcf, a.d_wco};
    for (T* q : peep) zero(ctx, q, H);
  }
  if (!full) return;
  // d_x = d_gates·w_xᵀ for all steps; d_w = [x; h[t−1]]ᵀ·d_gates summed over the steps.
  gemm<T>(ctx, false, true, S * B, I, G, dg, G, a.w, G, a.d_x, I, 0.0);
  gemm<T>(ctx, true, false, I, G, S * B, a.x, I, dg, G, a.d_w, G, 0.0);
  T* w_grad_h = a.d_w + I * G;
  gemm<T>(ctx, true, false, H, G, B, a.h_prev, H, dg, G, w_grad_h, G, 0.0);
  gemm<T>(ctx, true, false, H, G, (S - 1) * B, a.h, H, dg + B * G, G, w_grad_h, G, 1.0);
  colsum<T>(ctx, S * B, G, G, dg, a.d_b);
}

template <typename T>
void gru_fwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  const i64 B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H;
  T* const outs[] = {a.r, a.u, a.c, a.h};
  for (T* p : outs) zero(ctx, p + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  Workspace ws(ctx, sizeof(T) * (S * B * 3 * H + BH));
  T* ru_bar = ws.as<T>();             // [S·B, 2H]
  T* c_bar = ru_bar + S * B * 2 * H;  // [S·B, H]
  T* hr = c_bar + S * B * H;          // [B, H]
  gemm<T>(ctx, false, false, S * B, 2 * H, I, a.x, I, a.w_ru, 2 * H, ru_bar, 2 * H, 0.0);
  gemm<T>(ctx, false, false, S * B, H, I, a.x, I, a.w_c, H, c_bar, H, 0.0);
  const T* w_ru_h = a.w_ru + I * 2 * H;
  const T* w_c_h = a.w_c + I * H;
  StepKey key(ctx, "gru_fwd", sizeof(T));
  key.add(B, H, S, ru_bar, c_bar, hr, w_ru_h, w_c_h, a.h_prev, a.b_ru, a.b_c, a.r, a.u, a.c, a.h);
  run_steps(ctx, key, S, [&] {
    for (i64 t = 0; t < S; ++t) {
      const i64 o = t * BH;
      const T* hp = t == 0 ? a.h_prev : a.h + o - BH;
      T* ru_t = ru_bar + t * B * 2 * H;
      T* c_t = c_bar + o;
      gemm<T>(ctx, false, false, B, 2 * H, H, hp, H, w_ru_h, 2 * H, ru_t, 2 * H, 1.0);
      launch(ctx, "gru_fwd_ru_kernel", gru_fwd_ru_kernel<T>, grid_2d(B, H), B, H, ru_t, a.b_ru, hp,
             a.r + o, a.u + o, hr);
      gemm<T>(ctx, false, false, B, H, H, hr, H, w_c_h, H, c_t, H, 1.0);
      launch(ctx, "gru_fwd_c_kernel", gru_fwd_c_kernel<T>, grid_2d(B, H), B, H, c_t, a.b_c, a.u + o,
             hp, a.c + o, a.h + o);
    }
  });
}

template <typename T>
void gru_bwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a,
             const GRUBwdExtra<T>& extra) {
  const i64 B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, K = I + H;
  const bool full = extra.full;
  zero(ctx, a.d_x + S * B * I, (d.T - S) * B * I);
  if (S == 0 || BH == 0) {
    zero(ctx, a.d_x, S * B * I);
    zero(ctx, a.d_h_prev, BH);
    if (extra.d_c_bar != nullptr) zero(ctx, extra.d_c_bar, S * BH);
    if (extra.d_r_bar_u_bar != nullptr) zero(ctx, extra.d_r_bar_u_bar, 2 * S * BH);
    if (full) {
      zero(ctx, a.d_w_ru, K * 2 * H);
      zero(ctx, a.d_w_c, K * H);
      zero(ctx, a.d_b_ru, 2 * H);
      zero(ctx, a.d_b_c, H);
    }
    return;
  }
  const i64 own_dc = extra.d_c_bar == nullptr ? S * BH : 0;
  const i64 own_dru = extra.d_r_bar_u_bar == nullptr ? 2 * S * BH : 0;
  const i64 hr_n = full ? S * BH : 0;
  Workspace ws(ctx, sizeof(T) * (own_dc + own_dru + hr_n + 3 * BH));
  T* p = ws.as<T>();
  T* dc = extra.d_c_bar != nullptr ? extra.d_c_bar : p;
  p += own_dc;
  T* dru = extra.d_r_bar_u_bar != nullptr ? extra.d_r_bar_u_bar : p;
  p += own_dru;
  T* hr = full ? p : nullptr;  // [S, B, H]  h[t−1]⊙r[t]
  p += hr_n;
  T* dh = p;          // [B, H]
  T* d_hr = dh + BH;  // [B, H]
  T* g1 = d_hr + BH;  // [B, H]
  T* carry = a.d_h_prev;
  if (!extra.cell) zero(ctx, carry, BH);
  const T* w_ru_h = a.w_ru + I * 2 * H;
  const T* w_c_h = a.w_c + I * H;
  StepKey key(ctx, "gru_bwd", sizeof(T));
  key.add(B, H, S, extra.cell, carry, dh, d_hr, g1, dc, dru, hr, w_c_h, w_ru_h, a.h_prev, a.h);
  key.add(a.d_h, a.u, a.c, a.r);
  run_steps(ctx, key, S, [&] {
    for (i64 t = S - 1; t >= 0; --t) {
      const i64 o = t * BH;
      const T* hp = t == 0 ? a.h_prev : a.h + o - BH;
      T* dc_t = dc + o;
      T* dru_t = dru + 2 * o;
      launch(ctx, "gru_bwd_a_kernel", gru_bwd_a_kernel<T>, grid_2d(B, H), B, H,
             extra.cell ? nullptr : carry, a.d_h + o, a.u + o, a.c + o, hp, dh, dc_t, dru_t);
      gemm<T>(ctx, false, true, B, H, H, dc_t, H, w_c_h, H, d_hr, H, 0.0);  // d_c_bar·w_c_hᵀ
      launch(ctx, "gru_bwd_b_kernel", gru_bwd_b_kernel<T>, grid_2d(B, H), B, H, d_hr, hp, a.r + o,
             dru_t, hr != nullptr ? hr + o : nullptr);
      gemm<T>(ctx, false, true, B, H, 2 * H, dru_t, 2 * H, w_ru_h, 2 * H, g1, H, 0.0);
      launch(ctx, "gru_bwd_c_kernel", gru_bwd_c_kernel<T>, grid_for(BH), BH, g1, d_hr, a.r + o, dh,
             a.u + o, carry);
    }
  });
  // d_x = d_ru·w_ru_xᵀ + d_c_bar·w_c_xᵀ for all steps.
  gemm<T>(ctx, false, true, S * B, I, 2 * H, dru, 2 * H, a.w_ru, 2 * H, a.d_x, I, 0.0);
  gemm<T>(ctx, false, true, S * B, I, H, dc, H, a.w_c, H, a.d_x, I, 1.0);
  if (!full) return;
  gemm<T>(ctx, true, false, I, 2 * H, S * B, a.x, I, dru, 2 * H, a.d_w_ru, 2 * H, 0.0);
  T* w_ru_grad_h = a.d_w_ru + I * 2 * H;
  gemm<T>(ctx, true, false, H, 2 * H, B, a.h_prev, H, dru, 2 * H, w_ru_grad_h, 2 * H, 0.0);
  gemm<T>(ctx, true, false, H, 2 * H, (S - 1) * B, a.h, H, dru + 2 * BH, 2 * H, w_ru_grad_h, 2 * H,
          1.0);
  gemm<T>(ctx, true, false, I, H, S * B, a.x, I, dc, H, a.d_w_c, H, 0.0);
  gemm<T>(ctx, true, false, H, H, S * B, hr, H, dc, H, a.d_w_c + I * H, H, 0.0);
  colsum<T>(ctx, S * B, 2 * H, 2 * H, dru, a.d_b_ru);
  colsum<T>(ctx, S * B, H, H, dc, a.d_b_c);
}

template <typename T>
void gru_reset_after_fwd(const Ctx& ctx, const BlockGRUDims& d,
                         const BlockGRUResetAfterFwdArgs<T>& a) {
  const i64 B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, H3 = 3 * H;
  T* const outs[] = {a.r, a.u, a.n, a.hn, a.h};
  for (T* p : outs) zero(ctx, p + S * BH, (d.T - S) * BH);
  if (S == 0 || BH == 0) return;
  Workspace ws(ctx, sizeof(T) * (S * B * H3 + B * H3));
  T* gi = ws.as<T>();       // [S·B, 3H]
  T* gh = gi + S * B * H3;  // [B, 3H]
  gemm<T>(ctx, false, false, S * B, H3, I, a.x, I, a.w_i, H3, gi, H3, 0.0);
  StepKey key(ctx, "gru_reset_after_fwd", sizeof(T));
  key.add(B, H, S, gi, gh, a.h_prev, a.w_h, a.b_i, a.b_h, a.r, a.u, a.n, a.hn, a.h);
  run_steps(ctx, key, S, [&] {
    for (i64 t = 0; t < S; ++t) {
      const i64 o = t * BH;
      const T* hp = t == 0 ? a.h_prev : a.h + o - BH;
      gemm<T>(ctx, false, false, B, H3, H, hp, H, a.w_h, H3, gh, H3, 0.0);
      launch(ctx, "gra_fwd_kernel", gra_fwd_kernel<T>, grid_2d(B, H), B, H, gi + t * B * H3, gh,
             a.b_i, a.b_h, hp, a.r + o, a.u + o, a.n + o, a.hn + o, a.h + o);
    }
  });
}

template <typename T>
void gru_reset_after_bwd(const Ctx& ctx, const BlockGRUDims& d,
                         const BlockGRUResetAfterBwdArgs<T>& a) {
  const i64 B = d.B, I = d.I, H = d.H, S = d.seq_len_max, BH = B * H, H3 = 3 * H;
  zero(ctx, a.d_x + S * B * I, (d.T - S) * B * I);
  if (S == 0 || BH == 0) {
    zero(ctx, a.d_x, S * B * I);
    zero(ctx, a.d_h_prev, BH);
    zero(ctx, a.d_w_i, I * H3);
    zero(ctx, a.d_w_h, H * H3);
    zero(ctx, a.d_b_i, H3);
    zero(ctx, a.d_b_h, H3);
    return;
  }
  Workspace ws(ctx, sizeof(T) * 2 * S * B * H3);
  T* d_gi = ws.as<T>();         // [S·B, 3H]
  T* d_gh = d_gi + S * B * H3;  // [S·B, 3H]
  T* carry = a.d_h_prev;
  zero(ctx, carry, BH);
  StepKey key(ctx, "gru_reset_after_bwd", sizeof(T));
  key.add(B, H, S, d_gi, d_gh, carry, a.h_prev, a.h, a.w_h, a.d_h, a.r, a.u, a.n, a.hn);
  run_steps(ctx, key, S, [&] {
    for (i64 t = S - 1; t >= 0; --t) {
      const i64 o = t * BH;
      const T* hp = t == 0 ? a.h_prev : a.h + o - BH;
      T* dgh_t = d_gh + t * B * H3;
      launch(ctx, "gra_bwd_kernel", gra_bwd_kernel<T>, grid_2d(B, H), B, H, a.d_h + o, a.r + o,
             a.u + o, a.n + o, a.hn + o, hp, carry, d_gi + t * B * H3, dgh_t);
      gemm<T>(ctx, false, true, B, H, H3, dgh_t, H3, a.w_h, H3, carry, H, 1.0);  // += d_gh·w_hᵀ
    }
  });
  gemm<T>(ctx, false, true, S * B, I, H3, d_gi, H3, a.w_i, H3, a.d_x, I, 0.0);
  gemm<T>(ctx, true, false, I, H3, S * B, a.x, I, d_gi, H3, a.d_w_i, H3, 0.0);
  gemm<T>(ctx, true, false, H, H3, B, a.h_prev, H, d_gh, H3, a.d_w_h, H3, 0.0);
  gemm<T>(ctx, true, false, H, H3, (S - 1) * B, a.h, H, d_gh + B * H3, H3, a.d_w_h, H3, 1.0);
  colsum<T>(ctx, S * B, H3, H3, d_gi, a.d_b_i);
  colsum<T>(ctx, S * B, H3, H3, d_gh, a.d_b_h);
}

void half_to_float(const Ctx& ctx, const void* src, float* dst, std::int64_t n) {
  if (n == 0) return;
  launch(ctx, "h2f_kernel", h2f_kernel, grid_for(n), n, static_cast<const __half*>(src), dst);
}

void float_to_half(const Ctx& ctx, const float* src, void* dst, std::int64_t n) {
  if (n == 0) return;
  launch(ctx, "f2h_kernel", f2h_kernel, grid_for(n), n, src, static_cast<__half*>(dst));
}

// The ops for float and double, declared in kernels.h.
template void lstm_fwd<float>(const Ctx&, const BlockLSTMDims&, const BlockLSTMFwdArgs<float>&);
template void lstm_bwd<float>(const Ctx&, const BlockLSTMDims&, const BlockLSTMBwdArgs<float>&,
                              const LSTMBwdExtra<float>&);
template void gru_fwd<float>(const Ctx&, const BlockGRUDims&, const BlockGRUFwdArgs<float>&);
template void gru_bwd<float>(const Ctx&, const BlockGRUDims&, const BlockGRUBwdArgs<float>&,
                             const GRUBwdExtra<float>&);
template void gru_reset_after_fwd<float>(const Ctx&, const BlockGRUDims&,
                                         const BlockGRUResetAfterFwdArgs<float>&);
template void gru_reset_after_bwd<float>(const Ctx&, const BlockGRUDims&,
                                         const BlockGRUResetAfterBwdArgs<float>&);

template void lstm_fwd<double>(const Ctx&, const BlockLSTMDims&, const BlockLSTMFwdArgs<double>&);
template void lstm_bwd<double>(const Ctx&, const BlockLSTMDims&, const BlockLSTMBwdArgs<double>&,
                               const LSTMBwdExtra<double>&);
template void gru_fwd<double>(const Ctx&, const BlockGRUDims&, const BlockGRUFwdArgs<double>&);
template void gru_bwd<double>(const Ctx&, const BlockGRUDims&, const BlockGRUBwdArgs<double>&,
                              const GRUBwdExtra<double>&);
template void gru_reset_after_fwd<double>(const Ctx&, const BlockGRUDims&,
                                          const BlockGRUResetAfterFwdArgs<double>&);
template void gru_reset_after_bwd<double>(const Ctx&, const BlockGRUDims&,
                                          const BlockGRUResetAfterBwdArgs<double>&);

}  // namespace blockrnn::cuda::detail
