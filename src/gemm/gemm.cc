// The GEMM driver: picks the ISA path's kernels, fixes the output tiling from (M, N, K, path)
// alone, and splits the tiles over threads (see gemm.h for the determinism argument).
#include "gemm/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include "blockrnn/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "gemm/kernels.h"

namespace blockrnn::gemm {
namespace {

const detail::Path& path_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return detail::kAvx512Path;
    case Isa::kAvx2:
      return detail::kAvx2Path;
    case Isa::kBaseline:
      break;
  }
  return detail::kBaselinePath;
}

template <typename T>
const detail::PathKernels<T>& kernels_for(Isa isa) {
  if constexpr (sizeof(T) == 4) {
    return path_for(isa).f32;
  } else {
    return path_for(isa).f64;
  }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Threads a product of this size may use: about 2^17 multiply-adds per thread at least (below
// that a parallel region costs more than it saves). The team is also capped by the tiles.
template <typename T>
int threads_by_work(const detail::Problem<T>& p) {
  const double work = double(p.m) * double(p.n) * double(p.k);
  const std::int64_t by_work =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(work / 131072.0));
  return static_cast<int>(std::min<std::int64_t>(get_num_threads(), by_work));
}

// The output tiling for a team of `threads`: as few column tiles of at most the path's width
// (wider for transposed A) as cover N, cut into tiles of equal width rounded up to NR (a weight
// gradient of N = 1536 at a width of 1024 made a 1024- and a 512-column tile, one per thread,
// and the team waited a third of the product) × MT rows, with as few row tiles of at most MT_max
// rows as fit — more while the tiles would not divide evenly over the threads (a weight gradient of
// M = 256 rows made 96 + 96 + 64-row tiles, two for one thread and one for the other, and its
// team waited a third of the product) — and those rows cut into tiles of equal size (rounded up
// to MR: 88 + … + 72 rows at M = 512 where 96 + … + 32 left one thread 64 rows more).
// The tiling decides only which thread computes which outputs, never an output's value: each
// one is the same in-order chain over k on every tiling (gemm.h), so the bits do not depend on
// the thread count through it.
template <typename T>
void set_tiling(const detail::Blocking& bl, int threads, detail::Problem<T>& p) {
  // Transposed A is packed per tile and K block: wider tiles pack it fewer times (the weight
  // gradients, K = T·B, gained 73 → 88 GFLOP/s on one Zen 4 core).
  const std::int64_t tiles_n = ceil_div(p.n, p.trans_a ? bl.nt_trans_a : bl.nt);
  p.nt = ceil_div(ceil_div(p.n, tiles_n), bl.nr) * bl.nr;
  p.tiles_n = ceil_div(p.n, p.nt);
  const std::int64_t strips = ceil_div(p.m, bl.mr);
  std::int64_t tiles_m = std::min(strips, ceil_div(p.m, bl.mt_max));
  while ((tiles_m * p.tiles_n) % threads != 0 && tiles_m < strips) ++tiles_m;
  p.mt = ceil_div(ceil_div(p.m, tiles_m), bl.mr) * bl.mr;
  p.tiles_m = ceil_div(p.m, p.mt);
}

// Threads for one product: threads_by_work, and no more than there are tiles.
template <typename T>
int threads_for(const detail::Problem<T>& p) {
  return static_cast<int>(std::min<std::int64_t>(threads_by_work(p), p.tiles_m * p.tiles_n));
}

void check_dims(const char* what, std::initializer_list<std::int64_t> dims) {
  for (std::int64_t v : dims) {
    if (v < 0) {
      throw Error(ErrorCode::kInternal,
                  std::string("gemm: negative ") + what + " " + std::to_string(v));
    }
  }
}

// C = beta·C for K = 0 (beta = 0 writes zeros, whatever C held).
template <typename T>
void scale_c(std::int64_t m, std::int64_t n, T beta, T* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    for (std::int64_t j = 0; j < n; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
  }
}

// The packing buffer of one product, for all its threads. A buffer of up to kKeptScratchBytes
// is the calling thread's, kept from one product to the next: a one-shot call of a small op
// multiplies by weights it has not packed, and allocating its ~130 KiB buffer per product made
// glibc grow and trim the heap at every call (two brk calls and fresh zero pages each: a
// T = B = 1, I = H = 32 BlockLSTM took 5× longer than with the buffer kept). Larger buffers are
// allocated per product, as their product's work dwarfs the allocation. The kept buffer is
// freed when the thread exits; the memory check of every op counts it as the call's own.
constexpr std::size_t kKeptScratchBytes = std::size_t{1} << 20;

class Scratch {
 public:
  template <typename T>
  T* get(std::size_t elems) {
    if (elems == 0) return nullptr;
    const std::size_t bytes = elems * sizeof(T);
    const std::size_t words = (bytes + sizeof(double) - 1) / sizeof(double);
    try {
      if (bytes > kKeptScratchBytes) {
        owned_ = std::make_unique_for_overwrite<double[]>(words);
        return reinterpret_cast<T*>(owned_.get());
      }
      thread_local std::unique_ptr<double[]> kept;
      thread_local std::size_t kept_words = 0;
      if (kept_words < words) {
        kept.reset();
        kept_words = 0;
        kept = std::make_unique_for_overwrite<double[]>(words);
        kept_words = words;
      }
      return reinterpret_cast<T*>(kept.get());
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kResourceExhausted, "gemm: cannot allocate the packing buffer");
    }
  }

 private:
  std::unique_ptr<double[]> owned_;
};

