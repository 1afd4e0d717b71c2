// Names of error codes.
#include "blockrnn/error.h"

#include <iterator>

#include "core/enum_table.h"

namespace blockrnn {

namespace {
constexpr const char* kNames[] = {"InvalidArgument", "Unimplemented", "ResourceExhausted",
                                  "Cancelled", "Internal"};
static_assert(std::size(kNames) == static_cast<std::size_t>(ErrorCode::kInternal) + 1);
}  // namespace

const char* error_code_name(ErrorCode code) noexcept {
  return core::enum_lookup(code, kNames, "Unknown");
}

}  // namespace blockrnn
