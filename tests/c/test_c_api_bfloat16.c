/* bfloat16 through the C API (BLOCKRNN_BFLOAT16, uint16_t bit patterns): BlockLSTM on bfloat16
 * inputs against the same op in float64 on the same values, the outputs' dtype, strided bfloat16
 * inputs (the same bits as dense ones), the same bits at 1 and 2 threads, and the errors that name
 * bfloat16. Compiled as C11. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockrnn/c_api.h"

static int g_failures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)

enum { T = 4, B = 9, I = 33, H = 17, K = I + H, NUM_IN = 9, NUM_OUT = 7 };

/* bfloat16 is the upper half of a binary32: widening is a shift. */
static double widen(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* A bfloat16 value in [-1, 1): the upper half of a float drawn by a fixed LCG (truncated: any
 * bfloat16 value will do as an input). */
static uint64_t g_state = 12345;
static uint16_t random_bf16(void) {
  g_state = g_state * 6364136223846793005ull + 1442695040888963407ull;
  float f = (float)((double)(g_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

static const int64_t kShapes[NUM_IN][3] = {{0, 0, 0}, {T, B, I},     {B, H, 0},
                                           {B, H, 0}, {K, 4 * H, 0}, {H, 0, 0},
                                           {H, 0, 0}, {H, 0, 0},     {4 * H, 0, 0}};
static const int32_t kRanks[NUM_IN] = {0, 3, 2, 2, 2, 1, 1, 1, 1};

static int64_t count(int k) {
  int64_t n = 1;
  for (int d = 0; d < kRanks[k]; ++d) n *= kShapes[k][d];
  return n;
}

typedef struct {
  uint16_t* bf16[NUM_IN]; /* [0] unused: seq_len_max is int64 */
  double* f64[NUM_IN];
  int64_t seq_len_max;
} inputs;

static void make_inputs(inputs* in) {
  in->seq_len_max = T;
  in->bf16[0] = NULL;
  in->f64[0] = NULL;
  for (int k = 1; k < NUM_IN; ++k) {
    const int64_t n = count(k);
    in->bf16[k] = malloc((size_t)n * sizeof(uint16_t));
    in->f64[k] = malloc((size_t)n * sizeof(double));
    for (int64_t e = 0; e < n; ++e) {
      in->bf16[k][e] = random_bf16();
      in->f64[k][e] = widen(in->bf16[k][e]);
    }
  }
}

/* The op's input tensors in `dtype`; with `x_strides`, x is described by those strides over
 * `x_data` instead of dense. */
static void views(const inputs* in, int32_t dtype, blockrnn_tensor* t, const int64_t* x_strides,
                  void* x_data) {
  blockrnn_tensor s = {BLOCKRNN_INT64, 0, NULL, NULL, (void*)&in->seq_len_max};
  t[0] = s;
  for (int k = 1; k < NUM_IN; ++k) {
    void* data = dtype == BLOCKRNN_BFLOAT16 ? (void*)in->bf16[k] : (void*)in->f64[k];
    blockrnn_tensor v = {dtype, kRanks[k], kShapes[k], NULL, data};
    t[k] = v;
  }
  if (x_strides) {
    t[1].strides = x_strides;
    t[1].data = x_data;
  }
}

static const blockrnn_attr* attrs(void) {
  static blockrnn_attr a[3];
  a[0] = blockrnn_attr_float("forget_bias", 1.0);
  a[1] = blockrnn_attr_float("cell_clip", 0.5);
  a[2] = blockrnn_attr_bool("use_peephole", 1);
  return a;
}

/* Runs BlockLSTM; outputs [T, B, H] each, in malloc'ed buffers of `elem` bytes per element. */
static void** run(const blockrnn_tensor* in, int32_t want_dtype, size_t elem) {
  int32_t dtype = -1;
  blockrnn_shape shapes[NUM_OUT];
  blockrnn_status s =
      blockrnn_infer_outputs("BlockLSTM", in, NUM_IN, attrs(), 3, &dtype, shapes, NUM_OUT);
  CHECK(s == BLOCKRNN_OK, "infer_outputs: %s", blockrnn_last_error());
  CHECK(dtype == want_dtype, "outputs' dtype %d, want %d", dtype, want_dtype);
  void** bufs = calloc(NUM_OUT, sizeof(void*));
  blockrnn_tensor outs[NUM_OUT];
  static const int64_t tbh[3] = {T, B, H};
  for (int k = 0; k < NUM_OUT; ++k) {
    bufs[k] = malloc((size_t)(T * B * H) * elem);
    memset(bufs[k], 0xff, (size_t)(T * B * H) * elem); /* NaN in either dtype */
    blockrnn_tensor o = {want_dtype, 3, tbh, NULL, bufs[k]};
    outs[k] = o;
  }
  s = blockrnn_run_op("BlockLSTM", in, NUM_IN, attrs(), 3, outs, NUM_OUT);
  CHECK(s == BLOCKRNN_OK, "run_op: %s", blockrnn_last_error());
  return bufs;
}

static void free_outputs(void** bufs) {
  for (int k = 0; k < NUM_OUT; ++k) free(bufs[k]);
  free(bufs);
}

int main(void) {
  inputs in;
  make_inputs(&in);
  blockrnn_tensor t16[NUM_IN], t64[NUM_IN];
  views(&in, BLOCKRNN_BFLOAT16, t16, NULL, NULL);
  views(&in, BLOCKRNN_FLOAT64, t64, NULL, NULL);

  /* Against float64 on the same values. Each output is rounded once to nearest even: unit
   * roundoff u = 2^-8 (an 8-bit significand), so |out - ref| <= u |ref| plus float32's own
   * error over the T-step recurrence (< 5e-5 |ref| + 1e-5 max|ref|, the float32 sequence bound
   * of docs/tolerances.md): within 2u |ref| = 2^-7 |ref| + 1e-5 max(1, max|ref|). The fast
   * path multiplies bfloat16 operands (h[t-1] rounded for each step's recurrent product), at
   * most 2^-7 max(1, max|ref|) per product and T + 1 products in sequence for the LSTM
   * (docs/tolerances.md, "bfloat16 products"): that much more in the absolute term. */
  void** got = run(t16, BLOCKRNN_BFLOAT16, sizeof(uint16_t));
  void** want = run(t64, BLOCKRNN_FLOAT64, sizeof(double));
  for (int k = 0; k < NUM_OUT; ++k) {
    const uint16_t* a = got[k];
    const double* b = want[k];
    double scale = 1.0;
    for (int e = 0; e < T * B * H; ++e) scale = fmax(scale, fabs(b[e]));
    int bad = 0;
    for (int e = 0; e < T * B * H && bad < 3; ++e) {
      const double x = widen(a[e]);
      if (!(fabs(x - b[e]) <=
            ldexp(1.0, -7) * fabs(b[e]) + (1e-5 + ldexp(1.0, -7) * (T + 1)) * scale)) {
        CHECK(0, "output %d element %d: bfloat16 %.9g vs float64 %.9g", k, e, x, b[e]);
        ++bad;
      }
    }
  }

  /* x strided (a [T, B, I] view of a [T, I, B] array, transposed in its last two dimensions):
   * the same bits as the dense call. */
  uint16_t* xt = malloc((size_t)(T * B * I) * sizeof(uint16_t));
  for (int s = 0; s < T; ++s)
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < I; ++i) xt[(s * I + i) * B + b] = in.bf16[1][(s * B + b) * I + i];
  const int64_t strides[3] = {(int64_t)I * B, 1, B};
  blockrnn_tensor ts[NUM_IN];
  views(&in, BLOCKRNN_BFLOAT16, ts, strides, xt);
  void** strided = run(ts, BLOCKRNN_BFLOAT16, sizeof(uint16_t));
  for (int k = 0; k < NUM_OUT; ++k) {
    CHECK(memcmp(strided[k], got[k], (size_t)(T * B * H) * sizeof(uint16_t)) == 0,
          "output %d: strided x gives other bits than dense x", k);
  }

  /* The same bits at 1 and 2 threads. */
  int saved = 1;
  blockrnn_get_num_threads(&saved);
  void* by_threads[2][NUM_OUT];
  for (int n = 1; n <= 2; ++n) {
    CHECK(blockrnn_set_num_threads(n) == BLOCKRNN_OK, "set_num_threads(%d)", n);
    void** r = run(t16, BLOCKRNN_BFLOAT16, sizeof(uint16_t));
    for (int k = 0; k < NUM_OUT; ++k) by_threads[n - 1][k] = r[k];
    free(r);
  }
  blockrnn_set_num_threads(saved);
  for (int k = 0; k < NUM_OUT; ++k) {
    CHECK(memcmp(by_threads[0][k], by_threads[1][k], (size_t)(T * B * H) * 2) == 0,
          "output %d: 1 and 2 threads differ", k);
    free(by_threads[0][k]);
    free(by_threads[1][k]);
  }

  /* Errors: a bfloat16 x with float64 states names both dtypes; 5 is not a dtype. */
  blockrnn_tensor mixed[NUM_IN];
  memcpy(mixed, t64, sizeof mixed);
  mixed[1] = t16[1];
  int32_t dtype;
  blockrnn_shape shapes[NUM_OUT];
  blockrnn_status s =
      blockrnn_infer_outputs("BlockLSTM", mixed, NUM_IN, attrs(), 3, &dtype, shapes, NUM_OUT);
  CHECK(s == BLOCKRNN_INVALID_ARGUMENT, "mixed dtypes: status %d", (int)s);
  CHECK(strstr(blockrnn_last_error(), "must have the dtype of x (bfloat16), got float64") != NULL,
        "mixed dtypes: %s", blockrnn_last_error());
  blockrnn_tensor unknown[NUM_IN];
  memcpy(unknown, t16, sizeof unknown);
  unknown[1].dtype = BLOCKRNN_BFLOAT16 + 1;
  s = blockrnn_infer_outputs("BlockLSTM", unknown, NUM_IN, attrs(), 3, &dtype, shapes, NUM_OUT);
  CHECK(s == BLOCKRNN_INVALID_ARGUMENT, "dtype 5: status %d", (int)s);
  CHECK(strstr(blockrnn_last_error(), "dtype 5 is not a blockrnn_dtype (0..4)") != NULL,
        "dtype 5: %s", blockrnn_last_error());

  free_outputs(got);
  free_outputs(want);
  free_outputs(strided);
  free(xt);
  for (int k = 1; k < NUM_IN; ++k) {
    free(in.bf16[k]);
    free(in.f64[k]);
  }
  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("bfloat16 through the C API: ok\n");
  return 0;
}
