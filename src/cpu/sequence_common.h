// Helpers shared by the fast sequence drivers (src/cpu/block_gru.cc, src/cpu/block_lstm.cc):
// the per-call workspace, zero fills and the column reductions that give bias and peephole
// gradients over all T·B rows after the backward loop; the time loop (TimeLoop), the rows a step
// runs over with per-example lengths (ActiveRows), the input projection and the gathers and
// scatters of the compacted weight gradients.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "core/cancel.h"
#include "core/first_touch.h"
#include "core/isa.h"
#include "core/kept_buffer.h"
#include "core/parallel.h"
#include "gemm/gemm.h"

namespace blockrnn::cpu {

// One allocation per call, carved into named slices before the time loop; nothing inside the
// loop allocates. The memory is the calling thread's kept workspace when it is large enough
// (core/kept_buffer.h), else new; either way it is left uninitialised (every slice is fully
// written before it is read). Sizes are overflow-checked and allocation failure is a library error.
// Given `external` memory (a plan-once caller's, sized by the kernel's *_workspace_elems bound),
// the slices are carved from it and nothing is allocated.
template <typename T>
class Workspace {
 public:
  static constexpr std::size_t kMaxSlices = 12;
  Workspace(const char* op, std::initializer_list<std::int64_t> sizes, T* external = nullptr) {
    std::int64_t total = 0;
    for (std::int64_t s : sizes) {
      if (s < 0 || n_ == kMaxSlices ||
          total > std::numeric_limits<std::int64_t>::max() / 2 / std::int64_t(sizeof(T)) - s) {
        overflow(op);
      }
      offsets_[n_++] = total;
      total += s;
    }
    if (external != nullptr) {
      base_ = external;
      return;
    }
    // At least one byte: an empty workspace still has an address, as a new[0] had.
    const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(total) * sizeof(T), 1);
    try {
      buffer_.emplace(bytes);
    } catch (const std::bad_alloc&) {
      overflow(op);
    }
    if (!buffer_->reused()) core::fault_in(buffer_->data(), bytes);
    base_ = static_cast<T*>(buffer_->data());
  }
  T* slice(std::size_t k) { return base_ + offsets_[k]; }

 private:
  [[noreturn]] static void overflow(const char* op) {
    throw Error(ErrorCode::kResourceExhausted,
                std::string(op) + ": cannot allocate the workspace for this problem size");
  }
  std::optional<core::KeptBuffer> buffer_;
  T* base_ = nullptr;
  std::int64_t offsets_[kMaxSlices] = {};
  std::size_t n_ = 0;
};

// The recurrent (and input-projection) weights of a sequence kernel: packed by the plan-once
// caller (src/cpu/sequence_plan.h) or, without a plan, packed here once per call.
template <typename T>
class Packed {
 public:
  // The plan's matrix when there is one; else op(b) packed now.
  Packed(const gemm::PackedB<T>* planned, gemm::Trans tb, std::int64_t k, std::int64_t n,
         const T* b, std::int64_t ldb)
      : p_(planned) {
    if (p_ == nullptr) {
      own_.pack(tb, k, n, b, ldb);
      p_ = &own_;
    }
  }
  Packed(const Packed&) = delete;  // p_ may point into *this
  Packed& operator=(const Packed&) = delete;
  const gemm::PackedB<T>& operator*() const { return *p_; }
  const gemm::PackedB<T>* operator->() const { return p_; }

 private:
  gemm::PackedB<T> own_;
  const gemm::PackedB<T>* p_;
};

// A per-call operand of the weight-gradient products (the gate gradients [k, n], row stride
// ldb) packed into `storage`, the call's workspace slice of gemm::packed_elems_bound(k, n)
// elements: packed once for its products, allocating nothing.
template <typename T>
void pack_into_workspace(gemm::PackedB<T>& packed, std::int64_t k, std::int64_t n, const T* b,
                         std::int64_t ldb, T* storage) {
  packed.pack_into(gemm::Trans::kNo, k, n, b, ldb, core::active_isa(), storage,
                   gemm::packed_elems_bound(k, n));
}

// C [m, n] = beta·C + A·Wᵀ, W [n, k] (row stride ldw) an input weight block: on Wᵀ packed by the
// plan (`planned_t`) or by the one-shot gemm at this call. The same bits either way (a GEMM's
// bits do not depend on when B was packed, gemm/gemm.h).
template <typename T>
void product_weight_t(const gemm::PackedB<T>* planned_t, std::int64_t m, std::int64_t n,
                      std::int64_t k, const T* a, std::int64_t lda, const T* w, std::int64_t ldw,
                      T beta, T* c, std::int64_t ldc) {
  if (planned_t != nullptr) {
    gemm::gemm(gemm::Trans::kNo, m, a, lda, *planned_t, beta, c, ldc);
  } else {
    gemm::gemm(gemm::Trans::kNo, gemm::Trans::kYes, m, n, k, a, lda, w, ldw, beta, c, ldc);
  }
}

