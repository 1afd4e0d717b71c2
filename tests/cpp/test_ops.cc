// The generic op tester: every op of op_table.h × every property, through the registry
// (run_op). Properties: the fast path against the reference path on every ISA path this CPU has;
// float16 / float32 / float64 against the float64 reference (element-wise and NMSE); finite
// differences in float64 for the full gradients; caller-owned outputs poisoned with NaN are fully
// overwritten; empty shapes (T, B, I, H or seq_len_max zero); validation of every input's rank,
// shape and dtype naming the op and the argument; bitwise determinism across thread counts;
// the results of 8 concurrent callers equal to serial ones; inputs never modified; an output on
// an input refused even when the call has no work; the memory limit counting a bfloat16 call's
// product operands.
// Op-specific semantics (TF quirks, attr meanings, equations) stay in the per-op files.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "core/isa.h"
#include "op_shapes.h"
#include "op_table.h"
#include "test_util.h"

namespace blockrnn {
namespace {

using testing::bitwise_equal;
using testing::OpTest;
using testing::Tolerance;

struct Dims {
  std::int64_t T, B, I, H, S;  // S = seq_len_max
  std::string str() const {
    return "T=" + std::to_string(T) + " B=" + std::to_string(B) + " I=" + std::to_string(I) +
           " H=" + std::to_string(H) + " S=" + std::to_string(S);
  }
};

// Forward inputs whose shape op_shapes.h knows; any other name of a forward op is an optional
// trailing input the tester leaves out.
const std::set<std::string>& forward_input_names() {
  static const std::set<std::string> n = {"seq_len_max", "x",   "cs_prev", "h_prev", "w",   "wci",
                                          "wcf",         "wco", "b",       "w_ru",   "w_c", "b_ru",
                                          "b_c",         "w_i", "w_h",     "b_i",    "b_h"};
  return n;
}

// The forward output an upstream-gradient input stands for: "h_grad" and "d_h" → "h".
std::string upstream_of(const std::string& name) {
  if (name.rfind("d_", 0) == 0) return name.substr(2);
  if (name.size() > 5 && name.ends_with("_grad")) return name.substr(0, name.size() - 5);
  return "";
}

// One complete call of an op: inputs by name (in OpDef order) and attrs.
struct Call {
  std::string op;
  std::vector<std::string> names;
  std::vector<Tensor> inputs;
  AttrMap attrs;
  AttrMap forward_attrs;  // for a grad op: the attrs its forward op ran with
  std::vector<TensorView> views() const { return {inputs.begin(), inputs.end()}; }
  Tensor* find(const std::string& n) {
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (names[k] == n) return &inputs[k];
    }
    return nullptr;
  }
};

Tensor convert(const Tensor& t, DType dt) {
  Tensor c(dt, t.shape());
  for (std::int64_t e = 0; e < t.num_elements(); ++e) testing::set(c, e, testing::get(t, e));
  return c;
}

Tensor copy(const Tensor& t) {
  Tensor c(t.dtype(), t.shape());
  if (t.num_bytes() > 0) std::memcpy(c.data(), t.data(), t.num_bytes());
  return c;
}

std::vector<Tensor> run(const Call& c) {
  return run_op(c.op, c.views(), c.attrs);
}

// Forward inputs of `fwd` (random in dtype `dt`, the attrs drawn from the table, or fixed).
Call forward_call(const OpTest& t, const std::string& fwd, const Dims& d, DType dt,
                  std::mt19937_64& rng, bool fd_attrs) {
  Call c{fwd, {}, {}, {}, {}};
  for (const std::string& name : find_op(fwd).inputs) {
    if (!forward_input_names().count(name)) break;  // an optional trailing input
    c.names.push_back(name);
    if (name == "seq_len_max") {
      c.inputs.push_back(testing::scalar_int64(d.S));
    } else {
      // Weight matrices ~U(±1/√(I+H)) as layers initialize them (and as the Python tester
      // draws them): the tolerance rule's bound on Σ|terms| assumes that scale
      // (op_table.json, "c_reason"). Everything else ~U(±1).
      const Shape shape = testing::input_shape(fwd, name, d.T, d.B, d.I, d.H);
      const double s =
          name[0] == 'w' && shape.rank() == 2 ? 1.0 / std::sqrt(double(d.I + d.H)) : 1.0;
      c.inputs.push_back(testing::random_tensor(dt, shape, rng, -s, s));
    }
  }
  for (const testing::AttrChoice& a : t.attrs) {
    c.attrs[a.name] = a.values[rng() % a.values.size()];
  }
  if (fd_attrs) {
    for (const auto& [name, value] : testing::op_table().finite_difference_attrs) {
      if (c.attrs.count(name)) c.attrs[name] = value;
    }
  }
  return c;
}

// A consistent call of `t.op` in dtype `dt`: a grad op gets its forward op's inputs, outputs
// (computed in `dt`) and random upstream gradients.
// Where the forward op rejects the sizes (`forward_may_fail`, for the empty-shape cases), its
// outputs are random tensors of their shape.
Call make_call(const OpTest& t, const Dims& d, DType dt, std::mt19937_64& rng,
               bool fd_attrs = false, bool forward_may_fail = false) {
  if (t.forward.empty()) return forward_call(t, t.op, d, dt, rng, fd_attrs);
  Call f = forward_call(t, t.forward, d, dt, rng, fd_attrs);
  std::vector<Tensor> outs;
  const OpDef& fdef = find_op(t.forward);
  try {
    outs = run(f);
  } catch (const Error&) {
    if (!forward_may_fail) throw;
    for (const std::string& name : fdef.outputs) {
      outs.push_back(testing::random_tensor(
          dt, testing::input_shape(t.forward, name, d.T, d.B, d.I, d.H), rng));
    }
  }
  Call c{t.op, {}, {}, {}, f.attrs};
  for (const std::string& name : find_op(t.op).inputs) {
    if (Tensor* in = f.find(name)) {
      c.inputs.push_back(copy(*in));
    } else if (auto it = std::find(fdef.outputs.begin(), fdef.outputs.end(), name);
               it != fdef.outputs.end()) {
      c.inputs.push_back(copy(outs[it - fdef.outputs.begin()]));
    } else if (!upstream_of(name).empty()) {
      c.inputs.push_back(
          testing::random_tensor(dt, testing::input_shape(t.op, name, d.T, d.B, d.I, d.H), rng));
    } else {
      break;  // an optional trailing input
    }
    c.names.push_back(name);
  }
  for (const AttrDef& a : find_op(t.op).attrs) {
    if (f.attrs.count(a.name)) c.attrs[a.name] = f.attrs[a.name];
  }
  return c;
}

Call converted(const Call& c, DType dt) {
  Call w{c.op, c.names, {}, c.attrs, c.forward_attrs};
  for (const Tensor& t : c.inputs) {
    w.inputs.push_back(t.dtype() == DType::kInt64 ? copy(t) : convert(t, dt));
  }
  return w;
}

// The table's tolerance for a call of t's op of dims `d` in `dt`: K = I + H, the steps T.
Tolerance tolerance(const OpTest& t, DType dt, const Dims& d) {
  return testing::op_table().tolerance(dt, d.I + d.H, d.T, t.bf16_products);
}

// Element-wise (rtol·|b| + atol·max(1, max|b|)) and NMSE (Σ(a−b)² / Σb²) agreement.
::testing::AssertionResult close(const Tensor& a, const Tensor& b, const Tolerance& tol) {
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << a.shape().to_string() << " vs " << b.shape().to_string();
  }
  double scale = 1, err2 = 0, ref2 = 0;
  for (std::int64_t e = 0; e < b.num_elements(); ++e) {
    scale = std::max(scale, std::abs(testing::get(b, e)));
  }
  for (std::int64_t e = 0; e < a.num_elements(); ++e) {
    const double x = testing::get(a, e), y = testing::get(b, e);
    if (!(std::abs(x - y) <= tol.rtol * std::abs(y) + tol.atol * scale)) {
      return ::testing::AssertionFailure()
             << "element " << e << ": " << x << " vs " << y << " (rtol " << tol.rtol << ", atol "
             << tol.atol << "·" << scale << ")";
    }
    err2 += (x - y) * (x - y);
    ref2 += y * y;
  }
  const double nmse = ref2 > 0 ? err2 / ref2 : err2;
  if (!(nmse <= tol.nmse)) {
    return ::testing::AssertionFailure() << "NMSE " << nmse << " above " << tol.nmse;
  }
  return ::testing::AssertionSuccess();
}

