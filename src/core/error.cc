// Names of error codes.
#include "blockrnn/error.h"

namespace blockrnn {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kUnimplemented:
      return "Unimplemented";
    case ErrorCode::kResourceExhausted:
      return "ResourceExhausted";
    case ErrorCode::kCancelled:
      return "Cancelled";
    case ErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

}  // namespace blockrnn
