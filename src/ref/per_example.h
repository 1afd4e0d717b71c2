// The reference's definition of seq_lengths (blockrnn's extension beyond TensorFlow): with
// lengths, a sequence op is the op run on each example alone, with seq_len_max = that example's
// steps min(L_b, S), and the results put back in place:
//   - [T, B, n] outputs: example b's rows are its own call's outputs (zero past its steps);
//   - [B, n] outputs (d_h_prev, d_cs_prev): its own call's;
//   - weight, bias and peephole gradients: the sum over examples (in example order) of each
//     example's call's gradients.
// Nothing past an example's steps is read (x, d_h, d_cs and the forward outputs there may
// hold anything, NaN included).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "kernel/seq_steps.h"

namespace blockrnn::ref {

// One example's view of a sequence op's arrays: dense [T, 1, n] copies of its rows of [T, B, n]
// arrays, its row of [B, n] arrays, private gradient buffers, and the writes back (finish()).
template <typename T>
class ExampleSlices {
 public:
  ExampleSlices(std::int64_t time, std::int64_t batch, std::int64_t example, std::int64_t steps)
      : T_(time), B_(batch), b_(example), steps_(steps) {}
  // Example b's rows of src [T, B, n], copied (only the first `steps` rows: the rest is never
  // read by a call with seq_len_max = steps, so it is left zero).
  const T* in(const T* src, std::int64_t n) {
    std::vector<T>& buf = bufs_.emplace_back(static_cast<std::size_t>(T_ * n), T(0));
    for (std::int64_t t = 0; t < steps_; ++t) {
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
  // Example b's row of a [B, n] array, in place.
  const T* row(const T* p, std::int64_t n) const { return p + b_ * n; }
  T* row(T* p, std::int64_t n) const { return p + b_ * n; }
  // A private [n] gradient buffer for this example's call, added into dst by finish().
  T* summed(T* dst, std::int64_t n) {
    std::vector<T>& buf = bufs_.emplace_back(static_cast<std::size_t>(n), T(0));
    sums_.push_back({dst, buf.data(), n});
    return buf.data();
  }
  void finish() const {
    for (const Out& o : outs_) {
      for (std::int64_t t = 0; t < T_; ++t) {
        std::copy(o.buf + t * o.n, o.buf + (t + 1) * o.n, o.dst + (t * B_ + b_) * o.n);
      }
    }
    for (const Out& s : sums_) {
      for (std::int64_t e = 0; e < s.n; ++e) s.dst[e] += s.buf[e];
    }
  }

 private:
  struct Out {
    T* dst;
    const T* buf;
    std::int64_t n;
  };
  std::int64_t T_, B_, b_, steps_;
  std::deque<std::vector<T>> bufs_;  // stable addresses
  std::vector<Out> outs_, sums_;
};

// The op `run` on each example alone, in example order: the copy e of the arguments gets
// example b's x and h_prev (and a grad's d_x and d_h_prev), bind(s, e) points the op's
// other arrays at example b's slices s, and `run` is called with B = 1 and seq_len_max = its
// steps. Gradients handed out by s.summed() are summed into arrays the caller zeroed beforehand.
template <typename T, typename Dims, typename Args, typename Run, typename Bind>
void each_example(const Dims& d, const Args& a, Run run, Bind bind) {
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b, steps);
    Args e = a;
    e.x = s.in(a.x, d.I);
    e.h_prev = s.row(a.h_prev, d.H);
    if constexpr (requires { a.d_x; }) {
      e.d_x = s.out(a.d_x, d.I);
      e.d_h_prev = s.row(a.d_h_prev, d.H);
    }
    bind(s, e);
    run(Dims{d.T, 1, d.I, d.H, steps}, e);
    s.finish();
  }
}

}  // namespace blockrnn::ref
