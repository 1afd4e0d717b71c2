/* Hostile calls through the C API (docs/c_api.md): strides whose byte offsets overflow are
 * refused before anything is read (a strided seq_lengths included), negative dimensions name the
 * op and the argument, negative strides are a valid layout, an output on top of an input is
 * refused even when the call has no work, blockrnn_prepare_call counts the outputs against the
 * memory limit, and blockrnn_last_error() survives the calls that return no status. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockrnn/c_api.h"
#include "c_test_util.h"

/* The status is `want` and the last error contains every one of `needles` (NULL-terminated). */
static void expect_error(blockrnn_status got, blockrnn_status want, const char* what,
                         const char* const* needles) {
  const char* message = blockrnn_last_error();
  if (got != want) {
    fprintf(stderr, "%s: status %s, expected %s (%s)\n", what, blockrnn_status_name(got),
            blockrnn_status_name(want), message);
    ++g_failures;
    return;
  }
  for (; *needles != NULL; ++needles) {
    if (strstr(message, *needles) == NULL) {
      fprintf(stderr, "%s: message '%s' lacks '%s'\n", what, message, *needles);
      ++g_failures;
    }
  }
}

static blockrnn_tensor tensor(int32_t dtype, int32_t rank, const int64_t* shape,
                              const int64_t* strides, void* data) {
  blockrnn_tensor t = dense_tensor(dtype, rank, shape, data);
  t.strides = strides;
  return t;
}

/* ---- An op's inputs, by name, from the sizes T, B, I, H ---------------------------------- */

typedef struct Call {
  int index; /* the op's */
  const char* op;
  size_t num_inputs, num_outputs;
  int64_t seq_len_max;
  blockrnn_attr attrs[1];
  size_t num_attrs; /* use_peephole = 0 for the LSTM grads, which require it */
  int64_t in_shapes[20][3], out_shapes[8][BLOCKRNN_MAX_RANK];
  blockrnn_tensor in[20], out[8];
  float* in_data[20];
  float* out_data[8];
  size_t in_count[20], out_count[8];
} Call;

static int is_sequence(const char* op) {
  return strncmp(op, "Block", 5) == 0;
}

/* The shape of input `name` of op `op` (rank returned; the LSTM and GRU ops only). */
static int input_shape(const char* op, const char* name, int64_t T, int64_t B, int64_t I, int64_t H,
                       int64_t* shape) {
  const int seq = is_sequence(op);
  const int64_t K = I + H;
  if (strcmp(name, "x") == 0) {
    if (seq) {
      shape[0] = T, shape[1] = B, shape[2] = I;
      return 3;
    }
    shape[0] = B, shape[1] = I;
    return 2;
  }
  if (strcmp(name, "cs_prev") == 0 || strcmp(name, "h_prev") == 0 || strcmp(name, "d_h") == 0) {
    shape[0] = B, shape[1] = H;
    return 2;
  }
  if (strcmp(name, "w") == 0 || strcmp(name, "w_ru") == 0 || strcmp(name, "w_c") == 0) {
    shape[0] = K;
    shape[1] = (name[1] == '\0' ? 4 : name[2] == 'r' ? 2 : 1) * H;
    return 2;
  }
  if (strcmp(name, "b") == 0 || strcmp(name, "b_ru") == 0) {
    shape[0] = (name[1] == '\0' ? 4 : 2) * H;
    return 1;
  }
  if (strcmp(name, "wci") == 0 || strcmp(name, "wcf") == 0 || strcmp(name, "wco") == 0 ||
      strcmp(name, "b_c") == 0) {
    shape[0] = H;
    return 1;
  }
  if (seq) { /* the per-step inputs */
    shape[0] = T, shape[1] = B, shape[2] = H;
    return 3;
  }
  shape[0] = B, shape[1] = H;
  return 2;
}

static size_t count_of(int rank, const int64_t* shape) {
  size_t n = 1;
  int d;
  for (d = 0; d < rank; ++d) n *= (size_t)shape[d];
  return n;
}

/* Builds the op's required inputs (values k * 0.01) and its outputs (shapes from
 * blockrnn_infer_outputs). Returns 0 when validation refuses the inputs. */
