// DEFLATE encoder (stored blocks, or greedy LZ77 with fixed Huffman codes) and
// zlib stream wrapper, written from RFC 1950/1951.
#include "train/deflate.h"

#include <algorithm>
#include <array>
#include <cstddef>

#include "train/checksum.h"

namespace blockrnn::train {
namespace {

constexpr size_t kMaxStoredBlock = 65535;
constexpr size_t kWindowSize = 32768;
constexpr size_t kWindowMask = kWindowSize - 1;
constexpr int kMinMatch = 3;
constexpr int kMaxMatch = 258;
constexpr int kHashBits = 15;
constexpr int kMaxChain = 48;

// Length codes 257..285: base length and number of extra bits (RFC 1951 3.2.5).
constexpr std::array<int, 29> kLengthBase = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                             15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                             67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr std::array<int, 29> kLengthExtra = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                              2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
// Distance codes 0..29.
constexpr std::array<int, 30> kDistBase = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr std::array<int, 30> kDistExtra = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                            6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

// Index into kLengthBase for every match length 0..258 (entries below 3 unused).
constexpr std::array<uint8_t, kMaxMatch + 1> make_length_code_table() {
  std::array<uint8_t, kMaxMatch + 1> table{};
  for (int len = kMinMatch; len <= kMaxMatch; ++len) {
    int code = 0;
    while (code + 1 < 29 && kLengthBase[code + 1] <= len) ++code;
    table[len] = static_cast<uint8_t>(code);
  }
  return table;
}
constexpr auto kLengthCode = make_length_code_table();

int distance_code(int dist) {
  int code = 0;
  while (code + 1 < 30 && kDistBase[code + 1] <= dist) ++code;
  return code;
}

class BitWriter {
 public:
  explicit BitWriter(std::vector<uint8_t>& out) : out_(out) {}

  // Appends the low `n` bits of `value`, least significant bit first.
  void put_bits(uint32_t value, int n) {
    buffer_ |= static_cast<uint64_t>(value & ((1u << n) - 1u)) << count_;
    count_ += n;
    while (count_ >= 8) {
      out_.push_back(static_cast<uint8_t>(buffer_ & 0xFFu));
      buffer_ >>= 8;
      count_ -= 8;
    }
  }

  // Huffman codes are packed starting with their most significant bit.
  void put_code(uint32_t code, int length) {
    uint32_t reversed = 0;
    for (int i = 0; i < length; ++i) reversed |= ((code >> i) & 1u) << (length - 1 - i);
    put_bits(reversed, length);
  }

  void flush() {
    if (count_ > 0) out_.push_back(static_cast<uint8_t>(buffer_ & 0xFFu));
    buffer_ = 0;
    count_ = 0;
  }

