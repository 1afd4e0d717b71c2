/* Scaffolding shared by the C API's tests (the test_c_api_*.c files and model_run.c, each a program
 * of its own that includes this once): the failure count, CHECK, a dense tensor view and the
 * summary that ends main. */
#ifndef BLOCKRNN_TESTS_C_TEST_UTIL_H_
#define BLOCKRNN_TESTS_C_TEST_UTIL_H_

#include <stdint.h>
#include <stdio.h>

#include "blockrnn/c_api.h"

static int g_failures = 0;

/* Counts a failed check, printing where, what and the library's last error. */
#define CHECK(cond, what)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, what, blockrnn_last_error()); \
      ++g_failures;                                                                        \
    }                                                                                      \
  } while (0)

/* A dense (row-major, strides NULL) view of `data`. */
static inline blockrnn_tensor dense_tensor(int32_t dtype, int32_t rank, const int64_t* shape,
                                           void* data) {
  blockrnn_tensor t;
  t.dtype = dtype;
  t.rank = rank;
  t.shape = shape;
  t.strides = NULL;
  t.data = data;
  return t;
}

/* The end of a test's main: "<name>: all checks passed" and 0, or the failure count and 1. */
static inline int checks_result(const char* name) {
  if (g_failures != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, g_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif /* BLOCKRNN_TESTS_C_TEST_UTIL_H_ */
