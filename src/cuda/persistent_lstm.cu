// The persistent BlockLSTM and BlockGRU kernels on a GPU
// (src/cuda/persistent_lstm_device.h): the bodies of src/cuda/persistent_lstm.h and
// src/cuda/persistent_gru.h in cooperative kernels (grid syncs through cooperative groups: one
// per step for the LSTM, two for the reset-before GRU), with cuBLAS for the products over all
// steps: x·w_x before the forward's loop, d_x and d_w after the backward's. Compiled with the
// backend's flags (-fmad=false, ptxas failing on spills and local memory).
//
// Under the host emulation (BLOCKRNN_CUDA_HOST_EMU, docs/cuda.md) the entries are the same, on
// an emulated H100 (132 SMs, 227 KiB of shared memory per CTA), and the cooperative launch
// runs the bodies on the host driver's threads (src/cuda/persistent_host.h).
#ifdef BLOCKRNN_CUDA_HOST_EMU
#include "cuda/emu/emu.h"
#include "cuda/persistent_host.h"
#else
#include <cooperative_groups.h>
#endif

#include <algorithm>
#include <string>

#include "blockrnn/error.h"
#include "cuda/persistent_gru.h"
#include "cuda/persistent_lstm.h"
#include "cuda/persistent_lstm_device.h"

namespace blockrnn::cuda::detail {

namespace {

using i64 = std::int64_t;
using persistent::BwdParams;
using persistent::CtaIndex;
using persistent::FwdParams;
using persistent::GRUBwdParams;
using persistent::GRUFwdParams;

constexpr int kPersistentThreads = 256;

#ifndef BLOCKRNN_CUDA_HOST_EMU

// The bodies' Sync on a GPU. __host__ __device__ like the bodies (their host instantiation
// is never called; the guards keep it compilable).
struct DeviceSync {
  __host__ __device__ void cta() {
#ifdef __CUDA_ARCH__
    __syncthreads();
#endif
  }
  __host__ __device__ void grid() {
#ifdef __CUDA_ARCH__
    cooperative_groups::this_grid().sync();
#endif
  }
  __host__ __device__ void jitter() {}
};

// The CTA's resident weight slice (dynamic shared memory, sized at launch).
extern __shared__ __align__(16) unsigned char resident_bytes[];

__device__ inline CtaIndex cta_index() {
  return {i64(blockIdx.x), i64(gridDim.x), i64(threadIdx.x), i64(blockDim.x)};
}

template <typename T>
__global__ void __launch_bounds__(kPersistentThreads) persistent_lstm_fwd_kernel(FwdParams<T> p) {
  DeviceSync sync;
  persistent::lstm_fwd_cta(p, cta_index(), reinterpret_cast<T*>(resident_bytes), sync);
}

template <typename T>
__global__ void __launch_bounds__(kPersistentThreads) persistent_lstm_bwd_kernel(BwdParams<T> p) {
  DeviceSync sync;
  persistent::lstm_bwd_cta(p, cta_index(), reinterpret_cast<T*>(resident_bytes), sync);
}

template <typename T>
__global__ void __launch_bounds__(kPersistentThreads) persistent_gru_fwd_kernel(GRUFwdParams<T> p) {
  DeviceSync sync;
  persistent::gru_fwd_cta(p, cta_index(), reinterpret_cast<T*>(resident_bytes), sync);
}

template <typename T>
__global__ void __launch_bounds__(kPersistentThreads) persistent_gru_bwd_kernel(GRUBwdParams<T> p) {
  DeviceSync sync;
  persistent::gru_bwd_cta(p, cta_index(), reinterpret_cast<T*>(resident_bytes), sync);
}

#endif  // BLOCKRNN_CUDA_HOST_EMU

struct Grid {
  int ctas;
  std::size_t shared_bytes;
};

// The bytes of a CTA's resident weight slice for H units over `ctas` CTAs (`gates` columns per
// unit: 4 for the LSTM, 3 for the GRU), or kUnimplemented when more than `available` (the
// device's shared memory per CTA).
template <typename T>
std::size_t slice_bytes(const Ctx& ctx, i64 H, int ctas, int gates, std::size_t available) {
  const i64 elems =
      gates == 4 ? persistent::resident_elems(H, ctas) : persistent::gru_resident_elems(H, ctas);
  const std::size_t bytes = sizeof(T) * static_cast<std::size_t>(elems);
  if (bytes > available) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(ctx.op) +
                    " (persistent kernel): a CTA's slice of the recurrent weights needs " +
                    std::to_string(bytes) + " bytes of shared memory (cell size " +
                    std::to_string(H) + " over " + std::to_string(ctas) +
                    " CTAs), the device allows " + std::to_string(available));
  }
  return bytes;
}