std::vector<Tensor> run_in_mode(const Call& c, bool reference) {
  testing::ReferenceMode mode(reference);
  return run(c);
}

// Random problem sizes that cross the micro-kernels' tile edges.
Dims random_dims(const OpTest& t, std::mt19937_64& rng) {
  static const std::int64_t sizes[] = {1, 2, 7, 8, 9, 16, 17, 33};
  const bool seq = testing::is_sequence_op(t.op);
  Dims d{seq ? 1 + static_cast<std::int64_t>(rng() % 5) : 1, sizes[rng() % 8], sizes[rng() % 8],
         sizes[rng() % 8], 0};
  d.S = seq ? static_cast<std::int64_t>(rng() % (d.T + 1)) : d.T;
  if (seq && rng() % 2) d.S = d.T;  // seq_len_max = T half the time
  return d;
}

// The ISA paths to run: every one this CPU has, or the one BLOCKRNN_ISA names (ctest runs the
// suite once per path; the default run covers them all here).
std::vector<Isa> isa_paths() {
  const char* env = std::getenv("BLOCKRNN_ISA");
  if (env && *env) return {core::active_isa()};
  std::vector<Isa> p;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline}) {
    if (core::isa_supported(isa)) p.push_back(isa);
  }
  return p;
}

class IsaScope {
 public:
  explicit IsaScope(Isa isa) { set_isa(isa_name(isa)); }
  ~IsaScope() {
    const char* env = std::getenv("BLOCKRNN_ISA");
    set_isa(env ? env : "");
  }
};

