/* model_run: runs model files through the C API (blockrnn_model_load / _forward / _free), for
 * tests/python/test_model_languages.py, which compares the results with the source framework's
 * outputs on every model of the model zoo.
 *
 *   model_run MODEL X T B LENGTHS OUT_DIR [MODEL X T B LENGTHS OUT_DIR ...]
 *
 * X is x [T, B, I] as raw little-endian values of the model's dtype; LENGTHS is seq_lengths [B]
 * as raw little-endian int64, or "-" for none. Writes OUT_DIR/y.bin (raw, the model's dtype) and
 * one OUT_DIR/states.<layer>.<direction>.<cs|h>.bin per final state. Several models in one call
 * spare the test a process start per model. Exit status 1, with the C API's message on stderr,
 * on the first failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockrnn/c_api.h"
#include "c_test_util.h"

/* Reads exactly size bytes of path into a new buffer; NULL (with a message) otherwise. */
static void* read_exactly(const char* path, size_t size) {
  FILE* f = fopen(path, "rb");
  void* data;
  long actual;
  if (f == NULL) {
    fprintf(stderr, "model_run: %s: cannot open\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  actual = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (actual < 0 || (size_t)actual != size) {
    fprintf(stderr, "model_run: %s: expected %zu bytes, got %ld\n", path, size, actual);
    fclose(f);
    return NULL;
  }
  data = malloc(size > 0 ? size : 1);
  if (data == NULL || fread(data, 1, size, f) != size) {
    fprintf(stderr, "model_run: %s: cannot read\n", path);
    free(data);
    data = NULL;
  }
  fclose(f);
  return data;
}

static int write_file(const char* dir, const char* name, const void* data, size_t size) {
  char path[4096];
  FILE* f;
  int ok;
  if (snprintf(path, sizeof path, "%s/%s.bin", dir, name) >= (int)sizeof path) {
    fprintf(stderr, "model_run: %s: path too long\n", dir);
    return 0;
  }
  f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "model_run: %s: cannot create\n", path);
    return 0;
  }
  ok = fwrite(data, 1, size, f) == size;
  ok = fclose(f) == 0 && ok;
  if (!ok) fprintf(stderr, "model_run: %s: cannot write\n", path);
  return ok;
}

static int64_t num_elements(const blockrnn_shape* shape) {
  int64_t n = 1;
  int32_t k;
  for (k = 0; k < shape->rank; ++k) n *= shape->dims[k];
  return n;
}

/* Runs one model; 1 on success. */
static int run_one(const char* model_path, const char* x_path, int64_t T, int64_t B,
                   const char* lengths_path, const char* out_dir) {
  blockrnn_model* model = NULL;
  blockrnn_shape y_shape;
  blockrnn_tensor x, lengths, y, *finals = NULL;
  void *x_data = NULL, *lengths_data = NULL, *y_data = NULL, **final_data = NULL;
  int64_t x_shape[3], len_shape[1], *state_shapes = NULL, num_states = 0, k;
  size_t elem;
  int ok = 0;
  if (blockrnn_model_load(model_path, &model) != BLOCKRNN_OK) {
    fprintf(stderr, "model_run: %s\n", blockrnn_last_error());
    return 0;
  }
  elem = blockrnn_model_dtype(model) == BLOCKRNN_FLOAT64 ? sizeof(double) : sizeof(float);
  x_shape[0] = T;
  x_shape[1] = B;
  x_shape[2] = blockrnn_model_input_size(model);
  len_shape[0] = B;
  x_data = read_exactly(x_path, (size_t)(T * B * x_shape[2]) * elem);
  if (x_data == NULL) goto done;
  if (strcmp(lengths_path, "-") != 0) {
    lengths_data = read_exactly(lengths_path, (size_t)B * sizeof(int64_t));
    if (lengths_data == NULL) goto done;
  }
  if (blockrnn_model_output_shape(model, T, B, &y_shape) != BLOCKRNN_OK) {
    fprintf(stderr, "model_run: %s\n", blockrnn_last_error());
    goto done;
  }
  num_states = blockrnn_model_num_states(model);
  y_data = malloc((size_t)num_elements(&y_shape) * elem + 1);
  finals = calloc((size_t)num_states + 1, sizeof *finals);
  final_data = calloc((size_t)num_states + 1, sizeof *final_data);
  state_shapes = calloc(2 * (size_t)num_states + 1, sizeof *state_shapes);
  if (y_data == NULL || finals == NULL || final_data == NULL || state_shapes == NULL) {
    fprintf(stderr, "model_run: out of memory\n");
    goto done;
  }
  for (k = 0; k < num_states; ++k) {
    int64_t hidden;
    blockrnn_model_state_info(model, k, NULL, NULL, NULL, &hidden);
    state_shapes[2 * k] = B;
    state_shapes[2 * k + 1] = hidden;
    final_data[k] = malloc((size_t)(B * hidden) * elem + 1);
    if (final_data[k] == NULL) {
      fprintf(stderr, "model_run: out of memory\n");
      goto done;
    }
    finals[k] = dense_tensor(blockrnn_model_dtype(model), 2, &state_shapes[2 * k], final_data[k]);
  }
  x = dense_tensor(blockrnn_model_dtype(model), 3, x_shape, x_data);
  lengths = dense_tensor(BLOCKRNN_INT64, 1, len_shape, lengths_data);
  y = dense_tensor(blockrnn_model_dtype(model), y_shape.rank, y_shape.dims, y_data);
  if (blockrnn_model_forward(model, &x, lengths_data != NULL ? &lengths : NULL, NULL, 0, &y, finals,
                             (size_t)num_states) != BLOCKRNN_OK) {
    fprintf(stderr, "model_run: %s: %s\n", model_path, blockrnn_last_error());
    goto done;
  }
  if (!write_file(out_dir, "y", y_data, (size_t)num_elements(&y_shape) * elem)) goto done;
  for (k = 0; k < num_states; ++k) {
    int64_t layer;
    int32_t direction;
    const char* part;
    char name[64];
    blockrnn_model_state_info(model, k, &layer, &direction, &part, NULL);
    snprintf(name, sizeof name, "states.%lld.%d.%s", (long long)layer, (int)direction, part);
    if (!write_file(out_dir, name, final_data[k], (size_t)(B * state_shapes[2 * k + 1]) * elem))
      goto done;
  }
  ok = 1;
done:
  if (final_data != NULL)
    for (k = 0; k < num_states; ++k) free(final_data[k]);
  free(final_data);
  free(finals);
  free(state_shapes);
  free(y_data);
  free(lengths_data);
  free(x_data);
  blockrnn_model_free(model);
  return ok;
}

int main(int argc, char** argv) {
  int a;
  if (argc < 7 || (argc - 1) % 6 != 0) {
    fprintf(stderr,
            "usage: model_run MODEL X T B LENGTHS|- OUT_DIR [MODEL X T B LENGTHS OUT_DIR ...]\n");
    return 2;
  }
  for (a = 1; a < argc; a += 6) {
    char* end_t;
    char* end_b;
    long long T = strtoll(argv[a + 2], &end_t, 10), B = strtoll(argv[a + 3], &end_b, 10);
    if (*end_t != '\0' || *end_b != '\0' || T < 0 || B < 0) {
      fprintf(stderr, "model_run: T and B must be non-negative integers, got '%s' and '%s'\n",
              argv[a + 2], argv[a + 3]);
      return 2;
    }
    if (!run_one(argv[a], argv[a + 1], T, B, argv[a + 4], argv[a + 5])) return 1;
  }
  return 0;
}
