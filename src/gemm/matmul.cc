// blockrnn::matmul (blockrnn/matmul.h): the checks of the views, then the GEMM engine.
#include "blockrnn/matmul.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "core/validate.h"
#include "gemm/gemm.h"

namespace blockrnn {
namespace {

constexpr const char* kOp = "matmul";

// [first, last) byte ranges of two views with elements overlap.
bool overlaps(const TensorView& x, const TensorView& y) {
  const std::size_t nx = static_cast<std::size_t>(x.shape.num_elements()) * dtype_size(x.dtype);
  const std::size_t ny = static_cast<std::size_t>(y.shape.num_elements()) * dtype_size(y.dtype);
  if (nx == 0 || ny == 0) return false;
  const auto* px = static_cast<const char*>(x.data);
  const auto* py = static_cast<const char*>(y.data);
  return std::less<const char*>()(px, py + ny) && std::less<const char*>()(py, px + nx);
}

template <typename T>
void run(const TensorView& a, const TensorView& b, const MutableTensorView& c,
         const MatmulOptions& o) {
  using gemm::Trans;
  const std::int64_t M = c.shape[0], N = c.shape[1];
  const std::int64_t K = o.transpose_a ? a.shape[0] : a.shape[1];
  gemm::gemm<T>(o.transpose_a ? Trans::kYes : Trans::kNo, o.transpose_b ? Trans::kYes : Trans::kNo,
                M, N, K, static_cast<const T*>(a.data), a.shape[1], static_cast<const T*>(b.data),
                b.shape[1], static_cast<T>(o.beta), static_cast<T*>(c.data), N);
}

}  // namespace

void matmul(const TensorView& a, const TensorView& b, const MutableTensorView& c,
            const MatmulOptions& options) {
  const core::Checker check(kOp);
  check.rank("a", a, 2);
  check.rank("b", b, 2);
  check.rank("c", c, 2);
  const std::int64_t M = options.transpose_a ? a.shape[1] : a.shape[0];
  const std::int64_t K = options.transpose_a ? a.shape[0] : a.shape[1];
  const std::int64_t N = options.transpose_b ? b.shape[0] : b.shape[1];
  // K is op(a)'s columns; the messages say where each size came from.
  const std::string k_from = options.transpose_a ? "K = a's rows" : "K = a's columns";
  const std::string b_meaning =
      options.transpose_b ? "N, " + k_from + "; b is transposed" : k_from + ", N";
  check.shape("b", b, options.transpose_b ? Shape{N, K} : Shape{K, N}, b_meaning.c_str());
  check.shape("c", c, Shape{M, N}, "M from a, N from b");
  if (a.dtype != DType::kFloat32 && a.dtype != DType::kFloat64) {
    check.fail(std::string("a must be float32 or float64, got ") + dtype_name(a.dtype));
  }
  for (const auto& [name, view] : {std::pair<const char*, TensorView>{"b", b}, {"c", c}}) {
    if (view.dtype != a.dtype) {
      check.fail(std::string(name) + " must have the dtype of a (" + dtype_name(a.dtype) +
                 "), got " + dtype_name(view.dtype));
    }
  }
  check.storage("a", a);
  check.storage("b", b);
  check.storage("c", c);
  if (overlaps(c, a) || overlaps(c, b)) {
    check.fail(std::string("c must not overlap ") + (overlaps(c, a) ? "a" : "b") +
               " (the product reads them while it writes c)");
  }
  if (a.dtype == DType::kFloat32) {
    run<float>(a, b, c, options);
  } else {
    run<double>(a, b, c, options);
  }
}

}  // namespace blockrnn
