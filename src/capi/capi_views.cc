// The handles' descriptors (src/capi/capi_internal.h): a blockrnn_tensor of an RNN or layer
// handle's call as a view, strided inputs gathered into dense copies under the memory limit,
// outputs required dense. Shared by rnn_c_api.cc and layer_c_api.cc.
#include <deque>
#include <string>

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/tensor.h"
#include "capi_internal.h"

namespace blockrnn::capi {

TensorView input_view(const blockrnn_tensor& t, const char* fn, const std::string& name,
                      std::deque<Tensor>& copies) {
  if (is_absent(t)) return {};
  const std::string where = std::string(fn) + ": " + name;
  const DType dtype = checked_dtype(t.dtype, where);
  const Shape shape = checked_shape(t, where);
  check_strides(t, shape, dtype, where);
  if (is_dense(t, shape)) return TensorView(t.data, dtype, shape);
  const long long bytes =
      static_cast<long long>(shape.num_elements()) * static_cast<long long>(dtype_size(dtype));
  if (bytes > get_memory_limit()) {
    throw Error(ErrorCode::kResourceExhausted,
                where + ": a dense copy of the strided tensor " + shape.to_string() + " takes " +
                    std::to_string(bytes) + " bytes, over the memory limit of " +
                    std::to_string(get_memory_limit()) + " bytes");
  }
  Tensor& dense = copies.emplace_back(dtype, shape);
  try {
    gather(t, shape, dense);
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  return dense.view();
}

MutableTensorView output_view(const blockrnn_tensor& t, const char* fn, const std::string& name) {
  if (is_absent(t)) return {};
  const std::string where = std::string(fn) + ": " + name;
  const DType dtype = checked_dtype(t.dtype, where);
  const Shape shape = checked_shape(t, where);
  check_strides(t, shape, dtype, where);
  if (!is_dense(t, shape)) {
    invalid(where +
            ": must be dense row-major (strides NULL or C-order); got strides that are not");
  }
  return MutableTensorView(t.data, dtype, shape);
}

}  // namespace blockrnn::capi
