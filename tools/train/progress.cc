// Progress bar / periodic log line reporting for training runs.
#include "train/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#if defined(_WIN32)
#include <io.h>
#else
#include <sys/ioctl.h>
#include <unistd.h>
#endif

namespace blockrnn::train {
namespace {

std::string format_loss(double loss) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", loss);
  return buf;
}

int percent(const ProgressSnapshot& s) {
  if (s.total <= 0) return 0;
  return static_cast<int>(std::clamp<int64_t>(s.step * 100 / s.total, 0, 100));
}

bool stream_is_terminal(std::FILE* f) {
#if defined(_WIN32)
  return _isatty(_fileno(f)) != 0;
#else
  return isatty(fileno(f)) != 0;
#endif
}

int terminal_columns(std::FILE* f) {
#if !defined(_WIN32) && defined(TIOCGWINSZ)
  winsize ws{};
  if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
#else
  (void)f;
#endif
  return 80;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const double rounded = std::floor(seconds + 0.5);
  char buf[32];
  if (rounded >= 100.0 * 3600) {
    const double days = std::floor(rounded / 86400);
    const int hours = static_cast<int>((rounded - days * 86400) / 3600);
    std::snprintf(buf, sizeof(buf), "%.0fd%02dh", days, hours);
    return buf;
  }
  const auto total = static_cast<int64_t>(rounded);
  const int64_t h = total / 3600;
  const int64_t m = (total / 60) % 60;
  const int64_t s = total % 60;
  if (h == 0) {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(m),
                  static_cast<long long>(s));
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(s));
  }
  return buf;
}

std::string render_bar(double fraction, int width) {
  width = std::max(width, 1);
  if (!(fraction > 0)) fraction = 0;
  fraction = std::min(fraction, 1.0);
  const int filled = static_cast<int>(std::floor(fraction * width));
  std::string bar = "[";
  if (filled >= width) {
    bar.append(static_cast<size_t>(width), '=');
  } else {
    bar.append(static_cast<size_t>(filled), '=');
    bar.push_back('>');
    bar.append(static_cast<size_t>(width - filled - 1), ' ');
  }
  bar.push_back(']');
  return bar;
}

std::string format_rate(double chars_per_second) {
  if (!(chars_per_second > 0) || !std::isfinite(chars_per_second)) return "-- char/s";
  char buf[32];
  if (chars_per_second < 999.5) {
    std::snprintf(buf, sizeof(buf), "%.0f char/s", chars_per_second);
  } else if (chars_per_second < 999.5e3) {
    std::snprintf(buf, sizeof(buf), "%.1fk char/s", chars_per_second / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2fM char/s", chars_per_second / 1e6);
  }
  return buf;
}

std::string format_progress_line(const ProgressSnapshot& s, int max_columns) {
  const std::string head = "step " + std::to_string(s.step) + "/" + std::to_string(s.total) + " ";
  char pct[16];
  std::snprintf(pct, sizeof(pct), " %3d%%", percent(s));
  std::string tail = std::string(pct) + " | loss " + format_loss(s.loss);
  if (s.chars_per_second > 0 && std::isfinite(s.chars_per_second)) {
    tail += " | " + format_rate(s.chars_per_second);
  }
  tail += " | ETA " + format_duration(s.eta_seconds);
  const double fraction = s.total > 0 ? static_cast<double>(s.step) / s.total : 0.0;
  const int fixed = static_cast<int>(head.size() + tail.size()) + 2;  // + brackets
  const int bar_width = std::clamp(max_columns - 1 - fixed, 10, 30);
  std::string line = head + render_bar(fraction, bar_width) + tail;
  if (max_columns > 1 && static_cast<int>(line.size()) > max_columns - 1) {
    line.resize(static_cast<size_t>(max_columns - 1));
  }
  return line;
}

std::string format_plain_line(const ProgressSnapshot& s) {
  std::string line = "step " + std::to_string(s.step) + "/" + std::to_string(s.total) + " (" +
                     std::to_string(percent(s)) + "%) loss " + format_loss(s.loss);
  if (s.chars_per_second > 0 && std::isfinite(s.chars_per_second)) {
    line += " | " + format_rate(s.chars_per_second);
  }
  line += " | elapsed " + format_duration(s.elapsed_seconds) + " | ETA " +
          format_duration(s.eta_seconds);
  return line;
}

int64_t plain_report_interval(int64_t total_steps, int target_lines) {
  if (total_steps <= 0) return 1;
  target_lines = std::max(target_lines, 1);
  return std::max<int64_t>(1, (total_steps + target_lines - 1) / target_lines);
}

Progress::Progress(int64_t total_steps, ProgressOptions options)
    : total_(std::max<int64_t>(total_steps, 0)), options_(std::move(options)) {
  if (options_.out == nullptr) options_.out = stdout;
  terminal_ = options_.terminal.value_or(stream_is_terminal(options_.out));
  columns_ =
      options_.columns > 0 ? options_.columns : (terminal_ ? terminal_columns(options_.out) : 80);
  interval_ = plain_report_interval(total_);
  start_time_ = now();
  last_time_ = start_time_;
  step_ = options_.start_step;
  last_reported_ = step_;
}

Progress::~Progress() {
  if (line_open_) write("\n");
}

double Progress::now() const {
  if (options_.clock) return options_.clock();
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

ProgressSnapshot Progress::snapshot() const {
  ProgressSnapshot s;
  s.step = step_;
  s.total = total_;
  s.loss = loss_;
  s.elapsed_seconds = std::max(0.0, last_time_ - start_time_);
  const int64_t done = step_ - options_.start_step;
  if (done > 0 && s.elapsed_seconds > 0) {
    const double steps_per_second = done / s.elapsed_seconds;
    s.chars_per_second = steps_per_second * static_cast<double>(options_.chars_per_step);
    s.eta_seconds = std::max<int64_t>(total_ - step_, 0) / steps_per_second;
  } else {
    s.chars_per_second = 0;
    s.eta_seconds = step_ >= total_ ? 0.0 : std::nan("");
  }
  return s;
}

void Progress::write(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), options_.out);
  std::fflush(options_.out);
}

