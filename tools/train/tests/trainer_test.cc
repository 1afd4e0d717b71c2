// Tests of the trainer and sampler: a short training run whose loss falls, bit-identical
// reruns (metrics losses and checkpoint bytes), resuming, the files written, and every
// bad-input path (options, corpus, checkpoint/corpus mismatch, prime).
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "captured_file.h"
#include "train/file_util.h"
#include "train/model_checkpoint.h"
#include "train/sampler.h"

namespace blockrnn::train {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::path(::testing::TempDir()) / ("blockrnn_trainer_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string write_text(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = (fs::path(dir) / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Loss column of metrics.csv.
std::vector<std::string> losses(const std::string& csv_path) {
  std::ifstream in(csv_path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("step,loss,", 0), 0u) << line;
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    const size_t a = line.find(','), b = line.find(',', a + 1);
    out.push_back(line.substr(a + 1, b - a - 1));
  }
  return out;
}

TrainOptions tiny(const std::string& out_dir) {
  TrainOptions o;
  o.hidden = 32;
  o.embed = 16;
  o.steps = 80;
  o.batch = 8;
  o.seq_len = 16;
  o.lr = 1e-2;
  o.out_dir = out_dir;
  o.max_seconds = 0;
  o.terminal = false;
  return o;
}

// `steps` more steps from out_dir's checkpoint, the sizes left to the checkpoint.
TrainOptions resuming(const std::string& out_dir, int64_t steps) {
  TrainOptions r = tiny(out_dir);
  r.hidden.reset();
  r.embed.reset();
  r.steps = steps;
  r.resume_path = (fs::path(out_dir) / "checkpoint.safetensors").string();
  return r;
}

TEST(Trainer, ShortRunLearnsAndIsDeterministic) {
  for (CellKind cell : {CellKind::kLstm, CellKind::kGru}) {
    SCOPED_TRACE(cell_name(cell));
    const std::string d1 = temp_dir(std::string("det1_") + cell_name(cell));
    const std::string d2 = temp_dir(std::string("det2_") + cell_name(cell));
    TrainOptions o = tiny(d1);
    o.cell = cell;
    CapturedFile q1, q2;
    const TrainSummary s1 = train_char_model(o, q1.get());
    o.out_dir = d2;
    const TrainSummary s2 = train_char_model(o, q2.get());
    // ln(62) ≈ 4.13 at the start; 80 steps on the embedded corpus reach well below 3.2.
    EXPECT_GT(s1.first_loss, 3.8);
    EXPECT_LT(s1.final_loss, 3.2);
    EXPECT_LT(s1.final_loss, s1.first_loss - 0.8);
    EXPECT_EQ(s1.last_step, 80);
    EXPECT_FALSE(s1.stopped_early);
    const auto l1 = losses(s1.metrics_path), l2 = losses(s2.metrics_path);
    EXPECT_EQ(l1.size(), 80u);
    EXPECT_EQ(l1, l2);
    EXPECT_EQ(read_file_bytes(s1.checkpoint_path), read_file_bytes(s2.checkpoint_path));
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(d1) / "loss.svg"));
    EXPECT_NE(q1.text().find("loss "), std::string::npos);
  }
}

TEST(Trainer, ResumeContinuesStepsAndSamplerIsDeterministic) {
  const std::string d = temp_dir("resume");
  TrainOptions o = tiny(d);
  o.steps = 10;
  CapturedFile q;
  train_char_model(o, q.get());
  TrainOptions r = resuming(d, 5);
  const TrainSummary s = train_char_model(r, q.get());
  EXPECT_EQ(s.first_step, 11);
  EXPECT_EQ(s.last_step, 15);
  TrainedModel m = load_trained_model(s.checkpoint_path);
  EXPECT_EQ(m.step, 15);
  ASSERT_TRUE(m.adam.has_value());
  EXPECT_EQ(m.adam->t, 16);

  SampleOptions so;
  so.length = 40;
  so.seed = 7;
  so.prime = "And God";
  const std::string a = sample_text(m, so), b = sample_text(m, so);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 47u);
  EXPECT_EQ(a.rfind("And God", 0), 0u);
  so.length = 0;
  EXPECT_EQ(sample_text(m, so), "And God");
  std::string long_prime;  // longer than the sampler's prime chunk
  for (int k = 0; k < 100; ++k) long_prime += "And God said. ";
  so.prime = long_prime;
  so.length = 10;
  EXPECT_EQ(sample_text(m, so).size(), long_prime.size() + 10);
  so.prime = "";
  so.length = 5;
  EXPECT_EQ(sample_text(m, so).size(), 5u);
  so.temperature = 0;  // greedy
  EXPECT_EQ(sample_text(m, so), sample_text(m, so));
}

