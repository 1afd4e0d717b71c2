// The one signature a kernel has in both engines: the reference (namespace ref, src/ref, written
// to read like the spec) and the fast path (namespace cpu, src/cpu). Each kernel header names its
// kernels once, at namespace blockrnn scope,
//   BLOCKRNN_KERNEL(block_gru_fwd, BlockGRUDims, BlockGRUFwdArgs)
// so the two engines cannot drift apart and tests and the reference switch can swap them.
#pragma once

#define BLOCKRNN_KERNEL(fn, Dims, Args)     \
  namespace ref {                           \
  template <typename T>                     \
  void fn(const Dims& d, const Args<T>& a); \
  }                                         \
  namespace cpu {                           \
  template <typename T>                     \
  void fn(const Dims& d, const Args<T>& a); \
  }
