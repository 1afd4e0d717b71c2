// The bfloat16 GEMM driver (gemm_bf16.h): rounding and packing of the operands, the output
// tiling from (M, N, K) alone, and the split of the tiles over threads; the vdpbf16ps
// micro-kernels are in kernels_bf16_avx512.cc, the kWidened kernel is the float32 engine.
#include "gemm/gemm_bf16.h"

#include <algorithm>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "blockrnn/error.h"
#include "core/isa.h"
#include "core/kept_buffer.h"
#include "core/parallel.h"
#include "gemm/bf16.h"
#include "gemm/kernels.h"

namespace blockrnn::gemm {
namespace {

using std::int64_t;

const detail::Bf16Kernels& dpbf16() {
  return detail::kAvx512Bf16Kernels;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

void check_dims(std::initializer_list<int64_t> dims) {
  for (int64_t v : dims) {
    if (v < 0) {
      throw Error(ErrorCode::kInternal, "gemm_bf16: negative dimension " + std::to_string(v));
    }
  }
}

// The bfloat16 bits of one operand element: float32 rounded, bfloat16 as is.
template <typename T>
std::uint16_t bits_of(T x) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::uint16_t>);
  if constexpr (std::is_same_v<T, float>) {
    return bf16_from_float(x);
  } else {
    return x;
  }
}

// Threads for work of `items` independent pieces and `macs` multiply-adds: no more than there
// are pieces and about 2^17 multiply-adds per thread (as the float32 engine).
int team_size(int64_t items, double macs) {
  const int64_t by_work = std::max<int64_t>(1, static_cast<int64_t>(macs / 131072.0));
  return static_cast<int>(std::min<int64_t>({get_num_threads(), items, by_work}));
}

std::uint16_t* allocate_bits(int64_t elems, const char* what) {
  if (elems > std::numeric_limits<int64_t>::max() / 4) {
    throw Error(ErrorCode::kResourceExhausted, std::string("gemm_bf16: ") + what + " too large");
  }
  try {
    return static_cast<std::uint16_t*>(::operator new[](
        static_cast<std::size_t>(std::max<int64_t>(elems, 1)) * 2, std::align_val_t(64)));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kResourceExhausted,
                std::string("gemm_bf16: cannot allocate the ") + what);
  }
}

struct FreeBits {
  void operator()(std::uint16_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
};

template <typename T>
std::vector<T> make_buffer(int64_t elems, const char* what) {
  try {
    return std::vector<T>(static_cast<std::size_t>(elems));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::kResourceExhausted,
                std::string("gemm_bf16: cannot allocate the ") + what);
  }
}

// op(B) panels [p0, p1) as bfloat16 pairs (kernels.h layout), zero past K and N: the scalar
// packer, for a B already in bfloat16 (a float32 B is rounded and packed by the vector
// Bf16Kernels::pack_pairs).
template <typename TB>
void pack_b_pairs(bool trans_b, int64_t k, int64_t n, const TB* b, int64_t ldb, int nr, int64_t p0,
                  int64_t p1, std::uint16_t* dst) {
  const int64_t kp = ceil_div(k, 2);
  for (int64_t q = p0; q < p1; ++q) {
    std::uint16_t* panel = dst + q * kp * nr * 2;
    const int64_t j0 = q * nr, w = std::min<int64_t>(nr, n - j0);
    // panel[(kk/2·NR + j)·2 + kk%2] = op(B)[kk, j0 + j]
    if (!trans_b) {
      for (int64_t kk = 0; kk < 2 * kp; ++kk) {
        std::uint16_t* out = panel + (kk / 2) * nr * 2 + (kk % 2);
        const TB* src = b + kk * ldb + j0;
        for (int64_t j = 0; j < nr; ++j) out[j * 2] = kk < k && j < w ? bits_of(src[j]) : 0;
      }
    } else {
      for (int64_t j = 0; j < nr; ++j) {
        std::uint16_t* out = panel + j * 2;
        const TB* src = b + (j0 + j) * ldb;
        for (int64_t kk = 0; kk < 2 * kp; ++kk) {
          out[(kk / 2) * nr * 2 + (kk % 2)] = kk < k && j < w ? bits_of(src[kk]) : 0;
        }
      }
    }
  }
}

// Rows [r0, r1) of op(A) as bfloat16 pairs (kernels.h layout: row-major, row stride 2·kp,
// zero past K).
template <typename TA>
void pack_a_rows(bool trans_a, int64_t k, const TA* a, int64_t lda, int64_t r0, int64_t r1,
                 std::uint16_t* dst) {
  if (!trans_a) return round_rows_bf16(r0, r1, k, a, lda, dst);
  const int64_t ld = bf16_pairs_ld(k);
  for (int64_t r = r0; r < r1; ++r) {
    std::uint16_t* out = dst + r * ld;
    for (int64_t kk = 0; kk < k; ++kk) out[kk] = bits_of(a[kk * lda + r]);
    if (ld > k) out[k] = 0;
  }
}

