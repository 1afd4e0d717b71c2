/* Model files through the C API (blockrnn_model_*): a one-layer GRU (reset-after) model file
 * built here in memory is loaded from the buffer and from a file; its sizes and states are
 * queried; its forward, with lengths and an initial state, gives the bits of the BlockGRUResetAfter
 * op on the same weights (the model runs the same kernels), and its final state is each
 * example's h at its last step; broken files and bad arguments are BLOCKRNN_INVALID_ARGUMENT
 * with a message naming the file and field, or the argument. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "blockrnn/c_api.h"
#include "c_test_util.h"

enum { T = 4, B = 2, I = 2, H = 3, DATA = 252 };

/* The header: the configuration under __metadata__.blockrnn, then b_h [9], b_i [9], w_h [3, 9],
 * w_i [2, 9] one after the other in the data section. */
static const char kHeader[] =
    "{\"__metadata__\":{\"blockrnn\":\"{\\\"format\\\":\\\"blockrnn-model\\\",\\\"version\\\""
    ":1,\\\"dtype\\\":\\\"float32\\\",\\\"input_size\\\":2,\\\"return_sequences\\\":true,\\\""
    "masking\\\":null,\\\"layers\\\":[{\\\"kind\\\":\\\"BlockGRUResetAfter\\\",\\\"hidden_siz"
    "e\\\":3,\\\"directions\\\":1,\\\"merge\\\":null,\\\"go_backwards\\\":false,\\\"padded_ou"
    "tput\\\":\\\"zero\\\"}],\\\"source\\\":{}}\"},\"layers.0.0.b_h\":{\"dtype\":\"F32\",\"sh"
    "ape\":[9],\"data_offsets\":[0,36]},\"layers.0.0.b_i\":{\"dtype\":\"F32\",\"shape\":[9],\""
    "data_offsets\":[36,72]},\"layers.0.0.w_h\":{\"dtype\":\"F32\",\"shape\":[3,9],\"data_off"
    "sets\":[72,180]},\"layers.0.0.w_i\":{\"dtype\":\"F32\",\"shape\":[2,9],\"data_offsets\":"
    "[180,252]}}";

static unsigned char g_file[8 + sizeof kHeader + DATA];
static size_t g_size;
static float g_weights[DATA / 4]; /* b_h, b_i, w_h, w_i */

static void build_file(void) {
  const uint64_t n = sizeof kHeader - 1;
  int k;
  for (k = 0; k < 8; ++k) g_file[k] = (unsigned char)(n >> (8 * k));
  memcpy(g_file + 8, kHeader, n);
  for (k = 0; k < DATA / 4; ++k) g_weights[k] = 0.037f * (float)(k % 23) - 0.4f;
  memcpy(g_file + 8 + n, g_weights, DATA); /* little-endian host (x86-64, aarch64) */
  g_size = 8 + n + DATA;
}

static const int64_t s_x[] = {T, B, I}, s_state[] = {B, H}, s_seq[] = {T, B, H}, s_len[] = {B},
                     s_wi[] = {I, 3 * H}, s_wh[] = {H, 3 * H}, s_b[] = {3 * H};

