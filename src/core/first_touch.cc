#include "core/first_touch.h"

#include <cstdint>

#include "core/parallel.h"

namespace blockrnn::core {

void fault_in(void* p, std::size_t bytes) {
  if (p == nullptr || bytes < kFaultInFromBytes || bytes > kFaultInUpToBytes) return;
  // One write per 4 KiB page (every page size is a multiple of it).
  constexpr std::int64_t kPage = 4096;
  char* const first_byte = static_cast<char*>(p);
  const std::int64_t pages = (static_cast<std::int64_t>(bytes) + kPage - 1) / kPage;
  parallel_for(pages, kPage, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t q = q0; q < q1; ++q) first_byte[q * kPage] = 0;
  });
}

}  // namespace blockrnn::core