static int make_call(Call* c, const char* op, int64_t T, int64_t B, int64_t I, int64_t H) {
  int32_t dtype = 0;
  blockrnn_shape shapes[8];
  size_t k, e;
  memset(c, 0, sizeof *c);
  c->op = op;
  c->index = blockrnn_op_find(op);
  c->seq_len_max = T;
  c->attrs[0] = blockrnn_attr_bool("use_peephole", 0);
  c->num_attrs = strstr(op, "LSTM") != NULL && strstr(op, "Grad") != NULL ? 1u : 0u;
  c->num_inputs = (size_t)blockrnn_op_num_inputs(c->index) - (is_sequence(op) ? 1u : 0u);
  c->num_outputs = (size_t)blockrnn_op_num_outputs(c->index);
  for (k = 0; k < c->num_inputs; ++k) {
    const char* name = blockrnn_op_input_name(c->index, (int)k);
    if (strcmp(name, "seq_len_max") == 0) {
      c->in[k] = tensor(BLOCKRNN_INT64, 0, NULL, NULL, &c->seq_len_max);
      continue;
    }
    const int rank = input_shape(op, name, T, B, I, H, c->in_shapes[k]);
    c->in_count[k] = count_of(rank, c->in_shapes[k]);
    c->in_data[k] = malloc((c->in_count[k] + 1) * sizeof(float));
    for (e = 0; e < c->in_count[k]; ++e) c->in_data[k][e] = 0.01f * (float)(e % 97);
    c->in[k] = tensor(BLOCKRNN_FLOAT32, rank, c->in_shapes[k], NULL, c->in_data[k]);
  }
  if (blockrnn_infer_outputs(op, c->in, c->num_inputs, c->attrs, c->num_attrs, &dtype, shapes,
                             c->num_outputs) != BLOCKRNN_OK) {
    return 0;
  }
  for (k = 0; k < c->num_outputs; ++k) {
    memcpy(c->out_shapes[k], shapes[k].dims, sizeof shapes[k].dims);
    c->out_count[k] = count_of(shapes[k].rank, shapes[k].dims);
    c->out_data[k] = malloc((c->out_count[k] + 1) * sizeof(float));
    c->out[k] = tensor(BLOCKRNN_FLOAT32, shapes[k].rank, c->out_shapes[k], NULL, c->out_data[k]);
  }
  return 1;
}

static void free_call(Call* c) {
  size_t k;
  for (k = 0; k < c->num_inputs; ++k) free(c->in_data[k]);
  for (k = 0; k < c->num_outputs; ++k) free(c->out_data[k]);
}

static blockrnn_status run(Call* c) {
  return blockrnn_run_op(c->op, c->in, c->num_inputs, c->attrs, c->num_attrs, c->out,
                         c->num_outputs);
}

/* ---- Strides ----------------------------------------------------------------------------- */

/* BlockGRU over T = 1 with x [1, 2, 3] given by `x`; h into `h` [1, 2, 2]. */
static blockrnn_status gru(blockrnn_tensor x, blockrnn_tensor lengths, size_t n_in, float* h) {
  static int64_t seq_len_max = 1;
  static const int64_t s_h0[] = {2, 2}, s_wru[] = {5, 4}, s_wc[] = {5, 2}, s_bru[] = {4},
                       s_bc[] = {2}, s_out[] = {1, 2, 2};
  static float h0[4], w_ru[20], w_c[10], b_ru[4], b_c[2], r[4], u[4], c[4];
  blockrnn_tensor in[8], out[4];
  int k;
  for (k = 0; k < 20; ++k) w_ru[k] = 0.05f * (float)k - 0.4f;
  for (k = 0; k < 10; ++k) w_c[k] = 0.3f - 0.07f * (float)k;
  in[0] = tensor(BLOCKRNN_INT64, 0, NULL, NULL, &seq_len_max);
  in[1] = x;
  in[2] = tensor(BLOCKRNN_FLOAT32, 2, s_h0, NULL, h0);
  in[3] = tensor(BLOCKRNN_FLOAT32, 2, s_wru, NULL, w_ru);
  in[4] = tensor(BLOCKRNN_FLOAT32, 2, s_wc, NULL, w_c);
  in[5] = tensor(BLOCKRNN_FLOAT32, 1, s_bru, NULL, b_ru);
  in[6] = tensor(BLOCKRNN_FLOAT32, 1, s_bc, NULL, b_c);
  in[7] = lengths;
  out[0] = tensor(BLOCKRNN_FLOAT32, 3, s_out, NULL, r);
  out[1] = tensor(BLOCKRNN_FLOAT32, 3, s_out, NULL, u);
  out[2] = tensor(BLOCKRNN_FLOAT32, 3, s_out, NULL, c);
  out[3] = tensor(BLOCKRNN_FLOAT32, 3, s_out, NULL, h);
  return blockrnn_run_op("BlockGRU", in, n_in, NULL, 0, out, 4);
}

