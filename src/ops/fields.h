// The names of the name tables' rows, which an op family's cell and sequence ops share: they name
// their inputs and outputs alike (TensorFlow's names), so each family's names are listed once
// here, and an op's table is its rows joined by rows() (a sequence op's by sequence_rows()).
#pragma once

#include <array>
#include <cstddef>

#include "ops/op_impl.h"
#include "ops/typed_ops.h"

namespace blockrnn::ops {

// The tables `parts` one after the other.
template <class Row, std::size_t... N>
constexpr std::array<Row, (N + ...)> rows(const Row (&... parts)[N]) {
  std::array<Row, (N + ...)> out{};
  std::size_t k = 0;
  (
      (void)[&] {
        for (const Row& r : parts) out[k++] = r;
      }(),
      ...);
  return out;
}

// A sequence op's inputs: TensorFlow's seq_len_max first, its other inputs (`parts`), then
// blockrnn's optional seq_lengths.
template <class In, std::size_t... N>
constexpr auto sequence_rows(const core::InputField<In> (&... parts)[N]) {
  return rows<core::InputField<In>>({BLOCKRNN_SEQ_LEN_MAX(In)}, parts...,
                                    {BLOCKRNN_SEQ_LENGTHS(In)});
}

}  // namespace blockrnn::ops

// Each family's names in TensorFlow's order: NAMES(row, Types...) is row(Types..., name) for each
// name, so that one list makes the rows of the inputs (BLOCKRNN_INPUT), of the outputs named as
// the inputs (gradients.GRUBlockCell's and gradients.LSTMBlockCell's, BLOCKRNN_OUTPUT) and of
// TensorFlow's <name>_grad outputs (the sequence grads', BLOCKRNN_GRAD_OUTPUT), and the
// gradients' shapes, each its input's (BLOCKRNN_SHAPE).
#define BLOCKRNN_GRU_INPUTS(row, ...)                                                           \
  row(__VA_ARGS__, x), row(__VA_ARGS__, h_prev), row(__VA_ARGS__, w_ru), row(__VA_ARGS__, w_c), \
      row(__VA_ARGS__, b_ru), row(__VA_ARGS__, b_c)
#define BLOCKRNN_GRU_RESET_AFTER_INPUTS(row, ...)                                              \
  row(__VA_ARGS__, x), row(__VA_ARGS__, h_prev), row(__VA_ARGS__, w_i), row(__VA_ARGS__, w_h), \
      row(__VA_ARGS__, b_i), row(__VA_ARGS__, b_h)
#define BLOCKRNN_LSTM_INPUTS(row, ...)                                                           \
  row(__VA_ARGS__, x), row(__VA_ARGS__, cs_prev), row(__VA_ARGS__, h_prev), row(__VA_ARGS__, w), \
      row(__VA_ARGS__, wci), row(__VA_ARGS__, wcf), row(__VA_ARGS__, wco), row(__VA_ARGS__, b)
// The forward outputs but h, which the grads take back as inputs.
#define BLOCKRNN_GRU_GATES(row, ...) row(__VA_ARGS__, r), row(__VA_ARGS__, u), row(__VA_ARGS__, c)
#define BLOCKRNN_GRU_RESET_AFTER_GATES(row, ...) \
  row(__VA_ARGS__, r), row(__VA_ARGS__, u), row(__VA_ARGS__, n), row(__VA_ARGS__, hn)
#define BLOCKRNN_LSTM_GATES(row, ...)                                                  \
  row(__VA_ARGS__, i), row(__VA_ARGS__, cs), row(__VA_ARGS__, f), row(__VA_ARGS__, o), \
      row(__VA_ARGS__, ci), row(__VA_ARGS__, co)

// The shape of the input <field> of `in`: a gradient's (gradients.* and the sequence grads).
#define BLOCKRNN_SHAPE(in, field) in.field.shape
// The row of TensorFlow's gradient <field>_grad of the input <field>.
#define BLOCKRNN_GRAD_OUTPUT(Out, Result, field) BLOCKRNN_OUTPUT(Out, Result, field##_grad)
