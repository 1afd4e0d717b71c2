// The workspace cache (core/kept_buffer.h, set_workspace_cache_limit): a one-shot sequence op
// that reuses its thread's kept workspace gives the bits of one that allocates a new one, even
// when the kept buffer holds NaN from elsewhere (nothing reads workspace before writing it); the
// limit bounds what is kept, and a thread's buffer goes when the thread ends.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "core/kept_buffer.h"
#include "op_inputs.h"
#include "test_util.h"

namespace blockrnn::testing {
namespace {

// The default limit back after each test.
class KeptWorkspace : public ::testing::Test {
 protected:
  void TearDown() override { set_workspace_cache_limit(-1); }
};

// Leaves the calling thread's kept buffer at `bytes` bytes of NaN (all bits set).
void keep_poisoned_buffer(std::size_t bytes) {
  core::KeptBuffer buffer(bytes);
  std::memset(buffer.data(), 0xff, bytes);
}

std::vector<Tensor> run(const OpCall& c) {
  return run_op(c.op, c.views(), c.attrs);
}

TEST_F(KeptWorkspace, ReusedPoisonedBufferGivesTheBitsOfANewOne) {
  for (const OpDef& def : list_ops()) {
    if (!is_sequence_op(def.name)) continue;
    for (bool lengths : {false, true}) {
      SCOPED_TRACE(def.name + (lengths ? " with seq_lengths" : ""));
      std::mt19937_64 rng(7);
      const std::int64_t T = 9, B = 6, I = 11, H = 13;
      OpCall c = make_call(def, rng, T, B, I, H);
      if (lengths) {  // the lengths path carves more slices (compacted rows)
        Tensor l(DType::kInt64, Shape{B});
        const std::int64_t each[] = {9, 0, 4, 9, 1, 7};
        std::memcpy(l.data(), each, sizeof(each));
        c.inputs.push_back(std::move(l));
      }
      set_workspace_cache_limit(0);
      const std::vector<Tensor> fresh = run(c);
      EXPECT_EQ(core::kept_workspace_bytes(), 0u);
      set_workspace_cache_limit(-1);
      for (int round = 0; round < 2; ++round) {
        keep_poisoned_buffer(std::size_t{1} << 20);
        ASSERT_GE(core::kept_workspace_bytes(), std::size_t{1} << 20);
        const std::vector<Tensor> reused = run(c);
        ASSERT_EQ(reused.size(), fresh.size());
        for (std::size_t k = 0; k < fresh.size(); ++k) {
          EXPECT_TRUE(bitwise_equal(reused[k], fresh[k])) << "output " << def.outputs[k];
        }
      }
    }
  }
}

TEST_F(KeptWorkspace, TheLimitBoundsWhatIsKept) {
  set_workspace_cache_limit(0);  // frees what earlier tests left on this thread
  set_workspace_cache_limit(-1);
  EXPECT_EQ(get_workspace_cache_limit(), 256LL << 20);
  keep_poisoned_buffer(4096);
  EXPECT_EQ(core::kept_workspace_bytes(), 4096u);
  // A larger call replaces the thread's buffer: one buffer per thread.
  keep_poisoned_buffer(8192);
  EXPECT_EQ(core::kept_workspace_bytes(), 8192u);
  // A smaller call takes the kept one and gives it back.
  {
    core::KeptBuffer b(100);
    EXPECT_TRUE(b.reused());
    EXPECT_EQ(core::kept_workspace_bytes(), 0u);
    // An op inside that call (on this thread) gets a buffer of its own; the larger is kept.
    core::KeptBuffer inner(100);
    EXPECT_FALSE(inner.reused());
  }
  EXPECT_EQ(core::kept_workspace_bytes(), 8192u);
  // Lowering the limit frees this thread's buffer when it no longer fits.
  set_workspace_cache_limit(4096);
  EXPECT_EQ(core::kept_workspace_bytes(), 0u);
  keep_poisoned_buffer(8192);  // over the limit: not kept
  EXPECT_EQ(core::kept_workspace_bytes(), 0u);
  keep_poisoned_buffer(4096);
  EXPECT_EQ(core::kept_workspace_bytes(), 4096u);
  // Another thread may not keep more than the limit leaves over.
  std::thread([] {
    keep_poisoned_buffer(64);
    EXPECT_EQ(core::kept_workspace_bytes(), 4096u);
  }).join();
  set_workspace_cache_limit(0);
  EXPECT_EQ(get_workspace_cache_limit(), 0);
  EXPECT_EQ(core::kept_workspace_bytes(), 0u);
}

TEST_F(KeptWorkspace, AThreadsBufferGoesWhenTheThreadEnds) {
  set_workspace_cache_limit(-1);
  const std::size_t before = core::kept_workspace_bytes();
  std::thread([before] {
    std::mt19937_64 rng(3);
    const OpCall c = make_call(find_op("BlockGRUGrad"), rng, 5, 4, 3, 8);
    run(c);
    // The reference kernels take no workspace.
    if (!force_reference()) EXPECT_GT(core::kept_workspace_bytes(), before);
  }).join();
  EXPECT_EQ(core::kept_workspace_bytes(), before);
}

}  // namespace
}  // namespace blockrnn::testing
