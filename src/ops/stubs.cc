// Registration hooks of op families that are not built yet (each is replaced by its family's
// file as it lands).
#include "core/op_impl.h"

namespace blockrnn::core {
void register_lstm_ops() {}
void register_sequence_ops() {}
}  // namespace blockrnn::core
