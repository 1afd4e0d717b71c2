// Tests of CharModel ⇄ checkpoint: a bit-exact round trip (weights, Adam state, vocabulary,
// metadata; identical bytes when saved again), the vocabulary's Latin-1 metadata text, and
// clear errors for checkpoints that parse but do not describe a consistent model.
#include "train/model_checkpoint.h"

#include <gtest/gtest.h>

#include "blockrnn/model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>

namespace blockrnn::train {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Checkpoint sample_checkpoint(CellKind cell, bool with_adam) {
  const Vocabulary vocab = Vocabulary::from_text("hello, world\n");
  ModelConfig c{cell, vocab.size(), 5, 6, 2};
  CharModel<float> model(c);
  model.init(11);
  AdamState adam;
  adam.t = 42;
  std::mt19937_64 rng(1);
  for (size_t k = 0; k < model.num_tensors(); ++k) {
    adam.m.emplace_back(model.param(k).size());
    adam.v.emplace_back(model.param(k).size());
    for (float& x : adam.m.back()) x = static_cast<float>(rng() % 1000) * 1e-7f - 5e-5f;
    for (float& x : adam.v.back()) x = static_cast<float>(rng() % 1000) * 1e-9f;
  }
  // Values whose bits must survive exactly: a denormal, -0 and the largest float.
  model.param(0)[0] = std::numeric_limits<float>::denorm_min();
  model.param(0)[1] = -0.0f;
  model.param(0)[2] = std::numeric_limits<float>::max();
  return make_checkpoint(model, vocab, 123, with_adam ? &adam : nullptr, {{"seed", "11"}});
}

TEST(ModelCheckpoint, RoundTripIsBitExact) {
  for (CellKind cell : {CellKind::kLstm, CellKind::kGru}) {
    const Checkpoint ckpt = sample_checkpoint(cell, true);
    const std::string path =
        (std::filesystem::path(::testing::TempDir()) / "model_roundtrip.safetensors").string();
    save_checkpoint(path, ckpt);
    const std::string bytes = file_bytes(path);
    TrainedModel loaded = load_trained_model(path);
    EXPECT_EQ(loaded.config.cell, cell);
    EXPECT_EQ(loaded.config.embed, 5);
    EXPECT_EQ(loaded.config.hidden, 6);
    EXPECT_EQ(loaded.config.layers, 2);
    EXPECT_EQ(loaded.vocabulary.symbols(), Vocabulary::from_text("hello, world\n").symbols());
    EXPECT_EQ(loaded.step, 123);
    EXPECT_EQ(loaded.metadata.at("seed"), "11");
    ASSERT_TRUE(loaded.adam.has_value());
    EXPECT_EQ(loaded.adam->t, 42);
    for (size_t k = 0; k < loaded.model.num_tensors(); ++k) {
      const std::string& name = loaded.model.specs()[k].name;
      EXPECT_TRUE(same_bits(loaded.model.param(k), ckpt.tensors.at(name).data)) << name;
      EXPECT_TRUE(same_bits(loaded.adam->m[k], ckpt.tensors.at("adam.m." + name).data)) << name;
      EXPECT_TRUE(same_bits(loaded.adam->v[k], ckpt.tensors.at("adam.v." + name).data)) << name;
    }
    // Saving what was loaded gives the same bytes.
    const Checkpoint again = make_checkpoint(loaded.model, loaded.vocabulary, loaded.step,
                                             &*loaded.adam, {{"seed", "11"}});
    save_checkpoint(path, again);
    EXPECT_EQ(file_bytes(path), bytes);
  }
}

// The file layer is blockrnn's safetensors reader: a damaged file is its error naming the
// path; a tensor of another dtype is refused here; data that does not fit its shape is
// refused on save.
TEST(ModelCheckpoint, FileErrors) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "model_damaged.safetensors").string();
  save_checkpoint(path, sample_checkpoint(CellKind::kGru, false));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  try {
    load_trained_model(path);
    ADD_FAILURE() << "loaded a truncated checkpoint";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
  double wide[2] = {1.0, 2.0};
  blockrnn::save_tensors(path, {{"embedding", TensorView(wide, Shape{2})}});
  try {
    load_checkpoint(path);
    ADD_FAILURE() << "loaded a float64 tensor";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint '" + path + "': tensor 'embedding' must be float32 (F32), got float64");
  }
  Checkpoint bad;
  bad.tensors["w"] = NamedArray{{2, 2}, {1.0f, 2.0f, 3.0f}};
  EXPECT_THROW(save_checkpoint(path, bad), std::invalid_argument);
  std::filesystem::remove(path);
}

