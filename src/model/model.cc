// blockrnn::Model: reading a model file (docs/model-format.md) with every check of the Python
// reader (python/blockrnn/model.py), and running the stack on the layer objects.
#include "blockrnn/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/layer.h"
#include "blockrnn/ops.h"
#include "model/safetensors.h"

namespace blockrnn {

using model::fail;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "blockrnn-model";
constexpr std::int64_t kVersion = 1;
constexpr const char* kMetadataKey = "blockrnn";
constexpr std::size_t kMaxLayers = 4096;
constexpr std::int64_t kLoadBound = std::int64_t(1) << 16;  // see layer_bound

struct KindInfo {
  ModelLayerKind kind;
  const char* name;
};
constexpr KindInfo kKinds[] = {
    {ModelLayerKind::kBlockLSTM, "BlockLSTM"},
    {ModelLayerKind::kBlockLSTMV2, "BlockLSTMV2"},
    {ModelLayerKind::kBlockGRU, "BlockGRU"},
    {ModelLayerKind::kBlockGRUResetAfter, "BlockGRUResetAfter"},
};

const char* merge_name(MergeMode m) {
  switch (m) {
    case MergeMode::kConcat:
      return "concat";
    case MergeMode::kSum:
      return "sum";
    case MergeMode::kMul:
      return "mul";
    case MergeMode::kAve:
      return "ave";
    case MergeMode::kNone:
      break;
  }
  return "none";
}

// A JSON number that is not a bool (nlohmann keeps the two apart).
bool json_number(const json& j, double& value) {
  if (!j.is_number()) return false;
  value = j.get<double>();
  return true;
}

// Parameter names of one direction, in set_weights' order, and their shapes.
std::vector<std::pair<std::string, Shape>> param_shapes(const ModelLayerConfig& c) {
  const std::int64_t I = c.input_size, H = c.hidden_size;
  switch (c.kind) {
    case ModelLayerKind::kBlockLSTM:
    case ModelLayerKind::kBlockLSTMV2: {
      std::vector<std::pair<std::string, Shape>> p = {{"w", Shape{I + H, 4 * H}},
                                                      {"b", Shape{4 * H}}};
      if (c.use_peephole) {
        p.push_back({"wci", Shape{H}});
        p.push_back({"wcf", Shape{H}});
        p.push_back({"wco", Shape{H}});
      }
      return p;
    }
    case ModelLayerKind::kBlockGRU:
      return {{"w_ru", Shape{I + H, 2 * H}},
              {"w_c", Shape{I + H, H}},
              {"b_ru", Shape{2 * H}},
              {"b_c", Shape{H}}};
    case ModelLayerKind::kBlockGRUResetAfter:
      return {{"w_i", Shape{I, 3 * H}},
              {"w_h", Shape{H, 3 * H}},
              {"b_i", Shape{3 * H}},
              {"b_h", Shape{3 * H}}};
  }
  return {};
}

std::string tensor_name(std::size_t l, int d, const std::string& p) {
  return "layers." + std::to_string(l) + "." + std::to_string(d) + "." + p;
}

ModelLayerConfig parse_layer(const json& d, std::size_t l, const std::string& where) {
  const std::string field = "layers[" + std::to_string(l) + "]";
  if (!d.is_object())
    fail(where, field, std::string("must be a JSON object, got ") + d.type_name());
  ModelLayerConfig c;
  const json kind = d.contains("kind") ? d["kind"] : json();
  const KindInfo* info = nullptr;
  for (const KindInfo& k : kKinds) {
    if (kind.is_string() && kind.get<std::string>() == k.name) info = &k;
  }
  if (info == nullptr) {
    fail(where, field + ".kind",
         "must be one of BlockLSTM, BlockLSTMV2, BlockGRU, BlockGRUResetAfter, got " + kind.dump());
  }
  c.kind = info->kind;
  std::vector<std::string> required = {"kind",  "hidden_size",  "directions",
                                       "merge", "go_backwards", "padded_output"};
  if (c.is_lstm()) {
    for (const char* k : {"forget_bias", "cell_clip", "use_peephole"}) required.push_back(k);
  }
  for (const auto& [key, value] : d.items()) {
    if (key != "name" && std::find(required.begin(), required.end(), key) == required.end()) {
      fail(where, field + "." + key,
           std::string("is not a field of a ") + info->name + " layer (format version 1)");
    }
  }
  for (const std::string& key : required) {
    if (!d.contains(key)) fail(where, field + "." + key, "is missing");
  }
  if (!model::json_int(d["hidden_size"], c.hidden_size) || c.hidden_size < 1) {
    fail(where, field + ".hidden_size", "must be an integer >= 1, got " + d["hidden_size"].dump());
  }
  std::int64_t D = 0;
  if (!model::json_int(d["directions"], D) || (D != 1 && D != 2)) {
    fail(where, field + ".directions", "must be 1 or 2, got " + d["directions"].dump());
  }
  c.directions = static_cast<int>(D);
  const json& merge = d["merge"];
  if (D == 1 && !merge.is_null()) {
    fail(where, field + ".merge", "must be null for a layer of 1 direction, got " + merge.dump());
  }
  if (D == 2) {
    const std::string m = merge.is_string() ? merge.get<std::string>() : "";
    if (m == "concat")
      c.merge = MergeMode::kConcat;
    else if (m == "sum")
      c.merge = MergeMode::kSum;
    else if (m == "mul")
      c.merge = MergeMode::kMul;
    else if (m == "ave")
      c.merge = MergeMode::kAve;
    else {
      fail(where, field + ".merge",
           "must be one of concat, sum, mul, ave for a layer of 2 directions, got " + merge.dump());
    }
  }
  const json& gb = d["go_backwards"];
  if (!gb.is_boolean())
    fail(where, field + ".go_backwards", "must be true or false, got " + gb.dump());
  c.go_backwards = gb.get<bool>();
  if (c.go_backwards && D == 2) {
    fail(where, field + ".go_backwards",
         "must be false for a layer of 2 directions (the second direction is the reverse one)");
  }
  const json& po = d["padded_output"];
  if (po != "zero" && po != "hold") {
    fail(where, field + ".padded_output", "must be one of zero, hold, got " + po.dump());
  }
  c.hold_padded_output = po == "hold";
  if (d.contains("name")) {
    if (!d["name"].is_string()) {
      fail(where, field + ".name", "must be a string, got " + d["name"].dump());
    }
    c.name = d["name"].get<std::string>();
  }
  if (c.is_lstm()) {
    double fb = 0;
    if (!json_number(d["forget_bias"], fb) || !std::isfinite(fb)) {
      fail(where, field + ".forget_bias",
           "must be a finite number, got " + d["forget_bias"].dump());
    }
    if (c.kind == ModelLayerKind::kBlockLSTMV2 && fb != 0) {
      fail(where, field + ".forget_bias",
           "must be 0 for BlockLSTMV2 (the op has no forget bias), got " + d["forget_bias"].dump());
    }
    c.forget_bias = fb;
    const json& clip = d["cell_clip"];
    if (!clip.is_null()) {
      double v = 0;
      if (!json_number(clip, v) || !std::isfinite(v) || v <= 0) {
        fail(where, field + ".cell_clip",
             "must be null (no clipping) or a finite number > 0, got " + clip.dump());
      }
      c.cell_clip = v;
    }
    if (!d["use_peephole"].is_boolean()) {
      fail(where, field + ".use_peephole",
           "must be true or false, got " + d["use_peephole"].dump());
    }
    c.use_peephole = d["use_peephole"].get<bool>();
  }
  return c;
}

ModelConfig parse_config(const json& cfg, const std::string& where) {
  if (!cfg.is_object()) {
    fail(where, kMetadataKey, std::string("must be a JSON object, got ") + cfg.type_name());
  }
  const json format = cfg.contains("format") ? cfg["format"] : json();
  if (format != kFormat) fail(where, "format", "must be \"blockrnn-model\", got " + format.dump());
  const json version = cfg.contains("version") ? cfg["version"] : json();
  std::int64_t v = 0;
  if (!model::json_int(version, v) || v != kVersion) {
    fail(where, "version", "must be 1 (this blockrnn reads version 1), got " + version.dump());
  }
  static const std::set<std::string> kRequired = {
      "format",           "version", "dtype",  "input_size",
      "return_sequences", "masking", "layers", "source"};
  for (const auto& [key, value] : cfg.items()) {
    if (!kRequired.count(key) && key != "not_converted") {
      fail(where, key, "is not a field of format version 1");
    }
  }
  for (const char* key : {"format", "version", "dtype", "input_size", "return_sequences", "masking",
                          "layers", "source"}) {
    if (!cfg.contains(key)) fail(where, key, "is missing");
  }
  ModelConfig c;
  const json& dtype = cfg["dtype"];
  if (dtype == "float32")
    c.dtype = DType::kFloat32;
  else if (dtype == "float64")
    c.dtype = DType::kFloat64;
  else
    fail(where, "dtype", "must be \"float32\" or \"float64\", got " + dtype.dump());
  if (!model::json_int(cfg["input_size"], c.input_size) || c.input_size < 1) {
    fail(where, "input_size", "must be an integer >= 1, got " + cfg["input_size"].dump());
  }
  if (!cfg["return_sequences"].is_boolean()) {
    fail(where, "return_sequences", "must be true or false, got " + cfg["return_sequences"].dump());
  }
  c.return_sequences = cfg["return_sequences"].get<bool>();
  const json& masking = cfg["masking"];
  if (!masking.is_null()) {
    if (!masking.is_object() || masking.size() != 1 || !masking.contains("mask_value")) {
      fail(where, "masking", "must be null or {\"mask_value\": number}, got " + masking.dump());
    }
    double mv = 0;
    if (!json_number(masking["mask_value"], mv) || !std::isfinite(mv)) {
      fail(where, "masking.mask_value",
           "must be a finite number, got " + masking["mask_value"].dump());
    }
    c.mask_value = mv;
  }
  const json& layers = cfg["layers"];
  if (!layers.is_array() || layers.empty() || layers.size() > kMaxLayers) {
    fail(where, "layers",
         "must be a list of 1 to 4096 layers, got " +
             (layers.is_array() ? std::to_string(layers.size()) + " entries" : layers.dump()));
  }
  std::int64_t I = c.input_size;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    c.layers.push_back(parse_layer(layers[l], l, where));
    c.layers.back().input_size = I;
    I = c.layers.back().output_size();
  }
  const json& source = cfg["source"];
  bool source_ok = source.is_object();
  for (auto it = source.begin(); source_ok && it != source.end(); ++it) {
    source_ok = it.value().is_string();
    if (source_ok) c.source.push_back({it.key(), it.value().get<std::string>()});
  }
  if (!source_ok) fail(where, "source", "must be a JSON object of strings, got " + source.dump());
  if (cfg.contains("not_converted")) {
    const json& nc = cfg["not_converted"];
    bool ok = nc.is_array();
    for (std::size_t k = 0; ok && k < nc.size(); ++k) {
      ok = nc[k].is_string();
      if (ok) c.not_converted.push_back(nc[k].get<std::string>());
    }
    if (!ok) fail(where, "not_converted", "must be a list of strings, got " + nc.dump());
  }
  return c;
}