// Every floating dtype. float16 and bfloat16 compute in float32 and round each stored value once;
// their tolerances (op_table.json, docs/tolerances.md) derive from that one rounding.
constexpr DType kDtypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
const char* dtype_str(DType dt) {
  return dtype_name(dt);
}

// `check(call, dims, dtype, seed)` on `count` random problems drawn from seeds first, first + 1,
// …, each in every dtype.
template <typename F>
void for_random_calls(const OpTest& t, std::uint64_t first, std::uint64_t count, F&& check) {
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    std::mt19937_64 rng(seed);
    const Dims d = random_dims(t, rng);
    for (DType dt : kDtypes) check(make_call(t, d, dt, rng), d, dt, seed);
  }
}

void fast_vs_reference(const OpTest& t) {
  for (Isa isa : isa_paths()) {
    IsaScope scope(isa);
    for_random_calls(t, 0, 6, [&](const Call& c, const Dims& d, DType dt, std::uint64_t seed) {
      const std::vector<Tensor> ref = run_in_mode(c, true), fast = run_in_mode(c, false);
      for (std::size_t k = 0; k < ref.size(); ++k) {
        EXPECT_TRUE(close(fast[k], ref[k], tolerance(t, dt, d)))
            << t.op << " output " << find_op(t.op).outputs[k] << " " << dtype_str(dt) << " path "
            << isa_name(isa) << " seed " << seed << " " << d.str();
      }
    });
  }
}

void dtypes_against_float64(const OpTest& t) {
  for_random_calls(t, 100, 4, [&](const Call& c, const Dims& d, DType dt, std::uint64_t seed) {
    const std::vector<Tensor> got = run(c);
    const std::vector<Tensor> want = run_in_mode(converted(c, DType::kFloat64), true);
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].dtype(), dt);
      EXPECT_TRUE(close(got[k], want[k], tolerance(t, dt, d)))
          << t.op << " output " << find_op(t.op).outputs[k] << " " << dtype_str(dt) << " seed "
          << seed << " " << d.str();
    }
  });
}

