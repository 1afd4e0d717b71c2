// `blockrnn sample`: generates text from a trained character model one character at a time,
// feeding each drawn character back in (the recurrent state carries the context).
#ifndef BLOCKRNN_TOOLS_TRAIN_SAMPLER_H_
#define BLOCKRNN_TOOLS_TRAIN_SAMPLER_H_

#include <cstdint>
#include <string>

#include "train/model_checkpoint.h"

namespace blockrnn::train {

inline constexpr int64_t kMaxSampleLength = 10'000'000;

struct SampleOptions {
  int64_t length = 500;      // characters to generate (after the prime)
  uint64_t seed = 1;         // the same seed gives the same text
  double temperature = 0.8;  // softmax(logits / temperature); 0: always the likeliest
  std::string prime;         // text to start from, printed first; empty: start after a '\n'
};

// Returns the prime followed by `length` generated characters. Throws std::invalid_argument
// for options out of range or a prime with characters outside the model's vocabulary.
std::string sample_text(TrainedModel& trained, const SampleOptions& options);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_SAMPLER_H_
