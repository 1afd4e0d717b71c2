// blockrnn/model.h — blockrnn model files: a trained recurrent stack in one safetensors file,
// loaded and run on the layer objects of blockrnn/layer.h (no TensorFlow, no PyTorch, no Python).
//
//   blockrnn::Model model = blockrnn::Model::load("model.safetensors");
//   blockrnn::ModelResult r = model.forward(x);          // x [T, B, I] time-major
//   // r.y: [T, B, W] (or [B, W] when the model returns its last step only)
//   // r.final_states[k]: the state described by model.state_info(k), each [B, H]
//
// The file format is docs/model-format.md; the Python package reads and writes the same files
// (blockrnn.load_model, blockrnn.convert) and computes the same results. Loading checks the
// whole file before it allocates anything for the tensors: the header length against the file,
// the JSON, every tensor's bytes inside the data section and matching its dtype and shape (no
// gap, no overlap), the configuration (every field's type and range, no unknown field), every
// tensor against the configuration, and every weight finite. Any problem is
// Error(kInvalidArgument) "<file>: <field>: <what is wrong>"; a file whose weights would exceed
// get_memory_limit() is Error(kResourceExhausted). The weights are packed once, at load, into
// one layer object per (layer, direction).
//
// A Model runs one call at a time (its layer objects are shared by the calls): use one Model
// per thread, or serialise the calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "blockrnn/export.h"
#include "blockrnn/tensor.h"

namespace blockrnn {

// The op of a layer (the file's "kind").
enum class ModelLayerKind : std::uint8_t {
  kBlockLSTM,           // gates i, c, f, o (TensorFlow's); forget_bias added at run time
  kBlockLSTMV2,         // gates i, f, c, o (PyTorch's); no forget bias
  kBlockGRU,            // TensorFlow's reset-before GRU (Keras reset_after=False)
  kBlockGRUResetAfter,  // PyTorch's GRU, Keras' default GRU
};
BLOCKRNN_API const char* model_layer_kind_name(ModelLayerKind kind) noexcept;  // "BlockLSTM", ...

// How the two directions of a bidirectional layer are combined (the file's "merge").
enum class MergeMode : std::uint8_t {
  kNone,    // one direction
  kConcat,  // [forward, reverse] on the feature axis: width 2H
  kSum,     // forward + reverse
  kMul,     // forward ⊙ reverse
  kAve,     // (forward + reverse) / 2
};

// One layer of a model file (docs/model-format.md, "Each layer").
struct ModelLayerConfig {
  ModelLayerKind kind = ModelLayerKind::kBlockLSTM;
  std::int64_t input_size = 0;   // I_l: the model's input size, or the previous layer's width
  std::int64_t hidden_size = 0;  // H
  int directions = 1;            // 1, or 2 (forward and reverse)
  MergeMode merge = MergeMode::kNone;
  bool go_backwards = false;        // 1 direction only: the layer reads each example backwards
  bool hold_padded_output = false;  // padded_output "hold" (true) or "zero" (false)
  double forget_bias = 0.0;         // LSTM kinds
  std::optional<double> cell_clip;  // LSTM kinds; unset: no clipping
  bool use_peephole = false;        // LSTM kinds
  std::string name;                 // the source layer's name, may be empty

