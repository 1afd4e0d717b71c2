// The name-table rows an op family's cell and sequence ops share: they name their inputs and
// outputs alike (TensorFlow's names), so each family's rows are written once here, and an op's
// table is its rows joined by rows() (a sequence op's by sequence_rows()).
#pragma once

#include <array>
#include <cstddef>

#include "core/op_impl.h"
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

// The GRU ops' inputs (GRUBlockCell, BlockGRU and their grads) and forward outputs.
template <class In>
inline constexpr core::InputField<In> kGRUInputs[] = {
    BLOCKRNN_INPUT(In, x),   BLOCKRNN_INPUT(In, h_prev), BLOCKRNN_INPUT(In, w_ru),
    BLOCKRNN_INPUT(In, w_c), BLOCKRNN_INPUT(In, b_ru),   BLOCKRNN_INPUT(In, b_c)};
template <class Out, class Res>
inline constexpr core::OutputField<Out, Res> kGRUOutputs[] = {
    BLOCKRNN_OUTPUT(Out, Res, r), BLOCKRNN_OUTPUT(Out, Res, u), BLOCKRNN_OUTPUT(Out, Res, c),
    BLOCKRNN_OUTPUT(Out, Res, h)};

// The LSTM ops' inputs (LSTMBlockCell, BlockLSTM(V2) and their grads), the forward outputs
// their grads take back (all but h), and the forward outputs.
template <class In>
inline constexpr core::InputField<In> kLSTMInputs[] = {
    BLOCKRNN_INPUT(In, x),   BLOCKRNN_INPUT(In, cs_prev), BLOCKRNN_INPUT(In, h_prev),
    BLOCKRNN_INPUT(In, w),   BLOCKRNN_INPUT(In, wci),     BLOCKRNN_INPUT(In, wcf),
    BLOCKRNN_INPUT(In, wco), BLOCKRNN_INPUT(In, b)};
template <class In>
inline constexpr core::InputField<In> kLSTMGates[] = {
    BLOCKRNN_INPUT(In, i), BLOCKRNN_INPUT(In, cs), BLOCKRNN_INPUT(In, f),
    BLOCKRNN_INPUT(In, o), BLOCKRNN_INPUT(In, ci), BLOCKRNN_INPUT(In, co)};
template <class Out, class Res>
inline constexpr core::OutputField<Out, Res> kLSTMOutputs[] = {
    BLOCKRNN_OUTPUT(Out, Res, i), BLOCKRNN_OUTPUT(Out, Res, cs), BLOCKRNN_OUTPUT(Out, Res, f),
    BLOCKRNN_OUTPUT(Out, Res, o), BLOCKRNN_OUTPUT(Out, Res, ci), BLOCKRNN_OUTPUT(Out, Res, co),
    BLOCKRNN_OUTPUT(Out, Res, h)};

}  // namespace blockrnn::ops
