// Test-only decoders, written independently of the encoders under test: a
// DEFLATE inflater for stored and fixed-Huffman blocks (canonical Huffman
// decoding built from the RFC 1951 code lengths), zlib stream unwrapping with
// Adler-32 verification, and a PNG chunk parser.
#ifndef BLOCKRNN_TOOLS_TRAIN_TESTS_INFLATE_FOR_TESTS_H_
#define BLOCKRNN_TOOLS_TRAIN_TESTS_INFLATE_FOR_TESTS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace blockrnn::train::testing {

// Decodes a raw DEFLATE stream; throws std::runtime_error on malformed input
// or dynamic-Huffman blocks (which the encoder under test never emits).
std::vector<uint8_t> inflate_raw(std::span<const uint8_t> stream, size_t* consumed = nullptr);

// Checks the zlib header and the Adler-32 trailer; throws std::runtime_error.
std::vector<uint8_t> zlib_decompress(std::span<const uint8_t> stream);

struct PngChunk {
  std::string type;
  std::vector<uint8_t> data;
  uint32_t stored_crc = 0;
  uint32_t computed_crc = 0;
};

struct DecodedPng {
  uint32_t width = 0;
  uint32_t height = 0;
  uint8_t bit_depth = 0;
  uint8_t color_type = 0;
  std::vector<PngChunk> chunks;
  std::vector<uint8_t> raw;  // inflated IDAT data: filter byte + scanline per row
};

// Parses signature and chunks (throws std::runtime_error on a bad signature,
// a truncated chunk or a CRC mismatch) and inflates the concatenated IDATs.
DecodedPng decode_png(std::span<const uint8_t> file);

}  // namespace blockrnn::train::testing

#endif  // BLOCKRNN_TOOLS_TRAIN_TESTS_INFLATE_FOR_TESTS_H_
