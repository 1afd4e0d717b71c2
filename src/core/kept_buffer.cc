#include "core/kept_buffer.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "blockrnn/context.h"

namespace blockrnn {
namespace {

constexpr long long kDefaultLimit = 256LL << 20;
std::atomic<long long> g_limit{-1};  // < 0: kDefaultLimit
// The bytes of every thread's kept buffer.
std::atomic<std::size_t> g_kept{0};

std::size_t limit_bytes() {
  const long long v = g_limit.load(std::memory_order_relaxed);
  return static_cast<std::size_t>(v < 0 ? kDefaultLimit : v);
}

// The calling thread's kept buffer (empty: none). Freed when the thread exits.
struct Slot {
  void* data = nullptr;
  std::size_t bytes = 0;

  void release() {
    if (data == nullptr) return;
    std::free(data);
    g_kept.fetch_sub(bytes);
    data = nullptr;
    bytes = 0;
  }
  ~Slot() { release(); }
};
thread_local Slot t_slot;

}  // namespace

void set_workspace_cache_limit(long long bytes) {
  g_limit.store(bytes < 0 ? -1 : bytes);
  if (t_slot.bytes > limit_bytes()) t_slot.release();
}

long long get_workspace_cache_limit() {
  return static_cast<long long>(limit_bytes());
}

namespace core {

KeptBuffer::KeptBuffer(std::size_t bytes) {
  Slot& slot = t_slot;
  if (slot.data != nullptr && slot.bytes >= bytes && slot.bytes <= limit_bytes()) {
    data_ = slot.data;
    bytes_ = slot.bytes;
    reused_ = true;
    slot.data = nullptr;  // in use: an op called inside this one allocates its own
    slot.bytes = 0;
    g_kept.fetch_sub(bytes_);
    return;
  }
  slot.release();  // too small (or over the limit): the new buffer replaces it
  bytes_ = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, bytes_);
  if (data_ == nullptr) throw std::bad_alloc();
}

KeptBuffer::~KeptBuffer() {
  Slot& slot = t_slot;
  // An op called inside this one on the same thread may have filled the slot meanwhile: the
  // larger buffer stays.
  if (slot.bytes < bytes_) slot.release();
  if (slot.data == nullptr && bytes_ <= limit_bytes()) {
    if (g_kept.fetch_add(bytes_) + bytes_ <= limit_bytes()) {
      slot.data = data_;
      slot.bytes = bytes_;
      return;
    }
    g_kept.fetch_sub(bytes_);  // the other threads keep enough: this one is freed
  }
  std::free(data_);
}

std::size_t kept_workspace_bytes() {
  return g_kept.load();
}

}  // namespace core
}  // namespace blockrnn
