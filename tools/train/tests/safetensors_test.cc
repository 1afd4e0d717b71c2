// Tests of the safetensors reader and writer: bit-exact round trips, the byte layout, rejection
// of every truncation, and a clear error (naming the file, the tensor and the field) for each
// malformed or hostile header: bad lengths, bad JSON, wrong types, unsupported dtypes, offsets
// out of range, overlapping or leaving holes, shapes that do not match their bytes.
#include "train/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "train/file_util.h"

namespace blockrnn::train {
namespace {

SafeTensors small_file() {
  SafeTensors f;
  f.tensors["embedding"] = {{3, 2}, {1.5f, -2.0f, 0.0f, -0.0f, 1e-40f, 3.25f}};
  f.tensors["scalar"] = {{}, {42.0f}};
  f.metadata["step"] = "7";
  return f;
}

SafeTensors rich_file() {
  SafeTensors f;
  NamedArray w{{64, 32}, {}};
  w.data.resize(64 * 32);
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = std::sin(static_cast<float>(i)) * 0.1f;
  f.tensors["layers.0.w"] = w;
  f.tensors["layers.1.w"] = w;
  // Special values must survive bit-exactly, including a NaN payload.
  f.tensors["special"] = {
      {6},
      {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
       std::bit_cast<float>(uint32_t{0x7FC01234}), std::numeric_limits<float>::denorm_min(), -0.0f,
       std::numeric_limits<float>::max()}};
  f.tensors["empty"] = {{0, 5}, {}};
  f.metadata["with nul and quote"] = std::string("a\0b\"\n", 5);
  f.metadata["unicode"] = "\xC3\xA9t\xC3\xA9";
  return f;
}

void expect_bit_identical(const SafeTensors& a, const SafeTensors& b) {
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
    parse_safetensors(bytes, "test.safetensors");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// A file image around a hand-written header and `data_bytes` zero bytes of data.
std::vector<uint8_t> file_with(const std::string& header, size_t data_bytes = 0) {
  std::vector<uint8_t> f;
  for (int i = 0; i < 8; ++i) f.push_back(static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i)));
  f.insert(f.end(), header.begin(), header.end());
  f.resize(f.size() + data_bytes, 0);
  return f;
}

TEST(SafeTensors, RoundTripIsBitExact) {
  for (const SafeTensors& f : {small_file(), rich_file(), SafeTensors{}}) {
    const std::string path = temp_path("roundtrip.safetensors");
    save_safetensors(path, f);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    expect_bit_identical(f, load_safetensors(path));
    EXPECT_EQ(read_file_bytes(path), serialize_safetensors(f));  // deterministic
    std::filesystem::remove(path);
  }
}

TEST(SafeTensors, Layout) {
  const auto bytes = serialize_safetensors(small_file());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  EXPECT_EQ(n % 8, 0u);  // padded so the data is aligned
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<ptrdiff_t>(n));
  EXPECT_EQ(
      header.rfind("{\"__metadata__\":{\"step\":\"7\"},"
                   "\"embedding\":{\"data_offsets\":[0,24],\"dtype\":\"F32\",\"shape\":[3,2]},"
                   "\"scalar\":{\"data_offsets\":[24,28],\"dtype\":\"F32\",\"shape\":[]}}",
                   0),
      0u)
      << header;
  EXPECT_EQ(header.find_first_not_of(' ', header.rfind('}') + 1), std::string::npos);
  ASSERT_EQ(bytes.size(), 8 + n + 28);
  float first = 0;
  std::memcpy(&first, bytes.data() + 8 + n, 4);  // little-endian (x86, ARM)
  EXPECT_EQ(first, 1.5f);
}

TEST(SafeTensors, InvalidUtf8MetadataIsReplaced) {
  SafeTensors f;
  f.metadata["corpus"] = "bad\xFF";
  const SafeTensors back = parse_safetensors(serialize_safetensors(f), "x");
  EXPECT_EQ(back.metadata.at("corpus"), "bad\xEF\xBF\xBD");  // U+FFFD
}

TEST(SafeTensors, EveryTruncationIsAnError) {
  const auto bytes = serialize_safetensors(small_file());
  for (size_t len = 0; len < bytes.size(); ++len) {
    const std::string error = error_of(std::span<const uint8_t>(bytes).first(len));
    EXPECT_FALSE(error.empty()) << "prefix of " << len << " bytes was accepted";
    EXPECT_NE(error.find("test.safetensors"), std::string::npos) << error;
  }
  EXPECT_NE(error_of({}).find("empty"), std::string::npos);
  const std::string path = temp_path("truncated.safetensors");
  write_file_atomically(path, std::span<const uint8_t>(bytes).first(20));
  try {
    load_safetensors(path);
    FAIL() << "truncated file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(SafeTensors, MissingOrUnreadableFile) {
  try {
    load_safetensors(temp_path("does-not-exist.safetensors"));
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_safetensors(::testing::TempDir()), std::runtime_error);  // a directory
  EXPECT_THROW(save_safetensors("/nonexistent-dir-blockrnn/x.safetensors", small_file()),
               std::runtime_error);
}

TEST(SafeTensors, HandWrittenHeaderParses) {
  // Another writer's choices: keys in any order, no padding, data not in name order.
  std::vector<uint8_t> f = file_with(R"({"b":{"shape":[1],"dtype":"F32","data_offsets":[0,4]},)"
                                     R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[4,12]}})",
                                     12);
  const size_t data = f.size() - 12;
  const float values[3] = {7.0f, 0.5f, -1.0f};
  std::memcpy(f.data() + data, values, sizeof values);
  const SafeTensors s = parse_safetensors(f, "x");
  EXPECT_TRUE(s.metadata.empty());
  EXPECT_EQ(s.tensors.at("b").data, (std::vector<float>{7.0f}));
  EXPECT_EQ(s.tensors.at("a").shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(s.tensors.at("a").data, (std::vector<float>{0.5f, -1.0f}));
}

