// The training loop of `blockrnn train` (see trainer.h): option checks, corpus and resume
// handling, TBPTT batches over the corpus ring, clip + Adam, metrics.csv, loss.svg and the
// checkpoint.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "blockrnn/context.h"
#include "train/adam.h"
#include "train/corpus.h"
#include "train/file_util.h"
#include "train/loss_chart.h"
#include "train/model_checkpoint.h"
#include "train/progress.h"

namespace blockrnn::train {
namespace {

constexpr int64_t kFinalLossWindow = 50;  // steps averaged for the reported final loss

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

void check_option(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

void validate(const TrainOptions& o) {
  auto in_range = [](const char* name, int64_t v, int64_t lo, int64_t hi) {
    check_option(v >= lo && v <= hi, std::string("--") + name + " must be in [" +
                                         std::to_string(lo) + ", " + std::to_string(hi) +
                                         "], got " + std::to_string(v));
  };
  if (o.hidden) in_range("hidden", *o.hidden, 1, kMaxHidden);
  if (o.layers) in_range("layers", *o.layers, 1, kMaxLayers);
  if (o.embed) in_range("embed", *o.embed, 1, kMaxEmbed);
  in_range("steps", o.steps, 1, kMaxSteps);
  in_range("batch", o.batch, 1, kMaxBatch);
  in_range("seq-len", o.seq_len, 1, kMaxSeqLen);
  check_option(std::isfinite(o.lr) && o.lr > 0 && o.lr <= 1,
               "--lr must be a number in (0, 1], got " + fmt("%g", o.lr));
  check_option(std::isfinite(o.clip) && o.clip > 0,
               "--clip must be a positive number, got " + fmt("%g", o.clip));
  check_option(
      std::isfinite(o.max_seconds) && o.max_seconds >= 0,
      "--max-time must be a non-negative number of seconds, got " + fmt("%g", o.max_seconds));
  check_option(!o.out_dir.empty(), "--out must not be empty");
}

// Bytes the model, its gradients and Adam moments, and the batch workspace take.
double workspace_bytes(const ModelConfig& c, int64_t params, int64_t T, int64_t B) {
  const double nf = c.cell == CellKind::kLstm ? 7 : 4;
  const double D = c.embed, H = c.hidden, V = c.vocab_size, L = c.layers;
  const double per_row = D + nf * H * L + 2 * std::max(D, H) + H + V;
  return sizeof(float) * (double(T) * double(B) * per_row + 4.0 * double(params));
}

std::string describe_corpus(const std::string& path, size_t size) {
  const std::string name = path.empty() ? "embedded corpus (KJV Genesis-Exodus, public domain)"
                                        : "corpus '" + path + "'";
  return name + ", " + std::to_string(size) + " characters";
}

// Writes metrics.csv row by row, flushing every `flush_every` rows and at the end.
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr) throw std::runtime_error("cannot create '" + path + "'");
    std::fputs("step,loss,smoothed_loss,grad_norm,learning_rate,chars_per_sec,elapsed_s\n", file_);
  }
  ~MetricsWriter() {
    if (file_ != nullptr) std::fclose(file_);
  }
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void row(int64_t step, double loss, double smoothed, double grad_norm, double lr, double cps,
           double elapsed) {
    std::fprintf(file_, "%lld,%.6f,%.6f,%.6f,%.6g,%.1f,%.3f\n", static_cast<long long>(step), loss,
                 smoothed, grad_norm, lr, cps, elapsed);
    if (++rows_ % 50 == 0) flush();
  }
  void flush() {
    if (std::fflush(file_) != 0 || std::ferror(file_)) {
      throw std::runtime_error("error writing '" + path_ + "'");
    }
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t rows_ = 0;
};

}  // namespace

std::string load_corpus(const std::string& path) {
  if (path.empty()) return std::string(embedded_corpus());
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_bytes(path);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot load corpus: ") + e.what());
  }
  if (bytes.empty()) throw std::runtime_error("corpus '" + path + "' is empty");
  return std::string(bytes.begin(), bytes.end());
}

