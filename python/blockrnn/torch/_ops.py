"""blockrnn's sequence ops as torch custom ops (torch.library.custom_op).

Each op has a forward and a backward custom op; the backward is wired with
register_autograd and both have a fake (meta) implementation, so autograd, torch.compile
(the ops are opaque nodes in the graph) and torch.library.opcheck work.

Tensors reach the library as numpy views of their storage (Tensor.numpy(): no copy, any
strides; the core gathers strided inputs itself) and the library's outputs come back with
torch.from_numpy (no copy). The library releases the GIL while it computes.

The forward ops return every per-step tensor the backward needs (gates, cell states); only
`cs` and `h` (LSTM) and `h` (GRUs) are differentiable outputs: the others are saved
activations, and a gradient arriving on them is ignored (the modules never use them).

Every op takes an optional `seq_lengths` (int64 [B], blockrnn's per-example lengths, when the
core has them: HAS_SEQ_LENGTHS); it is not differentiable.
"""
import inspect
from typing import List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from .. import raw_ops

_DTYPES = (torch.float16, torch.float32, torch.float64)

# blockrnn's per-example lengths (`seq_lengths`, docs/ops.md) in this build of the core?
HAS_SEQ_LENGTHS = "seq_lengths" in inspect.signature(raw_ops.BlockLSTMV2).parameters


def _lengths_kw(seq_lengths: Optional[Tensor], op: str) -> dict:
    if seq_lengths is None:
        return {}
    if not HAS_SEQ_LENGTHS:
        raise NotImplementedError(f"blockrnn.torch: {op}: this blockrnn build has no "
                                  f"seq_lengths input")
    if seq_lengths.device.type != "cpu" or seq_lengths.dtype != torch.int64:
        raise TypeError(f"blockrnn.torch: {op}: seq_lengths must be an int64 CPU tensor, got "
                        f"{seq_lengths.dtype} on {seq_lengths.device}")
    return {"seq_lengths": seq_lengths.numpy()}


def _np(t: Tensor, op: str, arg: str) -> np.ndarray:
    if t.device.type != "cpu":
        raise NotImplementedError(
            f"blockrnn.torch: {op}: {arg} is on device '{t.device}'; blockrnn runs on the CPU "
            f"only (a GPU backend is a separate issue). Move the module and inputs to 'cpu'.")
    if t.dtype not in _DTYPES:
        raise TypeError(f"blockrnn.torch: {op}: {arg} has dtype {t.dtype}; supported: "
                        f"float16, float32, float64")
    return t.detach().numpy()


def _t(a: np.ndarray) -> Tensor:
    return torch.from_numpy(a)


def _steps(x: Tensor) -> int:
    return int(x.shape[0])


def _call(fn, op: str, tensors: dict, seq_lengths: Optional[Tensor], **attrs) -> tuple:
    """fn (a raw op) on numpy views of `tensors` (name -> tensor; "x" among them), all of x's
    steps, the optional lengths and `attrs`; its outputs as tensors (no copies either way)."""
    arrays = {name: _np(t, op, name) for name, t in tensors.items()}
    out = fn(seq_len_max=np.int64(_steps(tensors["x"])), **arrays, **attrs,
             **_lengths_kw(seq_lengths, op))
    return tuple(_t(a) for a in out)


# ----------------------------------------------------------------------------- LSTM

