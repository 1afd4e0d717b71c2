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
#include <initializer_list>
#include <type_traits>
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

// A parameter gradient of a grad op's arguments Args (e.g. &A::d_w) and its size.
template <typename T, typename Args>
struct SummedGrad {
  T* Args::*grad;
  std::int64_t n;
};

// The op `run` on each example alone, in example order: the copy e of the arguments gets example
// b's x, its rows of the [B, H] states h_prev and cs_prev (and of a grad's d_x, d_h_prev and
// d_cs_prev), its rows of the op's other [T, B, H] arrays `steps` (a forward's outputs, T*
// members; a grad's inputs, const T* members), and private buffers for the parameter gradients
// `summed`, which are zeroed first and then get the sum over the examples; `run` is called with
// B = 1 and seq_len_max = the example's steps.
template <typename T, typename Dims, typename Args, typename Run, typename Step>
void each_example(const Dims& d, const Args& a, Run run, std::initializer_list<Step Args::*> steps,
                  std::initializer_list<SummedGrad<T, Args>> summed = {}) {
  for (const SummedGrad<T, Args>& g : summed) std::fill(a.*g.grad, a.*g.grad + g.n, T(0));
  for (std::int64_t b = 0; b < d.B; ++b) {
    const std::int64_t steps_b = steps_of(d.lengths, d.seq_len_max, b);
    ExampleSlices<T> s(d.T, d.B, b, steps_b);
    Args e = a;
    e.x = s.in(a.x, d.I);
    e.h_prev = s.row(a.h_prev, d.H);
    if constexpr (requires { a.cs_prev; }) e.cs_prev = s.row(a.cs_prev, d.H);
    if constexpr (requires { a.d_x; }) {
      e.d_x = s.out(a.d_x, d.I);
      e.d_h_prev = s.row(a.d_h_prev, d.H);
    }
    if constexpr (requires { a.d_cs_prev; }) e.d_cs_prev = s.row(a.d_cs_prev, d.H);
    for (Step Args::*m : steps) {
      if constexpr (std::is_const_v<std::remove_pointer_t<Step>>) {
        e.*m = s.in(a.*m, d.H);
      } else {
        e.*m = s.out(a.*m, d.H);
      }
    }
    for (const SummedGrad<T, Args>& g : summed) e.*g.grad = s.summed(a.*g.grad, g.n);
    run(Dims{d.T, 1, d.I, d.H, steps_b}, e);
    s.finish();
  }
}

}  // namespace blockrnn::ref
