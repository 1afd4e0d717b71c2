// safetensors reading with bounds checks, and writing (see safetensors.h).
#include "model/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>

#include "blockrnn/error.h"

namespace blockrnn::model {

using nlohmann::json;

void fail(const std::string& where, const std::string& field, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, where + ": " + field + ": " + message);
}

namespace {

class FileSource : public ByteSource {
 public:
  FileSource(std::FILE* f, std::uint64_t size, std::string path)
      : f_(f), size_(size), path_(std::move(path)) {}
  ~FileSource() override { std::fclose(f_); }
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::size_t n, void* dst) override {
    if (fseeko(f_, static_cast<off_t>(offset), SEEK_SET) != 0 || std::fread(dst, 1, n, f_) != n) {
      throw Error(ErrorCode::kInvalidArgument, path_ + ": cannot read " + std::to_string(n) +
                                                   " bytes at offset " + std::to_string(offset) +
                                                   " (the file changed while it was read?)");
    }
  }

 private:
  std::FILE* f_;
  std::uint64_t size_;
  std::string path_;
};

class BufferSource : public ByteSource {
 public:
  BufferSource(const void* data, std::size_t size)
      : data_(static_cast<const unsigned char*>(data)), size_(size) {}
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::size_t n, void* dst) override {
    if (n > 0) std::memcpy(dst, data_ + offset, n);
  }

 private:
  const unsigned char* data_;
  std::size_t size_;
};

// The safetensors dtypes, so that a known but unused one gets a precise message.
bool is_safetensors_dtype(const std::string& s) {
  static const char* const kAll[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                                     "I16",  "U16", "F16", "BF16",    "I32",
                                     "U32",  "F32", "F64", "I64",     "U64"};
  return std::any_of(std::begin(kAll), std::end(kAll), [&](const char* k) { return s == k; });
}

bool dtype_of_name(const std::string& s, DType& dtype) {
  if (s == "F32")
    dtype = DType::kFloat32;
  else if (s == "F64")
    dtype = DType::kFloat64;
  else if (s == "I64")
    dtype = DType::kInt64;
  else
    return false;
  return true;
}

const char* safetensors_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "F32";
    case DType::kFloat64:
      return "F64";
    case DType::kInt64:
      return "I64";
    case DType::kFloat16:
      return "F16";
    case DType::kBFloat16:
      return "BF16";
  }
  return "?";
}

std::string join(const std::vector<std::string>& v, const char* last) {
  std::string s;
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (k > 0) s += k + 1 == v.size() ? last : ", ";
    s += v[k];
  }
  return s;
}

}  // namespace

std::unique_ptr<ByteSource> open_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, path + ": cannot open (" + std::strerror(errno) + ")");
  }
  // fopen opens a directory for reading on Linux (the reads then fail): refuse anything but
  // a regular file here, by name.
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || fseeko(f, 0, SEEK_END) != 0) {
    std::fclose(f);
    throw Error(ErrorCode::kInvalidArgument, path + ": cannot open (not a regular file)");
  }
  const off_t size = ftello(f);
  if (size < 0) {
    std::fclose(f);
    throw Error(ErrorCode::kInvalidArgument, path + ": cannot open (not a regular file)");
  }
  return std::make_unique<FileSource>(f, static_cast<std::uint64_t>(size), path);
}

std::unique_ptr<ByteSource> wrap_buffer(const void* data, std::size_t size) {
  return std::make_unique<BufferSource>(data, size);
}

json parse_json(std::string_view text) {
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF &&
      static_cast<unsigned char>(text[1]) == 0xBB && static_cast<unsigned char>(text[2]) == 0xBF) {
    throw std::invalid_argument("starts with a UTF-8 byte order mark");
  }
  // One set of keys per open object: a key seen twice in one object is an error (nlohmann
  // would keep the last one silently).
  std::vector<std::set<std::string>> open_objects;
  auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw std::invalid_argument("nests deeper than " + std::to_string(kMaxJsonDepth) +
                                      " levels");
        }
        if (event == json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.back().insert(parsed.get<std::string>()).second) {
          throw std::invalid_argument("duplicate key " + parsed.dump());
        }
        break;
      case json::parse_event_t::object_end:
        open_objects.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  return json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/true,
                     /*ignore_comments=*/false);
}

