/* Layer handles through the C API (blockrnn/layer_c_api.h): for every kind (BlockLSTM with
 * peepholes and attrs, BlockLSTMV2, BlockGRU, BlockGRUResetAfter) and every float dtype, a handle's
 * forward and backward give bit for bit what blockrnn_run_op of the one-shot op and its grad
 * gives on the same inputs, over many calls on one handle (new inputs every call, new weights
 * every other call, seq_len_max and seq_lengths in some, a strided x in one); a handle created
 * with caller_workspace, fed the caller's workspace, gives the same bits as one that owns its
 * own; a second call on a handle while one runs is refused; hostile calls (NULL pointers, wrong
 * counts, shapes and dtypes, sizes past memory, a call before set_weights, a short or misaligned
 * workspace, outputs on inputs) return a status whose message names the function or the layer
 * and the argument. Every output is poisoned (NaN bytes) before a call so that an element left
 * unwritten fails the comparison. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "blockrnn/c_api.h"
#include "blockrnn/layer_c_api.h"
#include "c_test_util.h"

enum { T = 5, B = 3, I = 4, H = 3, STEPS = 6, MAX_OUT = 8, MAX_PARAMS = 5 };

/* The call fails with `status` and a last error containing `text`. */
static void expect_error(blockrnn_status got, blockrnn_status status, const char* text,
                         const char* what) {
  if (got != status || strstr(blockrnn_last_error(), text) == NULL) {
    fprintf(stderr, "%s: expected %s containing \"%s\", got %s: \"%s\"\n", what,
            blockrnn_status_name(status), text, blockrnn_status_name(got), blockrnn_last_error());
    ++g_failures;
  }
}

static blockrnn_tensor absent(void) {
  blockrnn_tensor t;
  memset(&t, 0, sizeof t);
  return t;
}

/* ---- A kind's description: the one-shot ops and the names of their arguments -------------- */

struct kind {
  int32_t kind;
  const char* op;
  const char* grad_op;
  const char* name; /* the layer object's name in messages */
  int lstm;
  int num_params;
  const char* params[MAX_PARAMS];
};

static const struct kind kKinds[] = {
    {BLOCKRNN_LAYER_LSTM,
     "BlockLSTM",
     "BlockLSTMGrad",
     "LSTMLayer",
     1,
     5,
     {"w", "b", "wci", "wcf", "wco"}},
    {BLOCKRNN_LAYER_LSTM_V2,
     "BlockLSTMV2",
     "BlockLSTMGradV2",
     "LSTMLayer(V2)",
     1,
     5,
     {"w", "b", "wci", "wcf", "wco"}},
    {BLOCKRNN_LAYER_GRU,
     "BlockGRU",
     "BlockGRUGrad",
     "GRULayer",
     0,
     4,
     {"w_ru", "w_c", "b_ru", "b_c"}},
    {BLOCKRNN_LAYER_GRU_RESET_AFTER,
     "BlockGRUResetAfter",
     "BlockGRUResetAfterGrad",
     "GRUResetAfterLayer",
     0,
     4,
     {"w_i", "w_h", "b_i", "b_h"}},
};

/* A buffer of n elements of the dtype with its shape, as a dense tensor. */
struct buf {
  int32_t rank;
  int64_t shape[3];
  int64_t n;
  void* data;
};

static size_t elem_size(int32_t dtype) {
  switch (dtype) {
    case BLOCKRNN_FLOAT16:
    case BLOCKRNN_BFLOAT16:
      return sizeof(uint16_t);
    case BLOCKRNN_FLOAT32:
      return sizeof(float);
    default:
      return sizeof(double);
  }
}

/* A float as float16 bits, truncated (any half value will do as an input); magnitudes below
 * float16's smallest normal become zero, so every value is an ordinary finite half. */
static uint16_t to_half(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  const int exponent = (int)((bits >> 23) & 0xffu) - 127 + 15;
  if (exponent <= 0) return sign;
  return (uint16_t)(sign | (uint16_t)(exponent << 10) | (uint16_t)((bits >> 13) & 0x3ffu));
}

/* A float as bfloat16 bits: its upper half (truncated, as above). */
static uint16_t to_bfloat16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

/* Whether element k of a buffer of the dtype is a NaN. */
static int is_nan_at(const void* data, int32_t dtype, int64_t k) {
  switch (dtype) {
    case BLOCKRNN_FLOAT16: {
      const uint16_t h = ((const uint16_t*)data)[k];
      return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0;
    }
    case BLOCKRNN_BFLOAT16: {
      const uint16_t h = ((const uint16_t*)data)[k];
      return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0;
    }
    case BLOCKRNN_FLOAT32:
      return isnan(((const float*)data)[k]);
    default:
      return isnan(((const double*)data)[k]);
  }
}

static const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case BLOCKRNN_FLOAT16:
      return "float16";
    case BLOCKRNN_BFLOAT16:
      return "bfloat16";
    case BLOCKRNN_FLOAT32:
      return "float32";
    default:
      return "float64";
  }
}

static void make(struct buf* b, int32_t dtype, int32_t rank, int64_t d0, int64_t d1, int64_t d2) {
  b->rank = rank;
  b->shape[0] = d0;
  b->shape[1] = d1;
  b->shape[2] = d2;
  b->n = 1;
  for (int k = 0; k < rank; ++k) b->n *= b->shape[k];
  b->data = calloc((size_t)b->n + 1, elem_size(dtype));
}

static blockrnn_tensor view(const struct buf* b, int32_t dtype) {
  return dense_tensor(dtype, b->rank, b->shape, b->data);
}

