// The process-wide thread budget (docs/reliability.md, "Thread budget"): many concurrent callers,
// each asking for many threads, under an address-space limit that fits about one team of
// OpenMP workers. Before the budget, each caller's libgomp team was started unchecked and
// libgomp ended the process ("Thread creation failed", exit status 1). The workload runs in a
// child process (thread_stress_child.cc) so that such an end is a failed test, not a dead test
// runner; the child checks every result against a one-thread run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace blockrnn {
namespace {

struct ChildResult {
  bool finished = false;  // false: killed at the time limit
  int status = 0;         // waitpid's status
  std::string output;     // stdout and stderr
};

// Runs the stress child with `args` and OMP_STACKSIZE=<stack_mib>M, killing it after `limit`.
ChildResult run_child(const std::vector<std::string>& args, int stack_mib,
                      std::chrono::seconds limit) {
  const std::string log =
      ::testing::TempDir() + "thread_stress_" + std::to_string(getpid()) + ".log";
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("OMP_STACKSIZE=", 0) != 0 &&
        std::string(*e).rfind("GOMP_STACKSIZE=", 0) != 0 &&
        std::string(*e).rfind("MALLOC_ARENA_MAX=", 0) != 0 &&
        std::string(*e).rfind("GLIBC_TUNABLES=", 0) != 0) {
      env_strings.push_back(*e);
    }
  }
  env_strings.push_back("OMP_STACKSIZE=" + std::to_string(stack_mib) + "M");
  // No MALLOC_ARENA_MAX: glibc maps a malloc arena (64 MiB of address space) for each new
  // thread that allocates, up to 8 per core, OpenMP's workers included; the budget counts that
  // room in its probes and has a grown team map its arenas before the next probe. Without that,
  // an arena mapped after a probe took the room the probe had counted and libgomp ended the
  // process (3 of 342 loaded runs of these cases before; 0 of 360 since).
  std::vector<std::string> argv_strings = {BLOCKRNN_THREAD_STRESS};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  // Everything the child needs is built before fork: after it, only exec-safe calls.
  std::vector<char*> argv, envp;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  for (std::string& s : env_strings) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  std::FILE* out = std::fopen(log.c_str(), "w");
  if (out == nullptr) throw std::runtime_error("cannot open " + log);
  const int fd = fileno(out);

  ChildResult r;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  std::fclose(out);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    const pid_t done = waitpid(pid, &r.status, WNOHANG);
    if (done == pid) {
      r.finished = true;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &r.status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  r.output = text.str();
  std::remove(log.c_str());
  return r;
}

// Every call of `callers` threads at set_num_threads(threads) runs (bitwise as one thread) or is
// refused with ResourceExhausted, at least one runs, and the process lives.
void expect_survives(int callers, int threads, double teams, int stack_mib) {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer maps memory of its own for every new thread (its alternate signal stack,
  // thread bookkeeping), which no budget can count, and aborts when an address-space limit
  // refuses it ("failed to allocate … SetAlternateSignalStack") instead of failing the thread's
  // creation. The release suite runs these stresses; under ASan they would test ASan.
  GTEST_SKIP() << "the address-space stress tests ASan's own per-thread mappings under ASan";
#endif
  // 60 s: the whole run takes a few seconds even on two busy cores; a hang is a failure.
  const ChildResult r =
      run_child({std::to_string(callers), std::to_string(threads), std::to_string(teams), "2"},
                stack_mib, std::chrono::seconds(60));
  SCOPED_TRACE("callers " + std::to_string(callers) + ", threads " + std::to_string(threads) +
               ", teams " + std::to_string(teams) + ": " + r.output);
  ASSERT_TRUE(r.finished) << "the stress child did not finish within 60 s";
  ASSERT_TRUE(WIFEXITED(r.status)) << "the stress child died of signal " << WTERMSIG(r.status);
  EXPECT_EQ(WEXITSTATUS(r.status), 0)
      << "the stress child failed (1: libgomp ended it; 2: a wrong result or error; 3: every "
         "call refused)";
}

// 64 MiB stacks: the limit fits `teams` teams of the thread count's worker stacks besides what
// the process has mapped when the calls start. A worker's malloc arena takes up to 128 MiB more
// while glibc maps it, so 3 teams of stacks are one team of workers with their arenas.
TEST(ThreadBudget, TwelveCallersAtEveryThreadCountUnderAnAddressSpaceForOneTeam) {
  for (int threads : {2, 3, 5, 7, max_threads()}) expect_survives(12, threads, 1.0, 64);
}

TEST(ThreadBudget, TwelveCallersWithAllThreadsUnderLessThanATeam) {
  for (double teams : {0.1, 0.5, 1.25}) expect_survives(12, max_threads(), teams, 64);
}

TEST(ThreadBudget, TwelveCallersWithAllThreadsUnderRoomForATeamWithItsArenas) {
  for (double teams : {3.0, 3.5}) expect_survives(12, max_threads(), teams, 64);
}

TEST(ThreadBudget, FourCallersWithAllThreadsAndTheDefaultStackSize) {
  expect_survives(4, max_threads(), 1.1, 8);
}

}  // namespace
}  // namespace blockrnn
