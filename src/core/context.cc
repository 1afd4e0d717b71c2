// Process-wide settings: thread count and the reference switch (see blockrnn/context.h).
#include "blockrnn/context.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "blas/gemm.h"
#include "blockrnn/error.h"

namespace blockrnn {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1 || n > 4096) return fallback;
  return static_cast<int>(n);
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

std::atomic<int>& threads() {
  static std::atomic<int> n = [] {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    const int value = env_int("BLOCKRNN_NUM_THREADS", cores > 0 ? cores : 1);
    blas::set_num_threads(value);
    return value;
  }();
  return n;
}

std::atomic<bool>& reference() {
  static std::atomic<bool> on{env_flag("BLOCKRNN_FORCE_REFERENCE")};
  return on;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "set_num_threads: n must be at least 1, got " + std::to_string(n));
  }
  threads().store(n);
  blas::set_num_threads(n);
}

int get_num_threads() {
  return threads().load();
}

void set_force_reference(bool on) {
  reference().store(on);
}
bool force_reference() {
  return reference().load();
}

const char* version() {
  return "0.1.0";
}

}  // namespace blockrnn
