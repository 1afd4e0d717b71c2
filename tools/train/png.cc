// RgbImage drawing primitives and the PNG encoder.
#include "train/png.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "train/bitmap_font.h"
#include "train/checksum.h"
#include "train/file_util.h"

namespace blockrnn::train {
namespace {

constexpr int kMaxDimension = 16384;

void put_u32_be(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void put_chunk(std::vector<uint8_t>& out, const char type[4], std::span<const uint8_t> data) {
  put_u32_be(out, static_cast<uint32_t>(data.size()));
  const size_t type_pos = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  // The CRC covers the chunk type and data, not the length.
  const uint32_t crc =
      crc32(std::span<const uint8_t>(out.data() + type_pos, out.size() - type_pos));
  put_u32_be(out, crc);
}

uint8_t mix(uint8_t dst, uint8_t src, double alpha) {
  const double v = dst + (static_cast<double>(src) - dst) * alpha;
  return static_cast<uint8_t>(std::lround(std::clamp(v, 0.0, 255.0)));
}

// Distance from p to the segment a-b.
double segment_distance(double px, double py, const PointF& a, const PointF& b) {
  const double dx = b.x - a.x;
  const double dy = b.y - a.y;
  const double len2 = dx * dx + dy * dy;
  double t = 0;
  if (len2 > 0) t = std::clamp(((px - a.x) * dx + (py - a.y) * dy) / len2, 0.0, 1.0);
  const double cx = a.x + t * dx - px;
  const double cy = a.y + t * dy - py;
  return std::sqrt(cx * cx + cy * cy);
}

}  // namespace

RgbImage::RgbImage(int width, int height, Rgb background) : width_(width), height_(height) {
  if (width < 1 || height < 1 || width > kMaxDimension || height > kMaxDimension) {
    throw std::invalid_argument("image size " + std::to_string(width) + "x" +
                                std::to_string(height) + " is outside 1.." +
                                std::to_string(kMaxDimension));
  }
  pixels_.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = background.r;
    pixels_[i + 1] = background.g;
    pixels_[i + 2] = background.b;
  }
}

Rgb RgbImage::at(int x, int y) const {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) {
    throw std::out_of_range("pixel (" + std::to_string(x) + ", " + std::to_string(y) +
                            ") is outside the image");
  }
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width_) + x) * 3;
  return {pixels_[i], pixels_[i + 1], pixels_[i + 2]};
}

void RgbImage::set(int x, int y, Rgb color) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width_) + x) * 3;
  pixels_[i] = color.r;
  pixels_[i + 1] = color.g;
  pixels_[i + 2] = color.b;
}

void RgbImage::blend(int x, int y, Rgb color, double alpha) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_ || !(alpha > 0)) return;
  alpha = std::min(alpha, 1.0);
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width_) + x) * 3;
  pixels_[i] = mix(pixels_[i], color.r, alpha);
  pixels_[i + 1] = mix(pixels_[i + 1], color.g, alpha);
  pixels_[i + 2] = mix(pixels_[i + 2], color.b, alpha);
}

void RgbImage::fill_rect(int x, int y, int w, int h, Rgb color) {
  const int x0 = std::max(x, 0);
  const int y0 = std::max(y, 0);
  const int x1 = std::min<int64_t>(static_cast<int64_t>(x) + w, width_);
  const int y1 = std::min<int64_t>(static_cast<int64_t>(y) + h, height_);
  for (int yy = y0; yy < y1; ++yy) {
    for (int xx = x0; xx < x1; ++xx) set(xx, yy, color);
  }
}

void RgbImage::hline(int x0, int x1, int y, Rgb color) {
  if (x0 > x1) std::swap(x0, x1);
  fill_rect(x0, y, x1 - x0 + 1, 1, color);
}

void RgbImage::vline(int x, int y0, int y1, Rgb color) {
  if (y0 > y1) std::swap(y0, y1);
  fill_rect(x, y0, 1, y1 - y0 + 1, color);
}