  bool is_lstm() const noexcept {
    return kind == ModelLayerKind::kBlockLSTM || kind == ModelLayerKind::kBlockLSTMV2;
  }
  // Width of the layer's output: 2H for two directions merged by concat, else H.
  std::int64_t output_size() const noexcept {
    return directions == 2 && merge == MergeMode::kConcat ? 2 * hidden_size : hidden_size;
  }
};

// The configuration of a model file (docs/model-format.md, "Configuration").
struct ModelConfig {
  DType dtype = DType::kFloat32;  // kFloat32 or kFloat64: the weights' and the computation's
  std::int64_t input_size = 0;
  bool return_sequences = true;
  std::optional<double> mask_value;  // set: a Keras Masking layer in front of the stack
  std::vector<ModelLayerConfig> layers;
  std::vector<std::pair<std::string, std::string>> source;  // informational
  std::vector<std::string> not_converted;                   // informational
};

// One entry of the flat list of states (initial and final): layer by layer, direction by
// direction; an LSTM layer's direction has two entries, "cs" then "h", a GRU layer's one, "h".
struct ModelStateInfo {
  std::int64_t layer = 0;
  int direction = 0;
  const char* name = "h";  // "cs" or "h"
  std::int64_t hidden_size = 0;
};

struct ModelInputs {
  TensorView x;            // [T, B, I] in the model's dtype
  TensorView seq_lengths;  // [B] int64 in [0, T]; absent: T for every example, or, with
                           // masking, the lengths the mask gives
  // Empty: every initial state zero. Otherwise num_states() views, each [B, H] in the model's
  // dtype or absent (that state zero).
  std::span<const TensorView> initial_states;
};

struct ModelOutputs {
  MutableTensorView y;  // output_shape(T, B), the model's dtype
  // Empty: the final states are not written. Otherwise num_states() views, each [B, H] in the
  // model's dtype or absent (that state not written).
  std::span<const MutableTensorView> final_states;
};

struct ModelResult {
  Tensor y;
  std::vector<Tensor> final_states;  // num_states() tensors, [B, H] each
};

class BLOCKRNN_API Model {
 public:
  struct Impl;
  // Reads a model file. `path` is the name used in messages.
  static Model load(const std::string& path);
  // Reads a model file held in memory (size bytes at data); `name` is used in messages.
  static Model load_buffer(const void* data, std::size_t size, const std::string& name);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelConfig& config() const noexcept;
  DType dtype() const noexcept;
  std::int64_t input_size() const noexcept;
  std::int64_t output_size() const noexcept;  // W: the last layer's output width
  // [T, B, W], or [B, W] when the model returns its last step only.
  Shape output_shape(std::int64_t T, std::int64_t B) const;
  std::int64_t num_states() const noexcept;
  ModelStateInfo state_info(std::int64_t k) const;  // k in [0, num_states())
  // The weights as read from the file: layer l, direction d, parameter `param` ("w", "b_ru",
  // ... as docs/model-format.md names them); Error(kInvalidArgument) for an unknown one.
  TensorView weight(std::int64_t layer, int direction, const std::string& param) const;
  // A few lines describing the model (what `blockrnn info` prints).
  std::string summary() const;

  // Runs the stack (docs/model-format.md, "Semantics"). Every view is checked first
  // (Error(kInvalidArgument) "Model.forward: <argument> ..."), then the memory the call needs
  // against get_memory_limit() (Error(kResourceExhausted)), before anything is allocated.
  void forward(const ModelInputs& in, const ModelOutputs& out);
  // The same, allocating the output and every final state.
  ModelResult forward(TensorView x, TensorView seq_lengths = {},
                      std::span<const TensorView> initial_states = {});

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Plain safetensors files of float32, float64 and int64 tensors (what `blockrnn run` reads and
// writes), read with the model reader's bounds checks: the header length, the JSON, every
// tensor's dtype (F32, F64 or I64), shape and bytes inside the file, no gap or overlap. A bad
// file is Error(kInvalidArgument) "<path>: <field>: <what>". __metadata__ is ignored.
BLOCKRNN_API std::map<std::string, Tensor> load_tensors(const std::string& path);
// Writes the tensors (float32, float64 or int64; sorted by name, data 8-byte aligned) to a
// temporary file renamed to `path`; Error(kInvalidArgument) naming the path when it cannot.
BLOCKRNN_API void save_tensors(const std::string& path,
                               const std::vector<std::pair<std::string, TensorView>>& tensors);

// A safetensors file's tensors with its "__metadata__" (string keys, string values).
struct TensorFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};
// load_tensors() that also returns the __metadata__ object, whose every value must be a string
// (Error(kInvalidArgument) "<path>: __metadata__.<key>: must be a string, got ...").
BLOCKRNN_API TensorFile load_tensor_file(const std::string& path);
// save_tensors() that also writes `metadata` as the file's __metadata__ (text that is not valid
// UTF-8 is written with U+FFFD in place of the bad bytes).
BLOCKRNN_API void save_tensors(const std::string& path,
                               const std::vector<std::pair<std::string, TensorView>>& tensors,
                               const std::map<std::string, std::string>& metadata);

}  // namespace blockrnn
