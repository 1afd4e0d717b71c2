// Tests for the progress formatting helpers and for the Progress reporter in
// plain (non-terminal) and terminal mode, using a fake clock.
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
  EXPECT_EQ(format_duration(100 * 3600), "4d04h");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(NAN), "--:--");
  EXPECT_EQ(format_duration(INFINITY), "--:--");
}

TEST(RenderBar, Renders) {
  EXPECT_EQ(render_bar(0.0, 10), "[>         ]");
  EXPECT_EQ(render_bar(0.5, 10), "[=====>    ]");
  EXPECT_EQ(render_bar(0.99, 10), "[=========>]");
  EXPECT_EQ(render_bar(1.0, 10), "[==========]");
  EXPECT_EQ(render_bar(7.0, 4), "[====]");
  EXPECT_EQ(render_bar(-3.0, 4), "[>   ]");
  EXPECT_EQ(render_bar(NAN, 4), "[>   ]");
  EXPECT_EQ(render_bar(0.5, 0), "[>]");
  for (double f = 0; f <= 1.0; f += 0.01) EXPECT_EQ(render_bar(f, 20).size(), 22u);
}

TEST(FormatRate, Formats) {
  EXPECT_EQ(format_rate(950), "950 char/s");
  EXPECT_EQ(format_rate(12345), "12.3k char/s");
  EXPECT_EQ(format_rate(999.7), "1.0k char/s");
  EXPECT_EQ(format_rate(1.25e6), "1.25M char/s");
  EXPECT_EQ(format_rate(0), "-- char/s");
  EXPECT_EQ(format_rate(NAN), "-- char/s");
}

TEST(PlainReportInterval, AboutTwentyLines) {
  EXPECT_EQ(plain_report_interval(100), 5);
  EXPECT_EQ(plain_report_interval(1000), 50);
  EXPECT_EQ(plain_report_interval(1001), 51);
  EXPECT_EQ(plain_report_interval(7), 1);
  EXPECT_EQ(plain_report_interval(0), 1);
  EXPECT_EQ(plain_report_interval(100, 10), 10);
}

TEST(FormatLines, ContainAllFields) {
  ProgressSnapshot s;
  s.step = 1200;
  s.total = 5000;
  s.loss = 1.83421;
  s.chars_per_second = 45200;
  s.elapsed_seconds = 65;
  s.eta_seconds = 205;
  const std::string line = format_progress_line(s, 100);
  EXPECT_EQ(line.rfind("step 1200/5000 [", 0), 0u) << line;
  EXPECT_NE(line.find(" 24% | loss 1.8342 | 45.2k char/s | ETA 03:25"), std::string::npos) << line;
  EXPECT_LE(line.size(), 99u);
  EXPECT_EQ(format_plain_line(s),
            "step 1200/5000 (24%) loss 1.8342 | 45.2k char/s | elapsed 01:05 | ETA 03:25");
  // Narrow terminals: the bar shrinks, then the line is cut.
  for (int cols : {80, 60, 40, 20}) {
    EXPECT_LE(format_progress_line(s, cols).size(), static_cast<size_t>(cols - 1)) << cols;
  }
  s.chars_per_second = 0;  // unknown rate is omitted
  EXPECT_EQ(format_plain_line(s).find("char/s"), std::string::npos);
}

struct Capture {
  std::FILE* file = std::tmpfile();
  ~Capture() { std::fclose(file); }
  std::string text() {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file)) > 0) out.append(buf, n);
    return out;
  }
};

