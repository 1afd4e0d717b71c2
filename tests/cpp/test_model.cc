// blockrnn::Model (include/blockrnn/model.h): hostile and broken model files are refused with a
// message naming the file and the field, before anything is allocated for the tensors; the
// forward's argument checks; and a small model computed against its layer object. (Files
// written by the Python converters, compared with Keras and PyTorch, are tested in
// tests/python/test_model_cpp.py through `blockrnn run`.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "blockrnn/blockrnn.h"
#include "blockrnn/model.h"

namespace {

using blockrnn::DType;
using blockrnn::Error;
using blockrnn::ErrorCode;
using blockrnn::Model;
using blockrnn::Shape;
using blockrnn::Tensor;
using blockrnn::TensorView;
using nlohmann::json;

// A one-layer GRU (reset-after) model: input 2, hidden 3.
json gru_config() {
  return {{"format", "blockrnn-model"},
          {"version", 1},
          {"dtype", "float32"},
          {"input_size", 2},
          {"return_sequences", true},
          {"masking", nullptr},
          {"layers",
           {{{"kind", "BlockGRUResetAfter"},
             {"hidden_size", 3},
             {"directions", 1},
             {"merge", nullptr},
             {"go_backwards", false},
             {"padded_output", "zero"}}}},
          {"source", {{"framework", "test"}}}};
}

struct Param {
  std::string name;
  std::vector<std::int64_t> shape;
};
const std::vector<Param> kGruParams = {{"layers.0.0.b_h", {9}},
                                       {"layers.0.0.b_i", {9}},
                                       {"layers.0.0.w_h", {3, 9}},
                                       {"layers.0.0.w_i", {2, 9}}};

// The bytes of a safetensors file: header JSON text (as given) and data.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[k] = static_cast<char>(std::uint64_t(header.size()) >> (8 * k));
  return out + header + data;
}

