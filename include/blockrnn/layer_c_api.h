/* blockrnn/layer_c_api.h — plan once, run many, from C: a handle on one layer object of
 * blockrnn/layer.h (LSTMLayer for BlockLSTM and BlockLSTMV2, GRULayer, GRUResetAfterLayer), the
 * sequence op set up once for many calls. Compiles as C11 and as C++. docs/c_api.md, "Layer
 * handles", has the lifecycle.
 *
 * A handle is created once from a kind, a dtype, sizes and the LSTM attrs (all validated then);
 * its weights are set (copied and packed) once and again whenever they change; it then runs any
 * number of forward and backward calls, each checking only what changes per call (the shapes,
 * dtypes and data of the call's tensors, seq_len_max and seq_lengths, the call's memory). The
 * forward's outputs are the op's (BlockLSTM: i, cs, f, o, ci, co, h) and the backward's the grad
 * op's, bit for bit those of blockrnn_run_op of the one-shot op and its grad on the same inputs.
 *
 * Workspace: by default the handle owns one, grown to the largest call it has run. Created with
 * caller_workspace, it owns none and every forward and backward passes one of at least
 * blockrnn_layer_workspace_bytes(T', B) bytes (T' the call's seq_len_max, else T; float16 and
 * bfloat16: T), aligned to the dtype's size (float16, bfloat16: 4) and overlapping none of the
 * call's tensors; without caller_workspace a call may
 * still pass one (the handle's own is then left alone).
 *
 * Conventions: those of blockrnn/c_api.h (status codes, blockrnn_last_error, blockrnn_tensor with
 * element strides; strided inputs are gathered into dense copies, outputs must be dense; an
 * output overlaps no input and no other output). An optional tensor is "absent" when its data is
 * NULL and its rank 0 (a zero-initialised blockrnn_tensor is absent). dtypes: float32, float64,
 * float16 and bfloat16 (computed in float32 as the one-shot ops do: blockrnn/layer.h).
 *
 * Thread safety: a handle holds one workspace and one set of packed weights: one call at a time
 * per handle. A set_weights, forward or backward that starts while another of these runs on the
 * same handle is refused (BLOCKRNN_INVALID_ARGUMENT, "... another call on this object is running
 * ...") and changes nothing. The queries (num_params, param_shape, workspace_bytes) only read what
 * was fixed at creation and may run at any time; free must not overlap any call. Different
 * handles may be used from different threads at once. */
#ifndef BLOCKRNN_LAYER_C_API_H_
#define BLOCKRNN_LAYER_C_API_H_

#include "blockrnn/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The op a handle runs (the values are stable). */
typedef enum blockrnn_layer_kind {
  BLOCKRNN_LAYER_LSTM = 0,           /* BlockLSTM: gates ICFO, forget_bias, cell_clip, peepholes */
  BLOCKRNN_LAYER_LSTM_V2 = 1,        /* BlockLSTMV2: gates IFCO (torch.nn.LSTM's order) */
  BLOCKRNN_LAYER_GRU = 2,            /* BlockGRU: TensorFlow's GRU (reset before the product) */
  BLOCKRNN_LAYER_GRU_RESET_AFTER = 3 /* BlockGRUResetAfter: torch.nn.GRU */
} blockrnn_layer_kind;

/* What a handle is created for. Start from blockrnn_layer_default_options(). */
typedef struct blockrnn_layer_options {
  int32_t kind;        /* a blockrnn_layer_kind */
  int32_t dtype;       /* BLOCKRNN_FLOAT32, _FLOAT64, _FLOAT16 or _BFLOAT16 */
  int64_t input_size;  /* I >= 0 */
  int64_t hidden_size; /* H >= 1 */
  /* The largest T and B of a call (>= 0): each call is checked against them; nothing is
   * allocated for them. */
  int64_t max_time;
  int64_t max_batch;
  /* 0: the handle owns its workspace; nonzero: every call passes one. */
  int32_t caller_workspace;
  /* The LSTM kinds' attrs. has_*: 0 takes the op's default (BlockLSTM: forget_bias 1.0,
   * cell_clip 3.0; BlockLSTMV2: cell_clip 0.0 and no forget bias, so forget_bias must stay unset
   * or be 0 there). */
  int32_t has_forget_bias;
  int32_t has_cell_clip;
  double forget_bias;
  double cell_clip;
  int32_t use_peephole; /* LSTM kinds */
} blockrnn_layer_options;

/* LSTM V2, float32, T = B = 1, the op's default attrs, own workspace; input_size and
 * hidden_size are 0 and must be set. */
static inline blockrnn_layer_options blockrnn_layer_default_options(void) {
  blockrnn_layer_options o;
  o.kind = BLOCKRNN_LAYER_LSTM_V2;
  o.dtype = BLOCKRNN_FLOAT32;
  o.input_size = 0;
  o.hidden_size = 0;
  o.max_time = 1;
  o.max_batch = 1;
  o.caller_workspace = 0;
  o.has_forget_bias = 0;
  o.has_cell_clip = 0;
  o.forget_bias = 0.0;
  o.cell_clip = 0.0;
  o.use_peephole = 0;
  return o;
}

