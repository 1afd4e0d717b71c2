// Softmax cross-entropy loss with its gradient for the language model's output
// layer, and temperature sampling from logits. Both are numerically stable
// (the row maximum is subtracted before exponentiating).
#ifndef BLOCKRNN_TOOLS_TRAIN_SOFTMAX_XENT_H_
#define BLOCKRNN_TOOLS_TRAIN_SOFTMAX_XENT_H_

#include <cstdint>
#include <random>

namespace blockrnn::train {

// Mean over the N rows of -log softmax(logits[n, :])[targets[n]], for
// row-major logits [N, V]. If `dlogits` is non-null it receives the gradient
// of that mean: (softmax(logits[n]) - onehot(targets[n])) / N, [N, V]; it may
// alias `logits`. The float version accumulates in double. N == 0 returns 0.
// Throws std::invalid_argument if V < 1, N < 0, or a target is outside [0, V)
// (checked before anything is written).
float softmax_xent_forward_backward(const float* logits, const int32_t* targets, int64_t N,
                                    int64_t V, float* dlogits);
double softmax_xent_forward_backward(const double* logits, const int32_t* targets, int64_t N,
                                     int64_t V, double* dlogits);

// Row-wise softmax of [N, V] logits into `probs` (may alias `logits`).
void softmax(const float* logits, int64_t N, int64_t V, float* probs);

// Draws an index from softmax(logits / temperature) over V entries using
// `rng`. temperature <= 0 (or when only one entry is finite after scaling)
// returns the argmax (first one on ties). Deterministic for a given rng state
// on every platform (does not use std::*_distribution). Throws
// std::invalid_argument if V < 1 or a logit is NaN.
int32_t sample_from_logits(const float* logits, int64_t V, float temperature, std::mt19937_64& rng);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_SOFTMAX_XENT_H_
