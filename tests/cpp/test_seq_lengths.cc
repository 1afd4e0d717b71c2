// seq_lengths, the sequence ops' optional per-example lengths (blockrnn's extension beyond
// TensorFlow; docs/ops.md). Every property runs on every sequence family through the
// name-based run_op, on whichever path the suite runs (fast by default; ctest runs this binary
// again with BLOCKRNN_FORCE_REFERENCE=1 and each ISA):
//   - oracle: each example run alone (batch 1, seq_len_max = min(L_b, S), no lengths) gives
//     that example's outputs, x_grad and state gradients bit for bit, and the weight
//     gradients summed over examples (to rounding: the batched call sums in another order);
//   - garbage (NaN) in x, h_grad, cs_grad and the forward outputs past each length changes
//     nothing, bit for bit;
//   - lengths all ≥ S give exactly the call without lengths;
//   - results are bitwise identical for 1, 2 and 3 threads, and for a permuted batch
//     (non-increasing lengths take the prefix path, any other order the masked one);
//   - fast path against the reference; float16, float32, float64; validation errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "blockrnn/blockrnn.h"
#include "gemm/gemm.h"
#include "op_inputs.h"
#include "test_util.h"

namespace blockrnn::testing {
namespace {

struct Family {
  const char* fwd;
  const char* grad;
  bool lstm;
};
const Family kFamilies[] = {{"BlockLSTM", "BlockLSTMGrad", true},
                            {"BlockLSTMV2", "BlockLSTMGradV2", true},
                            {"BlockGRU", "BlockGRUGrad", false},
                            {"BlockGRUResetAfter", "BlockGRUResetAfterGrad", false}};

Tensor clone(const Tensor& t) {
  Tensor c(t.dtype(), t.shape());
  if (t.num_bytes() > 0) std::memcpy(c.data(), t.data(), t.num_bytes());
  return c;
}

bool bitwise(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.num_bytes() == 0 || std::memcmp(a.data(), b.data(), a.num_bytes()) == 0);
}

Tensor lengths_tensor(const std::vector<std::int64_t>& L) {
  Tensor t(DType::kInt64, Shape{static_cast<std::int64_t>(L.size())});
  std::copy(L.begin(), L.end(), t.data_as<std::int64_t>());
  return t;
}

bool batched_input(const std::string& name, const Tensor& t) {
  return t.shape().rank() == 3 || name == "cs_prev" || name == "h_prev";
}

// Rows [b, b+1) of the batch dimension: [T, B, n] → [T, 1, n], [B, n] → [1, n].
Tensor slice_example(const Tensor& t, std::int64_t b) {
  const Shape& s = t.shape();
  const bool seq = s.rank() == 3;
  const std::int64_t steps = seq ? s[0] : 1, B = seq ? s[1] : s[0], n = s[s.rank() - 1];
  Tensor out(t.dtype(), seq ? Shape{steps, 1, n} : Shape{1, n});
  const std::size_t row = static_cast<std::size_t>(n) * dtype_size(t.dtype());
  for (std::int64_t k = 0; k < steps; ++k) {
    std::memcpy(static_cast<char*>(out.data()) + k * row,
                static_cast<const char*>(t.data()) + (k * B + b) * row, row);
  }
  return out;
}

// Sets the rows of example b at steps t ≥ from of a [T, B, n] tensor to `v`.
void fill_past(Tensor& t, std::int64_t b, std::int64_t from, double v) {
  const std::int64_t T = t.shape()[0], B = t.shape()[1], n = t.shape()[2];
  for (std::int64_t k = from; k < T; ++k) {
    for (std::int64_t j = 0; j < n; ++j) set(t, (k * B + b) * n + j, v);
  }
}

// One problem of a family: the forward inputs and the incoming gradients, by name.
struct Problem {
  Family f;
  std::int64_t T, B, I, H, S;
  DType dtype;
  std::map<std::string, Tensor> in;  // forward inputs (seq_len_max included) and h_grad, cs_grad
  AttrMap fwd_attrs, grad_attrs;

