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
// Then the cell ops at B = 64, I = H = 512, float32, 1 thread (the product-bound shape of
// docs/performance.md's lstm_cell_b64_512 row), forward only:
//   4. one-shot lstm_block_cell / gru_block_cell (the weights packed inside the GEMM per call,
//      the scratch allocated per call)
//   5. LSTMCellLayer::forward / GRUCellLayer::forward (weights packed once, workspace reused)
//   6. blockrnn::matmul of one product of the forward's size, [B, I+H]·[I+H, 4H] (LSTM) or
//      [B, I+H]·[I+H, 3H] (GRU), for scale: the public GEMM, which packs its b per call
// with GFLOP/s counting the forward's products (2·B·(I+H)·G·H, G = 4 LSTM, 3 GRU); then the
// backward (gradients.LSTMBlockCell / gradients.GRUBlockCell) one-shot against the plan's, whose
// products are twice the forward's. The peephole vectors are passed (zeros), so that the
// one-shot calls do not build them per call.
// Prints the median over 7 repetitions of the mean CPU time per call (ns, the calling thread's),
// and the heap allocations (operator new calls, counted by this binary's replacement) of 1000
// calls of each (100 for the cells). Usage:
//   blockrnn_layer_overhead [calls per repetition, default 200000] [cell calls, default 200]
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "counting_new.h"  // tests/alloc: operator new counted (the heap column)