#ifndef BLOCKRNN_CUDA_HOST_EMU

int device_attribute(const Ctx& ctx, cudaDeviceAttr attr, int device) {
  int v = 0;
  check_cuda(ctx.op, cudaDeviceGetAttribute(&v, attr, device), "cudaDeviceGetAttribute");
  return v;
}

// One CTA per SM, at most one per unit (H ≥ 1), each holding resident_elems(H, ctas) elements;
// checked against the device before anything is allocated or launched.
template <typename T, typename Params>
Grid plan_grid(const Ctx& ctx, void (*kernel)(Params), i64 H, int gates) {
  int device = 0;
  check_cuda(ctx.op, cudaGetDevice(&device), "cudaGetDevice");
  const std::string who = std::string(ctx.op) + " (persistent kernel): ";
  if (device_attribute(ctx, cudaDevAttrCooperativeLaunch, device) == 0) {
    throw Error(ErrorCode::kUnimplemented, who + "the device has no cooperative launch");
  }
  const int sms = device_attribute(ctx, cudaDevAttrMultiProcessorCount, device);
  const int optin = device_attribute(ctx, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  const int ctas = static_cast<int>(std::min<i64>(sms, H));
  const std::size_t bytes = slice_bytes<T>(ctx, H, ctas, gates, static_cast<std::size_t>(optin));
  check_cuda(
      ctx.op,
      cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "cudaFuncSetAttribute");
  int per_sm = 0;
  check_cuda(
      ctx.op,
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPersistentThreads, bytes),
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (per_sm < 1) {
    throw Error(ErrorCode::kUnimplemented, who + "a CTA of " + std::to_string(kPersistentThreads) +
                                               " threads with " + std::to_string(bytes) +
                                               " bytes of shared memory cannot run on an SM");
  }
  return {ctas, bytes};
}

template <typename Params>
void launch_cooperative(const Ctx& ctx, const char* name, void (*kernel)(Params), const Grid& g,
                        Params p) {
  void* args[] = {&p};
  check_cuda(
      ctx.op,
      cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(g.ctas),
                                  dim3(kPersistentThreads), args, g.shared_bytes, ctx.stream),
      name);
}

template <typename T>
Grid fwd_grid(const Ctx& ctx, i64 H) {
  return plan_grid<T>(ctx, persistent_lstm_fwd_kernel<T>, H, 4);
}
template <typename T>
Grid bwd_grid(const Ctx& ctx, i64 H) {
  return plan_grid<T>(ctx, persistent_lstm_bwd_kernel<T>, H, 4);
}
template <typename T>
Grid gru_fwd_grid(const Ctx& ctx, i64 H) {
  return plan_grid<T>(ctx, persistent_gru_fwd_kernel<T>, H, 3);
}
template <typename T>
Grid gru_bwd_grid(const Ctx& ctx, i64 H) {
  return plan_grid<T>(ctx, persistent_gru_bwd_kernel<T>, H, 3);
}
template <typename T>
void run_fwd(const Ctx& ctx, const Grid& g, const FwdParams<T>& p) {
  launch_cooperative(ctx, "persistent_lstm_fwd_kernel", persistent_lstm_fwd_kernel<T>, g, p);
}
template <typename T>
void run_bwd(const Ctx& ctx, const Grid& g, const BwdParams<T>& p) {
  launch_cooperative(ctx, "persistent_lstm_bwd_kernel", persistent_lstm_bwd_kernel<T>, g, p);
}
template <typename T>
void run_gru_fwd(const Ctx& ctx, const Grid& g, const GRUFwdParams<T>& p) {
  launch_cooperative(ctx, "persistent_gru_fwd_kernel", persistent_gru_fwd_kernel<T>, g, p);
}
template <typename T>
void run_gru_bwd(const Ctx& ctx, const Grid& g, const GRUBwdParams<T>& p) {
  launch_cooperative(ctx, "persistent_gru_bwd_kernel", persistent_gru_bwd_kernel<T>, g, p);
}

