// The training loop of `blockrnn train` (see trainer.h): option checks, corpus and resume
// handling, TBPTT batches over the corpus ring, clip + Adam, metrics.csv and the checkpoint
// (scripts/plot_loss.py draws the loss chart from metrics.csv).
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

#include <unistd.h>  // isatty

#include "blockrnn/context.h"
#include "train/adam.h"
#include "train/corpus.h"
#include "train/file_util.h"
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

namespace {

// The model being trained with its vocabulary, optimizer state and the steps already done.
struct Session {
  ModelConfig config;
  Vocabulary vocab;
  std::unique_ptr<CharModel<float>> model;
  AdamState adam;
  int64_t start_step = 0;
};

// Resuming takes the shape from the checkpoint; an option that contradicts it is an error.
void check_resume_options(const TrainOptions& opt, const ModelConfig& config) {
  auto same = [&](const char* name, const std::optional<int64_t>& given, int64_t have) {
    check_option(!given || *given == have,
                 std::string("--") + name + " " + std::to_string(given.value_or(0)) +
                     " differs from the checkpoint's " + std::to_string(have) +
                     " (leave it out when resuming)");
  };
  check_option(!opt.cell || *opt.cell == config.cell,
               std::string("--cell ") + (opt.cell ? cell_name(*opt.cell) : "") +
                   " differs from the checkpoint's " + cell_name(config.cell) +
                   " (leave it out when resuming)");
  same("hidden", opt.hidden, config.hidden);
  same("layers", opt.layers, config.layers);
  same("embed", opt.embed, config.embed);
}

Session resume_session(const TrainOptions& opt) {
  TrainedModel resumed = load_trained_model(opt.resume_path);
  check_resume_options(opt, resumed.config);
  Session s{resumed.config, resumed.vocabulary, nullptr, {}, resumed.step};
  s.model = std::make_unique<CharModel<float>>(std::move(resumed.model));
  if (resumed.adam) s.adam = std::move(*resumed.adam);
  return s;
}

Session new_session(const TrainOptions& opt, const std::string& text) {
  Session s;
  s.vocab = Vocabulary::from_text(text);
  s.config.cell = opt.cell.value_or(TrainDefaults::kCell);
  s.config.hidden = opt.hidden.value_or(TrainDefaults::kHidden);
  s.config.layers = opt.layers.value_or(TrainDefaults::kLayers);
  s.config.embed = opt.embed.value_or(TrainDefaults::kEmbed);
  s.config.vocab_size = s.vocab.size();
  return s;
}

// Refuses a model and batch that would need more than kMaxWorkspaceBytes.
void check_memory(const ModelConfig& config, int64_t T, int64_t B) {
  int64_t num_params = 0;
  for (const ParamSpec& spec : param_specs(config)) num_params += spec.size();
  const double bytes = workspace_bytes(config, num_params, T, B);
  if (bytes > kMaxWorkspaceBytes) {
    throw std::invalid_argument("this model and batch need about " +
                                fmt("%.1f", bytes / (1 << 30)) + " GiB of memory (limit " +
                                fmt("%.0f", kMaxWorkspaceBytes / (1 << 30)) +
                                " GiB); reduce --batch, --seq-len, --hidden or --layers");
  }
}

// A fresh or resumed session whose model exists, with zero Adam moments when none were saved.
Session start_session(const TrainOptions& opt, const std::string& text) {
  Session s = opt.resume_path.empty() ? new_session(opt, text) : resume_session(opt);
  check_memory(s.config, opt.seq_len, opt.batch);
  if (!s.model) {
    s.model = std::make_unique<CharModel<float>>(s.config);
    s.model->init(opt.seed);
  }
  if (s.adam.m.empty()) {
    for (size_t k = 0; k < s.model->num_tensors(); ++k) {
      s.adam.m.emplace_back(s.model->param(k).size(), 0.0f);
      s.adam.v.emplace_back(s.model->param(k).size(), 0.0f);
    }
  }
  return s;
}

std::vector<int32_t> encode_corpus(const Vocabulary& vocab, const std::string& text,
                                   const TrainOptions& opt, const std::string& corpus_name) {
  try {
    return vocab.encode(text);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(corpus_name + " cannot be used with checkpoint '" + opt.resume_path +
                             "': " + e.what());
  }
}

// Creates the output directory and names the files in it.
TrainSummary output_paths(const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir)) {
    throw std::runtime_error("cannot create output directory '" + out_dir + "'" +
                             (ec ? ": " + ec.message() : ""));
  }
  const std::filesystem::path dir(out_dir);
  TrainSummary summary;
  summary.metrics_path = (dir / "metrics.csv").string();
  summary.checkpoint_path = (dir / "checkpoint.safetensors").string();
  return summary;
}

