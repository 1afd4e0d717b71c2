// Minimal zlib-stream (RFC 1950) writer over DEFLATE (RFC 1951): either stored
// (uncompressed) blocks, or a single fixed-Huffman block fed by a greedy LZ77
// matcher. Used by the PNG encoder; no external zlib needed.
#ifndef BLOCKRNN_TOOLS_TRAIN_DEFLATE_H_
#define BLOCKRNN_TOOLS_TRAIN_DEFLATE_H_

#include <cstdint>
#include <span>
#include <vector>

namespace blockrnn::train {

enum class DeflateMode {
  kStored,        // uncompressed stored blocks of up to 65535 bytes
  kFixedHuffman,  // LZ77 + fixed Huffman codes; falls back to stored if that is smaller
};

// Raw DEFLATE stream (no zlib header/trailer) of `data`.
std::vector<uint8_t> deflate_raw(std::span<const uint8_t> data, DeflateMode mode);

// zlib stream: 2-byte header (CM=8, 32K window), DEFLATE data, big-endian Adler-32.
std::vector<uint8_t> zlib_compress(std::span<const uint8_t> data,
                                   DeflateMode mode = DeflateMode::kFixedHuffman);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_DEFLATE_H_