#else  // BLOCKRNN_CUDA_HOST_EMU

// An emulated H100: 132 SMs, 227 KiB of shared memory per CTA (the opt-in maximum), so that the
// grid and the shared-memory limit are the real device's.
constexpr int kEmuSms = 132;
constexpr std::size_t kEmuSharedBytes = 232448;

template <typename T>
Grid emu_grid(const Ctx& ctx, i64 H, int gates) {
  const int ctas = static_cast<int>(std::min<i64>(kEmuSms, H));
  return {ctas, slice_bytes<T>(ctx, H, ctas, gates, kEmuSharedBytes)};
}
template <typename T>
Grid fwd_grid(const Ctx& ctx, i64 H) {
  return emu_grid<T>(ctx, H, 4);
}
template <typename T>
Grid bwd_grid(const Ctx& ctx, i64 H) {
  return emu_grid<T>(ctx, H, 4);
}
template <typename T>
Grid gru_fwd_grid(const Ctx& ctx, i64 H) {
  return emu_grid<T>(ctx, H, 3);
}
template <typename T>
Grid gru_bwd_grid(const Ctx& ctx, i64 H) {
  return emu_grid<T>(ctx, H, 3);
}

// The launch's stream check, then the CTAs as host threads: one per CTA (up to 132), without
// yields (blockrnn_persistent_tests shakes the bodies' synchronisation; here the entries
// around them are tested, and 132 threads on a small CI machine must stay quick).
persistent::HostGrid emu_launch(const Ctx& ctx, const char* name, const Grid& g) {
  if (!cuda_emu::is_valid_stream(ctx.stream)) {
    cuda_emu::report_violation(std::string(name) + ": launch on an invalid stream");
    check_cuda(ctx.op, cudaErrorInvalidResourceHandle, name);
  }
  persistent::HostGrid h;
  h.ctas = g.ctas;
  h.threads_per_cta = 1;
  h.jitter_seed = 0;
  return h;
}
template <typename T>
void run_fwd(const Ctx& ctx, const Grid& g, const FwdParams<T>& p) {
  persistent::run_lstm_fwd_grid(ctx.op, p, emu_launch(ctx, "persistent_lstm_fwd_kernel", g));
}
template <typename T>
void run_bwd(const Ctx& ctx, const Grid& g, const BwdParams<T>& p) {
  persistent::run_lstm_bwd_grid(ctx.op, p, emu_launch(ctx, "persistent_lstm_bwd_kernel", g));
}
template <typename T>
void run_gru_fwd(const Ctx& ctx, const Grid& g, const GRUFwdParams<T>& p) {
  persistent::run_gru_fwd_grid(ctx.op, p, emu_launch(ctx, "persistent_gru_fwd_kernel", g));
}
template <typename T>
void run_gru_bwd(const Ctx& ctx, const Grid& g, const GRUBwdParams<T>& p) {
  persistent::run_gru_bwd_grid(ctx.op, p, emu_launch(ctx, "persistent_gru_bwd_kernel", g));
}

#endif  // BLOCKRNN_CUDA_HOST_EMU

void refuse_lengths(const Ctx& ctx, const BlockLSTMDims& d) {
  if (d.lengths != nullptr) {
    throw Error(ErrorCode::kUnimplemented,
                std::string(ctx.op) + " (persistent kernel): seq_lengths is not supported yet");
  }
}

template <typename T>
void zero(const Ctx& ctx, T* p, i64 n) {
  if (n > 0)
    check_cuda(ctx.op, cudaMemsetAsync(p, 0, sizeof(T) * n, ctx.stream), "cudaMemsetAsync");
}

}  // namespace

