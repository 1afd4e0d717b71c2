/* blockrnn/c_api.h — the stable C interface: every op by TensorFlow's name, on caller-owned
 * buffers. Compiles as C11 and as C++; it is what other languages (Java's JNI binding, Rust,
 * Go, ...) call. docs/c_api.md has a complete example.
 *
 * Conventions
 *   - Every call that can fail returns a blockrnn_status; BLOCKRNN_OK is 0. The message of the
 *     most recent failed call is blockrnn_last_error(), per thread. Only the calls that return a
 *     blockrnn_status clear it (on success); the others never do, so a caller may look up op
 *     names or settings between a failed call and reading its message. No C++ exception ever
 *     leaves a function of this header.
 *   - Tensors are described by blockrnn_tensor: dtype, rank, shape and data, plus optional
 *     strides counted in ELEMENTS (not bytes). strides == NULL means dense row-major (C order).
 *     Strides may be zero (a broadcast) or negative (a reversed view: data points at element
 *     (0, 0, ...)). A negative dimension, or strides whose byte offsets from data overflow
 *     int64 or run past either end of the address space, is BLOCKRNN_INVALID_ARGUMENT, found
 *     before anything is read. Strided inputs are gathered into a dense copy before the op runs;
 *     outputs must be dense (strides NULL or row-major), otherwise the call fails with
 *     BLOCKRNN_INVALID_ARGUMENT.
 *   - Inputs are passed in the op's input order (blockrnn_op_input_name), outputs in its output
 *     order; seq_len_max is an int64 tensor of rank 0. The caller allocates the outputs with
 *     the shapes blockrnn_infer_outputs returns, in the inputs' dtype; an output must not
 *     overlap an input or another output (their byte ranges must not intersect; an empty
 *     tensor occupies no bytes), even when the call has no work to do.
 *   - Attrs are named as in TensorFlow ("forget_bias", "cell_clip", "use_peephole"); an attr
 *     not given takes the op definition's default; a required attr missing, an unknown name or
 *     a value of the wrong kind is BLOCKRNN_INVALID_ARGUMENT.
 *   - Strings returned (op names, input names, version) live as long as the library. */
#ifndef BLOCKRNN_C_API_H_
#define BLOCKRNN_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "blockrnn/export.h"
#include "blockrnn/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: one per blockrnn::ErrorCode, plus BLOCKRNN_UNKNOWN for anything else that was
 * thrown inside the library (which is a bug). The values are stable. */
typedef enum blockrnn_status {
  BLOCKRNN_OK = 0,
  BLOCKRNN_INVALID_ARGUMENT = 1,   /* bad shapes, ranks, dtypes, values, names */
  BLOCKRNN_UNIMPLEMENTED = 2,      /* a documented path that is not built */
  BLOCKRNN_RESOURCE_EXHAUSTED = 3, /* memory limit, allocation failure, too many threads */
  BLOCKRNN_CANCELLED = 4,          /* the cancel check asked the call to stop */
  BLOCKRNN_INTERNAL = 5,           /* a broken invariant inside the library */
  BLOCKRNN_UNKNOWN = 6             /* an unexpected exception inside the library */
} blockrnn_status;

/* Element types (the same values as blockrnn::DType). The values are stable: new ones are
 * appended. */
typedef enum blockrnn_dtype {
  BLOCKRNN_FLOAT16 = 0, /* IEEE binary16, stored as uint16_t */
  BLOCKRNN_FLOAT32 = 1,
  BLOCKRNN_FLOAT64 = 2,
  BLOCKRNN_INT64 = 3,   /* only seq_len_max and seq_lengths */
  BLOCKRNN_BFLOAT16 = 4 /* bfloat16 (the upper half of a binary32), stored as uint16_t */
} blockrnn_dtype;

#define BLOCKRNN_MAX_RANK 8

