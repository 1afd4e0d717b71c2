// The rows of the name tables that several ops share, written out: an op family's cell and
// sequence ops name their inputs and forward outputs alike (TensorFlow's names, in TensorFlow's
// order), so each family's rows are listed once here, and an op's table is its rows joined by
// rows() (a sequence op's by sequence_rows()). Each row is {TensorFlow's name, the typed field}.
#pragma once

#include <array>
#include <cstddef>

#include "ops/op_impl.h"
#include "ops/typed_ops.h"

namespace blockrnn::ops {

// The tables `parts` one after the other.
template <class Row, std::size_t... N>
constexpr std::array<Row, (N + ...)> rows(const std::array<Row, N>&... parts) {
  std::array<Row, (N + ...)> out{};
  std::size_t k = 0;
  (
      (void)[&] {
        for (const Row& r : parts) out[k++] = r;
      }(),
      ...);
  return out;
}

// A sequence op's inputs: TensorFlow's seq_len_max first (the int64 scalar tensor), its other
// inputs (`parts`), then blockrnn's optional seq_lengths, after TensorFlow's inputs.
template <class In, std::size_t... N>
constexpr auto sequence_rows(const std::array<core::InputField<In>, N>&... parts) {
  const std::array<core::InputField<In>, 1> seq_len_max = {
      {{"seq_len_max", &In::seq_len_max_tensor, core::InputKind::kInt64}}};
  const std::array<core::InputField<In>, 1> seq_lengths = {
      {{"seq_lengths", &In::seq_lengths, core::InputKind::kOptional}}};
  return rows(seq_len_max, parts..., seq_lengths);
}

// The inputs of GRUBlockCell and BlockGRU, which their grads take first.
template <class In>
constexpr std::array<core::InputField<In>, 6> gru_inputs() {
  return {{{"x", &In::x},
           {"h_prev", &In::h_prev},
           {"w_ru", &In::w_ru},
           {"w_c", &In::w_c},
           {"b_ru", &In::b_ru},
           {"b_c", &In::b_c}}};
}

// The inputs of BlockGRUResetAfter, which its grad takes first.
template <class In>
constexpr std::array<core::InputField<In>, 6> gru_reset_after_inputs() {
  return {{{"x", &In::x},
           {"h_prev", &In::h_prev},
           {"w_i", &In::w_i},
           {"w_h", &In::w_h},
           {"b_i", &In::b_i},
           {"b_h", &In::b_h}}};
}

// The inputs of LSTMBlockCell and BlockLSTM(V2), which their grads take first.
template <class In>
constexpr std::array<core::InputField<In>, 8> lstm_inputs() {
  return {{{"x", &In::x},
           {"cs_prev", &In::cs_prev},
           {"h_prev", &In::h_prev},
           {"w", &In::w},
           {"wci", &In::wci},
           {"wcf", &In::wcf},
           {"wco", &In::wco},
           {"b", &In::b}}};
}

// The outputs of GRUBlockCell and BlockGRU but h, which their grads take back as inputs.
template <class In>
constexpr std::array<core::InputField<In>, 3> gru_gate_inputs() {
  return {{{"r", &In::r}, {"u", &In::u}, {"c", &In::c}}};
}

// The outputs of LSTMBlockCell and BlockLSTM(V2) but h, which their grads take back as inputs.
template <class In>
constexpr std::array<core::InputField<In>, 6> lstm_gate_inputs() {
  return {{{"i", &In::i},
           {"cs", &In::cs},
           {"f", &In::f},
           {"o", &In::o},
           {"ci", &In::ci},
           {"co", &In::co}}};
}

// The outputs of GRUBlockCell and BlockGRU.
template <class Out, class Res>
constexpr std::array<core::OutputField<Out, Res>, 4> gru_outputs() {
  return {{{"r", &Out::r, &Res::r},
           {"u", &Out::u, &Res::u},
           {"c", &Out::c, &Res::c},
           {"h", &Out::h, &Res::h}}};
}

// The outputs of LSTMBlockCell and BlockLSTM(V2).
template <class Out, class Res>
constexpr std::array<core::OutputField<Out, Res>, 7> lstm_outputs() {
  return {{{"i", &Out::i, &Res::i},
           {"cs", &Out::cs, &Res::cs},
           {"f", &Out::f, &Res::f},
           {"o", &Out::o, &Res::o},
           {"ci", &Out::ci, &Res::ci},
           {"co", &Out::co, &Res::co},
           {"h", &Out::h, &Res::h}}};
}

}  // namespace blockrnn::ops
