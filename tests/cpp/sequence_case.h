// Random problems of the sequence ops for their per-op test files, and the checks those files
// share: one SequenceSizes draws any op's inputs in its OpDef order with op_shapes.h's shapes;
// BlockGRUVariant and BlockGRUResetAfterVariant put the two sequence GRUs behind one interface
// for the GRUSequence suite (test_block_gru.cc) that runs every shared property on both; the
// validation helpers check seq_len_max and the grads' per-step inputs of every sequence op.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "op_shapes.h"
#include "test_util.h"

namespace blockrnn::testing {

// T, B, I, H of a problem, and its random inputs.
struct SequenceSizes {
  std::int64_t T, B, I, H;

  // Fills `inputs` with `op`'s tensor inputs after seq_len_max, in its OpDef order (the optional
  // trailing ones left out): weights (rank 2, named w…) ~U(±1/√(I+H)), docs/tolerances.md's unit
  // scale; every other input ~U(±1).
  void draw(const std::string& op, DType dt, std::mt19937_64& rng,
            const std::vector<Tensor*>& inputs) const {
    const std::vector<std::string>& names = find_op(op).inputs;
    ASSERT_GE(names.size(), inputs.size() + 1) << op;
    ASSERT_EQ(names[0], "seq_len_max") << op;
    const double scale = 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(I + H, 1)));
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const std::string& name = names[k + 1];
      const Shape shape = input_shape(op, name, T, B, I, H);
      const double a = name[0] == 'w' && shape.rank() == 2 ? scale : 1.0;
      *inputs[k] = random_tensor(dt, shape, rng, -a, a);
    }
  }
};

// Step t of a [T, B, N] tensor of element type E, as a [B, N] view.
template <typename E>
TensorView step(const Tensor& t, std::int64_t k) {
  const std::int64_t n = t.shape()[1] * t.shape()[2];
  return TensorView(t.data_as<E>() + k * n, Shape{t.shape()[1], t.shape()[2]});
}

struct BlockGRUCase : SequenceSizes {
  Tensor x, h_prev, w_ru, w_c, b_ru, b_c;
  BlockGRUCase(DType dt, std::int64_t T_, std::int64_t B_, std::int64_t I_, std::int64_t H_,
               std::mt19937_64& rng)
      : SequenceSizes{T_, B_, I_, H_} {
    draw("BlockGRU", dt, rng, {&x, &h_prev, &w_ru, &w_c, &b_ru, &b_c});
  }
  BlockGRUInputs inputs(std::int64_t S) const { return {S, x, h_prev, w_ru, w_c, b_ru, b_c}; }
  // The name-based inputs (run_op), seq_len_max left empty.
  std::vector<TensorView> views() const { return {TensorView(), x, h_prev, w_ru, w_c, b_ru, b_c}; }
  BlockGRUGradInputs grad_inputs(std::int64_t S, const BlockGRUResult& f,
                                 const Tensor& h_grad) const {
    return {S, x, h_prev, w_ru, w_c, b_ru, b_c, f.r, f.u, f.c, f.h, h_grad};
  }
};

struct BlockGRUResetAfterCase : SequenceSizes {
  Tensor x, h_prev, w_i, w_h, b_i, b_h;
  BlockGRUResetAfterCase(DType dt, std::int64_t T_, std::int64_t B_, std::int64_t I_,
                         std::int64_t H_, std::mt19937_64& rng)
      : SequenceSizes{T_, B_, I_, H_} {
    draw("BlockGRUResetAfter", dt, rng, {&x, &h_prev, &w_i, &w_h, &b_i, &b_h});
  }
  BlockGRUResetAfterInputs inputs(std::int64_t S) const {
    return {S, x, h_prev, w_i, w_h, b_i, b_h};
  }
  std::vector<TensorView> views() const { return {TensorView(), x, h_prev, w_i, w_h, b_i, b_h}; }
  BlockGRUResetAfterGradInputs grad_inputs(std::int64_t S, const BlockGRUResetAfterResult& f,
                                           const Tensor& h_grad) const {
    return {S, x, h_prev, w_i, w_h, b_i, b_h, f.r, f.u, f.n, f.hn, f.h, h_grad};
  }
};

// An input of a validation problem (T = 5, B = 4, I = 3, H = 16, float32) of the wrong shape:
// forward input `input` (counted after seq_len_max, in OpDef order) of shape `shape`, and the
// message that follows "<op>: " from the forward op and its grad alike.
struct BadInput {
  std::size_t input;
  Shape shape;
  std::string message;
};

