/* The C API against TensorFlow: replays every case of the golden files
 * (tests/golden/<family>_v1.bin, docs/golden-format.md, written by tools/make_golden.py with real
 * TensorFlow) through blockrnn_run_op, once with dense inputs and once with every input of rank >=
 * 2 passed as a column-major copy described by strides (the results must be the same bits). Then
 * checks the error paths, the introspection functions and the settings. Compiled as C11. Usage:
 * test_c_api_golden GOLDEN_FILE... */
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

/* ---- Golden file reader ------------------------------------------------------------------ */

typedef struct {
  const unsigned char* p;
  const unsigned char* end;
} reader;

static void need(reader* r, size_t n) {
  if ((size_t)(r->end - r->p) < n) {
    fprintf(stderr, "golden file truncated\n");
    exit(2);
  }
}
static uint32_t read_u32(reader* r) {
  need(r, 4);
  uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
               (uint32_t)r->p[3] << 24;
  r->p += 4;
  return v;
}
static uint64_t read_u64(reader* r) {
  uint64_t lo = read_u32(r);
  uint64_t hi = read_u32(r);
  return lo | hi << 32;
}
static double read_f64(reader* r) {
  uint64_t bits = read_u64(r);
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}
/* Returns a NUL-terminated copy. */
static char* read_str(reader* r) {
  uint32_t n = read_u32(r);
  need(r, n);
  char* s = malloc(n + 1u);
  memcpy(s, r->p, n);
  s[n] = '\0';
  r->p += n;
  return s;
}

static size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case BLOCKRNN_FLOAT16:
      return 2;
    case BLOCKRNN_FLOAT32:
      return 4;
    default:
      return 8;
  }
}

typedef struct {
  char* name;
  int32_t dtype;
  int32_t rank;
  int64_t dims[BLOCKRNN_MAX_RANK];
  int64_t n;
  void* data; /* little-endian on the x86-64 machines this project runs on */
} golden_tensor;

static void read_tensor(reader* r, golden_tensor* t) {
  t->name = read_str(r);
  need(r, 1);
  t->dtype = *r->p++;
  t->rank = (int32_t)read_u32(r);
  if (t->rank > BLOCKRNN_MAX_RANK) {
    fprintf(stderr, "golden tensor of rank %d\n", t->rank);
    exit(2);
  }
  t->n = 1;
  for (int d = 0; d < t->rank; ++d) {
    t->dims[d] = (int64_t)read_u64(r);
    t->n *= t->dims[d];
  }
  size_t bytes = (size_t)t->n * dtype_bytes(t->dtype);
  need(r, bytes);
  t->data = malloc(bytes ? bytes : 1);
  memcpy(t->data, r->p, bytes);
  r->p += bytes;
}

static void free_tensor(golden_tensor* t) {
  free(t->name);
  free(t->data);
}

/* ---- Comparison -------------------------------------------------------------------------- */

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | man << 13;
  } else if (exp != 0) {
    bits = sign | (exp + 112) << 23 | man << 13;
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400) == 0);
    bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static double element(const void* data, int32_t dtype, int64_t k) {
  switch (dtype) {
    case BLOCKRNN_FLOAT16:
      return half_to_float(((const uint16_t*)data)[k]);
    case BLOCKRNN_FLOAT32:
      return ((const float*)data)[k];
    case BLOCKRNN_FLOAT64:
      return ((const double*)data)[k];
    default:
      return (double)((const int64_t*)data)[k];
  }
}

/* docs/tolerances.md: cell ops within 1e-5, sequence ops within 1e-4; float16 within TF's 8e-3. */
static double tolerance(const char* op, int32_t dtype) {
  if (dtype == BLOCKRNN_FLOAT16) return 8e-3;
  return strncmp(op, "Block", 5) == 0 ? 1e-4 : 1e-5;
}

/* ---- Replaying a case -------------------------------------------------------------------- */

static int find_output(int op_index, const char* name) {
  for (int k = 0; k < blockrnn_op_num_outputs(op_index); ++k) {
    if (strcmp(blockrnn_op_output_name(op_index, k), name) == 0) return k;
  }
  return -1;
}

