// Tests for the checkpoint format: bit-exact round trips, rejection of every
// truncation and single-byte corruption, wrong magic/version, malformed
// payloads with a valid CRC, and validation on save.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "train/checksum.h"
#include "train/file_util.h"

namespace blockrnn::train {
namespace {

Checkpoint small_checkpoint() {
  Checkpoint c;
  c.cell = "gru";
  c.hidden = 3;
  c.layers = 1;
  c.vocabulary = "\nab";
  c.vocab_size = 3;
  c.tensors["embedding"] = {{3, 2}, {1.5f, -2.0f, 0.0f, -0.0f, 1e-40f, 3.25f}};
  c.tensors["scalar"] = {{}, {42.0f}};
  c.metadata["step"] = "7";
  return c;
}

Checkpoint rich_checkpoint() {
  Checkpoint c;
  c.cell = "lstm";
  c.hidden = 16;
  c.layers = 2;
  for (int b = 32; b < 127; ++b) c.vocabulary.push_back(static_cast<char>(b));
  c.vocab_size = static_cast<int64_t>(c.vocabulary.size());
  NamedArray w{{4 * 16, 16 + 16}, {}};
  w.data.resize(64 * 32);
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = std::sin(static_cast<float>(i)) * 0.1f;
  c.tensors["layer0/kernel"] = w;
  c.tensors["layer1/kernel"] = w;
  // Special values must survive bit-exactly, including a NaN payload.
  c.tensors["special"] = {
      {6},
      {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
       std::bit_cast<float>(uint32_t{0x7FC01234}), std::numeric_limits<float>::denorm_min(), -0.0f,
       std::numeric_limits<float>::max()}};
  c.tensors["empty"] = {{0, 5}, {}};
  c.metadata["adam_t"] = "1234";
  c.metadata["binary"] = std::string("a\0b\xff", 4);
  c.metadata["seed"] = "42";
  return c;
}

void expect_bit_identical(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.cell, b.cell);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.vocabulary, b.vocabulary);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    const NamedArray& u = b.tensors.at(name);
    EXPECT_EQ(t.shape, u.shape) << name;
    ASSERT_EQ(t.data.size(), u.data.size()) << name;
    if (!t.data.empty()) {  // memcmp must not see the null data() of an empty vector
      EXPECT_EQ(std::memcmp(t.data.data(), u.data.data(), t.data.size() * sizeof(float)), 0)
          << name;
    }
  }
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