// L = Σ_u upstream_u ⊙ forward output u(inputs); each output of the grad op named as a forward
// input (or that name + "_grad") against central differences of L in float64.
void finite_differences(const OpTest& t) {
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    for (std::uint64_t seed = 0; seed < 2; ++seed) {
      std::mt19937_64 rng(200 + seed);
      Dims d{3, 2, 3, 4, seed == 0 ? 3 : 2};
      if (!testing::is_sequence_op(t.op)) d.T = d.S = 1;
      Call g = make_call(t, d, DType::kFloat64, rng, /*fd_attrs=*/true);
      const std::vector<Tensor> grads = run(g);
      Call f{t.forward, {}, {}, g.forward_attrs, {}};
      for (const std::string& name : find_op(t.forward).inputs) {
        Tensor* in = g.find(name);
        if (!in) break;
        f.names.push_back(name);
        f.inputs.push_back(copy(*in));
      }
      const OpDef& fdef = find_op(t.forward);
      auto loss = [&] {
        const std::vector<Tensor> outs = run(f);
        double l = 0;
        for (std::size_t k = 0; k < g.names.size(); ++k) {
          const std::string of = upstream_of(g.names[k]);
          auto it = std::find(fdef.outputs.begin(), fdef.outputs.end(), of);
          if (of.empty() || it == fdef.outputs.end()) continue;
          const Tensor& y = outs[it - fdef.outputs.begin()];
          for (std::int64_t e = 0; e < y.num_elements(); ++e) {
            l += g.inputs[k].data_as<double>()[e] * y.data_as<double>()[e];
          }
        }
        return l;
      };
      const std::vector<std::string>& onames = find_op(t.op).outputs;
      int checked = 0;
      for (std::size_t k = 0; k < onames.size(); ++k) {
        std::string in = onames[k];
        if (!f.find(in) && in.ends_with("_grad")) in = in.substr(0, in.size() - 5);
        Tensor* p = f.find(in);
        ASSERT_NE(p, nullptr) << t.op << " output " << onames[k] << " names no input";
        const testing::FiniteDifference fd = testing::finite_difference(*p, grads[k], loss);
        EXPECT_TRUE(fd.within(testing::op_table().finite_difference_rel))
            << t.op << " d/d" << in << ": max |numeric - analytic| " << fd.max_err
            << " reference=" << reference << " " << d.str();
        ++checked;
      }
      EXPECT_EQ(checked, static_cast<int>(onames.size()));
    }
  }
}

void poisoned_outputs(const OpTest& t) {
  for_random_calls(t, 300, 3, [&](const Call& c, const Dims& d, DType dt, std::uint64_t) {
    const std::vector<Tensor> want = run(c);
    const OutputSpec spec = infer_outputs(c.op, c.views(), c.attrs);
    std::vector<Tensor> outs;
    std::vector<MutableTensorView> views;
    for (const Shape& s : spec.shapes) outs.push_back(testing::poisoned(spec.dtype, s));
    for (Tensor& o : outs) views.push_back(o.mutable_view());
    run_op(c.op, c.views(), c.attrs, views);
    for (std::size_t k = 0; k < outs.size(); ++k) {
      EXPECT_TRUE(bitwise_equal(outs[k], want[k])) << t.op << " output " << find_op(t.op).outputs[k]
                                                   << " " << dtype_str(dt) << " " << d.str();
    }
  });
}

void empty_shapes(const OpTest& t) {
  const bool seq = testing::is_sequence_op(t.op);
  std::vector<Dims> cases = {{1, 0, 3, 4, 1}, {1, 2, 0, 4, 1}, {1, 2, 3, 0, 1}, {1, 0, 0, 0, 1}};
  if (seq) {
    for (Dims& d : cases) d.T = d.S = 3;
    cases.push_back({0, 2, 3, 4, 0});  // T = 0
    cases.push_back({3, 2, 3, 4, 0});  // seq_len_max = 0
  }
  for (const Dims& d : cases) {
    if ((d.B == 0 && t.positive.find('B') != std::string::npos) ||
        (d.H == 0 && t.positive.find('H') != std::string::npos)) {
      std::mt19937_64 rng(400);
      const Call c = make_call(t, d, DType::kFloat32, rng, false, /*forward_may_fail=*/true);
      try {
        (void)run(c);
        ADD_FAILURE() << t.op << " accepted " << d.str() << " (TensorFlow rejects it)";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
        EXPECT_EQ(std::string(e.what()).rfind(t.op + ": " + t.positive_error, 0), 0u) << e.what();
      }
      continue;
    }
    for (auto [reference, dt] : {std::pair{false, DType::kFloat16},
                                 {false, DType::kBFloat16},
                                 {false, DType::kFloat32},
                                 {true, DType::kFloat32},
                                 {false, DType::kFloat64}}) {
      std::mt19937_64 rng(400);
      const Call c = make_call(t, d, dt, rng);
      const OutputSpec spec = infer_outputs(c.op, c.views(), c.attrs);
      const std::vector<Tensor> fast = run_in_mode(c, reference);
      const std::vector<Tensor> want = run_in_mode(converted(c, DType::kFloat64), true);
      ASSERT_EQ(fast.size(), spec.shapes.size());
      for (std::size_t k = 0; k < fast.size(); ++k) {
        EXPECT_EQ(fast[k].shape(), spec.shapes[k]) << t.op << " " << d.str();
        // Finite and equal to the float64 reference: zeros where nothing accumulates.
        EXPECT_TRUE(close(fast[k], want[k], tolerance(t, dt, d)))
            << t.op << " output " << find_op(t.op).outputs[k] << " " << dtype_str(dt)
            << " reference=" << reference << " " << d.str();
      }
    }
  }
}

