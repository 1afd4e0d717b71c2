// Adam optimizer (Kingma & Ba, Algorithm 1: bias-corrected moments, as in PyTorch, with
// epsilon added to sqrt(v_hat)) and global-norm gradient clipping.
#ifndef BLOCKRNN_TOOLS_TRAIN_ADAM_H_
#define BLOCKRNN_TOOLS_TRAIN_ADAM_H_

#include <cstdint>
#include <span>
#include <vector>

namespace blockrnn::train {

class Adam {
 public:
  // Throws std::invalid_argument unless lr >= 0, beta1/beta2 in [0, 1), eps >= 0.
  explicit Adam(float lr, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f);

  // Updates one parameter tensor in place using the current step number t():
  //   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2
  //   param -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
  // `m` and `v` are this tensor's moment buffers (zero-initialised before the
  // first step). All four spans must have the same size (std::invalid_argument).
  // Call step() for every parameter tensor, then next_step() once.
  void step(std::span<float> param, std::span<const float> grad, std::span<float> m,
            std::span<float> v) const;

  // Advances the step counter t (starts at 1) after all tensors were updated.
  void next_step() { ++t_; }

  // 1-based number of the step that step() currently applies. set_t() restores
  // it when resuming from a checkpoint (t >= 1).
  int64_t t() const { return t_; }
  void set_t(int64_t t);

  float learning_rate() const { return lr_; }
  void set_learning_rate(float lr);
  float beta1() const { return beta1_; }
  float beta2() const { return beta2_; }
  float epsilon() const { return eps_; }

 private:
  float lr_;
  float beta1_;
  float beta2_;
  float eps_;
  int64_t t_ = 1;
};

// Scales all gradients in place so their global L2 norm is at most `max_norm`
// (by max_norm / norm when norm > max_norm) and returns the norm before
// clipping. The norm is accumulated in double. If it is not finite the
// gradients are left unchanged (so the caller can skip the step). Throws
// std::invalid_argument unless max_norm > 0.
float clip_grad_norm(const std::vector<std::span<float>>& grads, float max_norm);

// Global L2 norm of the gradients without modifying them.
double global_norm(const std::vector<std::span<float>>& grads);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_ADAM_H_