TEST(SafeTensors, MalformedHeadersAreRejectedClearly) {
  struct Case {
    const char* what;
    std::vector<uint8_t> file;
    const char* expected;
  };
  auto t = [](const std::string& fields) { return "{\"w\":{" + fields + "}}"; };
  // One F32 tensor 'w' with this shape and these offsets, and `data` bytes of data.
  auto f32 = [&](const std::string& shape, const std::string& offsets, size_t data) {
    return file_with(t(R"("dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets),
                     data);
  };
  const std::string ok_fields = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  std::vector<uint8_t> huge_length(16, 0xFF);
  const std::string deep(100000, '[');
  std::vector<uint8_t> header_beyond_file = file_with("{}");
  header_beyond_file[0] = 200;
  const std::vector<Case> cases = {
      {"huge header length", huge_length, "above the limit"},
      {"header beyond the file", header_beyond_file, "truncated"},
      {"not JSON", file_with("{\"w\":"), "not valid JSON"},
      {"deep nesting", file_with(deep), "not valid JSON"},
      {"not an object", file_with("[1, 2]"), "must be a JSON object"},
      {"tensor not an object", file_with(R"({"w": 3})"), "tensor 'w' must be a JSON object"},
      {"missing dtype", file_with(t(R"("shape":[2],"data_offsets":[0,8])"), 8), "no 'dtype'"},
      {"unknown field", file_with(t(ok_fields + R"(,"extra":1)"), 8), "unknown field 'extra'"},
      {"unsupported dtype", file_with(t(R"("dtype":"F16","shape":[2],"data_offsets":[0,4])"), 4),
       "dtype 'F16' is not supported"},
      {"dtype not a string", file_with(t(R"("dtype":1,"shape":[2],"data_offsets":[0,8])"), 8),
       "'dtype' must be a string"},
      {"shape not an array", f32("2", "[0,8]", 8), "'shape' must be an array"},
      {"negative dim", f32("[-2]", "[0,8]", 8), "'shape' dimension must be a non-negative integer"},
      {"fractional dim", f32("[2.5]", "[0,8]", 8), "non-negative integer"},
      {"rank too large", f32("[1,1,1,1,1,1,1,1,1]", "[0,4]", 4), "at most 8 dimensions"},
      {"overflowing dims", f32("[4294967296,4294967296,4294967296]", "[0,4]", 4),
       "'shape' has more than"},
      {"offsets not a pair", f32("[2]", "[0]", 8), "'data_offsets' must be an array [begin, end]"},
      {"offsets out of range", f32("[2]", "[0,8]", 4),
       "tensor 'w': 'data_offsets' [0, 8] is outside the 4 bytes"},
      {"offsets reversed", f32("[0]", "[8,0]", 8), "is outside"},
      {"offsets past 2^64", f32("[2]", "[0,18446744073709551616]", 8), "non-negative integer"},
      {"shape vs bytes", f32("[3]", "[0,8]", 8), "span 8 bytes but 'shape' needs 12"},
      {"overlap",
       file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 12),
       "tensors 'a' and 'b' overlap"},
      {"hole",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                 12),
       "data bytes [4, 8) belong to no tensor"},
      {"trailing bytes", file_with(t(ok_fields), 9), "trailing data bytes"},
      {"metadata not an object", file_with(R"({"__metadata__":[1]})"),
       "'__metadata__' must be a JSON object"},
      {"metadata value not a string", file_with(R"({"__metadata__":{"step":7}})"),
       "metadata 'step' must be a string"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.file);
    EXPECT_NE(error.find("checkpoint 'test.safetensors': "), std::string::npos) << c.what;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.what << ": got \"" << error << "\"";
  }
}

TEST(SafeTensors, SaveValidatesInput) {
  auto expect_invalid = [](const SafeTensors& f) {
    EXPECT_THROW(serialize_safetensors(f), std::invalid_argument);
  };
  SafeTensors f = small_file();
  f.tensors["embedding"].data.pop_back();
  expect_invalid(f);
  f = small_file();
  f.tensors["neg"] = {{-1}, {}};
  expect_invalid(f);
  f = small_file();
  f.tensors[""] = {{1}, {1.0f}};
  expect_invalid(f);
  f = small_file();
  f.tensors["__metadata__"] = {{1}, {1.0f}};
  expect_invalid(f);
  f = small_file();
  f.tensors["rank9"] = {std::vector<int64_t>(9, 1), {1.0f}};
  expect_invalid(f);
  EXPECT_EQ((NamedArray{{2, 3, 4}, {}}).num_elements(), 24);
  EXPECT_EQ((NamedArray{{}, {}}).num_elements(), 1);
  EXPECT_THROW((NamedArray{{int64_t{1} << 40, int64_t{1} << 40}, {}}).num_elements(),
               std::invalid_argument);
}

}  // namespace
}  // namespace blockrnn::train