template <typename E>
void expect_throw_with(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing: " << needle;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Trainer, BadInputsGiveClearErrors) {
  const std::string d = temp_dir("bad");
  CapturedFile q;
  auto run = [&](TrainOptions o) { return [o, &q] { train_char_model(o, q.get()); }; };
  TrainOptions o = tiny(d);

  o.corpus_path = write_text(d, "empty.txt", "");
  expect_throw_with<std::runtime_error>(run(o), "is empty");
  o.corpus_path = (fs::path(d) / "missing.txt").string();
  expect_throw_with<std::runtime_error>(run(o), "does not exist");
  o.corpus_path = d;  // a directory
  expect_throw_with<std::runtime_error>(run(o), "not a regular file");
  o.corpus_path = write_text(d, "short.txt", "0123456789abcdef");  // 16 < seq_len + 1
  expect_throw_with<std::runtime_error>(run(o), "at least --seq-len + 1 = 17");

  o = tiny(d);
  o.steps = 0;
  expect_throw_with<std::invalid_argument>(run(o), "--steps");
  o = tiny(d);
  o.lr = -1;
  expect_throw_with<std::invalid_argument>(run(o), "--lr");
  o = tiny(d);
  o.hidden = 0;
  expect_throw_with<std::invalid_argument>(run(o), "--hidden");
  o = tiny(d);
  o.batch = 4096;
  o.seq_len = 4096;
  o.hidden = 8192;
  expect_throw_with<std::invalid_argument>(run(o), "GiB of memory");

  // A corpus with a character outside the resumed checkpoint's vocabulary.
  o = tiny(d);
  o.steps = 2;
  o.corpus_path = write_text(d, "abc.txt", std::string(100, 'a') + "bc");
  train_char_model(o, q.get());
  TrainOptions r = resuming(d, 2);
  r.corpus_path = write_text(d, "abcd.txt", std::string(100, 'a') + "b\nd");
  expect_throw_with<std::runtime_error>(run(r), "character '\\n' at byte offset 101 (line 1");
  r.corpus_path = o.corpus_path;
  r.hidden = 64;
  expect_throw_with<std::invalid_argument>(run(r), "--hidden 64 differs from the checkpoint's 32");
  r.hidden.reset();
  r.cell = CellKind::kGru;
  expect_throw_with<std::invalid_argument>(run(r), "--cell gru differs");
  r.cell.reset();
  r.resume_path = write_text(d, "garbage.safetensors", "not a checkpoint");
  expect_throw_with<std::runtime_error>(run(r), "garbage.safetensors");

  // A prime with characters the model does not know.
  TrainedModel m = load_trained_model((fs::path(d) / "checkpoint.safetensors").string());
  SampleOptions so;
  so.prime = "abz";
  expect_throw_with<std::invalid_argument>([&] { sample_text(m, so); },
                                           "--prime: character 'z' at byte offset 2");
  so.prime = "";
  so.temperature = -1;
  expect_throw_with<std::invalid_argument>([&] { sample_text(m, so); }, "--temperature");
  so.temperature = 1;
  so.length = -1;
  expect_throw_with<std::invalid_argument>([&] { sample_text(m, so); }, "--length");
}

}  // namespace
}  // namespace blockrnn::train