static void test_strides(void) {
  /* x [1, 2, 3]: rows {1, 2, 3} and {4, 5, 6}. */
  float rows[6] = {1, 2, 3, 4, 5, 6}, reversed[6] = {4, 5, 6, 1, 2, 3}, h_dense[4], h[4];
  const int64_t s_x[] = {1, 2, 3}, s_neg[] = {1, -2, 3};
  const int64_t huge[] = {1, (int64_t)1 << 62, 1}, max[] = {1, INT64_MAX, 1},
                min[] = {1, INT64_MIN, 1}, back[] = {6, -3, 1},
                far_back[] = {1, -((int64_t)1 << 61), 1};
  const blockrnn_tensor none = tensor(BLOCKRNN_INT64, 0, NULL, NULL, NULL);
  const char* const overflow[] = {"BlockGRU: input 1 (x): strides", "overflow", NULL};
  CHECK(gru(tensor(BLOCKRNN_FLOAT32, 3, s_x, NULL, rows), none, 7, h_dense) == BLOCKRNN_OK,
        "dense x");

  /* Byte offsets that overflow int64: with 2^62 the second row would wrap onto the first. */
  expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_x, huge, rows), none, 7, h),
               BLOCKRNN_INVALID_ARGUMENT, "x strides {1, 2^62, 1}", overflow);
  expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_x, max, rows), none, 7, h),
               BLOCKRNN_INVALID_ARGUMENT, "x strides {1, INT64_MAX, 1}", overflow);
  expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_x, min, rows), none, 7, h),
               BLOCKRNN_INVALID_ARGUMENT, "x strides {1, INT64_MIN, 1}", overflow);
  /* -2^61 elements of 4 bytes: 2^63 bytes before data, past the start of the address space. */
  expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_x, far_back, rows), none, 7, h),
               BLOCKRNN_INVALID_ARGUMENT, "x strides {1, -2^61, 1}", overflow);

  /* A negative stride is a valid layout: data points at element (0, 0, 0), the last row of
   * `reversed`; the result is the dense one, bit for bit. */
  CHECK(gru(tensor(BLOCKRNN_FLOAT32, 3, s_x, back, reversed + 3), none, 7, h) == BLOCKRNN_OK,
        "negative stride");
  CHECK(memcmp(h, h_dense, sizeof h) == 0, "negative stride gives the dense result");

  /* A negative dimension names the op and the argument, dense or strided. */
  {
    const char* const negative[] = {
        "BlockGRU: input 1 (x): shape [1, -2, 3] has a negative "
        "dimension (dimension 1 is -2)",
        NULL};
    const int64_t strides[] = {6, 3, 1};
    expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_neg, NULL, rows), none, 7, h),
                 BLOCKRNN_INVALID_ARGUMENT, "negative dim, dense", negative);
    expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_neg, strides, rows), none, 7, h),
                 BLOCKRNN_INVALID_ARGUMENT, "negative dim, strided", negative);
  }
  /* An element count that overflows int64 names them too. */
  {
    const int64_t s_big[] = {(int64_t)1 << 40, (int64_t)1 << 40, 3};
    const char* const big[] = {"BlockGRU: input 1 (x): Shape", "more elements", NULL};
    expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_big, back, rows), none, 7, h),
                 BLOCKRNN_RESOURCE_EXHAUSTED, "element count overflow", big);
  }

  /* A strided seq_lengths is read before validation: its strides are checked first. Lengths
   * {1, 1} at stride 2^61 (8-byte elements: 2^64 bytes) would wrap onto element 0. */
  {
    int64_t lengths[2] = {1, 0};
    const int64_t s_len[] = {2}, wrap[] = {(int64_t)1 << 61};
    const char* const len_overflow[] = {"BlockGRU: input 7 (seq_lengths): strides", "overflow",
                                        NULL};
    expect_error(gru(tensor(BLOCKRNN_FLOAT32, 3, s_x, NULL, rows),
                     tensor(BLOCKRNN_INT64, 1, s_len, wrap, lengths), 8, h),
                 BLOCKRNN_INVALID_ARGUMENT, "seq_lengths stride 2^61", len_overflow);
  }
}

