// Tests for the RGB image drawing primitives, the bitmap font and the PNG
// encoder (signature, chunk CRCs, IHDR fields, inflated IDAT contents).
#include "train/png.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "inflate_for_tests.h"
#include "train/bitmap_font.h"
#include "train/file_util.h"

namespace blockrnn::train {
namespace {

RgbImage gradient_image(int w, int h) {
  RgbImage img(w, h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      img.set(x, y,
              {static_cast<uint8_t>(x * 255 / std::max(w - 1, 1)),
               static_cast<uint8_t>(y * 255 / std::max(h - 1, 1)),
               static_cast<uint8_t>((x * 7 + y * 13) & 0xFF)});
    }
  }
  return img;
}

void expect_valid_png_of(const std::vector<uint8_t>& file, const RgbImage& img) {
  const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  ASSERT_GE(file.size(), 8u);
  EXPECT_TRUE(std::equal(signature, signature + 8, file.begin()));
  const testing::DecodedPng png = testing::decode_png(file);  // checks every chunk CRC
  ASSERT_EQ(png.chunks.size(), 3u);
  EXPECT_EQ(png.chunks[0].type, "IHDR");
  EXPECT_EQ(png.chunks[1].type, "IDAT");
  EXPECT_EQ(png.chunks[2].type, "IEND");
  EXPECT_TRUE(png.chunks[2].data.empty());
  EXPECT_EQ(png.width, static_cast<uint32_t>(img.width()));
  EXPECT_EQ(png.height, static_cast<uint32_t>(img.height()));
  EXPECT_EQ(png.bit_depth, 8);
  EXPECT_EQ(png.color_type, 2);
  const auto& ihdr = png.chunks[0].data;
  EXPECT_EQ(ihdr[10], 0);  // compression
  EXPECT_EQ(ihdr[11], 0);  // filter method
  EXPECT_EQ(ihdr[12], 0);  // interlace
  const size_t stride = static_cast<size_t>(img.width()) * 3;
  ASSERT_EQ(png.raw.size(), (stride + 1) * img.height());
  for (int y = 0; y < img.height(); ++y) {
    const size_t row = y * (stride + 1);
    ASSERT_EQ(png.raw[row], 0) << "filter byte of row " << y;
    ASSERT_TRUE(std::equal(png.raw.begin() + row + 1, png.raw.begin() + row + 1 + stride,
                           img.pixels().begin() + y * stride))
        << "pixels of row " << y;
  }
}

TEST(Png, EncodesStoredAndCompressed) {
  for (auto [w, h] : {std::pair{1, 1}, std::pair{3, 2}, std::pair{64, 48}, std::pair{800, 50}}) {
    const RgbImage img = gradient_image(w, h);
    expect_valid_png_of(encode_png(img, DeflateMode::kStored), img);
    expect_valid_png_of(encode_png(img, DeflateMode::kFixedHuffman), img);
  }
}

TEST(Png, LargeStoredImageSpansManyDeflateBlocks) {
  const RgbImage img = gradient_image(800, 500);
  const auto file = encode_png(img, DeflateMode::kStored);
  // 500 rows of 2401 bytes in 19 stored blocks, plus chunk and zlib overhead.
  EXPECT_EQ(file.size(), 8u + 25 + (12 + 2 + 500 * 2401 + 19 * 5 + 4) + 12);
  expect_valid_png_of(file, img);
}

TEST(Png, CorruptionIsDetectedByChunkCrc) {
  auto file = encode_png(gradient_image(10, 10));
  file[40] ^= 0x01;  // inside the IDAT data
  EXPECT_THROW(testing::decode_png(file), std::runtime_error);
}

TEST(Png, WritePngCreatesFile) {
  const std::string path = ::testing::TempDir() + "/blockrnn_png_test.png";
  const RgbImage img = gradient_image(20, 10);
  write_png(path, img);
  expect_valid_png_of(read_file_bytes(path), img);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
  EXPECT_THROW(write_png("/nonexistent-dir-blockrnn/x.png", img), std::runtime_error);
}

TEST(RgbImage, RejectsBadSizes) {
  EXPECT_THROW(RgbImage(0, 10), std::invalid_argument);
  EXPECT_THROW(RgbImage(10, -1), std::invalid_argument);
  EXPECT_THROW(RgbImage(20000, 10), std::invalid_argument);
}

TEST(RgbImage, PixelsBlendAndClip) {
  RgbImage img(4, 3, {10, 20, 30});
  EXPECT_EQ(img.at(3, 2), (Rgb{10, 20, 30}));
  img.set(1, 1, {255, 0, 0});
  EXPECT_EQ(img.at(1, 1), (Rgb{255, 0, 0}));
  img.set(-1, 0, {1, 1, 1});  // clipped, no crash
  img.set(4, 0, {1, 1, 1});
  EXPECT_THROW(img.at(4, 0), std::out_of_range);
  img.blend(0, 0, {110, 220, 30}, 0.5);
  EXPECT_EQ(img.at(0, 0), (Rgb{60, 120, 30}));
  img.blend(0, 0, {0, 0, 0}, 0.0);
  EXPECT_EQ(img.at(0, 0), (Rgb{60, 120, 30}));
  img.fill_rect(-5, -5, 100, 100, {7, 8, 9});  // clipped to the image
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 4; ++x) EXPECT_EQ(img.at(x, y), (Rgb{7, 8, 9}));
  }
}

