// Cancellation of long calls at step boundaries (blockrnn/context.h, set_cancel_check).
//
// A sequence op's time loop asks the calling thread's cancel check between steps, at most once
// every kPollInterval (reading the clock is cheap; the check may not be: the Python bindings
// take the GIL to look for pending signals). When it answers yes, the loop stops before its next
// step and the op throws Error(kCancelled); the outputs are then unspecified.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "blockrnn/error.h"

namespace blockrnn::core {

// True when the calling thread's cancel check (if any) asks to stop (context.cc).
bool cancel_requested();
// True when the calling thread has a cancel check installed.
bool cancel_check_installed();

// Polls the calling thread's cancel check at most once per interval.
class StepPoll {
 public:
  static constexpr std::chrono::milliseconds kPollInterval{20};

  StepPoll() : active_(cancel_check_installed()), next_(Clock::now() + kPollInterval) {}

  bool due() {
    if (!active_) return false;
    const Clock::time_point now = Clock::now();
    if (now < next_) return false;
    next_ = now + kPollInterval;
    return cancel_requested();
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool active_;
  Clock::time_point next_;
};

// The stop decision of a team's time loop. Thread 0 (the calling thread) polls after step k
// (k counts steps done, from 0) before the step's last barrier; after that barrier every thread
// asks stop_after(k) and all get the same answer: the decision for step k is written before
// barrier k and the value is never lowered, while a later decision (k' > k) cannot make
// stop_after(k) true. So every thread leaves at the same step and no barrier is left waiting.
class TeamStop {
 public:
  void poll(int id, std::int64_t k) {
    if (id == 0 && poll_.due()) stop_at_.store(k + 1, std::memory_order_relaxed);
  }
  bool stop_after(std::int64_t k) const {
    return k + 1 >= stop_at_.load(std::memory_order_relaxed);
  }
  bool stopped() const {
    return stop_at_.load(std::memory_order_relaxed) != std::numeric_limits<std::int64_t>::max();
  }
  std::int64_t steps_done() const { return stop_at_.load(std::memory_order_relaxed); }

 private:
  StepPoll poll_;
  std::atomic<std::int64_t> stop_at_{std::numeric_limits<std::int64_t>::max()};
};

[[noreturn]] inline void throw_cancelled(const char* op, std::int64_t done, std::int64_t steps) {
  throw Error(ErrorCode::kCancelled, std::string(op) + ": cancelled after " + std::to_string(done) +
                                         " of " + std::to_string(steps) + " steps");
}

}  // namespace blockrnn::core