static blockrnn_attr typed_attr(int op_index, const char* name, double value) {
  for (int k = 0; k < blockrnn_op_num_attrs(op_index); ++k) {
    const char* attr_name;
    int32_t kind;
    blockrnn_op_attr(op_index, k, &attr_name, &kind, NULL, NULL);
    if (strcmp(attr_name, name) == 0 && kind == BLOCKRNN_ATTR_BOOL) {
      return blockrnn_attr_bool(name, value != 0.0);
    }
  }
  return blockrnn_attr_float(name, value);
}

/* Runs op on the inputs; returns malloc'ed output buffers (NULL on failure). */
static void** run(const char* op, const blockrnn_tensor* in, size_t n_in, const blockrnn_attr* at,
                  size_t n_at, size_t n_out, blockrnn_shape* shapes, int32_t* dtype) {
  blockrnn_status s = blockrnn_infer_outputs(op, in, n_in, at, n_at, dtype, shapes, n_out);
  CHECK(s == BLOCKRNN_OK, "%s: infer_outputs: %s", op, blockrnn_last_error());
  if (s != BLOCKRNN_OK) return NULL;
  void** bufs = calloc(n_out, sizeof(void*));
  blockrnn_tensor* outs = calloc(n_out, sizeof(blockrnn_tensor));
  for (size_t k = 0; k < n_out; ++k) {
    int64_t n = 1;
    for (int d = 0; d < shapes[k].rank; ++d) n *= shapes[k].dims[d];
    bufs[k] = malloc((size_t)n * dtype_bytes(*dtype) + 1);
    memset(bufs[k], 0xA5, (size_t)n * dtype_bytes(*dtype)); /* poison */
    blockrnn_tensor t = {*dtype, shapes[k].rank, shapes[k].dims, NULL, bufs[k]};
    outs[k] = t;
  }
  s = blockrnn_run_op(op, in, n_in, at, n_at, outs, n_out);
  CHECK(s == BLOCKRNN_OK, "%s: run_op: %s", op, blockrnn_last_error());
  free(outs);
  if (s != BLOCKRNN_OK) {
    for (size_t k = 0; k < n_out; ++k) free(bufs[k]);
    free(bufs);
    return NULL;
  }
  return bufs;
}