int main(void) {
  blockrnn_model* model = NULL;
  float x[T * B * I], h0[B * H], y[T * B * H], h_final[B * H];
  int64_t lengths[B] = {4, 2};
  int k;
  build_file();
  for (k = 0; k < T * B * I; ++k) x[k] = 0.1f * (float)(k % 7) - 0.3f;
  for (k = 0; k < B * H; ++k) h0[k] = 0.2f * (float)k - 0.5f;

  CHECK(blockrnn_model_load_buffer(g_file, g_size, "gru.safetensors", &model) == BLOCKRNN_OK,
        "load_buffer");
  CHECK(model != NULL, "model");
  CHECK(blockrnn_model_dtype(model) == BLOCKRNN_FLOAT32, "dtype");
  CHECK(blockrnn_model_input_size(model) == I, "input_size");
  CHECK(blockrnn_model_output_size(model) == H, "output_size");
  CHECK(blockrnn_model_num_states(model) == 1, "num_states");
  {
    int64_t layer = -1, hidden = -1;
    int32_t direction = -1;
    const char* name = NULL;
    blockrnn_shape shape;
    CHECK(blockrnn_model_state_info(model, 0, &layer, &direction, &name, &hidden) == BLOCKRNN_OK,
          "state_info");
    CHECK(layer == 0 && direction == 0 && name != NULL && strcmp(name, "h") == 0 && hidden == H,
          "state_info values");
    CHECK(
        blockrnn_model_state_info(model, 1, NULL, NULL, NULL, NULL) == BLOCKRNN_INVALID_ARGUMENT &&
            strstr(blockrnn_last_error(), "k must be in [0, 1), got 1") != NULL,
        "state_info out of range");
    CHECK(blockrnn_model_output_shape(model, T, B, &shape) == BLOCKRNN_OK && shape.rank == 3 &&
              shape.dims[0] == T && shape.dims[1] == B && shape.dims[2] == H,
          "output_shape");
    CHECK(strstr(blockrnn_model_summary(model), "BlockGRUResetAfter H=3") != NULL, "summary");
  }

  /* The forward against the op. */
  {
    blockrnn_tensor xt = dense_tensor(BLOCKRNN_FLOAT32, 3, s_x, x);
    blockrnn_tensor lt = dense_tensor(BLOCKRNN_INT64, 1, s_len, lengths);
    blockrnn_tensor init = dense_tensor(BLOCKRNN_FLOAT32, 2, s_state, h0);
    blockrnn_tensor yt = dense_tensor(BLOCKRNN_FLOAT32, 3, s_seq, y);
    blockrnn_tensor fin = dense_tensor(BLOCKRNN_FLOAT32, 2, s_state, h_final);
    static int64_t seq_len_max = T;
    static float r[T * B * H], u[T * B * H], n[T * B * H], hn[T * B * H], h[T * B * H];
    blockrnn_tensor in[8], out[5];
    int b, j;
    CHECK(blockrnn_model_forward(model, &xt, &lt, &init, 1, &yt, &fin, 1) == BLOCKRNN_OK,
          "forward");
    in[0] = dense_tensor(BLOCKRNN_INT64, 0, NULL, &seq_len_max);
    in[1] = xt;
    in[2] = init;
    in[3] = dense_tensor(BLOCKRNN_FLOAT32, 2, s_wi, g_weights + 9 + 9 + 27);
    in[4] = dense_tensor(BLOCKRNN_FLOAT32, 2, s_wh, g_weights + 9 + 9);
    in[5] = dense_tensor(BLOCKRNN_FLOAT32, 1, s_b, g_weights + 9);
    in[6] = dense_tensor(BLOCKRNN_FLOAT32, 1, s_b, g_weights);
    in[7] = lt;
    out[0] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_seq, r);
    out[1] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_seq, u);
    out[2] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_seq, n);
    out[3] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_seq, hn);
    out[4] = dense_tensor(BLOCKRNN_FLOAT32, 3, s_seq, h);
    CHECK(blockrnn_run_op("BlockGRUResetAfter", in, 8, NULL, 0, out, 5) == BLOCKRNN_OK, "op");
    CHECK(memcmp(y, h, sizeof y) == 0, "the model's y is the op's h");
    for (b = 0; b < B; ++b) {
      for (j = 0; j < H; ++j) {
        CHECK(h_final[b * H + j] == h[((lengths[b] - 1) * B + b) * H + j], "final state");
      }
    }

    /* Bad arguments. */
    {
      const int64_t s_bad[] = {T, B, I + 1};
      blockrnn_tensor bad = dense_tensor(BLOCKRNN_FLOAT32, 3, s_bad, x);
      CHECK(blockrnn_model_forward(model, &bad, NULL, NULL, 0, &yt, NULL, 0) ==
                    BLOCKRNN_INVALID_ARGUMENT &&
                strstr(blockrnn_last_error(),
                       "Model.forward: x must have shape [T, B, 2] (time, batch, input_size), "
                       "got [4, 2, 3]") != NULL,
            "x of the wrong size");
      CHECK(blockrnn_model_forward(NULL, &xt, NULL, NULL, 0, &yt, NULL, 0) ==
                    BLOCKRNN_INVALID_ARGUMENT &&
                strstr(blockrnn_last_error(), "model is NULL") != NULL,
            "NULL model");
      CHECK(blockrnn_model_forward(model, &xt, NULL, NULL, 2, &yt, NULL, 0) ==
                    BLOCKRNN_INVALID_ARGUMENT &&
                strstr(blockrnn_last_error(), "initial_states is NULL") != NULL,
            "NULL initial states with a count");
    }
  }
  blockrnn_model_free(model);

  /* From a file, and broken files. */
  {
    const char* path = "blockrnn_test_c_api_model.safetensors";
    FILE* f = fopen(path, "wb");
    CHECK(f != NULL, "fopen");
    if (f != NULL) {
      fwrite(g_file, 1, g_size, f);
      fclose(f);
      model = NULL;
      CHECK(blockrnn_model_load(path, &model) == BLOCKRNN_OK && model != NULL, "load");
      blockrnn_model_free(model);
      remove(path);
    }
    CHECK(blockrnn_model_load("no/such/file.safetensors", &model) == BLOCKRNN_INVALID_ARGUMENT &&
              model == NULL &&
              strstr(blockrnn_last_error(), "no/such/file.safetensors: cannot open") != NULL,
          "missing file");
    CHECK(blockrnn_model_load_buffer(g_file, g_size - 4, "cut", &model) ==
                  BLOCKRNN_INVALID_ARGUMENT &&
              strstr(blockrnn_last_error(), "cut: tensor 'layers.0.0.w_i'.data_offsets") != NULL,
          "truncated file");
    CHECK(blockrnn_model_load_buffer(g_file, 5, NULL, &model) == BLOCKRNN_INVALID_ARGUMENT &&
              strstr(blockrnn_last_error(), "buffer: header: the file has 5 bytes") != NULL,
          "five bytes");
    blockrnn_model_free(NULL);
  }
  return checks_result("c_api_model");
}