// A well-formed model file of `config` with float32 tensors `params` (values 0.01·k).
std::string model_file(const json& config, const std::vector<Param>& params,
                       json* header_out = nullptr) {
  json header = {{"__metadata__", {{"blockrnn", config.dump()}}}};
  std::string data;
  for (const Param& p : params) {
    std::int64_t n = 1;
    for (std::int64_t d : p.shape) n *= d;
    header[p.name] = {
        {"dtype", "F32"}, {"shape", p.shape}, {"data_offsets", {data.size(), data.size() + 4 * n}}};
    for (std::int64_t k = 0; k < n; ++k) {
      const float v = 0.01f * static_cast<float>(k % 17) - 0.05f;
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  if (header_out) *header_out = header;
  return file_bytes(header.dump(), data);
}

// The message of the Error(kInvalidArgument) loading `bytes` throws.
std::string load_error(const std::string& bytes) {
  try {
    Model::load_buffer(bytes.data(), bytes.size(), "m.safetensors");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "loaded";
  return "";
}

#define EXPECT_LOAD_ERROR(bytes, text) \
  EXPECT_NE(load_error(bytes).find(text), std::string::npos) << load_error(bytes)

TEST(ModelFile, LoadsAGoodFile) {
  const std::string bytes = model_file(gru_config(), kGruParams);
  Model m = Model::load_buffer(bytes.data(), bytes.size(), "m");
  EXPECT_EQ(m.input_size(), 2);
  EXPECT_EQ(m.output_size(), 3);
  EXPECT_EQ(m.num_states(), 1);
  EXPECT_EQ(m.output_shape(5, 4), (Shape{5, 4, 3}));
  EXPECT_EQ(m.weight(0, 0, "w_h").shape, (Shape{3, 9}));
  EXPECT_NE(m.summary().find("layer 0: BlockGRUResetAfter H=3"), std::string::npos);
}

TEST(ModelFile, TruncatedAndShortFiles) {
  EXPECT_LOAD_ERROR(std::string("abc"), "m.safetensors: header: the file has 3 bytes");
  const std::string bytes = model_file(gru_config(), kGruParams);
  // Cut inside the header, and inside the data.
  EXPECT_LOAD_ERROR(bytes.substr(0, 40), "header: declares a header of");
  EXPECT_LOAD_ERROR(bytes.substr(0, bytes.size() - 4),
                    "is outside the 248 data bytes of the file (truncated?)");
  // A header length near 2^64.
  std::string huge = bytes;
  std::memset(huge.data(), 0xff, 8);
  EXPECT_LOAD_ERROR(huge, "header: declares a header of 18446744073709551615 bytes");
  EXPECT_LOAD_ERROR(bytes + "xxxx", "data: the tensors cover 252 bytes but 256 follow");
}

TEST(ModelFile, BadJson) {
  EXPECT_LOAD_ERROR(file_bytes("{\"a\": ", ""), "header: is not valid JSON");
  EXPECT_LOAD_ERROR(file_bytes("{\"a\": 1, \"a\": 2}", ""), "duplicate key \"a\"");
  EXPECT_LOAD_ERROR(file_bytes("{\"a\": NaN}", ""), "header: is not valid JSON");
  EXPECT_LOAD_ERROR(file_bytes("[1]", ""), "header: must be a JSON object, got array");
  EXPECT_LOAD_ERROR(file_bytes(std::string(100, '[') + std::string(100, ']'), ""),
                    "nests deeper than 64 levels");
  EXPECT_LOAD_ERROR(file_bytes("\xEF\xBB\xBF{}", ""), "byte order mark");
  EXPECT_LOAD_ERROR(file_bytes("{\"a\": \"\xff\"}", ""), "header: is not valid JSON");
  EXPECT_LOAD_ERROR(file_bytes("{}", ""), "__metadata__: is missing (not a blockrnn model file)");
  EXPECT_LOAD_ERROR(file_bytes("{\"__metadata__\": {\"x\": \"1\"}}", ""),
                    "__metadata__.blockrnn: is missing (not a blockrnn model file; metadata "
                    "keys: 'x')");
  EXPECT_LOAD_ERROR(file_bytes("{\"__metadata__\": {\"blockrnn\": \"{\\\"a\\\":\"}}", ""),
                    "__metadata__.blockrnn: is not valid JSON");
}

TEST(ModelFile, HostileTensorEntries) {
  json header;
  const std::string good = model_file(gru_config(), kGruParams, &header);
  const std::string data = good.substr(good.size() - 252);
  auto with = [&](const std::string& name, const json& entry) {
    json h = header;
    h[name] = entry;
    return file_bytes(h.dump(), data);
  };
  // A shape of 2^80 elements declared over 36 bytes: refused, nothing allocated.
  EXPECT_LOAD_ERROR(
      with("layers.0.0.b_h", {{"dtype", "F32"},
                              {"shape", {std::int64_t(1) << 40, std::int64_t(1) << 40}},
                              {"data_offsets", {0, 36}}}),
      "tensor 'layers.0.0.b_h'.data_offsets: span 36 bytes, but shape "
      "[1099511627776, 1099511627776] of F32 needs at least 2^64");
  EXPECT_LOAD_ERROR(
      with("layers.0.0.b_h", {{"dtype", "F32"}, {"shape", {-9}}, {"data_offsets", {0, 36}}}),
      "tensor 'layers.0.0.b_h'.shape: must be a list of at most 8 non-negative "
      "integers, got [-9]");
  EXPECT_LOAD_ERROR(
      with("layers.0.0.b_h", {{"dtype", "BF16"}, {"shape", {9}}, {"data_offsets", {0, 36}}}),
      "tensor 'layers.0.0.b_h'.dtype: must be F32 or F64, got \"BF16\"");
  EXPECT_LOAD_ERROR(with("layers.0.0.b_h", {{"dtype", "F32"}, {"shape", {9}}}),
                    "must be an object with exactly dtype, shape and data_offsets");
  EXPECT_LOAD_ERROR(
      with("layers.0.0.b_h", {{"dtype", "F32"}, {"shape", {9}}, {"data_offsets", {0, 1000000}}}),
      "tensor 'layers.0.0.b_h'.data_offsets: [0,1000000] is outside the 252 data "
      "bytes");
  // Two tensors over the same bytes (overlap) leave a gap elsewhere.
  EXPECT_LOAD_ERROR(
      with("layers.0.0.b_i", {{"dtype", "F32"}, {"shape", {9}}, {"data_offsets", {0, 36}}}),
      "(the tensors' bytes must follow each other without gap or overlap)");
}

TEST(ModelFile, TensorsAgainstTheConfiguration) {
  std::vector<Param> missing(kGruParams.begin(), kGruParams.end() - 1);
  EXPECT_LOAD_ERROR(model_file(gru_config(), missing), "tensor 'layers.0.0.w_i': is missing");
  std::vector<Param> extra = kGruParams;
  extra.push_back({"layers.0.1.w_i", {2, 9}});
  EXPECT_LOAD_ERROR(model_file(gru_config(), extra),
                    "tensor 'layers.0.1.w_i': is not a parameter of the configured layers");
  std::vector<Param> wrong = kGruParams;
  wrong[2].shape = {3, 8};
  EXPECT_LOAD_ERROR(model_file(gru_config(), wrong),
                    "tensor 'layers.0.0.w_h'.shape: must be [3, 9] (from the configuration), "
                    "got [3, 8]");
  json f64 = gru_config();
  f64["dtype"] = "float64";
  EXPECT_LOAD_ERROR(model_file(f64, kGruParams),
                    "tensor 'layers.0.0.w_i'.dtype: must be F64 (the model's dtype is float64), "
                    "got F32");
}

TEST(ModelFile, Configuration) {
  auto error_of = [](const std::function<void(json&)>& edit) {
    json c = gru_config();
    edit(c);
    return load_error(model_file(c, kGruParams));
  };
  EXPECT_NE(error_of([](json& c) {
              c["version"] = 2;
            }).find("m.safetensors: version: must be 1 (this blockrnn reads version 1), got 2"),
            std::string::npos);
  EXPECT_NE(
      error_of([](json& c) { c["extra"] = 1; }).find("extra: is not a field of format version 1"),
      std::string::npos);
  EXPECT_NE(error_of([](json& c) { c.erase("source"); }).find("source: is missing"),
            std::string::npos);
  EXPECT_NE(error_of([](json& c) {
              c["input_size"] = true;
            }).find("input_size: must be an integer >= 1, got true"),
            std::string::npos);
  EXPECT_NE(error_of([](json& c) {
              c["layers"][0]["merge"] = "sum";
            }).find("layers[0].merge: must be null for a layer of 1 direction, got \"sum\""),
            std::string::npos);
  EXPECT_NE(error_of([](json& c) {
              c["layers"][0]["forget_bias"] = 0;
            }).find("layers[0].forget_bias: is not a field of a BlockGRUResetAfter layer"),
            std::string::npos);
  EXPECT_NE(error_of([](json& c) {
              c["layers"][0]["padded_output"] = "keep";
            }).find("layers[0].padded_output: must be one of zero, hold, got \"keep\""),
            std::string::npos);
  EXPECT_NE(error_of([](json& c) {
              c["masking"] = {{"mask_value", "0"}};
            }).find("masking.mask_value: must be a finite number"),
            std::string::npos);
  EXPECT_NE(error_of([](json& c) {
              c["layers"][0] = {
                  {"kind", "BlockLSTMV2"}, {"hidden_size", 3},      {"directions", 1},
                  {"merge", nullptr},      {"go_backwards", false}, {"padded_output", "zero"},
                  {"forget_bias", 1.0},    {"cell_clip", nullptr},  {"use_peephole", false}};
            }).find("layers[0].forget_bias: must be 0 for BlockLSTMV2"),
            std::string::npos);
}

TEST(ModelFile, NonFiniteWeights) {
  json header;
  std::string bytes = model_file(gru_config(), kGruParams, &header);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + bytes.size() - 4, &nan, 4);  // the last value of w_i
  EXPECT_LOAD_ERROR(bytes, "tensor 'layers.0.0.w_i': holds NaN or infinite values");
}

TEST(ModelFile, MemoryLimit) {
  const std::string bytes = model_file(gru_config(), kGruParams);
  blockrnn::set_memory_limit(500);  // the 252 data bytes need about 756 once packed
  try {
    Model::load_buffer(bytes.data(), bytes.size(), "m");
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("m: data: the weights (252 bytes)"), std::string::npos)
        << e.what();
  }
  blockrnn::set_memory_limit(0);
  Model m = Model::load_buffer(bytes.data(), bytes.size(), "m");
  blockrnn::set_memory_limit(100000);
  Tensor x(DType::kFloat32, {1000, 100, 2});
  try {
    m.forward(x.view());
    ADD_FAILURE() << "ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
  }
  blockrnn::set_memory_limit(0);
}

TEST(ModelFile, CannotOpen) {
  try {
    Model::load("/nonexistent/m.safetensors");
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/m.safetensors: cannot open"),
              std::string::npos);
  }
}

