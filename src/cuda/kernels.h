// Internal interface of the CUDA kernels (src/cuda/kernels.cu), called by the entry points of
// src/cuda/api.cpp after validation. Host code only: no CUDA syntax here, so api.cpp is plain
// C++. The argument structs are the CPU kernels' (src/ref/*.h) with device pointers, plus the
// few fields the cell ops need to run as a one-step sequence.
//
// Every driver is templated on T = float or double (float16 is staged through float32 by the
// caller) and instantiated once in kernels.cu. All work is enqueued on ctx.stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernel/block_gru.h"
#include "kernel/block_gru_reset_after.h"
#include "kernel/block_lstm.h"

namespace blockrnn::cuda::detail {

struct Ctx {
  const char* op;  // for error messages
  cudaStream_t stream;
  cublasHandle_t blas;
  bool tf32;
  // Run the per-step loops as CUDA Graphs (set_step_graphs), and the cuBLAS workspace set on
  // `blas` for this call (part of what a captured graph bakes in).
  bool step_graphs = false;
  const void* blas_workspace = nullptr;
};

// Throws blockrnn::Error naming ctx.op and `what` when `status` is not cudaSuccess.
void check_cuda(const char* op, cudaError_t status, const char* what);
void check_blas(const char* op, cublasStatus_t status, const char* what);

// Stream-ordered device workspace: cudaMallocAsync on construction, cudaFreeAsync on
// destruction (on the same stream, so the memory is released after the call's work).
class Workspace {
 public:
  Workspace(const Ctx& ctx, std::size_t bytes);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  const Ctx& ctx_;
  void* ptr_ = nullptr;
};

// Extra fields of the LSTM backward. The sequence ops use the defaults.
template <typename T>
struct LSTMBwdExtra {
  // Cell mode (LSTMBlockCellGrad, gradients.LSTMBlockCell): a single step with no carried
  // gradients (dcs = d_cs, dh = d_h exactly, as the cell kernels).
  bool cell = false;
  // Also the input and parameter gradients (d_x, d_h_prev, d_w, d_b).
  bool full = true;
  T* d_gates = nullptr;  // [S, B, 4H] output of the gate gradients; null: workspace
};

template <typename T>
struct GRUBwdExtra {
  bool cell = false;           // single step, d_h = d_h exactly (GRUBlockCellGrad)
  bool full = true;            // also d_w_ru, d_w_c, d_b_ru, d_b_c
  T* d_c_bar = nullptr;        // [S, B, H]; null: workspace
  T* d_r_bar_u_bar = nullptr;  // [S, B, 2H]; null: workspace
};

template <typename T>
void lstm_fwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a);
template <typename T>
void lstm_bwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a,
              const LSTMBwdExtra<T>& extra);
template <typename T>
void gru_fwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a);
template <typename T>
void gru_bwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a,
             const GRUBwdExtra<T>& extra);
template <typename T>
void gru_reset_after_fwd(const Ctx& ctx, const BlockGRUDims& d,
                         const BlockGRUResetAfterFwdArgs<T>& a);
template <typename T>
void gru_reset_after_bwd(const Ctx& ctx, const BlockGRUDims& d,
                         const BlockGRUResetAfterBwdArgs<T>& a);

// C[M,N] = op(A)[M,K]·op(B)[K,N] + beta·C with cuBLAS, row-major matrices with leading
// dimensions lda, ldb, ldc (ta, tb: A, B transposed). K = 0 gives beta·C (zeros for beta = 0,
// without reading C). T = float or double; float honours ctx.tf32.
template <typename T>
void gemm(const Ctx& ctx, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
          const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T* C, std::int64_t ldc,
          double beta);

// float16 <-> float32 conversions of n elements (round to nearest even).
void half_to_float(const Ctx& ctx, const void* src, float* dst, std::int64_t n);
void float_to_half(const Ctx& ctx, const float* src, void* dst, std::int64_t n);

}  // namespace blockrnn::cuda::detail