// Runs all tiles of p over `threads` threads; each thread takes a contiguous range of tiles
// (the same range at every call with the same shape, so its part of a prepacked B stays in
// its cache across the steps of a sequence).
template <typename T>
void run(const detail::PathKernels<T>& kern, const detail::Problem<T>& p) {
  const std::int64_t tiles = p.tiles_m * p.tiles_n;
  const int threads = threads_for(p);
  const std::int64_t per_thread = detail::scratch_elems(kern.blocking, p);
  Scratch buffer;
  T* const scratch = buffer.get<T>(static_cast<std::size_t>(per_thread * threads));
  core::run_team(threads, [&](int id, int nt) {
    const std::int64_t t0 = tiles * id / nt, t1 = tiles * (id + 1) / nt;
    if (t0 < t1)
      kern.run_tiles(p, t0, t1, scratch == nullptr ? nullptr : scratch + per_thread * id);
  });
}

}  // namespace

template <typename T>
void PackedB<T>::Free::operator()(T* p) const {
  if (owned) ::operator delete[](p, std::align_val_t(64));
}

template <typename T>
std::int64_t PackedB<T>::elems(std::int64_t k, std::int64_t n, Isa isa) {
  const std::int64_t nr = kernels_for<T>(isa).blocking.nr;
  return ceil_div(n, nr) * k * nr;
}

template <typename T>
void PackedB<T>::pack(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb) {
  pack(tb, k, n, b, ldb, core::active_isa());
}

template <typename T>
void PackedB<T>::pack(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb,
                      Isa isa) {
  check_dims("packed dimension", {k, n, ldb});
  const std::int64_t nr = kernels_for<T>(isa).blocking.nr, panels = ceil_div(n, nr);
  if (k > 0 &&
      panels > std::numeric_limits<std::int64_t>::max() / 4 / k / nr / std::int64_t(sizeof(T))) {
    throw Error(ErrorCode::kResourceExhausted, "gemm: packed matrix too large");
  }
  const std::int64_t elems = std::max<std::int64_t>(panels * k * nr, 1);
  // A repack that fits the panels this PackedB owns reuses them: a plan repacked at every
  // training step would otherwise fault in fresh megabytes each time.
  if (!data_ || !data_.get_deleter().owned || capacity_ < elems) {
    data_.reset();  // free first: the peak is the new panels, not both
    T* mem = nullptr;
    try {
      mem = static_cast<T*>(
          ::operator new[](static_cast<std::size_t>(elems) * sizeof(T), std::align_val_t(64)));
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kResourceExhausted, "gemm: cannot allocate a packed matrix");
    }
    data_.reset(mem);
    data_.get_deleter().owned = true;
    capacity_ = elems;
  }
  fill(tb, k, n, b, ldb, isa);
}

template <typename T>
void PackedB<T>::pack_into(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb,
                           Isa isa, T* storage, std::int64_t capacity) {
  check_dims("packed dimension", {k, n, ldb});
  if (elems(k, n, isa) > capacity) {
    throw Error(ErrorCode::kInternal, "gemm: pack_into storage of " + std::to_string(capacity) +
                                          " elements, " + std::to_string(elems(k, n, isa)) +
                                          " needed");
  }
  data_.reset(storage);
  data_.get_deleter().owned = false;
  capacity_ = capacity;
  fill(tb, k, n, b, ldb, isa);
}

