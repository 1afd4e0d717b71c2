// Numerically stable softmax cross-entropy (forward + gradient) and sampling.
#include "train/softmax_xent.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace blockrnn::train {
namespace {

void check_shapes(const int32_t* targets, int64_t N, int64_t V) {
  if (V < 1) throw std::invalid_argument("softmax_xent: V must be >= 1, got " + std::to_string(V));
  if (N < 0) throw std::invalid_argument("softmax_xent: N must be >= 0, got " + std::to_string(N));
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0 || targets[n] >= V) {
      throw std::invalid_argument("softmax_xent: target " + std::to_string(targets[n]) +
                                  " at row " + std::to_string(n) + " is outside [0, " +
                                  std::to_string(V) + ")");
    }
  }
}

// Computations are carried out in double for both element types.
template <typename T>
double xent_impl(const T* logits, const int32_t* targets, int64_t N, int64_t V, T* dlogits) {
  check_shapes(targets, N, V);
  if (N == 0) return 0.0;
  const double inv_n = 1.0 / static_cast<double>(N);
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    const T* row = logits + n * V;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < V; ++j) max = std::max<double>(max, row[j]);
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(row[j]) - max);
    const double log_sum = std::log(sum);
    const int32_t target = targets[n];
    // Read the target logit before dlogits (which may alias logits) is written.
    total += log_sum - (static_cast<double>(row[target]) - max);
    if (dlogits != nullptr) {
      T* drow = dlogits + n * V;
      for (int64_t j = 0; j < V; ++j) {
        const double p = std::exp(static_cast<double>(row[j]) - max - log_sum);
        drow[j] = static_cast<T>((p - (j == target ? 1.0 : 0.0)) * inv_n);
      }
    }
  }
  return total * inv_n;
}

}  // namespace

float softmax_xent_forward_backward(const float* logits, const int32_t* targets, int64_t N,
                                    int64_t V, float* dlogits) {
  return static_cast<float>(xent_impl(logits, targets, N, V, dlogits));
}

double softmax_xent_forward_backward(const double* logits, const int32_t* targets, int64_t N,
                                     int64_t V, double* dlogits) {
  return xent_impl(logits, targets, N, V, dlogits);
}

void softmax(const float* logits, int64_t N, int64_t V, float* probs) {
  if (V < 1 || N < 0) {
    throw std::invalid_argument("softmax: invalid shape [" + std::to_string(N) + ", " +
                                std::to_string(V) + "]");
  }
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    float* out = probs + n * V;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < V; ++j) max = std::max<double>(max, row[j]);
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(row[j]) - max);
    const double log_sum = std::log(sum);
    for (int64_t j = 0; j < V; ++j) {
      out[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - max - log_sum));
    }
  }
}

int32_t sample_from_logits(const float* logits, int64_t V, float temperature,
                           std::mt19937_64& rng) {
  if (V < 1) {
    throw std::invalid_argument("sample_from_logits: V must be >= 1, got " + std::to_string(V));
  }
  int64_t argmax = 0;
  for (int64_t j = 0; j < V; ++j) {
    if (std::isnan(logits[j])) {
      throw std::invalid_argument("sample_from_logits: logit " + std::to_string(j) + " is NaN");
    }
    if (logits[j] > logits[argmax]) argmax = j;
  }
  if (!(temperature > 0)) return static_cast<int32_t>(argmax);

  const double inv_t = 1.0 / static_cast<double>(temperature);
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < V; ++j) max = std::max(max, logits[j] * inv_t);
  if (!std::isfinite(max)) return static_cast<int32_t>(argmax);  // +inf or all -inf
  double sum = 0;
  for (int64_t j = 0; j < V; ++j) sum += std::exp(logits[j] * inv_t - max);
  // Uniform double in [0, 1) from the top 53 bits.
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
  double cumulative = 0;
  int64_t last_positive = argmax;
  for (int64_t j = 0; j < V; ++j) {
    const double p = std::exp(logits[j] * inv_t - max);
    if (p <= 0) continue;
    cumulative += p;
    last_positive = j;
    if (u < cumulative) return static_cast<int32_t>(j);
  }
  return static_cast<int32_t>(last_positive);  // rounding left u just above the total
}

}  // namespace blockrnn::train
