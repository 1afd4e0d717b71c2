// blockrnn/matmul.h — the library's GEMM engine on views, for the products around the ops (an
// output layer, a projection) that a caller would otherwise write as a loop or take from a BLAS.
//
//   c = op(a) · op(b) + beta · c        op(x) = x, or xᵀ when its transpose flag is set
//
// a, b and c are dense row-major 2-D views of one dtype, float32 or float64: op(a) is [M, K],
// op(b) is [K, N] and c is [M, N]. The product runs on the GEMM engine the ops use, threaded over
// the context's threads (blockrnn/context.h), and is deterministic as the ops are: every element
// of c is one in-order fused multiply-add chain over k, so its bits do not depend on the thread
// count (docs/design.md, "Determinism"). Empty sizes are fine (M or N = 0: nothing is written;
// K = 0: c = beta · c). With beta = 0, c's old values are not read (NaN in c does not leak).
//
// Errors (blockrnn::Error, kInvalidArgument, naming "matmul" and the argument): a rank other than
// 2, a dtype other than float32 / float64 or not the same for all three, sizes that do not
// agree, a view with elements but no data, c overlapping a or b.
#pragma once

#include "blockrnn/export.h"
#include "blockrnn/tensor.h"

namespace blockrnn {

struct MatmulOptions {
  bool transpose_a = false;  // op(a) = aᵀ: a is [K, M]
  bool transpose_b = false;  // op(b) = bᵀ: b is [N, K]
  double beta = 0.0;         // 0: c is overwritten; 1: the product is added to c
};

BLOCKRNN_API void matmul(const TensorView& a, const TensorView& b, const MutableTensorView& c,
                         const MatmulOptions& options = {});

}  // namespace blockrnn