/* A tensor in caller-owned memory. Inputs are only read (data may point to const memory). */
typedef struct blockrnn_tensor {
  int32_t dtype;          /* a blockrnn_dtype */
  int32_t rank;           /* 0 .. BLOCKRNN_MAX_RANK */
  const int64_t* shape;   /* [rank] dimensions (may be NULL when rank == 0) */
  const int64_t* strides; /* [rank] in elements, or NULL for dense row-major */
  void* data; /* the element at index (k0, k1, ...) is at data + sum(k_d * strides[d]) */
} blockrnn_tensor;

typedef enum blockrnn_attr_kind {
  BLOCKRNN_ATTR_FLOAT = 0,
  BLOCKRNN_ATTR_BOOL = 1
} blockrnn_attr_kind;

/* A typed attr value. */
typedef struct blockrnn_attr {
  const char* name; /* TensorFlow's attr name */
  int32_t kind;     /* a blockrnn_attr_kind: it must match the op's attr */
  int32_t b;        /* the value of a bool attr (0 or nonzero) */
  double f;         /* the value of a float attr */
} blockrnn_attr;

static inline blockrnn_attr blockrnn_attr_float(const char* name, double value) {
  blockrnn_attr a;
  a.name = name;
  a.kind = BLOCKRNN_ATTR_FLOAT;
  a.b = 0;
  a.f = value;
  return a;
}
static inline blockrnn_attr blockrnn_attr_bool(const char* name, int value) {
  blockrnn_attr a;
  a.name = name;
  a.kind = BLOCKRNN_ATTR_BOOL;
  a.b = value != 0;
  a.f = 0.0;
  return a;
}

/* A shape, as returned by blockrnn_infer_outputs. */
typedef struct blockrnn_shape {
  int32_t rank;
  int64_t dims[BLOCKRNN_MAX_RANK];
} blockrnn_shape;

/* ---- Errors and version ---------------------------------------------------------------- */

/* The message of the most recent call on this thread that failed ("" when none has, or when the
 * last status-returning call succeeded). Calls that return no status never clear it; they
 * set it only when they fail (blockrnn_op_find of an unknown name). Valid until the next call on
 * this thread that returns a status, or that fails. */
BLOCKRNN_API const char* blockrnn_last_error(void);
/* "OK", "InvalidArgument", "Unimplemented", "ResourceExhausted", "Cancelled", "Internal",
 * "Unknown" (also for values outside the enum). */
BLOCKRNN_API const char* blockrnn_status_name(blockrnn_status status);
/* The library's version, "MAJOR.MINOR.PATCH" (BLOCKRNN_VERSION_STRING of the build that made
 * the library; compare with the header's macro to detect a mismatch). */
BLOCKRNN_API const char* blockrnn_version(void);

/* ---- Op introspection ------------------------------------------------------------------ */

/* Number of ops; op indices are 0 .. count-1, in a stable order. */
BLOCKRNN_API int blockrnn_op_count(void);
/* The op's TensorFlow name (e.g. "GRUBlockCellGrad", "gradients.LSTMBlockCell"), or NULL when
 * index is out of range. */
BLOCKRNN_API const char* blockrnn_op_name(int index);
/* The index of an op by name, or -1 (and the last error set) when there is none. */
BLOCKRNN_API int blockrnn_op_find(const char* name);
/* Counts and names of inputs, outputs and attrs of op `index` (NULL or -1 when out of range). */
BLOCKRNN_API int blockrnn_op_num_inputs(int index);
BLOCKRNN_API const char* blockrnn_op_input_name(int index, int input);
BLOCKRNN_API int blockrnn_op_num_outputs(int index);
BLOCKRNN_API const char* blockrnn_op_output_name(int index, int output);
BLOCKRNN_API int blockrnn_op_num_attrs(int index);
/* Describes attr `attr` of op `index`: name, kind, whether it has a default, and the default
 * (bools as 0 / 1). Any output pointer may be NULL. */
BLOCKRNN_API blockrnn_status blockrnn_op_attr(int index, int attr, const char** name, int32_t* kind,
                                              int32_t* has_default, double* default_value);

