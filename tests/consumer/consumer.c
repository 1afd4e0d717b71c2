/* Uses an installed blockrnn through its C API (C11): lists the ops, runs GRUBlockCell, and runs
 * BlockGRU through a layer handle (blockrnn/layer_c_api.h). */
#include <blockrnn/c_api.h>
#include <blockrnn/layer_c_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  if (strcmp(blockrnn_version(), BLOCKRNN_VERSION_STRING) != 0) return 1;
  for (int k = 0; k < blockrnn_op_count(); ++k) printf("%s ", blockrnn_op_name(k));
  printf("\n");
  enum { B = 1, I = 2, H = 2 };
  float x[B * I] = {1.f, -1.f}, h_prev[B * H] = {0.5f, 0.25f}, w_ru[(I + H) * 2 * H] = {0},
              w_c[(I + H) * H] = {0}, b_ru[2 * H] = {0}, b_c[H] = {0}, out[4][B * H];
  const int64_t s_bi[] = {B, I}, s_bh[] = {B, H}, s_wru[] = {I + H, 2 * H}, s_wc[] = {I + H, H},
                s_2h[] = {2 * H}, s_h[] = {H};
  const blockrnn_tensor in[6] = {
      {BLOCKRNN_FLOAT32, 2, s_bi, NULL, x},     {BLOCKRNN_FLOAT32, 2, s_bh, NULL, h_prev},
      {BLOCKRNN_FLOAT32, 2, s_wru, NULL, w_ru}, {BLOCKRNN_FLOAT32, 2, s_wc, NULL, w_c},
      {BLOCKRNN_FLOAT32, 1, s_2h, NULL, b_ru},  {BLOCKRNN_FLOAT32, 1, s_h, NULL, b_c}};
  blockrnn_tensor outs[4];
  for (int k = 0; k < 4; ++k) {
    blockrnn_tensor t = {BLOCKRNN_FLOAT32, 2, s_bh, NULL, out[k]};
    outs[k] = t;
  }
  blockrnn_status s = blockrnn_run_op("GRUBlockCell", in, 6, NULL, 0, outs, 4);
  if (s != BLOCKRNN_OK) {
    fprintf(stderr, "%s\n", blockrnn_last_error());
    return 1;
  }
  /* Zero weights and biases: r = u = 1/2, c = 0, h = h_prev / 2. */
  for (int k = 0; k < B * H; ++k) {
    if (fabsf(out[3][k] - 0.5f * h_prev[k]) > 1e-6f) return 1;
  }
  s = blockrnn_run_op("GRUBlockCell", in, 5, NULL, 0, outs, 4);
  printf("5 inputs: %s: %s\n", blockrnn_status_name(s), blockrnn_last_error());
  if (s != BLOCKRNN_INVALID_ARGUMENT) return 1;
  /* A layer handle: BlockGRU with zero weights over one step gives the same h = h_prev / 2. */
  {
    blockrnn_layer_options o = blockrnn_layer_default_options();
    blockrnn_layer* layer = NULL;
    const int64_t s_x[] = {1, B, I}, s_tbh[] = {1, B, H};
    float acts[4][B * H];
    blockrnn_layer_inputs li;
    blockrnn_tensor louts[4];
    o.kind = BLOCKRNN_LAYER_GRU;
    o.input_size = I;
    o.hidden_size = H;
    if (blockrnn_layer_create(&o, &layer) != BLOCKRNN_OK ||
        blockrnn_layer_set_weights(layer, in + 2, 4) != BLOCKRNN_OK) {
      fprintf(stderr, "%s\n", blockrnn_last_error());
      return 1;
    }
    memset(&li, 0, sizeof li);
    li.x = in[0];
    li.x.rank = 3;
    li.x.shape = s_x;
    li.h_prev = in[1];
    for (int k = 0; k < 4; ++k) {
      blockrnn_tensor t = {BLOCKRNN_FLOAT32, 3, s_tbh, NULL, acts[k]};
      louts[k] = t;
    }
    s = blockrnn_layer_forward(layer, &li, louts, 4, NULL, 0);
    blockrnn_layer_free(layer);
    if (s != BLOCKRNN_OK) {
      fprintf(stderr, "%s\n", blockrnn_last_error());
      return 1;
    }
    for (int k = 0; k < B * H; ++k) {
      if (acts[3][k] != out[3][k]) return 1;
    }
  }
  printf("consumer_c: blockrnn %s ok\n", blockrnn_version());
  return 0;
}