void print_header(std::FILE* out, const TrainOptions& opt, const Session& s, size_t corpus_size) {
  const ModelConfig& c = s.config;
  const int threads = blockrnn::get_num_threads();
  std::fprintf(
      out,
      "blockrnn train: %s, %lld layer%s x %lld hidden, embedding %lld, vocabulary %lld "
      "(%lld parameters)\n"
      "  data: %s\n"
      "  %lld steps of %lld streams x %lld characters, Adam lr %g, clip %g, seed %llu, "
      "%d thread%s%s\n",
      cell_name(c.cell), static_cast<long long>(c.layers), c.layers == 1 ? "" : "s",
      static_cast<long long>(c.hidden), static_cast<long long>(c.embed),
      static_cast<long long>(c.vocab_size), static_cast<long long>(s.model->num_parameters()),
      describe_corpus(opt.corpus_path, corpus_size).c_str(), static_cast<long long>(opt.steps),
      static_cast<long long>(opt.batch), static_cast<long long>(opt.seq_len), opt.lr, opt.clip,
      static_cast<unsigned long long>(opt.seed), threads, threads == 1 ? "" : "s",
      !opt.resume_path.empty() ? (", resuming at step " + std::to_string(s.start_step)).c_str()
                               : "");
  std::fflush(out);
}

// Batch of global step `step`: inputs[t, b] = ids[(start_b + step·T + t) mod N], targets one
// character later.
void fill_batch(const std::vector<int32_t>& ids, const std::vector<int64_t>& starts, int64_t step,
                int64_t T, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) {
  const int64_t B = static_cast<int64_t>(starts.size()), N = static_cast<int64_t>(ids.size());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t base = (starts[b] + ((step % N) * T) % N) % N;
    for (int64_t t = 0; t < T; ++t) {
      inputs[t * B + b] = ids[(base + t) % N];
      targets[t * B + b] = ids[(base + t + 1) % N];
    }
  }
}

// The losses of a run: a debiased EMA for display, the mean of the last kFinalLossWindow for
// the summary.
class LossHistory {
 public:
  // Records the loss of global step `step`; returns the smoothed loss.
  double add(double loss) {
    ema_ = 0.95 * ema_ + 0.05 * loss;
    ema_weight_ = 0.95 * ema_weight_ + 0.05;
    losses_.push_back(loss);
    return ema_ / ema_weight_;
  }
  size_t tail_size() const {
    return std::min(losses_.size(), static_cast<size_t>(kFinalLossWindow));
  }
  double tail_mean() const {
    double sum = 0;
    for (size_t i = losses_.size() - tail_size(); i < losses_.size(); ++i) sum += losses_[i];
    return sum / static_cast<double>(tail_size());
  }
  double last() const { return losses_.back(); }

 private:
  double ema_ = 0, ema_weight_ = 0;
  std::vector<double> losses_;
};

// One training step on `inputs`/`targets`: forward, backward, clip, Adam. Returns
// {loss, gradient norm before clipping}; throws if either is not finite.
std::pair<double, double> train_step(Session& s, Adam& adam, const std::vector<int32_t>& inputs,
                                     const std::vector<int32_t>& targets,
                                     CharModel<float>::State& state, const TrainOptions& opt,
                                     int64_t step) {
  CharModel<float>& model = *s.model;
  const double loss = model.forward_backward(inputs, targets, opt.seq_len, opt.batch, state);
  std::vector<std::span<float>> grads;
  for (size_t k = 0; k < model.num_tensors(); ++k) grads.push_back(model.grad(k));
  const double norm = clip_grad_norm(grads, static_cast<float>(opt.clip));
  if (!std::isfinite(loss) || !std::isfinite(norm)) {
    throw std::runtime_error("training diverged at step " + std::to_string(step) + " (loss " +
                             fmt("%g", loss) + ", gradient norm " + fmt("%g", norm) +
                             "); try a lower --lr");
  }
  for (size_t k = 0; k < model.num_tensors(); ++k) {
    adam.step(model.param(k), grads[k], s.adam.m[k], s.adam.v[k]);
  }
  adam.next_step();
  return {loss, norm};
}

