// Large per-call buffers faulted in before the loops that use them.
//
// A one-shot sequence op allocates its workspace, packed operands and (16-bit calls) staging
// copies per call, and a binding allocates its outputs: tens of MB at T = 50, B = 64, H = 512,
// which the allocator maps fresh. The first write to each 4 KiB page faults into the kernel,
// which zeroes the page. Inside a time loop that write comes from whichever thread gets there
// first while the others wait at the step's barrier, and the threads of a sequence op own
// columns, not pages: every thread writes into every page. So a large buffer is faulted in at
// once, before any loop runs, its pages split over the call's threads.
//
// Tried and not kept: advising transparent huge pages (madvise MADV_HUGEPAGE) for these
// buffers. At one thread it took a tenth off BlockLSTMGrad and BlockGRUGrad (512 times fewer
// faults), but at two threads a BlockLSTM forward + backward swung between 215 and 290 ms from
// one call to the next where 4 KiB pages stay within a few per cent (docs/performance.md).
#pragma once

#include <cstddef>

namespace blockrnn::core {

// Buffers smaller than kFaultInFromBytes are left to fault as they are written, and so are
// buffers larger than kFaultInUpToBytes: faulting in is work no cancel check can interrupt (a
// Ctrl-C must stop a T = 10⁶ call within a bounded time, and its outputs alone are GBs), and in
// a loop over that many steps the faults are spread thin anyway.
inline constexpr std::size_t kFaultInFromBytes = std::size_t{4} << 20;
inline constexpr std::size_t kFaultInUpToBytes = std::size_t{64} << 20;

// For a buffer just allocated, before its first use, of kFaultInFromBytes to kFaultInUpToBytes:
// writes a zero byte into each of its 4 KiB pages, the pages split over the threads a parallel
// region gets (core::parallel_for), so that each thread faults in its share now. The contents
// are then unspecified, as they were: only for buffers whose users write before they read.
// Nothing for a smaller or a larger buffer.
void fault_in(void* p, std::size_t bytes);

}  // namespace blockrnn::core