std::vector<std::int64_t> dims_of(const Shape& s) {
  return {s.dims(), s.dims() + s.rank()};
}

void expect_names(const Call& c, const std::string& arg, const std::string& what,
                  const std::string& fragment = "") {
  try {
    (void)run(c);
    ADD_FAILURE() << c.op << ": " << what << " of " << arg << " was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << m;
    EXPECT_NE(m.find(c.op), std::string::npos) << what << " " << arg << ": '" << m << "'";
    EXPECT_NE(m.find(arg), std::string::npos) << what << " " << arg << ": '" << m << "'";
    EXPECT_NE(m.find(fragment), std::string::npos) << "'" << m << "' lacks '" << fragment << "'";
  }
}

// Every input: one more dimension, each dimension one larger, and another dtype are each an
// InvalidArgument naming the op and that input (a dimension one larger may instead be reported
// on the input it disagrees with; the message still names the op and the argument's size).
void validation(const OpTest& t) {
  std::mt19937_64 rng(500);
  const Dims d{3, 2, 3, 4, 2};
  const Call good = make_call(t, d, DType::kFloat32, rng);
  (void)run(good);
  for (std::size_t k = 0; k < good.inputs.size(); ++k) {
    const std::string& arg = good.names[k];
    const Tensor& in = good.inputs[k];
    {  // wrong rank
      Call c = converted(good, DType::kFloat32);
      std::vector<std::int64_t> dims = dims_of(in.shape());
      dims.push_back(1);
      const Shape s = Shape::from_dims(dims.data(), static_cast<int>(dims.size()));
      c.inputs[k] = in.dtype() == DType::kInt64 ? Tensor(DType::kInt64, s)
                                                : testing::random_tensor(in.dtype(), s, rng);
      const int r = in.shape().rank();
      expect_names(c, arg, "a wrong rank",
                   r == 0 ? arg + " must be a scalar (rank 0), got shape " + s.to_string()
                          : arg + " must be rank " + std::to_string(r) + ", got rank " +
                                std::to_string(r + 1) + " (shape " + s.to_string() + ")");
      if (r > 0) {  // one dimension fewer
        dims.resize(r - 1);
        const Shape l = Shape::from_dims(dims.data(), r - 1);
        c.inputs[k] = testing::random_tensor(in.dtype(), l, rng);
        expect_names(c, arg, "a lower rank",
                     arg + " must be rank " + std::to_string(r) + ", got rank " +
                         std::to_string(r - 1) + " (shape " + l.to_string() + ")");
      }
    }
    if (in.dtype() != DType::kInt64) {  // wrong dtype
      // The first float input sets the dtype; another one must have it.
      std::size_t first = 0;
      while (good.inputs[first].dtype() == DType::kInt64) ++first;
      Call c = converted(good, DType::kFloat32);
      c.inputs[k] = convert(in, DType::kFloat64);
      const std::string other = k == first ? good.names[first + 1] : arg;
      expect_names(c, arg, "another dtype",
                   other + " must have the dtype of " + good.names[first] + " (" +
                       (k == first ? "float64), got float32" : "float32), got float64"));
      c.inputs[k] = Tensor(DType::kInt64, in.shape());
      expect_names(c, arg, "an integer dtype",
                   arg + " must be float16, bfloat16, float32 or float64, got int64");
    } else {
      Call c = converted(good, DType::kFloat32);
      c.inputs[k] = testing::random_tensor(DType::kFloat32, in.shape(), rng);
      expect_names(c, arg, "a float dtype", arg + " must be int64");
    }
    for (std::size_t j = 0; j < dims_of(in.shape()).size(); ++j) {  // wrong dimension
      // A forward sequence op's T is set by x alone: a longer x is another valid problem.
      if (t.forward.empty() && arg == "x" && j == 0 && testing::is_sequence_op(t.op)) continue;
      Call c = converted(good, DType::kFloat32);
      std::vector<std::int64_t> dims = dims_of(in.shape());
      ++dims[j];
      c.inputs[k] = testing::random_tensor(
          DType::kFloat32, Shape::from_dims(dims.data(), static_cast<int>(dims.size())), rng);
      try {
        (void)run(c);
        ADD_FAILURE() << t.op << ": dimension " << j << " of " << arg << " one larger accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
        EXPECT_EQ(std::string(e.what()).rfind(t.op + ": ", 0), 0u) << e.what();
      }
    }
  }
}