static void fill(struct buf* b, int32_t dtype, double phase, double scale) {
  for (int64_t k = 0; k < b->n; ++k) {
    const double v = sin(0.37 * (double)k + phase) * scale;
    switch (dtype) {
      case BLOCKRNN_FLOAT16:
        ((uint16_t*)b->data)[k] = to_half((float)v);
        break;
      case BLOCKRNN_BFLOAT16:
        ((uint16_t*)b->data)[k] = to_bfloat16((float)v);
        break;
      case BLOCKRNN_FLOAT32:
        ((float*)b->data)[k] = (float)v;
        break;
      default:
        ((double*)b->data)[k] = v;
    }
  }
}

static void poison(struct buf* b, int32_t dtype) {
  memset(b->data, 0xff, (size_t)b->n * elem_size(dtype)); /* NaN in every float dtype */
}

/* No NaN: every element was written (the outputs are poisoned with NaN before each call). */
static int written(const struct buf* b, int32_t dtype) {
  for (int64_t k = 0; k < b->n; ++k) {
    if (is_nan_at(b->data, dtype, k)) return 0;
  }
  return 1;
}

static int same(const struct buf* a, const struct buf* b, int32_t dtype) {
  return a->n == b->n && memcmp(a->data, b->data, (size_t)a->n * elem_size(dtype)) == 0;
}

/* Puts `t` at the position of input (or output) `name` of `op`; returns 0 when it has none. */
static int put(const char* op, int output, blockrnn_tensor* list, const char* name,
               blockrnn_tensor t) {
  const int index = blockrnn_op_find(op);
  const int n = output ? blockrnn_op_num_outputs(index) : blockrnn_op_num_inputs(index);
  for (int k = 0; k < n; ++k) {
    const char* at = output ? blockrnn_op_output_name(index, k) : blockrnn_op_input_name(index, k);
    if (strcmp(at, name) == 0) {
      list[k] = t;
      return 1;
    }
  }
  return 0;
}

/* The LSTM attrs of a case, those the op has. */
static size_t lstm_attrs(const char* op, const blockrnn_layer_options* o, blockrnn_attr* attrs) {
  const int index = blockrnn_op_find(op);
  size_t n = 0;
  for (int k = 0; k < blockrnn_op_num_attrs(index); ++k) {
    const char* name = NULL;
    blockrnn_op_attr(index, k, &name, NULL, NULL, NULL);
    if (strcmp(name, "use_peephole") == 0) attrs[n++] = blockrnn_attr_bool(name, o->use_peephole);
    if (strcmp(name, "forget_bias") == 0 && o->has_forget_bias)
      attrs[n++] = blockrnn_attr_float(name, o->forget_bias);
    if (strcmp(name, "cell_clip") == 0 && o->has_cell_clip)
      attrs[n++] = blockrnn_attr_float(name, o->cell_clip);
  }
  return n;
}

/* ---- One case: a kind, a dtype and attrs, checked over many calls ------------------------- */

struct state {
  const struct kind* k;
  blockrnn_layer_options o;
  int32_t dt;
  int nf, ng; /* outputs of the op and of its grad op */
  struct buf x, xt, cs_prev, h_prev, params[MAX_PARAMS], zeros_h, lengths;
  struct buf acts[MAX_OUT], got[MAX_OUT], got2[MAX_OUT]; /* one-shot, handle, caller workspace */
  struct buf grads[MAX_OUT], ggot[MAX_OUT], ggot2[MAX_OUT];
  struct buf cs_grad, h_grad;
};

static void run_one_shot(struct state* s, int has_slm, int64_t slm, int with_lengths) {
  const struct kind* k = s->k;
  static int64_t seq_len_max;
  blockrnn_tensor in[32], out[MAX_OUT];
  blockrnn_attr attrs[3], grad_attrs[3];
  const size_t na = k->lstm ? lstm_attrs(k->op, &s->o, attrs) : 0;
  const size_t nga = k->lstm ? lstm_attrs(k->grad_op, &s->o, grad_attrs) : 0;
  int ni = blockrnn_op_num_inputs(blockrnn_op_find(k->op));
  int ngi = blockrnn_op_num_inputs(blockrnn_op_find(k->grad_op));
  blockrnn_tensor slm_t = dense_tensor(BLOCKRNN_INT64, 0, NULL, &seq_len_max);
  seq_len_max = has_slm ? slm : T;
  for (int pass = 0; pass < 2; ++pass) {
    const char* op = pass == 0 ? k->op : k->grad_op;
    for (int j = 0; j < 32; ++j) in[j] = absent();
    CHECK(put(op, 0, in, "seq_len_max", slm_t), "seq_len_max");
    CHECK(put(op, 0, in, "x", view(&s->x, s->dt)), "x");
    if (k->lstm) CHECK(put(op, 0, in, "cs_prev", view(&s->cs_prev, s->dt)), "cs_prev");
    CHECK(put(op, 0, in, "h_prev", view(&s->h_prev, s->dt)), "h_prev");
    for (int p = 0; p < k->num_params; ++p) {
      /* An LSTM without peepholes: the ops still take them (zeros). */
      const struct buf* w = (k->lstm && p >= 2 && !s->o.use_peephole) ? &s->zeros_h : &s->params[p];
      CHECK(put(op, 0, in, k->params[p], view(w, s->dt)), k->params[p]);
    }
    if (with_lengths) {
      blockrnn_tensor l = dense_tensor(BLOCKRNN_INT64, 1, s->lengths.shape, s->lengths.data);
      CHECK(put(op, 0, in, "seq_lengths", l), "seq_lengths");
    }
    if (pass == 0) {
      for (int j = 0; j < s->nf; ++j) {
        poison(&s->acts[j], s->dt);
        out[j] = view(&s->acts[j], s->dt);
      }
      CHECK(blockrnn_run_op(op, in, (size_t)ni, attrs, na, out, (size_t)s->nf) == BLOCKRNN_OK, op);
    } else {
      const int index = blockrnn_op_find(k->op);
      for (int j = 0; j < s->nf; ++j) {
        CHECK(put(op, 0, in, blockrnn_op_output_name(index, j), view(&s->acts[j], s->dt)),
              "forward output");
      }
      if (k->lstm) CHECK(put(op, 0, in, "cs_grad", view(&s->cs_grad, s->dt)), "cs_grad");
      CHECK(put(op, 0, in, "h_grad", view(&s->h_grad, s->dt)), "h_grad");
      for (int j = 0; j < s->ng; ++j) {
        poison(&s->grads[j], s->dt);
        out[j] = view(&s->grads[j], s->dt);
      }
      CHECK(
          blockrnn_run_op(op, in, (size_t)ngi, grad_attrs, nga, out, (size_t)s->ng) == BLOCKRNN_OK,
          op);
    }
  }
}

