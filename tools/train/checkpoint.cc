// Checkpoint serialisation, parsing and validation (format: CHECKPOINT_FORMAT.md).
#include "train/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "train/checksum.h"
#include "train/file_util.h"

namespace blockrnn::train {
namespace {

constexpr size_t kHeaderSize = 8 + 4 + 8;  // magic, version, payload length
constexpr size_t kTrailerSize = 4;         // CRC-32 of the payload
constexpr size_t kMaxNameLength = 4096;    // tensor names and metadata keys
constexpr int64_t kMaxHidden = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;

[[noreturn]] void fail_checkpoint(const std::string& source, const std::string& what) {
  throw std::runtime_error("checkpoint '" + source + "': " + what);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

// ---- Writing ----

class Writer {
 public:
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void floats(const std::vector<float>& data) {
    const size_t start = out_.size();
    out_.resize(start + data.size() * 4);
    if constexpr (std::endian::native == std::endian::little) {
      if (!data.empty()) std::memcpy(out_.data() + start, data.data(), data.size() * 4);
    } else {
      for (size_t i = 0; i < data.size(); ++i) {
        const auto bits = std::bit_cast<uint32_t>(data[i]);
        for (int k = 0; k < 4; ++k) out_[start + 4 * i + k] = static_cast<uint8_t>(bits >> (8 * k));
      }
    }
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// ---- Reading ----

class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const { fail_checkpoint(source_, what); }

  size_t remaining() const { return bytes_.size() - pos_; }

  void need(size_t n, const char* what) const {
    if (n > remaining()) {
      fail(std::string("corrupt payload: ") + what + " needs " + std::to_string(n) +
           " bytes at payload offset " + std::to_string(pos_) + " but only " +
           std::to_string(remaining()) + " remain");
    }
  }
  uint32_t u32(const char* what) {
    need(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* what) {
    need(8, what);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return v;
  }
  int64_t i64(const char* what) { return static_cast<int64_t>(u64(what)); }
  std::string str(const char* what, size_t max_length) {
    const uint32_t n = u32(what);
    if (n > max_length) {
      fail(std::string("corrupt payload: ") + what + " length " + std::to_string(n) +
           " exceeds the limit of " + std::to_string(max_length));
    }
    need(n, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void floats(std::vector<float>& data, size_t count, const char* what) {
    if (count > remaining() / 4) {
      fail(std::string("corrupt payload: ") + what + " needs " + std::to_string(count) +
           " floats but only " + std::to_string(remaining()) + " bytes remain");
    }
    data.resize(count);
    const uint8_t* src = bytes_.data() + pos_;
    if constexpr (std::endian::native == std::endian::little) {
      if (count > 0) std::memcpy(data.data(), src, count * 4);
    } else {
      for (size_t i = 0; i < count; ++i) {
        uint32_t bits = 0;
        for (int k = 0; k < 4; ++k) bits |= static_cast<uint32_t>(src[4 * i + k]) << (8 * k);
        data[i] = std::bit_cast<float>(bits);
      }
    }
    pos_ += count * 4;
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& source_;
  size_t pos_ = 0;
};

// Product of dims with overflow and limit checks; returns -1 with `error` set on failure.
int64_t checked_elements(const std::vector<int64_t>& shape, std::string& error) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d < 0) {
      error = "dimension " + std::to_string(i) + " is negative (" + std::to_string(d) + ")";
      return -1;
    }
    if (d != 0 && n > kCheckpointMaxElements / d) {
      error = "element count overflows the limit of " + std::to_string(kCheckpointMaxElements);
      return -1;
    }
    n *= d;
  }
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Shared by save (std::invalid_argument) and load (std::runtime_error): returns
// an empty string when the header fields are valid, else the problem.
std::string check_header_fields(const std::string& cell, int64_t hidden, int64_t layers,
                                int64_t vocab_size, const std::string& vocabulary) {
  if (cell != "lstm" && cell != "gru")
    return "cell must be \"lstm\" or \"gru\", got \"" + cell + "\"";
  if (hidden < 1 || hidden > kMaxHidden) {
    return "hidden size " + std::to_string(hidden) + " is outside [1, " +
           std::to_string(kMaxHidden) + "]";
  }
  if (layers < 1 || layers > kMaxLayers) {
    return "layer count " + std::to_string(layers) + " is outside [1, " +
           std::to_string(kMaxLayers) + "]";
  }
  if (vocab_size < 1 || vocab_size > 256) {
    return "vocab_size " + std::to_string(vocab_size) + " is outside [1, 256]";
  }
  if (static_cast<int64_t>(vocabulary.size()) != vocab_size) {
    return "vocabulary has " + std::to_string(vocabulary.size()) + " bytes but vocab_size is " +
           std::to_string(vocab_size);
  }
  for (size_t i = 1; i < vocabulary.size(); ++i) {
    if (static_cast<uint8_t>(vocabulary[i - 1]) >= static_cast<uint8_t>(vocabulary[i])) {
      return "vocabulary bytes are not strictly increasing at index " + std::to_string(i);
    }
  }
  return {};
}

std::string check_name(const std::string& name, const char* kind) {
  if (name.empty()) return std::string(kind) + " name is empty";
  if (name.size() > kMaxNameLength) {
    return std::string(kind) + " name of " + std::to_string(name.size()) +
           " bytes exceeds the limit of " + std::to_string(kMaxNameLength);
  }
  return {};
}

}  // namespace

int64_t NamedArray::num_elements() const {
  std::string error;
  const int64_t n = checked_elements(shape, error);
  if (n < 0) throw std::invalid_argument("tensor shape " + shape_string(shape) + ": " + error);
  return n;
}

void validate_checkpoint(const Checkpoint& ckpt) {
  std::string error =
      check_header_fields(ckpt.cell, ckpt.hidden, ckpt.layers, ckpt.vocab_size, ckpt.vocabulary);
  if (!error.empty()) throw std::invalid_argument("invalid checkpoint: " + error);
  if (ckpt.metadata.size() > std::numeric_limits<uint32_t>::max() ||
      ckpt.tensors.size() > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument("invalid checkpoint: too many entries");
  }
  for (const auto& [key, value] : ckpt.metadata) {
    error = check_name(key, "metadata");
    if (!error.empty()) throw std::invalid_argument("invalid checkpoint: " + error);
    if (value.size() > std::numeric_limits<uint32_t>::max()) {
      throw std::invalid_argument("invalid checkpoint: metadata value '" + key + "' is too long");
    }
  }
  for (const auto& [name, array] : ckpt.tensors) {
    error = check_name(name, "tensor");
    if (!error.empty()) throw std::invalid_argument("invalid checkpoint: " + error);
    if (array.shape.size() > static_cast<size_t>(kCheckpointMaxRank)) {
      throw std::invalid_argument("invalid checkpoint: tensor '" + name + "' has rank " +
                                  std::to_string(array.shape.size()) + " > " +
                                  std::to_string(kCheckpointMaxRank));
    }
    const int64_t n = checked_elements(array.shape, error);
    if (n < 0) {
      throw std::invalid_argument("invalid checkpoint: tensor '" + name + "' shape " +
                                  shape_string(array.shape) + ": " + error);
    }
    if (static_cast<uint64_t>(n) != array.data.size()) {
      throw std::invalid_argument("invalid checkpoint: tensor '" + name + "' shape " +
                                  shape_string(array.shape) + " has " + std::to_string(n) +
                                  " elements but data has " + std::to_string(array.data.size()));
    }
  }
}

std::vector<uint8_t> serialize_checkpoint(const Checkpoint& ckpt) {
  validate_checkpoint(ckpt);
  Writer payload;
  payload.str(ckpt.cell);
  payload.i64(ckpt.hidden);
  payload.i64(ckpt.layers);
  payload.i64(ckpt.vocab_size);
  payload.str(ckpt.vocabulary);
  payload.u32(static_cast<uint32_t>(ckpt.metadata.size()));
  for (const auto& [key, value] : ckpt.metadata) {
    payload.str(key);
    payload.str(value);
  }
  payload.u32(static_cast<uint32_t>(ckpt.tensors.size()));
  for (const auto& [name, array] : ckpt.tensors) {
    payload.str(name);
    payload.u32(static_cast<uint32_t>(array.shape.size()));
    for (int64_t d : array.shape) payload.i64(d);
    payload.floats(array.data);
  }
  const std::vector<uint8_t>& body = payload.bytes();

  Writer file;
  std::vector<uint8_t>& out = file.bytes();
  out.reserve(kHeaderSize + body.size() + kTrailerSize);
  out.insert(out.end(), kCheckpointMagic, kCheckpointMagic + 8);
  file.u32(kCheckpointVersion);
  file.u64(body.size());
  out.insert(out.end(), body.begin(), body.end());
  file.u32(crc32(body));
  return std::move(out);
}

Checkpoint parse_checkpoint(std::span<const uint8_t> bytes, const std::string& source) {
  auto fail = [&](const std::string& what) { fail_checkpoint(source, what); };
  if (bytes.empty()) fail("file is empty");
  // Magic: compare whatever prefix is present so that short non-checkpoint files
  // are reported as such rather than as truncated.
  const size_t magic_len = std::min<size_t>(bytes.size(), 8);
  if (std::memcmp(bytes.data(), kCheckpointMagic, magic_len) != 0) {
    fail("not a blockrnn checkpoint (bad magic; expected \"BRNNCKPT\")");
  }
  if (bytes.size() < kHeaderSize + kTrailerSize) {
    fail("file is truncated: " + std::to_string(bytes.size()) + " bytes is shorter than the " +
         std::to_string(kHeaderSize + kTrailerSize) + "-byte header and trailer");
  }
  Reader header(bytes.subspan(8, kHeaderSize - 8), source);
  const uint32_t version = header.u32("format version");
  if (version != kCheckpointVersion) {
    fail("unsupported format version " + std::to_string(version) + " (this build reads version " +
         std::to_string(kCheckpointVersion) + ")");
  }
  const uint64_t payload_length = header.u64("payload length");
  const uint64_t available = bytes.size() - kHeaderSize - kTrailerSize;
  if (payload_length > available) {
    fail("file is truncated: header declares a " + std::to_string(payload_length) +
         "-byte payload but only " + std::to_string(available) + " bytes follow the header");
  }
  if (payload_length < available) {
    fail("file has " + std::to_string(available - payload_length) +
         " unexpected trailing bytes after the payload checksum (declared payload " +
         std::to_string(payload_length) + " bytes)");
  }
  const auto payload = bytes.subspan(kHeaderSize, static_cast<size_t>(payload_length));
  Reader trailer(bytes.subspan(kHeaderSize + payload.size(), kTrailerSize), source);
  const uint32_t stored_crc = trailer.u32("payload CRC-32");
  const uint32_t actual_crc = crc32(payload);
  if (stored_crc != actual_crc) {
    fail("payload CRC-32 mismatch (stored " + hex32(stored_crc) + ", computed " +
         hex32(actual_crc) + "): the file is corrupted");
  }

  Reader r(payload, source);
  Checkpoint ckpt;
  ckpt.cell = r.str("cell", 16);
  ckpt.hidden = r.i64("hidden");
  ckpt.layers = r.i64("layers");
  ckpt.vocab_size = r.i64("vocab_size");
  ckpt.vocabulary = r.str("vocabulary", 256);
  const std::string error =
      check_header_fields(ckpt.cell, ckpt.hidden, ckpt.layers, ckpt.vocab_size, ckpt.vocabulary);
  if (!error.empty()) r.fail("invalid model description: " + error);

  const uint32_t metadata_count = r.u32("metadata count");
  // Each entry needs at least two 4-byte lengths plus a 1-byte key.
  if (metadata_count > r.remaining() / 9) {
    r.fail("corrupt payload: metadata count " + std::to_string(metadata_count) +
           " cannot fit in the remaining " + std::to_string(r.remaining()) + " bytes");
  }
  for (uint32_t i = 0; i < metadata_count; ++i) {
    std::string key = r.str("metadata key", kMaxNameLength);
    std::string value = r.str("metadata value", std::numeric_limits<uint32_t>::max());
    const std::string name_error = check_name(key, "metadata");
    if (!name_error.empty()) r.fail("corrupt payload: " + name_error);
    if (!ckpt.metadata.empty() && !(ckpt.metadata.rbegin()->first < key)) {
      r.fail("corrupt payload: metadata key '" + key + "' is duplicated or out of order");
    }
    ckpt.metadata.emplace_hint(ckpt.metadata.end(), std::move(key), std::move(value));
  }

  const uint32_t tensor_count = r.u32("tensor count");
  // Each tensor needs at least a 4-byte name length, a 1-byte name and a 4-byte rank.
  if (tensor_count > r.remaining() / 9) {
    r.fail("corrupt payload: tensor count " + std::to_string(tensor_count) +
           " cannot fit in the remaining " + std::to_string(r.remaining()) + " bytes");
  }
  for (uint32_t i = 0; i < tensor_count; ++i) {
    std::string name = r.str("tensor name", kMaxNameLength);
    const std::string name_error = check_name(name, "tensor");
    if (!name_error.empty()) r.fail("corrupt payload: " + name_error);
    if (!ckpt.tensors.empty() && !(ckpt.tensors.rbegin()->first < name)) {
      r.fail("corrupt payload: tensor name '" + name + "' is duplicated or out of order");
    }
    const uint32_t rank = r.u32("tensor rank");
    if (rank > static_cast<uint32_t>(kCheckpointMaxRank)) {
      r.fail("corrupt payload: tensor '" + name + "' has rank " + std::to_string(rank) + " > " +
             std::to_string(kCheckpointMaxRank));
    }
    NamedArray array;
    array.shape.resize(rank);
    for (uint32_t d = 0; d < rank; ++d) array.shape[d] = r.i64("tensor dimension");
    std::string shape_error;
    const int64_t n = checked_elements(array.shape, shape_error);
    if (n < 0) {
      r.fail("corrupt payload: tensor '" + name + "' shape " + shape_string(array.shape) + ": " +
             shape_error);
    }
    if (static_cast<uint64_t>(n) > r.remaining() / 4) {
      r.fail("corrupt payload: tensor '" + name + "' shape " + shape_string(array.shape) +
             " needs " + std::to_string(n) + " floats but only " + std::to_string(r.remaining()) +
             " bytes remain");
    }
    r.floats(array.data, static_cast<size_t>(n), "tensor data");
    ckpt.tensors.emplace_hint(ckpt.tensors.end(), std::move(name), std::move(array));
  }
  if (r.remaining() != 0) {
    r.fail("corrupt payload: " + std::to_string(r.remaining()) +
           " unexpected bytes after the last tensor");
  }
  return ckpt;
}

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  const std::vector<uint8_t> bytes = serialize_checkpoint(ckpt);
  try {
    write_file_atomically(path, bytes);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot save checkpoint: ") + e.what());
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_bytes(path);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot load checkpoint: ") + e.what());
  }
  return parse_checkpoint(bytes, path);
}

}  // namespace blockrnn::train
