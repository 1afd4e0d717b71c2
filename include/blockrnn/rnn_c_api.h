/* blockrnn/rnn_c_api.h — plan once, run many, from C: a handle on a stack of recurrent layers
 * (blockrnn::RNN of blockrnn/layer.h), torch.nn.LSTM / torch.nn.GRU's structure on TensorFlow's
 * block ops. Compiles as C11 and as C++. docs/c_api.md, "RNN handles", has the lifecycle.
 *
 * A handle is created once from sizes, a mode and a dtype (all validated then), its weights are
 * set (copied and packed) once per (layer, direction) and again whenever they change, and it then
 * runs any number of forward and backward calls without validating or repacking the weights
 * again. Results are bit for bit those of the one-shot sequence ops (blockrnn_run_op of
 * BlockLSTM, BlockLSTMV2, BlockGRU, BlockGRUResetAfter and their grads) for a one-layer,
 * one-direction stack with the same inputs.
 *
 * Conventions: those of blockrnn/c_api.h (status codes, blockrnn_last_error, blockrnn_tensor with
 * element strides; strided inputs are gathered into dense copies, outputs must be dense). An
 * optional tensor is "absent" when its data is NULL and its rank 0 (a zero-initialised
 * blockrnn_tensor is absent). dtypes: float32, float64, float16 and bfloat16 (each layer in the
 * dtype: blockrnn/layer.h).
 *
 * Thread safety: a handle holds one workspace (and, unless caller_reserve, one reserve): one call
 * at a time per handle. A set_weights, forward or backward that starts while another of these
 * runs on the same handle is refused (BLOCKRNN_INVALID_ARGUMENT, "the handle is running another
 * call") and changes nothing; params_per_layer, param_shape and reserve_elems only read what was
 * fixed at creation and may run at any time; free must not overlap any call. Different handles
 * may be used from different threads at once. */
#ifndef BLOCKRNN_RNN_C_API_H_
#define BLOCKRNN_RNN_C_API_H_

#include "blockrnn/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cell of every layer (the values are stable). */
typedef enum blockrnn_rnn_mode {
  BLOCKRNN_RNN_LSTM = 0,           /* BlockLSTM: gates ICFO, forget_bias, cell_clip, peepholes */
  BLOCKRNN_RNN_LSTM_V2 = 1,        /* BlockLSTMV2: gates IFCO (torch.nn.LSTM's order) */
  BLOCKRNN_RNN_GRU = 2,            /* BlockGRU: TensorFlow's GRU (reset before the product) */
  BLOCKRNN_RNN_GRU_RESET_AFTER = 3 /* BlockGRUResetAfter: torch.nn.GRU */
} blockrnn_rnn_mode;

/* What a handle is created for. Start from blockrnn_rnn_default_options(). */
typedef struct blockrnn_rnn_options {
  int32_t mode;          /* a blockrnn_rnn_mode */
  int32_t dtype;         /* BLOCKRNN_FLOAT32, _FLOAT64, _FLOAT16 or _BFLOAT16 */
  int64_t input_size;    /* I >= 0 */
  int64_t hidden_size;   /* H >= 1 */
  int64_t num_layers;    /* L >= 1 */
  int32_t bidirectional; /* 0: one direction (D = 1); nonzero: two (D = 2) */
  /* 0: the handle allocates a reserve for (max_time, max_batch) and backward uses the latest
   * forward's; nonzero: every forward and backward passes one (blockrnn_rnn_reserve_elems). */
  int32_t caller_reserve;
  int64_t max_time;  /* the largest T of a call (>= 0); the workspace is sized for it */
  int64_t max_batch; /* the largest B of a call (>= 0) */
  /* The LSTM modes' attrs. has_*: 0 takes the op's default (BlockLSTM: forget_bias 1.0,
   * cell_clip 3.0; BlockLSTMV2: cell_clip 0.0 and no forget bias). */
  int32_t has_forget_bias;
  int32_t has_cell_clip;
  double forget_bias;
  double cell_clip;
  int32_t use_peephole; /* LSTM modes */
} blockrnn_rnn_options;

/* LSTM V2, float32, one layer, one direction, T = B = 1, the ops' default attrs, own reserve;
 * input_size and hidden_size are 0 and must be set. */
