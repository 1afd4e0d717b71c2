// Per-call overhead of a small sequence call ("plan once, run many"): BlockLSTM at T = 1, B = 1,
// I = H = 32, float32, 1 thread — `blockrnn sample`'s per-character step — through
//   1. the one-shot public call   blockrnn::block_lstm (validation, typed path, packing and
//                                 workspace per call)
//   2. the layer object           blockrnn::LSTMLayer::forward (checks the per-call views only,
//                                 weights packed at set time, workspace reused)
//   3. the layer object re-set    LSTMLayer::set_weights + forward on every call (the weights
//                                 copied and packed per call: a caller that sets unchanged
//                                 weights again before each step)
// This program is a client of the public API (blockrnn/blockrnn.h) only, like any caller's.
// The bare kernel is not public, so row 2 stands for it: the layer's forward is the kernel on
// packed weights plus the checks of the per-call views (measured with perf at 65–165 ns over
// the bare kernel, docs/performance.md), the floor of any call at this shape. Row 1 against
// row 2 is what the one-shot path costs over that floor; row 3 is the price of setting the
// weights on every call (copying and packing all of them, the backward's too: more packing than
// the one-shot forward does).
// Prints the median over 7 repetitions of the mean CPU time per call (ns, the calling thread's),
// and the heap allocations (operator new calls, counted by this binary's replacement) of 1000
// calls of each. Usage:
//   blockrnn_layer_overhead [calls per repetition, default 200000]
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "counting_new.h"  // tests/alloc: operator new counted (the heap column)

namespace {

template <typename F>
long allocations(F&& f) {
  const long before = blockrnn::alloc_counter::count();
  for (int k = 0; k < 1000; ++k) f();
  return blockrnn::alloc_counter::count() - before;
}

// The calling thread's CPU time in ns: the calls run on one thread, and on a loaded machine
// the wall time also counts the time the thread waited to be scheduled (measured: wall 15 µs
// per one-shot call against 2.8 µs of CPU with two builds beside it).
double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

template <typename F>
double ns_per_call(long calls, F&& f) {
  std::vector<double> reps;
  for (int r = 0; r < 7; ++r) {
    const double t0 = thread_cpu_ns();
    for (long k = 0; k < calls; ++k) f();
    reps.push_back((thread_cpu_ns() - t0) / double(calls));
  }
  std::sort(reps.begin(), reps.end());
  return reps[reps.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace blockrnn;
  const long calls = argc > 1 ? std::atol(argv[1]) : 200000;
  set_num_threads(1);
  constexpr std::int64_t T = 1, B = 1, I = 32, H = 32;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto fill = [&](std::vector<float>& v) {
    for (float& e : v) e = u(rng);
  };
  std::vector<float> x(T * B * I), cs0(B * H), h0(B * H), w((I + H) * 4 * H), b(4 * H);
  fill(x), fill(cs0), fill(h0), fill(w), fill(b);
  std::vector<std::vector<float>> out(7, std::vector<float>(T * B * H));
  const Shape tbh{T, B, H};
  const BlockLSTMOutputs outs{{out[0].data(), tbh}, {out[1].data(), tbh}, {out[2].data(), tbh},
                              {out[3].data(), tbh}, {out[4].data(), tbh}, {out[5].data(), tbh},
                              {out[6].data(), tbh}};
  const BlockLSTMInputs in{.x = {x.data(), {T, B, I}},
                           .cs_prev = {cs0.data(), {B, H}},
                           .h_prev = {h0.data(), {B, H}},
                           .w = {w.data(), {I + H, 4 * H}},
                           .b = {b.data(), {4 * H}}};
  const double one_shot = ns_per_call(calls, [&] { block_lstm(in, outs); });

  LSTMLayer layer({.input_size = I, .hidden_size = H, .max_time = T, .max_batch = B});
  layer.set_weights(in.w, in.b);
  const LSTMLayerInputs lin{.x = in.x, .cs_prev = in.cs_prev, .h_prev = in.h_prev};
  const double layer_ns = ns_per_call(calls, [&] { layer.forward(lin, outs); });

  const auto reset_and_forward = [&] {
    layer.set_weights(in.w, in.b);
    layer.forward(lin, outs);
  };
  const double reset_ns = ns_per_call(calls, reset_and_forward);

  const long alloc_one_shot = allocations([&] { block_lstm(in, outs); });
  const long alloc_layer = allocations([&] { layer.forward(lin, outs); });
  const long alloc_reset = allocations(reset_and_forward);
  std::printf("BlockLSTM T=%lld B=%lld I=%lld H=%lld float32, 1 thread, isa %s, %ld calls x 7\n",
              (long long)T, (long long)B, (long long)I, (long long)H, get_isa(), calls);
  std::printf("  one-shot block_lstm               %8.0f ns/call\n", one_shot);
  std::printf("  LSTMLayer::forward                %8.0f ns/call\n", layer_ns);
  std::printf("  LSTMLayer::set_weights + forward  %8.0f ns/call\n", reset_ns);
  std::printf("one-shot / LSTMLayer::forward: %.2f\n", one_shot / layer_ns);
  std::printf(
      "heap allocations in 1000 calls: one-shot %ld, LSTMLayer::forward %ld, "
      "set_weights + forward %ld\n",
      alloc_one_shot, alloc_layer, alloc_reset);
  return 0;
}
