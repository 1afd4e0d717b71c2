// Tests for the progress line: its number formats, plain mode (about twenty lines, then the
// summary), terminal mode (one line redrawn with '\r', throttled, the last step always drawn)
// and a resumed run counting from its start step.
#include "train/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace blockrnn::train {
namespace {

TEST(FormatDuration, Formats) {
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(59.4), "00:59");
  EXPECT_EQ(format_duration(59.6), "01:00");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3599), "59:59");
  EXPECT_EQ(format_duration(3600), "1:00:00");
  EXPECT_EQ(format_duration(99 * 3600 + 59 * 60 + 59), "99:59:59");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(NAN), "--:--");
  EXPECT_EQ(format_duration(INFINITY), "--:--");
}

TEST(FormatRate, Formats) {
  EXPECT_EQ(format_rate(950), "950 char/s");
  EXPECT_EQ(format_rate(12345), "12.3k char/s");
  EXPECT_EQ(format_rate(999.7), "1.0k char/s");
  EXPECT_EQ(format_rate(1.25e6), "1.25M char/s");
  EXPECT_EQ(format_rate(0), "-- char/s");
  EXPECT_EQ(format_rate(NAN), "-- char/s");
}

class Capture {
 public:
  Capture() : file(std::tmpfile()) {}
  ~Capture() { std::fclose(file); }
  std::string text() const {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) out.append(buf, n);
    return out;
  }
  std::FILE* file;
};

TEST(ProgressLine, PlainModePrintsAboutTwentyLines) {
  Capture cap;
  ProgressLine p(0, 100, 1000, cap.file, /*terminal=*/false);
  for (int step = 1; step <= 100; ++step) p.update(step, 4.0 - step * 0.01);
  p.finish();
  const std::string out = cap.text();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 21);  // 20 lines + summary
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.rfind("step 5/100 (5%) loss 3.9500 | ", 0), 0u) << out;
  EXPECT_NE(out.find(" char/s | elapsed 00:00 | ETA "), std::string::npos) << out;
  EXPECT_NE(out.find("step 100/100 (100%) loss 3.0000"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 100 steps in 00:00, final loss 3.0000, "), std::string::npos) << out;
}

TEST(ProgressLine, PlainModePrintsTheLastStepWhenStoppedEarly) {
  Capture cap;
  ProgressLine p(0, 1000, 1, cap.file, false);  // a line every 50 steps
  for (int step = 1; step <= 77; ++step) p.update(step, 1.0);
  p.finish();
  const std::string out = cap.text();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;  // 50, 77, summary
  EXPECT_NE(out.find("step 77/1000 (7%)"), std::string::npos) << out;
}

TEST(ProgressLine, TerminalModeRedrawsOneThrottledLine) {
  Capture cap;
  ProgressLine p(0, 1000, 64, cap.file, /*terminal=*/true);
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
  Capture cap;
  ProgressLine p(900, 1000, 10, cap.file, false);  // a line every 5 steps
  for (int step = 901; step <= 950; ++step) p.update(step, 1.0);
  p.finish();
  const std::string out = cap.text();
  EXPECT_EQ(out.rfind("step 905/1000 (90%)", 0), 0u) << out;
  EXPECT_NE(out.find("done: 50 steps in "), std::string::npos) << out;
}

}  // namespace
}  // namespace blockrnn::train