// Every tensor the configuration needs, present with the model's dtype and shape, and no other.
void check_tensors(const ModelConfig& c, const std::map<std::string, model::TensorEntry>& declared,
                   const std::string& where) {
  std::set<std::string> expected;
  const char* st = c.dtype == DType::kFloat32 ? "F32" : "F64";
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    for (int d = 0; d < c.layers[l].directions; ++d) {
      for (const auto& [p, shape] : param_shapes(c.layers[l])) {
        const std::string name = tensor_name(l, d, p);
        expected.insert(name);
        const auto it = declared.find(name);
        if (it == declared.end()) fail(where, "tensor '" + name + "'", "is missing");
        if (it->second.dtype != c.dtype) {
          fail(where, "tensor '" + name + "'.dtype",
               std::string("must be ") + st + " (the model's dtype is " + dtype_name(c.dtype) +
                   "), got " + it->second.st_dtype);
        }
        if (it->second.shape != shape) {
          fail(where, "tensor '" + name + "'.shape",
               "must be " + shape.to_string() + " (from the configuration), got " +
                   it->second.shape.to_string());
        }
      }
    }
  }
  for (const auto& [name, entry] : declared) {
    if (!expected.count(name)) {
      fail(where, "tensor '" + name + "'", "is not a parameter of the configured layers");
    }
  }
}