// Row stride for a workspace matrix of `cols` floats. Row strides that are multiples of 2 KB map
// every row of a GEMM tile to the same L1 sets (and 4 KB multiples trip store-to-load
// aliasing), so such strides get 16 extra elements. Measured on Zen 4, one thread, the
// recurrent GEMM [64, 512]·[512, 2048] of an LSTM step: 75 GFLOP/s with ld 2048, 94 GFLOP/s
// with ld 2064 (docs/performance.md).
inline std::int64_t padded_ld(std::int64_t cols) {
  return (cols >= 512 && cols % 512 == 0) ? cols + 16 : cols;
}

// The time loop of a sequence op runs in one parallel region: thread `id` of `nt` owns the
// hidden-unit columns of GEMM panels [p0, p1) (NR = panel width) for the whole sequence. Per
// step it computes its own columns of every gate's recurrent product (all of h[t−1] in, its
// columns out), runs the element-wise step on exactly those columns, and meets the others at
// one barrier before the next step reads the whole new h (the GRU, with two dependent products
// per step, meets twice). Nothing in the loop allocates, forks or joins. The column split
// changes only who computes an element, never how: the GEMM bits do not depend on the tiling,
// and every range starts at a panel boundary, a multiple of the vector width.
struct UnitSplit {
  std::int64_t p0 = 0, p1 = 0;  // panels
  std::int64_t j0 = 0, j1 = 0;  // columns [j0, j1) of H
};

inline UnitSplit unit_split(std::int64_t panels, std::int64_t nr, std::int64_t H, int id, int nt) {
  UnitSplit u;
  u.p0 = panels * id / nt;
  u.p1 = panels * (id + 1) / nt;
  u.j0 = std::min(u.p0 * nr, H);
  u.j1 = std::min(u.p1 * nr, H);
  return u;
}

// Threads for a time loop: at most one per panel and about 2^17 multiply-adds of recurrent
// product per thread and step (below that a barrier costs more than the work it splits).
inline int loop_threads(std::int64_t panels, double madds_per_step) {
  const std::int64_t by_work =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(madds_per_step / 131072.0));
  return static_cast<int>(std::min<std::int64_t>({get_num_threads(), panels, by_work}));
}

// The time loop of a sequence op as one team (core::run_team of loop_threads(panels,
// madds_per_step); the thread budget may grant fewer).
// run(body): every thread runs body(own, end_step), `own` its columns (unit_split), which loops
// over the steps k = 0 … S−1 (in the op's order of t). end_step(k) closes step k: it polls for
// cancellation (core::TeamStop, on thread 0), meets the team at a barrier (the next product reads
// whole what the step wrote) and says whether to leave the loop, which every thread then does
// after the same step. A cancelled loop throws op's error after the team.
struct TimeLoop {
  const char* op;              // the op's name, for the cancellation error
  std::int64_t S;              // steps
  std::int64_t panels, nr, H;  // the columns to split (unit_split)
  double madds_per_step;       // recurrent product work (loop_threads)

  template <typename F>
  void run(F&& body) const {
    core::TeamStop stop;
    core::run_team(loop_threads(panels, madds_per_step), [&](int id, int nt) {
      const auto end_step = [&](std::int64_t k) {
        stop.poll(id, k);
#pragma omp barrier
        return stop.stop_after(k);
      };
      body(unit_split(panels, nr, H, id, nt), end_step);
    });
    if (stop.stopped()) core::throw_cancelled(op, stop.steps_done(), S);
  }
};

template <typename T>
inline void zero(T* p, std::int64_t n) {
  if (n > 0) std::fill(p, p + n, T(0));
}

// Accumulator of reductions: float sums run in double (bias gradients sum T·B terms).
template <typename T>
using Acc = std::conditional_t<sizeof(T) < sizeof(double), double, T>;

