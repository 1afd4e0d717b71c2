// safetensors writer and validating reader (see safetensors.h).
#include "train/safetensors.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

#include "train/file_util.h"

namespace blockrnn::train {
namespace {

using nlohmann::json;

constexpr char kMetadataKey[] = "__metadata__";
constexpr char kDtype[] = "F32";
constexpr uint64_t kElementBytes = 4;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error("checkpoint '" + source + "': " + what);
}

int64_t checked_num_elements(const std::vector<int64_t>& shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    throw std::invalid_argument("rank " + std::to_string(shape.size()) + " is above " +
                                std::to_string(kMaxRank));
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("dimension " + std::to_string(d) + " is negative");
    if (d != 0 && n > kMaxTensorElements / d) {
      throw std::invalid_argument("more than " + std::to_string(kMaxTensorElements) + " elements");
    }
    n *= d;
  }
  return n;
}

// ---- Reading ----

struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// A non-negative JSON integer (nlohmann parses those as unsigned), or an error naming `what`.
uint64_t json_uint(const json& j, const std::string& source, const std::string& what) {
  if (!j.is_number_unsigned()) fail(source, what + " must be a non-negative integer");
  return j.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const json& j, uint64_t data_bytes,
                  const std::string& source) {
  const std::string where = "tensor '" + name + "'";
  if (!j.is_object()) fail(source, where + " must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(source, where + " has an unknown field '" + key + "'");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!j.contains(key)) fail(source, where + " has no '" + key + "'");
  }
  const json& dtype = j["dtype"];
  if (!dtype.is_string()) fail(source, where + ": 'dtype' must be a string");
  if (dtype.get<std::string>() != kDtype) {
    fail(source, where + ": dtype '" + dtype.get<std::string>() +
                     "' is not supported (blockrnn checkpoints hold F32)");
  }
  Entry e{name, {}, 0, 0};
  const json& shape = j["shape"];
  if (!shape.is_array() || shape.size() > static_cast<size_t>(kMaxRank)) {
    fail(source, where + ": 'shape' must be an array of at most " + std::to_string(kMaxRank) +
                     " dimensions");
  }
  for (const json& d : shape) {
    const uint64_t dim = json_uint(d, source, where + ": every 'shape' dimension");
    if (dim > static_cast<uint64_t>(kMaxTensorElements)) {
      fail(source, where + ": 'shape' dimension " + std::to_string(dim) + " is too large");
    }
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  int64_t elements = 0;
  try {
    elements = checked_num_elements(e.shape);
  } catch (const std::invalid_argument& err) {
    fail(source, where + ": 'shape' has " + err.what());
  }
  const json& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(source, where + ": 'data_offsets' must be an array [begin, end]");
  }
  e.begin = json_uint(offsets[0], source, where + ": 'data_offsets' begin");
  e.end = json_uint(offsets[1], source, where + ": 'data_offsets' end");
  if (e.begin > e.end || e.end > data_bytes) {
    fail(source, where + ": 'data_offsets' [" + std::to_string(e.begin) + ", " +
                     std::to_string(e.end) + "] is outside the " + std::to_string(data_bytes) +
                     " bytes of data");
  }
  if (e.end - e.begin != static_cast<uint64_t>(elements) * kElementBytes) {
    fail(source, where + ": 'data_offsets' span " + std::to_string(e.end - e.begin) +
                     " bytes but 'shape' needs " + std::to_string(elements * kElementBytes));
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, "'__metadata__' must be a JSON object");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) fail(source, "metadata '" + key + "' must be a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

// The byte ranges must tile [0, data_bytes): sorted by begin, each starts where the last ended.
void check_tiling(std::vector<Entry> entries, uint64_t data_bytes, const std::string& source) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  const Entry* last = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered) {
      fail(source, "tensors '" + last->name + "' and '" + e.name + "' overlap in 'data_offsets'");
    }
    if (e.begin > covered) {
      fail(source, "data bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
                       ") belong to no tensor");
    }
    covered = e.end;
    last = &e;
  }
  if (covered != data_bytes) {
    fail(source, std::to_string(data_bytes - covered) +
                     " trailing data bytes belong to no tensor (the file is longer than its "
                     "header says)");
  }
}

std::vector<float> read_floats(std::span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / kElementBytes);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = bytes.data() + i * kElementBytes;
    const uint32_t bits =
        uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    out[i] = std::bit_cast<float>(bits);
  }
  return out;
}

// ---- Writing ----

void append_u64_le(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void append_floats(std::vector<uint8_t>& out, const std::vector<float>& data) {
  for (float f : data) {
    const auto bits = std::bit_cast<uint32_t>(f);
    for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(bits >> (8 * k)));
  }
}

}  // namespace

int64_t NamedArray::num_elements() const {
  return checked_num_elements(shape);
}

std::vector<uint8_t> serialize_safetensors(const SafeTensors& file) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, array] : file.tensors) {
    if (name.empty() || name == kMetadataKey) {
      throw std::invalid_argument("invalid tensor name '" + name + "'");
    }
    if (static_cast<size_t>(array.num_elements()) != array.data.size()) {
      throw std::invalid_argument(
          "tensor '" + name + "' holds " + std::to_string(array.data.size()) +
          " values but its shape needs " + std::to_string(array.num_elements()));
    }
    const uint64_t bytes = array.data.size() * kElementBytes;
    header[name] = {
        {"dtype", kDtype}, {"shape", array.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!file.metadata.empty()) header[kMetadataKey] = file.metadata;
  // Invalid UTF-8 (e.g. in a corpus path) becomes U+FFFD rather than an unreadable header.
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderBytes) throw std::invalid_argument("safetensors header too large");

  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  append_u64_le(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& [name, array] : file.tensors) append_floats(out, array.data);
  return out;
}

SafeTensors parse_safetensors(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 8) {
    fail(source, "file is truncated: " + std::to_string(bytes.size()) +
                     " bytes, fewer than the 8 of the header length" +
                     (bytes.empty() ? " (the file is empty)" : ""));
  }
  const uint64_t header_bytes = read_u64_le(bytes.data());
  if (header_bytes > kMaxHeaderBytes) {
    fail(source, "header length " + std::to_string(header_bytes) + " is above the limit of " +
                     std::to_string(kMaxHeaderBytes) + " bytes (not a safetensors file?)");
  }
  if (header_bytes > bytes.size() - 8) {
    fail(source, "file is truncated: the header length is " + std::to_string(header_bytes) +
                     " bytes but only " + std::to_string(bytes.size() - 8) + " follow");
  }
  const auto* text = reinterpret_cast<const char*>(bytes.data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_bytes);
  } catch (const json::parse_error& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(source, "header must be a JSON object");

  const std::span<const uint8_t> data = bytes.subspan(8 + header_bytes);
  SafeTensors out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      out.metadata = parse_metadata(value, source);
    } else {
      entries.push_back(parse_entry(name, value, data.size(), source));
    }
  }
  check_tiling(entries, data.size(), source);
  for (const Entry& e : entries) {
    out.tensors[e.name] = NamedArray{e.shape, read_floats(data.subspan(e.begin, e.end - e.begin))};
  }
  return out;
}

void save_safetensors(const std::string& path, const SafeTensors& file) {
  write_file_atomically(path, serialize_safetensors(file));
}

SafeTensors load_safetensors(const std::string& path) {
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_bytes(path);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("cannot load checkpoint: ") + e.what());
  }
  return parse_safetensors(bytes, path);
}

}  // namespace blockrnn::train
