// The loss chart as SVG text (see loss_chart.h), and its tick and smoothing helpers.
#include "train/loss_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "train/file_util.h"

namespace blockrnn::train {
namespace {

// Plot area inside the SVG: margins for the title, tick labels and axis labels.
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
constexpr char kRawWithSmoothing[] = "#a0c4e4";
constexpr char kMain[] = "#1f64b4";

std::string number(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string text_element(double x, double y, const char* anchor, const std::string& text,
                         const std::string& extra = "") {
  return "<text x=\"" + number("%.1f", x) + "\" y=\"" + number("%.1f", y) + "\" text-anchor=\"" +
         anchor + "\"" + extra + ">" + xml_escape(text) + "</text>\n";
}

struct Axis {
  std::vector<double> ticks;
  double lo() const { return ticks.front(); }
  double hi() const { return ticks.back(); }
  std::string label(size_t i) const {
    return format_tick(ticks[i], ticks[1] - ticks[0], std::max(std::abs(lo()), std::abs(hi())));
  }
};

// The finite points' range of xs (or ys), [0, 1] when there are none.
std::pair<double, double> finite_range(const std::vector<double>& v, const std::vector<double>& w) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(v[i]) && std::isfinite(w[i]))
      lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  }
  return lo <= hi ? std::pair{lo, hi} : std::pair{0.0, 1.0};
}

}  // namespace

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

std::string render_loss_svg(const std::vector<double>& steps, const std::vector<double>& loss,
                            const std::string& title, const LossChartOptions& o) {
  if (steps.size() != loss.size()) {
    throw std::invalid_argument("loss chart: " + std::to_string(steps.size()) + " steps but " +
                                std::to_string(loss.size()) + " loss values");
  }
  if (o.width < 240 || o.height < 160) {
    throw std::invalid_argument("loss chart size " + std::to_string(o.width) + "x" +
                                std::to_string(o.height) + " is too small (min 240x160)");
  }
  size_t finite = 0;
  for (size_t i = 0; i < loss.size(); ++i)
    finite += std::isfinite(steps[i]) && std::isfinite(loss[i]);
  const int half_window =
      o.smoothing_half_window >= 0 ? o.smoothing_half_window : auto_smoothing_half_window(finite);
  const bool smooth = o.smoothed && finite >= 8 && half_window > 0;

  const double W = o.width, H = o.height, x0 = kLeft, x1 = W - kRight, y0 = kTop, y1 = H - kBottom;
  const auto [xlo, xhi] = finite_range(steps, loss);
  const auto [ylo, yhi] = finite_range(loss, steps);
  const Axis xa{nice_ticks(xlo, xhi, std::clamp(o.width / 100, 3, 10))};
  const Axis ya{nice_ticks(ylo, yhi, std::clamp(o.height / 60, 3, 10))};
  auto px = [&](double x) { return x0 + (x - xa.lo()) / (xa.hi() - xa.lo()) * (x1 - x0); };
  auto py = [&](double y) { return y1 - (y - ya.lo()) / (ya.hi() - ya.lo()) * (y1 - y0); };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) +
                    "\" height=\"" + std::to_string(o.height) + "\" viewBox=\"0 0 " +
                    std::to_string(o.width) + " " + std::to_string(o.height) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  // Grid, ticks and their labels.
  for (size_t i = 0; i < xa.ticks.size(); ++i) {
    const std::string x = number("%.1f", px(xa.ticks[i]));
    svg += "<line x1=\"" + x + "\" y1=\"" + number("%.1f", y0) + "\" x2=\"" + x + "\" y2=\"" +
           number("%.1f", y1 + 5) + "\" stroke=\"#e4e4e4\"/>\n";
    svg += text_element(px(xa.ticks[i]), y1 + 18, "middle", xa.label(i));
  }
  for (size_t i = 0; i < ya.ticks.size(); ++i) {
    const std::string y = number("%.1f", py(ya.ticks[i]));
    svg += "<line x1=\"" + number("%.1f", x0 - 5) + "\" y1=\"" + y + "\" x2=\"" +
           number("%.1f", x1) + "\" y2=\"" + y + "\" stroke=\"#e4e4e4\"/>\n";
    svg += text_element(x0 - 8, py(ya.ticks[i]) + 4, "end", ya.label(i));
  }
  svg += "<rect x=\"" + number("%.1f", x0) + "\" y=\"" + number("%.1f", y0) + "\" width=\"" +
         number("%.1f", x1 - x0) + "\" height=\"" + number("%.1f", y1 - y0) +
         "\" fill=\"none\" stroke=\"#5a5a5a\"/>\n";

  // Curves, one polyline per run of finite points.
  auto polylines = [&](const std::vector<double>& ys, const char* color, double width) {
    std::string points;
    auto flush = [&] {
      if (!points.empty()) {
        svg += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"" +
               number("%g", width) + "\" points=\"" + points + "\"/>\n";
      }
      points.clear();
    };
    for (size_t i = 0; i < ys.size(); ++i) {
      if (!std::isfinite(steps[i]) || !std::isfinite(ys[i])) {
        flush();
        continue;
      }
      if (!points.empty()) points += ' ';
      points += number("%.1f", px(steps[i])) + "," + number("%.1f", py(ys[i]));
    }
    flush();
  };
  const std::vector<double> smoothed =
      smooth ? local_linear_smooth(steps, loss, half_window) : std::vector<double>{};
  polylines(loss, smooth ? kRawWithSmoothing : kMain, smooth ? 1.5 : 2);
  if (smooth) polylines(smoothed, kMain, 2.5);
  if (finite == 0) svg += text_element((x0 + x1) / 2, (y0 + y1) / 2, "middle", "no data");

  // Title, axis labels and the legend.
  svg += text_element(W / 2, 24, "middle", title, " font-size=\"14\"");
  svg += text_element((x0 + x1) / 2, H - 12, "middle", o.x_label);
  svg += text_element(16, (y0 + y1) / 2, "middle", o.y_label,
                      " transform=\"rotate(-90 16 " + number("%.1f", (y0 + y1) / 2) + ")\"");
  if (finite > 0) {
    double last_raw = std::numeric_limits<double>::quiet_NaN(), last_smoothed = last_raw;
    for (size_t i = 0; i < loss.size(); ++i) {
      if (std::isfinite(steps[i]) && std::isfinite(loss[i])) last_raw = loss[i];
    }
    svg +=
        text_element(x1 - 8, y0 + 16, "end", o.y_label + " (last " + number("%.4g", last_raw) + ")",
                     " fill=\"" + std::string(smooth ? kRawWithSmoothing : kMain) + "\"");
    if (smooth) {
      for (double v : smoothed) {
        if (std::isfinite(v)) last_smoothed = v;
      }
      svg += text_element(x1 - 8, y0 + 32, "end",
                          "smoothed (last " + number("%.4g", last_smoothed) + ")",
                          " fill=\"" + std::string(kMain) + "\"");
    }
  }
  return svg + "</svg>\n";
}

void write_loss_svg(const std::string& path, const std::vector<double>& steps,
                    const std::vector<double>& loss, const std::string& title,
                    const LossChartOptions& options) {
  const std::string svg = render_loss_svg(steps, loss, title, options);
  write_file_atomically(path, std::span(reinterpret_cast<const uint8_t*>(svg.data()), svg.size()));
}

}  // namespace blockrnn::train