  Problem(Family fam, DType dt, std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_,
          std::int64_t S_, unsigned seed)
      : f(fam), T(T_), B(B_), I(I_), H(H_), S(S_), dtype(dt) {
    std::mt19937_64 rng(seed);
    const OpDef& def = find_op(f.grad);
    OpCall c = make_call(def, rng, T, B, I, H, dtype);
    for (std::size_t k = 0; k < c.inputs.size(); ++k)
      in.emplace(def.inputs[k], std::move(c.inputs[k]));
    in.at("seq_len_max") = scalar_int64(S);
    if (f.lstm) {
      fwd_attrs = {{"use_peephole", 1.0}, {"cell_clip", 0.5}};
      grad_attrs = {{"use_peephole", 1.0}};
    }
  }

  std::vector<TensorView> views(const OpDef& def, const std::map<std::string, Tensor>& named,
                                const Tensor* lengths) const {
    std::vector<TensorView> v;
    for (const std::string& name : def.inputs) {
      if (name == "seq_lengths") {
        if (lengths != nullptr) v.push_back(lengths->view());
        continue;
      }
      v.push_back(named.at(name).view());
    }
    return v;
  }

  std::vector<Tensor> forward(const Tensor* lengths) const {
    return run_op(f.fwd, views(find_op(f.fwd), in, lengths), fwd_attrs);
  }

  // The grad's inputs: the forward inputs, the forward outputs `fwd` and the incoming grads.
  std::map<std::string, Tensor> grad_inputs(const std::vector<Tensor>& fwd) const {
    std::map<std::string, Tensor> named;
    for (const auto& [k, t] : in) named.emplace(k, clone(t));
    const OpDef& fdef = find_op(f.fwd);
    for (std::size_t k = 0; k < fwd.size(); ++k)
      named.insert_or_assign(fdef.outputs[k], clone(fwd[k]));
    return named;
  }

  std::vector<Tensor> backward(const std::map<std::string, Tensor>& named,
                               const Tensor* lengths) const {
    return run_op(f.grad, views(find_op(f.grad), named, lengths), grad_attrs);
  }

  // The same problem for example b alone with seq_len_max = steps.
  Problem alone(std::int64_t b, std::int64_t steps) const {
    Problem p = *this;
    for (auto& [name, t] : p.in) {
      if (name == "seq_len_max") {
        t = scalar_int64(steps);
      } else if (batched_input(name, t)) {
        t = slice_example(in.at(name), b);
      }
    }
    p.B = 1;
    p.S = steps;
    return p;
  }

