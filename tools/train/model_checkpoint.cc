// CharModel ⇄ checkpoint (see model_checkpoint.h): the trainer's tensor and metadata names,
// and every check that turns a well-formed but inconsistent checkpoint into a clear error
// instead of a crash later.
#include "train/model_checkpoint.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "blockrnn/context.h"
#include "blockrnn/model.h"

namespace blockrnn::train {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error("checkpoint '" + source + "': " + what);
}

const std::string& metadata_string(const Checkpoint& ckpt, const std::string& key,
                                   const std::string& source) {
  const auto it = ckpt.metadata.find(key);
  if (it == ckpt.metadata.end()) fail(source, "metadata '" + key + "' is missing");
  return it->second;
}

// A whole decimal integer in [lo, hi], or an error naming the metadata key.
int64_t metadata_int(const Checkpoint& ckpt, const std::string& key, int64_t lo, int64_t hi,
                     const std::string& source) {
  const std::string& s = metadata_string(ckpt, key, source);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < lo || value > hi) {
    fail(source, "metadata '" + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + s + "'");
  }
  return value;
}

void check_format(const Checkpoint& ckpt, const std::string& source) {
  const auto format = ckpt.metadata.find("format");
  if (format == ckpt.metadata.end() || format->second != kCheckpointFormat) {
    fail(source, std::string("not a character language model of blockrnn (metadata 'format' "
                             "must be '") +
                     kCheckpointFormat + "')");
  }
  const std::string& version = metadata_string(ckpt, "format_version", source);
  if (version != std::to_string(kCheckpointFormatVersion)) {
    fail(source, "metadata 'format_version' '" + version +
                     "' is not supported (this blockrnn "
                     "reads version " +
                     std::to_string(kCheckpointFormatVersion) + ")");
  }
}

ModelConfig config_from_metadata(const Checkpoint& ckpt, const std::string& source) {
  ModelConfig config;
  const std::string& cell = metadata_string(ckpt, "cell", source);
  const std::optional<CellKind> kind = parse_cell(cell);
  if (!kind) fail(source, "metadata 'cell' is '" + cell + "' (expected lstm or gru)");
  config.cell = *kind;
  config.vocab_size = metadata_int(ckpt, "vocab_size", 1, 256, source);
  config.embed = metadata_int(ckpt, "embed", 1, kMaxEmbed, source);
  config.hidden = metadata_int(ckpt, "hidden", 1, kMaxHidden, source);
  config.layers = metadata_int(ckpt, "layers", 1, kMaxLayers, source);
  try {
    validate_config(config);
  } catch (const std::invalid_argument& e) {
    fail(source, e.what());
  }
  const auto bias = ckpt.metadata.find("forget_bias");
  if (bias != ckpt.metadata.end() && bias->second != "1") {
    fail(source, "metadata 'forget_bias' must be '1', got '" + bias->second + "'");
  }
  return config;
}

Vocabulary vocabulary_from(const Checkpoint& ckpt, int64_t vocab_size, const std::string& source) {
  try {
    const std::string symbols =
        vocabulary_from_metadata(metadata_string(ckpt, "vocabulary", source));
    if (static_cast<int64_t>(symbols.size()) != vocab_size) {
      throw std::invalid_argument("it holds " + std::to_string(symbols.size()) +
                                  " characters but 'vocab_size' is " + std::to_string(vocab_size));
    }
    return Vocabulary::from_symbols(symbols);
  } catch (const std::invalid_argument& e) {
    fail(source, std::string("metadata 'vocabulary' is invalid: ") + e.what());
  }
}

const NamedArray& find_tensor(const Checkpoint& ckpt, const ModelConfig& config,
                              const std::string& name, const std::vector<int64_t>& shape,
                              const std::string& source) {
  const auto it = ckpt.tensors.find(name);
  if (it == ckpt.tensors.end()) fail(source, "tensor '" + name + "' is missing");
  if (it->second.shape != shape) {
    fail(source, "tensor '" + name + "' has shape " + shape_string(it->second.shape) +
                     " but the model (" + cell_name(config.cell) + ", hidden " +
                     std::to_string(config.hidden) + ", " + std::to_string(config.layers) +
                     " layers, vocabulary " + std::to_string(config.vocab_size) + ") needs " +
                     shape_string(shape));
  }
  for (float v : it->second.data) {
    if (!std::isfinite(v)) fail(source, "tensor '" + name + "' holds a non-finite value");
  }
  return it->second;
}

AdamState adam_from(const Checkpoint& ckpt, const ModelConfig& config,
                    const std::vector<ParamSpec>& specs, const std::string& source) {
  AdamState adam;
  adam.t = metadata_int(ckpt, "adam_t", 1, int64_t{1} << 62, source);
  for (const ParamSpec& spec : specs) {
    adam.m.push_back(find_tensor(ckpt, config, "adam.m." + spec.name, spec.shape, source).data);
    adam.v.push_back(find_tensor(ckpt, config, "adam.v." + spec.name, spec.shape, source).data);
    for (float v : adam.v.back()) {
      if (v < 0) fail(source, "tensor 'adam.v." + spec.name + "' holds a negative value");
    }
  }
  return adam;
}

void check_no_unexpected_tensors(const Checkpoint& ckpt, const std::vector<ParamSpec>& specs,
                                 bool with_adam, const std::string& source) {
  for (const auto& [name, array] : ckpt.tensors) {
    bool known = false;
    for (const ParamSpec& spec : specs) {
      known = known || name == spec.name ||
              (with_adam && (name == "adam.m." + spec.name || name == "adam.v." + spec.name));
    }
    if (!known) fail(source, "unexpected tensor '" + name + "'");
  }
}

}  // namespace

