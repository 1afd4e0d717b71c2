// Tests for the loss-chart helpers (ticks, labels, smoothing) and for
// write_loss_png producing a valid 800x500 RGB PNG in normal and edge cases.
#include "train/loss_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "inflate_for_tests.h"
#include "train/file_util.h"

namespace blockrnn::train {
namespace {

TEST(NiceTicks, CoversRangeWithRoundSteps) {
  EXPECT_EQ(nice_ticks(0, 5000, 6), (std::vector<double>{0, 1000, 2000, 3000, 4000, 5000}));
  EXPECT_EQ(nice_ticks(1.27, 4.17, 7),
            (std::vector<double>{1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5}));
  const auto t = nice_ticks(1, 1, 5);  // degenerate range is widened
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 1.0);
  EXPECT_GE(t.back(), 1.0);
  EXPECT_LT(t.front(), t.back());
  const auto z = nice_ticks(0, 0, 5);
  EXPECT_LT(z.front(), z.back());
  const auto neg = nice_ticks(-0.3, 0.2, 6);
  EXPECT_DOUBLE_EQ(neg.front(), -0.3);
  EXPECT_DOUBLE_EQ(neg.back(), 0.2);
  EXPECT_EQ(std::count(neg.begin(), neg.end(), 0.0), 1);  // exact zero, not 1e-17
  EXPECT_EQ(nice_ticks(NAN, 1, 5), (std::vector<double>{0, 1}));
}

TEST(FormatTick, PicksPrecisionFromStep) {
  EXPECT_EQ(format_tick(0, 0.5), "0");
  EXPECT_EQ(format_tick(2.5, 0.5), "2.5");
  EXPECT_EQ(format_tick(3, 0.5), "3.0");
  EXPECT_EQ(format_tick(1000, 500), "1000");
  EXPECT_EQ(format_tick(20000, 5000), "20k");
  EXPECT_EQ(format_tick(5000, 5000), "5000");
  EXPECT_EQ(format_tick(5000, 5000, 20000), "5k");  // same unit across the axis
  EXPECT_EQ(format_tick(500, 500, 12000), "0.5k");
  EXPECT_EQ(format_tick(12500, 2500), "12.5k");
  EXPECT_EQ(format_tick(3e7, 1e7), "30M");
  EXPECT_EQ(format_tick(0.05, 0.01), "0.05");
  EXPECT_EQ(format_tick(-1.5, 0.5), "-1.5");
  EXPECT_EQ(format_tick(0.25, 0.25), "0.25");
  EXPECT_EQ(format_tick(0.0005, 0.0001), "0.0005");
  EXPECT_EQ(format_tick(1e-12, 0.5), "0");
  EXPECT_EQ(format_tick(2e-8, 1e-8), "2e-08");
}

TEST(EmaSmooth, IsDebiasedAndSkipsNonFinite) {
  const std::vector<double> v = {4, 2, NAN, 2};
  const auto s = ema_smooth(v, 0.5);
  EXPECT_DOUBLE_EQ(s[0], 4.0);  // debiased first value equals the input
  EXPECT_DOUBLE_EQ(s[1], (0.5 * 2 + 0.25 * 4) / 0.75);
  EXPECT_TRUE(std::isnan(s[2]));
  EXPECT_DOUBLE_EQ(s[3], (0.5 * 2 + 0.25 * 2 + 0.125 * 4) / 0.875);
  const auto same = ema_smooth(v, 0.0);
  EXPECT_DOUBLE_EQ(same[1], 2.0);
}

TEST(LocalLinearSmooth, KeepsLinearTrendsAndReducesNoise) {
  std::vector<double> x, line, noisy;
  for (int i = 0; i < 200; ++i) {
    x.push_back(10.0 * i + 5);
    line.push_back(4.0 - 0.01 * i);
    noisy.push_back(line.back() + (i % 2 == 0 ? 0.1 : -0.1));
  }
  // A straight line is reproduced exactly, ends included (no EMA-style lag).
  const auto s = local_linear_smooth(x, line, 10);
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], line[i], 1e-9) << i;
  // Alternating noise is mostly removed away from the ends.
  const auto n = local_linear_smooth(x, noisy, 10);
  for (size_t i = 10; i + 10 < n.size(); ++i) EXPECT_NEAR(n[i], line[i], 0.01) << i;
  // Non-finite points are skipped; window 0 is the identity.
  std::vector<double> holes = line;
  holes[50] = NAN;
  holes[51] = INFINITY;
  const auto h = local_linear_smooth(x, holes, 5);
  EXPECT_TRUE(std::isnan(h[50]));
  EXPECT_TRUE(std::isnan(h[51]));
  EXPECT_NEAR(h[52], line[52], 1e-9);
  EXPECT_EQ(local_linear_smooth(x, noisy, 0), noisy);
  // Repeated x values fall back to a weighted mean.
  const std::vector<double> same_x = {1, 1, 1}, ys = {1, 2, 3};
  EXPECT_NEAR(local_linear_smooth(same_x, ys, 1)[1], 2.0, 1e-12);
  EXPECT_EQ(auto_smoothing_half_window(10), 2);
  EXPECT_EQ(auto_smoothing_half_window(5000), 100);
  EXPECT_EQ(auto_smoothing_half_window(1000000), 250);
}

