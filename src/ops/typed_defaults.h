// The defaults of the typed C++ API that TensorFlow's ops do not have. The public
// typed functions (lstm.h, sequence.h, cuda.h) apply them before validating; the name-based
// run_op calls the ops without them and so keeps TensorFlow's contract: there, seq_len_max and
// the peephole vectors are always required.
//   - seq_len_max left unset runs every step: S = T, the time dimension of x.
//   - With use_peephole false, an omitted peephole vector (no data, or no elements) stands for
//     zeros [H]; with use_peephole true a peephole vector without data is an error naming it.
#pragma once

#include <cstdint>
#include <optional>

#include "blockrnn/tensor.h"

namespace blockrnn::ops {

// S when given, else T = x.dim(0); 0 when x is not rank 3 (validation then reports x).
inline std::int64_t seq_len_or_time(const std::optional<std::int64_t>& seq_len_max,
                                    const TensorView& x) {
  if (seq_len_max) return *seq_len_max;
  return x.shape.rank() == 3 ? x.shape[0] : 0;
}

// t.dim(i) when t has the given rank, else -1 (unknown: validation reports t).
inline std::int64_t dim_or(const TensorView& t, int rank, int i) {
  return t.shape.rank() == rank ? t.shape[i] : -1;
}
// H of an LSTM grad, w.dim(1) / 4, or -1 when w does not give it (validation reports w).
inline std::int64_t cell_size_of_w(const TensorView& w) {
  if (w.shape.rank() != 2 || w.shape[1] <= 0 || w.shape[1] % 4 != 0) return -1;
  return w.shape[1] / 4;
}

// Fills in the peephole vectors wci, wcf, wco of an LSTM op's typed call, in place.
//   input_size, cell_size: what the op will validate the inputs against (x's last dimension and
//     the op's H), or -1 where an input of the wrong rank makes them unknown.
//   w: the op's weight [input_size + cell_size, 4 * cell_size].
// A view with a negative dimension is left to validation. With use_peephole false, each omitted
// view becomes zeros [cell_size] in x's dtype (`dtype`), read from a buffer of zeros the calling
// thread keeps for its calls (grown to the largest, never written). The zeros are used only when
// w has its expected shape: w holds at least 4·H² elements then, so H zeros never cost more than
// the caller's own weights.
// Otherwise the omitted view becomes an empty [0] that validation never reaches, since it
// reports w (or an input of the wrong rank) first. With use_peephole true, a view without data
// that claims elements (a default TensorView included) throws Error(kInvalidArgument):
// "<op>: wci is missing (no data): use_peephole is true, so ...".
class PeepholeDefaults {
 public:
  PeepholeDefaults(const char* op, bool use_peephole, std::int64_t input_size,
                   std::int64_t cell_size, const TensorView& w, DType dtype, TensorView* wci,
                   TensorView* wcf, TensorView* wco);
  PeepholeDefaults(const PeepholeDefaults&) = delete;
  PeepholeDefaults& operator=(const PeepholeDefaults&) = delete;
};

// An LSTM op's typed inputs with the peephole defaults applied (an omitted vector reads the
// calling thread's zeros); it must outlive the call. x_rank: 2 for the cell ops, 3 for the sequence
// ops (I is x's last dimension); H is cs_prev's, or w's with h_from_w (the sequence grads, which
// take H from w).
template <class Fields>
struct WithPeepholes {
  Fields in;
  PeepholeDefaults peepholes;
  WithPeepholes(const char* op, const Fields& given, bool use_peephole, int x_rank,
                bool h_from_w = false)
      : in(given),
        peepholes(op, use_peephole, dim_or(in.x, x_rank, x_rank - 1),
                  h_from_w ? cell_size_of_w(in.w) : dim_or(in.cs_prev, 2, 1), in.w, in.x.dtype,
                  &in.wci, &in.wcf, &in.wco) {}
};

}  // namespace blockrnn::ops