/* The handle's call on the same inputs into `got` / `ggot`; a strided x when `strided`. */
/* Whether the grad op's output j is the gradient of x or of an initial state. */
static int is_input_grad(int grad_index, int j) {
  const char* name = blockrnn_op_output_name(grad_index, j);
  return strcmp(name, "x_grad") == 0 || strcmp(name, "cs_prev_grad") == 0 ||
         strcmp(name, "h_prev_grad") == 0;
}

/* The layer's forward and backward on `s`; without_input_grads: the backward's x_grad and
 * initial-state gradients (h_prev_grad, cs_prev_grad) absent, so not computed. */
static void run_handle(struct state* s, blockrnn_layer* layer, struct buf* got, struct buf* ggot,
                       int has_slm, int64_t slm, int with_lengths, int strided, void* ws,
                       size_t ws_bytes, int without_input_grads) {
  static const int64_t x_strides[] = {I, T * I, 1}; /* xt is [B, T, I] */
  blockrnn_layer_inputs in;
  blockrnn_layer_grad_inputs g;
  blockrnn_tensor out[MAX_OUT], fwd[MAX_OUT], gout[MAX_OUT];
  memset(&in, 0, sizeof in);
  in.x = view(&s->x, s->dt);
  if (strided) {
    in.x.data = s->xt.data;
    in.x.strides = x_strides;
  }
  if (s->k->lstm) in.cs_prev = view(&s->cs_prev, s->dt);
  in.h_prev = view(&s->h_prev, s->dt);
  if (with_lengths) {
    in.seq_lengths = dense_tensor(BLOCKRNN_INT64, 1, s->lengths.shape, s->lengths.data);
  }
  in.has_seq_len_max = has_slm;
  in.seq_len_max = slm;
  for (int j = 0; j < s->nf; ++j) {
    poison(&got[j], s->dt);
    out[j] = view(&got[j], s->dt);
    fwd[j] = view(&got[j], s->dt);
  }
  CHECK(blockrnn_layer_forward(layer, &in, out, (size_t)s->nf, ws, ws_bytes) == BLOCKRNN_OK,
        "blockrnn_layer_forward");
  memset(&g, 0, sizeof g);
  g.outputs = fwd;
  g.num_outputs = (size_t)s->nf;
  if (s->k->lstm) g.cs_grad = view(&s->cs_grad, s->dt);
  g.h_grad = view(&s->h_grad, s->dt);
  for (int j = 0; j < s->ng; ++j) {
    poison(&ggot[j], s->dt);
    gout[j] = view(&ggot[j], s->dt);
  }
  for (int j = 0; j < s->ng; ++j) {
    if (without_input_grads && is_input_grad(blockrnn_op_find(s->k->grad_op), j)) {
      memset(&gout[j], 0, sizeof gout[j]);
    }
  }
  /* The workspace holds nothing between calls: the backward's is poisoned first. */
  if (ws != NULL) memset(ws, 0xff, ws_bytes);
  CHECK(blockrnn_layer_backward(layer, &in, &g, gout, (size_t)s->ng, ws, ws_bytes) == BLOCKRNN_OK,
        "blockrnn_layer_backward");
}

static void set_weights(struct state* s, blockrnn_layer* layer, int step) {
  blockrnn_tensor p[MAX_PARAMS];
  const int n = s->k->lstm && !s->o.use_peephole ? 2 : s->k->num_params;
  for (int j = 0; j < s->k->num_params; ++j) {
    fill(&s->params[j], s->dt, 4.0 + step + j, 0.4);
    p[j] = view(&s->params[j], s->dt);
  }
  CHECK(blockrnn_layer_set_weights(layer, p, (size_t)n) == BLOCKRNN_OK, "set_weights");
}