 private:
  std::vector<uint8_t>& out_;
  uint64_t buffer_ = 0;
  int count_ = 0;
};

void put_fixed_literal(BitWriter& w, int symbol) {
  if (symbol < 144) {
    w.put_code(0x30u + static_cast<uint32_t>(symbol), 8);
  } else if (symbol < 256) {
    w.put_code(0x190u + static_cast<uint32_t>(symbol - 144), 9);
  } else if (symbol < 280) {
    w.put_code(static_cast<uint32_t>(symbol - 256), 7);
  } else {
    w.put_code(0xC0u + static_cast<uint32_t>(symbol - 280), 8);
  }
}

void put_fixed_match(BitWriter& w, int length, int distance) {
  const int lcode = kLengthCode[length];
  put_fixed_literal(w, 257 + lcode);
  if (kLengthExtra[lcode] > 0) {
    w.put_bits(static_cast<uint32_t>(length - kLengthBase[lcode]), kLengthExtra[lcode]);
  }
  const int dcode = distance_code(distance);
  w.put_code(static_cast<uint32_t>(dcode), 5);
  if (kDistExtra[dcode] > 0) {
    w.put_bits(static_cast<uint32_t>(distance - kDistBase[dcode]), kDistExtra[dcode]);
  }
}

void deflate_stored(std::span<const uint8_t> data, std::vector<uint8_t>& out) {
  size_t pos = 0;
  do {
    const size_t len = std::min(kMaxStoredBlock, data.size() - pos);
    const bool final = pos + len == data.size();
    out.push_back(final ? 1 : 0);  // BFINAL, BTYPE=00, padding to the byte boundary
    out.push_back(static_cast<uint8_t>(len & 0xFFu));
    out.push_back(static_cast<uint8_t>(len >> 8));
    out.push_back(static_cast<uint8_t>(~len & 0xFFu));
    out.push_back(static_cast<uint8_t>((~len >> 8) & 0xFFu));
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
               data.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  } while (pos < data.size());
}

uint32_t hash3(const uint8_t* p) {
  const uint32_t v = (static_cast<uint32_t>(p[0]) << 16) | (static_cast<uint32_t>(p[1]) << 8) |
                     static_cast<uint32_t>(p[2]);
  return (v * 2654435761u) >> (32 - kHashBits);
}

void deflate_fixed(std::span<const uint8_t> data, std::vector<uint8_t>& out) {
  BitWriter w(out);
  w.put_bits(1, 1);  // BFINAL
  w.put_bits(1, 2);  // BTYPE=01, fixed Huffman codes

  const size_t n = data.size();
  std::vector<int64_t> head(size_t{1} << kHashBits, -1);
  std::vector<int64_t> prev(kWindowSize, -1);
  auto insert = [&](size_t pos) {
    if (pos + kMinMatch > n) return;
    const uint32_t h = hash3(&data[pos]);
    prev[pos & kWindowMask] = head[h];
    head[h] = static_cast<int64_t>(pos);
  };

  size_t i = 0;
  while (i < n) {
    int best_len = 0;
    size_t best_dist = 0;
    if (i + kMinMatch <= n) {
      const size_t max_len = std::min<size_t>(kMaxMatch, n - i);
      int64_t cand = head[hash3(&data[i])];
      for (int chain = 0; cand >= 0 && chain < kMaxChain; ++chain) {
        const size_t c = static_cast<size_t>(cand);
        const size_t dist = i - c;
        if (dist > kWindowSize) break;
        size_t len = 0;
        while (len < max_len && data[c + len] == data[i + len]) ++len;
        if (static_cast<int>(len) > best_len) {
          best_len = static_cast<int>(len);
          best_dist = dist;
          if (len == max_len) break;
        }
        const int64_t next = prev[c & kWindowMask];
        if (next >= cand) break;  // slot reused by a newer position: chain ends
        cand = next;
      }
    }
    if (best_len >= kMinMatch) {
      put_fixed_match(w, best_len, static_cast<int>(best_dist));
      for (int k = 0; k < best_len; ++k) insert(i + static_cast<size_t>(k));
      i += static_cast<size_t>(best_len);
    } else {
      put_fixed_literal(w, data[i]);
      insert(i);
      ++i;
    }
  }
  put_fixed_literal(w, 256);  // end of block
  w.flush();
}

}  // namespace

std::vector<uint8_t> deflate_raw(std::span<const uint8_t> data, DeflateMode mode) {
  std::vector<uint8_t> out;
  if (mode == DeflateMode::kFixedHuffman) {
    deflate_fixed(data, out);
    const size_t blocks =
        std::max<size_t>(1, (data.size() + kMaxStoredBlock - 1) / kMaxStoredBlock);
    if (out.size() <= data.size() + 5 * blocks) return out;
    out.clear();
  }
  deflate_stored(data, out);
  return out;
}

std::vector<uint8_t> zlib_compress(std::span<const uint8_t> data, DeflateMode mode) {
  // CMF = 0x78 (deflate, 32K window); FLG = 0x01 makes CMF*256+FLG divisible by 31.
  std::vector<uint8_t> out = {0x78, 0x01};
  const std::vector<uint8_t> body = deflate_raw(data, mode);
  out.insert(out.end(), body.begin(), body.end());
  const uint32_t adler = adler32(data);
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(adler >> shift));
  return out;
}

}  // namespace blockrnn::train
