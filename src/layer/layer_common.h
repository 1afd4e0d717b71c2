// Helpers of the layer objects (src/layer/*.cc, blockrnn/layer.h): the per-call checks, the
// ops' overlap and memory checks on a call's views, the workspace a call runs on, and the dtype
// switch.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/layer.h"
#include "blockrnn/ops.h"
#include "ops/op_impl.h"

namespace blockrnn::layer {

// Errors of one entry point of one layer: "LSTMLayer.forward: x must have ...".
struct Check;

// Holds a layer object (or an RNN) for one call that uses its weights, workspace or reserve: a
// second such call while one runs (another thread) is refused by name instead of racing on
// them. Nothing is held when the constructor throws.
class OneCall {
 public:
  OneCall(const Check& check, std::atomic<bool>& busy);
  ~OneCall() { busy_.store(false, std::memory_order_release); }
  OneCall(const OneCall&) = delete;
  OneCall& operator=(const OneCall&) = delete;

 private:
  std::atomic<bool>& busy_;
};

struct Check {
  const char* layer;
  const char* fn;
  // "LSTMLayer.forward" when the caller keeps it (the calls of a layer, so that a call builds
  // no string), else nullptr.
  const char* name = nullptr;
  [[noreturn]] void fail(const std::string& msg) const;
  // "LSTMLayer.forward": the name the ops' checks (core/op_impl.h) report.
  std::string op() const { return name != nullptr ? name : std::string(layer) + "." + fn; }
  // The same as a C string: `name`, or op() built into `buffer`.
  const char* op_name(std::string& buffer) const {
    if (name != nullptr) return name;
    buffer = op();
    return buffer.c_str();
  }
  // t has exactly `want` (described by `dims`), the dtype, and data when it has elements.
  void tensor(const char* arg, const TensorView& t, const Shape& want, const char* dims,
              DType dtype) const;
  void tensor(const char* arg, const MutableTensorView& t, const Shape& want, const char* dims,
              DType dtype) const {
    tensor(arg, TensorView(t), want, dims, dtype);
  }
  // tensor() on each of several arguments of one shape, in order.
  struct Arg {
    const char* name;
    TensorView view;
  };
  void tensors(std::span<const Arg> args, const Shape& want, const char* dims, DType dtype) const {
    for (const Arg& a : args) tensor(a.name, a.view, want, dims, dtype);
  }
  // The ops' rank rule and message (core::Checker::rank: "x must be rank 3, got rank 2 (shape
  // [4, 5])"; a negative dimension is refused too).
  void rank(const char* arg, const TensorView& t, int rank) const {
    std::string buffer;
    core::Checker(op_name(buffer)).rank(arg, t, rank);
  }
  // An output of a call: the ops' rule and message for a caller's outputs (core::check_outputs:
  // dtype, shape, then data: "LSTMLayer.forward: output h must have shape [5, 3, 7], got
  // [5, 3, 6]").
  void output(const char* arg, const TensorView& t, const Shape& want, DType dtype) const;
  void outputs(std::span<const Arg> args, const Shape& want, DType dtype) const {
    for (const Arg& a : args) output(a.name, a.view, want, dtype);
  }
};

// Creation's size checks: the weights for input_size I and hidden_size H, and the workspace of a
// call of max_time steps and max_batch examples, must be addressable (kResourceExhausted naming
// the sizes), so that no size arithmetic of the layer or its calls overflows.
void check_sizes(const Check& check, std::int64_t I, std::int64_t H, std::int64_t max_time,
                 std::int64_t max_batch);

// The most floating outputs of a layer's call (the LSTM backward's 8).
inline constexpr std::size_t kMaxCallOutputs = 8;

// More than a layer object takes with its Impl and its plans' bookkeeping (checked where the
// layer objects are defined).
inline constexpr std::size_t kObjectBytes = 4096;

// What a layer object of the op with outputs `Outputs` (BlockLSTMOutputs, BlockGRUOutputs,
// BlockGRUResetAfterOutputs) holds besides its workspace, in bytes: the object, its weights'
// copies and an upper bound of their packed panels. In double: it may exceed any integer.
template <class Outputs>
double held_bytes(std::int64_t I, std::int64_t H, DType dtype);

// Bytes counted in double as ExtraBytes holds them (long long): 2^62 past it, more than any
// memory limit.
inline long long clamp_bytes(double bytes) {
  return bytes < 0x1p62 ? static_cast<long long>(bytes) : (1LL << 62);
}

// The per-call sizes of a sequence call: T, B from x, S, and the lengths the kernel sees.
struct CallDims {
  std::int64_t T = 0, B = 0, S = 0;
  bool has_lengths = false;               // seq_lengths given
  const std::int64_t* lengths = nullptr;  // nullptr when absent or none ends before S
  void* workspace = nullptr;              // the call's (prepare_call)
};

// Checks x [T, B, I] against the layer's shape (T ≤ max_time, B ≤ max_batch), seq_len_max in
// [0, T] and seq_lengths ([B] int64, each in [0, T]).
CallDims check_call(const Check& check, const LayerShape& shape, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths);

// The checks every forward and backward starts with: weights set, then check_call.
CallDims begin_call(const Check& check, const SequenceLayer& layer, const TensorView& x,
                    const std::optional<std::int64_t>& seq_len_max, const TensorView& seq_lengths);
// The same on a call's inputs (every layer's have x, seq_len_max and seq_lengths).
template <typename In>
CallDims begin_call(const Check& check, const SequenceLayer& layer, const In& in) {
  return begin_call(check, layer, in.x, in.seq_len_max, in.seq_lengths);
}

// The named views of one call, gathered for the ops' overlap and memory checks: every input
// the kernel reads and every output it writes (absent optional views are skipped). A layer
// keeps one and clears it at each call, so that calls after the first allocate nothing here.
class CallArgs {
 public:
  void clear();
  void input(const char* name, const TensorView& v);
  void output(const char* name, const TensorView& v);
  template <typename Args>
  void inputs(const Args& args) {
    for (const Check::Arg& a : args) input(a.name, a.view);
  }
  template <typename Args>
  void outputs(const Args& args) {
    for (const Check::Arg& a : args) output(a.name, a.view);
  }
  // No output overlaps an input or another output (core::check_no_alias, whatever the work's
  // size): "LSTMLayer.forward: output h overlaps input x in memory; …".
  void check_no_alias(const Check& check) const;
  std::span<const TensorView> input_views() const { return ins_; }

