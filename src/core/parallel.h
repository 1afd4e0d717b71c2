// Threading: every OpenMP parallel region of the library runs through run_team, which takes its
// team from the process-wide thread budget (TeamLease, context.cc), and parallel_for, which
// splits [0, n) into contiguous chunks over such a team. Each index is processed by exactly one
// thread and every result depends only on its own index, so results never depend on the thread
// count — which is what lets the budget give a call fewer threads than it asked for.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "blockrnn/context.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace blockrnn::core {

// The team of one parallel region, reserved from the process-wide thread budget (the rule is in
// blockrnn/context.h and docs/reliability.md, "Thread budget"). libgomp ends the process when it
// cannot create a thread, and it keeps every host thread's pool of worker threads alive between
// regions, so the budget counts every pool: a thread's pool is exactly the workers it holds.
// Growing a pool beyond what the system has been seen to hold first starts and joins that many
// threads (with OpenMP's stack size); a refusal means fewer workers, down to none (size() == 1:
// run without a parallel region). Never throws.
class TeamLease {
 public:
  explicit TeamLease(int wanted);  // the team the region would like, the calling thread included
  ~TeamLease();                    // the region's end: gives the workers back when others hold some
  TeamLease(const TeamLease&) = delete;
  TeamLease& operator=(const TeamLease&) = delete;

  int size() const { return size_; }  // 1 ≤ size() ≤ max(wanted, 1)
  // The pool grew for this region (after a probe): its new workers must map their malloc arenas
  // (claim_malloc_arena) before team_started() lets another probe count the room left.
  bool grew() const { return growing_.owns_lock(); }
  // Called by the team's thread 0 (the thread that made the lease) as the region's first
  // statement: every worker exists now, so other threads may grow their pools.
  void team_started();

 private:
  int size_ = 1;
  bool counted_ = false;                  // counted among the running teams
  std::unique_lock<std::mutex> growing_;  // held from the probe until the grown team exists
};

// Makes glibc give the calling thread its malloc arena now, if it is to have one of its own: a
// small allocation, freed at once.
void claim_malloc_arena();

// Runs body(id, nt) on a team of at most `wanted` threads, as many as the budget grants (body
// may contain `#pragma omp barrier`; every thread must reach each of them). One thread, or a call
// from inside a parallel region (the host's or ours), runs body(0, 1) directly.
template <typename F>
void run_team(int wanted, F&& body) {
  TeamLease lease(wanted);
  if (lease.size() <= 1) {
    body(0, 1);
    return;
  }
  const bool grew = lease.grew();
#pragma omp parallel num_threads(lease.size())
  {
#ifdef _OPENMP
    const int id = omp_get_thread_num();
    if (grew) {
      // Every new worker's arena exists before another caller may probe (TeamLease).
      claim_malloc_arena();
#pragma omp barrier
    }
    if (id == 0) lease.team_started();
    body(id, omp_get_num_threads());
#else
    body(0, 1);
#endif
  }
}

// Below this much work (elements) a parallel region costs more than it saves.
constexpr std::int64_t kParallelGrain = 16384;

template <typename F>
void parallel_for(std::int64_t n, std::int64_t work_per_item, F&& f) {
  if (n <= 0) return;
  const std::int64_t total = n * std::max<std::int64_t>(work_per_item, 1);
  const int threads = static_cast<int>(std::min<std::int64_t>(
      {get_num_threads(), n, std::max<std::int64_t>(total / kParallelGrain, 1)}));
  run_team(threads, [&](int t, int nt) {
    const std::int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end) f(begin, end);
  });
}

}  // namespace blockrnn::core
