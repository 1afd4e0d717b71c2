// Threading helper for element-wise work: splits [0, n) into contiguous chunks over at most
// get_num_threads() OpenMP threads. Each index is processed by exactly one thread and every
// result depends only on its own index, so results never depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#include "blockrnn/context.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace blockrnn::core {

// Makes sure the system can start a team of n threads before an OpenMP region asks for one:
// libgomp ends the process when it cannot create a thread, so the first time a call needs more
// threads than any call before it, n − 1 threads with OpenMP's stack size are started and joined
// here. Failure is Error(kResourceExhausted) naming the op; success is remembered (context.cc).
void ensure_threads(const char* op, int n);

// Below this much work (elements) a parallel region costs more than it saves.
constexpr std::int64_t kParallelGrain = 16384;

template <typename F>
void parallel_for(std::int64_t n, std::int64_t work_per_item, F&& f) {
  if (n <= 0) return;
  const std::int64_t total = n * std::max<std::int64_t>(work_per_item, 1);
  const int threads = static_cast<int>(std::min<std::int64_t>(
      {get_num_threads(), n, std::max<std::int64_t>(total / kParallelGrain, 1)}));
  if (threads <= 1) {
    f(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const int t = omp_get_thread_num();
    const int nt = omp_get_num_threads();
#else
    const int t = 0, nt = 1;
#endif
    const std::int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) f(begin, end);
  }
}

}  // namespace blockrnn::core