/* ---- Running ops ----------------------------------------------------------------------- */

/* Validates inputs and attrs (exactly as blockrnn_run_op does) and returns the outputs' dtype
 * and shapes. num_outputs must be the op's output count; shapes has num_outputs entries. */
BLOCKRNN_API blockrnn_status blockrnn_infer_outputs(const char* op, const blockrnn_tensor* inputs,
                                                    size_t num_inputs, const blockrnn_attr* attrs,
                                                    size_t num_attrs, int32_t* dtype,
                                                    blockrnn_shape* shapes, size_t num_outputs);

/* For a caller that allocates the outputs for this call (a binding): validates as
 * blockrnn_infer_outputs does and returns the same dtype and shapes, and also checks the memory
 * of the call against the memory limit: the outputs, the op's workspace, the dense copies of
 * strided inputs and extra_bytes (>= 0) that the caller itself will hold during the call (its
 * copies of inputs or outputs), all together. A call over the limit is
 * BLOCKRNN_RESOURCE_EXHAUSTED naming the op and the largest part. Call it before allocating. */
BLOCKRNN_API blockrnn_status blockrnn_prepare_call(const char* op, const blockrnn_tensor* inputs,
                                                   size_t num_inputs, const blockrnn_attr* attrs,
                                                   size_t num_attrs, int64_t extra_bytes,
                                                   int32_t* dtype, blockrnn_shape* shapes,
                                                   size_t num_outputs);

/* Validates, then computes op `op` into the caller's outputs, which must have the dtype and
 * shapes that blockrnn_infer_outputs gives. Every element of every output is written. */
BLOCKRNN_API blockrnn_status blockrnn_run_op(const char* op, const blockrnn_tensor* inputs,
                                             size_t num_inputs, const blockrnn_attr* attrs,
                                             size_t num_attrs, const blockrnn_tensor* outputs,
                                             size_t num_outputs);

/* ---- Execution settings (blockrnn/context.h) --------------------------------------------- */

/* Threads used by every op: 1 <= n <= blockrnn_max_threads(). */
BLOCKRNN_API blockrnn_status blockrnn_set_num_threads(int n);
/* The current thread count (fails when BLOCKRNN_NUM_THREADS / OMP_NUM_THREADS is invalid). */
BLOCKRNN_API blockrnn_status blockrnn_get_num_threads(int* n);
/* The largest thread count accepted on this machine. */
BLOCKRNN_API int blockrnn_max_threads(void);

/* Memory limit in bytes for one call's outputs, workspace and copies; bytes <= 0 restores the
 * default (what the machine can hold). */
BLOCKRNN_API void blockrnn_set_memory_limit(int64_t bytes);
BLOCKRNN_API int64_t blockrnn_get_memory_limit(void);

/* Workspace cache: the most bytes of one-shot op workspace kept between calls, over all calling
 * threads (each keeps at most one buffer for its next call); default 256 MiB, 0 keeps none,
 * bytes < 0 restores the default. blockrnn/context.h, set_workspace_cache_limit. */
BLOCKRNN_API void blockrnn_set_workspace_cache_limit(int64_t bytes);
BLOCKRNN_API int64_t blockrnn_get_workspace_cache_limit(void);

/* Cancellation, per calling thread: a long call asks check(user) at its step boundaries and
 * stops with BLOCKRNN_CANCELLED when it returns nonzero. check == NULL removes it. The check
 * must not call back into blockrnn. */
typedef int (*blockrnn_cancel_check)(void* user);
BLOCKRNN_API void blockrnn_set_cancel_check(blockrnn_cancel_check check, void* user);

/* CPU path: "avx512", "avx2", "baseline", "auto" or "" (the default). */
BLOCKRNN_API blockrnn_status blockrnn_set_isa(const char* name);
BLOCKRNN_API const char* blockrnn_get_isa(void);
/* Routes every op through its plain-loop reference implementation (nonzero) or not (0). */
BLOCKRNN_API void blockrnn_set_force_reference(int on);

