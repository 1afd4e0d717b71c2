// Binary whole-file read.
#include "train/file_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace blockrnn::train {
namespace {

std::string os_error(int err) {
  return err != 0 ? std::strerror(err) : "unknown error";
}

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw std::runtime_error("cannot open '" + path + "': file does not exist");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw std::runtime_error("cannot read '" + path + "': not a regular file");
  }
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open '" + path + "': " + os_error(errno));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.insert(bytes.end(), buf, buf + got);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw std::runtime_error("error reading '" + path + "': " + os_error(err));
  return bytes;
}

}  // namespace blockrnn::train