/* ---- Overlap with empty work ------------------------------------------------------------- */

/* Output `k` of `op` (sizes T, B, I, H) placed on input `j`: refused naming both, the input
 * unchanged. */
static void expect_overlap_refused(const char* op, int64_t T, int64_t B, int64_t I, int64_t H,
                                   size_t k, size_t j) {
  Call c;
  char what[160], needle[160];
  float* saved;
  if (!make_call(&c, op, T, B, I, H)) {
    fprintf(stderr, "%s: the inputs are refused: %s\n", op, blockrnn_last_error());
    ++g_failures;
    free_call(&c);
    return;
  }
  snprintf(what, sizeof what, "%s (T %d, B %d, I %d, H %d) output %s on input %s", op, (int)T,
           (int)B, (int)I, (int)H, blockrnn_op_output_name(c.index, (int)k),
           blockrnn_op_input_name(c.index, (int)j));
  snprintf(needle, sizeof needle, "%s: output %s overlaps input %s", op,
           blockrnn_op_output_name(c.index, (int)k), blockrnn_op_input_name(c.index, (int)j));
  CHECK(c.out_count[k] > 0 && c.out_count[k] <= c.in_count[j], what);
  saved = malloc(c.in_count[j] * sizeof(float) + 1);
  memcpy(saved, c.in_data[j], c.in_count[j] * sizeof(float));
  c.out[k].data = c.in_data[j];
  {
    const char* const needles[] = {needle, NULL};
    expect_error(run(&c), BLOCKRNN_INVALID_ARGUMENT, what, needles);
  }
  CHECK(memcmp(saved, c.in_data[j], c.in_count[j] * sizeof(float)) == 0, what);
  free(saved);
  free_call(&c);
}

static void test_overlap(void) {
  Call c;
  /* BlockLSTMGrad with B = 0: w_grad (output 3) on w (input 4). */
  expect_overlap_refused("BlockLSTMGrad", 2, 0, 3, 4, 3, 4);
  /* gradients.GRUBlockCell with B = 0: the w_ru gradient (output 2) on w_ru (input 2). */
  expect_overlap_refused("gradients.GRUBlockCell", 1, 0, 3, 4, 2, 2);
  /* BlockGRUGrad with H = 0: x_grad (output 0) on x (input 1). */
  expect_overlap_refused("BlockGRUGrad", 2, 3, 4, 0, 0, 1);
  /* An empty output occupies no bytes: x_grad [2, 0, 3] pointing inside w overlaps nothing. */
  CHECK(make_call(&c, "BlockLSTMGrad", 2, 0, 3, 4), "BlockLSTMGrad B = 0");
  c.out[0].data = c.in_data[4] + 1;
  CHECK(run(&c) == BLOCKRNN_OK, "an empty output inside an input");
  free_call(&c);
}

/* ---- blockrnn_prepare_call --------------------------------------------------------------- */

