// BlockLSTM(V2), BlockLSTMGrad(V2), BlockGRU, BlockGRUGrad — not built yet (issue 4).
#include "core/op_impl.h"

namespace blockrnn::core {
void register_sequence_ops() {}
}  // namespace blockrnn::core