// Bitwise identical results at 1, 2, 3, 4 and 7 threads on every ISA path, for shapes that
// reach every tile edge: one row, odd M/N/K, reductions above every K block (I = 700, 2049),
// B·T in the thousands (src/gemm/gemm.h: output tiles fixed by the shape, one thread per tile
// over the whole K). bfloat16 at 1, 2 and 3 threads on the same shapes: its own path (staging,
// rounding, the bfloat16 products of the sequence ops' fast path) must not depend on the thread
// count either.
void determinism(const OpTest& t) {
  const int saved = get_num_threads();
  const Dims shapes[] = {{5, 64, 96, 128, 5},   {3, 5, 333, 333, 2},  {4, 1, 700, 90, 4},
                         {2, 129, 257, 255, 2}, {40, 75, 33, 17, 33}, {1, 2, 2049, 33, 1}};
  for (Isa isa : isa_paths()) {
    if (force_reference() && isa != isa_paths().front()) continue;  // no ISA code there
    IsaScope scope(isa);
    for (const Dims& d : shapes) {
      for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
        std::mt19937_64 rng(21);
        const Call c = make_call(t, d, dt, rng);
        std::vector<std::vector<Tensor>> results;
        const std::vector<int> thread_counts =
            dt == DType::kFloat32 ? std::vector<int>{1, 2, 3, 4, 7, 1} : std::vector<int>{1, 2, 3};
        for (int threads : thread_counts) {
          set_num_threads(threads);
          results.push_back(run(c));
        }
        for (std::size_t r = 1; r < results.size(); ++r) {
          for (std::size_t k = 0; k < results[0].size(); ++k) {
            EXPECT_TRUE(bitwise_equal(results[r][k], results[0][k]))
                << t.op << " output " << find_op(t.op).outputs[k] << " " << dtype_str(dt) << " run "
                << r << " path " << isa_name(isa) << " " << d.str();
          }
        }
      }
    }
  }
  set_num_threads(saved);
}

// 8 threads, each running its own call three times, get the bits of the same calls run one
// after another (no shared mutable state; each call owns its workspace).
void concurrent_calls(const OpTest& t) {
  std::mt19937_64 rng(22);
  std::vector<Call> calls;
  std::vector<std::vector<Tensor>> serial(8), parallel(8);
  for (int k = 0; k < 8; ++k) {
    calls.push_back(make_call(t, Dims{4, 16, 24, 32, 4}, DType::kFloat32, rng));
    serial[k] = run(calls[k]);
  }
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 3; ++rep) parallel[k] = run(calls[k]);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int k = 0; k < 8; ++k) {
    for (std::size_t j = 0; j < serial[k].size(); ++j) {
      EXPECT_TRUE(bitwise_equal(parallel[k][j], serial[k][j])) << t.op << " caller " << k;
    }
  }
}

// A call leaves every input's bytes as they were.
void inputs_unchanged(const OpTest& t) {
  std::mt19937_64 rng(23);
  const Call c = make_call(t, Dims{3, 4, 5, 6, 3}, DType::kFloat32, rng);
  std::vector<Tensor> before;
  for (const Tensor& in : c.inputs) before.push_back(copy(in));
  (void)run(c);
  for (std::size_t k = 0; k < before.size(); ++k) {
    EXPECT_TRUE(bitwise_equal(c.inputs[k], before[k])) << t.op << " modified input " << c.names[k];
  }
}

