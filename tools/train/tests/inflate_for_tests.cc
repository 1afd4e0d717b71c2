// Test-only inflater (stored + fixed-Huffman blocks), zlib unwrapper and PNG
// chunk parser used to validate the encoders' output.
#include "inflate_for_tests.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "train/checksum.h"

namespace blockrnn::train::testing {
namespace {

class BitReader {
 public:
  explicit BitReader(std::span<const uint8_t> data) : data_(data) {}

  uint32_t bit() {
    if (pos_ >= data_.size()) throw std::runtime_error("inflate: unexpected end of stream");
    const uint32_t b = (data_[pos_] >> bit_) & 1u;
    if (++bit_ == 8) {
      bit_ = 0;
      ++pos_;
    }
    return b;
  }
  // LSB-first multi-bit value.
  uint32_t bits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v |= bit() << i;
    return v;
  }
  void align() {
    if (bit_ != 0) {
      bit_ = 0;
      ++pos_;
    }
  }
  uint8_t byte() {
    if (bit_ != 0) throw std::runtime_error("inflate: unaligned byte read");
    if (pos_ >= data_.size()) throw std::runtime_error("inflate: unexpected end of stream");
    return data_[pos_++];
  }
  size_t consumed() const { return pos_ + (bit_ != 0 ? 1 : 0); }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  int bit_ = 0;
};

// Canonical Huffman decoder built from code lengths (RFC 1951 section 3.2.2).
class Huffman {
 public:
  explicit Huffman(const std::vector<int>& lengths) {
    counts_.fill(0);
    for (int len : lengths) ++counts_[len];
    counts_[0] = 0;
    std::array<int, 16> offsets{};
    for (int len = 1; len < 16; ++len) offsets[len] = offsets[len - 1] + counts_[len - 1];
    symbols_.resize(lengths.size());
    for (size_t s = 0; s < lengths.size(); ++s) {
      if (lengths[s] != 0) symbols_[offsets[lengths[s]]++] = static_cast<int>(s);
    }
  }

