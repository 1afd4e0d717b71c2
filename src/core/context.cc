// Process-wide settings: thread count and the reference switch (see blockrnn/context.h). The
// CPU path lives in core/isa.cc.
#include "blockrnn/context.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "blockrnn/error.h"
#include "blockrnn/version.h"
#include "core/cancel.h"
#include "core/parallel.h"

namespace blockrnn {
namespace {

// Parses a thread count from the environment: nullopt-like 0 when unset or empty; an error
// naming the variable when it is not an integer in [1, kMaxThreads]. For OMP_NUM_THREADS only
// the first entry of a nesting list ("4,2") counts.
int env_threads(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  std::string s(v);
  if (std::string(name) == "OMP_NUM_THREADS") s = s.substr(0, s.find(','));
  while (!s.empty() && s.back() == ' ') s.pop_back();
  std::size_t start = 0;
  while (start < s.size() && s[start] == ' ') ++start;
  s = s.substr(start);
  long n = 0;
  bool ok = !s.empty() && s.size() <= 6;
  for (char c : s) {
    if (c < '0' || c > '9') {
      ok = false;
      break;
    }
    n = n * 10 + (c - '0');
  }
  if (!ok || n < 1 || n > max_threads()) {
    throw Error(ErrorCode::kInvalidArgument, std::string(name) + " must be an integer in [1, " +
                                                 std::to_string(max_threads()) + "], got \"" + v +
                                                 "\"");
  }
  return static_cast<int>(n);
}

// Cores this process may run on (its affinity mask), else the hardware's.
int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return hw > 0 ? hw : 1;
}

int default_threads() {
  if (int n = env_threads("BLOCKRNN_NUM_THREADS")) return n;
  if (int n = env_threads("OMP_NUM_THREADS")) return n;
  return std::min(available_cores(), max_threads());
}

// What the machine can hold: physical memory, the process's address-space and data limits, and
// the cgroup (v2, then v1) memory limit, whichever is smallest.
long long machine_memory() {
  long long limit = std::numeric_limits<long long>::max();
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) limit = static_cast<long long>(pages) * page;
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit r{};
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
      limit = std::min(limit, static_cast<long long>(r.rlim_cur));
    }
  }
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(path);
    long long v = 0;
    if (f >> v && v > 0) limit = std::min(limit, v);  // "max" fails to parse: no limit
  }
  return limit;
}

std::atomic<long long> g_memory_limit{0};  // 0: the machine's

struct CancelHook {
  CancelCheck check = nullptr;
  void* user = nullptr;
};
thread_local CancelHook t_cancel;

// 0 until the first set_num_threads() or get_num_threads(). A bad environment value throws on
// every get_num_threads() until set_num_threads() gives a valid count.
std::atomic<int> g_threads{0};

std::atomic<bool>& reference() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("BLOCKRNN_FORCE_REFERENCE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }()};
  return on;
}

}  // namespace

int max_threads() {
  static const int cap = std::clamp(4 * available_cores(), 16, kMaxThreads);
  return cap;
}

void set_num_threads(int n) {
  if (n < 1 || n > max_threads()) {
    throw Error(ErrorCode::kInvalidArgument, "set_num_threads: n must be in [1, " +
                                                 std::to_string(max_threads()) + "], got " +
                                                 std::to_string(n));
  }
  g_threads.store(n);
}

int get_num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    int expected = 0;
    if (!g_threads.compare_exchange_strong(expected, n)) n = expected;
  }
  return n;
}

void set_memory_limit(long long bytes) {
  g_memory_limit.store(bytes > 0 ? bytes : 0);
}

long long get_memory_limit() {
  const long long v = g_memory_limit.load();
  if (v > 0) return v;
  static const long long machine = machine_memory();
  return machine;
}

void set_cancel_check(CancelCheck check, void* user) {
  t_cancel = {check, user};
}

namespace core {
bool cancel_requested() {
  return t_cancel.check != nullptr && t_cancel.check(t_cancel.user);
}
bool cancel_check_installed() {
  return t_cancel.check != nullptr;
}
}  // namespace core

