// Validation shared by the op families: the one float dtype of an op's inputs, the GRU weights
// (GRUBlockCell and BlockGRU), and the frame of every sequence op's validation (seq_len_max, x,
// the per-step inputs of the grads and seq_lengths around the op's own state and weights).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>

#include "ops/op_impl.h"

namespace blockrnn::ops {

using core::Checker;

// The dtype every floating input of `fields` shares (in the table's order), else an error.
template <class Fields, class In>
DType same_float_dtype(const Checker& check, const Fields& fields, const In& in) {
  const char* names[core::kMaxInputs];
  TensorView views[core::kMaxInputs];
  std::size_t n = 0;
  for (const auto& f : fields) {
    if (f.kind != core::InputKind::kFloat) continue;
    names[n] = f.name;
    views[n++] = in.*f.view;
  }
  return check.same_float_dtype(std::span(names, n), std::span(views, n));
}

// The words of the shapes the ops and the layers both check on a call's inputs: an initial
// state, or a cell op's per-step input, [B, H]; a sequence op's per-step input [T, B, H].
inline constexpr char kStateDims[] = "batch_size, cell_size";
inline constexpr char kStepDims[] = "time_len, batch_size, cell_size";

// An input checked by name.
struct Named {
  const char* name;
  const TensorView& view;
};

// Inputs checked by name that must all have rank `rank` (a state's matrices, then its vectors).
inline void check_ranks(const Checker& check, int rank, std::initializer_list<Named> inputs) {
  for (const Named& t : inputs) check.rank(t.name, t.view, rank);
}

// The dimensions of a weight of the gates' pre-activations, [input_size + cell_size, gates *
// cell_size] (w_ru of the GRU ops, w of the LSTM ops), computed with overflow checks.
struct FusedWeightDims {
  std::int64_t rows, columns;
};
inline FusedWeightDims fused_weight_dims(const Checker& check, const char* w, int gates,
                                         std::int64_t I, std::int64_t H) {
  FusedWeightDims d{};
  // The messages are built only on overflow: a valid call builds no string.
  if (__builtin_add_overflow(I, H, &d.rows)) {
    const std::string rows = "input_size + cell_size (rows of " + std::string(w) + ")";
    core::checked_add(check.op(), rows.c_str(), I, H);  // throws
  }
  if (__builtin_mul_overflow(std::int64_t(gates), H, &d.columns)) {
    const std::string columns =
        std::to_string(gates) + " * cell_size (columns of " + std::string(w) + ")";
    core::checked_mul(check.op(), columns.c_str(), gates, H);  // throws
  }
  return d;
}

// The state and weights of the GRU ops (GRUBlockCell, BlockGRU): h_prev [B, H], w_ru [I+H, 2H],
// w_c [I+H, H], b_ru [2H], b_c [H]. H is h_prev's.
struct GRUState {
  const TensorView &h_prev, &w_ru, &w_c, &b_ru, &b_c;