template <typename T>
void persistent_lstm_fwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMFwdArgs<T>& a) {
  refuse_lengths(ctx, d);
  const i64 S = d.seq_len_max, B = d.B, I = d.I, H = d.H, G = 4 * H, BH = B * H;
  const bool work = S > 0 && B > 0 && H > 0;
  const Grid g = work ? fwd_grid<T>(ctx, H) : Grid{0, 0};
  T* const outs[] = {a.i, a.cs, a.f, a.o, a.ci, a.co, a.h};
  for (T* p : outs) zero(ctx, p + S * BH, (d.T - S) * BH);
  if (!work) return;
  Workspace gates(ctx, sizeof(T) * S * B * G);
  gemm<T>(ctx, false, false, S * B, G, I, a.x, I, a.w, G, gates.as<T>(), G, 0.0);
  run_fwd(ctx, g, persistent::fwd_params(d, a, gates.as<T>()));
}

template <typename T>
void persistent_lstm_bwd(const Ctx& ctx, const BlockLSTMDims& d, const BlockLSTMBwdArgs<T>& a) {
  refuse_lengths(ctx, d);
  const i64 S = d.seq_len_max, B = d.B, I = d.I, H = d.H, G = 4 * H, K = I + H;
  if (H == 0) {  // no units: d_x is zero, every other output empty
    zero(ctx, a.d_x, d.T * B * I);
    return;
  }
  const Grid g = bwd_grid<T>(ctx, H);
  zero(ctx, a.d_x + S * B * I, (d.T - S) * B * I);
  const i64 nk = persistent::k_chunks(H, kPersistentKChunk);
  Workspace d_gates(ctx, sizeof(T) * S * B * G), partial(ctx, sizeof(T) * B * H * nk);
  const T* dg = d_gates.as<T>();
  // The time loop; also d_cs_prev, d_h_prev, d_b and the peephole gradients (zero when S = 0).
  run_bwd(ctx, g,
          persistent::bwd_params(d, a, kPersistentKChunk, d_gates.as<T>(), partial.as<T>()));
  if (S == 0 || B == 0) {
    zero(ctx, a.d_w, K * G);
    return;
  }
  // d_x[r] = d_gates[r]·w_xᵀ over the S·B rows r = t·B + n.
  gemm<T>(ctx, false, true, S * B, I, G, dg, G, a.w, G, a.d_x, I, 0.0);
  // d_w = Σ_r [x[r], h_prev of r]ᵀ·d_gates[r]: the x rows in one product, the h rows as step 0
  // against h_prev plus steps 1 … S−1 against h[0 … S−2].
  gemm<T>(ctx, true, false, I, G, S * B, a.x, I, dg, G, a.d_w, G, 0.0);
  gemm<T>(ctx, true, false, H, G, B, a.h_prev, H, dg, G, a.d_w + I * G, G, 0.0);
  gemm<T>(ctx, true, false, H, G, (S - 1) * B, a.h, H, dg + B * G, G, a.d_w + I * G, G, 1.0);
}

template <typename T>
void persistent_gru_fwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUFwdArgs<T>& a) {
  refuse_lengths(ctx, d);
  const i64 S = d.seq_len_max, B = d.B, I = d.I, H = d.H, BH = B * H;
  const bool work = S > 0 && B > 0 && H > 0;
  const Grid g = work ? gru_fwd_grid<T>(ctx, H) : Grid{0, 0};
  T* const outs[] = {a.r, a.u, a.c, a.h};
  for (T* p : outs) zero(ctx, p + S * BH, (d.T - S) * BH);
  if (!work) return;
  Workspace xw_ru(ctx, sizeof(T) * S * B * 2 * H), xw_c(ctx, sizeof(T) * S * BH);
  // The input projections of all steps: x·w_ru[:I] and x·w_c[:I] over the S·B rows.
  gemm<T>(ctx, false, false, S * B, 2 * H, I, a.x, I, a.w_ru, 2 * H, xw_ru.as<T>(), 2 * H, 0.0);
  gemm<T>(ctx, false, false, S * B, H, I, a.x, I, a.w_c, H, xw_c.as<T>(), H, 0.0);
  run_gru_fwd(ctx, g, persistent::gru_fwd_params(d, a, xw_ru.as<T>(), xw_c.as<T>()));
}

