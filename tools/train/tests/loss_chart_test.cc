// Tests for the loss-chart helpers (ticks, labels, smoothing) and for the SVG chart: axes,
// tick labels, curves, escaping, the mapping into the plot area and edge cases.
#include "train/loss_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

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

// A realistic character-model curve: fast initial drop, slow decay, noise.
void synthetic_curve(size_t n, std::vector<double>& steps, std::vector<double>& loss) {
  for (size_t i = 0; i < n; ++i) {
    const double s = static_cast<double>(i + 1) * 10;
    steps.push_back(s);
    loss.push_back(1.25 + 2.9 * std::exp(-s / 300.0) + 0.35 * std::exp(-s / 3000.0) +
                   0.08 * std::sin(static_cast<double>(i) * 1.7) * std::cos(i * 0.31));
  }
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(LossSvg, HasAxesTicksCurvesAndLegend) {
  std::vector<double> steps, loss;
  synthetic_curve(500, steps, loss);
  // Kept in the test temp dir so it can be looked at.
  const std::string path = ::testing::TempDir() + "/loss_chart_example.svg";
  write_loss_svg(path, steps, loss, "blockrnn train: lstm <2 layers> & hidden 256");
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  const std::string svg(bytes.begin(), bytes.end());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"500\"", 0),
            0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<polyline"), 2u);  // raw and smoothed
  EXPECT_NE(svg.find(">blockrnn train: lstm &lt;2 layers&gt; &amp; hidden 256</text>"),
            std::string::npos);  // the title, escaped
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss (last "), std::string::npos);
  EXPECT_NE(svg.find(">smoothed (last "), std::string::npos);
  // Tick labels as text: the steps run to 5000, the loss from about 1.2 to 4.4.
  EXPECT_NE(svg.find(">5000</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">4.5</text>"), std::string::npos);
  EXPECT_NE(svg.find(">1.0</text>"), std::string::npos);
  EXPECT_LT(svg.size(), 40000u);  // 500 points of two curves
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(LossSvg, PointsMapIntoThePlotArea) {
  const std::string svg = render_loss_svg({0, 10}, {1, 2}, "t");
  // x 0..10 → 70..780, y 1..2 → 450..40 (ticks at the data's ends: 0, 2, ..., 10 and 1.0 .. 2.0).
  EXPECT_NE(svg.find("points=\"70.0,450.0 780.0,40.0\""), std::string::npos) << svg;
}

TEST(LossSvg, HandlesEdgeCases) {
  const double nan = std::nan("");
  const double inf = INFINITY;
  struct Case {
    std::vector<double> steps, loss;
    size_t polylines;
  };
  const std::vector<Case> cases = {
      {{}, {}, 0},                              // no data
      {{1}, {2.5}, 1},                          // one point
      {{1, 2, 3}, {2, 2, 2}, 1},                // constant
      {{1, 2, 3, 4}, {nan, nan, nan, nan}, 0},  // nothing finite
      {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 4, nan, 3, inf, 2, 1.5, 1.2, 1.1, 1.0}, 3 + 3},
      {{0, 1e9}, {1e-7, 3e-7}, 1},  // extreme magnitudes
      {{5, 5, 5}, {-1, 0, 1}, 1},   // single x value
  };
  for (const Case& c : cases) {
    std::string svg;
    ASSERT_NO_THROW(svg = render_loss_svg(c.steps, c.loss, "edge case")) << c.steps.size();
    EXPECT_EQ(count(svg, "<polyline"), c.polylines) << svg;  // non-finite points break the line
    EXPECT_EQ(svg.find("nan"), std::string::npos) << svg;
    EXPECT_EQ(svg.find("inf"), std::string::npos) << svg;
    EXPECT_EQ(count(svg, "no data"), c.polylines == 0 ? 1u : 0u);
  }
  EXPECT_THROW(render_loss_svg({1, 2}, {1}, "mismatch"), std::invalid_argument);
  EXPECT_THROW(write_loss_svg("/nonexistent-dir-blockrnn/loss.svg", {1}, {1}, "t"),
               std::runtime_error);
  LossChartOptions tiny;
  tiny.width = 100;
  EXPECT_THROW(render_loss_svg({1}, {1}, "t", tiny), std::invalid_argument);
}

}  // namespace
}  // namespace blockrnn::train
