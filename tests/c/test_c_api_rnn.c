/* RNN handles through the C API (blockrnn/rnn_c_api.h): a one-layer, one-direction handle gives
 * bit for bit the one-shot sequence ops' results (blockrnn_run_op of BlockLSTMV2 /
 * BlockGRUResetAfter and their grads), over many calls on one handle, with new weights set in
 * between, with a strided x and with a caller's reserve; a two-layer bidirectional handle runs;
 * a second call on a handle while one runs is refused;
 * NULL handles and pointers, bad options and mode-specific misuse are refused by name. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "blockrnn/c_api.h"
#include "blockrnn/rnn_c_api.h"
#include "c_test_util.h"

enum { T = 4, B = 3, I = 2, H = 3, K = I + H, STEPS = 6 };

/* The call fails with `status` and a last error containing `text`. */
static void expect_error(blockrnn_status got, blockrnn_status status, const char* text,
                         const char* what) {
  if (got != status || strstr(blockrnn_last_error(), text) == NULL) {
    fprintf(stderr, "%s: expected %s containing \"%s\", got %s: \"%s\"\n", what,
            blockrnn_status_name(status), text, blockrnn_status_name(got), blockrnn_last_error());
    ++g_failures;
  }
}

static const int64_t s_x[] = {T, B, I}, s_bh[] = {B, H}, s_tbh[] = {T, B, H}, s_lbh[] = {1, B, H},
                     s_w[] = {K, 4 * H}, s_b4[] = {4 * H}, s_h[] = {H}, s_wi[] = {I, 3 * H},
                     s_wh[] = {H, 3 * H}, s_b3[] = {3 * H};

static blockrnn_tensor tensor(int32_t rank, const int64_t* shape, void* data) {
  return dense_tensor(BLOCKRNN_FLOAT32, rank, shape, data);
}
static blockrnn_tensor scalar_i64(int64_t* value) {
  blockrnn_tensor t = tensor(0, NULL, value);
  t.dtype = BLOCKRNN_INT64;
  return t;
}
static blockrnn_tensor absent(void) {
  blockrnn_tensor t;
  memset(&t, 0, sizeof t);
  return t;
}

/* Puts `t` at the position of input (or output) `name` of `op`. */
static void put(const char* op, int output, blockrnn_tensor* list, const char* name,
                blockrnn_tensor t) {
  const int index = blockrnn_op_find(op);
  const int n = output ? blockrnn_op_num_outputs(index) : blockrnn_op_num_inputs(index);
  int k;
  for (k = 0; k < n; ++k) {
    const char* at = output ? blockrnn_op_output_name(index, k) : blockrnn_op_input_name(index, k);
    if (strcmp(at, name) == 0) {
      list[k] = t;
      return;
    }
  }
  fprintf(stderr, "%s has no %s %s\n", op, output ? "output" : "input", name);
  ++g_failures;
}

static void fill(float* p, int n, double phase, double scale) {
  int k;
  for (k = 0; k < n; ++k) p[k] = (float)(sin(0.37 * k + phase) * scale);
}

static int same(const void* a, const void* b, size_t bytes) {
  return memcmp(a, b, bytes) == 0;
}

/* ---- LSTM V2 ------------------------------------------------------------------------------ */

static float x[T * B * I], h0[B * H], c0[B * H], w[K * 4 * H], b4[4 * H], zeros_h[H];
static float acts[7][T * B * H]; /* i cs f o ci co h of the one-shot op */
static float y_grad[T * B * H], zeros_tbh[T * B * H];

static void lstm_one_shot(void) {
  static int64_t seq_len_max = T;
  static const char* outs[] = {"i", "cs", "f", "o", "ci", "co", "h"};
  blockrnn_tensor in[9], out[7];
  blockrnn_attr attrs[1];
  int k;
  put("BlockLSTMV2", 0, in, "seq_len_max", scalar_i64(&seq_len_max));
  put("BlockLSTMV2", 0, in, "x", tensor(3, s_x, x));
  put("BlockLSTMV2", 0, in, "cs_prev", tensor(2, s_bh, c0));
  put("BlockLSTMV2", 0, in, "h_prev", tensor(2, s_bh, h0));
  put("BlockLSTMV2", 0, in, "w", tensor(2, s_w, w));
  put("BlockLSTMV2", 0, in, "wci", tensor(1, s_h, zeros_h));
  put("BlockLSTMV2", 0, in, "wcf", tensor(1, s_h, zeros_h));
  put("BlockLSTMV2", 0, in, "wco", tensor(1, s_h, zeros_h));
  put("BlockLSTMV2", 0, in, "b", tensor(1, s_b4, b4));
  for (k = 0; k < 7; ++k) put("BlockLSTMV2", 1, out, outs[k], tensor(3, s_tbh, acts[k]));
  attrs[0] = blockrnn_attr_bool("use_peephole", 0);
  CHECK(blockrnn_run_op("BlockLSTMV2", in, 9, attrs, 1, out, 7) == BLOCKRNN_OK, "BlockLSTMV2");
}

/* BlockLSTMGradV2 with h_grad = y_grad and cs_grad = 0 (what the handle's backward computes when
 * h_n_grad and c_n_grad are absent). */
