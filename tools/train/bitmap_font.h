// A tiny built-in 5x7 bitmap font (with 2 descender rows) covering printable
// ASCII, used to draw titles and tick labels on the PNG loss chart.
#ifndef BLOCKRNN_TOOLS_TRAIN_BITMAP_FONT_H_
#define BLOCKRNN_TOOLS_TRAIN_BITMAP_FONT_H_

#include <cstdint>
#include <string_view>

namespace blockrnn::train {

inline constexpr int kGlyphWidth = 5;    // pixel columns per glyph
inline constexpr int kGlyphHeight = 9;   // rows 0..6 above/on the baseline, 7..8 descenders
inline constexpr int kGlyphAdvance = 6;  // horizontal distance between glyph origins
inline constexpr int kGlyphCapHeight = 7;

// True for the printable ASCII characters ' '..'~', which have real glyphs.
// Other bytes render as a hollow box.
bool has_glyph(char c);

// Row `row` (0 = top) of the glyph for `c`, as a 5-bit mask whose bit 4 is the
// leftmost column. Rows outside [0, kGlyphHeight) are empty.
uint8_t glyph_row(char c, int row);

// Width in pixels of `text` drawn at integer `scale` (no trailing spacing).
int text_width(std::string_view text, int scale);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_BITMAP_FONT_H_