 private:
  std::vector<const char*> in_names_, out_names_;
  std::vector<TensorView> ins_;
  std::vector<MutableTensorView> outs_;
};

// The end of every call's checks, then its workspace: the caller's (checked: at least
// workspace_bytes(S, B), aligned, and overlapping none of `args`) or the layer's own `own`,
// grown to exactly this call's need when it holds less; in between, the call's memory against
// get_memory_limit() by the one-shot ops' accounting (core::check_memory: the one-shot op's
// bound for these shapes, plus the workspace `own` grows by). Sets c.workspace.
// A caller's workspace for a call that needs `bytes` (elements of `dtype`; `formula` names the
// workspace_bytes call in the message): at least that size, aligned to `dtype`, and registered
// among the call's outputs for the overlap check. Without one, a layer created with
// caller_workspace refuses a call that needs any. The sequence and the cell layers share it.
void take_given_workspace(const Check& check, LayerWorkspace given, std::size_t bytes, DType dtype,
                          bool caller_workspace, const char* formula, CallArgs& args);
void prepare_call(const Check& check, const SequenceLayer& layer, CallDims& c, CallArgs& args,
                  LayerWorkspace given, Tensor& own);

// Grows `t` to `elems` elements of `dtype` when it holds fewer (freeing the old buffer first);
// its contents are not kept.
void grow(Tensor& t, DType dtype, std::int64_t elems);

// The memory check of an allocation that is not a kernel call (creation, set_weights, the
// stack's buffers): core::check_memory with the parts in `extra` only. The caller calls it
// before allocating.
void check_allocation(const Check& check, std::span<const ExtraBytes> extra);

// The plan of each dtype of a layer (LSTMPlan, GRUPlan, GRUResetAfterPlan).
template <template <typename> class Plan>
struct Plans {
  Plan<float> f;
  Plan<double> d;
  template <typename T>
  Plan<T>& get() {
    if constexpr (std::is_same_v<T, float>) {
      return f;
    } else {
      return d;
    }
  }
};

// The weight views set_weights takes: shape, dtype, data; copied into `own`, the layer's Tensor
// of the compute dtype (a float16 or bfloat16 weight widened to float32, exactly), whose memory
// is reused when it has that shape already (a training loop sets new weights at every step).
void copy_weight(const Check& check, const char* arg, const TensorView& t, const Shape& want,
                 const char* dims, DType dtype, Tensor& own);

// The dtype a layer computes in: its own for float32 and float64; float32 for float16 and
// bfloat16 (core/lowp.h), whose weights the layer holds widened and whose per-call views it
// stages through float32 copies in its workspace, as the one-shot ops do (core::dispatch_float).
inline DType compute_dtype(DType dtype) {
  return core::is_16bit_float(dtype) ? DType::kFloat32 : dtype;
}

// f.template operator()<T>() with T the layer's compute dtype (float or double).
template <typename F>
void with_dtype(DType dtype, F&& f) {
  if (dtype == DType::kFloat64) {
    f.template operator()<double>();
  } else {
    f.template operator()<float>();
  }
}

// Packs the plan of the layer's dtype from the weights its Impl holds (set_weights).
template <typename Impl>
void pack_plan(Impl& impl, const LayerShape& shape) {
  with_dtype(shape.dtype, [&]<typename T>() { impl.pack(impl.plans.template get<T>(), shape); });
}

// Typed data of a view: the ops' own accessor.
using core::data;

}  // namespace blockrnn::layer
