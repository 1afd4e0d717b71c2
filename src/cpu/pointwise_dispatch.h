// The element-type dispatch of the fused element-wise kernels (lstm_pointwise.h,
// gru_pointwise.h): float32 runs the per-ISA kernel isa::FN_f32 (AVX-512, AVX2+FMA or baseline,
// chosen at run time by pointwise_dispatch.cc: core/isa.h), every other type the generic
// template detail::FN_generic it is compiled from (src/cpu/pointwise_impl.inc).
#pragma once

#include <type_traits>

// The body of a kernel template on element type T: FN(args) for T.
#define BLOCKRNN_POINTWISE_CALL(FN, ...)      \
  do {                                        \
    if constexpr (std::is_same_v<T, float>) { \
      isa::FN##_f32(__VA_ARGS__);             \
    } else {                                  \
      detail::FN##_generic(__VA_ARGS__);      \
    }                                         \
  } while (false)