namespace core {
namespace {

// OpenMP's thread stack size from OMP_STACKSIZE / GOMP_STACKSIZE ("512", "4M", "1G"; K by
// default), else 0: the system default, which libgomp uses too.
std::size_t omp_stack_size() {
  for (const char* name : {"GOMP_STACKSIZE", "OMP_STACKSIZE"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    unsigned long long unit = 1024;
    while (end != nullptr && *end == ' ') ++end;
    if (end != nullptr && *end != '\0') {
      switch (*end) {
        case 'b':
        case 'B':
          unit = 1;
          break;
        case 'k':
        case 'K':
          unit = 1ull << 10;
          break;
        case 'm':
        case 'M':
          unit = 1ull << 20;
          break;
        case 'g':
        case 'G':
          unit = 1ull << 30;
          break;
        default:
          unit = 1ull << 10;
      }
    }
    return static_cast<std::size_t>(n * unit);
  }
  return 0;
}

// Address space a thread may take beyond its stack once it allocates: glibc gives each new
// thread that calls malloc an arena of its own (up to 8 per core), a heap of 64 MiB of address
// space, mapped as 128 MiB and trimmed to an aligned 64 MiB. A probe counts that room for every
// thread it starts, and a grown team maps its arenas before the next probe (run_team), so the
// room a probe counted is not taken afterwards by an arena (docs/reliability.md, Thread budget).
// Where the arenas already exist or their count is capped (MALLOC_ARENA_MAX), this asks for more
// room than a thread takes: a team may get fewer workers than it could have, never a process
// that libgomp ends.
constexpr std::size_t kArenaRoom = std::size_t{128} << 20;

// The probe threads all stay alive until released, as the threads of an OpenMP team do, each
// holding the room of a malloc arena (PROT_NONE: address space, no memory) meanwhile.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;   // threads that tried their reservation
  int reserved = 0;  // threads that hold one
  bool open = false;
};

void* wait_at_gate(void* arg) {
  Gate& gate = *static_cast<Gate*>(arg);
  void* room =
      mmap(nullptr, kArenaRoom, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  std::unique_lock<std::mutex> lock(gate.mutex);
  ++gate.arrived;
  gate.reserved += room != MAP_FAILED;
  gate.changed.notify_all();
  gate.changed.wait(lock, [&] { return gate.open; });
  lock.unlock();
  if (room != MAP_FAILED) munmap(room, kArenaRoom);
  return nullptr;
}

// How many of n more threads, with OpenMP's stack size and the room of a malloc arena each, the
// system can hold at once beside everything alive now: starts them (stopping at the first
// refusal), waits until each has tried to reserve its arena's room, then releases and joins
// them.
int threads_startable(int n) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (const std::size_t stack = omp_stack_size(); stack > 0) {
    pthread_attr_setstacksize(&attr, std::max<std::size_t>(stack, PTHREAD_STACK_MIN));
  }
  Gate gate;
  pthread_t threads[kMaxThreads];  // no allocation: this runs when memory may be short
  int started = 0;
  while (started < std::min(n, kMaxThreads) &&
         pthread_create(&threads[started], &attr, wait_at_gate, &gate) == 0) {
    ++started;
  }
  int reserved = 0;
  {
    std::unique_lock<std::mutex> lock(gate.mutex);
    gate.changed.wait(lock, [&] { return gate.arrived == started; });
    reserved = gate.reserved;
    gate.open = true;
  }
  gate.changed.notify_all();
  for (int k = 0; k < started; ++k) pthread_join(threads[k], nullptr);
  pthread_attr_destroy(&attr);
  return reserved;
}

// The process-wide thread budget, in workers (threads beside the ones that call the library).
struct Budget {
  // Guards the counts; also held by a thread that grows its pool, from the probe until its
  // team has started, so that no other probe counts on threads that do not exist yet.
  std::mutex mutex;
  int held = 0;             // the workers of every thread's pool, running or idle
  int running = 0;          // the workers of the regions running now: at most max_threads() − 1
  int verified = 0;         // the most workers the system has been seen to hold at once (probes)
  long long shortages = 0;  // regions that got fewer workers than they asked for, ever
};

Budget& budget() {
  static Budget* b = new Budget;  // never destroyed: threads may give workers back during exit
  return *b;
}

// Ends the calling thread's libgomp pool (its idle workers exit); false when libgomp refuses
// (inside a parallel region), and the workers stay.
bool end_pool() {
#ifdef _OPENMP
  return omp_pause_resource(omp_pause_soft, omp_get_initial_device()) == 0;
#else
  return true;
#endif
}

// The workers of this thread's libgomp pool. libgomp sizes a host thread's pool to the team of
// its latest region and keeps it until the thread exits (or end_pool), so the pool is exactly
// what the thread holds: every region resizes the reservation to its team before it starts.
struct HostPool {
  int workers = 0;
  long long shortages_seen = 0;  // Budget::shortages when this thread's region started
  ~HostPool() {
    if (workers == 0) return;
    Budget& b = budget();
    std::lock_guard<std::mutex> lock(b.mutex);
    if (end_pool()) b.held -= workers;
    workers = 0;
  }
};
thread_local HostPool t_pool;

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel() != 0;
#else
  return true;
#endif
}

}  // namespace