template <typename S>
bool all_finite(const Tensor& t) {
  const S* p = static_cast<const S*>(t.data());
  for (std::int64_t e = 0; e < t.num_elements(); ++e) {
    if (!std::isfinite(p[e])) return false;
  }
  return true;
}

// The largest T and B the layer objects made at load are created for. They take the workspace
// from each call (caller_workspace), so the bound costs no memory; a call past it gets layer
// objects made (and weights packed) for that call. The layer refuses bounds whose workspace
// could not be counted (T·B·(I + 8H + 64) > 1e17), hence the square root for huge layers.
std::int64_t layer_bound(std::int64_t I, std::int64_t H) {
  const double b = std::floor(std::sqrt(1e16 / double(I + 8 * H + 64)));
  return static_cast<std::int64_t>(std::max(1.0, std::min(b, double(kLoadBound))));
}

}  // namespace

const char* model_layer_kind_name(ModelLayerKind kind) noexcept {
  for (const KindInfo& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

// One direction of one layer: its weights (as read) and its layer object (weights packed).
struct DirectionPlan {
  std::vector<std::pair<std::string, Tensor>> weights;  // set_weights' order
  std::unique_ptr<LSTMLayer> lstm;
  std::unique_ptr<GRULayer> gru;
  std::unique_ptr<GRUResetAfterLayer> gru_reset_after;
};

struct Model::Impl {
  ModelConfig config;
  std::vector<std::vector<DirectionPlan>> plans;  // [layer][direction]
  std::vector<ModelStateInfo> states;
};

namespace {

// Creates plan's layer object for config c, sized for (T, B), and sets (packs) `weights`.
void build_layer(const ModelLayerConfig& c, DType dtype, std::int64_t T, std::int64_t B,
                 const std::vector<std::pair<std::string, Tensor>>& weights, DirectionPlan& plan) {
  LayerShape shape;
  shape.input_size = c.input_size;
  shape.hidden_size = c.hidden_size;
  shape.dtype = dtype;
  shape.max_time = T;
  shape.max_batch = B;
  shape.caller_workspace = true;
  std::vector<TensorView> w;
  for (const auto& [name, t] : weights) w.push_back(t.view());
  if (c.is_lstm()) {
    LSTMLayerAttrs attrs;
    attrs.v2 = c.kind == ModelLayerKind::kBlockLSTMV2;
    if (!attrs.v2) attrs.forget_bias = c.forget_bias;
    attrs.cell_clip = c.cell_clip.value_or(0.0);  // 0 disables clipping in both LSTM ops
    attrs.use_peephole = c.use_peephole;
    plan.lstm = std::make_unique<LSTMLayer>(shape, attrs);
    if (c.use_peephole)
      plan.lstm->set_weights(w[0], w[1], w[2], w[3], w[4]);
    else
      plan.lstm->set_weights(w[0], w[1]);
  } else if (c.kind == ModelLayerKind::kBlockGRU) {
    plan.gru = std::make_unique<GRULayer>(shape);
    plan.gru->set_weights(w[0], w[1], w[2], w[3]);
  } else {
    plan.gru_reset_after = std::make_unique<GRUResetAfterLayer>(shape);
    plan.gru_reset_after->set_weights(w[0], w[1], w[2], w[3]);
  }
}

Model::Impl* load_impl(model::ByteSource& src, const std::string& where) {
  const model::SafetensorsHeader h = model::read_header(src, where);
  const json& meta = h.metadata;
  if (!meta.is_object()) {
    fail(where, "__metadata__",
         meta.is_null() ? "is missing (not a blockrnn model file)"
                        : std::string("must be a JSON object of strings, got ") + meta.type_name());
  }
  const std::string key = std::string("__metadata__.") + kMetadataKey;
  if (!meta.contains(kMetadataKey)) {
    std::string keys;
    for (const auto& [k, v] : meta.items()) keys += (keys.empty() ? "'" : ", '") + k + "'";
    fail(where, key,
         "is missing (not a blockrnn model file; metadata keys: " +
             (keys.empty() ? std::string("none") : keys) + ")");
  }
  if (!meta[kMetadataKey].is_string()) fail(where, key, "must be a string holding JSON");
  json cfg;
  try {
    cfg = model::parse_json(meta[kMetadataKey].get<std::string>());
  } catch (const std::exception& e) {
    fail(where, key, std::string("is not valid JSON (") + e.what() + ")");
  }
  const auto entries = model::read_entries(h, {"F32", "F64"}, where);
  auto impl = std::make_unique<Model::Impl>();
  impl->config = parse_config(cfg, where);
  const ModelConfig& c = impl->config;
  check_tensors(c, entries, where);
  // The file's tensors are held once as read and twice in each layer object (its copy and its
  // packed form): at most three times the data section, checked before anything is read.
  const long double need = 3.0L * static_cast<long double>(h.data_bytes);
  if (need > static_cast<long double>(get_memory_limit())) {
    throw Error(ErrorCode::kResourceExhausted,
                where + ": data: the weights (" + std::to_string(h.data_bytes) +
                    " bytes) need about " + std::to_string(static_cast<long long>(need)) +
                    " bytes once packed, more than the memory limit of " +
                    std::to_string(get_memory_limit()) + " bytes (set_memory_limit)");
  }
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const ModelLayerConfig& lc = c.layers[l];
    impl->plans.emplace_back(lc.directions);
    for (int d = 0; d < lc.directions; ++d) {
      DirectionPlan& plan = impl->plans[l][d];
      for (const auto& [p, shape] : param_shapes(lc)) {
        const std::string name = tensor_name(l, d, p);
        Tensor t = model::read_tensor(src, h, entries.at(name));
        const bool finite =
            c.dtype == DType::kFloat32 ? all_finite<float>(t) : all_finite<double>(t);
        if (!finite) fail(where, "tensor '" + name + "'", "holds NaN or infinite values");
        plan.weights.push_back({p, std::move(t)});
      }
      const std::int64_t bound = layer_bound(lc.input_size, lc.hidden_size);
      build_layer(lc, c.dtype, bound, bound, plan.weights, plan);
      for (const char* part : {"cs", "h"}) {
        if (part == std::string("cs") && !lc.is_lstm()) continue;
        impl->states.push_back({static_cast<std::int64_t>(l), d, part, lc.hidden_size});
      }
    }
  }
  return impl.release();
}

// ---- forward ----------------------------------------------------------------------------------

// Reading order of each example: position t of a reversed sequence reads step src(t, b) of the
// time-ordered one (each example backwards within its length; padded steps stay in place).
struct Reverser {
  std::int64_t T = 0, B = 0;
  const std::vector<std::int64_t>* lengths = nullptr;  // null: every example runs T steps
  std::int64_t src(std::int64_t t, std::int64_t b) const {
    if (lengths == nullptr) return T - 1 - t;
    const std::int64_t L = (*lengths)[b];
    return t < L ? L - 1 - t : t;
  }
  template <typename S>
  std::vector<S> apply(const S* a, std::int64_t F) const {
    std::vector<S> out(static_cast<std::size_t>(T * B * F));
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t b = 0; b < B; ++b) {
        std::copy_n(a + (src(t, b) * B + b) * F, F, out.data() + (t * B + b) * F);
      }
    }
    return out;
  }
};