static void lstm_one_shot_grad(float* dx, float* dc0, float* dh0, float* dw, float* dpeep,
                               float* db) {
  static int64_t seq_len_max = T;
  static const char* acts_names[] = {"i", "cs", "f", "o", "ci", "co", "h"};
  const char* op = "BlockLSTMGradV2";
  blockrnn_tensor in[18], out[8];
  blockrnn_attr attrs[1];
  int k;
  put(op, 0, in, "seq_len_max", scalar_i64(&seq_len_max));
  put(op, 0, in, "x", tensor(3, s_x, x));
  put(op, 0, in, "cs_prev", tensor(2, s_bh, c0));
  put(op, 0, in, "h_prev", tensor(2, s_bh, h0));
  put(op, 0, in, "w", tensor(2, s_w, w));
  put(op, 0, in, "wci", tensor(1, s_h, zeros_h));
  put(op, 0, in, "wcf", tensor(1, s_h, zeros_h));
  put(op, 0, in, "wco", tensor(1, s_h, zeros_h));
  put(op, 0, in, "b", tensor(1, s_b4, b4));
  for (k = 0; k < 7; ++k) put(op, 0, in, acts_names[k], tensor(3, s_tbh, acts[k]));
  put(op, 0, in, "cs_grad", tensor(3, s_tbh, zeros_tbh));
  put(op, 0, in, "h_grad", tensor(3, s_tbh, y_grad));
  put(op, 1, out, "x_grad", tensor(3, s_x, dx));
  put(op, 1, out, "cs_prev_grad", tensor(2, s_bh, dc0));
  put(op, 1, out, "h_prev_grad", tensor(2, s_bh, dh0));
  put(op, 1, out, "w_grad", tensor(2, s_w, dw));
  put(op, 1, out, "wci_grad", tensor(1, s_h, dpeep));
  put(op, 1, out, "wcf_grad", tensor(1, s_h, dpeep + H));
  put(op, 1, out, "wco_grad", tensor(1, s_h, dpeep + 2 * H));
  put(op, 1, out, "b_grad", tensor(1, s_b4, db));
  attrs[0] = blockrnn_attr_bool("use_peephole", 0);
  CHECK(blockrnn_run_op(op, in, 18, attrs, 1, out, 8) == BLOCKRNN_OK, op);
}