std::string error_of(std::span<const uint8_t> bytes) {
  try {
    parse_checkpoint(bytes, "test.ckpt");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, RoundTripIsBitExact) {
  for (const Checkpoint& c : {small_checkpoint(), rich_checkpoint()}) {
    const std::string path = temp_path("roundtrip.ckpt");
    save_checkpoint(path, c);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    expect_bit_identical(c, load_checkpoint(path));
    // Serialisation is deterministic.
    EXPECT_EQ(read_file_bytes(path), serialize_checkpoint(c));
    std::filesystem::remove(path);
  }
}

TEST(Checkpoint, HeaderLayout) {
  const auto bytes = serialize_checkpoint(small_checkpoint());
  ASSERT_GE(bytes.size(), 24u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "BRNNCKPT");
  EXPECT_EQ(bytes[8], 1);  // version 1, little-endian
  EXPECT_EQ(bytes[9] | bytes[10] | bytes[11], 0);
  uint64_t payload = 0;
  for (int i = 0; i < 8; ++i) payload |= static_cast<uint64_t>(bytes[12 + i]) << (8 * i);
  EXPECT_EQ(payload, bytes.size() - 24);
  uint32_t crc = 0;
  for (int i = 0; i < 4; ++i) crc |= static_cast<uint32_t>(bytes[bytes.size() - 4 + i]) << (8 * i);
  EXPECT_EQ(crc, crc32(std::span<const uint8_t>(bytes).subspan(20, payload)));
}

TEST(Checkpoint, EveryTruncationIsAnError) {
  const auto bytes = serialize_checkpoint(small_checkpoint());
  for (size_t len = 0; len < bytes.size(); ++len) {
    const std::string error = error_of(std::span<const uint8_t>(bytes).first(len));
    EXPECT_FALSE(error.empty()) << "prefix of " << len << " bytes was accepted";
    EXPECT_NE(error.find("test.ckpt"), std::string::npos) << error;
  }
  // Also through the file API.
  const std::string path = temp_path("truncated.ckpt");
  write_file_atomically(path, std::span<const uint8_t>(bytes).first(bytes.size() - 1));
  try {
    load_checkpoint(path);
    FAIL() << "truncated file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Checkpoint, EverySingleByteCorruptionIsAnError) {
  const auto original = serialize_checkpoint(small_checkpoint());
  for (size_t i = 0; i < original.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      auto bytes = original;
      bytes[i] ^= flip;
      EXPECT_FALSE(error_of(bytes).empty()) << "flip 0x" << std::hex << int{flip} << " at " << i;
    }
  }
}

TEST(Checkpoint, PayloadCorruptionReportsCrcMismatch) {
  auto bytes = serialize_checkpoint(rich_checkpoint());
  bytes[bytes.size() / 2] ^= 0x10;
  const std::string error = error_of(bytes);
  EXPECT_NE(error.find("CRC-32 mismatch"), std::string::npos) << error;
}

TEST(Checkpoint, WrongMagicAndVersion) {
  auto bytes = serialize_checkpoint(small_checkpoint());
  auto bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_NE(error_of(bad_magic).find("bad magic"), std::string::npos);
  const std::string png = "\x89PNG\r\n\x1a\n and more";
  EXPECT_NE(
      error_of(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(png.data()), png.size()))
          .find("bad magic"),
      std::string::npos);
  auto bad_version = bytes;
  bad_version[8] = 2;
  const std::string error = error_of(bad_version);
  EXPECT_NE(error.find("unsupported format version 2"), std::string::npos) << error;
  EXPECT_NE(error_of({}).find("empty"), std::string::npos);
  auto trailing = bytes;
  trailing.push_back(0);
  EXPECT_NE(error_of(trailing).find("trailing"), std::string::npos) << error_of(trailing);
}

TEST(Checkpoint, MissingOrUnreadableFile) {
  try {
    load_checkpoint(temp_path("does-not-exist.ckpt"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_checkpoint(::testing::TempDir()), std::runtime_error);  // a directory
  EXPECT_THROW(save_checkpoint("/nonexistent-dir-blockrnn/x.ckpt", small_checkpoint()),
               std::runtime_error);
}

// Builds a file around a hand-written payload with a correct CRC, to reach the
// payload validation behind the checksum.
class PayloadBuilder {
 public:
  PayloadBuilder& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) p_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  PayloadBuilder& i64(int64_t v) {
    for (int i = 0; i < 8; ++i)
      p_.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
    return *this;
  }
  PayloadBuilder& str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    p_.insert(p_.end(), s.begin(), s.end());
    return *this;
  }
  PayloadBuilder& header(const std::string& cell = "lstm", int64_t hidden = 4, int64_t layers = 1,
                         int64_t vocab_size = 2, const std::string& vocab = "ab") {
    return str(cell).i64(hidden).i64(layers).i64(vocab_size).str(vocab);
  }
  std::vector<uint8_t> file() const {
    std::vector<uint8_t> f(kCheckpointMagic, kCheckpointMagic + 8);
    for (int i = 0; i < 4; ++i) f.push_back(static_cast<uint8_t>(kCheckpointVersion >> (8 * i)));
    for (int i = 0; i < 8; ++i) f.push_back(static_cast<uint8_t>(uint64_t{p_.size()} >> (8 * i)));
    f.insert(f.end(), p_.begin(), p_.end());
    const uint32_t crc = crc32(p_);
    for (int i = 0; i < 4; ++i) f.push_back(static_cast<uint8_t>(crc >> (8 * i)));
    return f;
  }

 private:
  std::vector<uint8_t> p_;
};