template <typename T>
void persistent_gru_bwd(const Ctx& ctx, const BlockGRUDims& d, const BlockGRUBwdArgs<T>& a) {
  refuse_lengths(ctx, d);
  const i64 S = d.seq_len_max, B = d.B, I = d.I, H = d.H, BH = B * H, H2 = 2 * H, K = I + H;
  if (H == 0) {  // no units: d_x is zero, every other output empty
    zero(ctx, a.d_x, d.T * B * I);
    return;
  }
  const Grid g = gru_bwd_grid<T>(ctx, H);
  zero(ctx, a.d_x + S * B * I, (d.T - S) * B * I);
  Workspace d_c_bar(ctx, sizeof(T) * S * BH), d_ru(ctx, sizeof(T) * S * B * H2),
      hr(ctx, sizeof(T) * S * BH), d_hr(ctx, sizeof(T) * BH);
  const T *dcb = d_c_bar.as<T>(), *dru = d_ru.as<T>();
  // The time loop; also d_h_prev, d_b_ru and d_b_c (zero when S = 0).
  run_gru_bwd(
      ctx, g,
      persistent::gru_bwd_params(d, a, d_c_bar.as<T>(), d_ru.as<T>(), hr.as<T>(), d_hr.as<T>()));
  if (S == 0 || B == 0) {
    zero(ctx, a.d_w_ru, K * H2);
    zero(ctx, a.d_w_c, K * H);
    return;
  }
  // d_x[r] = d_ru[r]·w_ru[:I]ᵀ + d_c_bar[r]·w_c[:I]ᵀ over the S·B rows r = t·B + n.
  gemm<T>(ctx, false, true, S * B, I, H2, dru, H2, a.w_ru, H2, a.d_x, I, 0.0);
  gemm<T>(ctx, false, true, S * B, I, H, dcb, H, a.w_c, H, a.d_x, I, 1.0);
  // d_w_ru = Σ_r [x[r], h_prev of r]ᵀ·d_ru[r]: the x rows in one product, the h rows as step 0
  // against h_prev plus steps 1 … S−1 against h[0 … S−2].
  gemm<T>(ctx, true, false, I, H2, S * B, a.x, I, dru, H2, a.d_w_ru, H2, 0.0);
  gemm<T>(ctx, true, false, H, H2, B, a.h_prev, H, dru, H2, a.d_w_ru + I * H2, H2, 0.0);
  gemm<T>(ctx, true, false, H, H2, (S - 1) * B, a.h, H, dru + B * H2, H2, a.d_w_ru + I * H2, H2,
          1.0);
  // d_w_c = Σ_r [x[r], (h_prev⊙r)[r]]ᵀ·d_c_bar[r], the h⊙r rows written by the kernel.
  gemm<T>(ctx, true, false, I, H, S * B, a.x, I, dcb, H, a.d_w_c, H, 0.0);
  gemm<T>(ctx, true, false, H, H, S * B, hr.as<T>(), H, dcb, H, a.d_w_c + I * H, H, 0.0);
}

template void persistent_gru_bwd<float>(const Ctx&, const BlockGRUDims&,
                                        const BlockGRUBwdArgs<float>&);
template void persistent_gru_bwd<double>(const Ctx&, const BlockGRUDims&,
                                         const BlockGRUBwdArgs<double>&);
template void persistent_gru_fwd<float>(const Ctx&, const BlockGRUDims&,
                                        const BlockGRUFwdArgs<float>&);
template void persistent_gru_fwd<double>(const Ctx&, const BlockGRUDims&,
                                         const BlockGRUFwdArgs<double>&);
template void persistent_lstm_fwd<float>(const Ctx&, const BlockLSTMDims&,
                                         const BlockLSTMFwdArgs<float>&);
template void persistent_lstm_fwd<double>(const Ctx&, const BlockLSTMDims&,
                                          const BlockLSTMFwdArgs<double>&);
template void persistent_lstm_bwd<float>(const Ctx&, const BlockLSTMDims&,
                                         const BlockLSTMBwdArgs<float>&);
template void persistent_lstm_bwd<double>(const Ctx&, const BlockLSTMDims&,
                                          const BlockLSTMBwdArgs<double>&);

}  // namespace blockrnn::cuda::detail
