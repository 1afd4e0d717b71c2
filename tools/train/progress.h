// The progress line of `blockrnn train`: on a terminal one line redrawn in place ('\r', at most
// every 0.1 s), otherwise a plain line about every total/20 steps (logs, pipes, CI); then a
// summary. A line reads "step 1200/5000 (24%) loss 1.8342 | 45.2k char/s | elapsed 01:05 |
// ETA 03:25".
#ifndef BLOCKRNN_TOOLS_TRAIN_PROGRESS_H_
#define BLOCKRNN_TOOLS_TRAIN_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace blockrnn::train {

// "MM:SS", or "H:MM:SS" from an hour; "--:--" for negative or non-finite input.
std::string format_duration(double seconds);

// "950 char/s", "12.3k char/s", "1.25M char/s"; "-- char/s" when unknown (<= 0, NaN).
std::string format_rate(double chars_per_second);

class ProgressLine {
 public:
  // `total` is the last step number, `start` the step the run starts after (resuming).
  ProgressLine(int64_t start, int64_t total, int64_t chars_per_step, std::FILE* out, bool terminal);

  // `step` steps are complete; `loss` is the value to show.
  void update(int64_t step, double loss);
  // Ends the line and prints "done: N steps in MM:SS, final loss X, R char/s".
  void finish();

 private:
  std::string line() const;

  int64_t start_, total_, chars_per_step_, interval_;
  std::FILE* out_;
  bool terminal_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now(), last_draw_;
  int64_t step_ = 0, printed_ = -1;  // plain mode: the step of the last line printed
  double loss_ = 0, elapsed_ = 0;
};

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_PROGRESS_H_