// An output on top of an input is refused even when the call has no work to do (B = 0 or
// H = 0): such a call still zero-fills its outputs, and an output such as w_grad [I+H, 4H] is
// not empty when B is. Every non-empty output is placed on every input that can hold it; the
// call must fail naming both, and leave the input as it was. (The LSTM cell ops refuse an
// empty cs_prev first, as TensorFlow does, so they are skipped where validation refuses.)
void output_on_input_refused(const OpTest& t) {
  for (const auto& [B, H] : {std::pair<std::int64_t, std::int64_t>{0, 4}, {3, 0}}) {
    std::mt19937_64 rng(29);
    Call c = make_call(t, Dims{2, B, 5, H, 2}, DType::kFloat32, rng, false,
                       /*forward_may_fail=*/true);
    OutputSpec spec;
    try {
      spec = infer_outputs(c.op, c.views(), c.attrs);
    } catch (const Error&) {
      continue;  // refused by validation (an empty cs_prev), nothing to place
    }
    const std::vector<std::string>& outputs = find_op(t.op).outputs;
    std::vector<Tensor> outs;
    for (const Shape& s : spec.shapes) outs.emplace_back(spec.dtype, s);
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (outs[k].num_bytes() == 0) continue;
      for (std::size_t j = 0; j < c.inputs.size(); ++j) {
        Tensor& in = c.inputs[j];
        if (in.dtype() != spec.dtype || in.num_bytes() < outs[k].num_bytes()) continue;
        const Tensor before = copy(in);
        std::vector<MutableTensorView> views;
        for (Tensor& o : outs) views.push_back(o.mutable_view());
        views[k].data = in.data();
        const std::string what = " B = " + std::to_string(B) + ", H = " + std::to_string(H) +
                                 ": output " + outputs[k] + " on input " + c.names[j];
        try {
          run_op(c.op, c.views(), c.attrs, views);
          ADD_FAILURE() << t.op << what << ": accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
          const std::string needle =
              t.op + ": output " + outputs[k] + " overlaps input " + c.names[j];
          EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
              << what << ": " << e.what();
        }
        EXPECT_TRUE(bitwise_equal(in, before)) << t.op << what << ": the input changed";
      }
    }
  }
}

// The memory check (get_memory_limit) counts a bfloat16 call's product operands before anything
// is allocated: on the fast path a bfloat16 call needs exactly the bytes of the same float16 call
// (the same float32 staging) plus the bytes of testing::bf16_operand_floats, named in the message;
// on the reference path, which has none, exactly the float16 call's. A limit one byte below what a
// bfloat16 call needs refuses it, naming the op; a limit of exactly that runs it.
void memory_limit(const OpTest& t) {
  const Dims d = testing::is_sequence_op(t.op) ? Dims{4, 16, 24, 32, 3} : Dims{1, 16, 24, 32, 1};
  const bool dp = core::active_isa() == Isa::kAvx512 && core::cpu_has_avx512_bf16();
  const double want_operands =
      4.0 * double(testing::bf16_operand_floats(t.op, d.S, d.B, d.I, d.H, dp));
  EXPECT_EQ(want_operands > 0, t.bf16_products > 0) << t.op << ": op_table.json's bf16_products";
  const long long saved = get_memory_limit();
  // The bytes a call needs, from the refusal's message at a limit of 1 byte.
  auto needed = [&](const Call& c, std::string* message) -> long long {
    set_memory_limit(1);
    try {
      (void)run(c);
      ADD_FAILURE() << t.op << ": ran at a memory limit of 1 byte";
      return -1;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
      *message = e.what();
      const std::size_t at = message->find(" (");
      return at == std::string::npos ? -1 : std::atoll(message->c_str() + at + 2);
    }
  };
  for (bool reference : {false, true}) {
    testing::ReferenceMode mode(reference);
    const char* path = reference ? " reference path" : " fast path";
    set_memory_limit(saved);  // a grad op's call runs its forward op
    std::mt19937_64 rng(31);
    const Call bf16 = make_call(t, d, DType::kBFloat16, rng);
    const Call f16 = converted(bf16, DType::kFloat16);
    std::string message, f16_message;
    const long long need = needed(bf16, &message), need_f16 = needed(f16, &f16_message);
    const bool counted = !reference && want_operands > 0;
    EXPECT_EQ(double(need - need_f16), counted ? want_operands : 0.0) << t.op << path;
    EXPECT_EQ(message.rfind(t.op + ": this call needs ", 0), 0u) << message;
    EXPECT_EQ(message.find("bfloat16 product operands up to") != std::string::npos, counted)
        << path << ": " << message;
    EXPECT_EQ(f16_message.find("bfloat16 product operands"), std::string::npos) << f16_message;
    set_memory_limit(need - 1);
    try {
      (void)run(bf16);
      ADD_FAILURE() << t.op << path << ": ran one byte below what it needs";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(t.op + ": this call needs ", 0), 0u) << e.what();
    }
    set_memory_limit(need);
    try {
      (void)run(bf16);
    } catch (const Error& e) {
      ADD_FAILURE() << t.op << path << ": refused at exactly what it needs: " << e.what();
    }
  }
  set_memory_limit(saved);
}

