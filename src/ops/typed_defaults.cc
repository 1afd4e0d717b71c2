// The typed C++ API's defaults (see typed_defaults.h).
#include "ops/typed_defaults.h"

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "blockrnn/error.h"

namespace blockrnn::ops {
namespace {

bool has_negative_dim(const Shape& s) {
  for (int i = 0; i < s.rank(); ++i) {
    if (s[i] < 0) return true;
  }
  return false;
}

bool has_zero_dim(const Shape& s) {
  for (int i = 0; i < s.rank(); ++i) {
    if (s[i] == 0) return true;
  }
  return false;
}

// w is [input_size + cell_size, 4 * cell_size], without overflow.
bool w_has_expected_shape(std::int64_t I, std::int64_t H, const TensorView& w) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (I < 0 || H < 0 || H > kMax / 4 || I > kMax - H) return false;
  return w.shape.rank() == 2 && w.shape[0] == I + H && w.shape[1] == 4 * H;
}

// `bytes` of zeros, never written, kept for the calling thread and reused by its later calls (a
// one-shot LSTM call without peepholes allocates nothing for them). A larger request takes a new
// buffer; the smaller ones stay until the thread ends, since a call that is still running on this
// thread (one whose cancel check re-entered blockrnn) may be reading them.
const void* thread_zeros(std::size_t bytes) {
  thread_local std::vector<std::unique_ptr<std::byte[]>> buffers;
  thread_local std::size_t size = 0;
  if (buffers.empty() || bytes > size) {
    buffers.push_back(std::make_unique<std::byte[]>(bytes == 0 ? 1 : bytes));  // zeroed
    size = bytes;
  }
  return buffers.back().get();
}

}  // namespace

PeepholeDefaults::PeepholeDefaults(const char* op, bool use_peephole, std::int64_t input_size,
                                   std::int64_t cell_size, const TensorView& w, DType dtype,
                                   TensorView* wci, TensorView* wcf, TensorView* wco) {
  const char* names[] = {"wci", "wcf", "wco"};
  const char* gates[] = {"input", "forget", "output"};
  TensorView* views[] = {wci, wcf, wco};
  for (int k = 0; k < 3; ++k) {
    TensorView& v = *views[k];
    if (has_negative_dim(v.shape)) continue;  // validation reports it
    const bool no_elements = has_zero_dim(v.shape);
    if (use_peephole) {
      if (v.data == nullptr && !no_elements) {
        throw Error(ErrorCode::kInvalidArgument,
                    std::string(op) + ": " + names[k] + " is missing (no data): use_peephole is " +
                        "true, so the " + gates[k] + " gate's peephole weights [cell_size] are " +
                        "required (they may be omitted only when use_peephole is false)");
      }
      continue;
    }
    if (v.data != nullptr && !no_elements) continue;
    if (!w_has_expected_shape(input_size, cell_size, w)) {
      v = TensorView(nullptr, dtype, Shape{0});
      continue;
    }
    v = TensorView(thread_zeros(static_cast<std::size_t>(cell_size) * dtype_size(dtype)), dtype,
                   Shape{cell_size});
  }
}

}  // namespace blockrnn::ops