template <typename S>
void merge_into(const std::vector<const S*>& outs, MergeMode merge, std::int64_t rows,
                std::int64_t H, S* dst) {
  if (outs.size() == 1) {
    std::copy_n(outs[0], rows * H, dst);
    return;
  }
  const S* a = outs[0];
  const S* b = outs[1];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < H; ++j) {
      const S x = a[r * H + j], y = b[r * H + j];
      switch (merge) {
        case MergeMode::kConcat:
          dst[r * 2 * H + j] = x;
          dst[r * 2 * H + H + j] = y;
          break;
        case MergeMode::kSum:
          dst[r * H + j] = x + y;
          break;
        case MergeMode::kMul:
          dst[r * H + j] = x * y;
          break;
        case MergeMode::kAve:
        case MergeMode::kNone:
          dst[r * H + j] = (x + y) / S(2);
          break;
      }
    }
  }
}

// The checked per-call data.
struct Call {
  std::int64_t T = 0, B = 0;
  std::vector<std::int64_t> lengths;  // empty: every example runs T steps
  bool has_lengths = false;
};

[[noreturn]] void forward_fail(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, "Model.forward: " + message);
}

template <typename S>
std::vector<std::int64_t> lengths_from_mask(const S* x, std::int64_t T, std::int64_t B,
                                            std::int64_t I, double mask_value) {
  const S mv = static_cast<S>(mask_value);
  std::vector<char> keep(static_cast<std::size_t>(T * B));
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(B), 0);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t b = 0; b < B; ++b) {
      const S* row = x + (t * B + b) * I;
      keep[t * B + b] = std::any_of(row, row + I, [&](S v) { return v != mv; });
      if (keep[t * B + b]) lengths[b] = t + 1;
    }
  }
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t b = 0; b < B; ++b) {
      if (bool(keep[t * B + b]) == (t < lengths[b])) continue;
      std::int64_t first_masked = 0;
      while (keep[first_masked * B + b]) ++first_masked;
      char mvs[64];
      std::snprintf(mvs, sizeof mvs, "%g", mask_value);
      forward_fail("x: the mask of the Masking layer (mask_value=" + std::string(mvs) +
                   ") of example " + std::to_string(b) + " is not a suffix: step " +
                   std::to_string(first_masked) + " is masked and step " +
                   std::to_string(lengths[b] - 1) +
                   " is not; blockrnn runs per-example lengths only (pad at the end, or pass "
                   "seq_lengths)");
    }
  }
  return lengths;
}