TEST(Progress, PlainModePrintsAboutTwentyLines) {
  Capture cap;
  ASSERT_NE(cap.file, nullptr);
  double t = 0;
  ProgressOptions opts;
  opts.out = cap.file;
  opts.terminal = false;
  opts.chars_per_step = 1000;
  opts.clock = [&t] { return t; };
  {
    Progress p(100, opts);
    EXPECT_FALSE(p.is_terminal());
    EXPECT_EQ(p.report_interval(), 5);
    for (int step = 1; step <= 100; ++step) {
      t += 0.5;
      p.update(step, 4.0 - step * 0.01);
    }
    p.finish();
    p.finish();  // idempotent
  }
  const std::string out = cap.text();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 21);  // 20 lines + summary
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_NE(out.find("step 5/100 (5%) loss 3.9500 | 2.0k char/s | elapsed 00:03 | ETA 00:48\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("done: 100 steps in 00:50, final loss 3.0000, 2.0k char/s\n"),
            std::string::npos)
      << out;
}

TEST(Progress, PlainModeWithSkippedStepsStillReports) {
  Capture cap;
  double t = 0;
  ProgressOptions opts;
  opts.out = cap.file;
  opts.terminal = false;
  opts.clock = [&t] { return t; };
  Progress p(1000, opts);  // interval 50
  for (int step = 7; step <= 1000; step += 7) {
    t += 1;
    p.update(step, 1.0);
  }
  p.finish();
  const std::string out = cap.text();
  // 19 crossings of a multiple of 50 up to 994, plus the final (unprinted) step, plus summary.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 21) << out;
}

TEST(Progress, TerminalModeRedrawsOneLine) {
  Capture cap;
  double t = 0;
  ProgressOptions opts;
  opts.out = cap.file;
  opts.terminal = true;
  opts.columns = 100;
  opts.chars_per_step = 64 * 100;
  opts.min_redraw_seconds = 0;
  opts.clock = [&t] { return t; };
  Progress p(50, opts);
  EXPECT_TRUE(p.is_terminal());
  for (int step = 1; step <= 20; ++step) {
    t += 0.1;
    p.update(step, 2.0);
  }
  std::string out = cap.text();
  EXPECT_EQ(out.find('\n'), std::string::npos) << "no newline until done";
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 20);
  EXPECT_NE(out.find("step 20/50 ["), std::string::npos);
  EXPECT_NE(out.find("64.0k char/s | ETA 00:03"), std::string::npos) << out;

  p.message("sample: In the beginning");
  out = cap.text();
  EXPECT_NE(out.find("sample: In the beginning\n\rstep 20/50"), std::string::npos) << out;

  for (int step = 21; step <= 50; ++step) {
    t += 0.1;
    p.update(step, 1.5);
  }
  p.finish();
  out = cap.text();
  EXPECT_NE(out.find("step 50/50 [==="), std::string::npos);
  EXPECT_NE(out.find("100% | loss 1.5000"), std::string::npos);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(out.find("done: 50 steps in 00:05"), std::string::npos) << out;
}

TEST(Progress, TerminalRedrawIsThrottled) {
  Capture cap;
  double t = 0;
  ProgressOptions opts;
  opts.out = cap.file;
  opts.terminal = true;
  opts.clock = [&t] { return t; };
  Progress p(1000, opts);
  for (int step = 1; step <= 1000; ++step) {
    t += 0.001;  // 1000 steps in one second, redraw at most every 0.1 s
    p.update(step, 1.0);
  }
  const std::string out = cap.text();
  EXPECT_LE(std::count(out.begin(), out.end(), '\r'), 12);
  EXPECT_NE(out.find("step 1000/1000"), std::string::npos);  // the last step is always drawn
}

TEST(Progress, ResumedRunCountsFromStartStep) {
  Capture cap;
  double t = 0;
  ProgressOptions opts;
  opts.out = cap.file;
  opts.terminal = false;
  opts.start_step = 900;
  opts.clock = [&t] { return t; };
  Progress p(1000, opts);
  t = 10;
  p.update(950, 1.0);
  const ProgressSnapshot s = p.snapshot();
  EXPECT_DOUBLE_EQ(s.eta_seconds, 10.0);  // 50 steps in 10 s, 50 to go
  p.finish();
  EXPECT_NE(cap.text().find("done: 50 steps in 00:10"), std::string::npos) << cap.text();
}

}  // namespace
}  // namespace blockrnn::train