  template <class Fields>
  static GRUState of(const Fields& in) {
    return {in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c};
  }
  void ranks(const Checker& check) const {
    check_ranks(check, 2, {{"h_prev", h_prev}, {"w_ru", w_ru}, {"w_c", w_c}});
    check_ranks(check, 1, {{"b_ru", b_ru}, {"b_c", b_c}});
  }
  std::int64_t cell_size(const Checker&) const { return h_prev.shape[1]; }
  void shapes(const Checker& check, const TensorView& x, std::int64_t B, std::int64_t I,
              std::int64_t H) const {
    const auto [K, H2] = fused_weight_dims(check, "w_ru", 2, I, H);
    check.shape("h_prev", h_prev, {B, H}, kStateDims);
    const Checker::OtherWeight other{"w_c", w_c, {K, H}};
    check.input_weight("w_ru", w_ru, {K, H2}, "input_size + cell_size, 2 * cell_size", x, H,
                       &other);
    check.shape("w_c", w_c, {K, H}, "input_size + cell_size, cell_size");
    check.shape("b_ru", b_ru, {H2}, "2 * cell_size");
    check.shape("b_c", b_c, {H}, "cell_size");
  }
};

// The LSTM cell ops' refusal of an empty state (B = 0 or H = 0, as TensorFlow), in the words the
// ops and the cell layers both use.
inline std::string empty_lstm_cell_state(const Shape& cs_prev) {
  return "cs_prev is empty, got shape " + cs_prev.to_string() +
         " (batch_size and cell_size must be positive)";
}

// The state and weights of the LSTM ops: cs_prev and h_prev [B, H], w [I+H, 4H], the peephole
// vectors wci, wcf, wco [H] and b [4H]. H is cs_prev's, or w's (w.dim(1) / 4, which must be a
// positive integer) with `h_from_w` (the sequence grads, as TensorFlow). `nonempty` (the cell
// ops, as TensorFlow) refuses B = 0 or H = 0: "cs_prev is empty".
struct LSTMState {
  const TensorView &cs_prev, &h_prev, &w, &wci, &wcf, &wco, &b;
  bool h_from_w = false;
  bool nonempty = false;

  template <class Fields>
  static LSTMState of(const Fields& in, bool h_from_w, bool nonempty) {
    return {in.cs_prev, in.h_prev, in.w, in.wci, in.wcf, in.wco, in.b, h_from_w, nonempty};
  }