template <typename T>
void PackedB<T>::fill(Trans tb, std::int64_t k, std::int64_t n, const T* b, std::int64_t ldb,
                      Isa isa) {
  const detail::PathKernels<T>& kern = kernels_for<T>(isa);
  const std::int64_t nr = kern.blocking.nr, panels = ceil_div(n, nr);
  T* const mem = data_.get();
  k_ = k;
  n_ = n;
  isa_ = isa;
  const int threads = static_cast<int>(std::min<std::int64_t>(
      {get_num_threads(), panels, std::max<std::int64_t>(1, panels * k * nr / 65536)}));
  core::run_team(threads, [&](int id, int nt) {
    kern.pack_panels(tb == Trans::kYes, k, n, b, ldb, panels * id / nt, panels * (id + 1) / nt,
                     mem);
  });
}

template <typename T>
void gemm(Trans trans_a, Trans trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  check_dims("dimension", {m, n, k, lda, ldb, ldc});
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  const Isa isa = core::active_isa();
  const detail::PathKernels<T>& kern = kernels_for<T>(isa);
  detail::Problem<T> p;
  p.trans_a = trans_a == Trans::kYes;
  p.trans_b = trans_b == Trans::kYes;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = a;
  p.lda = lda;
  p.b = b;
  p.ldb = ldb;
  p.beta = beta;
  p.c = c;
  p.ldc = ldc;
  set_tiling(kern.blocking, threads_by_work(p), p);
  if (p.tiles_m > 1) {
    // More than one row tile would pack each block of B once per row tile: pack all of op(B)
    // once instead (the panels then stream from cache for every row tile).
    PackedB<T> packed;
    packed.pack(trans_b, k, n, b, ldb, isa);
    return gemm(trans_a, m, a, lda, packed, beta, c, ldc);
  }
  run(kern, p);
}

template <typename T>
std::int64_t PackedB<T>::panel_width() const {
  return kernels_for<T>(isa_).blocking.nr;
}

namespace {

// The problem C[:, j0:j0+n] = beta·C + op(A)·B[k0:k1, j0:j0+n] on a packed B (j0 = p0·NR), its
// tiling left to the caller (set_tiling).
template <typename T>
detail::Problem<T> packed_problem(const detail::PathKernels<T>& kern, bool trans_a, std::int64_t m,
                                  const T* a, std::int64_t lda, const PackedB<T>& b,
                                  std::int64_t k0, std::int64_t k1, std::int64_t p0, std::int64_t n,
                                  T beta, T* c, std::int64_t ldc) {
  const std::int64_t nr = kern.blocking.nr;
  detail::Problem<T> p;
  p.trans_a = trans_a;
  p.m = m;
  p.n = n;
  p.k = k1 - k0;
  p.a = a;
  p.lda = lda;
  p.packed = b.data() + p0 * b.k() * nr + k0 * nr;
  p.packed_ld = b.k() * nr;
  p.beta = beta;
  p.c = c + p0 * nr;
  p.ldc = ldc;
  return p;
}

}  // namespace

template <typename T>
void gemm(Trans trans_a, std::int64_t m, const T* a, std::int64_t lda, const PackedB<T>& b, T beta,
          T* c, std::int64_t ldc) {
  gemm(trans_a, m, a, lda, b, 0, b.k(), beta, c, ldc);
}

template <typename T>
void gemm(Trans trans_a, std::int64_t m, const T* a, std::int64_t lda, const PackedB<T>& b,
          std::int64_t k0, std::int64_t k1, T beta, T* c, std::int64_t ldc) {
  check_dims("dimension", {m, lda, ldc, k0, k1 - k0, b.k() - k1});
  const std::int64_t n = b.n();
  if (m == 0 || n == 0) return;
  if (k1 == k0) return scale_c(m, n, beta, c, ldc);
  // The panels were laid out for the path active when b was packed.
  const detail::PathKernels<T>& kern = kernels_for<T>(b.isa());
  detail::Problem<T> p =
      packed_problem(kern, trans_a == Trans::kYes, m, a, lda, b, k0, k1, 0, n, beta, c, ldc);
  set_tiling(kern.blocking, threads_by_work(p), p);
  run(kern, p);
}

