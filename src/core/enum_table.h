// A value per enumerator, for enums numbered 0, 1, … in declaration order (names of error codes,
// dtypes and ISA paths, dtype sizes). Each caller static_asserts that its table covers the enum.
#pragma once

#include <cstddef>

namespace blockrnn::core {

// table[e], or `other` for a value outside the enum.
template <class E, class V, std::size_t N>
constexpr V enum_lookup(E e, const V (&table)[N], V other) noexcept {
  const auto k = static_cast<std::size_t>(e);
  return k < N ? table[k] : other;
}

}  // namespace blockrnn::core
