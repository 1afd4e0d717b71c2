// The child process of the thread-budget stress test (test_thread_budget.cc): many callers run
// the same sequence ops at once, with many threads each, under an address-space limit that
// fits about `teams` teams of OpenMP worker stacks. libgomp ends the process when it cannot
// start a thread, so this runs in its own process; the parent checks the exit status.
//
// Usage: blockrnn_thread_stress CALLERS THREADS TEAMS REPS
//   CALLERS  concurrent calling threads        THREADS  set_num_threads(THREADS)
//   TEAMS    address space beyond what is mapped when the calls start, in teams of THREADS − 1
//            worker stacks (OpenMP's stack size: OMP_STACKSIZE, which the parent sets)
//   REPS     calls per caller and op
// Every call must either give results bitwise equal to a one-thread run, or fail with
// Error(kResourceExhausted) (memory, not threads: a call short of threads runs with fewer).
// Prints a summary; exit status 0 when all calls did and at least one ran, 2 when a call gave a
// different result or another error, 3 when every call was refused.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "op_inputs.h"

namespace {

// Bytes of address space the process has mapped now (/proc/self/statm, first field).
long long mapped_bytes() {
  std::ifstream f("/proc/self/statm");
  long long pages = 0;
  f >> pages;
  return pages * sysconf(_SC_PAGE_SIZE);
}

long long stack_bytes() {
  const char* v = std::getenv("OMP_STACKSIZE");  // the parent sets "<n>M"
  const long long mib = v != nullptr ? std::atoll(v) : 0;
  return mib > 0 ? mib << 20 : 8ll << 20;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace blockrnn;
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s CALLERS THREADS TEAMS REPS\n", argv[0]);
    return 64;
  }
  const int callers = std::atoi(argv[1]), threads = std::atoi(argv[2]);
  const double teams = std::atof(argv[3]);
  const int reps = std::atoi(argv[4]);

  // Big enough that the GEMMs and the time loop ask for every thread (about 2^17 multiply-adds
  // per thread and step); small enough to take milliseconds.
  std::mt19937_64 rng(25);
  std::vector<blockrnn::testing::OpCall> calls;
  for (const char* op : {"BlockLSTM", "BlockGRU"}) {
    calls.push_back(blockrnn::testing::make_call(find_op(op), rng, 3, 64, 64, 128));
  }
  set_num_threads(1);
  std::vector<std::vector<Tensor>> serial;
  for (const blockrnn::testing::OpCall& c : calls)
    serial.push_back(run_op(c.op, c.views(), c.attrs));

  std::atomic<int> same{0}, exhausted{0}, wrong{0};
  std::latch ready(callers), start(1);
  std::vector<std::thread> pool;
  for (int k = 0; k < callers; ++k) {
    pool.emplace_back([&] {
      const Tensor warm(DType::kFloat32, Shape{16});  // this thread's malloc arena
      ready.count_down();
      start.wait();
      for (int rep = 0; rep < reps; ++rep) {
        for (std::size_t c = 0; c < calls.size(); ++c) {
          try {
            const std::vector<Tensor> out = run_op(calls[c].op, calls[c].views(), calls[c].attrs);
            bool equal = out.size() == serial[c].size();
            for (std::size_t j = 0; equal && j < out.size(); ++j) {
              equal = blockrnn::testing::bitwise_equal(out[j], serial[c][j]);
            }
            (equal ? same : wrong)++;
          } catch (const Error& e) {
            if (e.code() == ErrorCode::kResourceExhausted) {
              exhausted++;
            } else {
              wrong++;
              std::fprintf(stderr, "%s: unexpected error: %s\n", calls[c].op.c_str(), e.what());
            }
          }
        }
      }
    });
  }
  // Callers (their stacks and malloc arenas) exist; the limit leaves room for `teams` teams of
  // workers.
  ready.wait();
  const long long limit =
      mapped_bytes() + static_cast<long long>(teams * double(threads - 1) * double(stack_bytes()));
  const rlimit r{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  if (setrlimit(RLIMIT_AS, &r) != 0) {
    std::perror("setrlimit");
    return 64;
  }
  set_num_threads(threads);
  start.count_down();
  for (std::thread& t : pool) t.join();
  std::printf(
      "callers %d, threads %d, teams %.2f: %d bitwise equal, %d ResourceExhausted, %d wrong\n",
      callers, threads, teams, same.load(), exhausted.load(), wrong.load());
  if (wrong.load() > 0) return 2;
  // A shortage of threads never refuses a call: with fewer threads it still runs.
  return same.load() > 0 ? 0 : 3;
}
