// Versioned, checksummed binary checkpoint format for the character-level
// language model (see CHECKPOINT_FORMAT.md): model hyper-parameters, the
// vocabulary, named float32 tensors and string metadata.
#ifndef BLOCKRNN_TOOLS_TRAIN_CHECKPOINT_H_
#define BLOCKRNN_TOOLS_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace blockrnn::train {

inline constexpr char kCheckpointMagic[8] = {'B', 'R', 'N', 'N', 'C', 'K', 'P', 'T'};
inline constexpr uint32_t kCheckpointVersion = 1;

// Limits enforced on save and load.
inline constexpr int kCheckpointMaxRank = 8;
inline constexpr int64_t kCheckpointMaxElements = int64_t{1} << 32;  // per tensor

// A float32 tensor: row-major data, data.size() == product of shape (1 for rank 0).
struct NamedArray {
  std::vector<int64_t> shape;
  std::vector<float> data;

  // Product of shape; throws std::invalid_argument on negative dims or overflow.
  int64_t num_elements() const;

  friend bool operator==(const NamedArray&, const NamedArray&) = default;
};

struct Checkpoint {
  std::string cell;  // "lstm" or "gru"
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t vocab_size = 0;
  std::string vocabulary;  // vocab_size bytes, strictly increasing (Vocabulary::symbols())
  std::map<std::string, NamedArray> tensors;
  std::map<std::string, std::string> metadata;
};

// Serialises to the in-memory file image. Throws std::invalid_argument if the
// checkpoint is not valid (same rules the loader enforces).
std::vector<uint8_t> serialize_checkpoint(const Checkpoint& ckpt);

// Parses and validates a file image. Throws std::runtime_error describing the
// first problem found; `source` names the file in messages.
Checkpoint parse_checkpoint(std::span<const uint8_t> bytes,
                            const std::string& source = "checkpoint");

// serialize_checkpoint() written atomically (temporary file + rename).
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Reads and parses `path`. Throws std::runtime_error for missing, unreadable,
// truncated, corrupted or invalid files.
Checkpoint load_checkpoint(const std::string& path);

// Throws std::invalid_argument if `ckpt` violates the format's rules.
void validate_checkpoint(const Checkpoint& ckpt);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_CHECKPOINT_H_