void Progress::redraw() {
  const std::string line = format_progress_line(snapshot(), columns_);
  std::string out = "\r" + line;
  if (drawn_length_ > line.size()) out.append(drawn_length_ - line.size(), ' ');
  drawn_length_ = line.size();
  write(out);
  line_open_ = true;
}

void Progress::update(int64_t step, double loss) {
  if (finished_) return;
  step_ = step;
  loss_ = loss;
  updated_ = true;
  last_time_ = now();
  if (terminal_) {
    if (step_ >= total_ || last_time_ - last_draw_time_ >= options_.min_redraw_seconds) {
      last_draw_time_ = last_time_;
      redraw();
    }
  } else if (step_ / interval_ > last_reported_ / interval_ || step_ >= total_) {
    // Crossing a multiple of the interval (not only hitting it) keeps the
    // cadence when updates skip steps.
    last_reported_ = step_;
    write(format_plain_line(snapshot()) + "\n");
  }
}

void Progress::message(std::string_view line) {
  if (terminal_ && line_open_) {
    // Blank the bar, then print the message. (Built with append() rather than
    // operator+, which trips GCC 12's false-positive -Wrestrict at -O2.)
    std::string out;
    out.reserve(drawn_length_ + line.size() + 3);
    out.push_back('\r');
    out.append(drawn_length_, ' ');
    out.push_back('\r');
    out.append(line);
    out.push_back('\n');
    write(out);
    drawn_length_ = 0;
    line_open_ = false;
    redraw();
  } else {
    std::string out(line);
    out.push_back('\n');
    write(out);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!updated_) {
    if (line_open_) write("\n");
    line_open_ = false;
    return;
  }
  if (terminal_) {
    redraw();
    write("\n");
    line_open_ = false;
  } else if (last_reported_ != step_) {
    write(format_plain_line(snapshot()) + "\n");  // last update was not printed
  }
  const ProgressSnapshot s = snapshot();
  std::string summary = "done: " + std::to_string(s.step - options_.start_step) + " steps in " +
                        format_duration(s.elapsed_seconds) + ", final loss " + format_loss(s.loss);
  if (s.chars_per_second > 0) summary += ", " + format_rate(s.chars_per_second);
  write(summary + "\n");
}

}  // namespace blockrnn::train
