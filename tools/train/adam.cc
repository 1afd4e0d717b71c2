// Adam update and global-norm gradient clipping.
#include "train/adam.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace blockrnn::train {

Adam::Adam(float lr, float beta1, float beta2, float eps)
    : lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  if (!(lr >= 0) || !std::isfinite(lr)) {
    throw std::invalid_argument("Adam: learning rate must be finite and >= 0, got " +
                                std::to_string(lr));
  }
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) {
    throw std::invalid_argument("Adam: beta1 and beta2 must be in [0, 1), got " +
                                std::to_string(beta1) + " and " + std::to_string(beta2));
  }
  if (!(eps >= 0) || !std::isfinite(eps)) {
    throw std::invalid_argument("Adam: epsilon must be finite and >= 0, got " +
                                std::to_string(eps));
  }
}

void Adam::set_t(int64_t t) {
  if (t < 1)
    throw std::invalid_argument("Adam: step number must be >= 1, got " + std::to_string(t));
  t_ = t;
}

void Adam::set_learning_rate(float lr) {
  if (!(lr >= 0) || !std::isfinite(lr)) {
    throw std::invalid_argument("Adam: learning rate must be finite and >= 0, got " +
                                std::to_string(lr));
  }
  lr_ = lr;
}

void Adam::step(std::span<float> param, std::span<const float> grad, std::span<float> m,
                std::span<float> v) const {
  if (grad.size() != param.size() || m.size() != param.size() || v.size() != param.size()) {
    throw std::invalid_argument("Adam::step: size mismatch (param " + std::to_string(param.size()) +
                                ", grad " + std::to_string(grad.size()) + ", m " +
                                std::to_string(m.size()) + ", v " + std::to_string(v.size()) + ")");
  }
  // Bias corrections in double: beta2^t stays accurate for large t.
  const double t = static_cast<double>(t_);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1_), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2_), t);
  // param -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
  const float step_size = static_cast<float>(static_cast<double>(lr_) / bc1);
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float b1 = beta1_, b2 = beta2_, one_minus_b1 = 1.0f - beta1_, one_minus_b2 = 1.0f - beta2_;
  const float eps = eps_;
  float* p = param.data();
  const float* g = grad.data();
  float* mp = m.data();
  float* vp = v.data();
  const size_t n = param.size();
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = b1 * mp[i] + one_minus_b1 * gi;
    const float vi = b2 * vp[i] + one_minus_b2 * gi * gi;
    mp[i] = mi;
    vp[i] = vi;
    p[i] -= step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

double global_norm(const std::vector<std::span<float>>& grads) {
  double sum = 0;
  for (const std::span<float>& g : grads) {
    for (float x : g) sum += static_cast<double>(x) * static_cast<double>(x);
  }
  return std::sqrt(sum);
}

float clip_grad_norm(const std::vector<std::span<float>>& grads, float max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm)) {
    throw std::invalid_argument("clip_grad_norm: max_norm must be finite and > 0, got " +
                                std::to_string(max_norm));
  }
  const double norm = global_norm(grads);
  if (std::isfinite(norm) && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / norm);
    for (const std::span<float>& g : grads) {
      for (float& x : g) x *= scale;
    }
  }
  return static_cast<float>(norm);
}

}  // namespace blockrnn::train