  Problem(const Problem& o)
      : f(o.f),
        T(o.T),
        B(o.B),
        I(o.I),
        H(o.H),
        S(o.S),
        dtype(o.dtype),
        fwd_attrs(o.fwd_attrs),
        grad_attrs(o.grad_attrs) {
    for (const auto& [k, t] : o.in) in.emplace(k, clone(t));
  }
};

// A grad output is per-example (sliced by example) or a parameter gradient (summed).
bool per_example_output(const std::string& name) {
  return name == "x_grad" || name.find("prev_grad") != std::string::npos;
}

double rounding_tol(DType dtype) {
  // Parameter gradients: the batched call sums S·B terms in another order than the sum of
  // per-example sums; a few ulps of the accumulation type per term.
  return dtype == DType::kFloat64 ? 1e-12 : dtype == DType::kFloat32 ? 2e-5 : 2e-3;
}

// Property (a): the batched call with lengths against each example alone.
void check_oracle(const Problem& p, const std::vector<std::int64_t>& L) {
  SCOPED_TRACE(std::string(p.f.fwd) + " " + dtype_name(p.dtype));
  const Tensor lengths = lengths_tensor(L);
  const std::vector<Tensor> fwd = p.forward(&lengths);
  const auto gin = p.grad_inputs(fwd);
  const std::vector<Tensor> grad = p.backward(gin, &lengths);
  const OpDef& fdef = find_op(p.f.fwd);
  const OpDef& gdef = find_op(p.f.grad);
  std::vector<Tensor> sums;
  for (const Tensor& g : grad) sums.emplace_back(DType::kFloat64, g.shape());
  for (std::int64_t b = 0; b < p.B; ++b) {
    SCOPED_TRACE("example " + std::to_string(b) + " length " + std::to_string(L[b]));
    const Problem one = p.alone(b, std::min(L[b], p.S));
    const std::vector<Tensor> f1 = one.forward(nullptr);
    for (std::size_t k = 0; k < fwd.size(); ++k) {
      EXPECT_TRUE(bitwise(slice_example(fwd[k], b), f1[k])) << fdef.outputs[k];
    }
    std::map<std::string, Tensor> g1in;
    for (const auto& [name, t] : gin) {
      g1in.emplace(name, name == "seq_len_max"    ? scalar_int64(std::min(L[b], p.S))
                         : batched_input(name, t) ? slice_example(t, b)
                                                  : clone(t));
    }
    const std::vector<Tensor> g1 = one.backward(g1in, nullptr);
    for (std::size_t k = 0; k < grad.size(); ++k) {
      if (per_example_output(gdef.outputs[k])) {
        EXPECT_TRUE(bitwise(slice_example(grad[k], b), g1[k])) << gdef.outputs[k];
      } else {
        for (std::int64_t e = 0; e < g1[k].num_elements(); ++e) {
          set(sums[k], e, get(sums[k], e) + get(g1[k], e));
        }
      }
    }
  }
  for (std::size_t k = 0; k < grad.size(); ++k) {
    if (per_example_output(gdef.outputs[k])) continue;
    Tensor got(DType::kFloat64, grad[k].shape());
    for (std::int64_t e = 0; e < got.num_elements(); ++e) set(got, e, get(grad[k], e));
    EXPECT_TRUE(all_close(got, sums[k], rounding_tol(p.dtype), rounding_tol(p.dtype)))
        << gdef.outputs[k];
  }
}

const std::vector<std::int64_t> kUnsorted = {3, 0, 7, 5, 7, 1, 2, 6};  // T = 7
const std::vector<std::int64_t> kSorted = {7, 7, 6, 5, 3, 2, 1, 0};

TEST(SeqLengths, EachExampleAloneIsTheOracle) {
  for (const Family& f : kFamilies) {
    for (DType dt : {DType::kFloat64, DType::kFloat32, DType::kFloat16}) {
      for (std::int64_t S : {7, 5}) {
        check_oracle(Problem(f, dt, 7, 8, 5, 6, S, 11), kUnsorted);
        check_oracle(Problem(f, dt, 7, 8, 5, 6, S, 12), kSorted);
      }
    }
  }
}

// Property (e): NaN in every position past an example's length, in every input that has one,
// changes no output bit.
TEST(SeqLengths, GarbagePastTheLengthsDoesNotLeak) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Family& f : kFamilies) {
    for (DType dt : {DType::kFloat64, DType::kFloat32, DType::kFloat16}) {
      for (const auto& L : {kUnsorted, kSorted}) {
        SCOPED_TRACE(std::string(f.fwd) + " " + dtype_name(dt));
        const Problem clean(f, dt, 7, 8, 5, 6, 7, 21);
        Problem dirty = clean;
        const Tensor lengths = lengths_tensor(L);
        for (std::int64_t b = 0; b < 8; ++b) fill_past(dirty.in.at("x"), b, L[b], nan);
        const std::vector<Tensor> fwd = clean.forward(&lengths);
        const std::vector<Tensor> fwd_dirty = dirty.forward(&lengths);
        for (std::size_t k = 0; k < fwd.size(); ++k) EXPECT_TRUE(bitwise(fwd[k], fwd_dirty[k]));
        auto gin = clean.grad_inputs(fwd);
        auto gin_dirty = dirty.grad_inputs(fwd);
        for (auto& [name, t] : gin_dirty) {
          if (t.shape().rank() != 3) continue;
          for (std::int64_t b = 0; b < 8; ++b) fill_past(t, b, L[b], nan);
        }
        const std::vector<Tensor> g = clean.backward(gin, &lengths);
        const std::vector<Tensor> g_dirty = dirty.backward(gin_dirty, &lengths);
        for (std::size_t k = 0; k < g.size(); ++k) {
          EXPECT_TRUE(bitwise(g[k], g_dirty[k])) << find_op(f.grad).outputs[k];
        }
      }
    }
  }
}

