// Fast BlockGRUResetAfter(Grad): placeholder that runs the reference (replaced by the fast path).
#include "ref/block_gru_reset_after.h"

namespace blockrnn::cpu {
template <typename T>
void block_gru_reset_after_fwd(const BlockGRUDims& d, const BlockGRUResetAfterFwdArgs<T>& a) {
  ref::block_gru_reset_after_fwd<T>(d, a);
}
template <typename T>
void block_gru_reset_after_bwd(const BlockGRUDims& d, const BlockGRUResetAfterBwdArgs<T>& a) {
  ref::block_gru_reset_after_bwd<T>(d, a);
}
template void block_gru_reset_after_fwd<float>(const BlockGRUDims&,
                                               const BlockGRUResetAfterFwdArgs<float>&);
template void block_gru_reset_after_fwd<double>(const BlockGRUDims&,
                                                const BlockGRUResetAfterFwdArgs<double>&);
template void block_gru_reset_after_bwd<float>(const BlockGRUDims&,
                                               const BlockGRUResetAfterBwdArgs<float>&);
template void block_gru_reset_after_bwd<double>(const BlockGRUDims&,
                                                const BlockGRUResetAfterBwdArgs<double>&);
}  // namespace blockrnn::cpu