TEST(Checkpoint, MinimalHandBuiltFileParses) {
  const auto f = PayloadBuilder()
                     .header()
                     .u32(0)
                     .u32(1)
                     .str("w")
                     .u32(2)
                     .i64(1)
                     .i64(2)
                     .u32(std::bit_cast<uint32_t>(0.5f))
                     .u32(std::bit_cast<uint32_t>(-1.0f))
                     .file();
  const Checkpoint c = parse_checkpoint(f);
  EXPECT_EQ(c.cell, "lstm");
  EXPECT_EQ(c.tensors.at("w").shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.tensors.at("w").data, (std::vector<float>{0.5f, -1.0f}));
}

TEST(Checkpoint, MalformedPayloadsWithValidCrc) {
  struct Case {
    const char* what;
    std::vector<uint8_t> file;
    const char* expected;
  };
  const int64_t big = int64_t{1} << 40;
  const std::vector<Case> cases = {
      {"bad cell", PayloadBuilder().header("rnn").u32(0).u32(0).file(), "cell"},
      {"zero hidden", PayloadBuilder().header("gru", 0).u32(0).u32(0).file(), "hidden"},
      {"negative layers", PayloadBuilder().header("gru", 4, -1).u32(0).u32(0).file(), "layer"},
      {"vocab size mismatch", PayloadBuilder().header("gru", 4, 1, 3, "ab").u32(0).u32(0).file(),
       "vocab"},
      {"unsorted vocabulary", PayloadBuilder().header("gru", 4, 1, 2, "ba").u32(0).u32(0).file(),
       "increasing"},
      {"huge string length", PayloadBuilder().u32(0xFFFFFFF0u).file(), "cell"},
      {"huge metadata count", PayloadBuilder().header().u32(0x7FFFFFFF).file(), "metadata count"},
      {"duplicate metadata",
       PayloadBuilder().header().u32(2).str("k").str("1").str("k").str("2").u32(0).file(),
       "duplicated"},
      {"empty tensor name", PayloadBuilder().header().u32(0).u32(1).str("").u32(0).u32(0).file(),
       "empty"},
      {"rank too large", PayloadBuilder().header().u32(0).u32(1).str("w").u32(9).file(), "rank"},
      {"negative dim", PayloadBuilder().header().u32(0).u32(1).str("w").u32(1).i64(-4).file(),
       "negative"},
      {"overflowing dims",
       PayloadBuilder().header().u32(0).u32(1).str("w").u32(3).i64(big).i64(big).i64(big).file(),
       "overflow"},
      {"data beyond payload",
       PayloadBuilder().header().u32(0).u32(1).str("w").u32(1).i64(1000).u32(0).file(), "floats"},
      {"tensor out of order",
       PayloadBuilder().header().u32(0).u32(2).str("b").u32(0).u32(0).str("a").u32(0).u32(0).file(),
       "out of order"},
      {"trailing payload bytes", PayloadBuilder().header().u32(0).u32(0).u32(7).file(),
       "unexpected bytes"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.file);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.what << ": got \"" << error << "\"";
  }
}

TEST(Checkpoint, SaveValidatesInput) {
  auto expect_invalid = [](const Checkpoint& c) {
    EXPECT_THROW(serialize_checkpoint(c), std::invalid_argument);
  };
  Checkpoint c = small_checkpoint();
  c.cell = "LSTM";
  expect_invalid(c);
  c = small_checkpoint();
  c.vocab_size = 4;
  expect_invalid(c);
  c = small_checkpoint();
  c.tensors["embedding"].data.pop_back();
  expect_invalid(c);
  c = small_checkpoint();
  c.tensors["neg"] = {{-1}, {}};
  expect_invalid(c);
  c = small_checkpoint();
  c.tensors[""] = {{1}, {1.0f}};
  expect_invalid(c);
  c = small_checkpoint();
  c.tensors["rank9"] = {std::vector<int64_t>(9, 1), {1.0f}};
  expect_invalid(c);
  c = small_checkpoint();
  c.metadata[""] = "x";
  expect_invalid(c);
  EXPECT_EQ((NamedArray{{2, 3, 4}, {}}).num_elements(), 24);
  EXPECT_EQ((NamedArray{{}, {}}).num_elements(), 1);
  EXPECT_THROW((NamedArray{{int64_t{1} << 40, int64_t{1} << 40}, {}}).num_elements(),
               std::invalid_argument);
}

}  // namespace
}  // namespace blockrnn::train