/* ---- Model files (docs/model-format.md, blockrnn/model.h) --------------------------------
 *
 * A model file holds a trained recurrent stack (configuration and weights); the Python
 * converters write it from Keras and PyTorch models. Loading checks the whole file first (a bad
 * file is BLOCKRNN_INVALID_ARGUMENT with "<file>: <field>: <what>", weights beyond the memory
 * limit BLOCKRNN_RESOURCE_EXHAUSTED) and packs the weights once. A model runs one call at a
 * time: use one per thread, or serialise the calls. docs/c_api.md has an example. */
typedef struct blockrnn_model blockrnn_model;

/* Reads a model file into *model (set to NULL on failure). */
BLOCKRNN_API blockrnn_status blockrnn_model_load(const char* path, blockrnn_model** model);
/* The same from size bytes at data (copied as needed; data may be freed after the call); name
 * is used in messages (NULL: "buffer"). */
BLOCKRNN_API blockrnn_status blockrnn_model_load_buffer(const void* data, size_t size,
                                                        const char* name,
                                                        blockrnn_model** model);
/* Frees a model (NULL is ignored). */
BLOCKRNN_API void blockrnn_model_free(blockrnn_model* model);

/* The model's dtype (BLOCKRNN_FLOAT32 or BLOCKRNN_FLOAT64), input size I and output width W;
 * -1 for a NULL model. */
BLOCKRNN_API int32_t blockrnn_model_dtype(const blockrnn_model* model);
BLOCKRNN_API int64_t blockrnn_model_input_size(const blockrnn_model* model);
BLOCKRNN_API int64_t blockrnn_model_output_size(const blockrnn_model* model);
/* The shape of y for x [T, B, I]: [T, B, W], or [B, W] when the model returns its last step
 * only. */
BLOCKRNN_API blockrnn_status blockrnn_model_output_shape(const blockrnn_model* model, int64_t T,
                                                         int64_t B, blockrnn_shape* shape);
/* Number of states (initial and final), and state k: its layer, direction (0 forward, 1
 * reverse), name ("cs" or "h") and hidden size H (each state is [B, H]). Order: layer by
 * layer, direction by direction; an LSTM's cs then h, a GRU's h. Outputs may be NULL. */
BLOCKRNN_API int64_t blockrnn_model_num_states(const blockrnn_model* model);
BLOCKRNN_API blockrnn_status blockrnn_model_state_info(const blockrnn_model* model, int64_t k,
                                                       int64_t* layer, int32_t* direction,
                                                       const char** name, int64_t* hidden_size);
/* A few lines describing the model; lives as long as the model. */
BLOCKRNN_API const char* blockrnn_model_summary(const blockrnn_model* model);

/* Runs the model (docs/model-format.md, "Semantics") into the caller's buffers, every argument
 * checked first. All tensors are dense (strides NULL or row-major) and in the model's dtype,
 * except seq_lengths (int64).
 *   x               [T, B, I]
 *   seq_lengths     [B] in [0, T], or NULL (every example runs T steps; with masking in the
 *                   file, the lengths its mask gives)
 *   initial_states  NULL (num_initial 0: zeros) or num_states entries, each [B, H] or absent
 *                   (data NULL and rank 0: that state zero)
 *   y               blockrnn_model_output_shape(T, B)
 *   final_states    NULL (num_final 0) or num_states entries, each [B, H] or absent (not
 *                   written) */
BLOCKRNN_API blockrnn_status blockrnn_model_forward(
    blockrnn_model* model, const blockrnn_tensor* x, const blockrnn_tensor* seq_lengths,
    const blockrnn_tensor* initial_states, size_t num_initial, const blockrnn_tensor* y,
    const blockrnn_tensor* final_states, size_t num_final);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BLOCKRNN_C_API_H_ */