bool json_int(const json& j, std::int64_t& value) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return false;
    value = static_cast<std::int64_t>(u);
    return true;
  }
  if (j.is_number_integer()) {
    value = j.get<std::int64_t>();
    return true;
  }
  return false;
}

SafetensorsHeader read_header(ByteSource& src, const std::string& where) {
  const std::uint64_t size = src.size();
  if (size < 8) {
    fail(where, "header",
         "the file has " + std::to_string(size) +
             " bytes; a safetensors file starts with an 8-byte header length");
  }
  unsigned char len[8];
  src.read(0, 8, len);
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = n << 8 | len[k];  // little-endian
  if (n > size - 8) {
    fail(where, "header",
         "declares a header of " + std::to_string(n) + " bytes but only " +
             std::to_string(size - 8) + " bytes follow (truncated or not a safetensors file)");
  }
  if (n > kMaxHeaderBytes) {
    fail(where, "header",
         "declares a header of " + std::to_string(n) + " bytes, more than " +
             std::to_string(kMaxHeaderBytes));
  }
  std::string text(n, '\0');
  src.read(8, n, text.data());
  SafetensorsHeader h;
  try {
    h.header = parse_json(text);
  } catch (const std::exception& e) {
    fail(where, "header", std::string("is not valid JSON (") + e.what() + ")");
  }
  if (!h.header.is_object()) {
    fail(where, "header", std::string("must be a JSON object, got ") + h.header.type_name());
  }
  if (auto it = h.header.find("__metadata__"); it != h.header.end()) {
    h.metadata = std::move(*it);
    h.header.erase(it);
  }
  h.data_start = 8 + n;
  h.data_bytes = size - h.data_start;
  return h;
}

std::map<std::string, TensorEntry> read_entries(const SafetensorsHeader& h,
                                                const std::vector<std::string>& accepted,
                                                const std::string& where) {
  std::map<std::string, TensorEntry> entries;
  for (const auto& [name, info] : h.header.items()) {
    const std::string field = "tensor '" + name + "'";
    if (!info.is_object() || info.size() != 3 || !info.contains("dtype") ||
        !info.contains("shape") || !info.contains("data_offsets")) {
      fail(where, field, "must be an object with exactly dtype, shape and data_offsets");
    }
    TensorEntry e;
    const json& st = info["dtype"];
    const std::string st_name = st.is_string() ? st.get<std::string>() : st.dump();
    if (!st.is_string() || std::find(accepted.begin(), accepted.end(), st_name) == accepted.end() ||
        !dtype_of_name(st_name, e.dtype)) {
      fail(where, field + ".dtype",
           "must be " + join(accepted, " or ") + ", got " + st.dump() + " (" +
               (st.is_string() && is_safetensors_dtype(st_name)
                    ? "a safetensors dtype blockrnn does not use here"
                    : "not a safetensors dtype") +
               ")");
    }
    e.st_dtype = st_name;
    const json& shape = info["shape"];
    std::int64_t dims[Shape::kMaxRank] = {};
    bool shape_ok = shape.is_array() && shape.size() <= std::size_t(Shape::kMaxRank);
    for (std::size_t k = 0; shape_ok && k < shape.size(); ++k) {
      shape_ok = json_int(shape[k], dims[k]) && dims[k] >= 0 && dims[k] < (std::int64_t(1) << 62);
    }
    if (!shape_ok) {
      fail(where, field + ".shape",
           "must be a list of at most " + std::to_string(Shape::kMaxRank) +
               " non-negative integers, got " + shape.dump());
    }
    e.shape = Shape::from_dims(dims, static_cast<int>(shape.size()));
    const json& offsets = info["data_offsets"];
    std::int64_t begin = 0, end = 0;
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_integer() ||
        !offsets[1].is_number_integer()) {
      fail(where, field + ".data_offsets", "must be [begin, end], got " + offsets.dump());
    }
    if (!json_int(offsets[0], begin) || !json_int(offsets[1], end) || begin < 0 || begin > end ||
        static_cast<std::uint64_t>(end) > h.data_bytes) {
      fail(where, field + ".data_offsets",
           offsets.dump() + " is outside the " + std::to_string(h.data_bytes) +
               " data bytes of the file (truncated?)");
    }
    // The byte count, saturated at 2^64 (each dim is below 2^62, so no step overflows).
    const unsigned __int128 cap = static_cast<unsigned __int128>(1) << 64;
    unsigned __int128 nbytes = dtype_size(e.dtype);
    for (int k = 0; k < e.shape.rank(); ++k) {
      nbytes = std::min(cap, nbytes * static_cast<unsigned __int128>(e.shape[k]));
    }
    if (nbytes != static_cast<unsigned __int128>(end - begin)) {
      fail(where, field + ".data_offsets",
           "span " + std::to_string(end - begin) + " bytes, but shape " + e.shape.to_string() +
               " of " + st_name + " needs " +
               (nbytes == cap ? std::string("at least 2^64")
                              : std::to_string(static_cast<std::uint64_t>(nbytes))));
    }
    e.begin = static_cast<std::uint64_t>(begin);
    e.end = static_cast<std::uint64_t>(end);
    entries.emplace(name, e);
  }
  std::vector<std::pair<std::pair<std::uint64_t, std::uint64_t>, std::string>> spans;
  for (const auto& [name, e] : entries) spans.push_back({{e.begin, e.end}, name});
  std::sort(spans.begin(), spans.end());
  std::uint64_t pos = 0;
  for (const auto& [span, name] : spans) {
    if (span.first != pos) {
      fail(where, "tensor '" + name + "'.data_offsets",
           "starts at " + std::to_string(span.first) + ", expected " + std::to_string(pos) +
               " (the tensors' bytes must follow each other without gap or overlap)");
    }
    pos = span.second;
  }
  if (pos != h.data_bytes) {
    fail(where, "data",
         "the tensors cover " + std::to_string(pos) + " bytes but " + std::to_string(h.data_bytes) +
             " follow the header");
  }
  return entries;
}

