// Tests for the zlib/DEFLATE writer: round trips through an independent test
// inflater (and through the system zlib when available).
#include "train/deflate.h"

#include <gtest/gtest.h>

#include <random>

#include "inflate_for_tests.h"

#if defined(BLOCKRNN_TRAIN_HAVE_ZLIB)
#include <zlib.h>
#endif

namespace blockrnn::train {
namespace {

std::vector<std::vector<uint8_t>> sample_inputs() {
  std::vector<std::vector<uint8_t>> inputs;
  inputs.push_back({});
  inputs.push_back({42});
  inputs.push_back({'a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c', 'a', 'b', 'c'});
  std::mt19937 rng(7);
  std::vector<uint8_t> random(100000);
  for (auto& b : random) b = static_cast<uint8_t>(rng());
  inputs.push_back(random);
  std::vector<uint8_t> runs(200000, 0xFF);  // longer than one stored block
  for (size_t i = 0; i < runs.size(); i += 997) runs[i] = static_cast<uint8_t>(i);
  inputs.push_back(runs);
  std::vector<uint8_t> text;
  const std::string phrase = "And God said, Let there be light: and there was light. ";
  for (int i = 0; i < 500; ++i) {
    text.insert(text.end(), phrase.begin(), phrase.end());
    text.push_back(static_cast<uint8_t>('0' + i % 10));
  }
  inputs.push_back(text);
  std::vector<uint8_t> exact(65535 * 2, 'x');  // exact multiple of the stored block size
  inputs.push_back(exact);
  return inputs;
}

TEST(Deflate, RoundTripsThroughTestInflater) {
  for (DeflateMode mode : {DeflateMode::kStored, DeflateMode::kFixedHuffman}) {
    for (const auto& input : sample_inputs()) {
      const std::vector<uint8_t> z = zlib_compress(input, mode);
      ASSERT_GE(z.size(), 6u);
      EXPECT_EQ((z[0] * 256 + z[1]) % 31, 0);
      EXPECT_EQ(z[0] & 0x0F, 8);
      EXPECT_EQ(testing::zlib_decompress(z), input)
          << "mode " << static_cast<int>(mode) << " size " << input.size();
    }
  }
}

TEST(Deflate, StoredBlocksHaveExpectedLayout) {
  std::vector<uint8_t> input(70000, 'q');
  const std::vector<uint8_t> raw = deflate_raw(input, DeflateMode::kStored);
  // Two blocks: 65535 + 4465 bytes, each with a 5-byte header.
  ASSERT_EQ(raw.size(), input.size() + 10);
  EXPECT_EQ(raw[0], 0);  // not final, stored
  EXPECT_EQ(raw[1] | (raw[2] << 8), 65535);
  EXPECT_EQ(raw[5 + 65535], 1);  // final, stored
  EXPECT_EQ(raw[6 + 65535] | (raw[7 + 65535] << 8), 70000 - 65535);
  EXPECT_EQ(deflate_raw({}, DeflateMode::kStored), (std::vector<uint8_t>{1, 0, 0, 0xFF, 0xFF}));
}

TEST(Deflate, FixedHuffmanCompressesRepetitiveData) {
  std::vector<uint8_t> white(800 * 3 * 100, 0xFF);
  const auto z = zlib_compress(white, DeflateMode::kFixedHuffman);
  EXPECT_LT(z.size(), white.size() / 50);
  EXPECT_EQ(testing::zlib_decompress(z), white);
}

TEST(Deflate, IncompressibleDataFallsBackToStored) {
  std::mt19937 rng(3);
  std::vector<uint8_t> random(5000);
  for (auto& b : random) b = static_cast<uint8_t>(rng());
  const auto raw = deflate_raw(random, DeflateMode::kFixedHuffman);
  EXPECT_EQ(raw.size(), random.size() + 5);
  EXPECT_EQ(testing::inflate_raw(raw), random);
}

#if defined(BLOCKRNN_TRAIN_HAVE_ZLIB)
TEST(Deflate, SystemZlibAcceptsOutput) {
  for (DeflateMode mode : {DeflateMode::kStored, DeflateMode::kFixedHuffman}) {
    for (const auto& input : sample_inputs()) {
      const std::vector<uint8_t> z = zlib_compress(input, mode);
      std::vector<uint8_t> out(input.size() + 1);
      uLongf out_len = out.size();
      ASSERT_EQ(uncompress(out.data(), &out_len, z.data(), z.size()), Z_OK);
      out.resize(out_len);
      EXPECT_EQ(out, input);
    }
  }
}
#endif

}  // namespace
}  // namespace blockrnn::train
