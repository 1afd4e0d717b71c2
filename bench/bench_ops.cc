// Google Benchmark targets for every op, fast path and reference, reporting GFLOP/s of GEMM
// work. Inputs are built generically from each op's TensorFlow input names, so every op in
// the table is benchmarked. Shapes: bench/shapes.txt.
//
//   build/release/bench/blockrnn_bench --benchmark_filter=BlockLSTM
//   BLOCKRNN_NUM_THREADS=2 build/release/bench/blockrnn_bench
#include <benchmark/benchmark.h>

#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "op_shapes.h"

namespace {

using blockrnn::DType;
using blockrnn::Shape;
using blockrnn::Tensor;

struct Dims {
  std::string name;
  std::int64_t T, B, I, H;
};

std::vector<Dims> read_shapes() {
  std::vector<Dims> out;
  std::ifstream f(BLOCKRNN_BENCH_SHAPES);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    Dims d;
    if (s >> d.name >> d.T >> d.B >> d.I >> d.H) out.push_back(d);
  }
  return out;
}

bool is_sequence(const std::string& op) {
  return blockrnn::testing::is_sequence_op(op);
}

int gates(const std::string& op) {
  if (op.find("LSTM") != std::string::npos) return 4;
  return 3;
}

void run(benchmark::State& state, const std::string& op, const Dims& d, bool reference) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  const blockrnn::OpDef& def = blockrnn::find_op(op);
  std::vector<Tensor> inputs;
  // TensorFlow's inputs; the optional trailing ones (seq_lengths) left out: every example runs T
  // steps.
  const std::size_t required = def.inputs.size() - std::size_t(def.num_optional_inputs);
  for (const std::string& name : std::span(def.inputs).first(required)) {
    if (name == "seq_len_max") {
      Tensor t(DType::kInt64, Shape{});
      t.data_as<std::int64_t>()[0] = d.T;
      inputs.push_back(std::move(t));
      continue;
    }
    Tensor t(DType::kFloat32, blockrnn::testing::input_shape(op, name, d.T, d.B, d.I, d.H));
    for (std::int64_t e = 0; e < t.num_elements(); ++e) t.data_as<float>()[e] = dist(rng);
    inputs.push_back(std::move(t));
  }
  std::vector<blockrnn::TensorView> views(inputs.begin(), inputs.end());
  blockrnn::AttrMap attrs;
  for (const blockrnn::AttrDef& a : def.attrs) {
    if (!a.has_default) attrs[a.name] = 0;  // use_peephole on the grads
  }
  const blockrnn::OutputSpec spec = blockrnn::infer_outputs(op, views, attrs);
  std::vector<Tensor> outputs;
  std::vector<blockrnn::MutableTensorView> out_views;
  for (const Shape& s : spec.shapes) {
    outputs.emplace_back(DType::kFloat32, s);
    out_views.push_back(outputs.back().mutable_view());
  }
  blockrnn::set_force_reference(reference);
  for (auto _ : state) {
    blockrnn::run_op(op, views, attrs, out_views);
    benchmark::ClobberMemory();
  }
  blockrnn::set_force_reference(false);
  const double steps = is_sequence(op) ? double(d.T) : 1.0;
  const double fwd = 2.0 * steps * d.B * double(d.I + d.H) * gates(op) * d.H;
  const bool backward = op.find("Grad") != std::string::npos || op.rfind("gradients.", 0) == 0;
  state.counters["GFLOP/s"] = benchmark::Counter((backward ? 2 * fwd : fwd) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (const blockrnn::OpDef& def : blockrnn::list_ops()) {
    for (const Dims& d : read_shapes()) {
      for (bool reference : {false, true}) {
        // The reference is plain loops: only the smallest shape.
        if (reference && d.B * (d.I + d.H) * d.H * (is_sequence(def.name) ? d.T : 1) > 50'000'000)
          continue;
        const std::string name = def.name + "/" + d.name + (reference ? "/reference" : "/fast");
        benchmark::RegisterBenchmark(
            name.c_str(),
            [op = def.name, d, reference](benchmark::State& s) { run(s, op, d, reference); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