static void replay_case(const char* file, int index, reader* r, int* compared) {
  char* op = read_str(r);
  uint32_t n_attrs = read_u32(r);
  const int op_index = blockrnn_op_find(op);
  CHECK(op_index >= 0, "%s: unknown op: %s", op, blockrnn_last_error());
  char** attr_names = calloc(n_attrs + 1u, sizeof(char*));
  blockrnn_attr* attrs = calloc(n_attrs + 1u, sizeof(blockrnn_attr));
  for (uint32_t k = 0; k < n_attrs; ++k) {
    attr_names[k] = read_str(r);
    attrs[k] = typed_attr(op_index, attr_names[k], read_f64(r));
  }
  uint32_t n_in = read_u32(r);
  golden_tensor* in = calloc(n_in + 1u, sizeof(golden_tensor));
  for (uint32_t k = 0; k < n_in; ++k) read_tensor(r, &in[k]);
  uint32_t n_want = read_u32(r);
  golden_tensor* want = calloc(n_want + 1u, sizeof(golden_tensor));
  for (uint32_t k = 0; k < n_want; ++k) read_tensor(r, &want[k]);
  if (op_index < 0) return;

  /* Dense inputs, and column-major copies with strides. */
  blockrnn_tensor* dense = calloc(n_in + 1u, sizeof(blockrnn_tensor));
  blockrnn_tensor* strided = calloc(n_in + 1u, sizeof(blockrnn_tensor));
  int64_t(*strides)[BLOCKRNN_MAX_RANK] = calloc(n_in + 1u, sizeof *strides);
  void** copies = calloc(n_in + 1u, sizeof(void*));
  for (uint32_t k = 0; k < n_in; ++k) {
    const golden_tensor* g = &in[k];
    blockrnn_tensor t = {g->dtype, g->rank, g->dims, NULL, g->data};
    dense[k] = t;
    strided[k] = t;
    if (g->rank < 2) continue;
    /* Column-major: stride of dim d is the product of the dims before it. */
    int64_t s = 1;
    for (int d = 0; d < g->rank; ++d) {
      strides[k][d] = s;
      s *= g->dims[d];
    }
    const size_t e = dtype_bytes(g->dtype);
    copies[k] = malloc((size_t)g->n * e + 1);
    int64_t idx[BLOCKRNN_MAX_RANK] = {0};
    for (int64_t flat = 0; flat < g->n; ++flat) { /* row-major walk */
      int64_t off = 0;
      for (int d = 0; d < g->rank; ++d) off += idx[d] * strides[k][d];
      memcpy((char*)copies[k] + off * (int64_t)e, (const char*)g->data + flat * (int64_t)e, e);
      for (int d = g->rank - 1; d >= 0; --d) {
        if (++idx[d] < g->dims[d]) break;
        idx[d] = 0;
      }
    }
    strided[k].strides = strides[k];
    strided[k].data = copies[k];
  }

  const size_t n_out = (size_t)blockrnn_op_num_outputs(op_index);
  blockrnn_shape shapes[16], shapes2[16];
  int32_t dtype = -1, dtype2 = -1;
  void** got = run(op, dense, n_in, attrs, n_attrs, n_out, shapes, &dtype);
  void** got2 = run(op, strided, n_in, attrs, n_attrs, n_out, shapes2, &dtype2);
  if (got != NULL) {
    const double tol = tolerance(op, in[n_in - 1].dtype);
    for (uint32_t w = 0; w < n_want; ++w) {
      const int k = find_output(op_index, want[w].name);
      CHECK(k >= 0, "%s case %d: unknown output %s", file, index, want[w].name);
      if (k < 0) continue;
      CHECK(shapes[k].rank == want[w].rank, "%s case %d %s: rank", file, index, want[w].name);
      int worst = -1;
      for (int64_t e = 0; e < want[w].n; ++e) {
        const double a = element(got[k], dtype, e), b = element(want[w].data, want[w].dtype, e);
        const int ok = fabs(a - b) <= tol + tol * fabs(b) || (isnan(a) && isnan(b));
        if (!ok && worst < 0) worst = (int)e;
      }
      CHECK(worst < 0, "%s case %d op %s output %s element %d: got %.9g, TensorFlow %.9g", file,
            index, op, want[w].name, worst, worst < 0 ? 0.0 : element(got[k], dtype, worst),
            worst < 0 ? 0.0 : element(want[w].data, want[w].dtype, worst));
      ++*compared;
    }
    if (got2 != NULL) {
      for (size_t k = 0; k < n_out; ++k) {
        int64_t n = 1;
        for (int d = 0; d < shapes[k].rank; ++d) n *= shapes[k].dims[d];
        CHECK(memcmp(got[k], got2[k], (size_t)n * dtype_bytes(dtype)) == 0,
              "%s case %d op %s output %zu: strided inputs give other bits", file, index, op, k);
      }
    }
  }
  for (size_t k = 0; got != NULL && k < n_out; ++k) free(got[k]);
  for (size_t k = 0; got2 != NULL && k < n_out; ++k) free(got2[k]);
  free(got);
  free(got2);
  for (uint32_t k = 0; k < n_in; ++k) free(copies[k]);
  free(copies);
  free(strides);
  free(strided);
  free(dense);
  for (uint32_t k = 0; k < n_in; ++k) free_tensor(&in[k]);
  for (uint32_t k = 0; k < n_want; ++k) free_tensor(&want[k]);
  for (uint32_t k = 0; k < n_attrs; ++k) free(attr_names[k]);
  free(in);
  free(want);
  free(attr_names);
  free(attrs);
  free(op);
}

static void replay_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* bytes = malloc((size_t)size);
  if (fread(bytes, 1, (size_t)size, f) != (size_t)size) exit(2);
  fclose(f);
  reader r = {bytes, bytes + size};
  need(&r, 8);
  CHECK(memcmp(r.p, "BRNNGOLD", 8) == 0, "%s: not a golden file", path);
  r.p += 8;
  CHECK(read_u32(&r) == 1, "%s: golden format version", path);
  uint32_t n_cases = read_u32(&r);
  int compared = 0;
  for (uint32_t c = 0; c < n_cases; ++c) replay_case(path, (int)c, &r, &compared);
  CHECK(r.p == r.end, "%s: trailing bytes", path);
  printf("%s: %u cases, %d outputs compared with TensorFlow\n", path, n_cases, compared);
  free(bytes);
}

/* ---- Error paths, introspection, settings ------------------------------------------------ */