TEST(ModelCheckpoint, WithoutAdamState) {
  const Checkpoint ckpt = sample_checkpoint(CellKind::kLstm, false);
  const TrainedModel m = model_from_checkpoint(ckpt, "x");
  EXPECT_FALSE(m.adam.has_value());
  EXPECT_EQ(ckpt.metadata.count("adam_t"), 0u);
}

void expect_error(const Checkpoint& ckpt, const std::string& needle) {
  try {
    model_from_checkpoint(ckpt, "bad.safetensors");
    ADD_FAILURE() << "expected an error containing: " << needle;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("checkpoint 'bad.safetensors'"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(ModelCheckpoint, InconsistentCheckpointsAreRejectedClearly) {
  const Checkpoint good = sample_checkpoint(CellKind::kLstm, true);
  const std::vector<std::pair<std::function<void(Checkpoint&)>, std::string>> cases = {
      {[](Checkpoint& c) { c.tensors.erase("layers.1.w"); }, "tensor 'layers.1.w' is missing"},
      {[](Checkpoint& c) {
         c.tensors["layers.0.b"].shape = {4, 6};
       },
       "tensor 'layers.0.b' has shape [4, 6]"},
      {[](Checkpoint& c) { c.metadata["hidden"] = "7"; },
       "has shape"},  // the tensors no longer fit the config
      {[](Checkpoint& c) { c.metadata["cell"] = "gru"; }, "tensor 'layers.0.w_ru' is missing"},
      {[](Checkpoint& c) {
         c.tensors["extra"] = NamedArray{{1}, {0.0f}};
       },
       "unexpected tensor 'extra'"},
      {[](Checkpoint& c) { c.tensors["softmax.b"].data[0] = std::nanf(""); }, "non-finite"},
      {[](Checkpoint& c) { c.tensors["adam.v.softmax.b"].data[0] = -1.0f; }, "negative"},
      {[](Checkpoint& c) { c.metadata.erase("format"); }, "not a character language model"},
      {[](Checkpoint& c) { c.metadata["embed"] = "5x"; }, "metadata 'embed' must be an integer"},
      {[](Checkpoint& c) { c.metadata.erase("step"); }, "metadata 'step' is missing"},
      {[](Checkpoint& c) { c.metadata["layers"] = "17"; },
       "metadata 'layers' must be an integer in [1, 16]"},
      {[](Checkpoint& c) { c.metadata["format_version"] = "2"; },
       "metadata 'format_version' '2' is not supported"},
      {[](Checkpoint& c) { c.metadata["cell"] = "rnn"; }, "metadata 'cell' is 'rnn'"},
      {[](Checkpoint& c) { c.metadata["vocab_size"] = "12"; }, "metadata 'vocabulary' is invalid"},
      {[](Checkpoint& c) {
         c.metadata["vocabulary"] = "\xE2\x82\xAC" + c.metadata["vocabulary"].substr(1);
       },
       "metadata 'vocabulary' is invalid"},  // U+20AC
      {[](Checkpoint& c) { c.tensors.erase("adam.m.embedding"); },
       "tensor 'adam.m.embedding' is missing"},
  };
  for (const auto& [change, needle] : cases) {
    Checkpoint c = good;
    change(c);
    expect_error(c, needle);
  }
}

TEST(ModelCheckpoint, VocabularyMetadataIsLatin1) {
  EXPECT_EQ(vocabulary_to_metadata("\n ab"), "\n ab");  // ASCII reads as itself
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string text = vocabulary_to_metadata(all);
  EXPECT_EQ(text.substr(text.size() - 4), "\xC3\xBE\xC3\xBF");  // U+00FE, U+00FF
  EXPECT_EQ(vocabulary_from_metadata(text), all);
  EXPECT_THROW(vocabulary_from_metadata("\xC3"), std::invalid_argument);      // cut short
  EXPECT_THROW(vocabulary_from_metadata("\xC4\x80"), std::invalid_argument);  // U+0100
}

}  // namespace
}  // namespace blockrnn::train
