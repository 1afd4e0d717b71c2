// 8-bit RGB raster image with simple drawing primitives (pixels, rectangles,
// anti-aliased thick polylines, bitmap-font text) and a dependency-free PNG
// encoder (IHDR/IDAT/IEND, filter 0, zlib stream from deflate.h).
#ifndef BLOCKRNN_TOOLS_TRAIN_PNG_H_
#define BLOCKRNN_TOOLS_TRAIN_PNG_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "train/deflate.h"

namespace blockrnn::train {

struct Rgb {
  uint8_t r = 0;
  uint8_t g = 0;
  uint8_t b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

struct PointF {
  double x = 0;
  double y = 0;
};

enum class TextDirection {
  kHorizontal,  // left to right
  kUp,          // rotated 90 degrees counter-clockwise, reads bottom to top
};

class RgbImage {
 public:
  // Throws std::invalid_argument unless 1 <= width, height <= 16384.
  RgbImage(int width, int height, Rgb background = {255, 255, 255});

  int width() const { return width_; }
  int height() const { return height_; }

  // Row-major, 3 bytes per pixel, no padding.
  const std::vector<uint8_t>& pixels() const { return pixels_; }

  // Pixel access; at() throws std::out_of_range outside the image, the drawing
  // functions below silently clip.
  Rgb at(int x, int y) const;
  void set(int x, int y, Rgb color);
  // Alpha-blends `color` over the pixel with coverage `alpha` in [0, 1].
  void blend(int x, int y, Rgb color, double alpha);

  void fill_rect(int x, int y, int w, int h, Rgb color);
  void hline(int x0, int x1, int y, Rgb color);
  void vline(int x, int y0, int y1, Rgb color);

  // Anti-aliased polyline of the given stroke width. Joints are not
  // double-blended: each pixel takes the maximum coverage over all segments.
  void polyline(std::span<const PointF> points, double line_width, Rgb color);

  // Draws `text` with the built-in bitmap font scaled by `scale`. (x, y) is the
  // top-left corner of the text's bounding box (for kUp: of the rotated box,
  // whose width is kGlyphHeight * scale and height text_width(text, scale)).
  void draw_text(int x, int y, std::string_view text, int scale, Rgb color,
                 TextDirection direction = TextDirection::kHorizontal);

 private:
  int width_;
  int height_;
  std::vector<uint8_t> pixels_;
};

// Complete PNG file (8-bit truecolor, no interlace, filter type 0 on every row).
std::vector<uint8_t> encode_png(const RgbImage& image,
                                DeflateMode mode = DeflateMode::kFixedHuffman);

// encode_png() written atomically to `path`; throws std::runtime_error on I/O errors.
void write_png(const std::string& path, const RgbImage& image,
               DeflateMode mode = DeflateMode::kFixedHuffman);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_PNG_H_