template <typename T>
void gemm_panels(std::int64_t m, const T* a, std::int64_t lda, const PackedB<T>& b, std::int64_t p0,
                 std::int64_t p1, T beta, T* c, std::int64_t ldc) {
  const detail::PathKernels<T>& kern = kernels_for<T>(b.isa());
  const std::int64_t nr = kern.blocking.nr;
  check_dims("dimension", {m, lda, ldc, p0, p1 - p0});
  const std::int64_t n = std::min(p1 * nr, b.n()) - p0 * nr;
  if (m == 0 || n <= 0) return;
  if (b.k() == 0) return scale_c(m, n, beta, c + p0 * nr, ldc);
  // One thread's share of a product split by the caller: tiled for a team of one.
  detail::Problem<T> p = packed_problem(kern, false, m, a, lda, b, 0, b.k(), p0, n, beta, c, ldc);
  set_tiling(kern.blocking, 1, p);
  kern.run_tiles(p, 0, p.tiles_m * p.tiles_n, nullptr);  // packed B, row-major A: no scratch
}

template <typename T>
void transpose(std::int64_t rows, std::int64_t cols, const T* src, std::int64_t lds, T* dst,
               std::int64_t ldd) {
  check_dims("transpose dimension", {rows, cols, lds, ldd});
  // Threads take bands of 64 source rows (at least 2^16 values each, as the packing's panels).
  constexpr std::int64_t kBand = 64;
  const std::int64_t bands = (rows + kBand - 1) / kBand;
  const int threads = static_cast<int>(std::min<std::int64_t>(
      {get_num_threads(), bands, std::max<std::int64_t>(1, rows * cols / 65536)}));
  core::run_team(std::max(threads, 1), [&](int id, int nt) {
    const std::int64_t r0 = bands * id / nt * kBand,
                       r1 = std::min(rows, bands * (id + 1) / nt * kBand);
    if (r0 >= r1) return;
    if constexpr (sizeof(T) == 2) {
      // 16-bit values: the band 64 columns at a time, one value at a time (no register
      // transpose of halves).
      for (std::int64_t c0 = 0; c0 < cols; c0 += kBand) {
        for (std::int64_t r = r0; r < r1; ++r) {
          for (std::int64_t c = c0; c < std::min(cols, c0 + kBand); ++c) {
            dst[c * ldd + r] = src[r * lds + c];
          }
        }
      }
    } else {
      kernels_for<T>(core::active_isa())
          .transpose(r1 - r0, cols, src + r0 * lds, lds, dst + r0, ldd);
    }
  });
}

template class PackedB<float>;
template class PackedB<double>;
template void transpose<float>(std::int64_t, std::int64_t, const float*, std::int64_t, float*,
                               std::int64_t);
template void transpose<double>(std::int64_t, std::int64_t, const double*, std::int64_t, double*,
                                std::int64_t);
template void transpose<std::uint16_t>(std::int64_t, std::int64_t, const std::uint16_t*,
                                       std::int64_t, std::uint16_t*, std::int64_t);
template void gemm<float>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, const float*,
                          std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(Trans, Trans, std::int64_t, std::int64_t, std::int64_t, const double*,
                           std::int64_t, const double*, std::int64_t, double, double*,
                           std::int64_t);
template void gemm<float>(Trans, std::int64_t, const float*, std::int64_t, const PackedB<float>&,
                          float, float*, std::int64_t);
template void gemm<double>(Trans, std::int64_t, const double*, std::int64_t, const PackedB<double>&,
                           double, double*, std::int64_t);
template void gemm<float>(Trans, std::int64_t, const float*, std::int64_t, const PackedB<float>&,
                          std::int64_t, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(Trans, std::int64_t, const double*, std::int64_t, const PackedB<double>&,
                           std::int64_t, std::int64_t, double, double*, std::int64_t);
template void gemm_panels<float>(std::int64_t, const float*, std::int64_t, const PackedB<float>&,
                                 std::int64_t, std::int64_t, float, float*, std::int64_t);
template void gemm_panels<double>(std::int64_t, const double*, std::int64_t, const PackedB<double>&,
                                  std::int64_t, std::int64_t, double, double*, std::int64_t);

}  // namespace blockrnn::gemm
