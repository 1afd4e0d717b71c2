// blockrnn_cuda_timing: a small timing of the CUDA backend (scripts/gpu_check.sh runs it).
// BlockLSTM forward and forward + backward (BlockLSTMGrad), BlockGRU and BlockGRUResetAfter
// forward, in float32 (exact and TF32) and float16, at B = 16, I = H = 512, T = 100 (override:
// blockrnn_cuda_timing T B H). Prints µs per call and per step, the median of 20 runs after 3
// warm-ups, timed with CUDA events on one stream. Inputs are random in [−0.1, 0.1].
// Without a CUDA device it says so and exits with status 77 (not a result).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "blockrnn/cuda.h"

namespace {

using namespace blockrnn;

struct Buf {
  void* p = nullptr;
  DType dtype;
  Shape shape;
  Buf(DType t, Shape s, std::mt19937& rng) : dtype(t), shape(s) {
    const std::int64_t n = s.num_elements();
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    std::vector<unsigned char> host(static_cast<std::size_t>(n) * dtype_size(t));
    for (std::int64_t e = 0; e < n; ++e) {
      const float v = u(rng);
      if (t == DType::kFloat16) {
        reinterpret_cast<Half*>(host.data())[e] = float_to_half(v);
      } else {
        reinterpret_cast<float*>(host.data())[e] = v;
      }
    }
    if (cudaMalloc(&p, host.size()) != cudaSuccess) std::abort();
    cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice);
  }
  ~Buf() { cudaFree(p); }
  TensorView v() const { return TensorView(p, dtype, shape); }
  MutableTensorView m() const { return MutableTensorView(p, dtype, shape); }
};

double median_us(cudaStream_t s, const std::function<void()>& f) {
  for (int k = 0; k < 3; ++k) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int k = 0; k < 20; ++k) {
    cudaEventRecord(a, s);
    f();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda::device_count() == 0) {
    std::printf("no CUDA device: nothing timed\n");
    return 77;
  }
  const std::int64_t T = argc > 1 ? std::atoll(argv[1]) : 100;
  const std::int64_t B = argc > 2 ? std::atoll(argv[2]) : 16;
  const std::int64_t H = argc > 3 ? std::atoll(argv[3]) : 512, I = H;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s; T=%lld B=%lld I=H=%lld\n", prop.name, (long long)T, (long long)B,
              (long long)H);
  cudaStream_t s;
  cudaStreamCreate(&s);
  std::mt19937 rng(1);
  struct Mode {
    const char* name;
    DType dtype;
    cuda::MathMode math;
  };
  for (const Mode& mode : {Mode{"float32 exact", DType::kFloat32, cuda::MathMode::kExactFP32},
                           Mode{"float32 TF32", DType::kFloat32, cuda::MathMode::kTF32},
                           Mode{"float16", DType::kFloat16, cuda::MathMode::kExactFP32}}) {
    cuda::set_math_mode(mode.math);
    const DType t = mode.dtype;
    Buf x(t, {T, B, I}, rng), cs0(t, {B, H}, rng), h0(t, {B, H}, rng), w(t, {I + H, 4 * H}, rng),
        b(t, {4 * H}, rng);
    std::vector<Buf*> seven;
    for (int k = 0; k < 7; ++k) seven.push_back(new Buf(t, {T, B, H}, rng));
    Buf csg(t, {T, B, H}, rng), hg(t, {T, B, H}, rng), xg(t, {T, B, I}, rng), csp_g(t, {B, H}, rng),
        hp_g(t, {B, H}, rng), wg(t, {I + H, 4 * H}, rng), pg1(t, {H}, rng), pg2(t, {H}, rng),
        pg3(t, {H}, rng), bg(t, {4 * H}, rng);
    const BlockLSTMInputs in{std::nullopt, x.v(), cs0.v(), h0.v(), w.v(), {}, {}, {}, b.v()};
    const BlockLSTMOutputs out{seven[0]->m(), seven[1]->m(), seven[2]->m(), seven[3]->m(),
                               seven[4]->m(), seven[5]->m(), seven[6]->m()};
    const BlockLSTMAttrs attrs{1.0, 0.0, false};
    const double fwd = median_us(s, [&] { cuda::block_lstm(in, out, attrs, s); });
    const BlockLSTMGradInputs gin{std::nullopt,
                                  x.v(),
                                  cs0.v(),
                                  h0.v(),
                                  w.v(),
                                  {},
                                  {},
                                  {},
                                  b.v(),
                                  seven[0]->v(),
                                  seven[1]->v(),
                                  seven[2]->v(),
                                  seven[3]->v(),
                                  seven[4]->v(),
                                  seven[5]->v(),
                                  seven[6]->v(),
                                  csg.v(),
                                  hg.v()};
    const BlockLSTMGradOutputs gout{xg.m(),  csp_g.m(), hp_g.m(), wg.m(),
                                    pg1.m(), pg2.m(),   pg3.m(),  bg.m()};
    const double fb = median_us(s, [&] {
      cuda::block_lstm(in, out, attrs, s);
      cuda::block_lstm_grad(gin, gout, false, s);
    });
    std::printf(
        "%-14s BlockLSTM fwd %10.1f us (%6.2f us/step)  fwd+bwd %10.1f us (%6.2f us/step)\n",
        mode.name, fwd, fwd / T, fb, fb / T);
    Buf w_ru(t, {I + H, 2 * H}, rng), w_c(t, {I + H, H}, rng), b_ru(t, {2 * H}, rng),
        b_c(t, {H}, rng);
    const BlockGRUInputs gi{std::nullopt, x.v(), h0.v(), w_ru.v(), w_c.v(), b_ru.v(), b_c.v()};
    const BlockGRUOutputs go{seven[0]->m(), seven[1]->m(), seven[2]->m(), seven[3]->m()};
    const double gru = median_us(s, [&] { cuda::block_gru(gi, go, s); });
    Buf w_i(t, {I, 3 * H}, rng), w_h(t, {H, 3 * H}, rng), b_i(t, {3 * H}, rng),
        b_h(t, {3 * H}, rng);
    const BlockGRUResetAfterInputs ri{T, x.v(), h0.v(), w_i.v(), w_h.v(), b_i.v(), b_h.v()};
    const BlockGRUResetAfterOutputs ro{seven[0]->m(), seven[1]->m(), seven[2]->m(), seven[3]->m(),
                                       seven[4]->m()};
    const double gra = median_us(s, [&] { cuda::block_gru_reset_after(ri, ro, s); });
    std::printf(
        "%-14s BlockGRU fwd %10.1f us (%6.2f us/step)  BlockGRUResetAfter fwd %10.1f us "
        "(%6.2f us/step)\n",
        mode.name, gru, gru / T, gra, gra / T);
    for (Buf* p : seven) delete p;
  }
  cudaStreamDestroy(s);
  return 0;
}
