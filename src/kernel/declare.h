// The one signature a kernel has in both engines: the reference (namespace ref, src/ref, written
// to read like the spec) and the fast path (namespace cpu, src/cpu). Each kernel header names its
// kernels once, at namespace blockrnn scope,
//   BLOCKRNN_KERNEL(block_gru_fwd, BlockGRUDims, BlockGRUFwdArgs)
// so the two engines cannot drift apart and tests and the reference switch can swap them.
//
// Plan once, run many (src/layer, blockrnn/layer.h): the argument structs of the sequence kernels
// end with
//   const XPlan<T>* plan = nullptr;  // the weights packed beforehand, whose matrices are
//                                    // used instead of packing the weight pointers' rows
//   T* workspace = nullptr;  // a caller's workspace of x_workspace_elems(S, B, I, H) elements
// The kernel header declares the plan type and leaves it opaque: the fast engine defines it, with
// the workspace size function, in src/cpu/sequence_plan.h, so the interface depends on no engine.
// nullptr: the call packs and allocates its own. The fast path only: the reference ignores both.
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

// An engine's definitions of a kernel, instantiated for float and double; used at the end of a
// kernel's source file, inside the engine's namespace.
#define BLOCKRNN_INSTANTIATE_KERNEL(fn, Dims, Args)         \
  template void fn<float>(const Dims&, const Args<float>&); \
  template void fn<double>(const Dims&, const Args<double>&);