Tensor read_tensor(ByteSource& src, const SafetensorsHeader& h, const TensorEntry& e) {
  Tensor t(e.dtype, e.shape);
  src.read(h.data_start + e.begin, static_cast<std::size_t>(e.end - e.begin), t.data());
  if constexpr (std::endian::native == std::endian::big) {
    const std::size_t w = dtype_size(e.dtype);
    auto* p = static_cast<unsigned char*>(t.data());
    for (std::size_t k = 0; k < t.num_bytes(); k += w) std::reverse(p + k, p + k + w);
  }
  return t;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, TensorView>> sorted = tensors;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    const std::string& name = sorted[k].first;
    // Either would write a header that reads back as something else.
    if (name == "__metadata__") {
      throw Error(ErrorCode::kInvalidArgument,
                  path + ": tensor '__metadata__': the name is the header's metadata key");
    }
    if (k > 0 && sorted[k - 1].first == name) {
      throw Error(ErrorCode::kInvalidArgument, path + ": tensor '" + name + "': named twice");
    }
  }
  for (const auto& [name, t] : sorted) {
    if (t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16) {
      throw Error(ErrorCode::kInvalidArgument,
                  path + ": tensor '" + name + "': " + dtype_name(t.dtype) + " is not written");
    }
    const std::uint64_t nbytes =
        static_cast<std::uint64_t>(t.shape.num_elements()) * dtype_size(t.dtype);
    header[name] = {
        {"dtype", safetensors_name(t.dtype)},
        {"shape", std::vector<std::int64_t>(t.shape.dims(), t.shape.dims() + t.shape.rank())},
        {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  // Metadata that is not valid UTF-8 is written with U+FFFD in its place (JSON text is UTF-8).
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                path + ": cannot write (" + std::strerror(errno) + ")");
  }
  unsigned char len[8];
  for (int k = 0; k < 8; ++k) len[k] = static_cast<unsigned char>(text.size() >> (8 * k));
  bool ok =
      std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const auto& [name, t] : sorted) {
    const std::size_t nbytes =
        static_cast<std::size_t>(t.shape.num_elements()) * dtype_size(t.dtype);
    if (!ok || nbytes == 0) continue;
    if constexpr (std::endian::native == std::endian::big) {
      std::vector<unsigned char> swapped(static_cast<const unsigned char*>(t.data),
                                         static_cast<const unsigned char*>(t.data) + nbytes);
      const std::size_t w = dtype_size(t.dtype);
      for (std::size_t k = 0; k < nbytes; k += w) std::reverse(&swapped[k], &swapped[k] + w);
      ok = std::fwrite(swapped.data(), 1, nbytes, f) == nbytes;
    } else {
      ok = std::fwrite(t.data, 1, nbytes, f) == nbytes;
    }
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kInvalidArgument, path + ": cannot write (" + why + ")");
  }
}

}  // namespace blockrnn::model