static inline blockrnn_rnn_options blockrnn_rnn_default_options(void) {
  blockrnn_rnn_options o;
  o.mode = BLOCKRNN_RNN_LSTM_V2;
  o.dtype = BLOCKRNN_FLOAT32;
  o.input_size = 0;
  o.hidden_size = 0;
  o.num_layers = 1;
  o.bidirectional = 0;
  o.caller_reserve = 0;
  o.max_time = 1;
  o.max_batch = 1;
  o.has_forget_bias = 0;
  o.has_cell_clip = 0;
  o.forget_bias = 0.0;
  o.cell_clip = 0.0;
  o.use_peephole = 0;
  return o;
}

/* The forward's inputs. x is required; the others may be absent (data NULL, rank 0). */
typedef struct blockrnn_rnn_inputs {
  blockrnn_tensor x;            /* [T, B, I] */
  blockrnn_tensor h0;           /* [L*D, B, H]; absent: zeros */
  blockrnn_tensor c0;           /* [L*D, B, H], LSTM modes; absent: zeros (must be absent else) */
  blockrnn_tensor seq_lengths;  /* [B] int64 in [0, T]; absent: every example runs T steps */
  blockrnn_tensor dropout_mask; /* [L-1, T, B, D*H], already scaled (0 or 1/(1-p)); optional */
} blockrnn_rnn_inputs;

/* The forward's outputs, dense, in the dtype. Steps t >= seq_lengths[b] of y are zero. */
typedef struct blockrnn_rnn_outputs {
  blockrnn_tensor y;   /* [T, B, D*H], both directions concatenated, forward first */
  blockrnn_tensor h_n; /* [L*D, B, H], the state at each example's last step */
  blockrnn_tensor c_n; /* [L*D, B, H], LSTM modes (must be absent otherwise) */
} blockrnn_rnn_outputs;

/* The gradients flowing into the forward's outputs. */
typedef struct blockrnn_rnn_grad_inputs {
  blockrnn_tensor y_grad;   /* [T, B, D*H] */
  blockrnn_tensor h_n_grad; /* [L*D, B, H]; absent: zeros */
  blockrnn_tensor c_n_grad; /* [L*D, B, H], LSTM modes; absent: zeros (must be absent else) */
} blockrnn_rnn_grad_inputs;

/* The backward's outputs, dense, in the dtype. */
typedef struct blockrnn_rnn_grad_outputs {
  blockrnn_tensor x_grad;  /* [T, B, I]; absent: not computed (its products are skipped) */
  blockrnn_tensor h0_grad; /* [L*D, B, H]; absent: not computed (the first step's recurrent
                            * products are skipped) */
  blockrnn_tensor c0_grad; /* [L*D, B, H], LSTM modes (must be absent otherwise); absent: not
                            * computed */
  /* The gradients of every parameter, in blockrnn_rnn_set_weights' order, layer-major then
   * direction: (l, d) holds params_per_layer tensors from (l*D + d) * params_per_layer. An LSTM
   * without peepholes still has its three peephole gradients ([H] each, zeros). */
  const blockrnn_tensor* params;
  size_t num_params; /* L * D * params_per_layer */
} blockrnn_rnn_grad_outputs;

typedef struct blockrnn_rnn blockrnn_rnn; /* opaque */

/* How blockrnn_rnn_set_weights takes each (layer, direction)'s parameters and the backward
 * writes their gradients. */
typedef enum blockrnn_param_layout {
  BLOCKRNN_PARAMS_OPS = 0, /* the layers': see blockrnn_rnn_params_per_layer */
  /* torch.nn's, for BLOCKRNN_RNN_LSTM_V2 and BLOCKRNN_RNN_GRU_RESET_AFTER only: the tensors of a
   * torch.nn.LSTM / GRU layer as they are, weight_ih [G, K], weight_hh [G, H], bias_ih [G],
   * bias_hh [G] (G = 4H or 3H; absent biases are zeros), then the LSTM's wci, wcf, wco [H].
   * The handle transposes them (and sums the LSTM's two biases) into the layers' layout and
   * writes the weight gradients back in torch.nn's: the same values, bit for bit. An absent
   * gradient tensor in the backward is not written. */
  BLOCKRNN_PARAMS_TORCH = 1
} blockrnn_param_layout;