// Bytes a forward call allocates at most at once: the layer with the largest need holds its
// input, the reversed input, each direction's op outputs, workspace and reordered output, and
// the merged output.
long double forward_bytes(const Model::Impl& m, std::int64_t T, std::int64_t B) {
  const long double TB = static_cast<long double>(T) * static_cast<long double>(B);
  const long double elem = static_cast<long double>(dtype_size(m.config.dtype));
  long double most = 0;
  for (std::size_t l = 0; l < m.config.layers.size(); ++l) {
    const ModelLayerConfig& c = m.config.layers[l];
    const long double H = static_cast<long double>(c.hidden_size);
    const int n_out = c.is_lstm() ? 7 : (c.kind == ModelLayerKind::kBlockGRU ? 4 : 5);
    long double bytes = TB * (2.0L * c.input_size + c.output_size()) * elem;
    // The layer objects' workspace bound: at most T·B·(I + 8H + 64) elements.
    const long double ws = TB * (c.input_size + 8 * H + 64) * elem;
    bytes += c.directions * (TB * H * (n_out + 2) * elem + ws + 4 * B * H * elem);
    most = std::max(most, bytes);
  }
  return most;
}

template <typename S>
void run(Model::Impl& m, const ModelInputs& in, const ModelOutputs& out, const Call& call) {
  const ModelConfig& cfg = m.config;
  const std::int64_t T = call.T, B = call.B;
  const std::vector<std::int64_t>* lengths = call.has_lengths ? &call.lengths : nullptr;
  const Reverser rev{T, B, lengths};
  TensorView lengths_view;
  if (lengths != nullptr) lengths_view = TensorView(lengths->data(), Shape{B});

  std::vector<S> inp(static_cast<const S*>(in.x.data),
                     static_cast<const S*>(in.x.data) + T * B * cfg.input_size);
  std::vector<std::vector<S>> lasts;  // each direction's output at its last reading step [B, H]
  std::size_t state_index = 0;
  for (std::size_t l = 0; l < cfg.layers.size(); ++l) {
    const ModelLayerConfig& c = cfg.layers[l];
    const std::int64_t I = c.input_size, H = c.hidden_size;
    std::vector<std::vector<S>> seqs;
    lasts.clear();
    for (int d = 0; d < c.directions; ++d) {
      const bool backwards = d == 1 || c.go_backwards;
      std::vector<S> reversed;
      if (backwards) reversed = rev.apply(inp.data(), I);
      const S* xin = backwards ? reversed.data() : inp.data();
      const TensorView x_view(xin, Shape{T, B, I});
      // The initial states of this direction (zeros where not given).
      const int parts = c.is_lstm() ? 2 : 1;  // LSTM: cs, h
      std::vector<S> zeros(static_cast<std::size_t>(B * H), S(0));
      std::vector<TensorView> init(parts);
      for (int k = 0; k < parts; ++k) {
        const std::size_t idx = state_index + k;
        const bool given = !in.initial_states.empty() && !is_absent_input(in.initial_states[idx]);
        init[k] = given ? in.initial_states[idx] : TensorView(zeros.data(), Shape{B, H});
      }
      DirectionPlan& plan = m.plans[l][d];
      // The layer object: the one made at load, or, past its bound, one made for this call.
      DirectionPlan call_plan;
      const std::int64_t bound = layer_bound(I, H);
      DirectionPlan* use = &plan;
      if (T > bound || B > bound) {
        build_layer(c, cfg.dtype, T, B, plan.weights, call_plan);
        use = &call_plan;
      }
      const int n_out = c.is_lstm() ? 7 : (c.kind == ModelLayerKind::kBlockGRU ? 4 : 5);
      std::vector<std::vector<S>> outs(n_out, std::vector<S>(static_cast<std::size_t>(T * B * H)));
      auto mv = [&](int k) { return MutableTensorView(outs[k].data(), Shape{T, B, H}); };
      const SequenceLayer& obj = use->lstm  ? static_cast<const SequenceLayer&>(*use->lstm)
                                 : use->gru ? static_cast<const SequenceLayer&>(*use->gru)
                                            : *use->gru_reset_after;
      const std::size_t ws_bytes = obj.workspace_bytes(T, B);
      std::vector<S> ws(ws_bytes / sizeof(S) + 1);
      const LayerWorkspace workspace{ws.data(), ws.size() * sizeof(S)};
      const S* h_out = nullptr;
      const S* cs_out = nullptr;
      if (use->lstm) {
        LSTMLayerInputs li;
        li.x = x_view;
        li.cs_prev = init[0];
        li.h_prev = init[1];
        li.seq_lengths = lengths_view;
        use->lstm->forward(li, {mv(0), mv(1), mv(2), mv(3), mv(4), mv(5), mv(6)}, workspace);
        h_out = outs[6].data();
        cs_out = outs[1].data();
      } else if (use->gru) {
        GRULayerInputs gi;
        gi.x = x_view;
        gi.h_prev = init[0];
        gi.seq_lengths = lengths_view;
        use->gru->forward(gi, {mv(0), mv(1), mv(2), mv(3)}, workspace);
        h_out = outs[3].data();
      } else {
        GRULayerInputs gi;
        gi.x = x_view;
        gi.h_prev = init[0];
        gi.seq_lengths = lengths_view;
        use->gru_reset_after->forward(gi, {mv(0), mv(1), mv(2), mv(3), mv(4)}, workspace);
        h_out = outs[4].data();
      }
      // Final states: each example's state after its last reading step (its initial state
      // when it has no step).
      const S* seq_of_part[2] = {c.is_lstm() ? cs_out : h_out, h_out};
      for (int k = 0; k < parts; ++k) {
        const std::size_t idx = state_index + k;
        if (out.final_states.empty() || is_absent_input(out.final_states[idx])) continue;
        const S* seq = parts == 2 ? seq_of_part[k] : h_out;
        S* dst = static_cast<S*>(out.final_states[idx].data);
        const S* first = static_cast<const S*>(init[k].data);
        for (std::int64_t b = 0; b < B; ++b) {
          const std::int64_t L = lengths != nullptr ? (*lengths)[b] : T;
          const S* src = L > 0 ? seq + ((L - 1) * B + b) * H : first + b * H;
          std::copy_n(src, H, dst + b * H);
        }
      }
      std::vector<S> h_seq(h_out, h_out + T * B * H);
      std::vector<S> last(static_cast<std::size_t>(B * H), S(0));
      if (backwards) {
        h_seq = rev.apply(h_seq.data(), H);                        // back in time order
        if (T > 0) std::copy_n(h_seq.data(), B * H, last.data());  // its last reading step
        if (c.go_backwards) {  // the output in reading order: flipped along the whole time axis
          std::vector<S> flipped(h_seq.size());
          for (std::int64_t t = 0; t < T; ++t) {
            std::copy_n(h_seq.data() + (T - 1 - t) * B * H, B * H, flipped.data() + t * B * H);
          }
          h_seq = std::move(flipped);
        }
      } else {
        if (c.hold_padded_output && lengths != nullptr) {
          for (std::int64_t b = 0; b < B; ++b) {
            const std::int64_t L = (*lengths)[b];
            for (std::int64_t t = L; t < T; ++t) {
              S* dst = h_seq.data() + (t * B + b) * H;
              if (L > 0)
                std::copy_n(h_seq.data() + ((L - 1) * B + b) * H, H, dst);
              else
                std::fill_n(dst, H, S(0));
            }
          }
        }
        if (T > 0) std::copy_n(h_seq.data() + (T - 1) * B * H, B * H, last.data());
      }
      seqs.push_back(std::move(h_seq));
      lasts.push_back(std::move(last));
      state_index += parts;
    }
    std::vector<const S*> ptrs;
    for (const auto& s : seqs) ptrs.push_back(s.data());
    const bool last_layer = l + 1 == cfg.layers.size();
    if (last_layer && cfg.return_sequences) {
      merge_into(ptrs, c.merge, T * B, H, static_cast<S*>(out.y.data));
    } else if (!last_layer) {
      std::vector<S> next(static_cast<std::size_t>(T * B * c.output_size()));
      merge_into(ptrs, c.merge, T * B, H, next.data());
      inp = std::move(next);
    }
  }
  if (!cfg.return_sequences) {
    const ModelLayerConfig& c = cfg.layers.back();
    std::vector<const S*> ptrs;
    for (const auto& s : lasts) ptrs.push_back(s.data());
    merge_into(ptrs, c.merge, B, c.hidden_size, static_cast<S*>(out.y.data));
  }
}

}  // namespace