static int g_cancel_calls = 0;
static int cancel_always(void* user) {
  ++*(int*)user;
  return 1;
}

static void check_api(void) {
  CHECK(strcmp(blockrnn_version(), BLOCKRNN_VERSION_STRING) == 0, "version %s vs header %s",
        blockrnn_version(), BLOCKRNN_VERSION_STRING);
  CHECK(blockrnn_op_count() >= 12, "op count %d", blockrnn_op_count());
  const int g = blockrnn_op_find("GRUBlockCellGrad");
  CHECK(g >= 0 && strcmp(blockrnn_op_name(g), "GRUBlockCellGrad") == 0, "find");
  if (g < 0) return;
  CHECK(blockrnn_op_num_inputs(g) == 10, "inputs %d", blockrnn_op_num_inputs(g));
  CHECK(strcmp(blockrnn_op_input_name(g, 9), "d_h") == 0, "input 9");
  CHECK(strcmp(blockrnn_op_output_name(g, 3), "d_r_bar_u_bar") == 0, "output 3");
  CHECK(blockrnn_op_input_name(g, 10) == NULL && blockrnn_op_name(-1) == NULL, "range");
  CHECK(blockrnn_op_find("NoSuchOp") == -1, "unknown op");
  CHECK(strstr(blockrnn_last_error(), "NoSuchOp") != NULL, "message: %s", blockrnn_last_error());

  const int l = blockrnn_op_find("LSTMBlockCell");
  const char* name = NULL;
  int32_t kind = -1, has_default = -1;
  double def = 0;
  int found_peephole = 0;
  for (int k = 0; k < blockrnn_op_num_attrs(l); ++k) {
    CHECK(blockrnn_op_attr(l, k, &name, &kind, &has_default, &def) == BLOCKRNN_OK, "attr");
    if (strcmp(name, "use_peephole") == 0) {
      found_peephole = 1;
      CHECK(kind == BLOCKRNN_ATTR_BOOL && has_default == 1 && def == 0.0, "use_peephole def");
    }
  }
  CHECK(found_peephole, "LSTMBlockCell has use_peephole");
  CHECK(blockrnn_op_attr(l, 99, NULL, NULL, NULL, NULL) == BLOCKRNN_INVALID_ARGUMENT, "attr rng");

  /* A small LSTMBlockCell: B = 1, I = 1, H = 1. */
  float x = 0.5f, cs = 0.1f, h = -0.2f, w[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  float p = 0.f, b[4] = {0.f, 0.f, 0.f, 0.f};
  const int64_t s11[] = {1, 1}, s24[] = {2, 4}, s1[] = {1}, s4[] = {4};
  const blockrnn_tensor in[8] = {
      {BLOCKRNN_FLOAT32, 2, s11, NULL, &x}, {BLOCKRNN_FLOAT32, 2, s11, NULL, &cs},
      {BLOCKRNN_FLOAT32, 2, s11, NULL, &h}, {BLOCKRNN_FLOAT32, 2, s24, NULL, w},
      {BLOCKRNN_FLOAT32, 1, s1, NULL, &p},  {BLOCKRNN_FLOAT32, 1, s1, NULL, &p},
      {BLOCKRNN_FLOAT32, 1, s1, NULL, &p},  {BLOCKRNN_FLOAT32, 1, s4, NULL, b}};
  float o[7][1];
  blockrnn_tensor out[7];
  for (int k = 0; k < 7; ++k) {
    blockrnn_tensor t = {BLOCKRNN_FLOAT32, 2, s11, NULL, o[k]};
    out[k] = t;
  }
  blockrnn_attr wrong_kind = blockrnn_attr_float("use_peephole", 1.0);
  CHECK(
      blockrnn_run_op("LSTMBlockCell", in, 8, &wrong_kind, 1, out, 7) == BLOCKRNN_INVALID_ARGUMENT,
      "a float value for a bool attr");
  CHECK(strstr(blockrnn_last_error(), "use_peephole") != NULL, "%s", blockrnn_last_error());
  blockrnn_attr unknown = blockrnn_attr_float("forget_bais", 1.0);
  CHECK(blockrnn_run_op("LSTMBlockCell", in, 8, &unknown, 1, out, 7) == BLOCKRNN_INVALID_ARGUMENT,
        "unknown attr");
  CHECK(strstr(blockrnn_last_error(), "forget_bais") != NULL, "%s", blockrnn_last_error());
  CHECK(blockrnn_run_op("LSTMBlockCell", in, 7, NULL, 0, out, 7) == BLOCKRNN_INVALID_ARGUMENT,
        "too few inputs");
  blockrnn_attr clip = blockrnn_attr_float("cell_clip", -1.0);
  CHECK(blockrnn_run_op("LSTMBlockCell", in, 8, &clip, 1, out, 7) == BLOCKRNN_OK, "%s",
        blockrnn_last_error());
  CHECK(blockrnn_last_error()[0] == '\0', "a success clears the message");

  blockrnn_tensor bad_dtype[8];
  memcpy(bad_dtype, in, sizeof in);
  bad_dtype[3].dtype = 7;
  CHECK(
      blockrnn_run_op("LSTMBlockCell", bad_dtype, 8, NULL, 0, out, 7) == BLOCKRNN_INVALID_ARGUMENT,
      "bad dtype");
  CHECK(strstr(blockrnn_last_error(), "input 3 (w)") != NULL, "%s", blockrnn_last_error());
  bad_dtype[3].dtype = BLOCKRNN_FLOAT64;
  CHECK(
      blockrnn_run_op("LSTMBlockCell", bad_dtype, 8, NULL, 0, out, 7) == BLOCKRNN_INVALID_ARGUMENT,
      "mixed dtypes");
  bad_dtype[3].dtype = BLOCKRNN_FLOAT32;
  bad_dtype[3].rank = 9;
  CHECK(
      blockrnn_run_op("LSTMBlockCell", bad_dtype, 8, NULL, 0, out, 7) == BLOCKRNN_INVALID_ARGUMENT,
      "rank 9");
  const int64_t odd_strides[] = {1, 1};
  blockrnn_tensor strided_out[7];
  memcpy(strided_out, out, sizeof out);
  float wide[4];
  const int64_t s12[] = {1, 2}, st12[] = {2, 2};
  strided_out[6].shape = s12;
  strided_out[6].strides = st12;
  strided_out[6].data = wide;
  (void)odd_strides;
  CHECK(
      blockrnn_run_op("LSTMBlockCell", in, 8, NULL, 0, strided_out, 7) == BLOCKRNN_INVALID_ARGUMENT,
      "wrong output shape");
  strided_out[6].shape = s11;
  CHECK(blockrnn_run_op("LSTMBlockCell", in, 8, NULL, 0, strided_out, 7) == BLOCKRNN_OK,
        "a [1, 1] output may have any strides: %s", blockrnn_last_error());

  /* A huge zero-stride input (64 Ki x 64 Ki elements in one float) of the wrong shape is
   * refused by validation before anything is copied. */
  float one_value = 1.0f;
  const int64_t huge[] = {65536, 65536}, zero_strides[] = {0, 0};
  blockrnn_tensor huge_in[8];
  memcpy(huge_in, in, sizeof in);
  huge_in[2].shape = huge;
  huge_in[2].strides = zero_strides;
  huge_in[2].data = &one_value;
  CHECK(blockrnn_run_op("LSTMBlockCell", huge_in, 8, NULL, 0, out, 7) ==
                BLOCKRNN_INVALID_ARGUMENT &&
            strstr(blockrnn_last_error(), "h_prev") != NULL,
        "huge strided h_prev of the wrong shape: %s", blockrnn_last_error());
  huge_in[2] = in[2];

  /* Settings. */
  int n = 0;
  CHECK(blockrnn_get_num_threads(&n) == BLOCKRNN_OK && n >= 1, "threads %d", n);
  CHECK(blockrnn_set_num_threads(0) == BLOCKRNN_INVALID_ARGUMENT, "0 threads");
  CHECK(blockrnn_set_num_threads(blockrnn_max_threads() + 1) == BLOCKRNN_INVALID_ARGUMENT, "max");
  CHECK(blockrnn_set_num_threads(1) == BLOCKRNN_OK, "1 thread");
  int one = 0;
  blockrnn_get_num_threads(&one);
  CHECK(one == 1, "get after set: %d", one);
  blockrnn_set_num_threads(n);
  const int64_t limit = blockrnn_get_memory_limit();
  CHECK(limit > 0, "memory limit %lld", (long long)limit);
  /* Every op checks its memory (here: its workspace) against the limit before allocating. */
  blockrnn_set_memory_limit(16);
  CHECK(blockrnn_get_memory_limit() == 16, "limit set");
  const blockrnn_status limited = blockrnn_run_op("LSTMBlockCell", in, 8, NULL, 0, out, 7);
  CHECK(limited == BLOCKRNN_RESOURCE_EXHAUSTED && strstr(blockrnn_last_error(), "LSTMBlockCell"),
        "16-byte memory limit: %s", blockrnn_last_error());
  blockrnn_set_memory_limit(0);
  CHECK(blockrnn_get_memory_limit() == limit, "default restored");
  CHECK(blockrnn_get_workspace_cache_limit() == (int64_t)256 << 20, "default workspace cache");
  blockrnn_set_workspace_cache_limit(0);
  CHECK(blockrnn_get_workspace_cache_limit() == 0, "workspace cache off");
  blockrnn_set_workspace_cache_limit(-1);
  CHECK(blockrnn_get_workspace_cache_limit() == (int64_t)256 << 20, "cache default restored");
  CHECK(blockrnn_get_isa() != NULL, "isa");
  CHECK(blockrnn_set_isa("pentium") == BLOCKRNN_INVALID_ARGUMENT, "bad isa");
  CHECK(blockrnn_set_isa("") == BLOCKRNN_OK, "default isa");

  /* Cancellation: a BlockLSTM of 2^21 steps (seconds of work) with a check that always says
   * stop. The loop asks the check between steps at most every 20 ms, so it stops after the
   * first 20 ms with CANCELLED, having asked once. */
  const int64_t T = (int64_t)1 << 21;
  float* xs = calloc((size_t)T, sizeof(float));
  float* seq_out = calloc((size_t)T * 7, sizeof(float));
  CHECK(xs != NULL && seq_out != NULL, "allocation");
  int64_t seq_len_max = T;
  const int64_t st[] = {T, 1, 1};
  blockrnn_tensor seq_in[9];
  seq_in[0].dtype = BLOCKRNN_INT64;
  seq_in[0].rank = 0;
  seq_in[0].shape = NULL;
  seq_in[0].strides = NULL;
  seq_in[0].data = &seq_len_max;
  seq_in[1] = in[0];
  seq_in[1].rank = 3;
  seq_in[1].shape = st;
  seq_in[1].data = xs;
  for (int k = 2; k < 9; ++k) seq_in[k] = in[k - 1];
  blockrnn_tensor seq_outs[7];
  for (int k = 0; k < 7; ++k) {
    blockrnn_tensor t = {BLOCKRNN_FLOAT32, 3, st, NULL, seq_out + (size_t)k * (size_t)T};
    seq_outs[k] = t;
  }
  blockrnn_set_cancel_check(cancel_always, &g_cancel_calls);
  const blockrnn_status cancelled = blockrnn_run_op("BlockLSTM", seq_in, 9, NULL, 0, seq_outs, 7);
  char message[256];
  snprintf(message, sizeof message, "%s", blockrnn_last_error());
  blockrnn_set_cancel_check(NULL, NULL);
  CHECK(cancelled == BLOCKRNN_CANCELLED && g_cancel_calls == 1 &&
            strstr(message, "BlockLSTM: cancelled after") != NULL,
        "cancel: %s (%d calls): %s", blockrnn_status_name(cancelled), g_cancel_calls, message);
  seq_len_max = 4; /* without the check the op runs to the end */
  CHECK(blockrnn_run_op("BlockLSTM", seq_in, 9, NULL, 0, seq_outs, 7) == BLOCKRNN_OK,
        "after removing the check: %s", blockrnn_last_error());
  free(xs);
  free(seq_out);
  CHECK(strcmp(blockrnn_status_name((blockrnn_status)42), "Unknown") == 0, "status name");
}

int main(int argc, char** argv) {
  check_api();
  for (int k = 1; k < argc; ++k) replay_file(argv[k]);
  if (g_failures != 0) {
    fprintf(stderr,
            "%d checks failed (regenerate golden data with: .venv/bin/python "
            "tools/make_golden.py --out tests/golden)\n",
            g_failures);
    return 1;
  }
  puts("ok");
  return 0;
}