// out[j] = Σ_r m[r, j] for a [rows, cols] matrix with row stride ld: the one bias-gradient
// reduction of the fast path. Threads split the columns; each column is summed in row order
// into an accumulator of type A, so the result does not depend on threads. The sequence ops
// sum S·B rows in Acc<T> (double for float); the cell ops sum B rows in T, as TensorFlow's
// cells and the reference do.
template <typename T, typename A = Acc<T>>
void column_sums(std::int64_t rows, std::int64_t cols, const T* m, std::int64_t ld, T* out) {
  constexpr std::int64_t kChunk = 256;
  const std::int64_t chunks = (cols + kChunk - 1) / kChunk;
  core::parallel_for(chunks, rows * kChunk, [&](std::int64_t c0, std::int64_t c1) {
    A acc[kChunk];
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t j0 = c * kChunk, n = std::min(kChunk, cols - j0);
      std::fill(acc, acc + n, A(0));
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = m + r * ld + j0;
        for (std::int64_t j = 0; j < n; ++j) acc[j] += row[j];
      }
      for (std::int64_t j = 0; j < n; ++j) out[j0 + j] = static_cast<T>(acc[j]);
    }
  });
}

}  // namespace blockrnn::cpu

namespace blockrnn {
// The buffers of an ActiveRows index (below); a plan-once caller keeps one across calls
// (SequenceDims::index) so that its vectors keep their capacity.
struct ActiveRowsIndex {
  std::vector<std::int64_t> steps;  // [B]  min(L_b, S)
  std::vector<std::int64_t> count;  // [S]  active examples of step t
  std::vector<std::int64_t> rows;   // [N]  the active rows t·B + b, by step then example
};
}  // namespace blockrnn

namespace blockrnn::cpu {

// seq_lengths on the fast path (blockrnn's extension; docs/ops.md). Example b runs steps
// t < steps[b] = min(L_b, S). A step's element-wise passes run on its active rows only (the
// inactive rows of every output and gradient are written as zeros, never computed, so whatever
// x, d_h or d_cs hold there cannot leak), and the weight gradients are products over the
// compacted active rows. When the lengths are non-increasing (PackedSequence order) the active
// rows of every step are a prefix [0, count[t]), and the recurrent products and passes run over
// that prefix only; otherwise over all B rows with the passes masked. Either way a row's values
// are computed exactly as without lengths: a GEMM row's bits do not depend on the other rows
// (the reduction over k is the same for every m; tests/cpp/test_seq_lengths.cc checks it).
//
// Without lengths (nullptr) every row of every step is active: `all` is set, nothing is
// allocated and the index vectors stay empty (the loops then run exactly as the ops without
// lengths: one pass over rows [0, B) per step).
struct ActiveRows {
  std::int64_t B = 0, S = 0;

 private:
  ActiveRowsIndex own_;  // the buffers when the caller keeps none

 public:
  std::vector<std::int64_t>& steps;  // [B]  min(L_b, S)
  std::vector<std::int64_t>& count;  // [S]  active examples of step t
  std::vector<std::int64_t>& rows;   // [N]  the active rows t·B + b, by step then example
  bool prefix = true;                // steps non-increasing: step t's active rows are [0, count[t])
  bool all = false;                  // no lengths: every row active (the vectors are empty)