  int decode(BitReader& in) const {
    int code = 0;   // code read so far, MSB first
    int first = 0;  // first code of the current length
    int index = 0;  // index of the first symbol of the current length
    for (int len = 1; len < 16; ++len) {
      code |= static_cast<int>(in.bit());
      const int count = counts_[len];
      if (code - first < count) return symbols_[index + (code - first)];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    throw std::runtime_error("inflate: invalid Huffman code");
  }

 private:
  std::array<int, 16> counts_;
  std::vector<int> symbols_;
};

const Huffman& fixed_literal_code() {
  static const Huffman h = [] {
    std::vector<int> lengths(288);
    for (int s = 0; s < 288; ++s) lengths[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    return Huffman(lengths);
  }();
  return h;
}

const Huffman& fixed_distance_code() {
  static const Huffman h(std::vector<int>(30, 5));
  return h;
}

constexpr int kLengthBase[] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                               31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr int kLengthExtra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr int kDistBase[] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                             33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                             1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr int kDistExtra[] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                              6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

uint32_t be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

}  // namespace

std::vector<uint8_t> inflate_raw(std::span<const uint8_t> stream, size_t* consumed) {
  BitReader in(stream);
  std::vector<uint8_t> out;
  bool final = false;
  while (!final) {
    final = in.bit() != 0;
    const uint32_t type = in.bits(2);
    if (type == 0) {
      in.align();
      const uint32_t len = in.byte() | (static_cast<uint32_t>(in.byte()) << 8);
      const uint32_t nlen = in.byte() | (static_cast<uint32_t>(in.byte()) << 8);
      if ((len ^ 0xFFFFu) != nlen) throw std::runtime_error("inflate: stored LEN/NLEN mismatch");
      for (uint32_t i = 0; i < len; ++i) out.push_back(in.byte());
    } else if (type == 1) {
      for (;;) {
        const int sym = fixed_literal_code().decode(in);
        if (sym < 256) {
          out.push_back(static_cast<uint8_t>(sym));
        } else if (sym == 256) {
          break;
        } else {
          const int li = sym - 257;
          if (li >= 29) throw std::runtime_error("inflate: invalid length symbol");
          const int length = kLengthBase[li] + static_cast<int>(in.bits(kLengthExtra[li]));
          const int di = fixed_distance_code().decode(in);
          if (di >= 30) throw std::runtime_error("inflate: invalid distance symbol");
          const size_t dist = kDistBase[di] + in.bits(kDistExtra[di]);
          if (dist > out.size()) throw std::runtime_error("inflate: distance before start");
          for (int k = 0; k < length; ++k) out.push_back(out[out.size() - dist]);
        }
      }
    } else {
      throw std::runtime_error("inflate: unsupported block type " + std::to_string(type));
    }
  }
  if (consumed != nullptr) *consumed = in.consumed();
  return out;
}

std::vector<uint8_t> zlib_decompress(std::span<const uint8_t> stream) {
  if (stream.size() < 6) throw std::runtime_error("zlib: stream too short");
  const uint8_t cmf = stream[0], flg = stream[1];
  if ((cmf & 0x0F) != 8) throw std::runtime_error("zlib: compression method is not deflate");
  if ((cmf >> 4) > 7) throw std::runtime_error("zlib: window too large");
  if ((cmf * 256u + flg) % 31 != 0) throw std::runtime_error("zlib: header check failed");
  if (flg & 0x20) throw std::runtime_error("zlib: preset dictionary not supported");
  size_t used = 0;
  std::vector<uint8_t> out = inflate_raw(stream.subspan(2), &used);
  if (2 + used + 4 != stream.size()) {
    throw std::runtime_error("zlib: " + std::to_string(stream.size() - 2 - used) +
                             " bytes after deflate data, expected 4");
  }
  if (be32(stream.data() + 2 + used) != adler32(out)) {
    throw std::runtime_error("zlib: Adler-32 mismatch");
  }
  return out;
}

DecodedPng decode_png(std::span<const uint8_t> file) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (file.size() < 8 || !std::equal(kSignature, kSignature + 8, file.begin())) {
    throw std::runtime_error("png: bad signature");
  }
  DecodedPng png;
  std::vector<uint8_t> idat;
  size_t pos = 8;
  while (pos < file.size()) {
    if (file.size() - pos < 12) throw std::runtime_error("png: truncated chunk header");
    const uint32_t len = be32(file.data() + pos);
    if (len > file.size() - pos - 12) throw std::runtime_error("png: truncated chunk");
    PngChunk chunk;
    chunk.type.assign(reinterpret_cast<const char*>(file.data() + pos + 4), 4);
    chunk.data.assign(file.begin() + static_cast<std::ptrdiff_t>(pos + 8),
                      file.begin() + static_cast<std::ptrdiff_t>(pos + 8 + len));
    chunk.stored_crc = be32(file.data() + pos + 8 + len);
    chunk.computed_crc = crc32(file.subspan(pos + 4, len + 4));
    if (chunk.stored_crc != chunk.computed_crc) {
      throw std::runtime_error("png: CRC mismatch in chunk " + chunk.type);
    }
    if (chunk.type == "IDAT") idat.insert(idat.end(), chunk.data.begin(), chunk.data.end());
    pos += 12 + len;
    png.chunks.push_back(std::move(chunk));
  }
  if (png.chunks.empty() || png.chunks.front().type != "IHDR" ||
      png.chunks.front().data.size() != 13) {
    throw std::runtime_error("png: first chunk is not a 13-byte IHDR");
  }
  if (png.chunks.back().type != "IEND") throw std::runtime_error("png: last chunk is not IEND");
  const auto& ihdr = png.chunks.front().data;
  png.width = be32(ihdr.data());
  png.height = be32(ihdr.data() + 4);
  png.bit_depth = ihdr[8];
  png.color_type = ihdr[9];
  png.raw = zlib_decompress(idat);
  return png;
}

}  // namespace blockrnn::train::testing
