// Line-chart layout (nice ticks, labels, grid, legend) and the loss-curve PNG.
#include "train/loss_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "train/bitmap_font.h"

namespace blockrnn::train {
namespace {

constexpr Rgb kBackground{255, 255, 255};
constexpr Rgb kGrid{228, 228, 228};
constexpr Rgb kFrame{90, 90, 90};
constexpr Rgb kText{30, 30, 30};
constexpr Rgb kRawWithSmoothing{160, 196, 228};
constexpr Rgb kMain{31, 100, 180};

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  bool empty() const { return !(lo <= hi); }
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

int label_height(int scale) {
  return kGlyphCapHeight * scale;
}

}  // namespace

std::vector<double> ema_smooth(std::span<const double> values, double weight) {
  std::vector<double> out(values.size(), std::numeric_limits<double>::quiet_NaN());
  double ema = 0;
  double weight_pow = 1;  // weight^k
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    ema = weight * ema + (1 - weight) * values[i];
    weight_pow *= weight;
    const double debias = 1 - weight_pow;
    out[i] = debias > 0 ? ema / debias : values[i];
  }
  return out;
}

std::vector<double> local_linear_smooth(std::span<const double> xs, std::span<const double> ys,
                                        int half_window) {
  const size_t n = std::min(xs.size(), ys.size());
  std::vector<double> out(n, std::numeric_limits<double>::quiet_NaN());
  half_window = std::max(half_window, 0);
  const double span = half_window + 1.0;  // weights reach zero just outside the window
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(xs[i]) || !std::isfinite(ys[i])) continue;
    const size_t lo = i >= static_cast<size_t>(half_window) ? i - half_window : 0;
    const size_t hi = std::min(n - 1, i + static_cast<size_t>(half_window));
    double sw = 0, swx = 0, swy = 0, swxx = 0, swxy = 0;
    for (size_t j = lo; j <= hi; ++j) {
      if (!std::isfinite(xs[j]) || !std::isfinite(ys[j])) continue;
      const double d = std::abs(static_cast<double>(j) - static_cast<double>(i)) / span;
      const double t = 1 - d * d * d;
      const double w = t * t * t;
      const double x = xs[j] - xs[i];  // centred for numerical stability
      sw += w;
      swx += w * x;
      swy += w * ys[j];
      swxx += w * x * x;
      swxy += w * x * ys[j];
    }
    // Solve the 2x2 normal equations for the intercept at x = 0 (i.e. at xs[i]).
    const double det = sw * swxx - swx * swx;
    if (det > 1e-12 * std::max(1.0, sw * swxx)) {
      out[i] = (swxx * swy - swx * swxy) / det;
    } else {
      out[i] = swy / sw;  // all x equal (or a single point): weighted mean
    }
  }
  return out;
}

int auto_smoothing_half_window(size_t num_points) {
  return static_cast<int>(std::clamp<size_t>(num_points / 50, 2, 250));
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= std::max(std::abs(lo), std::abs(hi)) * 1e-12) {
    // Degenerate range: widen around the value.
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  target = std::max(target, 2);
  const double raw_step = (hi - lo) / (target - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  const double fraction = raw_step / magnitude;
  double nice = 10;
  if (fraction <= 1.0 + 1e-9) {
    nice = 1;
  } else if (fraction <= 2.0 + 1e-9) {
    nice = 2;
  } else if (fraction <= 5.0 + 1e-9) {
    nice = 5;
  }
  const double step = nice * magnitude;
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last + 0.5 && ticks.size() < 1000; k += 1) {
    double v = k * step;
    if (std::abs(v) < step * 1e-9) v = 0;
    ticks.push_back(v);
  }
  if (ticks.size() < 2) ticks.push_back(ticks.empty() ? 0 : ticks.back() + step);
  return ticks;
}