/* The inputs every call reads: the op's x, initial states, seq_len_max and seq_lengths. */
typedef struct blockrnn_layer_inputs {
  blockrnn_tensor x;           /* [T, B, I] */
  blockrnn_tensor cs_prev;     /* [B, H], the LSTM kinds (must be absent otherwise) */
  blockrnn_tensor h_prev;      /* [B, H] */
  blockrnn_tensor seq_lengths; /* [B] int64 in [0, T], optional (absent: every example T steps) */
  int32_t has_seq_len_max;     /* 0: seq_len_max is T */
  int64_t seq_len_max;         /* in [0, T], read when has_seq_len_max */
} blockrnn_layer_inputs;

/* The backward's inputs besides blockrnn_layer_inputs: the forward's outputs and the gradients
 * flowing into them. */
typedef struct blockrnn_layer_grad_inputs {
  /* The forward's outputs, in the op's output order (blockrnn_layer_forward), unchanged. */
  const blockrnn_tensor* outputs;
  size_t num_outputs;
  blockrnn_tensor cs_grad; /* [T, B, H], the LSTM kinds (must be absent otherwise) */
  blockrnn_tensor h_grad;  /* [T, B, H] */
} blockrnn_layer_grad_inputs;

typedef struct blockrnn_layer blockrnn_layer; /* opaque */

/* Validates the options and creates a handle (nothing is allocated for max_time x max_batch).
 * *out is set only on success. */
BLOCKRNN_API blockrnn_status blockrnn_layer_create(const blockrnn_layer_options* options,
                                                   blockrnn_layer** out);
/* Frees the handle; NULL is a no-op. */
BLOCKRNN_API void blockrnn_layer_free(blockrnn_layer* layer);

/* The parameters, in set_weights' order: LSTM kinds 5 (w [I+H, 4H], b [4H], wci, wcf, wco [H]),
 * GRU 4 (w_ru [I+H, 2H], w_c [I+H, H], b_ru [2H], b_c [H]), GRU reset-after 4 (w_i [I, 3H],
 * w_h [H, 3H], b_i [3H], b_h [3H]). The backward writes their gradients in the same shapes. */
BLOCKRNN_API blockrnn_status blockrnn_layer_num_params(const blockrnn_layer* layer, int32_t* n);
BLOCKRNN_API blockrnn_status blockrnn_layer_param_shape(const blockrnn_layer* layer, int32_t k,
                                                        blockrnn_shape* shape);

/* Copies, checks and packs the parameters from `params`, in the order above; an LSTM without
 * peepholes passes 2 (w, b). Required before the first forward or backward; again whenever the
 * weights change (the caller's buffers may change after the call). */
BLOCKRNN_API blockrnn_status blockrnn_layer_set_weights(blockrnn_layer* layer,
                                                        const blockrnn_tensor* params,
                                                        size_t num_params);

/* Bytes of workspace one call with T steps (its seq_len_max) and B examples needs, forward or
 * backward; T in [0, max_time], B in [0, max_batch]. */
BLOCKRNN_API blockrnn_status blockrnn_layer_workspace_bytes(const blockrnn_layer* layer, int64_t T,
                                                            int64_t B, size_t* bytes);

/* Runs the op: fills `outputs`, num_outputs tensors in the op's output order, each [T, B, H]:
 * BlockLSTM(V2) 7 (i, cs, f, o, ci, co, h), BlockGRU 4 (r, u, c, h), BlockGRUResetAfter 5
 * (r, u, n, hn, h). workspace: NULL for the handle's own (not with caller_workspace), else
 * workspace_bytes bytes of the caller's memory. */
BLOCKRNN_API blockrnn_status blockrnn_layer_forward(blockrnn_layer* layer,
                                                    const blockrnn_layer_inputs* inputs,
                                                    const blockrnn_tensor* outputs,
                                                    size_t num_outputs, void* workspace,
                                                    size_t workspace_bytes);

/* Runs the grad op through a forward call: `inputs` repeats that call's and `grads` holds its
 * outputs and their gradients. Fills `outputs`, num_outputs tensors in the grad op's output
 * order: BlockLSTMGrad(V2) 8 (x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad,
 * wco_grad, b_grad; the peephole gradients zero without peepholes), BlockGRUGrad 6 (x_grad,
 * h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad), BlockGRUResetAfterGrad 6 (x_grad,
 * h_prev_grad, w_i_grad, w_h_grad, b_i_grad, b_h_grad). x_grad, cs_prev_grad and h_prev_grad
 * may be absent: not computed (the parameters' gradients keep their bits). workspace as the
 * forward's. */
BLOCKRNN_API blockrnn_status blockrnn_layer_backward(blockrnn_layer* layer,
                                                     const blockrnn_layer_inputs* inputs,
                                                     const blockrnn_layer_grad_inputs* grads,
                                                     const blockrnn_tensor* outputs,
                                                     size_t num_outputs, void* workspace,
                                                     size_t workspace_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BLOCKRNN_LAYER_C_API_H_ */
