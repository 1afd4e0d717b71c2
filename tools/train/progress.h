// Training progress reporting: a single-line, redrawn progress bar (step/total,
// loss, characters per second, ETA) when the output is a terminal, or a plain
// line every ~total/20 steps otherwise (logs, pipes, CI). The formatting
// helpers are pure functions so they can be tested directly.
#ifndef BLOCKRNN_TOOLS_TRAIN_PROGRESS_H_
#define BLOCKRNN_TOOLS_TRAIN_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace blockrnn::train {

// ---- Pure formatting helpers ----

// "MM:SS" below an hour, "H:MM:SS" below 100 hours, else "<d>d<hh>h";
// "--:--" for negative or non-finite input. Rounds to whole seconds.
std::string format_duration(double seconds);

// "[=====>    ]" with `width` cells between the brackets; `fraction` is clamped
// to [0, 1] (NaN counts as 0). A full bar has no '>'.
std::string render_bar(double fraction, int width);

// "950 char/s", "12.3k char/s", "1.25M char/s"; "-- char/s" when unknown (<= 0, NaN).
std::string format_rate(double chars_per_second);

struct ProgressSnapshot {
  int64_t step = 0;             // completed steps
  int64_t total = 0;            // steps in the run
  double loss = 0;              // NaN prints as "nan"
  double chars_per_second = 0;  // <= 0 or NaN: unknown / not shown
  double elapsed_seconds = 0;
  double eta_seconds = 0;  // NaN: unknown
};

// Terminal line, e.g. "step 1200/5000 [=====>     ]  24% | loss 1.8342 |
// 45.2k char/s | ETA 03:25". If it would exceed `max_columns`, the bar shrinks
// (down to 10 cells) and then the line is cut to max_columns - 1 characters.
std::string format_progress_line(const ProgressSnapshot& s, int max_columns = 80);

// Log line, e.g. "step 1200/5000 (24%) loss 1.8342 | 45.2k char/s | elapsed 01:05 |
// ETA 03:25".
std::string format_plain_line(const ProgressSnapshot& s);

// Steps between plain lines so a run prints about `target_lines` of them
// (ceil(total / target_lines), at least 1).
int64_t plain_report_interval(int64_t total_steps, int target_lines = 20);

// ---- Reporter ----

struct ProgressOptions {
  int64_t chars_per_step = 0;  // characters consumed per step; 0 hides the rate
  int64_t start_step = 0;      // steps already done when resuming
  std::FILE* out = stdout;
  std::optional<bool> terminal;     // default: isatty(fileno(out))
  int columns = 0;                  // terminal width; 0 = ask the terminal, else 80
  double min_redraw_seconds = 0.1;  // terminal redraw throttle
  std::function<double()> clock;    // seconds; default: steady_clock
};

class Progress {
 public:
  explicit Progress(int64_t total_steps, ProgressOptions options = {});
  // Ends an unfinished terminal line so later output starts on a fresh line.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Reports that `step` steps (of total) are complete, with the latest loss.
  void update(int64_t step, double loss);

  // Prints a full line (e.g. a validation loss or a text sample) without
  // garbling the progress bar, which is redrawn below it.
  void message(std::string_view line);

  // Draws the final state, ends the line and prints a summary. Idempotent.
  void finish();

  bool is_terminal() const { return terminal_; }
  int64_t report_interval() const { return interval_; }
  ProgressSnapshot snapshot() const;

 private:
  double now() const;
  void redraw();
  void write(std::string_view text);

  int64_t total_;
  ProgressOptions options_;
  bool terminal_;
  int columns_;
  int64_t interval_;
  double start_time_;
  double last_draw_time_ = -1e300;
  int64_t step_ = 0;
  int64_t last_reported_ = 0;  // plain mode: step of the last printed line
  double loss_ = 0;
  double last_time_ = 0;
  bool updated_ = false;
  bool line_open_ = false;  // terminal: a bar is on screen without a newline
  size_t drawn_length_ = 0;
  bool finished_ = false;
};

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_PROGRESS_H_
