// The loss chart of `blockrnn train` as an SVG written as plain text: axes with "nice" ticks
// labelled by SVG <text>, a light grid, the loss curve as polylines and a smoothed copy on top,
// a title and a legend. No rasterising and no font: the viewer draws the text.
#ifndef BLOCKRNN_TOOLS_TRAIN_LOSS_CHART_H_
#define BLOCKRNN_TOOLS_TRAIN_LOSS_CHART_H_

#include <span>
#include <string>
#include <vector>

namespace blockrnn::train {

struct LossChartOptions {
  int width = 800;  // SVG user units (pixels at 100 %)
  int height = 500;
  std::string x_label = "step";
  std::string y_label = "loss";
  // Draw a smoothed copy of the curve (local linear regression, which unlike an
  // EMA does not lag behind a falling loss) on top of the raw one; only when
  // there are at least 8 finite points.
  bool smoothed = true;
  // Half-width in points of the smoothing window; negative: chosen from the
  // number of points (auto_smoothing_half_window).
  int smoothing_half_window = -1;
};

// The SVG document of the loss curve `loss` against `steps` (same length; non-finite points
// break the line). Throws std::invalid_argument on mismatched lengths or a size below 240x160.
std::string render_loss_svg(const std::vector<double>& steps, const std::vector<double>& loss,
                            const std::string& title, const LossChartOptions& options = {});

// render_loss_svg() written atomically to `path`; std::runtime_error on I/O errors.
void write_loss_svg(const std::string& path, const std::vector<double>& steps,
                    const std::vector<double>& loss, const std::string& title,
                    const LossChartOptions& options = {});

// ---- Helpers, exposed for testing ----

// Local linear regression smoother: out[i] is the value at xs[i] of a straight
// line fitted by weighted least squares to the finite points among indices
// [i - half_window, i + half_window], with tricube weights on the index
// distance. Linear trends pass through unchanged, including at both ends.
// Non-finite inputs give NaN outputs and are ignored by the fits.
std::vector<double> local_linear_smooth(std::span<const double> xs, std::span<const double> ys,
                                        int half_window);

// The half window used when LossChartOptions::smoothing_half_window < 0:
// about 2% of the points, at least 2, at most 250.
int auto_smoothing_half_window(size_t num_points);

// Evenly spaced tick values at a 1/2/5 x 10^k step covering [lo, hi] (the first
// tick <= lo, the last >= hi), about `target` of them (at least 2).
std::vector<double> nice_ticks(double lo, double hi, int target);

// Label for tick `value` on an axis whose tick spacing is `step` and whose
// largest |tick| is `axis_max` (so all labels of an axis share one unit): just
// enough decimals to write the step exactly; k/M suffixes for large magnitudes,
// scientific notation for tiny steps. E.g. (2.5, 0.5) -> "2.5",
// (20000, 5000) -> "20k", (5000, 5000, 20000) -> "5k".
std::string format_tick(double value, double step, double axis_max = 0);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_LOSS_CHART_H_
