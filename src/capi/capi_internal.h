// What the C ABI's source files share (src/capi/*.cc): the per-thread last error, the mapping of
// exceptions onto status codes, and the checks and copies of blockrnn_tensor descriptors.
// Internal: not installed, not part of the public API.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <new>
#include <string>

#include "blockrnn/c_api.h"
#include "blockrnn/error.h"
#include "blockrnn/tensor.h"

namespace blockrnn::capi {

// The message of the most recent failed call on this thread (blockrnn_last_error).
extern thread_local std::string t_last_error;

blockrnn_status status_of(ErrorCode code);

// The last error belongs to the calls that return a status: each clears it on success and sets
// it on failure (guarded). A call that returns no status runs through attempted, which sets it
// only when that call fails and never clears it, so that a caller may query the library (op
// names, settings) between a failed call and reading its message.

// Runs `f` and maps whatever it throws onto a status, recording the message; leaves the last
// error as it was when `f` succeeds.
template <typename F>
blockrnn_status attempted(F&& f) noexcept {
  try {
    f();
    return BLOCKRNN_OK;
  } catch (const Error& e) {
    t_last_error = e.what();
    return status_of(e.code());
  } catch (const std::bad_alloc&) {
    t_last_error = "out of memory";
    return BLOCKRNN_RESOURCE_EXHAUSTED;
  } catch (const std::exception& e) {
    t_last_error = std::string("unexpected exception: ") + e.what();
    return BLOCKRNN_UNKNOWN;
  } catch (...) {
    t_last_error = "unexpected exception of unknown type";
    return BLOCKRNN_UNKNOWN;
  }
}

// attempted(f) for the calls that return a status: success clears the last error.
template <typename F>
blockrnn_status guarded(F&& f) noexcept {
  const blockrnn_status status = attempted(f);
  if (status == BLOCKRNN_OK) t_last_error.clear();
  return status;
}

[[noreturn]] void invalid(const std::string& message);

// The dtype, checked to be a blockrnn_dtype; `where` prefixes the message.
DType checked_dtype(int32_t dtype, const std::string& where);
// The shape, its dimensions non-negative and its element count addressable.
Shape checked_shape(const blockrnn_tensor& t, const std::string& where);
// Refuses strides whose byte offsets from data overflow int64 or the address space.
void check_strides(const blockrnn_tensor& t, const Shape& shape, DType dtype,
                   const std::string& where);
// True when the strides are NULL or those of the dense row-major layout.
bool is_dense(const blockrnn_tensor& t, const Shape& shape);
// Copies a strided tensor into a dense row-major one, element by element.
void gather(const blockrnn_tensor& t, const Shape& shape, Tensor& dense);

// ---- The handles' descriptors (rnn_c_api.cc, layer_c_api.cc; defined in capi_views.cc) ------

// Refuses a NULL pointer argument by name: "<fn>: <name> is NULL".
template <typename P>
void require(const P* p, const char* fn, const char* name) {
  if (p == nullptr) invalid(std::string(fn) + ": " + name + " is NULL");
}

// An optional tensor is absent when its data is NULL and its rank 0 (a zeroed descriptor).
inline bool is_absent(const blockrnn_tensor& t) {
  return t.data == nullptr && t.rank == 0;
}

// An input as a view; absent stays absent; a strided one is gathered into `copies` (at most the
// memory limit's worth: a broadcast with stride 0 can describe far more elements than memory).
// Messages start "<fn>: <name>: ".
TensorView input_view(const blockrnn_tensor& t, const char* fn, const std::string& name,
                      std::deque<Tensor>& copies);
// An output as a view of the caller's memory, which must be dense; absent stays absent.
MutableTensorView output_view(const blockrnn_tensor& t, const char* fn, const std::string& name);

}  // namespace blockrnn::capi