// One sequence GRU for the GRUSequence suite: its op (the grad is kOp + "Grad"), typed calls,
// and its outputs, gradients and inputs in OpDef order. The grad's inputs are the forward's,
// then its per-step inputs. bad_inputs() lists the shapes its own validation refuses (defined
// beside the op's other tests).
struct BlockGRUVariant {
  using Case = BlockGRUCase;
  static constexpr const char* kOp = "BlockGRU";
  static auto forward(const BlockGRUInputs& in) { return block_gru(in); }
  static void forward(const BlockGRUInputs& in, std::vector<Tensor>& o) {
    block_gru(in,
              {o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(), o[3].mutable_view()});
  }
  static auto backward(const BlockGRUGradInputs& in) { return block_gru_grad(in); }
  static std::vector<const Tensor*> outputs(const BlockGRUResult& f) {
    return {&f.r, &f.u, &f.c, &f.h};
  }
  static std::vector<const Tensor*> grads(const BlockGRUGradResult& g) {
    return {&g.x_grad, &g.h_prev_grad, &g.w_ru_grad, &g.w_c_grad, &g.b_ru_grad, &g.b_c_grad};
  }
  static std::vector<TensorView*> inputs(BlockGRUInputs& in) {
    return {&in.x, &in.h_prev, &in.w_ru, &in.w_c, &in.b_ru, &in.b_c};
  }
  static std::vector<TensorView*> inputs(BlockGRUGradInputs& in) {
    return {&in.x, &in.h_prev, &in.w_ru, &in.w_c, &in.b_ru,  &in.b_c,
            &in.r, &in.u,      &in.c,    &in.h,   &in.h_grad};
  }
  static std::vector<BadInput> bad_inputs();
};

struct BlockGRUResetAfterVariant {
  using Case = BlockGRUResetAfterCase;
  static constexpr const char* kOp = "BlockGRUResetAfter";
  static auto forward(const BlockGRUResetAfterInputs& in) { return block_gru_reset_after(in); }
  static void forward(const BlockGRUResetAfterInputs& in, std::vector<Tensor>& o) {
    block_gru_reset_after(in, {o[0].mutable_view(), o[1].mutable_view(), o[2].mutable_view(),
                               o[3].mutable_view(), o[4].mutable_view()});
  }
  static auto backward(const BlockGRUResetAfterGradInputs& in) {
    return block_gru_reset_after_grad(in);
  }
  static std::vector<const Tensor*> outputs(const BlockGRUResetAfterResult& f) {
    return {&f.r, &f.u, &f.n, &f.hn, &f.h};
  }
  static std::vector<const Tensor*> grads(const BlockGRUResetAfterGradResult& g) {
    return {&g.x_grad, &g.h_prev_grad, &g.w_i_grad, &g.w_h_grad, &g.b_i_grad, &g.b_h_grad};
  }
  static std::vector<TensorView*> inputs(BlockGRUResetAfterInputs& in) {
    return {&in.x, &in.h_prev, &in.w_i, &in.w_h, &in.b_i, &in.b_h};
  }
  static std::vector<TensorView*> inputs(BlockGRUResetAfterGradInputs& in) {
    return {&in.x, &in.h_prev, &in.w_i, &in.w_h, &in.b_i, &in.b_h,
            &in.r, &in.u,      &in.n,   &in.hn,  &in.h,   &in.h_grad};
  }
  static std::vector<BadInput> bad_inputs();
};

// seq_len_max of sequence op `op` with time_len T: outside [0, T] through the typed call
// `with_seq_len_max(S)`; and, when `ins` (the name-based inputs, seq_len_max first) is given, not
// a scalar or not int64 through run_op. Each is an InvalidArgument naming the op.
template <typename F>
void expect_seq_len_max_checked(const std::string& op, std::int64_t T, F&& with_seq_len_max,
                                std::vector<TensorView> ins = {}) {
  for (std::int64_t S : {std::int64_t{-1}, T + 1}) {
    expect_invalid([&] { with_seq_len_max(S); }, op + ": seq_len_max must be between 0 and " +
                                                     std::to_string(T) + " (time_len of x), got " +
                                                     std::to_string(S));
  }
  if (ins.empty()) return;
  const Tensor s_vec(DType::kInt64, {1}), s_mat(DType::kInt64, {13, 11, 0}),
      s_f32(DType::kFloat32, {});
  for (const Tensor* s : {&s_vec, &s_mat}) {
    ins[0] = *s;
    expect_invalid(
        [&] { run_op(op, ins); },
        op + ": seq_len_max must be a scalar (rank 0), got shape " + s->shape().to_string());
  }
  ins[0] = s_f32;
  expect_invalid([&] { run_op(op, ins); }, op + ": seq_len_max must be int64, got float32");
}

// The per-step inputs of grad op `op` (the forward outputs and the upstream gradients, `names`)
// must each be [T, B, H]: a wrong time_len, batch_size or cell_size, and rank 2, are each an
// InvalidArgument naming the op and the input. `call_with(k, v)` calls the op with input k
// replaced by v.
template <typename F>
void expect_step_inputs_checked(const std::string& op, const std::vector<std::string>& names,
                                DType dt, std::int64_t T, std::int64_t B, std::int64_t H,
                                F&& call_with) {
  std::mt19937_64 rng(17);
  const Tensor wrong_t = random_tensor(dt, {T - 1, B, H}, rng),
               wrong_b = random_tensor(dt, {T, B + 1, H}, rng),
               wrong_h = random_tensor(dt, {T, B, H - 1}, rng),
               rank2 = random_tensor(dt, {B, H}, rng);
  const std::string want = Shape{T, B, H}.to_string();
  for (std::size_t k = 0; k < names.size(); ++k) {
    for (const Tensor* bad : {&wrong_t, &wrong_b, &wrong_h}) {
      expect_invalid([&] { call_with(k, *bad); },
                     op + ": " + names[k] + " must have shape " + want +
                         " (time_len, batch_size, cell_size), got " + bad->shape().to_string());
    }
    expect_invalid([&] { call_with(k, rank2); },
                   op + ": " + names[k] + " must be rank 3, got rank 2");
  }
}

}  // namespace blockrnn::testing