// op(X) [rows, cols] (X stored [rows, cols], or [cols, rows] when trans) rounded to bfloat16
// and widened to float32, row-major with row stride cols, into out (the kWidened operands).
template <typename T>
void widen(bool trans, int64_t rows, int64_t cols, const T* x, int64_t ldx, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      out[i * cols + j] = bf16_to_float(bits_of(trans ? x[j * ldx + i] : x[i * ldx + j]));
    }
  }
}

// The output tiling: a function of (M, N, K) only, never of the thread count.
void set_tiling(const detail::Bf16Kernels& kern, detail::Bf16Problem& p) {
  p.mt = std::min<int64_t>(ceil_div(p.m, kern.mr) * kern.mr, kern.mt_max);
  p.nt = std::min<int64_t>(ceil_div(p.n, kern.nr) * kern.nr, kern.nt);
  p.tiles_m = ceil_div(p.m, p.mt);
  p.tiles_n = ceil_div(p.n, p.nt);
}

void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
  }
}

}  // namespace

Bf16Kernel bf16_kernel_for(Isa isa) {
  return isa == Isa::kAvx512 && core::cpu_has_avx512_bf16() ? Bf16Kernel::kDpbf16
                                                            : Bf16Kernel::kWidened;
}

Bf16Kernel active_bf16_kernel() {
  return bf16_kernel_for(core::active_isa());
}

template <typename TA>
void round_rows_bf16(int64_t r0, int64_t r1, int64_t k, const TA* a, int64_t lda,
                     std::uint16_t* dst) {
  const int64_t ld = bf16_pairs_ld(k);
  const bool vector_code = std::is_same_v<TA, float> && core::cpu_has_avx512_bf16();
  for (int64_t r = r0; r < r1; ++r) {
    std::uint16_t* out = dst + r * ld;
    const TA* row = a + r * lda;
    if constexpr (std::is_same_v<TA, float>) {
      if (vector_code) {
        dpbf16().round_row(row, k, out);  // vector code, the same bits
      } else {
        for (int64_t kk = 0; kk < k; ++kk) out[kk] = bf16_from_float(row[kk]);
      }
    } else {
      std::copy(row, row + k, out);
    }
    if (ld > k) out[k] = 0;
  }
}

int64_t PackedBBf16::panel_width() const {
  return kernel_ == Bf16Kernel::kDpbf16 ? dpbf16().nr : widened_.panel_width();
}

void PackedBBf16::Free::operator()(std::uint16_t* p) const {
  if (owned) FreeBits()(p);
}

template <typename TB>
void PackedBBf16::pack(Trans tb, int64_t k, int64_t n, const TB* b, int64_t ldb) {
  const Isa isa = core::active_isa();
  pack(tb, k, n, b, ldb, isa, bf16_kernel_for(isa));
}

template <typename TB>
void PackedBBf16::pack(Trans tb, int64_t k, int64_t n, const TB* b, int64_t ldb, Isa isa,
                       Bf16Kernel kernel) {
  pack_to(tb, k, n, b, ldb, isa, kernel, nullptr);
}

void PackedBBf16::pack_into(Trans tb, int64_t k, int64_t n, const float* b, int64_t ldb,
                            float* storage, int64_t capacity) {
  check_dims({k, n, ldb});
  const Isa isa = core::active_isa();
  const Bf16Kernel kernel = bf16_kernel_for(isa);
  if (packed_floats(k, n, kernel) > capacity) {
    throw Error(ErrorCode::kInternal, "gemm_bf16: pack_into storage of " +
                                          std::to_string(capacity) + " floats, " +
                                          std::to_string(packed_floats(k, n, kernel)) + " needed");
  }
  pack_to(tb, k, n, b, ldb, isa, kernel, storage);
}