TeamLease::TeamLease(int wanted) {
  if (wanted <= 1 || in_parallel_region()) return;  // no region: the pool is left as it is
  HostPool& pool = t_pool;
  Budget& b = budget();
  std::unique_lock<std::mutex> lock(b.mutex);
  const int room = std::max(max_threads() - 1 - b.running, 0);
  const int target = std::min(wanted - 1, room);
  if (target > pool.workers) {
    int grow = target - pool.workers;
    // A thread that alone holds workers may regrow its pool up to what was verified (libgomp
    // resizes the pool to every region's team); beside other holders, every growth is probed.
    const bool alone = b.held == pool.workers;
    if (!alone || b.held + grow > b.verified) {
      // One thread more than granted: a stack's worth of room is left to the rest of the
      // process (its allocations between this probe and the team's start).
      const int granted = std::min(grow, std::max(threads_startable(grow + 1) - 1, 0));
      b.verified = granted == grow ? std::max(b.verified, b.held + grow) : b.held + granted;
      grow = granted;
    }
    pool.workers += grow;
    b.held += grow;
    if (grow > 0) growing_ = std::move(lock);  // until team_started()
  } else if (target < pool.workers) {
    // The region's start shrinks the pool to its team; a team of one has no region, so the pool
    // is ended here.
    if (target > 0 || end_pool()) {
      b.held -= pool.workers - target;
      pool.workers = target;
    }
  }
  b.running += pool.workers;
  counted_ = true;
  size_ = std::min(pool.workers, target) + 1;
  if (size_ < wanted) ++b.shortages;
  pool.shortages_seen = b.shortages;
}

void claim_malloc_arena() {
  void* p = std::malloc(16);
  asm volatile("" : : "r"(p) : "memory");  // the allocation is made, not optimized away
  std::free(p);
}

void TeamLease::team_started() {
  if (growing_.owns_lock()) growing_.unlock();
}

TeamLease::~TeamLease() {
  if (!counted_) return;
  if (growing_.owns_lock()) growing_.unlock();
  HostPool& pool = t_pool;
  Budget& b = budget();
  std::lock_guard<std::mutex> lock(b.mutex);
  b.running -= pool.workers;
  // When another region got fewer workers than it asked for while this one ran, this pool ends
  // with its region, so that the next region of any caller may take its room.
  if (b.shortages != pool.shortages_seen && pool.workers > 0 && end_pool()) {
    b.held -= pool.workers;
    pool.workers = 0;
  }
}

}  // namespace core

void set_force_reference(bool on) {
  reference().store(on);
}
bool force_reference() {
  return reference().load();
}

const char* version() {
  return BLOCKRNN_VERSION_STRING;
}

}  // namespace blockrnn