// Property (d): lengths that end no example before S are the call without lengths.
TEST(SeqLengths, FullLengthsEqualAbsent) {
  for (const Family& f : kFamilies) {
    for (std::int64_t S : {7, 4}) {
      const Problem p(f, DType::kFloat32, 7, 5, 4, 6, S, 31);
      const Tensor lengths = lengths_tensor({7, 7, S, 7, S});
      const std::vector<Tensor> a = p.forward(nullptr), b = p.forward(&lengths);
      for (std::size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(bitwise(a[k], b[k]));
      const auto gin = p.grad_inputs(a);
      const std::vector<Tensor> ga = p.backward(gin, nullptr), gb = p.backward(gin, &lengths);
      for (std::size_t k = 0; k < ga.size(); ++k) EXPECT_TRUE(bitwise(ga[k], gb[k]));
    }
  }
}

// Property (f) and (i): 1, 2 and 3 threads give the same bits (H = 128 makes the time loops
// use several threads); a permuted batch gives the permuted per-example results bit for bit,
// and the parameter gradients to rounding.
TEST(SeqLengths, ThreadCountsAndBatchOrder) {
  const int saved = get_num_threads();
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.fwd);
    const Problem p(f, DType::kFloat32, 6, 8, 24, 128, 6, 41);
    const std::vector<std::int64_t> L = {6, 5, 5, 3, 2, 2, 1, 0};  // sorted: prefix path
    const Tensor lengths = lengths_tensor(L);
    std::vector<std::vector<Tensor>> runs;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      std::vector<Tensor> out = p.forward(&lengths);
      const auto gin = p.grad_inputs(out);
      for (Tensor& g : p.backward(gin, &lengths)) out.push_back(std::move(g));
      runs.push_back(std::move(out));
    }
    set_num_threads(saved);
    for (std::size_t r = 1; r < runs.size(); ++r) {
      for (std::size_t k = 0; k < runs[0].size(); ++k) EXPECT_TRUE(bitwise(runs[0][k], runs[r][k]));
    }
    // The reversed batch (increasing lengths: the masked path).
    Problem q = p;
    for (auto& [name, t] : q.in) {
      if (name == "seq_len_max" || !batched_input(name, t)) continue;
      const Tensor& src = p.in.at(name);
      const bool seq = src.shape().rank() == 3;
      const std::int64_t steps = seq ? src.shape()[0] : 1, n = src.shape()[src.shape().rank() - 1];
      const std::size_t row = static_cast<std::size_t>(n) * dtype_size(src.dtype());
      for (std::int64_t k = 0; k < steps; ++k) {
        for (std::int64_t b = 0; b < 8; ++b) {
          std::memcpy(static_cast<char*>(t.data()) + (k * 8 + b) * row,
                      static_cast<const char*>(src.data()) + (k * 8 + (7 - b)) * row, row);
        }
      }
    }
    std::vector<std::int64_t> R(L.rbegin(), L.rend());
    const Tensor rlengths = lengths_tensor(R);
    const std::vector<Tensor> rf = q.forward(&rlengths);
    for (std::size_t k = 0; k < rf.size(); ++k) {
      for (std::int64_t b = 0; b < 8; ++b) {
        EXPECT_TRUE(bitwise(slice_example(runs[0][k], b), slice_example(rf[k], 7 - b)));
      }
    }
  }
}

// Property (b): the fast path against the reference (the reference is the per-example
// definition; the fast path differs in GEMM accumulation order only, docs/tolerances.md).
TEST(SeqLengths, FastMatchesReference) {
  const bool saved = force_reference();
  for (const Family& f : kFamilies) {
    for (const auto& L : {kUnsorted, kSorted}) {
      SCOPED_TRACE(f.fwd);
      const Problem p(f, DType::kFloat64, 7, 8, 5, 16, 7, 51);
      const Tensor lengths = lengths_tensor(L);
      set_force_reference(true);
      const std::vector<Tensor> rf = p.forward(&lengths);
      const std::vector<Tensor> rg = p.backward(p.grad_inputs(rf), &lengths);
      set_force_reference(false);
      const std::vector<Tensor> ff = p.forward(&lengths);
      const std::vector<Tensor> fg = p.backward(p.grad_inputs(rf), &lengths);
      // float64, inputs in [-1, 1], T = 7: rounding only (accumulation order).
      for (std::size_t k = 0; k < rf.size(); ++k)
        EXPECT_TRUE(all_close(ff[k], rf[k], 1e-12, 1e-12));
      for (std::size_t k = 0; k < rg.size(); ++k)
        EXPECT_TRUE(all_close(fg[k], rg[k], 1e-12, 1e-12));
    }
  }
  set_force_reference(saved);
}

