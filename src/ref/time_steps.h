// The time loops every sequence reference shares (docs/ops.md): the forward runs its cell
// for t = 0 … S−1 and leaves zeros at t ≥ S; the backward runs t = S−1 … 0 and sums each step's
// parameter gradients in that order, as TensorFlow does. Both poll for cancellation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/cancel.h"

namespace blockrnn::ref {

// step(t) for t = 0 … S−1, then rows t ≥ S of every [T, B·H] output set to 0 (BH = B·H).
template <typename T, typename Step>
void forward_steps(const char* op, std::int64_t time, std::int64_t S, std::int64_t BH,
                   std::initializer_list<T*> outs, Step step) {
  core::StepPoll poll;
  for (std::int64_t t = 0; t < S; ++t) {
    if (poll.due()) core::throw_cancelled(op, t, S);
    step(t);
  }
  for (T* out : outs) std::fill(out + S * BH, out + time * BH, T(0));
}

// step(t) for t = S−1 … 0.
template <typename Step>
void backward_steps(const char* op, std::int64_t S, Step step) {
  core::StepPoll poll;
  for (std::int64_t t = S - 1; t >= 0; --t) {
    if (poll.due()) core::throw_cancelled(op, S - 1 - t, S);
    step(t);
  }
}

// A sequence backward whose caller wants no input gradient or no initial-state gradient (a.d_x,
// a.d_h_prev or a.d_cs_prev null where it has elements: a layer's absent x_grad, h_prev_grad or
// cs_prev_grad) runs `bwd` with each of those written to a scratch array (the reference computes
// them anyway); returns whether it did, so the caller returns at once.
template <typename T, class Dims, class Args>
bool run_without_unwanted_grads(void (*bwd)(const Dims&, const Args&), const Dims& d,
                                const Args& a) {
  const std::int64_t BH = d.B * d.H;
  bool unwanted = (a.d_x == nullptr && d.T * d.B * d.I > 0) || (a.d_h_prev == nullptr && BH > 0);
  if constexpr (requires { a.d_cs_prev; })
    unwanted = unwanted || (a.d_cs_prev == nullptr && BH > 0);
  if (!unwanted) return false;
  std::vector<T> d_x(a.d_x ? 0 : static_cast<std::size_t>(d.T * d.B * d.I));
  std::vector<T> d_h_prev(a.d_h_prev ? 0 : static_cast<std::size_t>(BH));
  Args with = a;
  if (!a.d_x) with.d_x = d_x.data();
  if (!a.d_h_prev) with.d_h_prev = d_h_prev.data();
  std::vector<T> d_cs_prev;
  if constexpr (requires { a.d_cs_prev; }) {
    if (!a.d_cs_prev) {
      d_cs_prev.resize(static_cast<std::size_t>(BH));
      with.d_cs_prev = d_cs_prev.data();
    }
  }
  bwd(d, with);
  return true;
}

// A parameter gradient summed over steps: dst is zeroed, each step's gradient goes to step(),
// and add() sums it into dst.
template <typename T>
class StepSum {
 public:
  StepSum(T* dst, std::int64_t n) : dst_(dst), step_(static_cast<std::size_t>(n)) {
    std::fill(dst, dst + n, T(0));
  }
  T* step() { return step_.data(); }
  void add() {
    for (std::size_t e = 0; e < step_.size(); ++e) dst_[e] += step_[e];
  }

 private:
  T* dst_;
  std::vector<T> step_;
};

// A grad op's parameter gradients that are sums over the steps of its cell's (a StepSum each),
// each named by its member of the cell's arguments Cell: point(cell) points the cell at this
// step's buffers, add() sums them into the op's.
template <typename T, typename Cell>
class CellGradSums {
 public:
  struct Grad {
    T* Cell::*member;  // e.g. &LSTMCellBwdArgs<T>::d_w
    T* dst;            // the op's gradient, [n]
    std::int64_t n;
  };
  explicit CellGradSums(std::initializer_list<Grad> grads) {
    for (const Grad& g : grads) sums_.emplace_back(g.member, StepSum<T>(g.dst, g.n));
  }
  void point(Cell& cell) {
    for (auto& [member, sum] : sums_) cell.*member = sum.step();
  }
  void add() {
    for (auto& [member, sum] : sums_) sum.add();
  }

 private:
  std::vector<std::pair<T * Cell::*, StepSum<T>>> sums_;
};

}  // namespace blockrnn::ref