@torch.library.custom_op("blockrnn::lstm", mutates_args=())
def lstm(x: Tensor, cs_prev: Tensor, h_prev: Tensor, w: Tensor, wci: Tensor, wcf: Tensor,
         wco: Tensor, b: Tensor, forget_bias: float, cell_clip: float, use_peephole: bool,
         tf_order: bool, seq_lengths: Optional[Tensor] = None
         ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockLSTMV2 (gate order i,f,g,o; tf_order=False, forget_bias must be 0) or BlockLSTM
    (TensorFlow's order i,c,f,o with forget_bias; tf_order=True). Returns i, cs, f, o, ci, co, h
    ([T,B,H] each)."""
    op = "BlockLSTM" if tf_order else "BlockLSTMV2"
    tensors = dict(x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf, wco=wco, b=b)
    if tf_order:
        return _call(raw_ops.BlockLSTM, op, tensors, seq_lengths, forget_bias=forget_bias,
                     cell_clip=cell_clip, use_peephole=use_peephole)
    if forget_bias != 0.0:
        raise ValueError("blockrnn::lstm: forget_bias needs tf_order=True (BlockLSTM)")
    return _call(raw_ops.BlockLSTMV2, op, tensors, seq_lengths, cell_clip=cell_clip,
                 use_peephole=use_peephole)


@lstm.register_fake
def _(x, cs_prev, h_prev, w, wci, wcf, wco, b, forget_bias, cell_clip, use_peephole, tf_order,
      seq_lengths=None):
    shape = (x.shape[0], x.shape[1], h_prev.shape[1])
    return tuple(x.new_empty(shape) for _ in range(7))


@torch.library.custom_op("blockrnn::lstm_grad", mutates_args=())
def lstm_grad(x: Tensor, cs_prev: Tensor, h_prev: Tensor, w: Tensor, wci: Tensor, wcf: Tensor,
              wco: Tensor, b: Tensor, i: Tensor, cs: Tensor, f: Tensor, o: Tensor, ci: Tensor,
              co: Tensor, h: Tensor, cs_grad: Tensor, h_grad: Tensor, use_peephole: bool,
              tf_order: bool, seq_lengths: Optional[Tensor] = None
              ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockLSTMGrad(V2): x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad,
    wco_grad, b_grad."""
    op = "BlockLSTMGrad" if tf_order else "BlockLSTMGradV2"
    fn = raw_ops.BlockLSTMGrad if tf_order else raw_ops.BlockLSTMGradV2
    tensors = dict(x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=wci, wcf=wcf, wco=wco, b=b, i=i,
                   cs=cs, f=f, o=o, ci=ci, co=co, h=h, cs_grad=cs_grad, h_grad=h_grad)
    return _call(fn, op, tensors, seq_lengths, use_peephole=use_peephole)


@lstm_grad.register_fake
def _(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h, cs_grad, h_grad,
      use_peephole, tf_order, seq_lengths=None):
    return (x.new_empty(x.shape), x.new_empty(cs_prev.shape), x.new_empty(h_prev.shape),
            x.new_empty(w.shape), x.new_empty(wci.shape), x.new_empty(wcf.shape),
            x.new_empty(wco.shape), x.new_empty(b.shape))


def _lstm_setup(ctx, inputs, output):
    x, cs_prev, h_prev, w, wci, wcf, wco, b, _fb, _clip, use_peephole, tf_order, lens = inputs
    ctx.save_for_backward(x, cs_prev, h_prev, w, wci, wcf, wco, b, *output)
    ctx.lens = lens
    ctx.use_peephole = use_peephole
    ctx.tf_order = tf_order


def _lstm_backward(ctx, gi, gcs, gf, go, gci, gco, gh):
    saved = ctx.saved_tensors
    h = saved[14]
    gcs = torch.zeros_like(h) if gcs is None else gcs
    gh = torch.zeros_like(h) if gh is None else gh
    g = lstm_grad(*saved, gcs, gh, ctx.use_peephole, ctx.tf_order, ctx.lens)
    return (*g, None, None, None, None, None)


lstm.register_autograd(_lstm_backward, setup_context=_lstm_setup)


# ------------------------------------------------------------ GRU (reset after: PyTorch's)

@torch.library.custom_op("blockrnn::gru_reset_after", mutates_args=())
def gru_reset_after(x: Tensor, h_prev: Tensor, w_i: Tensor, w_h: Tensor, b_i: Tensor,
                    b_h: Tensor, seq_lengths: Optional[Tensor] = None
                    ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockGRUResetAfter: r, u, n, hn, h ([T,B,H] each)."""
    return _call(raw_ops.BlockGRUResetAfter, "BlockGRUResetAfter",
                 dict(x=x, h_prev=h_prev, w_i=w_i, w_h=w_h, b_i=b_i, b_h=b_h), seq_lengths)


@torch.library.custom_op("blockrnn::gru_reset_after_grad", mutates_args=())
def gru_reset_after_grad(x: Tensor, h_prev: Tensor, w_i: Tensor, w_h: Tensor, b_i: Tensor,
                         b_h: Tensor, r: Tensor, u: Tensor, n: Tensor, hn: Tensor, h: Tensor,
                         h_grad: Tensor, seq_lengths: Optional[Tensor] = None
                         ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockGRUResetAfterGrad: x_grad, h_prev_grad, w_i_grad, w_h_grad, b_i_grad, b_h_grad."""
    return _call(raw_ops.BlockGRUResetAfterGrad, "BlockGRUResetAfterGrad",
                 dict(x=x, h_prev=h_prev, w_i=w_i, w_h=w_h, b_i=b_i, b_h=b_h, r=r, u=u, n=n,
                      hn=hn, h=h, h_grad=h_grad), seq_lengths)


def _gru_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:6], *output)
    ctx.lens = inputs[6]


def _gru_autograd(fwd, grad, n_outputs):
    """Wires a GRU op pair's fakes and backward (both variants: x, h_prev and four weights,
    then seq_lengths; `n_outputs` [T,B,H] outputs, h the last and the only differentiable
    one; the grad returns one gradient per tensor input)."""
    @fwd.register_fake
    def _(x, h_prev, *weights, **lengths):
        shape = (x.shape[0], x.shape[1], h_prev.shape[1])
        return tuple(x.new_empty(shape) for _ in range(n_outputs))

    @grad.register_fake
    def _(*tensors, **lengths):
        return tuple(t.new_empty(t.shape) for t in tensors[:6])

    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        gh = torch.zeros_like(saved[-1]) if grads[-1] is None else grads[-1]
        return (*grad(*saved, gh, ctx.lens), None)

    fwd.register_autograd(backward, setup_context=_gru_setup)


_gru_autograd(gru_reset_after, gru_reset_after_grad, 5)


# ------------------------------------------- GRU (reset before: TensorFlow's GRUBlockCell)

@torch.library.custom_op("blockrnn::gru_reset_before", mutates_args=())
def gru_reset_before(x: Tensor, h_prev: Tensor, w_ru: Tensor, w_c: Tensor, b_ru: Tensor,
                     b_c: Tensor, seq_lengths: Optional[Tensor] = None
                     ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """BlockGRU (TensorFlow's GRUBlockCell over a sequence): r, u, c, h ([T,B,H] each)."""
    return _call(raw_ops.BlockGRU, "BlockGRU",
                 dict(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c), seq_lengths)


@torch.library.custom_op("blockrnn::gru_reset_before_grad", mutates_args=())
def gru_reset_before_grad(x: Tensor, h_prev: Tensor, w_ru: Tensor, w_c: Tensor, b_ru: Tensor,
                          b_c: Tensor, r: Tensor, u: Tensor, c: Tensor, h: Tensor,
                          h_grad: Tensor, seq_lengths: Optional[Tensor] = None
                          ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockGRUGrad: x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad."""
    return _call(raw_ops.BlockGRUGrad, "BlockGRUGrad",
                 dict(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c, r=r, u=u, c=c,
                      h=h, h_grad=h_grad), seq_lengths)


_gru_autograd(gru_reset_before, gru_reset_before_grad, 4)


# ------------------------------------------------- the whole stack: blockrnn::rnn (one call)
#
# torch.nn.LSTM / GRU's layers, directions, dropout masks and per-example lengths in one
# library call each way (blockrnn.RNN, blockrnn/layer.h). The activations the backward reads
# come back as `reserve` (a 1-D tensor, cuDNN's reserve space), an output the backward takes
# again; so several forward calls can await their backward. The library plans once per
# configuration (a cached _core.RNN per mode, sizes, dtype and attrs, grown to the largest T
# and B seen); each call sets the weights (copied and packed) and runs.
#
# Per (layer, direction) the parameters are in the ops' layout: LSTM [w [I+H,4H], b [4H], wci,
# wcf, wco [H]], GRU (reset before) [w_ru, w_c, b_ru, b_c], GRU reset-after [w_i, w_h, b_i,
# b_h], all C-contiguous (the modules make them so). float32 and float64.

import atexit
import threading

from .. import _core

_RNN_PARAMS = {"lstm": 5, "lstm_v2": 5, "gru": 4, "gru_reset_after": 4}
_RNN_ACTS = {"lstm": 7, "lstm_v2": 7, "gru": 4, "gru_reset_after": 5}
_RNN_CACHE: dict = {}
_RNN_LOCK = threading.Lock()


@atexit.register
def _drop_rnn_cache():  # the _core objects go before the extension module does
    _RNN_CACHE.clear()


def _rnn_sizes(x, h0, bidirectional):
    """T, B, I of x; H of h0 [L*D, B, H]; D."""
    return int(x.shape[0]), int(x.shape[1]), int(x.shape[2]), int(h0.shape[2]), \
        2 if bidirectional else 1


def _reserve_elems(mode, T, B, I, H, L, D):
    """blockrnn::RNN::reserve_elems (src/layer/rnn.cc: activations, reversed inputs, layer
    outputs and masked inputs)."""
    TB = T * B
    rev = sum(TB * (I if l == 0 else D * H) for l in range(L)) if D == 2 else 0
    return L * D * _RNN_ACTS[mode] * TB * H + rev + 2 * (L - 1) * TB * D * H


def _rnn_object(mode, I, H, L, bidirectional, dtype, T, B, forget_bias, cell_clip,
                use_peephole):
    key = (mode, I, H, L, bidirectional, dtype, forget_bias, cell_clip, use_peephole)
    entry = _RNN_CACHE.get(key)
    if entry is None or entry[1] < T or entry[2] < B:
        T2 = max(T, entry[1] if entry else 0, 1)
        B2 = max(B, entry[2] if entry else 0, 1)
        obj = _core.RNN(mode, I, H, L, bidirectional, dtype, T2, B2,
                        None if mode != "lstm" else forget_bias, cell_clip, use_peephole,
                        caller_reserve=True)
        entry = (obj, T2, B2, threading.Lock())
        _RNN_CACHE[key] = entry
    return entry[0], entry[3]


def _rnn_prepare(mode, x, h0, params, num_layers, bidirectional, forget_bias, cell_clip,
                 use_peephole, op):
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"blockrnn.torch: {op}: dtype {x.dtype}; the stack runs float32 and "
                        f"float64 (float16 runs layer by layer on the ops)")
    T, B, I, H, D = _rnn_sizes(x, h0, bidirectional)
    with _RNN_LOCK:
        rnn, lock = _rnn_object(mode, I, H, num_layers, bidirectional,
                                "float32" if x.dtype == torch.float32 else "float64", T, B,
                                forget_bias, cell_clip, use_peephole)
    P = _RNN_PARAMS[mode]
    arrays = [_np(p, op, "params") for p in params]
    return rnn, lock, T, B, I, H, D, P, arrays


def _opt(t: Optional[Tensor], op, arg):
    return None if t is None else _np(t, op, arg)


@torch.library.custom_op("blockrnn::rnn", mutates_args=())
def rnn(x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
        seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor], mode: str,
        num_layers: int, bidirectional: bool, forget_bias: float, cell_clip: float,
        use_peephole: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The stack's forward: y [T,B,D*H], h_n [L*D,B,H], c_n (LSTM; else empty), reserve."""
    op = "blockrnn::rnn"
    rnn_, lock, T, B, I, H, D, P, arrays = _rnn_prepare(
        mode, x, h0, params, num_layers, bidirectional, forget_bias, cell_clip, use_peephole, op)
    lstm_ = mode.startswith("lstm")
    y = x.new_empty((T, B, D * H))
    h_n = x.new_empty((num_layers * D, B, H))
    c_n = x.new_empty((num_layers * D, B, H) if lstm_ else (0,))
    reserve = x.new_empty((_reserve_elems(mode, T, B, I, H, num_layers, D),))
    with lock:
        for k in range(num_layers * D):
            rnn_.set_weights(k // D, k % D, arrays[k * P:(k + 1) * P])
        rnn_.forward(_np(x, op, "x"), _np(h0, op, "h0"), _opt(c0, op, "c0"),
                     None if seq_lengths is None else seq_lengths.numpy(),
                     _opt(dropout_mask, op, "dropout_mask"), y.numpy(), h_n.numpy(),
                     c_n.numpy() if lstm_ else None, reserve.numpy())
    return y, h_n, c_n, reserve


@rnn.register_fake
def _(x, h0, c0, params, seq_lengths, dropout_mask, mode, num_layers, bidirectional,
      forget_bias, cell_clip, use_peephole):
    T, B, I, H, D = _rnn_sizes(x, h0, bidirectional)
    lstm_ = mode.startswith("lstm")
    return (x.new_empty((T, B, D * H)), x.new_empty((num_layers * D, B, H)),
            x.new_empty((num_layers * D, B, H) if lstm_ else (0,)),
            x.new_empty((_reserve_elems(mode, T, B, I, H, num_layers, D),)))


@torch.library.custom_op("blockrnn::rnn_grad", mutates_args=())
def rnn_grad(x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
             seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor], reserve: Tensor,
             y_grad: Tensor, h_n_grad: Tensor, c_n_grad: Optional[Tensor], mode: str,
             num_layers: int, bidirectional: bool, forget_bias: float, cell_clip: float,
             use_peephole: bool) -> List[Tensor]:
    """The stack's backward: [x_grad, h0_grad, c0_grad (LSTM; else empty), *param grads]."""
    op = "blockrnn::rnn_grad"
    rnn_, lock, T, B, I, H, D, P, arrays = _rnn_prepare(
        mode, x, h0, params, num_layers, bidirectional, forget_bias, cell_clip, use_peephole, op)
    lstm_ = mode.startswith("lstm")
    x_grad = torch.empty_like(x, memory_format=torch.contiguous_format)
    h0_grad = torch.empty_like(h0, memory_format=torch.contiguous_format)
    c0_grad = x.new_empty(tuple(h0.shape) if lstm_ else (0,))
    p_grads = [torch.empty_like(p, memory_format=torch.contiguous_format) for p in params]
    with lock:
        for k in range(num_layers * D):
            rnn_.set_weights(k // D, k % D, arrays[k * P:(k + 1) * P])
        rnn_.backward(_np(x, op, "x"), _np(h0, op, "h0"), _opt(c0, op, "c0"),
                      None if seq_lengths is None else seq_lengths.numpy(),
                      _opt(dropout_mask, op, "dropout_mask"), _np(y_grad, op, "y_grad"),
                      _np(h_n_grad, op, "h_n_grad"), _opt(c_n_grad, op, "c_n_grad"),
                      x_grad.numpy(), h0_grad.numpy(), c0_grad.numpy() if lstm_ else None,
                      [g.numpy() for g in p_grads], _np(reserve, op, "reserve"))
    return [x_grad, h0_grad, c0_grad, *p_grads]


@rnn_grad.register_fake
def _(x, h0, c0, params, seq_lengths, dropout_mask, reserve, y_grad, h_n_grad, c_n_grad, mode,
      num_layers, bidirectional, forget_bias, cell_clip, use_peephole):
    lstm_ = mode.startswith("lstm")
    return [x.new_empty(x.shape), x.new_empty(h0.shape),
            x.new_empty(tuple(h0.shape) if lstm_ else (0,)), *[p.new_empty(p.shape)
                                                                for p in params]]


_RNN_ATTRS = ("mode", "num_layers", "bidirectional", "forget_bias", "cell_clip", "use_peephole")


def _rnn_setup(ctx, inputs, output):
    x, h0, c0, params, seq_lengths, mask = inputs[:6]
    ctx.attrs = inputs[6:]
    ctx.n_params = len(params)
    ctx.has_c0 = c0 is not None
    ctx.lens = seq_lengths
    ctx.has_mask = mask is not None
    saved = [x, h0, output[3], *params]
    if c0 is not None:
        saved.append(c0)
    if mask is not None:
        saved.append(mask)
    ctx.save_for_backward(*saved)


def _rnn_backward(ctx, gy, ghn, gcn, _greserve):
    saved = list(ctx.saved_tensors)
    x, h0, reserve = saved[:3]
    params = saved[3:3 + ctx.n_params]
    rest = saved[3 + ctx.n_params:]
    c0 = rest.pop(0) if ctx.has_c0 else None
    mask = rest.pop(0) if ctx.has_mask else None
    mode = ctx.attrs[0]
    D = 2 if ctx.attrs[2] else 1
    H = h0.shape[2]
    gy = gy if gy is not None else x.new_zeros((x.shape[0], x.shape[1], D * H))
    ghn = ghn if ghn is not None else torch.zeros_like(h0)
    if mode.startswith("lstm"):
        gcn = gcn if gcn is not None else torch.zeros_like(h0)
    else:
        gcn = None
    g = rnn_grad(x, h0, c0, params, ctx.lens, mask, reserve, gy.contiguous(), ghn.contiguous(),
                 None if gcn is None else gcn.contiguous(), *ctx.attrs)
    x_grad, h0_grad, c0_grad = g[0], g[1], g[2]
    return (x_grad, h0_grad, c0_grad if ctx.has_c0 else None, list(g[3:]), None, None,
            *([None] * len(_RNN_ATTRS)))


rnn.register_autograd(_rnn_backward, setup_context=_rnn_setup)