TrainSummary train_char_model(const TrainOptions& opt, std::FILE* out) {
  validate(opt);
  const std::string text = load_corpus(opt.corpus_path);
  const std::string corpus_name =
      opt.corpus_path.empty() ? "corpus" : "corpus '" + opt.corpus_path + "'";
  if (static_cast<int64_t>(text.size()) < opt.seq_len + 1) {
    throw std::runtime_error(
        corpus_name + " has " + std::to_string(text.size()) +
        " characters; training needs at least --seq-len + 1 = " + std::to_string(opt.seq_len + 1));
  }

  // Model, vocabulary and optimizer state: fresh, or from the checkpoint being resumed.
  std::unique_ptr<TrainedModel> resumed;
  ModelConfig config;
  Vocabulary vocab;
  if (!opt.resume_path.empty()) {
    resumed = std::make_unique<TrainedModel>(load_trained_model(opt.resume_path));
    config = resumed->config;
    vocab = resumed->vocabulary;
    auto same = [&](const char* name, bool given, int64_t want, int64_t have) {
      check_option(!given || want == have, std::string("--") + name + " " + std::to_string(want) +
                                               " differs from the checkpoint's " +
                                               std::to_string(have) +
                                               " (leave it out when resuming)");
    };
    check_option(!opt.cell || *opt.cell == config.cell,
                 std::string("--cell ") + (opt.cell ? cell_name(*opt.cell) : "") +
                     " differs from the checkpoint's " + cell_name(config.cell) +
                     " (leave it out when resuming)");
    same("hidden", opt.hidden.has_value(), opt.hidden.value_or(0), config.hidden);
    same("layers", opt.layers.has_value(), opt.layers.value_or(0), config.layers);
    same("embed", opt.embed.has_value(), opt.embed.value_or(0), config.embed);
  } else {
    vocab = Vocabulary::from_text(text);
    config.cell = opt.cell.value_or(TrainDefaults::kCell);
    config.hidden = opt.hidden.value_or(TrainDefaults::kHidden);
    config.layers = opt.layers.value_or(TrainDefaults::kLayers);
    config.embed = opt.embed.value_or(TrainDefaults::kEmbed);
    config.vocab_size = vocab.size();
  }
  std::vector<int32_t> ids;
  try {
    ids = vocab.encode(text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(corpus_name + " cannot be used with checkpoint '" + opt.resume_path +
                             "': " + e.what());
  }

  int64_t num_params = 0;
  for (const ParamSpec& spec : param_specs(config)) num_params += spec.size();
  const double bytes = workspace_bytes(config, num_params, opt.seq_len, opt.batch);
  if (bytes > kMaxWorkspaceBytes) {
    throw std::invalid_argument("this model and batch need about " +
                                fmt("%.1f", bytes / (1 << 30)) + " GiB of memory (limit " +
                                fmt("%.0f", kMaxWorkspaceBytes / (1 << 30)) +
                                " GiB); reduce --batch, --seq-len, --hidden or --layers");
  }
  CharModel<float> model(config);
  const size_t ntensors = model.num_tensors();
  AdamState adam_state;
  int64_t start_step = 0;
  if (resumed) {
    for (size_t k = 0; k < ntensors; ++k) {
      std::copy(resumed->model.param(k).begin(), resumed->model.param(k).end(),
                model.param(k).begin());
    }
    start_step = resumed->step;
    if (resumed->adam) adam_state = *resumed->adam;
    resumed.reset();
  } else {
    model.init(opt.seed);
  }
  if (adam_state.m.empty()) {
    for (size_t k = 0; k < ntensors; ++k) {
      adam_state.m.emplace_back(model.param(k).size(), 0.0f);
      adam_state.v.emplace_back(model.param(k).size(), 0.0f);
    }
  }
  Adam adam(static_cast<float>(opt.lr));
  adam.set_t(adam_state.t);
  std::vector<std::span<float>> grads;
  for (size_t k = 0; k < ntensors; ++k) grads.push_back(model.grad(k));

  // Outputs.
  std::error_code ec;
  std::filesystem::create_directories(opt.out_dir, ec);
  if (ec || !std::filesystem::is_directory(opt.out_dir)) {
    throw std::runtime_error("cannot create output directory '" + opt.out_dir + "'" +
                             (ec ? ": " + ec.message() : ""));
  }
  TrainSummary summary;
  const std::filesystem::path dir(opt.out_dir);
  summary.metrics_path = (dir / "metrics.csv").string();
  summary.chart_path = (dir / "loss.svg").string();
  summary.checkpoint_path = (dir / "checkpoint.safetensors").string();
  MetricsWriter metrics(summary.metrics_path);

  const int64_t T = opt.seq_len, B = opt.batch, N = static_cast<int64_t>(ids.size());
  std::fprintf(
      out,
      "blockrnn train: %s, %lld layer%s x %lld hidden, embedding %lld, vocabulary %lld "
      "(%lld parameters)\n"
      "  data: %s\n"
      "  %lld steps of %lld streams x %lld characters, Adam lr %g, clip %g, seed %llu, "
      "%d thread%s%s\n",
      cell_name(config.cell), static_cast<long long>(config.layers), config.layers == 1 ? "" : "s",
      static_cast<long long>(config.hidden), static_cast<long long>(config.embed),
      static_cast<long long>(config.vocab_size), static_cast<long long>(model.num_parameters()),
      describe_corpus(opt.corpus_path, text.size()).c_str(), static_cast<long long>(opt.steps),
      static_cast<long long>(B), static_cast<long long>(T), opt.lr, opt.clip,
      static_cast<unsigned long long>(opt.seed), blockrnn::get_num_threads(),
      blockrnn::get_num_threads() == 1 ? "" : "s",
      !opt.resume_path.empty() ? (", resuming at step " + std::to_string(start_step)).c_str() : "");
  std::fflush(out);

  std::map<std::string, std::string> meta = {
      {"seed", std::to_string(opt.seed)},
      {"lr", fmt("%g", opt.lr)},
      {"clip", fmt("%g", opt.clip)},
      {"batch", std::to_string(B)},
      {"seq_len", std::to_string(T)},
      {"corpus", opt.corpus_path.empty() ? "embedded:kjv-genesis-exodus" : opt.corpus_path}};
  std::vector<double> curve_steps, curve_loss;
  auto write_outputs = [&](int64_t step, double last_loss) {
    metrics.flush();
    const std::string title = std::string("blockrnn train: ") + cell_name(config.cell) + " " +
                              std::to_string(config.layers) + "x" + std::to_string(config.hidden) +
                              ", batch " + std::to_string(B) + "x" + std::to_string(T);
    write_loss_svg(summary.chart_path, curve_steps, curve_loss, title);
    adam_state.t = adam.t();
    meta["loss"] = fmt("%.6f", last_loss);
    save_safetensors(summary.checkpoint_path,
                     make_checkpoint(model, vocab, step, &adam_state, meta));
  };

  ProgressOptions popt;
  popt.chars_per_step = B * T;
  popt.start_step = start_step;
  popt.out = out;
  popt.terminal = opt.terminal;
  Progress progress(start_step + opt.steps, popt);

  std::vector<int64_t> starts(B);
  for (int64_t b = 0; b < B; ++b) starts[b] = b * N / B;
  std::vector<int32_t> inputs(T * B), targets(T * B);
  CharModel<float>::State state = model.zero_state(B);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double smoothed = 0, smooth_norm = 0, tail_sum = 0;
  std::vector<double> tail;
  const int64_t checkpoint_every = std::max<int64_t>(1, (opt.steps + 3) / 4);
  int64_t step = start_step;
  for (int64_t k = 0; k < opt.steps; ++k) {
    // Batch: inputs[t, b] = text[(start_b + s·T + t) mod N], targets one character later.
    for (int64_t b = 0; b < B; ++b) {
      const int64_t base = (starts[b] + ((step % N) * T) % N) % N;
      for (int64_t t = 0; t < T; ++t) {
        inputs[t * B + b] = ids[(base + t) % N];
        targets[t * B + b] = ids[(base + t + 1) % N];
      }
    }
    const double loss = model.forward_backward(inputs, targets, T, B, state);
    const double norm = clip_grad_norm(grads, static_cast<float>(opt.clip));
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      throw std::runtime_error("training diverged at step " + std::to_string(step + 1) + " (loss " +
                               fmt("%g", loss) + ", gradient norm " + fmt("%g", norm) +
                               "); try a lower --lr");
    }
    for (size_t j = 0; j < ntensors; ++j) {
      adam.step(model.param(j), grads[j], adam_state.m[j], adam_state.v[j]);
    }
    adam.next_step();
    ++step;

    // Debiased EMA of the loss for display (the CSV keeps the raw loss as well).
    smoothed = 0.95 * smoothed + 0.05 * loss;
    smooth_norm = 0.95 * smooth_norm + 0.05;
    const double shown = smoothed / smooth_norm;
    if (k == 0) {
      summary.first_loss = loss;
      summary.first_step = step;
    }
    tail.push_back(loss);
    tail_sum += loss;
    if (static_cast<int64_t>(tail.size()) > kFinalLossWindow) {
      tail_sum -= tail.front();
      tail.erase(tail.begin());
    }
    const double secs = elapsed();
    metrics.row(step, loss, shown, norm, opt.lr, double(k + 1) * B * T / std::max(secs, 1e-9),
                secs);
    curve_steps.push_back(static_cast<double>(step));
    curve_loss.push_back(loss);
    progress.update(step, shown);

    const bool out_of_time = opt.max_seconds > 0 && secs > opt.max_seconds && k + 1 < opt.steps;
    if (out_of_time) {
      summary.stopped_early = true;
      break;
    }
    if ((k + 1) % checkpoint_every == 0 && k + 1 < opt.steps) write_outputs(step, loss);
  }
  progress.finish();
  summary.last_step = step;
  summary.final_loss = tail_sum / static_cast<double>(tail.size());
  summary.seconds = elapsed();
  summary.chars_per_second = double(step - start_step) * B * T / std::max(summary.seconds, 1e-9);
  write_outputs(step, curve_loss.back());

  if (summary.stopped_early) {
    std::fprintf(out,
                 "stopped after step %lld of %lld: the time limit of %g s (--max-time) was "
                 "reached\n",
                 static_cast<long long>(step), static_cast<long long>(start_step + opt.steps),
                 opt.max_seconds);
  }
  std::fprintf(out, "loss %.3f (step %lld) -> %.3f (mean of the last %zu steps)\n",
               summary.first_loss, static_cast<long long>(summary.first_step), summary.final_loss,
               tail.size());
  std::fprintf(out, "wrote %s, %s, %s\n", summary.metrics_path.c_str(), summary.chart_path.c_str(),
               summary.checkpoint_path.c_str());
  std::fflush(out);
  return summary;
}

}  // namespace blockrnn::train
