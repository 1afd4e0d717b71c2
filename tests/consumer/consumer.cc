// Uses an installed blockrnn through its C++ API: one GRUBlockCell step and its gradient, the
// generic by-name interface, an error, and the version from both places (the umbrella header
// brings BLOCKRNN_VERSION_STRING).
#include <blockrnn/blockrnn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#ifdef _OPENMP
#error "blockrnn leaked -fopenmp into its consumer's compile flags"
#endif

int main() {
  if (std::strcmp(blockrnn::version(), BLOCKRNN_VERSION_STRING) != 0) {
    std::fprintf(stderr, "library %s, header %s\n", blockrnn::version(), BLOCKRNN_VERSION_STRING);
    return 1;
  }
  const int B = 2, I = 3, H = 4;
  std::vector<float> x(B * I, 0.5f), h_prev(B * H, -0.25f), w_ru((I + H) * 2 * H, 0.1f),
      w_c((I + H) * H, -0.1f), b_ru(2 * H, 0.f), b_c(H, 0.f), d_h(B * H, 1.f);
  // The inputs in declaration order: x, h_prev, w_ru, w_c, b_ru, b_c.
  const blockrnn::GRUBlockCellInputs in{
      {x.data(), {B, I}},       {h_prev.data(), {B, H}}, {w_ru.data(), {I + H, 2 * H}},
      {w_c.data(), {I + H, H}}, {b_ru.data(), {2 * H}},  {b_c.data(), {H}}};
  const blockrnn::GRUBlockCellResult fwd = blockrnn::gru_block_cell(in);
  // h = u * (h_prev - c) + c, element by element.
  const float* r = fwd.r.data_as<float>();
  const float* u = fwd.u.data_as<float>();
  const float* c = fwd.c.data_as<float>();
  const float* h = fwd.h.data_as<float>();
  for (int k = 0; k < B * H; ++k) {
    if (std::fabs(h[k] - (u[k] * (h_prev[k] - c[k]) + c[k])) > 1e-6f || r[k] <= 0.f) {
      std::fprintf(stderr, "h[%d] = %g is not u*(h_prev-c)+c\n", k, h[k]);
      return 1;
    }
  }
  // The gradient's inputs: the forward's, its outputs r, u, c, and d_h.
  blockrnn::GRUBlockCellGradInputs g{in.x,   in.h_prev, in.w_ru, in.w_c, in.b_ru,
                                     in.b_c, fwd.r,     fwd.u,   fwd.c,  {d_h.data(), {B, H}}};
  const blockrnn::GRUBlockCellGradResult grad = blockrnn::gru_block_cell_grad(g);
  // d_h_prev = d_h * u + (terms through the gates): at least the shape and finiteness.
  if (grad.d_x.shape() != blockrnn::Shape{B, I} || !std::isfinite(grad.d_x.data_as<float>()[0])) {
    std::fprintf(stderr, "bad d_x\n");
    return 1;
  }
  const std::vector<blockrnn::Tensor> by_name = blockrnn::run_op(
      "GRUBlockCell",
      std::vector<blockrnn::TensorView>{in.x, in.h_prev, in.w_ru, in.w_c, in.b_ru, in.b_c});
  if (std::memcmp(by_name[3].data(), fwd.h.data(), fwd.h.num_bytes()) != 0) {
    std::fprintf(stderr, "run_op differs from gru_block_cell\n");
    return 1;
  }
  try {
    g.d_h = {d_h.data(), {B, H - 1}};
    blockrnn::gru_block_cell_grad(g);
    std::fprintf(stderr, "no error for a wrong d_h\n");
    return 1;
  } catch (const blockrnn::Error& e) {
    if (e.code() != blockrnn::ErrorCode::kInvalidArgument || !std::strstr(e.what(), "d_h")) {
      std::fprintf(stderr, "unexpected error: %s\n", e.what());
      return 1;
    }
    std::printf("error as expected: %s\n", e.what());
  }
  std::printf("consumer_cxx: blockrnn %s ok (%zu ops)\n", blockrnn::version(),
              blockrnn::list_ops().size());
  return 0;
}