int count_non_background(const RgbImage& img, Rgb bg) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y) {
    for (int x = 0; x < img.width(); ++x) n += img.at(x, y) == bg ? 0 : 1;
  }
  return n;
}

TEST(RgbImage, PolylineCoversTheSegment) {
  RgbImage img(50, 20);
  const PointF pts[] = {{5, 10}, {45, 10}};
  img.polyline(pts, 2.0, {0, 0, 0});
  // A 2-px wide horizontal line through y = 10 fully covers rows 9 and 10.
  for (int x = 6; x < 45; ++x) {
    EXPECT_EQ(img.at(x, 9), (Rgb{0, 0, 0})) << x;
    EXPECT_EQ(img.at(x, 10), (Rgb{0, 0, 0})) << x;
    EXPECT_EQ(img.at(x, 5), (Rgb{255, 255, 255})) << x;
  }
  // Non-finite points and empty input draw nothing.
  RgbImage blank(10, 10);
  const PointF bad[] = {{1, 1}, {std::nan(""), 2}};
  blank.polyline(bad, 2.0, {0, 0, 0});
  blank.polyline({}, 2.0, {0, 0, 0});
  EXPECT_EQ(count_non_background(blank, {255, 255, 255}), 0);
  // Far outside the image: clipped, no crash.
  const PointF outside[] = {{-1e6, -1e6}, {-1e6 + 5, -1e6}};
  blank.polyline(outside, 3.0, {0, 0, 0});
  EXPECT_EQ(count_non_background(blank, {255, 255, 255}), 0);
}

TEST(BitmapFont, GlyphsAreWellFormed) {
  for (int c = ' '; c <= '~'; ++c) {
    EXPECT_TRUE(has_glyph(static_cast<char>(c)));
    int ink = 0;
    for (int r = 0; r < kGlyphHeight; ++r) {
      const uint8_t row = glyph_row(static_cast<char>(c), r);
      EXPECT_EQ(row & ~0x1F, 0);
      ink += row != 0;
    }
    if (c == ' ') {
      EXPECT_EQ(ink, 0);
    } else {
      EXPECT_GT(ink, 0) << "glyph '" << static_cast<char>(c) << "' is empty";
    }
  }
  EXPECT_FALSE(has_glyph('\x01'));
  EXPECT_NE(glyph_row('\x01', 0), 0);  // hollow box
  EXPECT_EQ(glyph_row('A', -1), 0);
  EXPECT_EQ(glyph_row('A', kGlyphHeight), 0);
  EXPECT_EQ(text_width("", 2), 0);
  EXPECT_EQ(text_width("ab", 1), 11);
  EXPECT_EQ(text_width("ab", 3), 33);
}

TEST(RgbImage, TextStaysInsideItsBox) {
  for (TextDirection dir : {TextDirection::kHorizontal, TextDirection::kUp}) {
    RgbImage img(120, 120);
    const std::string text = "loss 1.5g";
    img.draw_text(10, 20, text, 2, {0, 0, 0}, dir);
    const int along = text_width(text, 2);
    const int across = kGlyphHeight * 2;
    const int box_w = dir == TextDirection::kHorizontal ? along : across;
    const int box_h = dir == TextDirection::kHorizontal ? across : along;
    int inside = 0;
    for (int y = 0; y < img.height(); ++y) {
      for (int x = 0; x < img.width(); ++x) {
        if (img.at(x, y) == Rgb{255, 255, 255}) continue;
        EXPECT_TRUE(x >= 10 && x < 10 + box_w && y >= 20 && y < 20 + box_h)
            << "ink outside the box at " << x << "," << y;
        ++inside;
      }
    }
    EXPECT_GT(inside, 100);
  }
}

}  // namespace
}  // namespace blockrnn::train
