// Reading and writing float32 tensors in the safetensors format
// (https://github.com/huggingface/safetensors), the checkpoint format of `blockrnn train`:
//
//   u64 little-endian N | N bytes of JSON header | data
//   header = {"<name>": {"dtype": "F32", "shape": [d0, ...], "data_offsets": [begin, end]}, ...,
//             "__metadata__": {"<key>": "<string value>", ...}}
//
// Offsets are relative to the start of the data; tensors are row-major and little-endian. The
// JSON is parsed and written by nlohmann/json. The header is padded with spaces to a multiple
// of 8 bytes so the data is aligned (as the reference implementation does).
//
// Parsing validates everything before it copies a byte: the header length against the file
// size and a limit, the JSON, every field's type, the dtype, each shape's element count against
// its byte range, and that the ranges tile the data exactly (in range, no overlap, no hole, no
// trailing bytes). Errors are std::runtime_error("checkpoint '<source>': <what>") naming the
// tensor and field.
#ifndef BLOCKRNN_TOOLS_TRAIN_SAFETENSORS_H_
#define BLOCKRNN_TOOLS_TRAIN_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace blockrnn::train {

// Limits enforced on save and load.
inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // as the reference reader
inline constexpr int kMaxRank = 8;
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 32;

// A float32 tensor: row-major data, data.size() == product of shape (1 for rank 0).
struct NamedArray {
  std::vector<int64_t> shape;
  std::vector<float> data;

  // Product of shape; throws std::invalid_argument on negative dims or one above the limit.
  int64_t num_elements() const;

  friend bool operator==(const NamedArray&, const NamedArray&) = default;
};

struct SafeTensors {
  std::map<std::string, NamedArray> tensors;
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
};

// The file image; tensors are laid out in name order. Throws std::invalid_argument if a
// tensor's data does not match its shape or a shape is out of the limits.
std::vector<uint8_t> serialize_safetensors(const SafeTensors& file);

// Parses and validates a file image; `source` names the file in error messages.
SafeTensors parse_safetensors(std::span<const uint8_t> bytes, const std::string& source);

// serialize_safetensors() written atomically (temporary file + rename).
void save_safetensors(const std::string& path, const SafeTensors& file);

// Reads and parses `path`: std::runtime_error for a missing, unreadable or invalid file.
SafeTensors load_safetensors(const std::string& path);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_SAFETENSORS_H_