template <typename TB>
void PackedBBf16::pack_to(Trans tb, int64_t k, int64_t n, const TB* b, int64_t ldb, Isa isa,
                          Bf16Kernel kernel, float* storage) {
  check_dims({k, n, ldb});
  if (kernel == Bf16Kernel::kDpbf16 && bf16_kernel_for(isa) != Bf16Kernel::kDpbf16) {
    throw Error(ErrorCode::kInternal,
                std::string("gemm_bf16: the vdpbf16ps kernel needs the avx512 path and "
                            "AVX512_BF16; asked for on the ") +
                    isa_name(isa) + " path");
  }
  const bool trans = tb == Trans::kYes;
  if (kernel == Bf16Kernel::kWidened) {
    // op(B) rounded and widened, stored as B is (so the float32 pack reads it the same way):
    // into the first k·n floats of the storage, packed into the rest; without storage into the
    // thread's kept buffer (a layer packs its bfloat16 weights again at every training step).
    std::optional<core::KeptBuffer> kept;
    float* wide = storage;
    if (wide == nullptr) {
      try {
        kept.emplace(static_cast<std::size_t>(std::max<int64_t>(k * n, 1)) * sizeof(float));
      } catch (const std::bad_alloc&) {
        throw Error(ErrorCode::kResourceExhausted,
                    "gemm_bf16: cannot allocate the widened operand");
      }
      wide = static_cast<float*>(kept->data());
    }
    if (trans) {
      widen(false, n, k, b, ldb, wide);  // B [N, K] as is
    } else {
      widen(false, k, n, b, ldb, wide);
    }
    if (storage != nullptr) {
      widened_.pack_into(tb, k, n, wide, trans ? k : n, isa, storage + k * n,
                         packed_elems_bound(k, n));
    } else {
      widened_.pack(tb, k, n, wide, trans ? k : n, isa);
    }
    pairs_.reset();
  } else {
    const int nr = dpbf16().nr;
    const int64_t panels = ceil_div(n, nr), kp = ceil_div(k, 2);
    if (kp > 0 && panels > std::numeric_limits<int64_t>::max() / 8 / kp / nr) {
      throw Error(ErrorCode::kResourceExhausted, "gemm_bf16: packed matrix too large");
    }
    // kp·NR pairs a panel: packed_floats(k, n, kDpbf16) floats (NR = 32 divides 64). A repack
    // that fits the pairs this PackedBBf16 owns reuses them (PackedB::pack does the same).
    const int64_t bits = panels * kp * nr * 2;
    if (storage != nullptr) {
      pairs_.reset(reinterpret_cast<std::uint16_t*>(storage));
      pairs_.get_deleter().owned = false;
    } else if (!pairs_ || !pairs_.get_deleter().owned || pairs_capacity_ < bits) {
      pairs_.reset();  // free first: the peak is the new pairs, not both
      pairs_.reset(allocate_bits(bits, "packed matrix"));
      pairs_.get_deleter().owned = true;
      pairs_capacity_ = bits;
    }
    std::uint16_t* const mem = pairs_.get();
    widened_ = PackedB<float>();
    const int threads = team_size(panels, double(panels) * double(kp) * nr);
    core::run_team(threads, [&](int id, int nt) {
      const int64_t q0 = panels * id / nt, q1 = panels * (id + 1) / nt;
      if constexpr (std::is_same_v<TB, float>) {
        dpbf16().pack_pairs(trans, k, n, b, ldb, q0, q1, mem);  // vector code, the same bits
      } else {
        pack_b_pairs(trans, k, n, b, ldb, nr, q0, q1, mem);
      }
    });
  }
  k_ = k;
  n_ = n;
  isa_ = isa;
  kernel_ = kernel;
}

template <typename TA>
void gemm_bf16(Trans trans_a, int64_t m, const TA* a, int64_t lda, const PackedBBf16& b, float beta,
               float* c, int64_t ldc, float* a_scratch) {
  check_dims({m, lda, ldc});
  const int64_t n = b.n(), k = b.k();
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  const bool ta = trans_a == Trans::kYes;
  if (b.kernel() == Bf16Kernel::kWidened) {
    std::vector<float> own;
    float* wide = a_scratch;
    if (wide == nullptr) {
      own = make_buffer<float>(m * k, "widened operand");
      wide = own.data();
    }
    widen(ta, m, k, a, lda, wide);
    return gemm<float>(Trans::kNo, m, wide, k, b.widened(), beta, c, ldc);
  }
  const detail::Bf16Kernels& kern = dpbf16();
  detail::Bf16Problem p;
  p.m = m;
  p.n = n;
  p.kp = ceil_div(k, 2);
  p.b = b.pairs();
  p.beta = beta;
  p.c = c;
  p.ldc = ldc;
  set_tiling(kern, p);
  // A as bfloat16 rows of pairs: a row-major bfloat16 A of even K is that already and is read
  // in place; any other A is rounded (float32) or copied into one buffer per call, all of it
  // (every column tile reads every row).
  std::unique_ptr<std::uint16_t, FreeBits> packed_a;
  if (std::is_same_v<TA, std::uint16_t> && !ta && k % 2 == 0) {
    p.a = reinterpret_cast<const std::uint16_t*>(a);
    p.lda = lda;
  } else {
    p.lda = 2 * p.kp;
    if (m > std::numeric_limits<int64_t>::max() / 4 / p.lda) {
      throw Error(ErrorCode::kResourceExhausted, "gemm_bf16: packed operand too large");
    }
    std::uint16_t* pa = reinterpret_cast<std::uint16_t*>(a_scratch);  // m·kp ≤ m·k floats
    if (pa == nullptr) {
      packed_a.reset(allocate_bits(m * p.lda, "packed operand"));
      pa = packed_a.get();
    }
    core::run_team(team_size(m, double(m) * double(k) * 8), [&](int id, int nt) {
      pack_a_rows(ta, k, a, lda, m * id / nt, m * (id + 1) / nt, pa);
    });
    p.a = pa;
  }
  // Each thread a contiguous range of tiles in column-major order (its part of a packed B
  // stays in its cache across the calls of a sequence).
  const int64_t tiles = p.tiles_m * p.tiles_n;
  core::run_team(team_size(tiles, double(m) * double(n) * double(k)), [&](int id, int nt) {
    const int64_t t0 = tiles * id / nt, t1 = tiles * (id + 1) / nt;
    if (t0 < t1) kern.run_tiles(p, t0, t1);
  });
}

