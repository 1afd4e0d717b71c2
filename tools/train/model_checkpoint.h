// Conversion between a trained CharModel (+ its vocabulary and Adam state) and its safetensors
// checkpoint (layout in docs/training.md), read and written with blockrnn::load_tensor_file and
// blockrnn::save_tensors (blockrnn/model.h: the library's one safetensors reader, with its
// bounds checks), with the consistency checks a loaded checkpoint must pass before it is used:
// format and version, every tensor float32, a configuration that parses and is in range, every
// parameter present with the shape the configuration implies, no unexpected tensors, finite
// values.
//
// Tensors: the parameters under their CharModel names (char_model.h: "embedding",
// "layers.<l>.w", ..., "softmax.w", "softmax.b"), and when the Adam state is saved
// "adam.m.<name>" and "adam.v.<name>" with the same shapes. Metadata (all strings): "format" =
// "blockrnn-char-lm", "format_version" = "1", "cell", "vocab_size", "embed", "hidden",
// "layers", "vocabulary", "forget_bias", "step", "adam_t" (with the Adam state),
// "blockrnn_version", plus informational keys from the trainer (seed, lr, batch, seq_len, clip,
// corpus, loss).
#ifndef BLOCKRNN_TOOLS_TRAIN_MODEL_CHECKPOINT_H_
#define BLOCKRNN_TOOLS_TRAIN_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "train/char_model.h"
#include "train/corpus.h"

namespace blockrnn::train {

inline constexpr char kCheckpointFormat[] = "blockrnn-char-lm";
inline constexpr int kCheckpointFormatVersion = 1;

// A float32 tensor: row-major data, data.size() == product of shape (1 for rank 0).
struct NamedArray {
  std::vector<int64_t> shape;
  std::vector<float> data;

  friend bool operator==(const NamedArray&, const NamedArray&) = default;
};

// A checkpoint file's contents: its tensors and its "__metadata__".
struct Checkpoint {
  std::map<std::string, NamedArray> tensors;
  std::map<std::string, std::string> metadata;
};

// Writes the checkpoint (tensors in name order, written to a temporary file then renamed).
// std::invalid_argument if a tensor's data does not match its shape; blockrnn::Error naming
// the path if it cannot be written.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Reads a checkpoint file: blockrnn::Error (a std::runtime_error) "<path>: <field>: <what>" for
// a missing, unreadable or malformed file, std::runtime_error("checkpoint '<path>': ...") for
// a tensor that is not float32.
Checkpoint load_checkpoint(const std::string& path);

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

// The vocabulary's bytes as metadata text: byte b becomes the character U+00bb (Latin-1), so
// the header stays valid UTF-8 for any corpus and ASCII reads as itself. In Python:
// metadata["vocabulary"].encode("latin-1").
std::string vocabulary_to_metadata(std::string_view symbols);
// The inverse; std::invalid_argument for text with characters above U+00FF or bad UTF-8.
std::string vocabulary_from_metadata(std::string_view text);

// Builds the checkpoint of `model`; `extra_metadata` is added to the keys this function
// writes (those listed above).
Checkpoint make_checkpoint(const CharModel<float>& model, const Vocabulary& vocabulary,
                           int64_t step, const AdamState* adam,
                           const std::map<std::string, std::string>& extra_metadata);

// Rebuilds the model from a parsed checkpoint. Throws std::runtime_error("checkpoint
// '<source>': ...") naming the first inconsistency.
TrainedModel model_from_checkpoint(const Checkpoint& ckpt, const std::string& source);

// load_checkpoint() + model_from_checkpoint().
TrainedModel load_trained_model(const std::string& path);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_MODEL_CHECKPOINT_H_