std::string format_tick(double value, double step, double axis_max) {
  step = std::abs(step);
  if (!std::isfinite(value)) return "?";
  if (!(step > 0) || !std::isfinite(step)) step = std::max(std::abs(value), 1.0);
  if (std::abs(value) < step * 1e-9) return "0";
  const double magnitude =
      std::max({std::abs(value), step, std::isfinite(axis_max) ? std::abs(axis_max) : 0.0});
  double unit = 1;
  const char* suffix = "";
  if (magnitude >= 1e10 || step < 1e-4) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g", value);
    return buf;
  }
  if (magnitude >= 1e7) {
    unit = 1e6;
    suffix = "M";
  } else if (magnitude >= 1e4) {
    unit = 1e3;
    suffix = "k";
  }
  // Enough decimals to write the step exactly (0.5 -> 1, 0.25 -> 2, 2.5 -> 1, 1000 -> 0).
  const double scaled_step = step / unit;
  int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(scaled_step) + 1e-9)));
  for (int extra = 0; extra < 3; ++extra, ++decimals) {
    const double scaled = scaled_step * std::pow(10.0, decimals);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) break;
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f%s", decimals, value / unit, suffix);
  std::string s = buf;
  if (s.rfind("-0", 0) == 0 && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

RgbImage render_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& options) {
  if (options.width < 240 || options.height < 160) {
    throw std::invalid_argument("chart size " + std::to_string(options.width) + "x" +
                                std::to_string(options.height) + " is too small (min 240x160)");
  }
  Range xr, yr;
  for (const ChartSeries& s : series) {
    if (s.x.size() != s.y.size()) {
      throw std::invalid_argument("chart series '" + s.label + "' has " +
                                  std::to_string(s.x.size()) + " x values but " +
                                  std::to_string(s.y.size()) + " y values");
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        xr.add(s.x[i]);
        yr.add(s.y[i]);
      }
    }
  }
  const bool has_data = !xr.empty();
  if (!has_data) {
    xr = Range{0, 1};
    yr = Range{0, 1};
  }

  RgbImage img(options.width, options.height, kBackground);
  const int W = options.width;
  const int H = options.height;
  const int fs = W >= 600 && H >= 360 ? 2 : 1;  // tick label / axis label scale
  const int title_scale = fs;
  const int tick_len = 5;

  // Vertical layout.
  const int top = options.title.empty() ? 16 : 16 + label_height(title_scale) + 16;
  const int bottom_labels =
      tick_len + 6 + label_height(fs) + (options.x_label.empty() ? 8 : 12 + label_height(fs) + 10);
  const int py0 = top;
  const int py1 = H - 1 - bottom_labels;
  const int plot_h = py1 - py0;

  // Y ticks first: their label width decides the left margin.
  std::vector<double> yt = nice_ticks(yr.lo, yr.hi, std::clamp(plot_h / 55 + 1, 3, 10));
  const double ystep = yt[1] - yt[0];
  std::vector<std::string> ylabels;
  int ylabel_w = 0;
  for (double v : yt) {
    ylabels.push_back(format_tick(v, ystep, std::max(std::abs(yt.front()), std::abs(yt.back()))));
    ylabel_w = std::max(ylabel_w, text_width(ylabels.back(), fs));
  }
  const int left =
      10 + (options.y_label.empty() ? 0 : kGlyphCapHeight * fs + 10) + ylabel_w + 6 + tick_len;
  const int px0 = left;

  // X ticks: fewer until the labels fit without overlapping.
  std::vector<double> xt;
  std::vector<std::string> xlabels;
  int right = 20;
  for (int target = 10; target >= 2; --target) {
    xt = nice_ticks(xr.lo, xr.hi, target);
    const double xstep = xt[1] - xt[0];
    xlabels.clear();
    int max_w = 0;
    for (double v : xt) {
      xlabels.push_back(format_tick(v, xstep, std::max(std::abs(xt.front()), std::abs(xt.back()))));
      max_w = std::max(max_w, text_width(xlabels.back(), fs));
    }
    right = std::max(20, text_width(xlabels.back(), fs) / 2 + 8);
    const double spacing = static_cast<double>(W - 1 - right - px0) / (xt.size() - 1);
    if (spacing >= max_w + 12 * fs) break;
  }
  const int px1 = W - 1 - right;
  const int plot_w = px1 - px0;

  const double x_lo = xt.front(), x_hi = xt.back();
  const double y_lo = yt.front(), y_hi = yt.back();
  auto map_x = [&](double x) { return px0 + (x - x_lo) / (x_hi - x_lo) * plot_w; };
  auto map_y = [&](double y) { return py1 - (y - y_lo) / (y_hi - y_lo) * plot_h; };

  // Grid and ticks.
  for (size_t i = 0; i < yt.size(); ++i) {
    const int y = static_cast<int>(std::lround(map_y(yt[i])));
    img.hline(px0, px1, y, kGrid);
    img.hline(px0 - tick_len, px0 - 1, y, kFrame);
    const int lw = text_width(ylabels[i], fs);
    img.draw_text(px0 - tick_len - 6 - lw, y - label_height(fs) / 2, ylabels[i], fs, kText);
  }
  for (size_t i = 0; i < xt.size(); ++i) {
    const int x = static_cast<int>(std::lround(map_x(xt[i])));
    img.vline(x, py0, py1, kGrid);
    img.vline(x, py1 + 1, py1 + tick_len, kFrame);
    const int lw = text_width(xlabels[i], fs);
    img.draw_text(x - lw / 2, py1 + tick_len + 6, xlabels[i], fs, kText);
  }

  // Series, split at non-finite points.
  for (const ChartSeries& s : series) {
    std::vector<PointF> run;
    auto flush = [&] {
      img.polyline(run, s.line_width, s.color);
      run.clear();
    };
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        run.push_back({map_x(s.x[i]), map_y(s.y[i])});
      } else {
        flush();
      }
    }
    flush();
  }

  // Frame on top of the data.
  img.hline(px0, px1, py0, kFrame);
  img.hline(px0, px1, py1, kFrame);
  img.vline(px0, py0, py1, kFrame);
  img.vline(px1, py0, py1, kFrame);

  if (!has_data) {
    const std::string msg = "no data";
    img.draw_text(px0 + (plot_w - text_width(msg, fs)) / 2, py0 + plot_h / 2, msg, fs, kText);
  }

  // Title and axis labels.
  if (!options.title.empty()) {
    const int tw = text_width(options.title, title_scale);
    img.draw_text(std::max(4, px0 + (plot_w - tw) / 2), 16, options.title, title_scale, kText);
  }
  if (!options.x_label.empty()) {
    const int lw = text_width(options.x_label, fs);
    img.draw_text(px0 + (plot_w - lw) / 2, H - 10 - label_height(fs), options.x_label, fs, kText);
  }
  if (!options.y_label.empty()) {
    const int lh = text_width(options.y_label, fs);
    img.draw_text(10, py0 + (plot_h - lh) / 2, options.y_label, fs, kText, TextDirection::kUp);
  }

  // Legend in the top-right corner of the plot.
  std::vector<const ChartSeries*> labelled;
  int legend_text_w = 0;
  for (const ChartSeries& s : series) {
    if (s.label.empty()) continue;
    labelled.push_back(&s);
    legend_text_w = std::max(legend_text_w, text_width(s.label, fs));
  }
  if (!labelled.empty()) {
    const int row_h = label_height(fs) + 8 * fs / 2 + 4;
    const int sample_w = 14 * fs;
    const int pad = 6 * fs / 2 + 2;
    const int box_w = pad + sample_w + 6 + legend_text_w + pad;
    const int box_h = pad * 2 + row_h * static_cast<int>(labelled.size()) - 4;
    const int bx = px1 - 8 - box_w;
    const int by = py0 + 8;
    img.fill_rect(bx, by, box_w, box_h, kBackground);
    img.hline(bx, bx + box_w - 1, by, kGrid);
    img.hline(bx, bx + box_w - 1, by + box_h - 1, kGrid);
    img.vline(bx, by, by + box_h - 1, kGrid);
    img.vline(bx + box_w - 1, by, by + box_h - 1, kGrid);
    for (size_t i = 0; i < labelled.size(); ++i) {
      const int ty = by + pad + static_cast<int>(i) * row_h;
      const double cy = ty + label_height(fs) / 2.0;
      const PointF line[2] = {{bx + pad + 0.5, cy}, {bx + pad + sample_w - 0.5, cy}};
      img.polyline(line, std::max(2.0, labelled[i]->line_width), labelled[i]->color);
      img.draw_text(bx + pad + sample_w + 6, ty, labelled[i]->label, fs, kText);
    }
  }
  return img;
}

