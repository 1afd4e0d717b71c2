// safetensors files read with bounds checks and written, for the model files
// (docs/model-format.md) and the CLI's input and output files.
//
//   u64 N (little-endian) | N bytes: UTF-8 JSON header | data (little-endian, row-major)
//
// Reading checks, before anything but the header is allocated: the header length against the
// file and kMaxHeaderBytes, the JSON (no duplicate keys, no NaN/Infinity, no byte order mark,
// nesting at most kMaxJsonDepth), and each tensor entry: exactly dtype, shape, data_offsets; a
// dtype the caller accepts; at most 8 non-negative dims; the byte range inside the data section
// and matching the shape (computed without overflow); the ranges tiling the data exactly.
// Problems are Error(kInvalidArgument) "<where>: <field>: <what>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "blockrnn/tensor.h"

namespace blockrnn::model {

inline constexpr std::uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;  // as safetensors' reader
inline constexpr int kMaxJsonDepth = 64;                                // a model file nests 4 deep

[[noreturn]] void fail(const std::string& where, const std::string& field,
                       const std::string& message);

// Bytes to read from: a file or a buffer.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual std::uint64_t size() const = 0;
  // Copies n bytes at offset (offset + n <= size()) into dst.
  virtual void read(std::uint64_t offset, std::size_t n, void* dst) = 0;
};
// Opens `path`; Error(kInvalidArgument) "<path>: cannot open (<reason>)".
std::unique_ptr<ByteSource> open_file(const std::string& path);
std::unique_ptr<ByteSource> wrap_buffer(const void* data, std::size_t size);

// Strict JSON: throws std::invalid_argument (duplicate key, nesting too deep, byte order mark)
// or nlohmann::json::exception (syntax, NaN/Infinity, invalid UTF-8).
nlohmann::json parse_json(std::string_view text);

// The integer value of j, when j is a JSON integer that fits in int64.
bool json_int(const nlohmann::json& j, std::int64_t& value);

struct TensorEntry {
  DType dtype = DType::kFloat32;
  std::string st_dtype;  // "F32", "F64", "I64"
  Shape shape;
  std::uint64_t begin = 0, end = 0;  // offsets into the data section
};

struct SafetensorsHeader {
  nlohmann::json header;    // the JSON object, __metadata__ removed
  nlohmann::json metadata;  // __metadata__ (null when absent)
  std::uint64_t data_start = 0, data_bytes = 0;
};

// The header of the source (checks 1 and 2 above).
SafetensorsHeader read_header(ByteSource& src, const std::string& where);
// The tensor entries of header.header (check 3), in name order; `accepted` lists the
// safetensors dtypes the caller reads ("F32", "F64", "I64").
std::map<std::string, TensorEntry> read_entries(const SafetensorsHeader& header,
                                                const std::vector<std::string>& accepted,
                                                const std::string& where);
// The bytes of one entry as a Tensor (native byte order).
Tensor read_tensor(ByteSource& src, const SafetensorsHeader& header, const TensorEntry& entry);

// Writes a safetensors file: the tensors (float32, float64 or int64) sorted by name, the
// metadata as __metadata__, the header padded with spaces to a multiple of 8. Written to a
// temporary file then renamed. Error(kInvalidArgument) naming the path when it cannot.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace blockrnn::model