/* Validates the options and creates a handle (its workspace and, unless caller_reserve, its
 * reserve allocated now), taking its parameters in BLOCKRNN_PARAMS_OPS's layout. *out is set
 * only on success. */
BLOCKRNN_API blockrnn_status blockrnn_rnn_create(const blockrnn_rnn_options* options,
                                                 blockrnn_rnn** out);
/* The same with its parameters in `param_layout` (a blockrnn_param_layout). */
BLOCKRNN_API blockrnn_status blockrnn_rnn_create_with_layout(const blockrnn_rnn_options* options,
                                                             int32_t param_layout,
                                                             blockrnn_rnn** out);
/* Frees the handle; NULL is a no-op. */
BLOCKRNN_API void blockrnn_rnn_free(blockrnn_rnn* rnn);

/* Parameters per (layer, direction): LSTM modes 5 (w, b, wci, wcf, wco), GRU 4 (w_ru, w_c, b_ru,
 * b_c), GRU reset-after 4 (w_i, w_h, b_i, b_h). Shapes, with K the layer's input size (I for
 * layer 0, D*H above): LSTM w [K+H, 4H], b [4H], peepholes [H]; GRU w_ru [K+H, 2H], w_c
 * [K+H, H], b_ru [2H], b_c [H]; GRU reset-after w_i [K, 3H], w_h [H, 3H], b_i [3H], b_h [3H].
 * BLOCKRNN_PARAMS_TORCH: LSTM V2 7 (weight_ih, weight_hh, bias_ih, bias_hh, wci, wcf, wco),
 * GRU reset-after 4 (weight_ih, weight_hh, bias_ih, bias_hh), shaped as above. */
BLOCKRNN_API blockrnn_status blockrnn_rnn_params_per_layer(const blockrnn_rnn* rnn, int32_t* n);

/* The shape of parameter k (0 <= k < params_per_layer, in the order above) of `layer` (the
 * same for both directions): what blockrnn_rnn_set_weights takes and the backward's parameter
 * gradient has. */
BLOCKRNN_API blockrnn_status blockrnn_rnn_param_shape(const blockrnn_rnn* rnn, int64_t layer,
                                                      int32_t k, blockrnn_shape* shape);

/* Copies (and packs) the parameters of (layer, direction) from `params`, in the order above; an
 * LSTM without peepholes passes 2 (w, b; BLOCKRNN_PARAMS_TORCH: 4, the weights and biases).
 * Every layer's weights must be set before a forward. */
BLOCKRNN_API blockrnn_status blockrnn_rnn_set_weights(blockrnn_rnn* rnn, int64_t layer,
                                                      int64_t direction,
                                                      const blockrnn_tensor* params,
                                                      size_t num_params);

/* Elements (of the dtype) of the reserve of a call with T steps and B examples. */
BLOCKRNN_API blockrnn_status blockrnn_rnn_reserve_elems(const blockrnn_rnn* rnn, int64_t T,
                                                        int64_t B, int64_t* elems);

/* Runs the stack. reserve: NULL or absent for the handle's own (not allowed with caller_reserve),
 * else a dense 1-D tensor of reserve_elems(T, B) elements of the dtype, kept unchanged for the
 * backward of this call. */
BLOCKRNN_API blockrnn_status blockrnn_rnn_forward(blockrnn_rnn* rnn,
                                                  const blockrnn_rnn_inputs* inputs,
                                                  const blockrnn_rnn_outputs* outputs,
                                                  const blockrnn_tensor* reserve);

/* Gradients through a forward call: `inputs` repeats that call's (the same tensors, unchanged)
 * and reserve is its reserve (NULL or absent: the handle's own, from its latest forward). */
BLOCKRNN_API blockrnn_status blockrnn_rnn_backward(blockrnn_rnn* rnn,
                                                   const blockrnn_rnn_inputs* inputs,
                                                   const blockrnn_rnn_grad_inputs* grads,
                                                   const blockrnn_rnn_grad_outputs* outputs,
                                                   const blockrnn_tensor* reserve);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BLOCKRNN_RNN_C_API_H_ */
