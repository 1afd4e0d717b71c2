// Autoregressive sampling (see sampler.h): run the prime through the model as one sequence,
// then draw a character from softmax(logits / temperature) and feed it back, B = 1, T = 1.
#include "train/sampler.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "train/softmax_xent.h"

namespace blockrnn::train {

std::string sample_text(TrainedModel& trained, const SampleOptions& o) {
  if (o.length < 0 || o.length > kMaxSampleLength) {
    throw std::invalid_argument("--length must be in [0, " + std::to_string(kMaxSampleLength) +
                                "], got " + std::to_string(o.length));
  }
  if (!std::isfinite(o.temperature) || o.temperature < 0 || o.temperature > 100) {
    throw std::invalid_argument("--temperature must be a number in [0, 100], got " +
                                std::to_string(o.temperature));
  }
  const Vocabulary& vocab = trained.vocabulary;
  std::vector<int32_t> prime;
  if (!o.prime.empty()) {
    try {
      prime = vocab.encode(o.prime);
    } catch (const std::invalid_argument& e) {
      std::string known;
      for (char c : vocab.symbols())
        known += std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : describe_char(c);
      throw std::invalid_argument(std::string("--prime: ") + e.what() +
                                  " of the checkpoint (its characters: " + known + ")");
    }
  } else {
    // Start as after the end of a line (the start of a verse in the embedded corpus), or
    // after a space, or after the first symbol; this start is not printed.
    const char start = vocab.contains('\n') ? '\n' : vocab.contains(' ') ? ' ' : vocab.symbol(0);
    prime.push_back(vocab.id(start));
  }

  CharModel<float>& model = trained.model;
  CharModel<float>::State state = model.zero_state(1);
  std::mt19937_64 rng(o.seed);
  const int64_t V = model.config().vocab_size;
  std::string text = o.prime;
  text.reserve(text.size() + static_cast<size_t>(o.length));
  // The prime runs in chunks so a long one needs no more workspace than kPrimeChunk steps.
  constexpr size_t kPrimeChunk = 256;
  // Plan once, run many: the layers are set up once (weights packed, workspace sized) for the
  // prime's chunks and the per-character steps (T = 1, B = 1) that follow.
  model.plan_inference(
      static_cast<int64_t>(std::min(kPrimeChunk, std::max<size_t>(prime.size(), 1))), 1);
  std::vector<float> logits;
  for (size_t start = 0; start < prime.size(); start += kPrimeChunk) {
    const std::span<const int32_t> chunk =
        std::span<const int32_t>(prime).subspan(start, std::min(kPrimeChunk, prime.size() - start));
    logits = model.last_logits(chunk, static_cast<int64_t>(chunk.size()), 1, state);
  }
  for (int64_t n = 0; n < o.length; ++n) {
    const int32_t id = sample_from_logits(logits.data(), V, static_cast<float>(o.temperature), rng);
    text.push_back(vocab.symbol(id));
    if (n + 1 < o.length) logits = model.last_logits(std::span(&id, 1), 1, 1, state);
  }
  return text;
}

}  // namespace blockrnn::train