// The model's forward equals its layer object's on the same weights, read from a file.
TEST(ModelForward, MatchesTheLayerObjectAndChecksItsArguments) {
  const std::string bytes = model_file(gru_config(), kGruParams);
  const std::string path = ::testing::TempDir() + "blockrnn_test_model.safetensors";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  Model m = Model::load(path);
  std::remove(path.c_str());
  const std::int64_t T = 4, B = 2;
  Tensor x(DType::kFloat32, {T, B, 2}), h0(DType::kFloat32, {B, 3});
  for (std::int64_t e = 0; e < x.num_elements(); ++e) x.data_as<float>()[e] = 0.1f * (e % 7) - 0.3f;
  for (std::int64_t e = 0; e < h0.num_elements(); ++e) h0.data_as<float>()[e] = 0.2f * e - 0.5f;
  const std::int64_t lengths[B] = {4, 2};
  const TensorView seq(lengths, Shape{B});
  const TensorView init[] = {h0.view()};
  const blockrnn::ModelResult r = m.forward(x.view(), seq, init);

  blockrnn::GRUResetAfterLayer layer({2, 3, DType::kFloat32, T, B});
  layer.set_weights(m.weight(0, 0, "w_i"), m.weight(0, 0, "w_h"), m.weight(0, 0, "b_i"),
                    m.weight(0, 0, "b_h"));
  Tensor r_(DType::kFloat32, {T, B, 3}), u(DType::kFloat32, {T, B, 3}),
      n(DType::kFloat32, {T, B, 3}), hn(DType::kFloat32, {T, B, 3}), h(DType::kFloat32, {T, B, 3});
  blockrnn::GRULayerInputs in;
  in.x = x.view();
  in.h_prev = h0.view();
  in.seq_lengths = seq;
  layer.forward(in, {r_.mutable_view(), u.mutable_view(), n.mutable_view(), hn.mutable_view(),
                     h.mutable_view()});
  for (std::int64_t e = 0; e < h.num_elements(); ++e) {
    EXPECT_EQ(r.y.data_as<float>()[e], h.data_as<float>()[e]) << e;  // the same kernel
  }
  for (std::int64_t j = 0; j < 3; ++j) {
    EXPECT_EQ(r.final_states[0].data_as<float>()[j], h.data_as<float>()[(3 * B + 0) * 3 + j]);
    EXPECT_EQ(r.final_states[0].data_as<float>()[3 + j], h.data_as<float>()[(1 * B + 1) * 3 + j]);
  }

  auto forward_error = [&](TensorView xv, TensorView sl, std::span<const TensorView> states) {
    try {
      m.forward(xv, sl, states);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("ran");
  };
  Tensor x3(DType::kFloat32, {T, B, 3});
  EXPECT_EQ(forward_error(x3.view(), {}, {}),
            "Model.forward: x must have shape [T, B, 2] (time, batch, input_size), got [4, 2, 3]");
  Tensor x64(DType::kFloat64, {T, B, 2});
  EXPECT_EQ(forward_error(x64.view(), {}, {}),
            "Model.forward: x must have dtype float32 (the model's), got float64");
  const std::int64_t bad[B] = {5, 0};
  EXPECT_EQ(forward_error(x.view(), TensorView(bad, Shape{B}), {}),
            "Model.forward: seq_lengths must be in [0, 4] (T), got seq_lengths[0] = 5");
  Tensor h_bad(DType::kFloat32, {B, 4});
  const TensorView bad_init[] = {h_bad.view()};
  EXPECT_EQ(forward_error(x.view(), {}, bad_init),
            "Model.forward: initial_states[0] (layer 0, direction 0, h) must be float32 [2, 3] "
            "(batch_size, hidden_size), got float32 [2, 4]");
  const TensorView two[] = {h0.view(), h0.view()};
  EXPECT_EQ(forward_error(x.view(), {}, two),
            "Model.forward: initial_states must hold 1 views (one per state, num_states()) or "
            "none, got 2");
}

// Past 2^16 steps (the bound of the layer objects made at load) a call makes its own: the same
// results as a layer object created for the call.
TEST(ModelForward, LongSequencePastTheLoadBound) {
  const std::string bytes = model_file(gru_config(), kGruParams);
  Model m = Model::load_buffer(bytes.data(), bytes.size(), "m");
  const std::int64_t T = (std::int64_t(1) << 16) + 3, B = 1;
  Tensor x(DType::kFloat32, {T, B, 2}), h0(DType::kFloat32, {B, 3});
  for (std::int64_t e = 0; e < x.num_elements(); ++e) x.data_as<float>()[e] = 0.1f * (e % 7) - 0.3f;
  const blockrnn::ModelResult r = m.forward(x.view());
  blockrnn::GRUResetAfterLayer layer({2, 3, DType::kFloat32, T, B});
  layer.set_weights(m.weight(0, 0, "w_i"), m.weight(0, 0, "w_h"), m.weight(0, 0, "b_i"),
                    m.weight(0, 0, "b_h"));
  std::vector<Tensor> out;
  for (int k = 0; k < 5; ++k) out.emplace_back(DType::kFloat32, Shape{T, B, 3});
  blockrnn::GRULayerInputs in;
  in.x = x.view();
  in.h_prev = h0.view();
  layer.forward(in, {out[0].mutable_view(), out[1].mutable_view(), out[2].mutable_view(),
                     out[3].mutable_view(), out[4].mutable_view()});
  EXPECT_EQ(std::memcmp(r.y.data(), out[4].data(), out[4].num_bytes()), 0);
}

// Random corruptions of a good file (bytes overwritten, the file cut short) load or are refused
// with an Error: never a crash, a hang or another exception.
TEST(ModelFile, CorruptedFilesLoadOrAreRefused) {
  const std::string good = model_file(gru_config(), kGruParams);
  std::mt19937 rng(24);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      bytes[rng() % bytes.size()] = static_cast<char>(rng() % 256);
    }
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    try {
      Model m = Model::load_buffer(bytes.data(), bytes.size(), "m");
      Tensor x(DType::kFloat32, {3, 2, m.input_size()});
      m.forward(x.view());
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kInvalidArgument ||
                  e.code() == ErrorCode::kResourceExhausted)
          << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 1000);  // most corruptions break something the reader checks
}

