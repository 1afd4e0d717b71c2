// CharModel ⇄ Checkpoint (see model_checkpoint.h): the trainer's tensor and metadata names,
// and every check that turns a structurally valid but inconsistent checkpoint into a clear
// error instead of a crash later.
#include "train/model_checkpoint.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <system_error>

#include "blockrnn/context.h"

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

// A whole decimal integer in [lo, hi], or an error naming the metadata key.
int64_t metadata_int(const Checkpoint& ckpt, const std::string& key, int64_t lo, int64_t hi,
                     const std::string& source) {
  const auto it = ckpt.metadata.find(key);
  if (it == ckpt.metadata.end()) fail(source, "metadata '" + key + "' is missing");
  const std::string& s = it->second;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < lo || value > hi) {
    fail(source, "metadata '" + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got '" + s + "'");
  }
  return value;
}

const NamedArray& find_tensor(const Checkpoint& ckpt, const std::string& name,
                              const std::vector<int64_t>& shape, const std::string& source) {
  const auto it = ckpt.tensors.find(name);
  if (it == ckpt.tensors.end()) fail(source, "tensor '" + name + "' is missing");
  if (it->second.shape != shape) {
    fail(source, "tensor '" + name + "' has shape " + shape_string(it->second.shape) +
                     " but the model (" + ckpt.cell + ", hidden " + std::to_string(ckpt.hidden) +
                     ", " + std::to_string(ckpt.layers) + " layers, vocabulary " +
                     std::to_string(ckpt.vocab_size) + ") needs " + shape_string(shape));
  }
  for (float v : it->second.data) {
    if (!std::isfinite(v)) fail(source, "tensor '" + name + "' holds a non-finite value");
  }
  return it->second;
}

}  // namespace

Checkpoint make_checkpoint(const CharModel<float>& model, const Vocabulary& vocabulary,
                           int64_t step, const AdamState* adam,
                           const std::map<std::string, std::string>& extra_metadata) {
  const ModelConfig& c = model.config();
  if (vocabulary.size() != c.vocab_size) {
    throw std::invalid_argument("vocabulary size does not match the model");
  }
  Checkpoint ckpt;
  ckpt.cell = cell_name(c.cell);
  ckpt.hidden = c.hidden;
  ckpt.layers = c.layers;
  ckpt.vocab_size = c.vocab_size;
  ckpt.vocabulary = vocabulary.symbols();
  ckpt.metadata = extra_metadata;
  ckpt.metadata["model"] = kModelKind;
  ckpt.metadata["embed"] = std::to_string(c.embed);
  ckpt.metadata["forget_bias"] = "1";
  ckpt.metadata["step"] = std::to_string(step);
  ckpt.metadata["blockrnn_version"] = blockrnn::version();
  for (size_t k = 0; k < model.num_tensors(); ++k) {
    const ParamSpec& spec = model.specs()[k];
    const std::span<const float> p = model.param(k);
    ckpt.tensors[spec.name] = NamedArray{spec.shape, std::vector<float>(p.begin(), p.end())};
    if (adam != nullptr) {
      ckpt.tensors["adam/m/" + spec.name] = NamedArray{spec.shape, adam->m.at(k)};
      ckpt.tensors["adam/v/" + spec.name] = NamedArray{spec.shape, adam->v.at(k)};
    }
  }
  if (adam != nullptr) ckpt.metadata["adam_t"] = std::to_string(adam->t);
  return ckpt;
}

TrainedModel model_from_checkpoint(const Checkpoint& ckpt, const std::string& source) {
  const auto kind = ckpt.metadata.find("model");
  if (kind == ckpt.metadata.end() || kind->second != kModelKind) {
    fail(source, std::string("not a character language model of blockrnn (metadata 'model' "
                             "must be '") +
                     kModelKind + "')");
  }
  ModelConfig config;
  const std::optional<CellKind> cell = parse_cell(ckpt.cell);
  if (!cell) fail(source, "unknown cell '" + ckpt.cell + "' (expected lstm or gru)");
  config.cell = *cell;
  config.vocab_size = ckpt.vocab_size;
  config.hidden = ckpt.hidden;
  config.layers = ckpt.layers;
  config.embed = metadata_int(ckpt, "embed", 1, kMaxEmbed, source);
  try {
    validate_config(config);
  } catch (const std::invalid_argument& e) {
    fail(source, e.what());
  }
  if (ckpt.metadata.count("forget_bias") && ckpt.metadata.at("forget_bias") != "1") {
    fail(source,
         "metadata 'forget_bias' must be '1', got '" + ckpt.metadata.at("forget_bias") + "'");
  }

  TrainedModel out{config,
                   CharModel<float>(config),
                   Vocabulary::from_symbols(ckpt.vocabulary),
                   0,
                   std::nullopt,
                   ckpt.metadata};
  out.step = metadata_int(ckpt, "step", 0, int64_t{1} << 62, source);
  const std::vector<ParamSpec>& specs = out.model.specs();
  size_t expected = specs.size();
  for (size_t k = 0; k < specs.size(); ++k) {
    const NamedArray& a = find_tensor(ckpt, specs[k].name, specs[k].shape, source);
    std::copy(a.data.begin(), a.data.end(), out.model.param(k).begin());
  }
  if (ckpt.metadata.count("adam_t")) {
    AdamState adam;
    adam.t = metadata_int(ckpt, "adam_t", 1, int64_t{1} << 62, source);
    for (const ParamSpec& spec : specs) {
      adam.m.push_back(find_tensor(ckpt, "adam/m/" + spec.name, spec.shape, source).data);
      adam.v.push_back(find_tensor(ckpt, "adam/v/" + spec.name, spec.shape, source).data);
      for (float v : adam.v.back()) {
        if (v < 0) fail(source, "tensor 'adam/v/" + spec.name + "' holds a negative value");
      }
    }
    out.adam = std::move(adam);
    expected += 2 * specs.size();
  }
  if (ckpt.tensors.size() != expected) {
    for (const auto& [name, array] : ckpt.tensors) {
      bool known = false;
      for (const ParamSpec& spec : specs) {
        known = known || name == spec.name ||
                (out.adam && (name == "adam/m/" + spec.name || name == "adam/v/" + spec.name));
      }
      if (!known) fail(source, "unexpected tensor '" + name + "'");
    }
  }
  return out;
}

TrainedModel load_trained_model(const std::string& path) {
  return model_from_checkpoint(load_checkpoint(path), path);
}

}  // namespace blockrnn::train