// ---- Model ------------------------------------------------------------------------------------

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string& path) {
  auto src = model::open_file(path);
  return Model(std::unique_ptr<Impl>(load_impl(*src, path)));
}

Model Model::load_buffer(const void* data, std::size_t size, const std::string& name) {
  if (data == nullptr && size > 0) {
    throw Error(ErrorCode::kInvalidArgument, name + ": the buffer has no data");
  }
  auto src = model::wrap_buffer(data, size);
  return Model(std::unique_ptr<Impl>(load_impl(*src, name)));
}

const ModelConfig& Model::config() const noexcept {
  return impl_->config;
}
DType Model::dtype() const noexcept {
  return impl_->config.dtype;
}
std::int64_t Model::input_size() const noexcept {
  return impl_->config.input_size;
}
std::int64_t Model::output_size() const noexcept {
  return impl_->config.layers.back().output_size();
}
Shape Model::output_shape(std::int64_t T, std::int64_t B) const {
  return impl_->config.return_sequences ? Shape{T, B, output_size()} : Shape{B, output_size()};
}
std::int64_t Model::num_states() const noexcept {
  return static_cast<std::int64_t>(impl_->states.size());
}
ModelStateInfo Model::state_info(std::int64_t k) const {
  if (k < 0 || k >= num_states()) {
    throw Error(ErrorCode::kInvalidArgument, "Model.state_info: k must be in [0, " +
                                                 std::to_string(num_states()) + "), got " +
                                                 std::to_string(k));
  }
  return impl_->states[static_cast<std::size_t>(k)];
}

