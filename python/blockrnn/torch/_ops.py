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
from typing import Optional, Tuple

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


@gru_reset_after.register_fake
def _(x, h_prev, w_i, w_h, b_i, b_h, seq_lengths=None):
    shape = (x.shape[0], x.shape[1], h_prev.shape[1])
    return tuple(x.new_empty(shape) for _ in range(5))


@torch.library.custom_op("blockrnn::gru_reset_after_grad", mutates_args=())
def gru_reset_after_grad(x: Tensor, h_prev: Tensor, w_i: Tensor, w_h: Tensor, b_i: Tensor,
                         b_h: Tensor, r: Tensor, u: Tensor, n: Tensor, hn: Tensor, h: Tensor,
                         h_grad: Tensor, seq_lengths: Optional[Tensor] = None
                         ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockGRUResetAfterGrad: x_grad, h_prev_grad, w_i_grad, w_h_grad, b_i_grad, b_h_grad."""
    return _call(raw_ops.BlockGRUResetAfterGrad, "BlockGRUResetAfterGrad",
                 dict(x=x, h_prev=h_prev, w_i=w_i, w_h=w_h, b_i=b_i, b_h=b_h, r=r, u=u, n=n,
                      hn=hn, h=h, h_grad=h_grad), seq_lengths)


@gru_reset_after_grad.register_fake
def _(x, h_prev, w_i, w_h, b_i, b_h, r, u, n, hn, h, h_grad, seq_lengths=None):
    return tuple(x.new_empty(t.shape) for t in (x, h_prev, w_i, w_h, b_i, b_h))


def _gru_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:6], *output)
    ctx.lens = inputs[6]


def _gru_autograd(fwd, grad):
    """Wires a GRU op's backward (both variants: six inputs, then seq_lengths; h the last
    output, the only differentiable one)."""
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        gh = torch.zeros_like(saved[-1]) if grads[-1] is None else grads[-1]
        return (*grad(*saved, gh, ctx.lens), None)

    fwd.register_autograd(backward, setup_context=_gru_setup)


_gru_autograd(gru_reset_after, gru_reset_after_grad)


# ------------------------------------------- GRU (reset before: TensorFlow's GRUBlockCell)

@torch.library.custom_op("blockrnn::gru_reset_before", mutates_args=())
def gru_reset_before(x: Tensor, h_prev: Tensor, w_ru: Tensor, w_c: Tensor, b_ru: Tensor,
                     b_c: Tensor, seq_lengths: Optional[Tensor] = None
                     ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """BlockGRU (TensorFlow's GRUBlockCell over a sequence): r, u, c, h ([T,B,H] each)."""
    return _call(raw_ops.BlockGRU, "BlockGRU",
                 dict(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c), seq_lengths)


@gru_reset_before.register_fake
def _(x, h_prev, w_ru, w_c, b_ru, b_c, seq_lengths=None):
    shape = (x.shape[0], x.shape[1], h_prev.shape[1])
    return tuple(x.new_empty(shape) for _ in range(4))


@torch.library.custom_op("blockrnn::gru_reset_before_grad", mutates_args=())
def gru_reset_before_grad(x: Tensor, h_prev: Tensor, w_ru: Tensor, w_c: Tensor, b_ru: Tensor,
                          b_c: Tensor, r: Tensor, u: Tensor, c: Tensor, h: Tensor,
                          h_grad: Tensor, seq_lengths: Optional[Tensor] = None
                          ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockGRUGrad: x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad."""
    return _call(raw_ops.BlockGRUGrad, "BlockGRUGrad",
                 dict(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c, r=r, u=u, c=c,
                      h=h, h_grad=h_grad), seq_lengths)


@gru_reset_before_grad.register_fake
def _(x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, h, h_grad, seq_lengths=None):
    return tuple(x.new_empty(t.shape) for t in (x, h_prev, w_ru, w_c, b_ru, b_c))


_gru_autograd(gru_reset_before, gru_reset_before_grad)
