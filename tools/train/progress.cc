// The progress line (see progress.h).
#include "train/progress.h"

#include <algorithm>
#include <cmath>

namespace blockrnn::train {
std::string format_rate(double chars_per_second) {
  char buf[32];
  if (!(chars_per_second > 0)) return "-- char/s";
  if (chars_per_second >= 999.5e3) {
    std::snprintf(buf, sizeof(buf), "%.2fM char/s", chars_per_second / 1e6);
  } else if (chars_per_second >= 999.5) {
    std::snprintf(buf, sizeof(buf), "%.1fk char/s", chars_per_second / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f char/s", chars_per_second);
  }
  return buf;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(std::llround(std::min(seconds, 3.6e8)));
  char buf[32];
  if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  }
  return buf;
}

ProgressLine::ProgressLine(int64_t start, int64_t total, int64_t chars_per_step, std::FILE* out,
                           bool terminal)
    : start_(start),
      total_(total),
      chars_per_step_(chars_per_step),
      interval_(std::max<int64_t>(1, (total - start + 19) / 20)),
      out_(out),
      terminal_(terminal),
      step_(start) {}

std::string ProgressLine::line() const {
  const double done = static_cast<double>(step_ - start_);
  const double rate = elapsed_ > 0 ? done / elapsed_ : 0;  // steps per second
  const double eta = rate > 0 ? static_cast<double>(total_ - step_) / rate : NAN;
  char buf[160];
  std::snprintf(buf, sizeof(buf), "step %lld/%lld (%d%%) loss %.4f | %s | elapsed %s | ETA %s",
                static_cast<long long>(step_), static_cast<long long>(total_),
                static_cast<int>(100 * step_ / std::max<int64_t>(total_, 1)), loss_,
                format_rate(rate * static_cast<double>(chars_per_step_)).c_str(),
                format_duration(elapsed_).c_str(), format_duration(eta).c_str());
  return buf;
}

void ProgressLine::update(int64_t step, double loss) {
  const auto now = std::chrono::steady_clock::now();
  step_ = step;
  loss_ = loss;
  elapsed_ = std::chrono::duration<double>(now - t0_).count();
  if (terminal_) {
    if (step < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::fprintf(out_, "\r%s\033[K", line().c_str());  // \033[K clears the rest of the line
  } else if ((step - start_) % interval_ == 0 || step == total_) {
    std::fprintf(out_, "%s\n", line().c_str());
    printed_ = step;
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K\n", line().c_str());
  } else if (printed_ != step_ && step_ > start_) {
    std::fprintf(out_, "%s\n", line().c_str());  // stopped early between two lines
  }
  const double done = static_cast<double>(step_ - start_);
  std::fprintf(out_, "done: %lld steps in %s, final loss %.4f, %s\n",
               static_cast<long long>(step_ - start_), format_duration(elapsed_).c_str(), loss_,
               format_rate(elapsed_ > 0 ? done * chars_per_step_ / elapsed_ : 0).c_str());
  std::fflush(out_);
}

}  // namespace blockrnn::train