TensorView Model::weight(std::int64_t layer, int direction, const std::string& param) const {
  const auto& L = impl_->config.layers;
  if (layer >= 0 && layer < static_cast<std::int64_t>(L.size()) && direction >= 0 &&
      direction < L[layer].directions) {
    for (const auto& [name, t] : impl_->plans[layer][direction].weights) {
      if (name == param) return t.view();
    }
  }
  throw Error(ErrorCode::kInvalidArgument, "Model.weight: the model has no parameter '" +
                                               tensor_name(layer, direction, param) + "'");
}

std::string Model::summary() const {
  const ModelConfig& c = impl_->config;
  auto g = [](double v) {
    char s[64];
    std::snprintf(s, sizeof s, "%g", v);
    return std::string(s);
  };
  std::string s = std::string("blockrnn model: ") + dtype_name(c.dtype) + ", input size " +
                  std::to_string(c.input_size) + ", " + std::to_string(c.layers.size()) +
                  " layer(s), output " + (c.return_sequences ? "[T, B, " : "[B, ") +
                  std::to_string(output_size()) + "]";
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const ModelLayerConfig& lc = c.layers[l];
    std::vector<std::string> extra;
    if (lc.directions == 2)
      extra.push_back(std::string("bidirectional (") + merge_name(lc.merge) + ")");
    if (lc.go_backwards) extra.push_back("go_backwards");
    if (lc.is_lstm()) {
      extra.push_back("forget_bias=" + g(lc.forget_bias));
      extra.push_back(lc.cell_clip ? "cell_clip=" + g(*lc.cell_clip) : "no cell clip");
      if (lc.use_peephole) extra.push_back("peepholes");
    }
    if (lc.hold_padded_output) extra.push_back("padded steps hold the last output");
    s += "\n  layer " + std::to_string(l) + (lc.name.empty() ? "" : " '" + lc.name + "'") + ": " +
         model_layer_kind_name(lc.kind) + " H=" + std::to_string(lc.hidden_size);
    for (std::size_t k = 0; k < extra.size(); ++k) s += (k == 0 ? ", " : ", ") + extra[k];
  }
  if (c.mask_value) {
    s += "\n  masking: steps whose features all equal " + g(*c.mask_value) +
         " (per-example suffixes -> lengths)";
  }
  if (!c.source.empty()) {
    s += "\n  source: ";
    for (std::size_t k = 0; k < c.source.size(); ++k) {
      s += (k ? ", " : "") + c.source[k].first + "=" + c.source[k].second;
    }
  }
  if (!c.not_converted.empty()) {
    s += "\n  NOT converted (run them yourself): ";
    for (std::size_t k = 0; k < c.not_converted.size(); ++k) {
      s += (k ? ", " : "") + c.not_converted[k];
    }
  }
  return s;
}

void Model::forward(const ModelInputs& in, const ModelOutputs& out) {
  const ModelConfig& cfg = impl_->config;
  const DType dt = cfg.dtype;
  const TensorView& x = in.x;
  if (x.shape.rank() != 3 || x.shape[2] != cfg.input_size) {
    forward_fail("x must have shape [T, B, " + std::to_string(cfg.input_size) +
                 "] (time, batch, input_size), got " + x.shape.to_string());
  }
  if (x.dtype != dt) {
    forward_fail(std::string("x must have dtype ") + dtype_name(dt) + " (the model's), got " +
                 dtype_name(x.dtype));
  }
  Call call;
  call.T = x.shape[0];
  call.B = x.shape[1];
  const std::int64_t T = call.T, B = call.B;
  if (T < 0 || B < 0) forward_fail("x must have non-negative dims, got " + x.shape.to_string());
  if (x.data == nullptr && x.shape.num_elements() > 0) forward_fail("x has no data");
  if (!is_absent_input(in.seq_lengths)) {
    const TensorView& sl = in.seq_lengths;
    if (sl.shape != Shape{B} || sl.dtype != DType::kInt64 || (sl.data == nullptr && B > 0)) {
      forward_fail("seq_lengths must be [" + std::to_string(B) + "] int64 (batch_size), got " +
                   dtype_name(sl.dtype) + " " + sl.shape.to_string());
    }
    const auto* L = static_cast<const std::int64_t*>(sl.data);
    call.lengths.assign(L, L + B);
    for (std::int64_t b = 0; b < B; ++b) {
      if (L[b] < 0 || L[b] > T) {
        forward_fail("seq_lengths must be in [0, " + std::to_string(T) + "] (T), got seq_lengths[" +
                     std::to_string(b) + "] = " + std::to_string(L[b]));
      }
    }
    call.has_lengths = true;
  } else if (cfg.mask_value) {
    call.lengths = dt == DType::kFloat32 ? lengths_from_mask(static_cast<const float*>(x.data), T,
                                                             B, cfg.input_size, *cfg.mask_value)
                                         : lengths_from_mask(static_cast<const double*>(x.data), T,
                                                             B, cfg.input_size, *cfg.mask_value);
    call.has_lengths = true;
  }
  if (call.has_lengths && std::all_of(call.lengths.begin(), call.lengths.end(),
                                      [&](std::int64_t L) { return L == T; })) {
    call.has_lengths = false;  // the same results, without the per-example bookkeeping
    call.lengths.clear();
  }
  const std::int64_t n = num_states();
  auto state_name = [&](std::int64_t k) {
    const ModelStateInfo& s = impl_->states[k];
    return "[" + std::to_string(k) + "] (layer " + std::to_string(s.layer) + ", direction " +
           std::to_string(s.direction) + ", " + s.name + ")";
  };
  auto check_states = [&](const char* arg, auto states) {
    if (states.empty()) return;
    if (static_cast<std::int64_t>(states.size()) != n) {
      forward_fail(std::string(arg) + " must hold " + std::to_string(n) +
                   " views (one per state, num_states()) or none, got " +
                   std::to_string(states.size()));
    }
    for (std::int64_t k = 0; k < n; ++k) {
      const TensorView v = states[k];
      if (is_absent_input(v)) continue;
      const Shape want{B, impl_->states[k].hidden_size};
      if (v.shape != want || v.dtype != dt || (v.data == nullptr && want.num_elements() > 0)) {
        forward_fail(std::string(arg) + state_name(k) + " must be " + dtype_name(dt) + " " +
                     want.to_string() + " (batch_size, hidden_size), got " + dtype_name(v.dtype) +
                     " " + v.shape.to_string());
      }
    }
  };
  check_states("initial_states", in.initial_states);
  check_states("final_states", out.final_states);
  const Shape y_shape = output_shape(T, B);
  if (out.y.shape != y_shape || out.y.dtype != dt ||
      (out.y.data == nullptr && y_shape.num_elements() > 0)) {
    forward_fail(std::string("y must be ") + dtype_name(dt) + " " + y_shape.to_string() +
                 " (the model's output for x), got " + dtype_name(out.y.dtype) + " " +
                 out.y.shape.to_string());
  }
  const long double need = forward_bytes(*impl_, T, B);
  if (need > static_cast<long double>(get_memory_limit())) {
    throw Error(ErrorCode::kResourceExhausted,
                "Model.forward: x: a call with T=" + std::to_string(T) +
                    ", B=" + std::to_string(B) + " needs about " +
                    std::to_string(static_cast<long double>(need)) +
                    " bytes, more than the memory limit of " + std::to_string(get_memory_limit()) +
                    " bytes (set_memory_limit)");
  }
  if (dt == DType::kFloat32)
    run<float>(*impl_, in, out, call);
  else
    run<double>(*impl_, in, out, call);
}

