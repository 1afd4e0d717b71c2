// bfloat16 sequence layer against its one-shot ops: BlockLSTM forward + backward (BlockLSTMGrad),
// T = 50, B = 64, I = H = 512, bfloat16, on the calling thread's CPU time. The layer runs on its
// plan (the weights packed once for bfloat16 products at set_weights, the workspace reused); the
// one-shot calls block_lstm + block_lstm_grad pack the weights (and allocate) at every call, as a
// bfloat16 layer did before it had a plan. Rounds interleave the two (A B A B …); prints each
// round's ms per fwd+bwd, the median of the per-round ratios, and the heap allocations
// (operator new calls) of one fwd+bwd of each. Usage:
//   blockrnn_bf16_layer_plan [rounds, default 5] [threads, default 1]
// A client of the public API only.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "counting_new.h"  // tests/alloc: operator new counted

namespace {

using namespace blockrnn;

double cpu_ms() {  // the process's CPU time: every thread of the call
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

Tensor random_bf16(Shape shape, std::mt19937_64& rng, float scale) {
  Tensor t(DType::kBFloat16, shape);
  std::uniform_real_distribution<float> u(-scale, scale);
  auto* p = static_cast<BFloat16*>(t.data());
  for (std::int64_t e = 0; e < t.num_elements(); ++e) p[e] = float_to_bfloat16(u(rng));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  set_num_threads(argc > 2 ? std::atoi(argv[2]) : 1);
  constexpr std::int64_t T = 50, B = 64, I = 512, H = 512;
  const DType dt = DType::kBFloat16;
  std::mt19937_64 rng(1);
  const Tensor x = random_bf16({T, B, I}, rng, 1.0f), s = random_bf16({B, H}, rng, 0.5f);
  const Tensor w = random_bf16({I + H, 4 * H}, rng, 0.05f), b = random_bf16({4 * H}, rng, 0.1f);
  const Tensor csg = random_bf16({T, B, H}, rng, 0.1f), hg = random_bf16({T, B, H}, rng, 0.1f);
  std::vector<Tensor> o, g;
  for (int k = 0; k < 7; ++k) o.emplace_back(dt, Shape{T, B, H});
  for (const Shape& shape : {Shape{T, B, I}, Shape{B, H}, Shape{B, H}, Shape{I + H, 4 * H},
                             Shape{H}, Shape{H}, Shape{H}, Shape{4 * H}}) {
    g.emplace_back(dt, shape);
  }
  const BlockLSTMOutputs out{o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                             o[3].mutable_view(), o[4].mutable_view(), o[5].mutable_view(),
                             o[6].mutable_view()};
  const BlockLSTMGradOutputs grads{g[0].mutable_view(), g[1].mutable_view(), g[2].mutable_view(),
                                   g[3].mutable_view(), g[4].mutable_view(), g[5].mutable_view(),
                                   g[6].mutable_view(), g[7].mutable_view()};

  LSTMLayer layer({.input_size = I, .hidden_size = H, .dtype = dt, .max_time = T, .max_batch = B});
  layer.set_weights(w, b);
  auto run_layer = [&] {
    layer.forward({.x = x, .cs_prev = s, .h_prev = s}, out);
    layer.backward({.x = x,
                    .cs_prev = s,
                    .h_prev = s,
                    .i = o[0],
                    .cs = o[1],
                    .f = o[2],
                    .o = o[3],
                    .ci = o[4],
                    .co = o[5],
                    .h = o[6],
                    .cs_grad = csg,
                    .h_grad = hg},
                   grads);
  };
  auto run_ops = [&] {
    const BlockLSTMInputs in{.x = x, .cs_prev = s, .h_prev = s, .w = w, .b = b};
    block_lstm(in, out);
    BlockLSTMGradInputs gin{};
    gin.x = x;
    gin.cs_prev = s;
    gin.h_prev = s;
    gin.w = w;
    gin.b = b;
    gin.i = o[0];
    gin.cs = o[1];
    gin.f = o[2];
    gin.o = o[3];
    gin.ci = o[4];
    gin.co = o[5];
    gin.h = o[6];
    gin.cs_grad = csg;
    gin.h_grad = hg;
    block_lstm_grad(gin, grads, false);
  };
  run_layer();  // warm up both
  run_ops();
  std::vector<double> ratios;
  std::printf("bfloat16 LSTM T50 B64 I=H=512 fwd+bwd, %d thread(s), path %s, CPU ms per call\n",
              get_num_threads(), get_isa());
  std::printf("round  layer(plan)  one-shot ops  ops/layer\n");
  for (int r = 0; r < rounds; ++r) {
    double t0 = cpu_ms();
    run_layer();
    const double a = cpu_ms() - t0;
    t0 = cpu_ms();
    run_ops();
    const double c = cpu_ms() - t0;
    ratios.push_back(c / a);
    std::printf("%5d  %11.1f  %12.1f  %9.4f\n", r, a, c, c / a);
  }
  long before = alloc_counter::count();
  run_layer();
  const long layer_allocs = alloc_counter::count() - before;
  before = alloc_counter::count();
  run_ops();
  const long ops_allocs = alloc_counter::count() - before;
  std::printf("heap allocations per fwd+bwd: layer %ld, one-shot ops %ld\n", layer_allocs,
              ops_allocs);
  std::sort(ratios.begin(), ratios.end());
  std::printf("median ops/layer %.4f (min %.4f, max %.4f)\n", ratios[ratios.size() / 2],
              ratios.front(), ratios.back());
}