RgbImage render_loss_chart(const std::vector<double>& steps, const std::vector<double>& loss,
                           const std::string& title, const LossChartOptions& options) {
  if (steps.size() != loss.size()) {
    throw std::invalid_argument("write_loss_png: " + std::to_string(steps.size()) + " steps but " +
                                std::to_string(loss.size()) + " loss values");
  }
  size_t finite = 0;
  double last = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < loss.size(); ++i) {
    if (std::isfinite(loss[i]) && std::isfinite(steps[i])) {
      ++finite;
      last = loss[i];
    }
  }
  const int half_window = options.smoothing_half_window >= 0 ? options.smoothing_half_window
                                                             : auto_smoothing_half_window(finite);
  const bool smooth = options.smoothed && finite >= 8 && half_window > 0;

  ChartOptions chart;
  chart.width = options.width;
  chart.height = options.height;
  chart.title = title;
  chart.x_label = options.x_label;
  chart.y_label = options.y_label;

  std::vector<ChartSeries> series;
  ChartSeries raw;
  raw.label = options.y_label.empty() ? std::string("value") : options.y_label;
  if (finite > 0) raw.label += " (last " + format_number(last) + ")";
  raw.x = steps;
  raw.y = loss;
  raw.color = smooth ? kRawWithSmoothing : kMain;
  raw.line_width = smooth ? 1.5 : 2.0;
  series.push_back(raw);
  if (smooth) {
    ChartSeries s;
    s.y = local_linear_smooth(steps, loss, half_window);
    s.x = steps;
    double last_smoothed = std::numeric_limits<double>::quiet_NaN();
    for (double v : s.y) {
      if (std::isfinite(v)) last_smoothed = v;
    }
    s.label = "smoothed (last " + format_number(last_smoothed) + ")";
    s.color = kMain;
    s.line_width = 2.5;
    series.push_back(std::move(s));
  }
  return render_line_chart(series, chart);
}

void write_loss_png(const std::string& path, const std::vector<double>& steps,
                    const std::vector<double>& loss, const std::string& title,
                    const LossChartOptions& options) {
  write_png(path, render_loss_chart(steps, loss, title, options), options.compression);
}

}  // namespace blockrnn::train
