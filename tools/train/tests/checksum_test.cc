// Tests for CRC-32 and Adler-32 against published check values and a naive
// reference implementation.
#include "train/checksum.h"

#include <gtest/gtest.h>

#include <vector>

namespace blockrnn::train {
namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(Crc32, KnownValues) {
  EXPECT_EQ(crc32(std::string_view("")), 0u);
  EXPECT_EQ(crc32(std::string_view("123456789")), 0xCBF43926u);
  EXPECT_EQ(crc32(std::string_view("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
  // CRC of the PNG IEND chunk type, as seen at the end of every PNG file.
  EXPECT_EQ(crc32(std::string_view("IEND")), 0xAE426082u);
}

TEST(Crc32, Incremental) {
  const std::string_view all = "hello, incremental world";
  for (size_t split = 0; split <= all.size(); ++split) {
    EXPECT_EQ(crc32(all.substr(split), crc32(all.substr(0, split))), crc32(all)) << split;
  }
}

uint32_t naive_adler32(std::span<const uint8_t> data) {
  uint64_t a = 1, b = 0;
  for (uint8_t x : data) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  return static_cast<uint32_t>((b << 16) | a);
}

TEST(Adler32, KnownValues) {
  EXPECT_EQ(adler32(bytes_of("")), 1u);
  EXPECT_EQ(adler32(bytes_of("Wikipedia")), 0x11E60398u);
  EXPECT_EQ(adler32(bytes_of("abc")), 0x024D0127u);
}

TEST(Adler32, LongInputsMatchNaiveModulo) {
  // All-0xFF input maximises the sums, exercising the deferred modulo.
  std::vector<uint8_t> ff(200000, 0xFF);
  EXPECT_EQ(adler32(ff), naive_adler32(ff));
  std::vector<uint8_t> ramp(123457);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<uint8_t>(i * 7 + (i >> 8));
  EXPECT_EQ(adler32(ramp), naive_adler32(ramp));
  // Incremental over an uneven split.
  const std::span<const uint8_t> all(ramp);
  EXPECT_EQ(adler32(all.subspan(777), adler32(all.subspan(0, 777))), adler32(all));
}

}  // namespace
}  // namespace blockrnn::train