static void test_lstm_v2(void) {
  blockrnn_rnn_options o = blockrnn_rnn_default_options();
  blockrnn_rnn* rnn = NULL;
  blockrnn_tensor params[2];
  blockrnn_rnn_inputs in;
  blockrnn_rnn_outputs out;
  blockrnn_rnn_grad_inputs gin;
  blockrnn_rnn_grad_outputs gout;
  blockrnn_tensor gparams[5];
  static float y[T * B * H], h_n[B * H], c_n[B * H];
  static float dx[T * B * I], dh0[B * H], dc0[B * H], dw[K * 4 * H], dpeep[3 * H], db[4 * H];
  static float rdx[T * B * I], rdh0[B * H], rdc0[B * H], rdw[K * 4 * H], rdpeep[3 * H], rdb[4 * H];
  int32_t per_layer = 0;
  int step;

  o.mode = BLOCKRNN_RNN_LSTM_V2;
  o.input_size = I;
  o.hidden_size = H;
  o.max_time = T;
  o.max_batch = B;
  CHECK(blockrnn_rnn_create(&o, &rnn) == BLOCKRNN_OK, "create LSTM V2");
  if (rnn == NULL) return;
  CHECK(blockrnn_rnn_params_per_layer(rnn, &per_layer) == BLOCKRNN_OK && per_layer == 5,
        "params_per_layer");

  memset(&in, 0, sizeof in);
  in.x = tensor(3, s_x, x);
  in.h0 = tensor(3, s_lbh, h0);
  in.c0 = tensor(3, s_lbh, c0);
  out.y = tensor(3, s_tbh, y);
  out.h_n = tensor(3, s_lbh, h_n);
  out.c_n = tensor(3, s_lbh, c_n);
  memset(&gin, 0, sizeof gin);
  gin.y_grad = tensor(3, s_tbh, y_grad);
  memset(&gout, 0, sizeof gout);
  gout.x_grad = tensor(3, s_x, rdx);
  gout.h0_grad = tensor(3, s_lbh, rdh0);
  gout.c0_grad = tensor(3, s_lbh, rdc0);
  gparams[0] = tensor(2, s_w, rdw);
  gparams[1] = tensor(1, s_b4, rdb);
  gparams[2] = tensor(1, s_h, rdpeep);
  gparams[3] = tensor(1, s_h, rdpeep + H);
  gparams[4] = tensor(1, s_h, rdpeep + 2 * H);
  gout.params = gparams;
  gout.num_params = 5;

  /* Many calls on one handle: new inputs every step, new weights every other step. */
  for (step = 0; step < STEPS; ++step) {
    fill(x, T * B * I, step, 1.0);
    fill(h0, B * H, 1.0 + step, 0.5);
    fill(c0, B * H, 2.0 + step, 0.5);
    fill(y_grad, T * B * H, 3.0 + step, 1.0);
    if (step % 2 == 0) {
      fill(w, K * 4 * H, 4.0 + step, 0.4);
      fill(b4, 4 * H, 5.0 + step, 0.2);
      params[0] = tensor(2, s_w, w);
      params[1] = tensor(1, s_b4, b4);
      CHECK(blockrnn_rnn_set_weights(rnn, 0, 0, params, 2) == BLOCKRNN_OK, "set_weights");
    }
    lstm_one_shot();
    CHECK(blockrnn_rnn_forward(rnn, &in, &out, NULL) == BLOCKRNN_OK, "forward");
    CHECK(same(y, acts[6], sizeof y), "y == BlockLSTMV2's h, bitwise");
    CHECK(same(h_n, acts[6] + (T - 1) * B * H, sizeof h_n), "h_n == h[T-1], bitwise");
    CHECK(same(c_n, acts[1] + (T - 1) * B * H, sizeof c_n), "c_n == cs[T-1], bitwise");

    lstm_one_shot_grad(dx, dc0, dh0, dw, dpeep, db);
    CHECK(blockrnn_rnn_backward(rnn, &in, &gin, &gout, NULL) == BLOCKRNN_OK, "backward");
    CHECK(same(rdx, dx, sizeof dx), "x_grad, bitwise");
    CHECK(same(rdh0, dh0, sizeof dh0), "h0_grad == h_prev_grad, bitwise");
    CHECK(same(rdc0, dc0, sizeof dc0), "c0_grad == cs_prev_grad, bitwise");
    CHECK(same(rdw, dw, sizeof dw), "w_grad, bitwise");
    CHECK(same(rdb, db, sizeof db), "b_grad, bitwise");
    CHECK(same(rdpeep, dpeep, sizeof dpeep), "peephole grads (zeros), bitwise");
  }
  /* An absent x_grad: the input gradient is not computed, the other gradients keep their bits. */
  {
    blockrnn_rnn_grad_outputs gout2 = gout;
    memset(rdh0, 0, sizeof rdh0);
    memset(rdc0, 0, sizeof rdc0);
    memset(rdw, 0, sizeof rdw);
    memset(rdb, 0, sizeof rdb);
    gout2.x_grad = absent();
    CHECK(blockrnn_rnn_backward(rnn, &in, &gin, &gout2, NULL) == BLOCKRNN_OK,
          "backward, no x_grad");
    CHECK(same(rdh0, dh0, sizeof dh0) && same(rdc0, dc0, sizeof dc0) && same(rdw, dw, sizeof dw) &&
              same(rdb, db, sizeof db),
          "backward without x_grad: the other gradients, bitwise");
    /* Absent h0_grad and c0_grad as well (initial states that need no gradient): not computed
     * (their buffers keep what they held), the parameters' gradients keep their bits. */
    memset(rdh0, 0, sizeof rdh0);
    memset(rdc0, 0, sizeof rdc0);
    memset(rdw, 0, sizeof rdw);
    memset(rdb, 0, sizeof rdb);
    gout2.h0_grad = absent();
    gout2.c0_grad = absent();
    CHECK(blockrnn_rnn_backward(rnn, &in, &gin, &gout2, NULL) == BLOCKRNN_OK,
          "backward, no x_grad, h0_grad, c0_grad");
    CHECK(same(rdw, dw, sizeof dw) && same(rdb, db, sizeof db),
          "backward without the inputs' gradients: the parameters' gradients, bitwise");
    {
      static const float zeros[B * H];
      CHECK(same(rdh0, zeros, sizeof zeros) && same(rdc0, zeros, sizeof zeros),
            "absent h0_grad and c0_grad: not written");
    }
  }

  /* A strided x (a transposed [B, T, I] buffer seen as [T, B, I]) and a caller's reserve give the
   * same bits. */
  {
    static float xt[B * T * I], y2[T * B * H], h_n2[B * H], c_n2[B * H], reserve[4096];
    const int64_t strides[] = {I, T * I, 1};
    int64_t elems = 0, s_res[1];
    int t, bb, ii;
    blockrnn_rnn_inputs in2 = in;
    blockrnn_rnn_outputs out2;
    blockrnn_tensor res;
    for (t = 0; t < T; ++t)
      for (bb = 0; bb < B; ++bb)
        for (ii = 0; ii < I; ++ii) xt[(bb * T + t) * I + ii] = x[(t * B + bb) * I + ii];
    in2.x.data = xt;
    in2.x.strides = strides;
    out2.y = tensor(3, s_tbh, y2);
    out2.h_n = tensor(3, s_lbh, h_n2);
    out2.c_n = tensor(3, s_lbh, c_n2);
    CHECK(
        blockrnn_rnn_reserve_elems(rnn, T, B, &elems) == BLOCKRNN_OK && elems > 0 && elems <= 4096,
        "reserve_elems");
    s_res[0] = elems;
    res = tensor(1, s_res, reserve);
    CHECK(blockrnn_rnn_forward(rnn, &in2, &out2, &res) == BLOCKRNN_OK, "forward, strided x");
    CHECK(
        same(y2, acts[6], sizeof y2) && same(h_n2, h_n, sizeof h_n) && same(c_n2, c_n, sizeof c_n),
        "strided x and caller's reserve: same bits");
    CHECK(blockrnn_rnn_backward(rnn, &in2, &gin, &gout, &res) == BLOCKRNN_OK,
          "backward, caller's reserve");
    CHECK(same(rdx, dx, sizeof dx) && same(rdw, dw, sizeof dw), "backward from caller's reserve");

    /* A strided input's dense copy counts against the memory limit, checked before copying. */
    blockrnn_set_memory_limit(64);
    expect_error(blockrnn_rnn_forward(rnn, &in2, &out2, &res), BLOCKRNN_RESOURCE_EXHAUSTED,
                 "blockrnn_rnn_forward: x: a dense copy of the strided tensor [4, 3, 2] takes 96 "
                 "bytes, over the memory limit of 64 bytes",
                 "strided copy over the memory limit");
    blockrnn_set_memory_limit(0);

    /* Errors of the per-call arguments. */
    s_res[0] = elems - 1;
    expect_error(blockrnn_rnn_forward(rnn, &in, &out, &res), BLOCKRNN_INVALID_ARGUMENT, "reserve",
                 "short reserve");
    out2.y.strides = strides; /* not row-major for [T, B, H]: refused */
    expect_error(blockrnn_rnn_forward(rnn, &in, &out2, NULL), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_forward: y: must be dense", "strided output");
  }
  {
    blockrnn_rnn_inputs bad = in;
    static const int64_t s_bad[] = {T, B, I + 1};
    bad.x.shape = s_bad;
    expect_error(blockrnn_rnn_forward(rnn, &bad, &out, NULL), BLOCKRNN_INVALID_ARGUMENT, "x",
                 "x of the wrong shape");
    expect_error(blockrnn_rnn_set_weights(rnn, 1, 0, params, 2), BLOCKRNN_INVALID_ARGUMENT,
                 "(layer, direction)", "layer out of range");
    gout.num_params = 4;
    expect_error(blockrnn_rnn_backward(rnn, &in, &gin, &gout, NULL), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_backward: outputs->num_params must be 5", "num_params");
    gout.num_params = 5;
    gout.params = NULL;
    expect_error(blockrnn_rnn_backward(rnn, &in, &gin, &gout, NULL), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_backward: outputs->params is NULL", "params NULL");
    expect_error(blockrnn_rnn_reserve_elems(rnn, T + 1, B, NULL), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_reserve_elems: elems is NULL", "elems NULL");
    {
      int64_t elems = 0;
      expect_error(blockrnn_rnn_reserve_elems(rnn, T + 1, B, &elems), BLOCKRNN_INVALID_ARGUMENT,
                   "max_time", "T past max_time");
    }
  }
  blockrnn_rnn_free(rnn);
}

/* ---- GRU reset-after ---------------------------------------------------------------------- */

static float w_i[I * 3 * H], w_h[H * 3 * H], b_i[3 * H], b_h[3 * H];
static float gacts[5][T * B * H]; /* r u n hn h */

static void test_gru_reset_after(void) {
  static int64_t seq_len_max = T;
  static const char* names[] = {"r", "u", "n", "hn", "h"};
  const char* op = "BlockGRUResetAfter";
  const char* grad_op = "BlockGRUResetAfterGrad";
  blockrnn_rnn_options o = blockrnn_rnn_default_options();
  blockrnn_rnn* rnn = NULL;
  blockrnn_tensor params[4], gparams[4], one[7], ins[13], outs[6];
  blockrnn_rnn_inputs in;
  blockrnn_rnn_outputs out;
  blockrnn_rnn_grad_inputs gin;
  blockrnn_rnn_grad_outputs gout;
  static float y[T * B * H], h_n[B * H], dx[T * B * I], dh0[B * H], dwi[I * 3 * H], dwh[H * 3 * H],
      dbi[3 * H], dbh[3 * H];
  static float rdx[T * B * I], rdh0[B * H], rdwi[I * 3 * H], rdwh[H * 3 * H], rdbi[3 * H],
      rdbh[3 * H];
  int k;

  fill(x, T * B * I, 0.3, 1.0);
  fill(h0, B * H, 0.6, 0.5);
  fill(w_i, I * 3 * H, 0.9, 0.4);
  fill(w_h, H * 3 * H, 1.2, 0.4);
  fill(b_i, 3 * H, 1.5, 0.2);
  fill(b_h, 3 * H, 1.8, 0.2);
  fill(y_grad, T * B * H, 2.1, 1.0);

  /* The one-shot op and its grad. */
  put(op, 0, one, "seq_len_max", scalar_i64(&seq_len_max));
  put(op, 0, one, "x", tensor(3, s_x, x));
  put(op, 0, one, "h_prev", tensor(2, s_bh, h0));
  put(op, 0, one, "w_i", tensor(2, s_wi, w_i));
  put(op, 0, one, "w_h", tensor(2, s_wh, w_h));
  put(op, 0, one, "b_i", tensor(1, s_b3, b_i));
  put(op, 0, one, "b_h", tensor(1, s_b3, b_h));
  for (k = 0; k < 5; ++k) put(op, 1, outs, names[k], tensor(3, s_tbh, gacts[k]));
  CHECK(blockrnn_run_op(op, one, 7, NULL, 0, outs, 5) == BLOCKRNN_OK, op);
  memcpy(ins, one, sizeof one);
  for (k = 0; k < 5; ++k) put(grad_op, 0, ins, names[k], tensor(3, s_tbh, gacts[k]));
  put(grad_op, 0, ins, "h_grad", tensor(3, s_tbh, y_grad));
  put(grad_op, 1, outs, "x_grad", tensor(3, s_x, dx));
  put(grad_op, 1, outs, "h_prev_grad", tensor(2, s_bh, dh0));
  put(grad_op, 1, outs, "w_i_grad", tensor(2, s_wi, dwi));
  put(grad_op, 1, outs, "w_h_grad", tensor(2, s_wh, dwh));
  put(grad_op, 1, outs, "b_i_grad", tensor(1, s_b3, dbi));
  put(grad_op, 1, outs, "b_h_grad", tensor(1, s_b3, dbh));
  CHECK(blockrnn_run_op(grad_op, ins, 13, NULL, 0, outs, 6) == BLOCKRNN_OK, grad_op);

  o.mode = BLOCKRNN_RNN_GRU_RESET_AFTER;
  o.input_size = I;
  o.hidden_size = H;
  o.max_time = T;
  o.max_batch = B;
  CHECK(blockrnn_rnn_create(&o, &rnn) == BLOCKRNN_OK, "create GRU reset-after");
  if (rnn == NULL) return;
  params[0] = tensor(2, s_wi, w_i);
  params[1] = tensor(2, s_wh, w_h);
  params[2] = tensor(1, s_b3, b_i);
  params[3] = tensor(1, s_b3, b_h);
  memset(&in, 0, sizeof in);
  in.x = tensor(3, s_x, x);
  in.h0 = tensor(3, s_lbh, h0);
  out.y = tensor(3, s_tbh, y);
  out.h_n = tensor(3, s_lbh, h_n);
  out.c_n = absent();
  expect_error(blockrnn_rnn_forward(rnn, &in, &out, NULL), BLOCKRNN_INVALID_ARGUMENT,
               "set_weights has not been called", "forward before set_weights");
  CHECK(blockrnn_rnn_set_weights(rnn, 0, 0, params, 4) == BLOCKRNN_OK, "set_weights GRU");
  CHECK(blockrnn_rnn_forward(rnn, &in, &out, NULL) == BLOCKRNN_OK, "forward GRU");
  CHECK(same(y, gacts[4], sizeof y), "GRU y == h, bitwise");
  CHECK(same(h_n, gacts[4] + (T - 1) * B * H, sizeof h_n), "GRU h_n == h[T-1], bitwise");

  memset(&gin, 0, sizeof gin);
  gin.y_grad = tensor(3, s_tbh, y_grad);
  memset(&gout, 0, sizeof gout);
  gout.x_grad = tensor(3, s_x, rdx);
  gout.h0_grad = tensor(3, s_lbh, rdh0);
  gparams[0] = tensor(2, s_wi, rdwi);
  gparams[1] = tensor(2, s_wh, rdwh);
  gparams[2] = tensor(1, s_b3, rdbi);
  gparams[3] = tensor(1, s_b3, rdbh);
  gout.params = gparams;
  gout.num_params = 4;
  CHECK(blockrnn_rnn_backward(rnn, &in, &gin, &gout, NULL) == BLOCKRNN_OK, "backward GRU");
  CHECK(same(rdx, dx, sizeof dx) && same(rdh0, dh0, sizeof dh0), "GRU x_grad, h0_grad bitwise");
  CHECK(same(rdwi, dwi, sizeof dwi) && same(rdwh, dwh, sizeof dwh) && same(rdbi, dbi, sizeof dbi) &&
            same(rdbh, dbh, sizeof dbh),
        "GRU weight gradients bitwise");

  /* The LSTM-only tensors are refused in a GRU mode rather than ignored. */
  out.c_n = tensor(3, s_lbh, h_n);
  expect_error(blockrnn_rnn_forward(rnn, &in, &out, NULL), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_forward: c_n must be absent", "c_n in GRU mode");
  in.c0 = tensor(3, s_lbh, h0);
  out.c_n = absent();
  expect_error(blockrnn_rnn_forward(rnn, &in, &out, NULL), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_forward: c0 must be absent", "c0 in GRU mode");
  blockrnn_rnn_free(rnn);
}

/* ---- A stack: two layers, bidirectional, float64 ------------------------------------------ */

static void test_stack(void) {
  enum { L = 2, D = 2 };
  static const int64_t s_w0[] = {I, 3 * H}, s_w1[] = {D * H, 3 * H}, s_whh[] = {H, 3 * H},
                       s_b[] = {3 * H}, s_y[] = {T, B, D * H}, s_st[] = {L * D, B, H};
  static double wi0[I * 3 * H], wi1[D * H * 3 * H], whh[H * 3 * H], bias[3 * H], xd[T * B * I],
      y[T * B * D * H], h_n[L * D * B * H];
  blockrnn_rnn_options o = blockrnn_rnn_default_options();
  blockrnn_rnn* rnn = NULL;
  blockrnn_rnn_inputs in;
  blockrnn_rnn_outputs out;
  blockrnn_tensor p[4];
  int l, d, k;
  for (k = 0; k < I * 3 * H; ++k) wi0[k] = sin(0.1 * k);
  for (k = 0; k < D * H * 3 * H; ++k) wi1[k] = cos(0.1 * k) * 0.5;
  for (k = 0; k < H * 3 * H; ++k) whh[k] = sin(0.2 * k) * 0.5;
  for (k = 0; k < 3 * H; ++k) bias[k] = 0.01 * k;
  for (k = 0; k < T * B * I; ++k) xd[k] = cos(0.3 * k);
  o.mode = BLOCKRNN_RNN_GRU_RESET_AFTER;
  o.dtype = BLOCKRNN_FLOAT64;
  o.input_size = I;
  o.hidden_size = H;
  o.num_layers = L;
  o.bidirectional = 1;
  o.max_time = T;
  o.max_batch = B;
  CHECK(blockrnn_rnn_create(&o, &rnn) == BLOCKRNN_OK, "create stack");
  if (rnn == NULL) return;
  for (l = 0; l < L; ++l) {
    for (d = 0; d < D; ++d) {
      p[0] = tensor(2, l == 0 ? s_w0 : s_w1, l == 0 ? (void*)wi0 : (void*)wi1);
      p[1] = tensor(2, s_whh, whh);
      p[2] = tensor(1, s_b, bias);
      p[3] = tensor(1, s_b, bias);
      for (k = 0; k < 4; ++k) {
        blockrnn_shape shape;
        p[k].dtype = BLOCKRNN_FLOAT64;
        CHECK(blockrnn_rnn_param_shape(rnn, l, k, &shape) == BLOCKRNN_OK &&
                  shape.rank == p[k].rank && shape.dims[0] == p[k].shape[0] &&
                  (shape.rank == 1 || shape.dims[1] == p[k].shape[1]),
              "param_shape is what set_weights takes");
      }
      CHECK(blockrnn_rnn_set_weights(rnn, l, d, p, 4) == BLOCKRNN_OK, "set_weights stack");
    }
  }
  memset(&in, 0, sizeof in);
  in.x = tensor(3, s_x, xd);
  in.x.dtype = BLOCKRNN_FLOAT64;
  out.y = tensor(3, s_y, y);
  out.y.dtype = BLOCKRNN_FLOAT64;
  out.h_n = tensor(3, s_st, h_n);
  out.h_n.dtype = BLOCKRNN_FLOAT64;
  out.c_n = absent();
  CHECK(blockrnn_rnn_forward(rnn, &in, &out, NULL) == BLOCKRNN_OK, "forward stack");
  /* The top layer's forward direction ends at y[T-1] and its reverse direction at y[0]. */
  CHECK(memcmp(h_n + 2 * B * H, y + (T - 1) * B * D * H, H * sizeof(double)) == 0,
        "stack h_n[top, forward] == y[T-1, 0, :H]");
  CHECK(memcmp(h_n + 3 * B * H, y + H, H * sizeof(double)) == 0,
        "stack h_n[top, reverse] == y[0, 0, H:]");
  {
    blockrnn_shape shape;
    expect_error(blockrnn_rnn_param_shape(rnn, 0, 4, &shape), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_param_shape: k must be in [0, 4)", "param_shape k");
    expect_error(blockrnn_rnn_param_shape(rnn, 2, 0, &shape), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_param_shape: layer must be in [0, 2)", "param_shape layer");
  }
  blockrnn_rnn_free(rnn);
}

/* ---- One call at a time per handle ---------------------------------------------------------
 * A forward runs on a second thread and is held inside its cancel check (asked between steps);
 * meanwhile a forward on the same handle from this thread is refused, then the first finishes. */

enum { LONG_T = 1 << 17 };
static atomic_int g_inside, g_tried, g_finished;

static int hold_in_check(void* user) {
  (void)user;
  atomic_store(&g_inside, 1);
  while (!atomic_load(&g_tried)) {
  }
  return 0;
}

struct job {
  blockrnn_rnn* rnn;
  blockrnn_rnn_inputs in;
  blockrnn_rnn_outputs out;
  blockrnn_status status;
};

static int run_forward(void* arg) {
  struct job* j = (struct job*)arg;
  blockrnn_set_cancel_check(hold_in_check, NULL);
  j->status = blockrnn_rnn_forward(j->rnn, &j->in, &j->out, NULL);
  blockrnn_set_cancel_check(NULL, NULL);
  atomic_store(&g_finished, 1);
  atomic_store(&g_inside, 1); /* in case the check was never asked */
  return 0;
}

static void test_one_call_at_a_time(void) {
  static const int64_t s_lx[] = {LONG_T, 1, 1}, s_ly[] = {LONG_T, 1, 1}, s_st[] = {1, 1, 1},
                       s_wi1[] = {1, 3}, s_b1[] = {3};
  static float lx[LONG_T], ly[LONG_T], hn[1], wi1[3], wh1[3], bi1[3], bh1[3];
  blockrnn_rnn_options o = blockrnn_rnn_default_options();
  blockrnn_tensor p[4];
  struct job j;
  thrd_t worker;
  blockrnn_status second;
  o.mode = BLOCKRNN_RNN_GRU_RESET_AFTER;
  o.input_size = 1;
  o.hidden_size = 1;
  o.max_time = LONG_T;
  o.max_batch = 1;
  memset(&j, 0, sizeof j);
  CHECK(blockrnn_rnn_create(&o, &j.rnn) == BLOCKRNN_OK, "create long GRU");
  if (j.rnn == NULL) return;
  p[0] = tensor(2, s_wi1, wi1);
  p[1] = tensor(2, s_wi1, wh1);
  p[2] = tensor(1, s_b1, bi1);
  p[3] = tensor(1, s_b1, bh1);
  CHECK(blockrnn_rnn_set_weights(j.rnn, 0, 0, p, 4) == BLOCKRNN_OK, "set_weights long GRU");
  j.in.x = tensor(3, s_lx, lx);
  j.out.y = tensor(3, s_ly, ly);
  j.out.h_n = tensor(3, s_st, hn);
  CHECK(thrd_create(&worker, run_forward, &j) == thrd_success, "thrd_create");
  while (!atomic_load(&g_inside)) {
  }
  second = blockrnn_rnn_forward(j.rnn, &j.in, &j.out, NULL);
  CHECK(!atomic_load(&g_finished), "the first forward was held while the second was tried");
  atomic_store(&g_tried, 1);
  thrd_join(worker, NULL);
  expect_error(second, BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_forward: the handle is running another call", "second call");
  CHECK(j.status == BLOCKRNN_OK, "the first forward finished");
  CHECK(blockrnn_rnn_forward(j.rnn, &j.in, &j.out, NULL) == BLOCKRNN_OK,
        "the handle is free again");
  blockrnn_rnn_free(j.rnn);
}

/* ---- Errors at creation and NULL pointers ------------------------------------------------- */

static void test_errors(void) {
  blockrnn_rnn_options o = blockrnn_rnn_default_options();
  blockrnn_rnn* rnn = NULL;
  blockrnn_rnn_inputs in;
  blockrnn_rnn_outputs out;
  int32_t n = 0;
  memset(&in, 0, sizeof in);
  memset(&out, 0, sizeof out);
  o.input_size = I;
  o.hidden_size = H;
  expect_error(blockrnn_rnn_create(NULL, &rnn), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_create: options is NULL", "options NULL");
  expect_error(blockrnn_rnn_create(&o, NULL), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_create: out is NULL", "out NULL");
  o.mode = 7;
  expect_error(blockrnn_rnn_create(&o, &rnn), BLOCKRNN_INVALID_ARGUMENT,
               "options->mode 7 is not a blockrnn_rnn_mode", "bad mode");
  o.mode = BLOCKRNN_RNN_LSTM;
  o.num_layers = 0;
  expect_error(blockrnn_rnn_create(&o, &rnn), BLOCKRNN_INVALID_ARGUMENT, "num_layers",
               "num_layers 0");
  o.num_layers = 1;
  o.hidden_size = -1;
  expect_error(blockrnn_rnn_create(&o, &rnn), BLOCKRNN_INVALID_ARGUMENT, "hidden_size",
               "hidden_size -1");
  o.hidden_size = H;
  o.dtype = 9;
  expect_error(blockrnn_rnn_create(&o, &rnn), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_create: options->dtype: dtype 9", "dtype 9");
  CHECK(rnn == NULL, "*out untouched on failure");
  expect_error(blockrnn_rnn_forward(NULL, &in, &out, NULL), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_forward: rnn is NULL", "forward NULL rnn");
  expect_error(blockrnn_rnn_backward(NULL, &in, NULL, NULL, NULL), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_backward: rnn is NULL", "backward NULL rnn");
  expect_error(blockrnn_rnn_set_weights(NULL, 0, 0, NULL, 0), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_set_weights: rnn is NULL", "set_weights NULL rnn");
  expect_error(blockrnn_rnn_params_per_layer(NULL, &n), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_params_per_layer: rnn is NULL", "params_per_layer NULL rnn");
  o.dtype = BLOCKRNN_FLOAT32;
  CHECK(blockrnn_rnn_create(&o, &rnn) == BLOCKRNN_OK, "create LSTM");
  if (rnn != NULL) {
    expect_error(blockrnn_rnn_forward(rnn, NULL, &out, NULL), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_forward: inputs is NULL", "inputs NULL");
    expect_error(blockrnn_rnn_forward(rnn, &in, NULL, NULL), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_forward: outputs is NULL", "outputs NULL");
    expect_error(blockrnn_rnn_set_weights(rnn, 0, 0, NULL, 2), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_rnn_set_weights: params is NULL", "params NULL");
    expect_error(blockrnn_rnn_set_weights(rnn, 0, 0, NULL, 0), BLOCKRNN_INVALID_ARGUMENT,
                 "parameters", "no params");
    CHECK(blockrnn_rnn_params_per_layer(rnn, &n) == BLOCKRNN_OK, "params_per_layer");
    CHECK(strcmp(blockrnn_last_error(), "") == 0, "success clears the last error");
  }
  blockrnn_rnn_free(rnn);
  blockrnn_rnn_free(NULL);
}

/* BLOCKRNN_PARAMS_TORCH: an LSTM V2 handle given torch.nn's tensors (weight_ih [4H, I],
 * weight_hh [4H, H], bias_ih, bias_hh) computes what the BLOCKRNN_PARAMS_OPS handle computes
 * with w = [weight_ihᵀ; weight_hhᵀ] and b = bias_ih + bias_hh, bit for bit, and writes the
 * weight gradients transposed (the bias gradient twice); an absent gradient is not written;
 * param_shape gives torch.nn's shapes; a bad layout or mode is refused by name. */
static void test_torch_layout(void) {
  enum { G = 4 * H };
  static const int64_t s_wih[] = {G, I}, s_whh[] = {G, H};
  static float w_ih[G * I], w_hh[G * H], b_ih[G], b_hh[G], w_ops[K * G], b_ops[G];
  static float y[2][T * B * H], h_n[2][B * H], c_n[2][B * H], dx[2][T * B * I];
  static float dw_ops[K * G], db_ops[G], dpeep[3 * H];
  static float dw_ih[G * I], dw_hh[G * H], db_ih[G], db_hh[G];
  blockrnn_rnn_options o = blockrnn_rnn_default_options();
  blockrnn_rnn* rnn[2] = {NULL, NULL};
  blockrnn_rnn* refused = NULL;
  blockrnn_tensor params[4], gparams[7];
  blockrnn_rnn_inputs in;
  blockrnn_rnn_outputs out;
  blockrnn_rnn_grad_inputs gin;
  blockrnn_rnn_grad_outputs gout;
  blockrnn_shape shape;
  int32_t per_layer = 0;
  int g, i, k;

  o.mode = BLOCKRNN_RNN_LSTM_V2;
  o.input_size = I;
  o.hidden_size = H;
  o.max_time = T;
  o.max_batch = B;
  CHECK(blockrnn_rnn_create(&o, &rnn[0]) == BLOCKRNN_OK, "create (ops layout)");
  CHECK(blockrnn_rnn_create_with_layout(&o, BLOCKRNN_PARAMS_TORCH, &rnn[1]) == BLOCKRNN_OK,
        "create (torch layout)");
  if (rnn[0] == NULL || rnn[1] == NULL) return;
  CHECK(blockrnn_rnn_params_per_layer(rnn[1], &per_layer) == BLOCKRNN_OK && per_layer == 7,
        "params_per_layer (torch layout)");
  CHECK(blockrnn_rnn_param_shape(rnn[1], 0, 0, &shape) == BLOCKRNN_OK && shape.rank == 2 &&
            shape.dims[0] == G && shape.dims[1] == I,
        "param_shape: weight_ih [4H, I]");
  CHECK(blockrnn_rnn_param_shape(rnn[1], 0, 3, &shape) == BLOCKRNN_OK && shape.rank == 1 &&
            shape.dims[0] == G,
        "param_shape: bias_hh [4H]");

  fill(w_ih, G * I, 7.0, 0.4);
  fill(w_hh, G * H, 8.0, 0.4);
  fill(b_ih, G, 9.0, 0.2);
  fill(b_hh, G, 10.0, 0.2);
  for (g = 0; g < G; ++g) {
    for (i = 0; i < K; ++i) w_ops[i * G + g] = i < I ? w_ih[g * I + i] : w_hh[g * H + i - I];
    b_ops[g] = b_ih[g] + b_hh[g];
  }
  params[0] = tensor(2, s_w, w_ops);
  params[1] = tensor(1, s_b4, b_ops);
  CHECK(blockrnn_rnn_set_weights(rnn[0], 0, 0, params, 2) == BLOCKRNN_OK, "set_weights (ops)");
  params[0] = tensor(2, s_wih, w_ih);
  params[1] = tensor(2, s_whh, w_hh);
  params[2] = tensor(1, s_b4, b_ih);
  params[3] = tensor(1, s_b4, b_hh);
  CHECK(blockrnn_rnn_set_weights(rnn[1], 0, 0, params, 4) == BLOCKRNN_OK, "set_weights (torch)");

  fill(x, T * B * I, 11.0, 1.0);
  fill(h0, B * H, 12.0, 0.5);
  fill(c0, B * H, 13.0, 0.5);
  fill(y_grad, T * B * H, 14.0, 1.0);
  memset(&in, 0, sizeof in);
  in.x = tensor(3, s_x, x);
  in.h0 = tensor(3, s_lbh, h0);
  in.c0 = tensor(3, s_lbh, c0);
  memset(&gin, 0, sizeof gin);
  gin.y_grad = tensor(3, s_tbh, y_grad);
  for (k = 0; k < 2; ++k) {
    out.y = tensor(3, s_tbh, y[k]);
    out.h_n = tensor(3, s_lbh, h_n[k]);
    out.c_n = tensor(3, s_lbh, c_n[k]);
    CHECK(blockrnn_rnn_forward(rnn[k], &in, &out, NULL) == BLOCKRNN_OK, "forward");
    memset(&gout, 0, sizeof gout);
    gout.x_grad = tensor(3, s_x, dx[k]);
    if (k == 0) {
      gparams[0] = tensor(2, s_w, dw_ops);
      gparams[1] = tensor(1, s_b4, db_ops);
      gparams[2] = tensor(1, s_h, dpeep);
      gparams[3] = tensor(1, s_h, dpeep + H);
      gparams[4] = tensor(1, s_h, dpeep + 2 * H);
    } else {
      gparams[0] = tensor(2, s_wih, dw_ih);
      gparams[1] = tensor(2, s_whh, dw_hh);
      gparams[2] = tensor(1, s_b4, db_ih);
      gparams[3] = tensor(1, s_b4, db_hh);
      gparams[4] = gparams[5] = gparams[6] = absent(); /* no peepholes: not asked for */
    }
    gout.params = gparams;
    gout.num_params = k == 0 ? 5 : 7;
    CHECK(blockrnn_rnn_backward(rnn[k], &in, &gin, &gout, NULL) == BLOCKRNN_OK, "backward");
  }
  CHECK(same(y[0], y[1], sizeof y[0]) && same(h_n[0], h_n[1], sizeof h_n[0]) &&
            same(c_n[0], c_n[1], sizeof c_n[0]),
        "torch layout: the forward's bits");
  CHECK(same(dx[0], dx[1], sizeof dx[0]), "torch layout: x_grad's bits");
  for (g = 0; g < G; ++g) {
    int ok = db_ih[g] == db_ops[g] && db_hh[g] == db_ops[g];
    for (i = 0; i < K; ++i) {
      const float got = i < I ? dw_ih[g * I + i] : dw_hh[g * H + i - I];
      ok = ok && same(&got, &dw_ops[i * G + g], sizeof got);
    }
    CHECK(ok, "torch layout: the weight gradients transposed, the bias gradient twice");
  }
  /* A backward without the bias gradients leaves those buffers alone. */
  memset(db_ih, 0x7f, sizeof db_ih);
  gparams[2] = absent();
  CHECK(blockrnn_rnn_backward(rnn[1], &in, &gin, &gout, NULL) == BLOCKRNN_OK,
        "backward without bias_ih's gradient");
  CHECK(db_ih[0] > 1e38f, "absent gradient: not written");
  CHECK(db_hh[G - 1] == db_ops[G - 1], "absent gradient: the others as before");

  expect_error(blockrnn_rnn_create_with_layout(&o, 7, &refused), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_rnn_create_with_layout: param_layout must be BLOCKRNN_PARAMS_OPS (0) or "
               "BLOCKRNN_PARAMS_TORCH (1), got 7",
               "bad param_layout");
  o.mode = BLOCKRNN_RNN_GRU;
  expect_error(blockrnn_rnn_create_with_layout(&o, BLOCKRNN_PARAMS_TORCH, &refused),
               BLOCKRNN_INVALID_ARGUMENT,
               "BLOCKRNN_PARAMS_TORCH (torch.nn's parameters) is for the torch.nn variants",
               "torch layout for TensorFlow's GRU");
  CHECK(refused == NULL, "refused: *out untouched");
  params[1] = tensor(2, s_w, w_ops); /* the ops' w where weight_hh belongs */
  expect_error(blockrnn_rnn_set_weights(rnn[1], 0, 0, params, 4), BLOCKRNN_INVALID_ARGUMENT,
               "RNN.set_weights: weight_hh_l0 must have shape [12, 3]", "ops w as weight_hh");
  blockrnn_rnn_free(rnn[0]);
  blockrnn_rnn_free(rnn[1]);
}

int main(void) {
  test_lstm_v2();
  test_torch_layout();
  test_gru_reset_after();
  test_stack();
  test_one_call_at_a_time();
  test_errors();
  return checks_result("c_api_rnn");
}