std::map<std::string, std::string> run_metadata(const TrainOptions& opt) {
  return {{"seed", std::to_string(opt.seed)},
          {"lr", fmt("%g", opt.lr)},
          {"clip", fmt("%g", opt.clip)},
          {"batch", std::to_string(opt.batch)},
          {"seq_len", std::to_string(opt.seq_len)},
          {"corpus", opt.corpus_path.empty() ? "embedded:kjv-genesis-exodus" : opt.corpus_path}};
}

// The checkpoint at global step `step`.
void write_checkpoint(const TrainSummary& paths, const TrainOptions& opt, Session& s,
                      const Adam& adam, const LossHistory& history, int64_t step) {
  s.adam.t = adam.t();
  std::map<std::string, std::string> meta = run_metadata(opt);
  meta["loss"] = fmt("%.6f", history.last());
  save_checkpoint(paths.checkpoint_path, make_checkpoint(*s.model, s.vocab, step, &s.adam, meta));
}

void print_summary(std::FILE* out, const TrainSummary& summary, const TrainOptions& opt,
                   int64_t start_step, size_t tail_size) {
  if (summary.stopped_early) {
    std::fprintf(out,
                 "stopped after step %lld of %lld: the time limit of %g s (--max-time) was "
                 "reached\n",
                 static_cast<long long>(summary.last_step),
                 static_cast<long long>(start_step + opt.steps), opt.max_seconds);
  }
  std::fprintf(out, "loss %.3f (step %lld) -> %.3f (mean of the last %zu steps)\n",
               summary.first_loss, static_cast<long long>(summary.first_step), summary.final_loss,
               tail_size);
  std::fprintf(out, "wrote %s, %s\n", summary.metrics_path.c_str(),
               summary.checkpoint_path.c_str());
  std::fflush(out);
}

// The training loop: opt.steps steps (or until opt.max_seconds), writing metrics every step
// and the checkpoint at 25 %, 50 %, 75 % and the end.
void run_steps(const TrainOptions& opt, Session& s, const std::vector<int32_t>& ids,
               TrainSummary& summary, std::FILE* out) {
  const int64_t T = opt.seq_len, B = opt.batch, N = static_cast<int64_t>(ids.size());
  MetricsWriter metrics(summary.metrics_path);
  Adam adam(static_cast<float>(opt.lr));
  adam.set_t(s.adam.t);
  ProgressLine progress(s.start_step, s.start_step + opt.steps, B * T, out,
                        opt.terminal.value_or(isatty(fileno(out)) == 1));
  LossHistory history;
  std::vector<int64_t> starts(B);
  for (int64_t b = 0; b < B; ++b) starts[b] = b * N / B;
  std::vector<int32_t> inputs(T * B), targets(T * B);
  CharModel<float>::State state = s.model->zero_state(B);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const int64_t checkpoint_every = std::max<int64_t>(1, (opt.steps + 3) / 4);
  int64_t step = s.start_step;
  for (int64_t k = 0; k < opt.steps; ++k) {
    fill_batch(ids, starts, step, T, inputs, targets);
    const auto [loss, norm] = train_step(s, adam, inputs, targets, state, opt, step + 1);
    ++step;
    const double shown = history.add(loss);
    if (k == 0) {
      summary.first_loss = loss;
      summary.first_step = step;
    }
    const double secs = elapsed();
    metrics.row(step, loss, shown, norm, opt.lr, double(k + 1) * B * T / std::max(secs, 1e-9),
                secs);
    progress.update(step, shown);
    if (opt.max_seconds > 0 && secs > opt.max_seconds && k + 1 < opt.steps) {
      summary.stopped_early = true;
      break;
    }
    if ((k + 1) % checkpoint_every == 0 && k + 1 < opt.steps) {
      metrics.flush();
      write_checkpoint(summary, opt, s, adam, history, step);
    }
  }
  progress.finish();
  summary.last_step = step;
  summary.final_loss = history.tail_mean();
  summary.seconds = elapsed();
  summary.chars_per_second = double(step - s.start_step) * B * T / std::max(summary.seconds, 1e-9);
  metrics.flush();
  write_checkpoint(summary, opt, s, adam, history, step);
  print_summary(out, summary, opt, s.start_step, history.tail_size());
}

}  // namespace

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
  Session session = start_session(opt, text);
  const std::vector<int32_t> ids = encode_corpus(session.vocab, text, opt, corpus_name);
  TrainSummary summary = output_paths(opt.out_dir);
  print_header(out, opt, session, text.size());
  run_steps(opt, session, ids, summary, out);
  return summary;
}

}  // namespace blockrnn::train