namespace {

template <typename F>
long allocations(F&& f, int calls = 1000) {
  const long before = blockrnn::alloc_counter::count();
  for (int k = 0; k < calls; ++k) f();
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

// The cell section (rows 4–6 above).
void cell_section(long calls) {
  using namespace blockrnn;
  constexpr std::int64_t B = 64, I = 512, H = 512;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  auto filled = [&](std::int64_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = u(rng);
    return v;
  };
  const std::vector<float> x = filled(B * I), cs0 = filled(B * H), h0 = filled(B * H);
  const std::vector<float> w = filled((I + H) * 4 * H), b = filled(4 * H);
  const std::vector<float> w_ru = filled((I + H) * 2 * H), w_c = filled((I + H) * H),
                           b_ru = filled(2 * H), b_c = filled(H);
  std::vector<std::vector<float>> out(7, std::vector<float>(B * H));
  const Shape bh{B, H};
  const TensorView xv{x.data(), {B, I}}, csv{cs0.data(), bh}, hv{h0.data(), bh};
  auto mv = [&](int k) { return MutableTensorView{out[k].data(), bh}; };
  const LSTMBlockCellOutputs lo{mv(0), mv(1), mv(2), mv(3), mv(4), mv(5), mv(6)};
  const GRUBlockCellOutputs go{mv(0), mv(1), mv(2), mv(3)};
  const std::vector<float> zeros(H, 0.0f);  // the peepholes, given: no per-call default
  const TensorView zv{zeros.data(), {H}};
  const LSTMBlockCellInputs lin{.x = xv,
                                .cs_prev = csv,
                                .h_prev = hv,
                                .w = {w.data(), {I + H, 4 * H}},
                                .wci = zv,
                                .wcf = zv,
                                .wco = zv,
                                .b = {b.data(), {4 * H}}};
  const GRUBlockCellInputs gin{xv,
                               hv,
                               {w_ru.data(), {I + H, 2 * H}},
                               {w_c.data(), {I + H, H}},
                               {b_ru.data(), {2 * H}},
                               {b_c.data(), {H}}};
  LSTMCellLayer lstm({.input_size = I, .hidden_size = H, .max_batch = B});
  lstm.set_weights(lin.w, lin.b);
  GRUCellLayer gru({.input_size = I, .hidden_size = H, .max_batch = B});
  gru.set_weights(gin.w_ru, gin.w_c, gin.b_ru, gin.b_c);
  std::vector<float> xh = filled(B * (I + H)), c(B * 4 * H);
  // The backward: upstream gradients, and the gradients' buffers (the largest of each shape).
  const std::vector<float> dcs = filled(B * H), dh = filled(B * H);
  std::vector<float> gx(B * I), gs(B * H), gh(B * H), gw((I + H) * 4 * H), gw2((I + H) * H),
      gb(4 * H), gb2(H), gp(3 * H);
  const TensorView dcsv{dcs.data(), bh}, dhv{dh.data(), bh};
  const auto in_view = [&](int k) { return TensorView{out[k].data(), bh}; };
  const LSTMBlockCellBackwardInputs lgi{
      xv,         csv,        hv,         lin.w,      zv,         zv,         zv,   lin.b,
      in_view(0), in_view(1), in_view(2), in_view(3), in_view(4), in_view(5), dcsv, dhv};
  const LSTMBlockCellBackwardOutputs lgo{{gx.data(), {B, I}},      {gs.data(), bh},
                                         {gh.data(), bh},          {gw.data(), {I + H, 4 * H}},
                                         {gp.data(), {H}},         {gp.data() + H, {H}},
                                         {gp.data() + 2 * H, {H}}, {gb.data(), {4 * H}}};
  const GRUBlockCellBackwardInputs ggi{xv,      hv,         gin.w_ru,   gin.w_c,    gin.b_ru,
                                       gin.b_c, in_view(0), in_view(1), in_view(2), dhv};
  const GRUBlockCellBackwardOutputs ggo{{gx.data(), {B, I}},         {gh.data(), bh},
                                        {gw.data(), {I + H, 2 * H}}, {gw2.data(), {I + H, H}},
                                        {gb.data(), {2 * H}},        {gb2.data(), {H}}};

  std::printf("\nCell ops B=%lld I=%lld H=%lld float32, 1 thread, isa %s, %ld calls x 7\n",
              (long long)B, (long long)I, (long long)H, get_isa(), calls);
  for (const int G : {4, 3}) {
    const bool is_lstm = G == 4;
    const double flops = 2.0 * double(B) * double(I + H) * double(G * H);
    const auto one_shot = [&] { is_lstm ? lstm_block_cell(lin, lo) : gru_block_cell(gin, go); };
    const auto plan = [&] {
      is_lstm ? lstm.forward({xv, csv, hv}, lo) : gru.forward({xv, hv}, go);
    };
    const TensorView wv = is_lstm ? lin.w : TensorView{w.data(), {I + H, G * H}};
    const auto product = [&] { matmul({xh.data(), {B, I + H}}, wv, {c.data(), {B, G * H}}); };
    const double t_one = ns_per_call(calls, one_shot), t_plan = ns_per_call(calls, plan),
                 t_mm = ns_per_call(calls, product);
    const std::string op =
        std::string("one-shot ") + (is_lstm ? "lstm_block_cell" : "gru_block_cell");
    const char* layer = is_lstm ? "LSTMCellLayer::forward" : "GRUCellLayer::forward";
    const std::string mm = "matmul [" + std::to_string(B) + "," + std::to_string(I + H) + "]x[" +
                           std::to_string(I + H) + "," + std::to_string(G * H) + "]";
    const auto row = [&](const char* label, double ns) {
      std::printf("  %-34s %10.0f ns/call  %6.1f GFLOP/s\n", label, ns, flops / ns);
    };
    row(op.c_str(), t_one);
    row(layer, t_plan);
    row(mm.c_str(), t_mm);
    std::printf("  one-shot / plan: %.3f; heap allocations in 100 calls: one-shot %ld, plan %ld\n",
                t_one / t_plan, allocations(one_shot, 100), allocations(plan, 100));
    // The backward (gradients.*BlockCell) through the forward call just made (its outputs are
    // in `out`): twice the forward's products (input and state gradients, weight gradients).
    plan();
    const auto one_shot_bwd = [&] {
      is_lstm ? lstm_block_cell_backward(lgi, lgo) : gru_block_cell_backward(ggi, ggo);
    };
    const auto plan_bwd = [&] {
      if (is_lstm) {
        lstm.backward({xv, csv, hv, lgi.i, lgi.cs, lgi.f, lgi.o, lgi.ci, lgi.co, dcsv, dhv},
                      {lgo.x, lgo.cs_prev, lgo.h_prev, lgo.w, lgo.wci, lgo.wcf, lgo.wco, lgo.b});
      } else {
        gru.backward({xv, hv, ggi.r, ggi.u, ggi.c, dhv},
                     {ggo.x, ggo.h_prev, ggo.w_ru, ggo.w_c, ggo.b_ru, ggo.b_c});
      }
    };
    const double t_one_bwd = ns_per_call(calls, one_shot_bwd),
                 t_plan_bwd = ns_per_call(calls, plan_bwd);
    const auto bwd_row = [&](const std::string& label, double ns) {
      std::printf("  %-34s %10.0f ns/call  %6.1f GFLOP/s\n", label.c_str(), ns, 2 * flops / ns);
    };
    bwd_row(std::string("one-shot ") + (is_lstm ? "lstm" : "gru") + "_block_cell_backward",
            t_one_bwd);
    bwd_row(std::string(is_lstm ? "LSTM" : "GRU") + "CellLayer::backward", t_plan_bwd);
    std::printf("  one-shot / plan: %.3f; heap allocations in 100 calls: one-shot %ld, plan %ld\n",
                t_one_bwd / t_plan_bwd, allocations(one_shot_bwd, 100), allocations(plan_bwd, 100));
  }
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
  cell_section(argc > 2 ? std::atol(argv[2]) : 200);
  return 0;
}
