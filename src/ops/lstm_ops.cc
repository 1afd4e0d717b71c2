// LSTMBlockCell, LSTMBlockCellGrad, gradients.LSTMBlockCell — not built yet (issue 3).
#include "core/op_impl.h"

namespace blockrnn::core {
void register_lstm_ops() {}
}  // namespace blockrnn::core