  // The index of `lengths` (nullptr: every row active), in `kept`'s buffers when given (a
  // plan-once caller's: no allocation once they hold a call this large), else in its own.
  ActiveRows(const std::int64_t* lengths, std::int64_t S_, std::int64_t B_,
             ActiveRowsIndex* kept = nullptr)
      : B(B_),
        S(S_),
        steps(kept ? kept->steps : own_.steps),
        count(kept ? kept->count : own_.count),
        rows(kept ? kept->rows : own_.rows) {
    steps.clear();
    count.clear();
    rows.clear();
    if (lengths == nullptr) {
      all = true;
      return;
    }
    steps.resize(static_cast<std::size_t>(B));
    count.assign(static_cast<std::size_t>(S), 0);
    std::int64_t n = 0;
    for (std::int64_t b = 0; b < B; ++b) {
      steps[b] = std::min(lengths[b], S);
      if (b > 0 && steps[b] > steps[b - 1]) prefix = false;
      for (std::int64_t t = 0; t < steps[b]; ++t) ++count[t];
      n += steps[b];
    }
    rows.reserve(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < S; ++t) {
      for (std::int64_t b = 0; b < B; ++b) {
        if (t < steps[b]) rows.push_back(t * B + b);
      }
    }
  }
  ActiveRows(const ActiveRows&) = delete;  // the references may point into own_
  ActiveRows& operator=(const ActiveRows&) = delete;
  std::int64_t total() const { return all ? S * B : static_cast<std::int64_t>(rows.size()); }
  // Rows of the compacted copies the weight gradients run over (none without lengths: those
  // run over all S·B rows in place).
  std::int64_t compacted() const { return all ? 0 : total(); }
  // Rows the recurrent products of step t run over.
  std::int64_t gemm_rows(std::int64_t t) const { return all ? B : prefix ? count[t] : B; }
  // Whether the input projection runs per step over each step's active prefix (else once over
  // all S·B rows).
  bool per_step_prefix() const { return prefix && !all; }
  // f(r0, r1) for each maximal run of active rows of step t; g(b) for each inactive row.
  template <typename F, typename G>
  void for_rows(std::int64_t t, F&& f, G&& g) const {
    if (all) {
      f(std::int64_t(0), B);
      return;
    }
    std::int64_t b = 0;
    while (b < B) {
      if (t < steps[b]) {
        std::int64_t e = b + 1;
        while (e < B && t < steps[e]) ++e;
        f(b, e);
        b = e;
      } else {
        g(b++);
      }
    }
  }
};

// The input projection of a sequence's steps: out[t] = x[t]·w for x [S, B, I] and w [I, N] (row
// stride ldw: the input rows of a weight matrix), out's rows of stride ld, B rows a step. On
// `planned` (the plan's packed w) when there is one, else on w as it is. One GEMM over all S·B
// rows, or, with per-step prefix lengths, one per step over its active prefix only.
template <typename T>
void input_projection(const ActiveRows& act, const gemm::PackedB<T>* planned, const T* x,
                      std::int64_t I, const T* w, std::int64_t N, std::int64_t ldw, T* out,
                      std::int64_t ld) {
  const auto product = [&](std::int64_t m, const T* xm, T* om) {
    if (planned != nullptr) {
      gemm::gemm<T>(gemm::Trans::kNo, m, xm, I, *planned, T(0), om, ld);
    } else {
      gemm::gemm<T>(gemm::Trans::kNo, gemm::Trans::kNo, m, N, I, xm, I, w, ldw, T(0), om, ld);
    }
  };
  if (!act.per_step_prefix()) {
    product(act.S * act.B, x, out);
    return;
  }
  for (std::int64_t t = 0; t < act.S; ++t) {
    product(act.count[t], x + t * act.B * I, out + t * act.B * ld);
  }
}

// Copies the given rows of src (row stride lds, n columns) into dst densely (row stride ldd).
template <typename T>
void gather_rows(const std::vector<std::int64_t>& rows, const T* src, std::int64_t lds,
                 std::int64_t n, T* dst, std::int64_t ldd) {
  const std::int64_t N = static_cast<std::int64_t>(rows.size());
  core::parallel_for(N, n, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::copy(src + rows[r] * lds, src + rows[r] * lds + n, dst + r * ldd);
    }
  });
}

// Copies the dense rows of src (n columns) to the given rows of dst (row stride n): the inverse
// of gather_rows.
template <typename T>
void scatter_rows(const std::vector<std::int64_t>& rows, const T* src, std::int64_t n, T* dst) {
  const std::int64_t N = static_cast<std::int64_t>(rows.size());
  core::parallel_for(N, n, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      std::copy(src + r * n, src + (r + 1) * n, dst + rows[r] * n);
    }
  });
}

// The backward's d_x [T·B, I] outside what its products write: an all-active call's products
// write the rows of its S steps whole (beta = 0); the rest (the steps past S, or with lengths
// every row but the scattered active ones, which are added later) is zero. No d_x (no input
// gradient wanted): nothing.
template <typename T>
void zero_unwritten_d_x(T* d_x, const ActiveRows& act, std::int64_t T_steps, std::int64_t I) {
  if (!d_x) return;
  const std::int64_t written = act.total() > 0 && act.all ? act.S * act.B * I : 0;
  zero(d_x + written, T_steps * act.B * I - written);
}

// Where a backward carries a state gradient between steps: the caller's output `wanted`, or
// where that gradient is not wanted (null) the workspace slice `slice` of n elements, zeroed
// (the output itself is zeroed at the top of the call, before any early return).
template <typename T>
T* carry_storage(T* wanted, T* slice, std::int64_t n) {
  if (wanted) return wanted;
  zero(slice, n);
  return slice;
}

// The inputs of the given rows t·B + b, compacted for the weight gradients: their x rows into
// xc [N, I] and their h[t−1] rows (h_prev [B, H] at t = 0, else h [T, B, H]) into hc [N, H].
template <typename T>
void gather_inputs(const std::vector<std::int64_t>& rows, std::int64_t B, std::int64_t I,
                   std::int64_t H, const T* x, const T* h_prev, const T* h, T* xc, T* hc) {
  gather_rows(rows, x, I, I, xc, I);
  const std::int64_t N = static_cast<std::int64_t>(rows.size());
  core::parallel_for(N, H, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t row = rows[r];  // t·B + b
      const T* src = row < B ? h_prev + row * H : h + (row - B) * H;
      std::copy(src, src + H, hc + r * H);
    }
  });
}

}  // namespace blockrnn::cpu