std::string vocabulary_to_metadata(std::string_view symbols) {
  std::string out;
  for (char ch : symbols) {
    const auto b = static_cast<uint8_t>(ch);
    if (b < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xC0 | (b >> 6)));
      out.push_back(static_cast<char>(0x80 | (b & 0x3F)));
    }
  }
  return out;
}

std::string vocabulary_from_metadata(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    if (b < 0x80) {
      out.push_back(text[i]);
      continue;
    }
    const bool two_bytes = (b == 0xC2 || b == 0xC3) && i + 1 < text.size() &&
                           (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80;
    if (!two_bytes) {
      throw std::invalid_argument("character at byte offset " + std::to_string(i) +
                                  " is not in U+0000..U+00FF");
    }
    out.push_back(static_cast<char>(((b & 0x03) << 6) | (text[i + 1] & 0x3F)));
    ++i;
  }
  return out;
}

Checkpoint make_checkpoint(const CharModel<float>& model, const Vocabulary& vocabulary,
                           int64_t step, const AdamState* adam,
                           const std::map<std::string, std::string>& extra_metadata) {
  const ModelConfig& c = model.config();
  if (vocabulary.size() != c.vocab_size) {
    throw std::invalid_argument("vocabulary size does not match the model");
  }
  Checkpoint ckpt;
  ckpt.metadata = extra_metadata;
  ckpt.metadata["format"] = kCheckpointFormat;
  ckpt.metadata["format_version"] = std::to_string(kCheckpointFormatVersion);
  ckpt.metadata["cell"] = cell_name(c.cell);
  ckpt.metadata["vocab_size"] = std::to_string(c.vocab_size);
  ckpt.metadata["embed"] = std::to_string(c.embed);
  ckpt.metadata["hidden"] = std::to_string(c.hidden);
  ckpt.metadata["layers"] = std::to_string(c.layers);
  ckpt.metadata["vocabulary"] = vocabulary_to_metadata(vocabulary.symbols());
  ckpt.metadata["forget_bias"] = std::to_string(static_cast<int>(kForgetBias));
  ckpt.metadata["step"] = std::to_string(step);
  ckpt.metadata["blockrnn_version"] = blockrnn::version();
  for (size_t k = 0; k < model.num_tensors(); ++k) {
    const ParamSpec& spec = model.specs()[k];
    const std::span<const float> p = model.param(k);
    ckpt.tensors[spec.name] = NamedArray{spec.shape, std::vector<float>(p.begin(), p.end())};
    if (adam != nullptr) {
      ckpt.tensors["adam.m." + spec.name] = NamedArray{spec.shape, adam->m.at(k)};
      ckpt.tensors["adam.v." + spec.name] = NamedArray{spec.shape, adam->v.at(k)};
    }
  }
  if (adam != nullptr) ckpt.metadata["adam_t"] = std::to_string(adam->t);
  return ckpt;
}

TrainedModel model_from_checkpoint(const Checkpoint& ckpt, const std::string& source) {
  check_format(ckpt, source);
  const ModelConfig config = config_from_metadata(ckpt, source);
  TrainedModel out{config,
                   CharModel<float>(config),
                   vocabulary_from(ckpt, config.vocab_size, source),
                   metadata_int(ckpt, "step", 0, int64_t{1} << 62, source),
                   std::nullopt,
                   ckpt.metadata};
  const std::vector<ParamSpec>& specs = out.model.specs();
  for (size_t k = 0; k < specs.size(); ++k) {
    const NamedArray& a = find_tensor(ckpt, config, specs[k].name, specs[k].shape, source);
    std::copy(a.data.begin(), a.data.end(), out.model.param(k).begin());
  }
  if (ckpt.metadata.count("adam_t")) out.adam = adam_from(ckpt, config, specs, source);
  check_no_unexpected_tensors(ckpt, specs, out.adam.has_value(), source);
  return out;
}

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  std::vector<std::pair<std::string, TensorView>> views;
  for (const auto& [name, array] : ckpt.tensors) {
    const Shape shape = Shape::from_dims(array.shape.data(), static_cast<int>(array.shape.size()));
    if (shape.num_elements() != static_cast<int64_t>(array.data.size())) {
      throw std::invalid_argument("checkpoint tensor '" + name + "' has " +
                                  std::to_string(array.data.size()) + " values but shape " +
                                  shape.to_string());
    }
    views.emplace_back(name, TensorView(array.data.data(), shape));
  }
  blockrnn::save_tensors(path, views, ckpt.metadata);
}

Checkpoint load_checkpoint(const std::string& path) {
  blockrnn::TensorFile file = blockrnn::load_tensor_file(path);
  Checkpoint ckpt;
  ckpt.metadata = std::move(file.metadata);
  for (const auto& [name, t] : file.tensors) {
    if (t.dtype() != DType::kFloat32) {
      fail(path, "tensor '" + name + "' must be float32 (F32), got " + dtype_name(t.dtype()));
    }
    NamedArray& a = ckpt.tensors[name];
    a.shape.assign(t.shape().dims(), t.shape().dims() + t.shape().rank());
    a.data.assign(t.data_as<float>(), t.data_as<float>() + t.num_elements());
  }
  return ckpt;
}

TrainedModel load_trained_model(const std::string& path) {
  return model_from_checkpoint(load_checkpoint(path), path);
}

}  // namespace blockrnn::train
