// The model-file functions of the C ABI (blockrnn/c_api.h) over blockrnn::Model
// (blockrnn/model.h): C descriptors to views, exceptions to statuses (capi_internal.h).
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "blockrnn/c_api.h"
#include "blockrnn/error.h"
#include "blockrnn/model.h"
#include "capi/capi_internal.h"

struct blockrnn_model {
  blockrnn::Model model;
  std::string summary;
};

namespace {

using blockrnn::DType;
using blockrnn::Error;
using blockrnn::ErrorCode;
using blockrnn::Shape;
using blockrnn::TensorView;

using blockrnn::capi::invalid;

void check_model(const blockrnn_model* model, const char* fn) {
  if (model == nullptr) invalid(std::string(fn) + ": model is NULL");
}

// A dense view of t (the C API's dtype and shape checks); `what` names the argument.
TensorView view_of(const blockrnn_tensor& t, const std::string& what) {
  const std::string where = "blockrnn_model_forward: " + what;
  const DType dtype = blockrnn::capi::checked_dtype(t.dtype, where);
  const Shape shape = blockrnn::capi::checked_shape(t, where);
  if (!blockrnn::capi::is_dense(t, shape)) {
    invalid(where + ": must be dense (strides NULL or row-major)");
  }
  return TensorView(t.data, dtype, shape);
}

bool is_absent(const blockrnn_tensor& t) {
  return t.data == nullptr && t.rank == 0;
}

// Views of a list of num entries (absent entries stay absent views).
std::vector<TensorView> views_of(const blockrnn_tensor* list, std::size_t num, const char* what) {
  if (list == nullptr && num > 0) {
    invalid(std::string("blockrnn_model_forward: ") + what + " is NULL with " + what + " count " +
            std::to_string(num));
  }
  std::vector<TensorView> views;
  for (std::size_t k = 0; k < num; ++k) {
    const std::string name = std::string(what) + "[" + std::to_string(k) + "]";
    views.push_back(is_absent(list[k]) ? TensorView() : view_of(list[k], name));
  }
  return views;
}

blockrnn_status load_into(blockrnn_model** out, const std::function<blockrnn::Model()>& load) {
  return blockrnn::capi::guarded([&] {
    if (out == nullptr) invalid("blockrnn_model_load: model (the output pointer) is NULL");
    *out = nullptr;
    auto m = std::unique_ptr<blockrnn_model>(new blockrnn_model{load(), ""});
    m->summary = m->model.summary();
    *out = m.release();
  });
}

}  // namespace

extern "C" {

blockrnn_status blockrnn_model_load(const char* path, blockrnn_model** model) {
  return load_into(model, [&] {
    if (path == nullptr) invalid("blockrnn_model_load: path is NULL");
    return blockrnn::Model::load(path);
  });
}

blockrnn_status blockrnn_model_load_buffer(const void* data, size_t size, const char* name,
                                           blockrnn_model** model) {
  return load_into(model, [&] {
    return blockrnn::Model::load_buffer(data, size, name != nullptr ? name : "buffer");
  });
}

void blockrnn_model_free(blockrnn_model* model) {
  delete model;
}

int32_t blockrnn_model_dtype(const blockrnn_model* model) {
  return model == nullptr ? -1 : static_cast<int32_t>(model->model.dtype());
}

int64_t blockrnn_model_input_size(const blockrnn_model* model) {
  return model == nullptr ? -1 : model->model.input_size();
}

int64_t blockrnn_model_output_size(const blockrnn_model* model) {
  return model == nullptr ? -1 : model->model.output_size();
}

blockrnn_status blockrnn_model_output_shape(const blockrnn_model* model, int64_t T, int64_t B,
                                            blockrnn_shape* shape) {
  return blockrnn::capi::guarded([&] {
    check_model(model, "blockrnn_model_output_shape");
    if (shape == nullptr) invalid("blockrnn_model_output_shape: shape is NULL");
    if (T < 0 || B < 0) {
      invalid("blockrnn_model_output_shape: T and B must be >= 0, got " + std::to_string(T) +
              " and " + std::to_string(B));
    }
    const Shape s = model->model.output_shape(T, B);
    shape->rank = s.rank();
    for (int d = 0; d < BLOCKRNN_MAX_RANK; ++d) shape->dims[d] = d < s.rank() ? s.dim(d) : 0;
  });
}

int64_t blockrnn_model_num_states(const blockrnn_model* model) {
  return model == nullptr ? -1 : model->model.num_states();
}

blockrnn_status blockrnn_model_state_info(const blockrnn_model* model, int64_t k, int64_t* layer,
                                          int32_t* direction, const char** name,
                                          int64_t* hidden_size) {
  return blockrnn::capi::guarded([&] {
    check_model(model, "blockrnn_model_state_info");
    const blockrnn::ModelStateInfo s = model->model.state_info(k);
    if (layer != nullptr) *layer = s.layer;
    if (direction != nullptr) *direction = s.direction;
    if (name != nullptr) *name = s.name;
    if (hidden_size != nullptr) *hidden_size = s.hidden_size;
  });
}

const char* blockrnn_model_summary(const blockrnn_model* model) {
  return model == nullptr ? "" : model->summary.c_str();
}

blockrnn_status blockrnn_model_forward(blockrnn_model* model, const blockrnn_tensor* x,
                                       const blockrnn_tensor* seq_lengths,
                                       const blockrnn_tensor* initial_states, size_t num_initial,
                                       const blockrnn_tensor* y,
                                       const blockrnn_tensor* final_states, size_t num_final) {
  return blockrnn::capi::guarded([&] {
    check_model(model, "blockrnn_model_forward");
    if (x == nullptr) invalid("blockrnn_model_forward: x is NULL");
    if (y == nullptr) invalid("blockrnn_model_forward: y is NULL");
    const std::vector<TensorView> init = views_of(initial_states, num_initial, "initial_states");
    const std::vector<TensorView> finals_const = views_of(final_states, num_final, "final_states");
    std::vector<blockrnn::MutableTensorView> finals;
    for (const TensorView& v : finals_const) {
      finals.emplace_back(const_cast<void*>(v.data), v.dtype, v.shape);
    }
    const TensorView yv = view_of(*y, "y");
    blockrnn::ModelInputs in;
    in.x = view_of(*x, "x");
    if (seq_lengths != nullptr) in.seq_lengths = view_of(*seq_lengths, "seq_lengths");
    in.initial_states = init;
    model->model.forward(
        in, {blockrnn::MutableTensorView(const_cast<void*>(yv.data), yv.dtype, yv.shape), finals});
  });
}

}  // extern "C"
