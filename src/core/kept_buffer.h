// The workspace cache: a one-shot op's per-call workspace, kept by the calling thread for its
// next call.
//
// A one-shot sequence op needs tens of MB of workspace per call (BlockLSTMGrad at T = 50,
// B = 64, I = H = 512: 92 MB). glibc maps a block that large afresh at every call and unmaps it
// at the end, so every call faulted in and zeroed every page again: 13 thousand page faults, a
// tenth of the call's time at two threads. oneDNN keeps its scratchpad the same way. The layer
// objects (blockrnn/layer.h) own their workspace and do not use the cache.
//
// Each thread keeps at most one buffer, the largest it has used that fits the limit; all the
// kept buffers together stay within get_workspace_cache_limit() (blockrnn/context.h). A call
// takes its thread's buffer when it is large enough (else frees it and allocates its own) and
// gives it back at the end, also when the call throws. Nothing reads a workspace before writing
// it, so a kept buffer's old contents change no result (the layer objects reuse theirs the same
// way, with the same bits as the ops).
#pragma once

#include <cstddef>

namespace blockrnn::core {

class KeptBuffer {
 public:
  // `bytes` (> 0) of memory, aligned to 64 bytes; its contents are unspecified. Throws
  // std::bad_alloc when it cannot be allocated.
  explicit KeptBuffer(std::size_t bytes);
  ~KeptBuffer();
  KeptBuffer(const KeptBuffer&) = delete;
  KeptBuffer& operator=(const KeptBuffer&) = delete;

  void* data() const { return data_; }
  // true: a buffer an earlier call on this thread used (its pages are in memory already).
  bool reused() const { return reused_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;  // the allocation's size, at least what was asked for
  bool reused_ = false;
};

// The bytes the threads keep now, all together (for tests and diagnostics).
std::size_t kept_workspace_bytes();

}  // namespace blockrnn::core
