// Reliability of every op (docs/reliability.md): exact serial results under 8 concurrent
// callers, inputs never modified. Bitwise determinism across thread counts and ISA paths is a
// property of the generic op tester (test_ops.cc).
#include <thread>

#include "op_inputs.h"

namespace blockrnn {
namespace {

using testing::bitwise_equal;

class EveryOp : public ::testing::TestWithParam<std::string> {};

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
