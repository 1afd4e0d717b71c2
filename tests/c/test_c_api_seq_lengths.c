/* seq_lengths through the C API (docs/c_api.md, "Optional inputs"): omitted (num_inputs one
 * shorter), absent (data NULL, rank 0) and lengths all = T give the same bits; dense and strided
 * lengths give the same bits; an example's outputs past its length are zero; a bad length is
 * BLOCKRNN_INVALID_ARGUMENT naming the op, seq_lengths, the index and the value. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "blockrnn/c_api.h"
#include "c_test_util.h"

enum { T = 3, B = 2, I = 2, H = 3, K = I + H };

static float x[T * B * I], h0[B * H], w_ru[K * 2 * H], w_c[K * H], b_ru[2 * H], b_c[H];
static const int64_t s_x[] = {T, B, I}, s_h0[] = {B, H}, s_wru[] = {K, 2 * H}, s_wc[] = {K, H},
                     s_bru[] = {2 * H}, s_bc[] = {H}, s_out[] = {T, B, H}, s_len[] = {B};

/* BlockGRU with `n_in` inputs (the 8th, when given, is `lengths`); h into `h`. */
static blockrnn_status gru(size_t n_in, blockrnn_tensor lengths, float* h) {
  static int64_t seq_len_max = T;
  static float r[T * B * H], u[T * B * H], c[T * B * H];
  blockrnn_tensor in[8];
  blockrnn_tensor out[4];
  in[0] = dense_tensor(BLOCKRNN_INT64, 0, NULL, &seq_len_max);
  in[1] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_x, x);
  in[2] = dense_tensor(BLOCKRNN_FLOAT32, 2, s_h0, h0);
  in[3] = dense_tensor(BLOCKRNN_FLOAT32, 2, s_wru, w_ru);
  in[4] = dense_tensor(BLOCKRNN_FLOAT32, 2, s_wc, w_c);
  in[5] = dense_tensor(BLOCKRNN_FLOAT32, 1, s_bru, b_ru);
  in[6] = dense_tensor(BLOCKRNN_FLOAT32, 1, s_bc, b_c);
  in[7] = lengths;
  out[0] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_out, r);
  out[1] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_out, u);
  out[2] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_out, c);
  out[3] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_out, h);
  return blockrnn_run_op("BlockGRU", in, n_in, NULL, 0, out, 4);
}

int main(void) {
  float h_omitted[T * B * H], h_absent[T * B * H], h_full[T * B * H], h_dense[T * B * H],
      h_strided[T * B * H];
  int64_t full[B] = {T, T}, dense[B] = {1, 3}, strided_buf[2 * B] = {1, 99, 3, 99}, bad[B] = {0, 4};
  const int64_t stride2[] = {2};
  blockrnn_tensor absent = dense_tensor(BLOCKRNN_INT64, 0, NULL, NULL), strided;
  int k;
  for (k = 0; k < T * B * I; ++k) x[k] = (float)sin(k + 1.0);
  for (k = 0; k < B * H; ++k) h0[k] = (float)cos(k + 0.5) * 0.5f;
  for (k = 0; k < K * 2 * H; ++k) w_ru[k] = (float)sin(0.7 * k) * 0.4f;
  for (k = 0; k < K * H; ++k) w_c[k] = (float)cos(0.3 * k) * 0.4f;
  for (k = 0; k < 2 * H; ++k) b_ru[k] = 0.1f * (float)k;
  for (k = 0; k < H; ++k) b_c[k] = -0.1f * (float)k;

  CHECK(blockrnn_op_num_inputs(blockrnn_op_find("BlockGRU")) == 8, "num_inputs");
  CHECK(strcmp(blockrnn_op_input_name(blockrnn_op_find("BlockGRU"), 7), "seq_lengths") == 0,
        "input name");
  CHECK(gru(7, absent, h_omitted) == BLOCKRNN_OK, "omitted");
  CHECK(gru(8, absent, h_absent) == BLOCKRNN_OK, "absent");
  CHECK(gru(8, dense_tensor(BLOCKRNN_INT64, 1, s_len, full), h_full) == BLOCKRNN_OK, "all T");
  CHECK(memcmp(h_omitted, h_absent, sizeof h_absent) == 0, "omitted == absent");
  CHECK(memcmp(h_omitted, h_full, sizeof h_full) == 0, "omitted == lengths all T");

  CHECK(gru(8, dense_tensor(BLOCKRNN_INT64, 1, s_len, dense), h_dense) == BLOCKRNN_OK, "dense");
  strided = dense_tensor(BLOCKRNN_INT64, 1, s_len, strided_buf);
  strided.strides = stride2;
  CHECK(gru(8, strided, h_strided) == BLOCKRNN_OK, "strided");
  CHECK(memcmp(h_dense, h_strided, sizeof h_dense) == 0, "dense == strided");
  for (k = 0; k < H; ++k) {
    /* example 0 has length 1: zero at t = 1, 2; its step 0 and example 1 are unchanged */
    CHECK(h_dense[(1 * B + 0) * H + k] == 0.0f && h_dense[(2 * B + 0) * H + k] == 0.0f,
          "zero past the length");
    CHECK(h_dense[(0 * B + 0) * H + k] == h_omitted[(0 * B + 0) * H + k], "step 0");
    CHECK(h_dense[(2 * B + 1) * H + k] == h_omitted[(2 * B + 1) * H + k], "example 1");
  }

  CHECK(gru(8, dense_tensor(BLOCKRNN_INT64, 1, s_len, bad), h_dense) == BLOCKRNN_INVALID_ARGUMENT,
        "bad length");
  CHECK(strstr(blockrnn_last_error(), "BlockGRU: seq_lengths must be between 0 and 3") != NULL &&
            strstr(blockrnn_last_error(), "seq_lengths[1] = 4") != NULL,
        "message");
  CHECK(gru(6, absent, h_dense) == BLOCKRNN_INVALID_ARGUMENT, "too few inputs");
  CHECK(strstr(blockrnn_last_error(), "expected 7 inputs, got 6") != NULL, "count message");

  return checks_result("c_api_seq_lengths");
}