// The properties, by name (the test name's suffix).
struct Property {
  const char* name;
  void (*check)(const OpTest&);
  bool applies(const OpTest& t) const { return check != finite_differences || t.full_gradient; }
};
constexpr Property kProperties[] = {
    {"FastVsReference", fast_vs_reference},
    {"DtypesAgainstFloat64", dtypes_against_float64},
    {"FiniteDifferences", finite_differences},
    {"PoisonedOutputs", poisoned_outputs},
    {"EmptyShapes", empty_shapes},
    {"Validation", validation},
    {"Determinism", determinism},
    {"ConcurrentCallsGiveSerialResults", concurrent_calls},
    {"InputsAreNeverModified", inputs_unchanged},
    {"OutputOnAnInputIsRefusedEvenWithEmptyWork", output_on_input_refused},
    {"MemoryLimitCountsBfloat16ProductOperands", memory_limit}};

// (op, index into kProperties) for every pair that applies: finite differences only for the
// full gradients.
using Param = std::pair<std::string, std::size_t>;
class OpProperty : public ::testing::TestWithParam<Param> {};

TEST_P(OpProperty, Holds) {
  kProperties[GetParam().second].check(testing::find_op_test(GetParam().first));
}

std::vector<Param> cases() {
  std::vector<Param> p;
  for (const OpTest& t : testing::op_tests()) {
    for (std::size_t k = 0; k < std::size(kProperties); ++k) {
      if (kProperties[k].applies(t)) p.emplace_back(t.op, k);
    }
  }
  return p;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpProperty, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param.first + "_" + kProperties[info.param.second].name;
  for (char& ch : n) {
    if (ch == '.') ch = '_';
  }
  return n;
});

// The table and the registry list the same ops: a new op fails here until it has its row.
TEST(OpTable, CoversEveryRegisteredOp) {
  std::set<std::string> registered, table;
  for (const OpDef& d : list_ops()) registered.insert(d.name);
  for (const OpTest& t : testing::op_tests()) table.insert(t.op);
  EXPECT_EQ(registered, table);
}

// The OpDef overloads run the op they were given without a name lookup, bit for bit as by name;
// an OpDef that is not the table's is refused.
TEST(OpTable, RunsAnOpFoundOnce) {
  std::size_t ran = 0;
  for (const OpTest& t : testing::op_tests()) {
    ++ran;
    const OpDef& def = find_op(t.op);
    EXPECT_EQ(list_ops()[def.index].name, t.op);
    std::mt19937_64 rng(7);
    Dims d{3, 2, 3, 4, 3};
    if (!testing::is_sequence_op(t.op)) d.T = d.S = 1;
    const Call c = make_call(t, d, DType::kFloat32, rng, /*fd_attrs=*/false);
    const std::vector<Tensor> by_name = run_op(t.op, c.views(), c.attrs);
    const std::vector<Tensor> by_def = run_op(list_ops()[def.index], c.views(), c.attrs);
    ASSERT_EQ(by_name.size(), by_def.size()) << t.op;
    for (std::size_t k = 0; k < by_name.size(); ++k) {
      EXPECT_TRUE(bitwise_equal(by_name[k], by_def[k])) << t.op << " output " << def.outputs[k];
    }
    EXPECT_EQ(infer_outputs(def, c.views(), c.attrs).shapes,
              infer_outputs(t.op, c.views(), c.attrs).shapes);
  }
  EXPECT_EQ(ran, list_ops().size());
  OpDef forged = find_op("BlockLSTM");
  forged.index = list_ops().size();
  EXPECT_THROW((void)infer_outputs(forged, {}), Error);
  forged.index = find_op("GRUBlockCell").index;
  try {
    (void)run_op(forged, {});
    ADD_FAILURE() << "a forged OpDef ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an op of list_ops()"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace blockrnn