  void ranks(const Checker& check) const {
    check_ranks(check, 2, {{"cs_prev", cs_prev}, {"h_prev", h_prev}, {"w", w}});
    check_ranks(check, 1, {{"wci", wci}, {"wcf", wcf}, {"wco", wco}, {"b", b}});
  }
  std::int64_t cell_size(const Checker& check) const {
    if (!h_from_w) return cs_prev.shape[1];
    if (w.shape[1] <= 0 || w.shape[1] % 4 != 0) {
      check.fail("w must have a positive multiple of 4 columns (4 * cell_size), got shape " +
                 w.shape.to_string());
    }
    return w.shape[1] / 4;
  }
  void shapes(const Checker& check, const TensorView& x, std::int64_t B, std::int64_t I,
              std::int64_t H) const {
    const auto [K, G] = fused_weight_dims(check, "w", 4, I, H);
    check.shape("cs_prev", cs_prev, {B, H}, kStateDims);
    if (nonempty && (B == 0 || H == 0)) check.fail(empty_lstm_cell_state(cs_prev.shape));
    check.shape("h_prev", h_prev, {B, H}, kStateDims);
    check.input_weight("w", w, {K, G}, "input_size + cell_size, 4 * cell_size", x, H);
    check.shape("wci", wci, {H}, "cell_size");
    check.shape("wcf", wcf, {H}, "cell_size");
    check.shape("wco", wco, {H}, "cell_size");
    check.shape("b", b, {G}, "4 * cell_size");
  }
};

// The per-step inputs of a grad (the forward outputs it takes back and the incoming gradients):
// rows of its table, each [B, H] (a cell op's) or [T, B, H] (a sequence op's).
template <class In>
using Steps = std::type_identity_t<std::span<const core::InputField<In>>>;

// The validation of the cell ops: the ranks of x [B, I] and the state, the ranks of the per-step
// inputs `steps` (a grad's; checked first), then dimensions, each step [B, H], then the one float
// dtype. Returns B, I, H and the dtype.
struct CellSizes {
  std::int64_t B, I, H;
  DType dtype;
};
template <class Fields, class In, class State>
CellSizes check_cell(const Checker& check, const Fields& fields, const In& in, const State& state,
                     Steps<In> steps = {}) {
  for (const auto& s : steps) check.rank(s.name, in.*s.view, 2);
  check.rank("x", in.x, 2);
  state.ranks(check);
  const std::int64_t B = in.x.shape[0], I = in.x.shape[1], H = state.cell_size(check);
  state.shapes(check, in.x, B, I, H);
  for (const auto& s : steps) check.shape(s.name, in.*s.view, {B, H}, kStateDims);
  return {B, I, H, same_float_dtype(check, fields, in)};
}

// A cell op's CallShape: its outputs' shapes (a forward op's `num_outputs`, each [B, H]) and the
// sizes of its work.
inline core::CallShape cell_shape(const CellSizes& d, std::initializer_list<Shape> outputs) {
  return core::CallShape(d.dtype, outputs).sizes(1, d.B, d.I, d.H);
}
inline core::CallShape cell_shape(const CellSizes& d, std::size_t num_outputs) {
  return core::CallShape(d.dtype, num_outputs, Shape{d.B, d.H}).sizes(1, d.B, d.I, d.H);
}

// ---- The rules the one-shot ops and the layer objects share ----------------------------------
// Each rule below is written once and reached from both doors: the ops' validation
// (check_cell, check_sequence, the ops' validate functions) and the layers' per-call and creation
// checks (src/layer), which build a Checker on their own name ("LSTMLayer.forward"). The
// messages are therefore the same, word for word, after the name.

// The LSTM attrs forget_bias and cell_clip (pass 0 for an op without forget_bias): TensorFlow
// keeps float attrs as float32, so a finite value must round to a finite float32; NaN and ±inf
// keep their meaning (a NaN cell_clip does not clip). core::check_float32_attr's message:
// "BlockLSTM: attr cell_clip must round to a finite float32 (...), got 1e+39".
inline void check_lstm_attrs(const Checker& check, double forget_bias, double cell_clip) {
  core::check_float32_attr(check.op(), "attr forget_bias", forget_bias);
  core::check_float32_attr(check.op(), "attr cell_clip", cell_clip);
}

// seq_len_max's value S against x's time_len T: 0 ≤ S ≤ T.
inline void check_seq_len_max_value(const Checker& check, std::int64_t S, std::int64_t T) {
  if (S < 0 || S > T) {
    check.fail("seq_len_max must be between 0 and " + std::to_string(T) + " (time_len of x), got " +
               std::to_string(S));
  }
}

// seq_lengths of a call whose x [T, B, ...] is checked already (a layer's, an RNN's): its storage,
// then the phases of core::SeqLengthsCheck in order (rank 1, [B], int64, every value in [0, T]);
// an absent view passes. The ops run the same phases, each among their other inputs' checks of
// that phase (check_sequence).
inline void check_seq_lengths(const Checker& check, const TensorView& seq_lengths, std::int64_t B,
                              std::int64_t T) {
  const core::SeqLengthsCheck lengths{check, seq_lengths};
  if (!lengths.present()) return;
  check.storage("seq_lengths", seq_lengths);
  lengths.rank();
  lengths.shape(B);
  lengths.dtype();
  lengths.values(T);
}

// The sizes a sequence op's validation found.
struct SeqSizes {
  std::int64_t T, B, I, H, S;
  DType dtype;
};

// Every sequence op's validation, in the order of docs/design.md: the ranks of seq_len_max (a
// scalar), x [T, B, I], then the op's state and weights (state.ranks(check)), the per-step inputs
// `steps` (the grads' forward outputs and incoming gradients) and seq_lengths; then dimensions:
// H = state.cell_size(check), the state's shapes (state.shapes(check, x, B, I, H)), every step [T,
// B, H], seq_lengths [B]; then dtypes (seq_len_max and seq_lengths int64, every floating input one
// dtype); then values (0 ≤ seq_len_max ≤ T, every seq_lengths in [0, T]).
template <class Fields, class In, class State>
SeqSizes check_sequence(const Checker& check, const Fields& fields, const In& in,
                        const State& state, Steps<In> steps = {}) {
  const TensorView &seq_len_max = in.seq_len_max_tensor, &x = in.x;
  const core::SeqLengthsCheck lengths{check, in.seq_lengths};
  check.scalar("seq_len_max", seq_len_max);
  check.rank("x", x, 3);
  state.ranks(check);
  for (const auto& s : steps) check.rank(s.name, in.*s.view, 3);
  lengths.rank();
  const std::int64_t T = x.shape[0], B = x.shape[1], I = x.shape[2];
  const std::int64_t H = state.cell_size(check);
  state.shapes(check, x, B, I, H);
  for (const auto& s : steps) {
    check.shape(s.name, in.*s.view, {T, B, H}, kStepDims);
  }
  lengths.shape(B);
  check.int64("seq_len_max", seq_len_max);
  lengths.dtype();
  const DType dtype = same_float_dtype(check, fields, in);
  const std::int64_t S = core::read_int64_scalar(seq_len_max);
  check_seq_len_max_value(check, S, T);
  lengths.values(T);
  return {T, B, I, H, S, dtype};
}

// A sequence op's CallShape: its outputs' shapes (a forward op's `num_outputs`, each [T, B, H]),
// the sizes of its work and whether seq_lengths is given.
inline core::CallShape sequence_shape(const SeqSizes& d, const TensorView& seq_lengths,
                                      core::CallShape call) {
  call.sizes(d.T, d.B, d.I, d.H).lengths = !is_absent_input(seq_lengths);
  return call;
}
inline core::CallShape sequence_shape(const SeqSizes& d, const TensorView& seq_lengths,
                                      std::initializer_list<Shape> outputs) {
  return sequence_shape(d, seq_lengths, core::CallShape(d.dtype, outputs));
}
inline core::CallShape sequence_shape(const SeqSizes& d, const TensorView& seq_lengths,
                                      std::size_t num_outputs) {
  return sequence_shape(d, seq_lengths,
                        core::CallShape(d.dtype, num_outputs, Shape{d.T, d.B, d.H}));
}

// A bfloat16 call's CallShape with the fast path's bfloat16 product operands for the memory
// check to count: `floats(S, B, I, H)` float32 values, the kernel's
// block_*_bf16_fwd_workspace_floats or block_*_bf16_bwd_workspace_floats (kernel/block_*.h),
// which the one-shot ops allocate per call; any other dtype's CallShape as it is. The sizes are
// validated but not yet bounded (the memory check is what refuses a huge call), so `floats` runs
// only where every sum it makes fits int64: under a bound of every family's, computed in double,
// S·B·(I + 16·H + 256) + 16·B·H + 1 floats; past it the bound is what is counted.
inline core::CallShape with_bf16_operands(core::CallShape call, const SeqSizes& d,
                                          std::int64_t (*floats)(std::int64_t, std::int64_t,
                                                                 std::int64_t, std::int64_t)) {
  if (call.dtype != DType::kBFloat16) return call;
  const double S = double(d.S), B = double(d.B), I = double(d.I), H = double(d.H);
  const double bound = S * B * (I + 16.0 * H + 256.0) + 16.0 * B * H + 1.0;
  const double counted = bound < 0x1p62 ? double(floats(d.S, d.B, d.I, d.H)) : bound;
  call.bf16_operand_bytes = counted * sizeof(float);
  return call;
}

// A sequence kernel's dims (BlockLSTMDims, BlockGRUDims) of validated inputs: the lengths are
// those the kernel sees (core::effective_lengths).
template <class Dims, class Fields>
Dims seq_dims(const Fields& in) {
  const std::int64_t S = core::read_int64_scalar(in.seq_len_max_tensor);
  return {in.x.shape[0],
          in.x.shape[1],
          in.x.shape[2],
          in.h_prev.shape[1],
          S,
          core::effective_lengths(in.seq_lengths, S)};
}

}  // namespace blockrnn::ops
