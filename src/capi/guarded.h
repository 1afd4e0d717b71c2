// The C API's error handling, shared by the files of src/capi/: runs f, maps whatever it throws
// onto a blockrnn_status and records the message for blockrnn_last_error() (or clears it).
#pragma once

#include <functional>

#include "blockrnn/c_api.h"

namespace blockrnn::capi {
blockrnn_status run_guarded(const std::function<void()>& f) noexcept;
}  // namespace blockrnn::capi
