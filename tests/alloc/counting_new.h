// A replacement of the global operator new and delete that counts heap allocations, for the
// programs that check or report how many a call makes (tests/alloc/test_plan_allocations.cc,
// bench/layer_overhead.cc). It replaces the functions for the whole program, so include it in
// exactly one source file of a binary of its own, where it counts nothing else.
//
//   const long before = blockrnn::alloc_counter::count();
//   call();
//   const long made = blockrnn::alloc_counter::count() - before;
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace blockrnn::alloc_counter {

// operator new calls so far (every form: plain, array, aligned), and the most bytes one of them
// asked for since reset_largest().
inline std::atomic<long> allocations{0};
inline std::atomic<std::size_t> largest_bytes{0};

inline long count() {
  return allocations.load();
}
inline std::size_t largest() {
  return largest_bytes.load();
}
inline void reset_largest() {
  largest_bytes.store(0);
}
inline void record(std::size_t n) {
  ++allocations;
  std::size_t seen = largest_bytes.load();
  while (n > seen && !largest_bytes.compare_exchange_weak(seen, n)) {
  }
}

}  // namespace blockrnn::alloc_counter

// The replacements (not inline: the language requires replacement functions to be plain
// definitions, hence one including source file per program).
void* operator new(std::size_t n) {
  blockrnn::alloc_counter::record(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void* operator new(std::size_t n, std::align_val_t a) {
  blockrnn::alloc_counter::record(n);
  void* p = nullptr;
  const std::size_t al = std::max(std::size_t(a), sizeof(void*));
  if (posix_memalign(&p, al, n ? n : 1) != 0) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return operator new(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
