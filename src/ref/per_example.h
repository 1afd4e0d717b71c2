// The reference's definition of seq_lengths (blockrnn's extension beyond TensorFlow): with
// lengths, a sequence op is the op run on each example alone, with seq_len_max = that example's
// steps min(L_b, S), and the results put back in place:
//   - [T, B, n] outputs: example b's rows are its own call's outputs (zero past its steps);
//   - [B, n] outputs (h_prev_grad, cs_prev_grad): its own call's;
//   - weight, bias and peephole gradients: the sum over examples (in example order) of each
//     example's call's gradients.
// Nothing past an example's steps is read (x, h_grad, cs_grad and the forward outputs there may
// hold anything, NaN included).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

namespace blockrnn::ref {

// Dense [T, 1, n] copies of one example's rows of [T, B, n] arrays, and the writes back.
template <typename T>
class ExampleSlices {
 public:
  ExampleSlices(std::int64_t time, std::int64_t batch, std::int64_t example)
      : T_(time), B_(batch), b_(example) {}
  // Example b's rows of src [T, B, n], copied (only the first `steps` rows: the rest is never
  // read by a call with seq_len_max = steps, so it is left zero).
  const T* in(const T* src, std::int64_t n, std::int64_t steps) {
    std::vector<T>& buf = bufs_.emplace_back(static_cast<std::size_t>(T_ * n), T(0));
    for (std::int64_t t = 0; t < steps; ++t) {
      std::copy(src + (t * B_ + b_) * n, src + (t * B_ + b_ + 1) * n, buf.begin() + t * n);
    }
    return buf.data();
  }
  // A [T, 1, n] output buffer, copied into example b's rows of dst [T, B, n] by finish().
  T* out(T* dst, std::int64_t n) {
    std::vector<T>& buf = bufs_.emplace_back(static_cast<std::size_t>(T_ * n), T(0));
    outs_.push_back({dst, buf.data(), n});
    return buf.data();
  }
  void finish() const {
    for (const Out& o : outs_) {
      for (std::int64_t t = 0; t < T_; ++t) {
        std::copy(o.buf + t * o.n, o.buf + (t + 1) * o.n, o.dst + (t * B_ + b_) * o.n);
      }
    }
  }

 private:
  struct Out {
    T* dst;
    const T* buf;
    std::int64_t n;
  };
  std::int64_t T_, B_, b_;
  std::deque<std::vector<T>> bufs_;  // stable addresses
  std::vector<Out> outs_;
};

// Sums: dst[e] += src[e] for the weight gradients of one example's call.
template <typename T>
void add_into(T* dst, const std::vector<T>& src) {
  for (std::size_t e = 0; e < src.size(); ++e) dst[e] += src[e];
}

}  // namespace blockrnn::ref
