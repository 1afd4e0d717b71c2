// Whole-file binary read (the corpus). Errors are reported as std::runtime_error naming the
// path and the OS error.
#ifndef BLOCKRNN_TOOLS_TRAIN_FILE_UTIL_H_
#define BLOCKRNN_TOOLS_TRAIN_FILE_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace blockrnn::train {

// Reads the whole file. Throws std::runtime_error if it is missing, is not a
// regular file, or cannot be read completely.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace blockrnn::train

#endif  // BLOCKRNN_TOOLS_TRAIN_FILE_UTIL_H_
