// Whole-file binary read and atomic (write-to-temporary, then rename) write
// helpers shared by the checkpoint and loss-chart writers. Errors are reported as
// std::runtime_error naming the path and the OS error.
#ifndef BLOCKRNN_TOOLS_TRAIN_FILE_UTIL_H_
#define BLOCKRNN_TOOLS_TRAIN_FILE_UTIL_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace blockrnn::train {

// Reads the whole file. Throws std::runtime_error if it is missing, is not a
// regular file, or cannot be read completely.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// Writes `bytes` to `path` + ".tmp" and renames it over `path`, so readers never
// observe a partially written file. Throws std::runtime_error on failure (and
// removes the temporary file).
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_FILE_UTIL_H_