static void check_case(const struct kind* k, int32_t dt, int peephole) {
  struct state s;
  blockrnn_layer *layer = NULL, *mine = NULL;
  const int fwd_index = blockrnn_op_find(k->op), grad_index = blockrnn_op_find(k->grad_op);
  char what[160];
  memset(&s, 0, sizeof s);
  s.k = k;
  s.dt = dt;
  s.nf = blockrnn_op_num_outputs(fwd_index);
  s.ng = blockrnn_op_num_outputs(grad_index);
  s.o = blockrnn_layer_default_options();
  s.o.kind = k->kind;
  s.o.dtype = dt;
  s.o.input_size = I;
  s.o.hidden_size = H;
  s.o.max_time = T;
  s.o.max_batch = B;
  s.o.use_peephole = peephole;
  if (k->kind == BLOCKRNN_LAYER_LSTM) {
    s.o.has_forget_bias = 1;
    s.o.forget_bias = 0.75;
    s.o.has_cell_clip = 1;
    s.o.cell_clip = 0.5;
  }
  snprintf(what, sizeof what, "%s %s%s", k->op, dtype_name(dt), peephole ? " peephole" : "");
  CHECK(blockrnn_layer_create(&s.o, &layer) == BLOCKRNN_OK, what);
  s.o.caller_workspace = 1;
  CHECK(blockrnn_layer_create(&s.o, &mine) == BLOCKRNN_OK, "create with caller_workspace");
  s.o.caller_workspace = 0;
  if (layer == NULL || mine == NULL) return;

  /* The parameters' shapes, as the layer reports them. */
  {
    int32_t n = 0;
    CHECK(blockrnn_layer_num_params(layer, &n) == BLOCKRNN_OK && n == k->num_params, "num_params");
    for (int j = 0; j < k->num_params; ++j) {
      blockrnn_shape shape;
      CHECK(blockrnn_layer_param_shape(layer, j, &shape) == BLOCKRNN_OK, "param_shape");
      make(&s.params[j], dt, shape.rank, shape.dims[0], shape.rank > 1 ? shape.dims[1] : 1, 1);
    }
  }
  make(&s.x, dt, 3, T, B, I);
  make(&s.xt, dt, 3, B, T, I);
  make(&s.cs_prev, dt, 2, B, H, 1);
  make(&s.h_prev, dt, 2, B, H, 1);
  make(&s.zeros_h, dt, 1, H, 1, 1);
  make(&s.cs_grad, dt, 3, T, B, H);
  make(&s.h_grad, dt, 3, T, B, H);
  make(&s.lengths, BLOCKRNN_INT64, 1, B, 1, 1);
  ((int64_t*)s.lengths.data)[0] = T;
  ((int64_t*)s.lengths.data)[1] = 2;
  ((int64_t*)s.lengths.data)[2] = 0;
  for (int j = 0; j < s.nf; ++j) {
    make(&s.acts[j], dt, 3, T, B, H);
    make(&s.got[j], dt, 3, T, B, H);
    make(&s.got2[j], dt, 3, T, B, H);
  }
  for (int j = 0; j < s.ng; ++j) {
    /* The grad op's output j has the shape of the input it differentiates. */
    const char* name = blockrnn_op_output_name(grad_index, j);
    const struct buf* like = &s.x;
    if (strcmp(name, "x_grad") != 0) {
      if (strcmp(name, "cs_prev_grad") == 0 || strcmp(name, "h_prev_grad") == 0) {
        like = &s.h_prev;
      } else {
        for (int p = 0; p < k->num_params; ++p) {
          const size_t len = strlen(k->params[p]);
          if (strncmp(name, k->params[p], len) == 0 && strcmp(name + len, "_grad") == 0) {
            like = &s.params[p];
          }
        }
      }
    }
    make(&s.grads[j], dt, like->rank, like->shape[0], like->shape[1], like->shape[2]);
    make(&s.ggot[j], dt, like->rank, like->shape[0], like->shape[1], like->shape[2]);
    make(&s.ggot2[j], dt, like->rank, like->shape[0], like->shape[1], like->shape[2]);
  }

  /* A call before set_weights is refused by the layer, naming it. */
  {
    char text[96];
    snprintf(text, sizeof text, "%s.forward: set_weights has not been called", k->name);
    blockrnn_layer_inputs in;
    blockrnn_tensor out[MAX_OUT];
    memset(&in, 0, sizeof in);
    in.x = view(&s.x, dt);
    in.h_prev = view(&s.h_prev, dt);
    if (k->lstm) in.cs_prev = view(&s.cs_prev, dt);
    for (int j = 0; j < s.nf; ++j) out[j] = view(&s.got[j], dt);
    expect_error(blockrnn_layer_forward(layer, &in, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "forward before set_weights");
  }

  /* Many calls on one handle. */
  CHECK(strcmp(blockrnn_op_output_name(grad_index, 0), "x_grad") == 0, "x_grad is output 0");
  for (int step = 0; step < STEPS; ++step) {
    const int has_slm = step % 3 == 1, with_lengths = step % 3 == 2, strided = step == 3;
    const int64_t slm = T - 2;
    size_t ws_bytes = 0;
    void* ws;
    fill(&s.x, dt, step, 1.0);
    for (int t = 0; t < T; ++t)
      for (int b = 0; b < B; ++b)
        memcpy((char*)s.xt.data + ((b * T + t) * I) * elem_size(dt),
               (char*)s.x.data + ((t * B + b) * I) * elem_size(dt), I * elem_size(dt));
    fill(&s.cs_prev, dt, 1.0 + step, 0.5);
    fill(&s.h_prev, dt, 2.0 + step, 0.5);
    fill(&s.cs_grad, dt, 3.0 + step, 0.7);
    fill(&s.h_grad, dt, 3.5 + step, 1.0);
    if (step % 2 == 0) {
      set_weights(&s, layer, step);
      set_weights(&s, mine, step);
    }
    run_one_shot(&s, has_slm, slm, with_lengths);
    run_handle(&s, layer, s.got, s.ggot, has_slm, slm, with_lengths, strided, NULL, 0, 0);
    /* A call's workspace is that of its seq_len_max; a 16-bit layer's, of x's T (it stages
     * every step of x and of the outputs through float32). */
    const int staged = dt == BLOCKRNN_FLOAT16 || dt == BLOCKRNN_BFLOAT16;
    CHECK(blockrnn_layer_workspace_bytes(mine, has_slm && !staged ? slm : T, B, &ws_bytes) ==
              BLOCKRNN_OK,
          "workspace_bytes");
    ws = malloc(ws_bytes + 8);
    memset(ws, 0xff, ws_bytes);
    /* Every other step without x_grad and the initial states' gradients: the parameters'
     * gradients keep their bits (in a caller workspace of exactly workspace_bytes). */
    const int without_input_grads = step % 2 == 1;
    run_handle(&s, mine, s.got2, s.ggot2, has_slm, slm, with_lengths, strided, ws, ws_bytes,
               without_input_grads);
    free(ws);
    for (int j = 0; j < s.nf; ++j) {
      char msg[200];
      snprintf(msg, sizeof msg, "%s step %d: %s bitwise the one-shot op's", what, step,
               blockrnn_op_output_name(fwd_index, j));
      CHECK(written(&s.acts[j], dt) && same(&s.got[j], &s.acts[j], dt), msg);
      CHECK(same(&s.got2[j], &s.acts[j], dt), "caller workspace: forward, same bits");
    }
    for (int j = 0; j < s.ng; ++j) {
      char msg[200];
      snprintf(msg, sizeof msg, "%s step %d: %s bitwise the grad op's", what, step,
               blockrnn_op_output_name(grad_index, j));
      CHECK(written(&s.grads[j], dt) && same(&s.ggot[j], &s.grads[j], dt), msg);
      if (without_input_grads && is_input_grad(grad_index, j)) {
        CHECK(!written(&s.ggot2[j], dt), "without an input's gradient: its buffer is not written");
      } else {
        CHECK(same(&s.ggot2[j], &s.grads[j], dt), "caller workspace: backward, same bits");
      }
    }
  }

  /* Errors of the per-call arguments, on a handle with weights. */
  {
    blockrnn_layer_inputs in, bad;
    blockrnn_layer_grad_inputs g;
    blockrnn_tensor out[MAX_OUT], gout[MAX_OUT];
    static const int64_t s_wide[] = {T, B, I + 1}, s_long[] = {T + 1, B, I};
    static const int64_t out_strides[] = {1, T, T * B};
    static double x_wide[T * B * (I + 1)], x_long[(T + 1) * B * I];
    char text[160];
    size_t ws_bytes = 0;
    memset(&in, 0, sizeof in);
    in.x = view(&s.x, dt);
    in.h_prev = view(&s.h_prev, dt);
    if (k->lstm) in.cs_prev = view(&s.cs_prev, dt);
    for (int j = 0; j < s.nf; ++j) out[j] = view(&s.got[j], dt);
    for (int j = 0; j < s.ng; ++j) gout[j] = view(&s.ggot[j], dt);
    memset(&g, 0, sizeof g);
    g.outputs = out;
    g.num_outputs = (size_t)s.nf;
    if (k->lstm) g.cs_grad = view(&s.cs_grad, dt);
    g.h_grad = view(&s.h_grad, dt);

    bad = in;
    bad.x.shape = s_wide;
    bad.x.data = x_wide;
    snprintf(text, sizeof text, "%s.forward: x must have shape [5, 3, 4]", k->name);
    expect_error(blockrnn_layer_forward(layer, &bad, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "x of the wrong shape");
    bad.x.shape = s_long;
    bad.x.data = x_long;
    snprintf(text, sizeof text, "%s.forward: x has 6 time steps", k->name);
    expect_error(blockrnn_layer_forward(layer, &bad, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "T past max_time");
    bad = in;
    bad.h_prev.dtype = dt == BLOCKRNN_FLOAT32 ? BLOCKRNN_FLOAT64 : BLOCKRNN_FLOAT32;
    snprintf(text, sizeof text, "%s.forward: h_prev must have dtype", k->name);
    expect_error(blockrnn_layer_forward(layer, &bad, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "h_prev of the wrong dtype");
    bad = in;
    bad.has_seq_len_max = 1;
    bad.seq_len_max = T + 1;
    snprintf(text, sizeof text, "%s.forward: seq_len_max must be between 0 and 5", k->name);
    expect_error(blockrnn_layer_forward(layer, &bad, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "seq_len_max past T");
    bad = in;
    ((int64_t*)s.lengths.data)[1] = T + 7;
    bad.seq_lengths = dense_tensor(BLOCKRNN_INT64, 1, s.lengths.shape, s.lengths.data);
    snprintf(text, sizeof text, "%s.backward: seq_lengths must be between 0 and 5", k->name);
    expect_error(blockrnn_layer_backward(layer, &bad, &g, gout, (size_t)s.ng, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "seq_lengths past T");
    ((int64_t*)s.lengths.data)[1] = 2;
    bad = in;
    bad.h_prev = absent();
    snprintf(text, sizeof text, "%s.forward: h_prev must have shape [3, 3]", k->name);
    expect_error(blockrnn_layer_forward(layer, &bad, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "h_prev absent");

    expect_error(blockrnn_layer_forward(layer, &in, out, (size_t)s.nf - 1, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_forward: num_outputs must be",
                 "too few outputs");
    expect_error(blockrnn_layer_forward(layer, &in, NULL, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_forward: outputs is NULL",
                 "outputs NULL");
    expect_error(blockrnn_layer_forward(layer, NULL, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_forward: inputs is NULL",
                 "inputs NULL");
    expect_error(blockrnn_layer_backward(layer, &in, NULL, gout, (size_t)s.ng, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_backward: grads is NULL", "grads NULL");
    g.num_outputs = 2;
    expect_error(blockrnn_layer_backward(layer, &in, &g, gout, (size_t)s.ng, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_backward: grads->num_outputs must be",
                 "grads->num_outputs");
    g.num_outputs = (size_t)s.nf;
    g.h_grad.dtype = BLOCKRNN_INT64;
    snprintf(text, sizeof text, "%s.backward: h_grad must have dtype", k->name);
    expect_error(blockrnn_layer_backward(layer, &in, &g, gout, (size_t)s.ng, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "h_grad int64");
    g.h_grad.dtype = dt;
    /* An output on an input. */
    out[s.nf - 1].data = s.x.data;
    snprintf(text, sizeof text, "%s.forward: output h overlaps input x", k->name);
    expect_error(blockrnn_layer_forward(layer, &in, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "output on an input");
    out[s.nf - 1] = view(&s.got[s.nf - 1], dt);
    out[0].strides = out_strides;
    expect_error(blockrnn_layer_forward(layer, &in, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_forward: outputs[0]", "strided output");
    out[0].strides = NULL;
    if (!k->lstm) {
      bad = in;
      bad.cs_prev = view(&s.h_prev, dt);
      expect_error(blockrnn_layer_forward(layer, &bad, out, (size_t)s.nf, NULL, 0),
                   BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_forward: cs_prev must be absent",
                   "cs_prev in a GRU kind");
      g.cs_grad = view(&s.h_grad, dt);
      expect_error(blockrnn_layer_backward(layer, &in, &g, gout, (size_t)s.ng, NULL, 0),
                   BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_backward: cs_grad must be absent",
                   "cs_grad in a GRU kind");
      g.cs_grad = absent();
    }

    /* The caller's workspace: required with caller_workspace, at least workspace_bytes,
     * aligned, and on no tensor of the call. */
    CHECK(blockrnn_layer_workspace_bytes(mine, T, B, &ws_bytes) == BLOCKRNN_OK && ws_bytes > 0,
          "workspace_bytes(T, B)");
    snprintf(text, sizeof text, "%s.forward: the layer was created with caller_workspace", k->name);
    expect_error(blockrnn_layer_forward(mine, &in, out, (size_t)s.nf, NULL, 0),
                 BLOCKRNN_INVALID_ARGUMENT, text, "no workspace with caller_workspace");
    {
      char* ws = malloc(ws_bytes + 16);
      snprintf(text, sizeof text, "%s.backward: the workspace has", k->name);
      expect_error(blockrnn_layer_backward(mine, &in, &g, gout, (size_t)s.ng, ws, ws_bytes - 1),
                   BLOCKRNN_INVALID_ARGUMENT, text, "short workspace");
      snprintf(text, sizeof text, "%s.forward: the workspace must be aligned", k->name);
      expect_error(blockrnn_layer_forward(mine, &in, out, (size_t)s.nf, ws + 1, ws_bytes),
                   BLOCKRNN_INVALID_ARGUMENT, text, "misaligned workspace");
      CHECK(blockrnn_layer_forward(mine, &in, out, (size_t)s.nf, ws, ws_bytes) == BLOCKRNN_OK,
            "the handle still runs after refused calls");
      free(ws);
    }
    snprintf(text, sizeof text, "%s.forward: the workspace overlaps", k->name);
    expect_error(blockrnn_layer_forward(mine, &in, out, (size_t)s.nf, s.x.data, ws_bytes),
                 BLOCKRNN_INVALID_ARGUMENT, "overlaps", "workspace on an input");
    snprintf(text, sizeof text, "%s.workspace_bytes: T and B must be in [0, 5]", k->name);
    expect_error(blockrnn_layer_workspace_bytes(mine, T + 1, B, &ws_bytes),
                 BLOCKRNN_INVALID_ARGUMENT, text, "workspace_bytes past max_time");

    /* set_weights: counts, shapes and dtypes. */
    {
      blockrnn_tensor p[MAX_PARAMS + 1];
      for (int j = 0; j < k->num_params; ++j) p[j] = view(&s.params[j], dt);
      p[k->num_params] = p[0];
      expect_error(blockrnn_layer_set_weights(layer, p, (size_t)k->num_params + 1),
                   BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_set_weights: the layer takes at most",
                   "too many params");
      snprintf(text, sizeof text, "%s.set_weights: %s must have shape", k->name, k->params[1]);
      expect_error(blockrnn_layer_set_weights(layer, p, 1), BLOCKRNN_INVALID_ARGUMENT, text,
                   "a missing param");
      p[0].dtype = dt == BLOCKRNN_FLOAT32 ? BLOCKRNN_FLOAT64 : BLOCKRNN_FLOAT32;
      snprintf(text, sizeof text, "%s.set_weights: %s must have dtype", k->name, k->params[0]);
      expect_error(blockrnn_layer_set_weights(layer, p, (size_t)k->num_params),
                   BLOCKRNN_INVALID_ARGUMENT, text, "a param of the wrong dtype");
      expect_error(blockrnn_layer_set_weights(layer, NULL, 2), BLOCKRNN_INVALID_ARGUMENT,
                   "blockrnn_layer_set_weights: params is NULL", "params NULL");
    }
  }

  blockrnn_layer_free(layer);
  blockrnn_layer_free(mine);
  free(s.x.data);
  free(s.xt.data);
  free(s.cs_prev.data);
  free(s.h_prev.data);
  free(s.zeros_h.data);
  free(s.cs_grad.data);
  free(s.h_grad.data);
  free(s.lengths.data);
  for (int j = 0; j < k->num_params; ++j) free(s.params[j].data);
  for (int j = 0; j < s.nf; ++j) {
    free(s.acts[j].data);
    free(s.got[j].data);
    free(s.got2[j].data);
  }
  for (int j = 0; j < s.ng; ++j) {
    free(s.grads[j].data);
    free(s.ggot[j].data);
    free(s.ggot2[j].data);
  }
}

/* ---- One call at a time per handle ---------------------------------------------------------
 * A forward runs on a second thread and is held inside its cancel check (asked between steps);
 * meanwhile set_weights and a forward on the same handle from this thread are refused by the
 * layer object, then the first call finishes and the handle runs again. */

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
  blockrnn_layer* layer;
  blockrnn_layer_inputs in;
  blockrnn_tensor out[5];
  blockrnn_status status;
};

static int run_forward(void* arg) {
  struct job* j = (struct job*)arg;
  blockrnn_set_cancel_check(hold_in_check, NULL);
  j->status = blockrnn_layer_forward(j->layer, &j->in, j->out, 5, NULL, 0);
  blockrnn_set_cancel_check(NULL, NULL);
  atomic_store(&g_finished, 1);
  atomic_store(&g_inside, 1); /* in case the check was never asked */
  return 0;
}

static void test_one_call_at_a_time(void) {
  static const int64_t s_x[] = {LONG_T, 1, 1}, s_st[] = {1, 1}, s_w[] = {1, 3}, s_b[] = {3};
  static float x[LONG_T], acts[5][LONG_T], h0[1], wi[3], wh[3], bi[3], bh[3];
  blockrnn_layer_options o = blockrnn_layer_default_options();
  blockrnn_tensor p[4];
  struct job j;
  thrd_t worker;
  blockrnn_status second, weights;
  o.kind = BLOCKRNN_LAYER_GRU_RESET_AFTER;
  o.input_size = 1;
  o.hidden_size = 1;
  o.max_time = LONG_T;
  memset(&j, 0, sizeof j);
  CHECK(blockrnn_layer_create(&o, &j.layer) == BLOCKRNN_OK, "create long GRU");
  if (j.layer == NULL) return;
  p[0] = dense_tensor(BLOCKRNN_FLOAT32, 2, s_w, wi);
  p[1] = dense_tensor(BLOCKRNN_FLOAT32, 2, s_w, wh);
  p[2] = dense_tensor(BLOCKRNN_FLOAT32, 1, s_b, bi);
  p[3] = dense_tensor(BLOCKRNN_FLOAT32, 1, s_b, bh);
  CHECK(blockrnn_layer_set_weights(j.layer, p, 4) == BLOCKRNN_OK, "set_weights long GRU");
  j.in.x = dense_tensor(BLOCKRNN_FLOAT32, 3, s_x, x);
  j.in.h_prev = dense_tensor(BLOCKRNN_FLOAT32, 2, s_st, h0);
  for (int k = 0; k < 5; ++k) j.out[k] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_x, acts[k]);
  CHECK(thrd_create(&worker, run_forward, &j) == thrd_success, "thrd_create");
  while (!atomic_load(&g_inside)) {
  }
  second = blockrnn_layer_forward(j.layer, &j.in, j.out, 5, NULL, 0);
  expect_error(second, BLOCKRNN_INVALID_ARGUMENT,
               "GRUResetAfterLayer.forward: another call on this object is running",
               "a second forward");
  weights = blockrnn_layer_set_weights(j.layer, p, 4);
  expect_error(weights, BLOCKRNN_INVALID_ARGUMENT,
               "GRUResetAfterLayer.set_weights: another call on this object is running",
               "set_weights during a forward");
  CHECK(!atomic_load(&g_finished), "the first forward was held while the others were tried");
  atomic_store(&g_tried, 1);
  thrd_join(worker, NULL);
  CHECK(j.status == BLOCKRNN_OK, "the first forward finished");
  CHECK(blockrnn_layer_forward(j.layer, &j.in, j.out, 5, NULL, 0) == BLOCKRNN_OK,
        "the handle is free again");
  blockrnn_layer_free(j.layer);
}

/* ---- Errors at creation and NULL pointers ------------------------------------------------- */

static void test_create_errors(void) {
  blockrnn_layer_options o = blockrnn_layer_default_options();
  blockrnn_layer* layer = NULL;
  blockrnn_layer_inputs in;
  blockrnn_shape shape;
  size_t bytes = 0;
  int32_t n = 0;
  memset(&in, 0, sizeof in);
  o.input_size = I;
  o.hidden_size = H;
  expect_error(blockrnn_layer_create(NULL, &layer), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_create: options is NULL", "options NULL");
  expect_error(blockrnn_layer_create(&o, NULL), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_create: out is NULL", "out NULL");
  o.kind = 9;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_create: options->kind 9 is not a blockrnn_layer_kind", "bad kind");
  o.kind = BLOCKRNN_LAYER_GRU;
  o.dtype = 9;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_create: options->dtype: dtype 9", "dtype 9");
  o.dtype = BLOCKRNN_FLOAT16; /* the 16-bit layers stage through float32, as the ops do */
  layer = NULL;
  if (blockrnn_layer_create(&o, &layer) != BLOCKRNN_OK || layer == NULL) {
    fprintf(stderr, "FAIL float16 layer: %s\n", blockrnn_last_error());
    ++g_failures;
  }
  blockrnn_layer_free(layer);
  layer = NULL;
  o.dtype = BLOCKRNN_FLOAT32;
  o.hidden_size = 0;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_INVALID_ARGUMENT,
               "GRULayer.create: hidden_size must be >= 1, got 0", "hidden_size 0");
  o.hidden_size = H;
  o.input_size = -3;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_INVALID_ARGUMENT,
               "GRULayer.create: input_size must be >= 0, got -3", "input_size -3");
  o.input_size = INT64_C(1) << 40;
  o.hidden_size = INT64_C(1) << 40;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_RESOURCE_EXHAUSTED,
               "GRULayer.create: input_size 1099511627776 and hidden_size 1099511627776 are too "
               "large",
               "huge sizes");
  o.input_size = I;
  o.hidden_size = H;
  o.max_time = INT64_MAX;
  o.max_batch = INT64_MAX;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_RESOURCE_EXHAUSTED,
               "GRULayer.create: max_time 9223372036854775807 and max_batch", "huge max_time");
  o.max_time = 1;
  o.max_batch = 1;
  o.input_size = 4096;
  o.hidden_size = 4096;
  blockrnn_set_memory_limit(1 << 20);
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_RESOURCE_EXHAUSTED, "GRULayer.create",
               "weights over the memory limit");
  blockrnn_set_memory_limit(0);
  o.input_size = I;
  o.hidden_size = H;
  o.kind = BLOCKRNN_LAYER_LSTM_V2;
  o.has_forget_bias = 1;
  o.forget_bias = 1.0;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_INVALID_ARGUMENT,
               "LSTMLayer(V2).create: forget_bias must be unset or 0", "V2 forget_bias");
  o.kind = BLOCKRNN_LAYER_LSTM;
  o.has_cell_clip = 1;
  o.cell_clip = 1e300;
  expect_error(blockrnn_layer_create(&o, &layer), BLOCKRNN_INVALID_ARGUMENT, "cell_clip",
               "cell_clip past float32");
  CHECK(layer == NULL, "*out untouched on failure");

  expect_error(blockrnn_layer_forward(NULL, &in, NULL, 0, NULL, 0), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_forward: layer is NULL", "forward NULL layer");
  expect_error(blockrnn_layer_backward(NULL, &in, NULL, NULL, 0, NULL, 0),
               BLOCKRNN_INVALID_ARGUMENT, "blockrnn_layer_backward: layer is NULL",
               "backward NULL layer");
  expect_error(blockrnn_layer_set_weights(NULL, NULL, 0), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_set_weights: layer is NULL", "set_weights NULL layer");
  expect_error(blockrnn_layer_num_params(NULL, &n), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_num_params: layer is NULL", "num_params NULL layer");
  expect_error(blockrnn_layer_workspace_bytes(NULL, 1, 1, &bytes), BLOCKRNN_INVALID_ARGUMENT,
               "blockrnn_layer_workspace_bytes: layer is NULL", "workspace_bytes NULL layer");
  o = blockrnn_layer_default_options();
  o.input_size = I;
  o.hidden_size = H;
  CHECK(blockrnn_layer_create(&o, &layer) == BLOCKRNN_OK, "create LSTM V2");
  if (layer != NULL) {
    expect_error(blockrnn_layer_param_shape(layer, 5, &shape), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_layer_param_shape: k must be in [0, 5)", "param_shape k");
    expect_error(blockrnn_layer_workspace_bytes(layer, 1, 1, NULL), BLOCKRNN_INVALID_ARGUMENT,
                 "blockrnn_layer_workspace_bytes: bytes is NULL", "bytes NULL");
    expect_error(blockrnn_layer_set_weights(layer, NULL, 0), BLOCKRNN_INVALID_ARGUMENT,
                 "LSTMLayer(V2).set_weights: w must have shape", "no params");
    CHECK(blockrnn_layer_num_params(layer, &n) == BLOCKRNN_OK && n == 5, "num_params");
    CHECK(strcmp(blockrnn_last_error(), "") == 0, "success clears the last error");
  }
  blockrnn_layer_free(layer);
  blockrnn_layer_free(NULL);
}

int main(void) {
  check_case(&kKinds[0], BLOCKRNN_FLOAT32, 1); /* BlockLSTM, peepholes, forget_bias, cell_clip */
  check_case(&kKinds[0], BLOCKRNN_FLOAT64, 0);
  check_case(&kKinds[1], BLOCKRNN_FLOAT32, 0); /* BlockLSTMV2 */
  check_case(&kKinds[1], BLOCKRNN_FLOAT64, 1);
  check_case(&kKinds[2], BLOCKRNN_FLOAT32, 0); /* BlockGRU */
  check_case(&kKinds[2], BLOCKRNN_FLOAT64, 0);
  check_case(&kKinds[3], BLOCKRNN_FLOAT32, 0); /* BlockGRUResetAfter */
  check_case(&kKinds[3], BLOCKRNN_FLOAT64, 0);
  /* The 16-bit layers: each kind in float16 and bfloat16, bitwise the 16-bit ops. */
  check_case(&kKinds[0], BLOCKRNN_FLOAT16, 1);
  check_case(&kKinds[0], BLOCKRNN_BFLOAT16, 0);
  check_case(&kKinds[1], BLOCKRNN_BFLOAT16, 1);
  check_case(&kKinds[1], BLOCKRNN_FLOAT16, 0);
  check_case(&kKinds[2], BLOCKRNN_FLOAT16, 0);
  check_case(&kKinds[2], BLOCKRNN_BFLOAT16, 0);
  check_case(&kKinds[3], BLOCKRNN_FLOAT16, 0);
  check_case(&kKinds[3], BLOCKRNN_BFLOAT16, 0);
  test_one_call_at_a_time();
  test_create_errors();
  return checks_result("c_api_layer");
}
