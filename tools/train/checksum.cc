// CRC-32 (table driven, reflected 0xEDB88320) and Adler-32 implementations.
#include "train/checksum.h"

#include <array>
#include <cstddef>

namespace blockrnn::train {
namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
    table[n] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

}  // namespace

uint32_t crc32(std::span<const uint8_t> data, uint32_t crc) {
  uint32_t c = crc ^ 0xFFFFFFFFu;
  for (uint8_t byte : data) c = kCrcTable[(c ^ byte) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t crc32(std::string_view data, uint32_t crc) {
  return crc32(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
               crc);
}

uint32_t adler32(std::span<const uint8_t> data, uint32_t adler) {
  constexpr uint32_t kMod = 65521;
  // 5552 is the largest n such that 255 n (n + 1) / 2 + (n + 1) (kMod - 1) fits in
  // 32 bits, so the modulo can be deferred for that many bytes.
  constexpr size_t kBlock = 5552;
  uint32_t a = adler & 0xFFFFu;
  uint32_t b = adler >> 16;
  size_t i = 0;
  while (i < data.size()) {
    const size_t end = i + kBlock < data.size() ? i + kBlock : data.size();
    for (; i < end; ++i) {
      a += data[i];
      b += a;
    }
    a %= kMod;
    b %= kMod;
  }
  return (b << 16) | a;
}

}  // namespace blockrnn::train