static void test_prepare_call(void) {
  Call c;
  int32_t dtype = -1;
  blockrnn_shape shapes[8];
  const int64_t limit = blockrnn_get_memory_limit();
  CHECK(make_call(&c, "BlockLSTM", 4, 8, 16, 32), "BlockLSTM");
  CHECK(blockrnn_prepare_call("BlockLSTM", c.in, c.num_inputs, NULL, 0, 0, &dtype, shapes,
                              c.num_outputs) == BLOCKRNN_OK,
        "prepare_call");
  CHECK(dtype == BLOCKRNN_FLOAT32 && shapes[6].rank == 3 && shapes[6].dims[2] == 32,
        "prepare_call's shapes");
  /* 1 byte of extra_bytes beyond a limit the call otherwise fits: the extra is counted. */
  blockrnn_set_memory_limit((int64_t)1 << 40);
  {
    const char* const needles[] = {"BlockLSTM: this call needs", "extra_bytes", NULL};
    expect_error(blockrnn_prepare_call("BlockLSTM", c.in, c.num_inputs, NULL, 0,
                                       ((int64_t)1 << 40) + 1, &dtype, shapes, c.num_outputs),
                 BLOCKRNN_RESOURCE_EXHAUSTED, "prepare_call extra_bytes", needles);
  }
  /* The outputs are counted: under a limit of 1 byte the message names them (7 outputs of
   * [4, 8, 32] float32). */
  blockrnn_set_memory_limit(1);
  {
    const char* const needles[] = {"BlockLSTM: this call needs", "outputs 28.0 KiB",
                                   "of shape [4, 8, 32] float32", NULL};
    expect_error(blockrnn_prepare_call("BlockLSTM", c.in, c.num_inputs, NULL, 0, 0, &dtype, shapes,
                                       c.num_outputs),
                 BLOCKRNN_RESOURCE_EXHAUSTED, "prepare_call counts the outputs", needles);
  }
  blockrnn_set_memory_limit(limit);
  {
    const char* const needles[] = {"BlockLSTM: extra_bytes must be >= 0, got -1", NULL};
    expect_error(blockrnn_prepare_call("BlockLSTM", c.in, c.num_inputs, NULL, 0, -1, &dtype, shapes,
                                       c.num_outputs),
                 BLOCKRNN_INVALID_ARGUMENT, "prepare_call extra_bytes < 0", needles);
  }
  free_call(&c);
}

/* ---- The last error ---------------------------------------------------------------------- */

static void test_last_error(void) {
  const char* message;
  char saved[512];
  int n = 0;
  blockrnn_shape shapes[4];
  CHECK(blockrnn_infer_outputs("NoSuchOp", NULL, 0, NULL, 0, NULL, shapes, 4) ==
            BLOCKRNN_INVALID_ARGUMENT,
        "unknown op");
  snprintf(saved, sizeof saved, "%s", blockrnn_last_error());
  CHECK(strstr(saved, "NoSuchOp") != NULL, "the message names the op");
  /* Every call that returns no status, succeeding, leaves the message alone. */
  (void)blockrnn_status_name(BLOCKRNN_OK);
  (void)blockrnn_version();
  (void)blockrnn_op_count();
  (void)blockrnn_op_name(0);
  (void)blockrnn_op_find("BlockGRU");
  (void)blockrnn_op_num_inputs(0);
  (void)blockrnn_op_input_name(0, 0);
  (void)blockrnn_op_num_outputs(0);
  (void)blockrnn_op_output_name(0, 0);
  (void)blockrnn_op_num_attrs(0);
  (void)blockrnn_max_threads();
  blockrnn_set_memory_limit(blockrnn_get_memory_limit());
  blockrnn_set_cancel_check(NULL, NULL);
  (void)blockrnn_get_isa();
  blockrnn_set_force_reference(0);
  message = blockrnn_last_error();
  CHECK(strcmp(message, saved) == 0, "calls without a status keep the last error");
  /* A call without a status that fails sets it; a status call that succeeds clears it. */
  CHECK(blockrnn_op_find("AlsoNoSuchOp") == -1, "op_find of an unknown name");
  CHECK(strstr(blockrnn_last_error(), "AlsoNoSuchOp") != NULL, "op_find sets the last error");
  CHECK(blockrnn_get_num_threads(&n) == BLOCKRNN_OK, "get_num_threads");
  CHECK(blockrnn_last_error()[0] == '\0', "a successful status call clears the last error");
}

int main(void) {
  test_strides();
  test_overlap();
  test_prepare_call();
  test_last_error();
  return checks_result("c_api_hostile");
}
