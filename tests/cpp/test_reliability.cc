// Reliability of every op (docs/reliability.md): bitwise determinism across runs and thread
// counts, exact serial results under 8 concurrent callers, inputs never modified.
#include <cstring>
#include <thread>

#include "core/isa.h"
#include "op_inputs.h"

namespace blockrnn {
namespace {

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.num_bytes()) == 0;
}

class EveryOp : public ::testing::TestWithParam<std::string> {};

// Bitwise identical results at 1, 2, 3, 4 and 7 threads, on every ISA path this CPU has
// (src/gemm/gemm.h: output tiles fixed by the shape, one thread per tile over the whole K;
// element-wise work is per element). Shapes (T, B, I, H) reach every tile edge of every path:
// one row, odd M/N/K, reductions above every K block (I = 700, 2049), B·T in the thousands
// (the hoisted input GEMM and the weight-gradient reductions over T·B rows).
TEST_P(EveryOp, DeterministicAcrossRunsAndThreadCounts) {
  const int saved = get_num_threads();
  const std::int64_t shapes[][4] = {{5, 64, 96, 128},   {3, 5, 333, 333}, {4, 1, 700, 90},
                                    {2, 129, 257, 255}, {40, 75, 33, 17}, {1, 2, 2049, 33}};
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline}) {
    if (!core::isa_supported(isa)) continue;
    // The reference path has no ISA-specific code: one pass is enough there.
    if (force_reference() && isa != core::active_isa()) continue;
    set_isa(isa_name(isa));
    for (const auto& s : shapes) {
      std::mt19937_64 rng(21);
      const testing::OpCall call =
          testing::make_call(find_op(GetParam()), rng, s[0], s[1], s[2], s[3]);
      std::vector<std::vector<Tensor>> results;
      for (int threads : {1, 2, 3, 4, 7, 1}) {
        set_num_threads(threads);
        results.push_back(run_op(call.op, call.views(), call.attrs));
      }
      for (std::size_t r = 1; r < results.size(); ++r) {
        for (std::size_t k = 0; k < results[0].size(); ++k) {
          EXPECT_TRUE(bitwise_equal(results[r][k], results[0][k]))
              << GetParam() << " output " << find_op(GetParam()).outputs[k] << " run " << r
              << " path " << isa_name(isa) << " shape T=" << s[0] << " B=" << s[1] << " I=" << s[2]
              << " H=" << s[3];
        }
      }
    }
  }
  set_isa("");
  set_num_threads(saved);
}

TEST_P(EveryOp, ConcurrentCallsGiveSerialResults) {
  const OpDef& def = find_op(GetParam());
  std::mt19937_64 rng(22);
  std::vector<testing::OpCall> calls;
  std::vector<std::vector<Tensor>> serial(8), parallel(8);
  for (int k = 0; k < 8; ++k) {
    calls.push_back(testing::make_call(def, rng, 4, 16, 24, 32));
    serial[k] = run_op(def.name, calls[k].views(), calls[k].attrs);
  }
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 3; ++rep) {
        parallel[k] = run_op(def.name, calls[k].views(), calls[k].attrs);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < 8; ++k) {
    for (std::size_t j = 0; j < serial[k].size(); ++j) {
      EXPECT_TRUE(bitwise_equal(parallel[k][j], serial[k][j])) << def.name << " caller " << k;
    }
  }
}

TEST_P(EveryOp, InputsAreNeverModified) {
  std::mt19937_64 rng(23);
  const testing::OpCall call = testing::make_call(find_op(GetParam()), rng, 3, 4, 5, 6);
  std::vector<Tensor> copies;
  for (const Tensor& t : call.inputs) {
    Tensor c(t.dtype(), t.shape());
    std::memcpy(c.data(), t.data(), t.num_bytes());
    copies.push_back(std::move(c));
  }
  (void)run_op(call.op, call.views(), call.attrs);
  for (std::size_t k = 0; k < copies.size(); ++k) {
    EXPECT_TRUE(bitwise_equal(call.inputs[k], copies[k]))
        << GetParam() << " modified input " << find_op(GetParam()).inputs[k];
  }
}

std::vector<std::string> all_ops() {
  std::vector<std::string> names;
  for (const OpDef& d : list_ops()) names.push_back(d.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Reliability, EveryOp, ::testing::ValuesIn(all_ops()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '.') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace blockrnn