std::map<std::string, Tensor> load_tensors(const std::string& path) {
  auto src = model::open_file(path);
  const model::SafetensorsHeader h = model::read_header(*src, path);
  if (!h.metadata.is_null() && !h.metadata.is_object()) {
    fail(path, "__metadata__",
         std::string("must be a JSON object of strings, got ") + h.metadata.type_name());
  }
  const auto entries = model::read_entries(h, {"F32", "F64", "I64"}, path);
  std::map<std::string, Tensor> out;
  for (const auto& [name, e] : entries) out.emplace(name, model::read_tensor(*src, h, e));
  return out;
}

TensorFile load_tensor_file(const std::string& path) {
  auto src = model::open_file(path);
  const model::SafetensorsHeader h = model::read_header(*src, path);
  TensorFile out;
  if (!h.metadata.is_null()) {
    if (!h.metadata.is_object()) {
      fail(path, "__metadata__",
           std::string("must be a JSON object of strings, got ") + h.metadata.type_name());
    }
    for (const auto& [key, value] : h.metadata.items()) {
      if (!value.is_string()) {
        fail(path, "__metadata__." + key,
             std::string("must be a string, got ") + value.type_name());
      }
      out.metadata.emplace(key, value.get<std::string>());
    }
  }
  const auto entries = model::read_entries(h, {"F32", "F64", "I64"}, path);
  for (const auto& [name, e] : entries) out.tensors.emplace(name, model::read_tensor(*src, h, e));
  return out;
}

void save_tensors(const std::string& path,
                  const std::vector<std::pair<std::string, TensorView>>& tensors) {
  model::write_safetensors(path, tensors, {});
}

void save_tensors(const std::string& path,
                  const std::vector<std::pair<std::string, TensorView>>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  model::write_safetensors(path, tensors, metadata);
}

ModelResult Model::forward(TensorView x, TensorView seq_lengths,
                           std::span<const TensorView> initial_states) {
  if (x.shape.rank() != 3 || x.shape[0] < 0 || x.shape[1] < 0) {
    forward_fail("x must have shape [T, B, " + std::to_string(input_size()) +
                 "] (time, batch, input_size), got " + x.shape.to_string());
  }
  const std::int64_t T = x.shape[0], B = x.shape[1];
  // The outputs allocated here and the call's own buffers, against the memory limit before
  // anything is allocated (forward(in, out) then checks every view).
  long double mine = static_cast<long double>(output_shape(T, B).num_elements());
  for (const ModelStateInfo& s : impl_->states) mine += static_cast<long double>(B) * s.hidden_size;
  mine *= dtype_size(dtype());
  if (mine + forward_bytes(*impl_, T, B) > static_cast<long double>(get_memory_limit())) {
    throw Error(ErrorCode::kResourceExhausted,
                "Model.forward: x: a call with T=" + std::to_string(T) +
                    ", B=" + std::to_string(B) + " needs more than the memory limit of " +
                    std::to_string(get_memory_limit()) + " bytes (set_memory_limit)");
  }
  ModelResult r;
  r.y = Tensor(dtype(), output_shape(T, B));
  std::vector<MutableTensorView> finals;
  for (std::int64_t k = 0; k < num_states(); ++k) {
    r.final_states.emplace_back(dtype(), Shape{B, impl_->states[k].hidden_size});
    finals.push_back(r.final_states.back().mutable_view());
  }
  forward(ModelInputs{x, seq_lengths, initial_states}, ModelOutputs{r.y.mutable_view(), finals});
  return r;
}

}  // namespace blockrnn
