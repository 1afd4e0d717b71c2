// blockrnn command-line tool.
//   blockrnn demo     run the GRU block cell forward and backward on an embedded example and
//                     print a finite-difference gradient check
//   blockrnn ops      list every op with TensorFlow's input, attr and output names
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <random>

#include "blockrnn/blockrnn.h"

namespace {

using blockrnn::DType;
using blockrnn::Tensor;

Tensor uniform(blockrnn::Shape shape, std::mt19937_64& rng, double scale) {
  Tensor t(DType::kFloat64, shape);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (std::int64_t e = 0; e < t.num_elements(); ++e) t.data_as<double>()[e] = dist(rng);
  return t;
}

int run_demo(std::int64_t B, std::int64_t I, std::int64_t H, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double ws = 1.0 / std::sqrt(double(I + H));
  Tensor x = uniform({B, I}, rng, 1), h_prev = uniform({B, H}, rng, 1),
         w_ru = uniform({I + H, 2 * H}, rng, ws), w_c = uniform({I + H, H}, rng, ws),
         b_ru = uniform({2 * H}, rng, 0.1), b_c = uniform({H}, rng, 0.1),
         d_h = uniform({B, H}, rng, 1);
  auto fwd = [&] { return blockrnn::gru_block_cell({x, h_prev, w_ru, w_c, b_ru, b_c}); };
  const blockrnn::GRUBlockCellResult f = fwd();
  std::printf("GRUBlockCell  B=%lld I=%lld H=%lld (float64, seed %llu)\n", (long long)B,
              (long long)I, (long long)H, (unsigned long long)seed);
  std::printf("  h[0, :4] =");
  for (std::int64_t j = 0; j < std::min<std::int64_t>(4, H); ++j) {
    std::printf(" % .6f", f.h.data_as<double>()[j]);
  }
  std::printf("\n");
  const blockrnn::GRUBlockCellBackwardResult g =
      blockrnn::gru_block_cell_backward({x, h_prev, w_ru, w_c, b_ru, b_c, f.r, f.u, f.c, d_h});
  auto loss = [&] {
    const blockrnn::GRUBlockCellResult r = fwd();
    double l = 0;
    for (std::int64_t e = 0; e < B * H; ++e)
      l += d_h.data_as<double>()[e] * r.h.data_as<double>()[e];
    return l;
  };
  struct Item {
    const char* name;
    Tensor* param;
    const Tensor* grad;
  } items[] = {{"x", &x, &g.x},       {"h_prev", &h_prev, &g.h_prev}, {"w_ru", &w_ru, &g.w_ru},
               {"w_c", &w_c, &g.w_c}, {"b_ru", &b_ru, &g.b_ru},       {"b_c", &b_c, &g.b_c}};
  std::printf(
      "Gradient check of gradients.GRUBlockCell, loss = sum(d_h * h), central differences:\n");
  bool ok = true;
  for (const Item& it : items) {
    double max_err = 0, max_grad = 0;
    for (std::int64_t e = 0; e < it.param->num_elements(); ++e) {
      double* v = it.param->data_as<double>() + e;
      const double saved = *v, eps = 1e-6;
      *v = saved + eps;
      const double lp = loss();
      *v = saved - eps;
      const double lm = loss();
      *v = saved;
      const double num = (lp - lm) / (2 * eps);
      max_err = std::max(max_err, std::abs(num - it.grad->data_as<double>()[e]));
      max_grad = std::max(max_grad, std::abs(num));
    }
    const double rel = max_err / std::max(1.0, max_grad);
    const bool pass = rel <= 1e-6;
    ok = ok && pass;
    std::printf("  d_%-7s max |analytic - numeric| = %.2e  (relative %.2e)  %s\n", it.name, max_err,
                rel, pass ? "ok" : "FAIL");
  }
  std::printf("%s\n", ok ? "gradient check passed" : "gradient check FAILED");
  return ok ? 0 : 1;
}

int list_ops() {
  for (const blockrnn::OpDef& def : blockrnn::list_ops()) {
    std::printf("%s(", def.name.c_str());
    for (std::size_t k = 0; k < def.inputs.size(); ++k) {
      std::printf("%s%s", k ? ", " : "", def.inputs[k].c_str());
    }
    for (const blockrnn::AttrDef& a : def.attrs) {
      if (a.has_default) {
        std::printf(", %s=%g", a.name.c_str(), a.default_value);
      } else {
        std::printf(", %s", a.name.c_str());
      }
    }
    std::printf(") -> (");
    for (std::size_t k = 0; k < def.outputs.size(); ++k) {
      std::printf("%s%s", k ? ", " : "", def.outputs[k].c_str());
    }
    std::printf(")\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"blockrnn: TensorFlow's fused RNN block ops, exact and fast"};
  app.require_subcommand(1);
  std::int64_t B = 2, I = 3, H = 4;
  std::uint64_t seed = 1;
  int threads = 0;
  app.add_option("--threads", threads, "threads to use (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  CLI::App* demo = app.add_subcommand("demo", "GRU cell forward + backward with a gradient check");
  demo->add_option("--batch", B, "batch size")->check(CLI::Range(1, 64));
  demo->add_option("--input", I, "input size")->check(CLI::Range(0, 64));
  demo->add_option("--hidden", H, "cell size")->check(CLI::Range(1, 64));
  demo->add_option("--seed", seed, "random seed");
  CLI::App* ops = app.add_subcommand("ops", "list the ops and their TensorFlow signatures");
  CLI11_PARSE(app, argc, argv);
  try {
    if (threads > 0) blockrnn::set_num_threads(threads);
    if (demo->parsed()) return run_demo(B, I, H, seed);
    if (ops->parsed()) return list_ops();
  } catch (const blockrnn::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