void expect_png_800x500(const std::string& path) {
  const testing::DecodedPng png = testing::decode_png(read_file_bytes(path));
  EXPECT_EQ(png.width, 800u);
  EXPECT_EQ(png.height, 500u);
  EXPECT_EQ(png.color_type, 2);
  EXPECT_EQ(png.raw.size(), 500u * (1 + 800 * 3));
}

// A realistic character-model curve: fast initial drop, slow decay, noise.
void synthetic_curve(size_t n, std::vector<double>& steps, std::vector<double>& loss) {
  for (size_t i = 0; i < n; ++i) {
    const double s = static_cast<double>(i + 1) * 10;
    steps.push_back(s);
    loss.push_back(1.25 + 2.9 * std::exp(-s / 300.0) + 0.35 * std::exp(-s / 3000.0) +
                   0.08 * std::sin(static_cast<double>(i) * 1.7) * std::cos(i * 0.31));
  }
}

TEST(WriteLossPng, WritesValidImage) {
  std::vector<double> steps, loss;
  synthetic_curve(500, steps, loss);
  // Kept in the test temp dir so it can be looked at.
  const std::string path = ::testing::TempDir() + "/loss_chart_example.png";
  write_loss_png(path, steps, loss, "blockrnn train: lstm, 2 layers, hidden 256");
  expect_png_800x500(path);
  // The compressed chart is small; the stored variant is the raw size.
  EXPECT_LT(std::filesystem::file_size(path), 200000u);
  LossChartOptions stored;
  stored.compression = DeflateMode::kStored;
  const std::string stored_path = ::testing::TempDir() + "/loss_chart_stored.png";
  write_loss_png(stored_path, steps, loss, "stored", stored);
  expect_png_800x500(stored_path);
  EXPECT_GT(std::filesystem::file_size(stored_path), 1200000u);
  std::filesystem::remove(stored_path);
}

TEST(WriteLossPng, ChartHasCurveAndAxesInk) {
  std::vector<double> steps, loss;
  synthetic_curve(200, steps, loss);
  const RgbImage img = render_loss_chart(steps, loss, "title");
  int dark = 0, blue = 0;
  for (int y = 0; y < img.height(); ++y) {
    for (int x = 0; x < img.width(); ++x) {
      const Rgb p = img.at(x, y);
      if (p.r < 100 && p.g < 100 && p.b < 100) ++dark;
      if (p.b > p.r + 60) ++blue;
    }
  }
  EXPECT_GT(dark, 2000);  // frame, ticks, labels
  EXPECT_GT(blue, 1000);  // the curves
}

TEST(WriteLossPng, HandlesEdgeCases) {
  const std::string path = ::testing::TempDir() + "/loss_chart_edge.png";
  const double nan = std::nan("");
  const double inf = INFINITY;
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> cases = {
      {{}, {}},                              // no data
      {{1}, {2.5}},                          // one point
      {{1, 2, 3}, {2, 2, 2}},                // constant
      {{1, 2, 3, 4}, {nan, nan, nan, nan}},  // nothing finite
      {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 4, nan, 3, inf, 2, 1.5, 1.2, 1.1, 1.0}},
      {{0, 1e9}, {1e-7, 3e-7}},  // extreme magnitudes
      {{5, 5, 5}, {-1, 0, 1}},   // single x value
  };
  for (const auto& [steps, loss] : cases) {
    ASSERT_NO_THROW(write_loss_png(path, steps, loss, "edge case")) << steps.size();
    expect_png_800x500(path);
  }
  EXPECT_THROW(write_loss_png(path, {1, 2}, {1}, "mismatch"), std::invalid_argument);
  EXPECT_THROW(write_loss_png("/nonexistent-dir-blockrnn/loss.png", {1}, {1}, "t"),
               std::runtime_error);
  LossChartOptions tiny;
  tiny.width = 100;
  EXPECT_THROW(write_loss_png(path, {1}, {1}, "t", tiny), std::invalid_argument);
  std::filesystem::remove(path);
}

TEST(RenderLineChart, SupportsMultipleSeriesAndSmallSizes) {
  ChartSeries train{"train", {0, 100, 200, 300}, {4, 2.5, 2.0, 1.8}, {31, 100, 180}, 2.0};
  ChartSeries valid{"validation", {100, 300}, {2.7, 2.1}, {220, 90, 30}, 2.0};
  ChartOptions opts;
  opts.width = 320;
  opts.height = 200;
  opts.title = "train vs validation";
  const RgbImage img = render_line_chart({train, valid}, opts);
  EXPECT_EQ(img.width(), 320);
  EXPECT_EQ(img.height(), 200);
  ChartSeries bad{"bad", {1, 2}, {1}, {}, 1.0};
  EXPECT_THROW(render_line_chart({bad}, opts), std::invalid_argument);
}

}  // namespace
}  // namespace blockrnn::train