void RgbImage::polyline(std::span<const PointF> points, double line_width, Rgb color) {
  if (points.empty() || !(line_width > 0)) return;
  const double half = line_width / 2;
  // Coverage per pixel, maximum over segments, only over the touched bounding box.
  double min_x = points[0].x, max_x = points[0].x, min_y = points[0].y, max_y = points[0].y;
  for (const PointF& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) return;
    min_x = std::min(min_x, p.x);
    max_x = std::max(max_x, p.x);
    min_y = std::min(min_y, p.y);
    max_y = std::max(max_y, p.y);
  }
  const int bx0 = std::clamp(static_cast<int>(std::floor(min_x - half - 1)), 0, width_ - 1);
  const int bx1 = std::clamp(static_cast<int>(std::ceil(max_x + half + 1)), 0, width_ - 1);
  const int by0 = std::clamp(static_cast<int>(std::floor(min_y - half - 1)), 0, height_ - 1);
  const int by1 = std::clamp(static_cast<int>(std::ceil(max_y + half + 1)), 0, height_ - 1);
  if (max_x + half + 1 < 0 || min_x - half - 1 > width_ - 1 || max_y + half + 1 < 0 ||
      min_y - half - 1 > height_ - 1) {
    return;
  }
  const int bw = bx1 - bx0 + 1;
  const int bh = by1 - by0 + 1;
  std::vector<float> coverage(static_cast<size_t>(bw) * static_cast<size_t>(bh), 0.0f);

  const size_t segments = points.size() == 1 ? 1 : points.size() - 1;
  for (size_t s = 0; s < segments; ++s) {
    const PointF& a = points[s];
    const PointF& b = points.size() == 1 ? points[0] : points[s + 1];
    const int x0 = std::max(bx0, static_cast<int>(std::floor(std::min(a.x, b.x) - half - 1)));
    const int x1 = std::min(bx1, static_cast<int>(std::ceil(std::max(a.x, b.x) + half + 1)));
    const int y0 = std::max(by0, static_cast<int>(std::floor(std::min(a.y, b.y) - half - 1)));
    const int y1 = std::min(by1, static_cast<int>(std::ceil(std::max(a.y, b.y) + half + 1)));
    for (int y = y0; y <= y1; ++y) {
      for (int x = x0; x <= x1; ++x) {
        // Pixel (x, y) covers [x, x+1) x [y, y+1); sample at its centre.
        const double d = segment_distance(x + 0.5, y + 0.5, a, b);
        const float c = static_cast<float>(std::clamp(half + 0.5 - d, 0.0, 1.0));
        float& dst = coverage[static_cast<size_t>(y - by0) * bw + (x - bx0)];
        dst = std::max(dst, c);
      }
    }
  }
  for (int y = by0; y <= by1; ++y) {
    for (int x = bx0; x <= bx1; ++x) {
      const float c = coverage[static_cast<size_t>(y - by0) * bw + (x - bx0)];
      if (c > 0) blend(x, y, color, c);
    }
  }
}

void RgbImage::draw_text(int x, int y, std::string_view text, int scale, Rgb color,
                         TextDirection direction) {
  if (scale < 1) return;
  const int unscaled_width = text_width(text, 1);
  for (size_t k = 0; k < text.size(); ++k) {
    for (int row = 0; row < kGlyphHeight; ++row) {
      const uint8_t bits = glyph_row(text[k], row);
      if (bits == 0) continue;
      for (int col = 0; col < kGlyphWidth; ++col) {
        if (!(bits & (1u << (kGlyphWidth - 1 - col)))) continue;
        const int u = static_cast<int>(k) * kGlyphAdvance + col;  // along the text
        const int v = row;                                        // across the text
        int px, py;
        if (direction == TextDirection::kHorizontal) {
          px = x + u * scale;
          py = y + v * scale;
        } else {
          px = x + v * scale;
          py = y + (unscaled_width - 1 - u) * scale;
        }
        fill_rect(px, py, scale, scale, color);
      }
    }
  }
}

std::vector<uint8_t> encode_png(const RgbImage& image, DeflateMode mode) {
  const int w = image.width();
  const int h = image.height();
  const size_t stride = static_cast<size_t>(w) * 3;
  // Scanlines, each prefixed by filter type 0 (None).
  std::vector<uint8_t> raw;
  raw.reserve((stride + 1) * static_cast<size_t>(h));
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);
    const auto row = image.pixels().begin() + static_cast<std::ptrdiff_t>(stride * y);
    raw.insert(raw.end(), row, row + static_cast<std::ptrdiff_t>(stride));
  }

  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32_be(ihdr, static_cast<uint32_t>(w));
  put_u32_be(ihdr, static_cast<uint32_t>(h));
  ihdr.push_back(8);  // bit depth
  ihdr.push_back(2);  // colour type: truecolour
  ihdr.push_back(0);  // compression: deflate
  ihdr.push_back(0);  // filter method 0
  ihdr.push_back(0);  // no interlace
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "IDAT", zlib_compress(raw, mode));
  put_chunk(out, "IEND", {});
  return out;
}

void write_png(const std::string& path, const RgbImage& image, DeflateMode mode) {
  write_file_atomically(path, encode_png(image, mode));
}

}  // namespace blockrnn::train
