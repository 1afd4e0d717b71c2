// blockrnn/error.h — the one exception type the library throws at its public surface.
//
// Every failure reaches the caller as blockrnn::Error carrying an ErrorCode. Messages name the
// op, the argument, what was expected and what was given, e.g.
//   "GRUBlockCellGrad: d_h must have shape [4, 16] (batch_size, cell_size), got [4, 15]".
#pragma once

#include <stdexcept>
#include <string>

#include "blockrnn/export.h"

namespace blockrnn {

enum class ErrorCode {
  kInvalidArgument,    // bad shapes, ranks, dtypes or values (docs/design.md)
  kUnimplemented,      // a documented path that is not built (e.g. a dtype not yet supported)
  kResourceExhausted,  // sizes whose byte counts overflow, exceed the memory limit or cannot be
                       // allocated, and thread teams the system cannot create
  kCancelled,          // a long call stopped at a step boundary because the caller asked
                       // (set_cancel_check; in Python: a signal such as Ctrl-C)
  kInternal,           // a broken invariant inside the library: a bug, please report it
};

BLOCKRNN_API const char* error_code_name(ErrorCode code) noexcept;

class BLOCKRNN_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace blockrnn
