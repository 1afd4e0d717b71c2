// `blockrnn train`: trains the character language model (char_model.h) with truncated
// backpropagation through time, global-norm gradient clipping and Adam, and writes
// <out>/metrics.csv and <out>/checkpoint.safetensors (scripts/plot_loss.py draws the loss chart
// from metrics.csv).
//
// Batching: the corpus of N characters is a ring; stream b (of B) starts at ⌊b·N/B⌋ and step s
// reads the T characters from (start_b + s·T) mod N as inputs and the T following ones as
// targets. Each layer's final (cs, h) of a step is the initial state of the next, so the
// model sees an unbroken text per stream; gradients stop at the batch boundary.
//
// Deterministic: the same options and thread count give bit-identical losses and checkpoint.
#ifndef BLOCKRNN_TOOLS_TRAIN_TRAINER_H_
#define BLOCKRNN_TOOLS_TRAIN_TRAINER_H_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "train/char_model.h"

namespace blockrnn::train {

// Defaults of `blockrnn train`, chosen so the run finishes in about a minute on 2 cores and
// produces recognisable words (docs/training.md has the measurements).
struct TrainDefaults {
  static constexpr CellKind kCell = CellKind::kLstm;
  static constexpr int64_t kHidden = 256;
  static constexpr int64_t kLayers = 1;
  static constexpr int64_t kEmbed = 64;
  static constexpr int64_t kSteps = 1000;
  static constexpr int64_t kBatch = 32;
  static constexpr int64_t kSeqLen = 64;
  static constexpr double kLearningRate = 6e-3;
  static constexpr double kClip = 5.0;
  static constexpr uint64_t kSeed = 1;
  static constexpr double kMaxSeconds = 105.0;
};

// Upper bounds of the options (sanity, and a memory budget checked before allocating).
inline constexpr int64_t kMaxSteps = 100'000'000;
inline constexpr int64_t kMaxBatch = 4096;
inline constexpr int64_t kMaxSeqLen = 4096;
inline constexpr double kMaxWorkspaceBytes = 8.0 * (int64_t{1} << 30);

struct TrainOptions {
  // Model shape; unset means the default, or the checkpoint's when resuming (where a value
  // that differs from the checkpoint's is an error).
  std::optional<CellKind> cell;
  std::optional<int64_t> hidden, layers, embed;
  int64_t steps = TrainDefaults::kSteps;  // steps to run now
  int64_t batch = TrainDefaults::kBatch;
  int64_t seq_len = TrainDefaults::kSeqLen;
  double lr = TrainDefaults::kLearningRate;
  double clip = TrainDefaults::kClip;  // global gradient-norm limit
  uint64_t seed = TrainDefaults::kSeed;
  std::string corpus_path;  // empty: the embedded corpus
  std::string out_dir = "out";
  std::string resume_path;  // a checkpoint to continue from (weights, Adam state, step)
  double max_seconds = TrainDefaults::kMaxSeconds;  // stop early past this; 0: no limit
  std::optional<bool> terminal;                     // progress style; default: isatty
};

struct TrainSummary {
  int64_t first_step = 0, last_step = 0;  // global step numbers run (1-based, inclusive)
  double first_loss = 0;                  // loss of the first step run
  double final_loss = 0;                  // mean loss of the last min(50, steps) steps
  double seconds = 0;
  double chars_per_second = 0;
  bool stopped_early = false;  // max_seconds reached
  std::string checkpoint_path, metrics_path;
};

// Validates the options (std::invalid_argument: a usage error), loads the corpus and, when
// resuming, the checkpoint (std::runtime_error for unreadable/invalid files or a corpus the
// checkpoint's vocabulary cannot encode), trains and writes the outputs. Progress and the
// summary go to `out`.
TrainSummary train_char_model(const TrainOptions& options, std::FILE* out = stdout);

// Reads a corpus file, or the embedded one for an empty path. Throws std::runtime_error for a
// missing, unreadable or empty file.
std::string load_corpus(const std::string& path);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_TRAINER_H_
