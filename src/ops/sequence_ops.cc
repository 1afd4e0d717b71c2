// Registration of the sequence ops (SPEC §7–§8, A6). Each family lives in its own file:
//   src/ops/block_lstm_ops.cc  BlockLSTM, BlockLSTMV2, BlockLSTMGrad, BlockLSTMGradV2
//   src/ops/block_gru_ops.cc   BlockGRU, BlockGRUGrad
//   src/ops/block_gru_reset_after_ops.cc  BlockGRUResetAfter, BlockGRUResetAfterGrad (blockrnn's)
#include "core/op_impl.h"

namespace blockrnn::core {

void register_block_lstm_ops();
void register_block_gru_ops();
void register_block_gru_reset_after_ops();

void register_sequence_ops() {
  register_block_lstm_ops();
  register_block_gru_ops();
  register_block_gru_reset_after_ops();
}

}  // namespace blockrnn::core
