// Conversion between a trained CharModel (+ its vocabulary and Adam state) and a Checkpoint
// (checkpoint.h, CHECKPOINT_FORMAT.md), with the consistency checks a loaded checkpoint must
// pass before it is used: known cell, metadata that parses, every parameter present with the
// shape the config implies, no unexpected tensors, finite values.
//
// Tensors: the parameters under their CharModel names (char_model.h), and when the Adam state
// is saved "adam/m/<name>" and "adam/v/<name>" with the same shapes. Metadata keys written by
// the trainer: "model" = "blockrnn-char-lm", "embed", "forget_bias", "step", "adam_t", plus
// informational ones (seed, lr, batch, seq_len, clip, corpus, loss, blockrnn_version).
#ifndef BLOCKRNN_TOOLS_TRAIN_MODEL_CHECKPOINT_H_
#define BLOCKRNN_TOOLS_TRAIN_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/char_model.h"
#include "train/checkpoint.h"
#include "train/corpus.h"

namespace blockrnn::train {

inline constexpr char kModelKind[] = "blockrnn-char-lm";

// Adam moments in the model's parameter order (specs()), and the step the next update applies.
struct AdamState {
  int64_t t = 1;
  std::vector<std::vector<float>> m, v;
};

struct TrainedModel {
  ModelConfig config;
  CharModel<float> model;
  Vocabulary vocabulary;
  int64_t step = 0;               // training steps done
  std::optional<AdamState> adam;  // when the checkpoint holds it
  std::map<std::string, std::string> metadata;
};

// Builds the checkpoint of `model`; `extra_metadata` is added to the keys this function
// writes (model, embed, forget_bias, step, and adam_t when `adam` is given).
Checkpoint make_checkpoint(const CharModel<float>& model, const Vocabulary& vocabulary,
                           int64_t step, const AdamState* adam,
                           const std::map<std::string, std::string>& extra_metadata);

// Rebuilds the model from a checkpoint that load_checkpoint() accepted. Throws
// std::runtime_error("checkpoint '<source>': ...") naming the first inconsistency.
TrainedModel model_from_checkpoint(const Checkpoint& ckpt, const std::string& source);

// load_checkpoint() + model_from_checkpoint().
TrainedModel load_trained_model(const std::string& path);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_MODEL_CHECKPOINT_H_