// The fast path's premise: a GEMM row's bits do not depend on how many rows the call has or
// where the row sits among them.
TEST(SeqLengths, GemmRowsDoNotDependOnM) {
  std::mt19937_64 rng(61);
  const std::int64_t K = 300, N = 70;
  const Tensor a = random_tensor(DType::kFloat32, Shape{40, K}, rng);
  const Tensor b = random_tensor(DType::kFloat32, Shape{K, N}, rng);
  Tensor full(DType::kFloat32, Shape{40, N});
  gemm::gemm<float>(gemm::Trans::kNo, gemm::Trans::kNo, 40, N, K, a.data_as<float>(), K,
                    b.data_as<float>(), N, 0.0f, full.data_as<float>(), N);
  for (std::int64_t m = 1; m <= 40; ++m) {
    for (std::int64_t r0 : {std::int64_t{0}, 40 - m}) {
      std::vector<float> c(m * N);
      gemm::gemm<float>(gemm::Trans::kNo, gemm::Trans::kNo, m, N, K, a.data_as<float>() + r0 * K, K,
                        b.data_as<float>(), N, 0.0f, c.data(), N);
      EXPECT_EQ(std::memcmp(c.data(), full.data_as<float>() + r0 * N, c.size() * sizeof(float)), 0)
          << "m " << m << " r0 " << r0;
    }
  }
}

// Property (h): validation, before anything runs.
TEST(SeqLengths, Validation) {
  for (const Family& f : kFamilies) {
    const Problem p(f, DType::kFloat32, 4, 3, 2, 5, 4, 71);
    auto call = [&](const Tensor& lengths, const char* op) {
      if (std::string(op) == f.fwd) {
        p.forward(&lengths);
      } else {
        p.backward(p.grad_inputs(p.forward(nullptr)), &lengths);
      }
    };
    for (const char* op : {f.fwd, f.grad}) {
      SCOPED_TRACE(op);
      const std::string o = std::string(op) + ": seq_lengths";
      expect_invalid([&] { call(lengths_tensor({1, 2}), op); }, o + " must have shape [3]");
      expect_invalid([&] { call(scalar_int64(2), op); }, o + " must be rank 1");
      Tensor f32(DType::kFloat32, Shape{3});
      expect_invalid([&] { call(f32, op); }, o + " must be int64, got float32");
      expect_invalid(
          [&] {
            call(lengths_tensor({1, -1, 2}), op);
          },
          o + " must be between 0 and 4 (time_len of x), got seq_lengths[1] = -1");
      expect_invalid([&] { call(lengths_tensor({1, 2, 5}), op); }, "got seq_lengths[2] = 5");
      expect_invalid(
          [&] {
            call(lengths_tensor({std::numeric_limits<std::int64_t>::max(), 0, 0}), op);
          },
          "got seq_lengths[0] = 9223372036854775807");
    }
  }
  // The typed API: absent by default; given, validated the same way.
  std::mt19937_64 rng(72);
  BlockGRUInputs in;
  const Tensor x = random_tensor(DType::kFloat32, Shape{3, 2, 4}, rng);
  const Tensor h0 = random_tensor(DType::kFloat32, Shape{2, 5}, rng);
  const Tensor w_ru = random_tensor(DType::kFloat32, Shape{9, 10}, rng);
  const Tensor w_c = random_tensor(DType::kFloat32, Shape{9, 5}, rng);
  const Tensor b_ru = random_tensor(DType::kFloat32, Shape{10}, rng);
  const Tensor b_c = random_tensor(DType::kFloat32, Shape{5}, rng);
  in.x = x.view();
  in.h_prev = h0.view();
  in.w_ru = w_ru.view();
  in.w_c = w_c.view();
  in.b_ru = b_ru.view();
  in.b_c = b_c.view();
  const BlockGRUResult absent = block_gru(in);
  const Tensor L = lengths_tensor({3, 1});
  in.seq_lengths = L.view();
  const BlockGRUResult given = block_gru(in);
  EXPECT_TRUE(bitwise(absent.h, given.h) == false);
  for (std::int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(get(given.h, (1 * 2 + 1) * 5 + j), 0.0);  // example 1 past its length
    EXPECT_EQ(get(given.h, (0 * 2 + 1) * 5 + j), get(absent.h, (0 * 2 + 1) * 5 + j));
  }
  const Tensor bad = lengths_tensor({4, 1});
  in.seq_lengths = bad.view();
  expect_invalid([&] { block_gru(in); }, "BlockGRU: seq_lengths must be between 0 and 3");
}

}  // namespace
}  // namespace blockrnn::testing