void gemm_bf16_panels(int64_t m, const std::uint16_t* a, int64_t lda, const PackedBBf16& b,
                      int64_t p0, int64_t p1, float beta, float* c, int64_t ldc) {
  if (b.kernel() != Bf16Kernel::kDpbf16) {
    throw Error(ErrorCode::kInternal,
                "gemm_bf16_panels: B was packed for the widened float32 kernel; use "
                "gemm_panels<float> on its widened() panels");
  }
  const detail::Bf16Kernels& kern = dpbf16();
  check_dims({m, lda, ldc, p0, p1 - p0});
  const int64_t n = std::min<int64_t>(p1 * kern.nr, b.n()) - p0 * kern.nr;
  if (m == 0 || n <= 0) return;
  if (b.k() == 0) return scale_c(m, n, beta, c + p0 * kern.nr, ldc);
  detail::Bf16Problem p;
  p.m = m;
  p.n = n;
  p.kp = ceil_div(b.k(), 2);
  p.a = a;
  p.lda = lda;
  p.b = b.pairs() + p0 * p.kp * kern.nr * 2;
  p.beta = beta;
  p.c = c + p0 * kern.nr;
  p.ldc = ldc;
  set_tiling(kern, p);
  kern.run_tiles(p, 0, p.tiles_m * p.tiles_n);
}

template <typename TA, typename TB>
void gemm_bf16(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, const TA* a,
               int64_t lda, const TB* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  check_dims({m, n, k, lda, ldb, ldc});
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  // op(B) is packed once for all row tiles (K·N conversions against M·N·K multiply-adds).
  PackedBBf16 packed;
  packed.pack(trans_b, k, n, b, ldb);
  gemm_bf16(trans_a, m, a, lda, packed, beta, c, ldc);
}

template void PackedBBf16::pack<float>(Trans, int64_t, int64_t, const float*, int64_t);
template void PackedBBf16::pack<std::uint16_t>(Trans, int64_t, int64_t, const std::uint16_t*,
                                               int64_t);
template void PackedBBf16::pack<float>(Trans, int64_t, int64_t, const float*, int64_t, Isa,
                                       Bf16Kernel);
template void PackedBBf16::pack<std::uint16_t>(Trans, int64_t, int64_t, const std::uint16_t*,
                                               int64_t, Isa, Bf16Kernel);
template void round_rows_bf16<float>(int64_t, int64_t, int64_t, const float*, int64_t,
                                     std::uint16_t*);
template void round_rows_bf16<std::uint16_t>(int64_t, int64_t, int64_t, const std::uint16_t*,
                                             int64_t, std::uint16_t*);
template void gemm_bf16<float>(Trans, int64_t, const float*, int64_t, const PackedBBf16&, float,
                               float*, int64_t, float*);
template void gemm_bf16<std::uint16_t>(Trans, int64_t, const std::uint16_t*, int64_t,
                                       const PackedBBf16&, float, float*, int64_t, float*);
template void gemm_bf16<float, float>(Trans, Trans, int64_t, int64_t, int64_t, const float*,
                                      int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_bf16<float, std::uint16_t>(Trans, Trans, int64_t, int64_t, int64_t, const float*,
                                              int64_t, const std::uint16_t*, int64_t, float, float*,
                                              int64_t);
template void gemm_bf16<std::uint16_t, float>(Trans, Trans, int64_t, int64_t, int64_t,
                                              const std::uint16_t*, int64_t, const float*, int64_t,
                                              float, float*, int64_t);
template void gemm_bf16<std::uint16_t, std::uint16_t>(Trans, Trans, int64_t, int64_t, int64_t,
                                                      const std::uint16_t*, int64_t,
                                                      const std::uint16_t*, int64_t, float, float*,
                                                      int64_t);

}  // namespace blockrnn::gemm