// save_tensors / load_tensors: float32, float64 and int64 round trip; a damaged file is refused.
TEST(Safetensors, RoundTripAndDamage) {
  Tensor a(DType::kFloat32, {2, 3}), b(DType::kFloat64, {4}), c(DType::kInt64, {2}),
      empty(DType::kFloat32, {0, 5});
  for (std::int64_t e = 0; e < 6; ++e) a.data_as<float>()[e] = 0.5f * e - 1;
  for (std::int64_t e = 0; e < 4; ++e) b.data_as<double>()[e] = 1.0 / (e + 3);
  c.data_as<std::int64_t>()[0] = 7;
  c.data_as<std::int64_t>()[1] = -(std::int64_t(1) << 40);
  const std::string path = ::testing::TempDir() + "blockrnn_test_tensors.safetensors";
  blockrnn::save_tensors(
      path, {{"x", a.view()}, {"b", b.view()}, {"len", c.view()}, {"e", empty.view()}});
  std::map<std::string, Tensor> got = blockrnn::load_tensors(path);
  ASSERT_EQ(got.size(), 4u);
  for (const auto& [name, want] :
       std::map<std::string, const Tensor*>{{"x", &a}, {"b", &b}, {"len", &c}, {"e", &empty}}) {
    EXPECT_EQ(got.at(name).dtype(), want->dtype()) << name;
    EXPECT_EQ(got.at(name).shape(), want->shape()) << name;
    EXPECT_EQ(std::memcmp(got.at(name).data(), want->data(), want->num_bytes()), 0) << name;
  }
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fclose(f);
  ASSERT_EQ(::truncate(path.c_str(), size - 1), 0);
  try {
    blockrnn::load_tensors(path);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": "), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// Raw bytes of a small safetensors file whose header is `json` and which has `data` bytes.
void write_raw_safetensors(const std::string& path, const std::string& json, std::size_t data) {
  std::string text = json;
  text.append((8 - text.size() % 8) % 8, ' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  unsigned char len[8];
  for (int k = 0; k < 8; ++k) len[k] = static_cast<unsigned char>(text.size() >> (8 * k));
  std::fwrite(len, 1, 8, f);
  std::fwrite(text.data(), 1, text.size(), f);
  const std::string zeros(data, '\0');
  std::fwrite(zeros.data(), 1, zeros.size(), f);
  std::fclose(f);
}

// save_tensors with metadata / load_tensor_file: the metadata round trips (bad UTF-8 replaced
// by U+FFFD, so the header stays JSON), a non-string value is refused by key, and names the
// header would read back as something else are refused on save.
TEST(Safetensors, MetadataRoundTripAndRefusals) {
  Tensor a(DType::kFloat32, {2});
  a.data_as<float>()[0] = 1.5f;
  a.data_as<float>()[1] = -0.0f;
  const std::string path = ::testing::TempDir() + "blockrnn_test_metadata.safetensors";
  blockrnn::save_tensors(path, {{"a", a.view()}},
                         {{"format", "demo"}, {"bytes", "caf\xC3\xA9 \xFF"}});
  const blockrnn::TensorFile got = blockrnn::load_tensor_file(path);
  ASSERT_EQ(got.tensors.size(), 1u);
  EXPECT_EQ(std::memcmp(got.tensors.at("a").data(), a.data(), a.num_bytes()), 0);
  EXPECT_EQ(got.metadata.at("format"), "demo");
  EXPECT_EQ(got.metadata.at("bytes"), "caf\xC3\xA9 \xEF\xBF\xBD");
  EXPECT_EQ(blockrnn::load_tensors(path).size(), 1u);  // the metadata is ignored there

  auto error_of = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  write_raw_safetensors(path, R"({"__metadata__":{"step":7}})", 0);
  EXPECT_EQ(error_of([&] { blockrnn::load_tensor_file(path); }),
            path + ": __metadata__.step: must be a string, got number");
  write_raw_safetensors(path, R"({"__metadata__":[1]})", 0);
  EXPECT_NE(error_of([&] {
              blockrnn::load_tensor_file(path);
            }).find(path + ": __metadata__: must be a JSON object of strings"),
            std::string::npos);
  // A directory opens for reading on Linux; it is refused as what it is.
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(error_of([&] { blockrnn::load_tensor_file(dir); }),
            dir + ": cannot open (not a regular file)");
  EXPECT_EQ(error_of([&] { blockrnn::Model::load(dir); }),
            dir + ": cannot open (not a regular file)");
  EXPECT_EQ(error_of([&] {
              blockrnn::save_tensors(path, {{"__metadata__", a.view()}});
            }),
            path + ": tensor '__metadata__': the name is the header's metadata key");
  EXPECT_EQ(error_of([&] {
              blockrnn::save_tensors(path, {{"a", a.view()}, {"a", a.view()}});
            }),
            path + ": tensor 'a': named twice");
  std::remove(path.c_str());
}

}  // namespace
