// The steps one example of a sequence op runs, with blockrnn's seq_lengths extension.
#pragma once

#include <cstdint>

namespace blockrnn {

// Steps example b runs: min(L_b, S), or S without lengths (lengths == nullptr).
inline std::int64_t steps_of(const std::int64_t* lengths, std::int64_t S, std::int64_t b) {
  return lengths == nullptr ? S : (lengths[b] < S ? lengths[b] : S);
}

}  // namespace blockrnn
