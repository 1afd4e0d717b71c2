// Tests for the progress line: its number formats, plain mode (about twenty lines, then the
// summary), terminal mode (one line redrawn with '\r', throttled, the last step always drawn)
// and a resumed run counting from its start step.
#include "train/progress.h"

#include "captured_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <utility>

namespace blockrnn::train {
namespace {

// (input, expected text) of a formatter.
template <typename F>
void expect_formats(F&& format, std::initializer_list<std::pair<double, const char*>> cases) {
  for (const auto& [value, text] : cases) EXPECT_EQ(format(value), text) << value;
}

TEST(FormatDuration, Formats) {
  expect_formats(format_duration, {{0, "00:00"},
                                   {59.4, "00:59"},
                                   {59.6, "01:00"},
                                   {754, "12:34"},
                                   {3599, "59:59"},
                                   {3600, "1:00:00"},
                                   {99 * 3600 + 59 * 60 + 59, "99:59:59"},
                                   {-1, "--:--"},
                                   {NAN, "--:--"},
                                   {INFINITY, "--:--"}});
}

TEST(FormatRate, Formats) {
  expect_formats(format_rate, {{950, "950 char/s"},
                               {12345, "12.3k char/s"},
                               {999.7, "1.0k char/s"},
                               {1.25e6, "1.25M char/s"},
                               {0, "-- char/s"},
                               {NAN, "-- char/s"}});
}

// What a plain-mode (not a terminal) progress line prints for steps start + 1 … last, then
// finish(), each step's loss from `loss`.
std::string plain_run(
    int64_t start, int64_t total, int64_t chars_per_step, int64_t last,
    double (*loss)(int64_t) = [](int64_t) { return 1.0; }) {
  CapturedFile cap;
  ProgressLine p(start, total, chars_per_step, cap.get(), /*terminal=*/false);
  for (int64_t step = start + 1; step <= last; ++step) p.update(step, loss(step));
  p.finish();
  return cap.text();
}

TEST(ProgressLine, PlainModePrintsAboutTwentyLines) {
  const std::string out =
      plain_run(0, 100, 1000, 100, [](int64_t step) { return 4.0 - step * 0.01; });
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 21);  // 20 lines + summary
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.rfind("step 5/100 (5%) loss 3.9500 | ", 0), 0u) << out;
  EXPECT_NE(out.find(" char/s | elapsed 00:00 | ETA "), std::string::npos) << out;
  EXPECT_NE(out.find("step 100/100 (100%) loss 3.0000"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 100 steps in 00:00, final loss 3.0000, "), std::string::npos) << out;
}

TEST(ProgressLine, PlainModePrintsTheLastStepWhenStoppedEarly) {
  const std::string out = plain_run(0, 1000, 1, 77);              // a line every 50 steps
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;  // 50, 77, summary
  EXPECT_NE(out.find("step 77/1000 (7%)"), std::string::npos) << out;
}

TEST(ProgressLine, TerminalModeRedrawsOneThrottledLine) {
  CapturedFile cap;
  ProgressLine p(0, 1000, 64, cap.get(), /*terminal=*/true);
  for (int step = 1; step <= 999; ++step) p.update(step, 2.0);
  std::string out = cap.text();
  EXPECT_EQ(out.find('\n'), std::string::npos) << "no newline until done";
  // Redrawn at most every 0.1 s: the loop takes far less than a second.
  EXPECT_LE(std::count(out.begin(), out.end(), '\r'), 12);
  EXPECT_EQ(out.rfind("\rstep 1/1000 (0%) loss 2.0000 | ", 0), 0u) << out;
  p.update(1000, 1.5);  // the last step is always drawn
  p.finish();
  out = cap.text();
  EXPECT_NE(out.find("\rstep 1000/1000 (100%) loss 1.5000 | "), std::string::npos) << out;
  EXPECT_NE(out.find("ETA 00:00"), std::string::npos) << out;
  EXPECT_NE(out.find("\033[K\ndone: 1000 steps in 00:00, final loss 1.5000"), std::string::npos);
  EXPECT_EQ(out.back(), '\n');
}

TEST(ProgressLine, ResumedRunCountsFromStartStep) {
  const std::string out = plain_run(900, 1000, 10, 950);  // a line every 5 steps
  EXPECT_EQ(out.rfind("step 905/1000 (90%)", 0), 0u) << out;
  EXPECT_NE(out.find("done: 50 steps in "), std::string::npos) << out;
}

}  // namespace
}  // namespace blockrnn::train
