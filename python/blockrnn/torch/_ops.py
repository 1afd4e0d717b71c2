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

Every op takes an optional `seq_lengths` ([B], blockrnn's per-example lengths, when the core
has them: HAS_SEQ_LENGTHS), of any integer dtype as pack_padded_sequence takes its lengths
(passed on as int64); it is not differentiable.
"""
import inspect
from typing import List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from .. import _cuda, raw_ops
from .._device import device_message

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# blockrnn's per-example lengths (`seq_lengths`, docs/ops.md) in this build of the core?
HAS_SEQ_LENGTHS = "seq_lengths" in inspect.signature(raw_ops.BlockLSTMV2).parameters


def _lengths_kw(seq_lengths: Optional[Tensor], op: str) -> dict:
    if seq_lengths is None:
        return {}
    if not HAS_SEQ_LENGTHS:
        raise NotImplementedError(f"blockrnn.torch: {op}: this blockrnn build has no "
                                  f"seq_lengths input")
    return {"seq_lengths": lengths_array(seq_lengths, op)}


def _np(t: Tensor, op: str, arg: str) -> np.ndarray:
    if t.device.type == "cuda":
        if _cuda.available():  # a CUDA build: the sequence ops run there (_call), not this one
            raise NotImplementedError(
                f"blockrnn.torch: {op}: {arg} is on a CUDA device; this op runs on the CPU only "
                f"(on CUDA tensors blockrnn runs the sequence ops: blockrnn.torch's modules and "
                f"blockrnn::lstm / gru_reset_after / gru_reset_before)")
        raise NotImplementedError(device_message(f"blockrnn.torch: {op}", arg, "CUDA"))
    if t.device.type != "cpu":
        raise NotImplementedError(
            f"blockrnn.torch: {op}: {arg} is on device '{t.device}'; blockrnn runs on the CPU "
            f"only (a GPU backend is a separate issue). Move the module and inputs to 'cpu'.")
    if t.dtype not in _DTYPES:
        raise TypeError(f"blockrnn.torch: {op}: {arg} has dtype {t.dtype}; supported: "
                        f"float16, bfloat16, float32, float64")
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: ml_dtypes' view of the same bits
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError(f"blockrnn.torch: {op}: {arg} is bfloat16, which needs the "
                            f"ml_dtypes package (pip install ml_dtypes)") from None
        return t.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.detach().numpy()


def _core_np(t: Tensor, op: str, arg: str) -> np.ndarray:
    """_np as the library's stack takes it: a bfloat16 tensor as a uint16 view of its bits."""
    a = _np(t, op, arg)
    # (the tensor's dtype, not numpy's `dtype.name`, which costs microseconds a call)
    return a.view(np.uint16) if t.dtype == torch.bfloat16 else a


def _out_np(t: Tensor) -> np.ndarray:
    """A new output tensor as a numpy view the library writes (bfloat16: its bits as uint16)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _t(a: np.ndarray) -> Tensor:
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _steps(x: Tensor) -> int:
    return int(x.shape[0])


def _call(fn, op: str, tensors: dict, seq_lengths: Optional[Tensor], **attrs) -> tuple:
    """fn (a raw op) on numpy views of `tensors` (name -> tensor; "x" among them), all of x's
    steps, the optional lengths and `attrs`; its outputs as tensors (no copies either way).
    CUDA tensors, in a build with the CUDA backend: the raw op on the tensors themselves, on
    torch's current stream, its outputs torch tensors of the same device (_cuda.py)."""
    if _cuda.available() and any(t.device.type == "cuda" for t in tensors.values()):
        if seq_lengths is not None:
            raise NotImplementedError(f"blockrnn.torch: {op}: seq_lengths is not supported on the "
                                      f"CUDA backend yet")
        args = {name: t.detach().contiguous() for name, t in tensors.items()}
        return tuple(fn(seq_len_max=_steps(tensors["x"]), **args, **attrs))
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
    op = "blockrnn::lstm (BlockLSTM)" if tf_order else "blockrnn::lstm (BlockLSTMV2)"
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
    op = "blockrnn::lstm_grad (BlockLSTMGrad)" if tf_order \
        else "blockrnn::lstm_grad (BlockLSTMGradV2)"
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
    # unused outputs' gradients come as None, not filled with zeros (only cs's and h's are read)
    ctx.set_materialize_grads(False)
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
    return _call(raw_ops.BlockGRUResetAfter, "blockrnn::gru_reset_after (BlockGRUResetAfter)",
                 dict(x=x, h_prev=h_prev, w_i=w_i, w_h=w_h, b_i=b_i, b_h=b_h), seq_lengths)


@torch.library.custom_op("blockrnn::gru_reset_after_grad", mutates_args=())
def gru_reset_after_grad(x: Tensor, h_prev: Tensor, w_i: Tensor, w_h: Tensor, b_i: Tensor,
                         b_h: Tensor, r: Tensor, u: Tensor, n: Tensor, hn: Tensor, h: Tensor,
                         h_grad: Tensor, seq_lengths: Optional[Tensor] = None
                         ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockGRUResetAfterGrad: x_grad, h_prev_grad, w_i_grad, w_h_grad, b_i_grad, b_h_grad."""
    return _call(raw_ops.BlockGRUResetAfterGrad,
                 "blockrnn::gru_reset_after_grad (BlockGRUResetAfterGrad)",
                 dict(x=x, h_prev=h_prev, w_i=w_i, w_h=w_h, b_i=b_i, b_h=b_h, r=r, u=u, n=n,
                      hn=hn, h=h, h_grad=h_grad), seq_lengths)


def _gru_setup(ctx, inputs, output):
    # unused outputs' gradients come as None, not filled with zeros (only h's is read)
    ctx.set_materialize_grads(False)
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
    return _call(raw_ops.BlockGRU, "blockrnn::gru_reset_before (BlockGRU)",
                 dict(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c), seq_lengths)


@torch.library.custom_op("blockrnn::gru_reset_before_grad", mutates_args=())
def gru_reset_before_grad(x: Tensor, h_prev: Tensor, w_ru: Tensor, w_c: Tensor, b_ru: Tensor,
                          b_c: Tensor, r: Tensor, u: Tensor, c: Tensor, h: Tensor,
                          h_grad: Tensor, seq_lengths: Optional[Tensor] = None
                          ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """BlockGRUGrad: x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad."""
    return _call(raw_ops.BlockGRUGrad, "blockrnn::gru_reset_before_grad (BlockGRUGrad)",
                 dict(x=x, h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c, r=r, u=u, c=c,
                      h=h, h_grad=h_grad), seq_lengths)


_gru_autograd(gru_reset_before, gru_reset_before_grad, 4)


# ------------------------------------------------- the whole stack: blockrnn::rnn (one call)
#
# torch.nn.LSTM / GRU's layers, directions, dropout masks and per-example lengths in one
# library call each way (blockrnn.RNN, blockrnn/layer.h). The activations the backward reads
# come back as `reserve` (a 1-D tensor, cuDNN's reserve space), an output the backward takes
# again; so several forward calls can await their backward.
#
# Two op pairs differ only in how the parameters are laid out:
# - blockrnn::nn_rnn / nn_rnn_grad (the modules' path) take torch.nn's own parameters, per
#   (layer, direction) weight_ih [G*H, I_l], weight_hh [G*H, H], then bias_ih, bias_hh [G*H]
#   when has_bias, then (LSTM with use_peephole) w_ci, w_cf, w_co [H]; the gradients come
#   back in the same layout, contiguous, as torch.nn returns them.
# - blockrnn::rnn / rnn_grad take the ops' layout, per (layer, direction) LSTM [w [I+H,4H],
#   b [4H], wci, wcf, wco [H]], GRU (reset before) [w_ru, w_c, b_ru, b_c], GRU reset-after
#   [w_i, w_h, b_i, b_h], all C-contiguous.
#
# Plans. The library object (a _core.RNN: every layer object, its packed weights and the
# stack's buffers) is a plan kept between calls, in a small LRU cache (MAX_PLANS entries) keyed
# by the configuration's values (floats by their bit pattern, so a NaN cell_clip finds its
# plan again) and, on the torch.nn layout, by the parameters' owner (the first weight), so
# that two modules of the same configuration keep a plan each. A plan holds its weights packed
# with a stamp of the parameters they came from: each tensor itself (a weak reference), its
# version counter (bumped by every in-place change autograd sees: optimiser steps,
# load_state_dict, updates under no_grad) and its storage address, shape and strides (a
# `.data =` swap keeps the version counter), and a copy of its values, compared bit for bit
# too, since writes through `.data` (gradcheck's perturbations) and collectives bypass the
# version counter. A call whose parameters match the stamp packs nothing; any change packs
# every layer once (weight_packs() counts them). A plan is sized for the calls it serves: it
# grows to cover a new shape only while the grown size is at most twice the larger of the two
# shapes', else it is rebuilt for the new call's shape.

import atexit
import collections
import functools
import struct
import threading
import weakref

from .. import _bitwise, _core
from ..layers import _check_memory
from . import _differentiable

MAX_PLANS = 8
_PLANS: "collections.OrderedDict[tuple, _Plan]" = collections.OrderedDict()
_PLANS_LOCK = threading.Lock()
_PACKS = [0]


@atexit.register
def clear_plans() -> None:
    """Drops every cached plan (the next call of each configuration builds and packs anew).
    Also runs at exit, so that the _core objects go before the extension module does."""
    with _PLANS_LOCK:
        _PLANS.clear()
        _layout_rnn.cache_clear()


def cached_plans() -> int:
    """How many plans the cache holds (at most MAX_PLANS)."""
    return len(_PLANS)


def weight_packs() -> int:
    """How many times a plan has packed its weights (set_weights of every layer and direction)
    since the process started: unchanged parameters are not packed again."""
    return _PACKS[0]


_Config = collections.namedtuple(
    "_Config", "layout mode I H L bidirectional dtype has_bias forget_bias cell_clip "
               "use_peephole")


def _bits(v: float) -> bytes:
    """A float as a dictionary key: its bit pattern (NaN equals itself)."""
    return struct.pack("<d", float(v))


def _unbits(b: bytes) -> float:
    return struct.unpack("<d", b)[0]


_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32",
                torch.float64: "float64"}


def _config(layout, mode, x, h0, num_layers, bidirectional, has_bias, forget_bias, cell_clip,
            use_peephole, op) -> _Config:
    if mode not in ("lstm", "lstm_v2", "gru", "gru_reset_after"):
        raise ValueError(f"{op}: mode must be 'lstm', 'lstm_v2', 'gru' or 'gru_reset_after', "
                         f"got {mode!r}")
    if x.dtype not in _DTYPE_NAMES:
        raise TypeError(f"blockrnn.torch: {op}: dtype {x.dtype}; the stack runs float16, "
                        f"bfloat16, float32 and float64")
    return _Config(layout, mode, int(x.shape[2]), int(h0.shape[2]), int(num_layers),
                   bool(bidirectional), _DTYPE_NAMES[x.dtype],
                   bool(has_bias), _bits(forget_bias), _bits(cell_clip), bool(use_peephole))


def _torch_layout(cfg: _Config) -> bool:
    """Whether the plan's RNN takes torch.nn's tensors as they are and writes their gradients
    in torch.nn's layout (the library's param_layout "torch"): torch.nn's own variants, the
    IFCO LSTM and the reset-after GRU. The other modes' parameters are rearranged here."""
    return cfg.layout == "nn" and cfg.mode in ("lstm_v2", "gru_reset_after")


def _torch_slots(cfg: _Config, group) -> list:
    """One (layer, direction)'s torch.nn tensors, or their gradients, in the order the
    library's torch layout takes them: weight_ih, weight_hh, bias_ih, bias_hh (None:
    bias=False), then an LSTM's three peepholes (None without)."""
    w_ih, w_hh, b_ih, b_hh, peepholes = _nn_group(cfg, group)
    slots = [w_ih, w_hh, b_ih, b_hh]
    if cfg.mode == "lstm_v2":
        slots += list(peepholes) if cfg.use_peephole else [None, None, None]
    return slots


def _new_rnn(cfg: _Config, T: int, B: int):
    return _core.RNN(cfg.mode, cfg.I, cfg.H, cfg.L, cfg.bidirectional, cfg.dtype, T, B,
                     None if cfg.mode != "lstm" else _unbits(cfg.forget_bias),
                     _unbits(cfg.cell_clip), cfg.use_peephole, caller_reserve=True,
                     param_layout="torch" if _torch_layout(cfg) else "ops")


@functools.lru_cache(maxsize=32)
def _layout_rnn(mode, I, H, L, bidirectional):
    """An RNN sized for one step of one example: the library's reserve formula, for the fake
    functions too (RNN.reserve_elems accepts T and B only up to the sizes it was made for)."""
    return _core.RNN(mode, I, H, L, bidirectional, "float32", 1, 1, caller_reserve=True)


def _layout_reserve_elems(mode, I, H, L, bidirectional, T: int, B: int) -> int:
    """The reserve of a T x B call: every block of the library's reserve holds T*B rows (the
    gates, the reversed and the inner layers' inputs), so it is T*B times that of one step of
    one example; the library checks the reserve's size on every call."""
    return T * B * _layout_rnn(mode, I, H, L, bidirectional).reserve_elems(1, 1)


def _reserve_elems(cfg: _Config, T: int, B: int) -> int:
    return _layout_reserve_elems(cfg.mode, cfg.I, cfg.H, cfg.L, cfg.bidirectional, T, B)


class _Plan:
    """A _core.RNN sized for up to T steps and B examples, and the stamp of the parameters
    whose weights it holds packed (None: none yet)."""

    def __init__(self, cfg: _Config, T: int, B: int):
        self.rnn = _new_rnn(cfg, T, B)
        self.T, self.B = T, B
        self.lock = threading.Lock()
        self.stamp = None
        self.grad_key, self.grad_bufs = None, {}  # _ops_layout_grads
        self.pack_bufs = {}  # _nn_weights_to_pack


def _plan_size(old: Optional[_Plan], T: int, B: int) -> Tuple[int, int]:
    T, B = max(T, 1), max(B, 1)
    if old is None:
        return T, B
    T2, B2 = max(T, old.T), max(B, old.B)
    # Covering both shapes is worth it while it costs at most twice the larger one (varying
    # lengths or batch sizes); a far-off shape (T = 20000, B = 1 then T = 10, B = 512) gets a
    # plan of its own size, not the product of the two maxima.
    if T2 * B2 <= 2 * max(T * B, old.T * old.B):
        return T2, B2
    return T, B


def _plan(cfg: _Config, owner, T: int, B: int) -> _Plan:
    key = (cfg, owner)
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
        if plan is None or plan.T < T or plan.B < B:
            plan = _Plan(cfg, *_plan_size(plan, T, B))
            _PLANS[key] = plan
        _PLANS.move_to_end(key)
        while len(_PLANS) > MAX_PLANS:
            _PLANS.popitem(last=False)
        return plan


def _version(p: Tensor) -> Optional[int]:
    try:
        return p._version
    except RuntimeError:  # inference tensors keep no version counter: never taken as unchanged
        return None


def _stamp(params, old_values=None) -> tuple:
    """What _unchanged compares: per tensor a weak reference, its version counter, storage
    address, shape and strides, and a copy of its values (written into `old_values`, the
    copies of the previous stamp, where they fit: a training loop stamps every step, and
    fresh buffers of this size cost page faults that an in-place copy does not)."""
    ids = tuple((weakref.ref(p), _version(p), p.data_ptr(), tuple(p.shape), tuple(p.stride()))
                for p in params)
    values = _bitwise.refill(
        old_values, params,
        lambda c, p: c.shape == p.shape and c.dtype == p.dtype and c.stride() == p.stride(),
        lambda c, p: c.copy_(p.detach()), lambda p: p.detach().clone())
    return ids, values


def _unchanged(stamp, params, by_value: bool = False) -> bool:
    """True when `params` are the tensors of `stamp`, unchanged. The version counters see
    every write autograd tracks (optimiser steps, load_state_dict, in-place updates under
    no_grad), so a changed one repacks at once; the values are compared as well, because
    writes through `.data` (gradcheck's perturbations, old-style manual updates) and into
    the storage by collectives bypass the counter."""
    # Why not the version counters and identity alone: `p.data.add_(1)` leaves p._version
    # unchanged (`.data` is a tensor with a version counter of its own), and
    # torch.autograd.gradcheck perturbs its inputs through `.data` ("to get around the version
    # check"), so keying on the counters would run stale packed weights there and after any
    # `p.data -= lr * p.grad` update. The comparison reads the parameters and the copy once per
    # call (_same_bits: about 0.25 ms per 3 MB matrix, cold caches, measured): a fraction of a
    # percent of a T = 50, B = 64 step, more on one-step calls (docs/performance.md).
    if stamp is None:
        return False
    ids, values = stamp
    if by_value:  # tensors made for the call (the batched-gradient path): the values decide
        return len(values) == len(params) and all(
            c.shape == p.shape and _same_bits(p.detach(), c) for p, c in zip(params, values))
    return len(ids) == len(params) and all(
        ref() is p and v is not None and v == _version(p) and ptr == p.data_ptr()
        and shape == tuple(p.shape) and strides == tuple(p.stride())
        for (ref, v, ptr, shape, strides), p in zip(ids, params)) and all(
        _same_bits(p.detach(), c) for p, c in zip(params, values))


_INT_OF = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
           torch.float64: torch.int64}


def _bit_view(t: Tensor) -> Tensor:
    """t's bit patterns (NaN equals itself, -0.0 differs from 0.0): equality means the same
    packed weights."""
    return t.view(_INT_OF[t.dtype]) if t.dtype in _INT_OF else t


# Tensors of at most this many elements are compared by torch.equal: on a small tensor its
# one call (2.3 µs for 24 floats, measured) costs less than numpy's views and checks (10 µs).
_SMALL_COMPARE = 16384


def _same_bits(a: Tensor, b: Tensor) -> bool:
    """a and b (the same shape) hold the same bit patterns. Large storages are compared by
    one memcmp of their numpy views (_bitwise.same_bits: no copies, no temporary; 3 MB, cold
    caches: 0.25 ms, against 0.34 for numpy's array_equal, which allocates a boolean array of
    their size, and 0.31 for torch.equal on two threads, measured), which matters on one-step
    calls, where the comparison runs twice per training step; torch.equal compares small
    tensors and those numpy cannot view."""
    a, b = _bit_view(a), _bit_view(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device.type == "cpu" and a.dtype in _INT_OF.values() and a.numel() > _SMALL_COMPARE:
        return _bitwise.same_bits(a.numpy(), b.numpy())
    return torch.equal(a, b)


def _per_direction(cfg: _Config) -> int:
    """Parameters per (layer, direction) in the op's layout."""
    if cfg.layout == "ops":
        return 5 if cfg.mode.startswith("lstm") else 4
    return 2 + (2 if cfg.has_bias else 0) + (3 if cfg.use_peephole else 0)


def _tf_gate_order(H: int) -> Tensor:
    """Rows of torch's LSTM gate order i, f, g, o in TensorFlow's i, c, f, o (its own inverse)."""
    return torch.cat([torch.arange(0, H), torch.arange(2 * H, 3 * H), torch.arange(H, 2 * H),
                      torch.arange(3 * H, 4 * H)])


def nn_to_ops_layout(mode: str, H: int, w_ih: Tensor, w_hh: Tensor, b_ih: Optional[Tensor],
                     b_hh: Optional[Tensor], peepholes=()) -> List[Tensor]:
    """One (layer, direction)'s torch.nn parameters (biases None: bias=False) in the ops'
    layout, as the op of `mode` takes them: LSTM [w [I+H,4H], b, *peepholes] ("lstm": rows in
    TensorFlow's gate order), GRU reset-after [w_i, w_h, b_i, b_h], GRU (reset before) [w_ru,
    w_c, b_ru, b_c]. New tensors where the layout differs (differentiable); views otherwise."""
    G = w_ih.shape[0]

    def zeros(n):
        return w_ih.new_zeros(n)
    if mode.startswith("lstm"):
        b = zeros(G) if b_ih is None else b_ih + b_hh
        if mode == "lstm":
            perm = _tf_gate_order(H)
            w_ih, w_hh, b = w_ih[perm], w_hh[perm], b[perm]
        # [w_ih | w_hh]ᵀ: one transpose of the joined rows (torch's blocked transposing copy
        # when made contiguous), several times faster than joining the two transposed views
        return [torch.cat([w_ih, w_hh], 1).t(), b, *peepholes]
    if mode == "gru_reset_after":
        return [w_ih.t(), w_hh.t(), zeros(G) if b_ih is None else b_ih,
                zeros(G) if b_hh is None else b_hh]
    H2 = 2 * H
    b_ru = zeros(H2) if b_ih is None else b_ih[:H2] + b_hh[:H2]
    b_c = zeros(H) if b_ih is None else b_ih[H2:] + b_hh[H2:]
    return [torch.cat([w_ih[:H2].t(), w_hh[:H2].t()], 0),
            torch.cat([w_ih[H2:].t(), w_hh[H2:].t()], 0), b_ru, b_c]


def _nn_group(cfg: _Config, g):
    """(w_ih, w_hh, b_ih, b_hh, peepholes) of one (layer, direction)'s torch.nn parameters."""
    if cfg.has_bias:
        return g[0], g[1], g[2], g[3], g[4:]
    return g[0], g[1], None, None, g[2:]


def _ops_grads_to_nn(cfg: _Config, I_l: int, g) -> List[Tensor]:
    """One (layer, direction)'s gradients in the ops' layout -> torch.nn's layout, contiguous
    (torch.nn's strides), for the TensorFlow variants ("lstm", "gru"; the library writes torch.nn's
    own variants' in their layout): weight_ih_grad, weight_hh_grad, (bias_ih_grad,
    bias_hh_grad), (peephole grads). The weight matrices come back as new tensors, never views
    of g's (_ops_layout_grads reuses those)."""
    H = cfg.H
    if cfg.mode == "lstm":
        gw, gb = g[0], g[1]
        perm = _tf_gate_order(H)  # indexing copies
        out = [gw[:I_l].t()[perm].contiguous(), gw[I_l:].t()[perm].contiguous()]
        if cfg.has_bias:
            gb = gb[perm]
            out += [gb, gb.clone()]  # b = b_ih + b_hh: the same gradient twice
        return out + (list(g[2:5]) if cfg.use_peephole else [])
    gw_ru, gw_c, gb_ru, gb_c = g
    out = [torch.cat([gw_ru[:I_l].t(), gw_c[:I_l].t()], 0),
           torch.cat([gw_ru[I_l:].t(), gw_c[I_l:].t()], 0)]
    if cfg.has_bias:
        gb = torch.cat([gb_ru, gb_c])
        out += [gb, gb.clone()]
    return out


def _ops_shapes(cfg: _Config, I_l: int) -> List[Tuple[int, ...]]:
    """Shapes of one (layer, direction)'s parameters in the ops' layout, for the TensorFlow
    variants ("lstm" with the three peephole vectors, which the backward fills with or without
    peepholes; "gru")."""
    H = cfg.H
    if cfg.mode == "lstm":
        return [(I_l + H, 4 * H), (4 * H,), (H,), (H,), (H,)]
    return [(I_l + H, 2 * H), (I_l + H, H), (2 * H,), (H,)]


def _layer_input_size(cfg: _Config, layer: int) -> int:
    return cfg.I if layer == 0 else (2 if cfg.bidirectional else 1) * cfg.H


def _nn_weights_to_pack(plan: _Plan, cfg: _Config, group: List[Tensor]) -> List[Tensor]:
    """One (layer, direction)'s torch.nn parameters in the ops' layout, contiguous, for
    set_weights of the TensorFlow variants ("lstm", "gru"; torch.nn's own take the tensors as
    they are, _torch_slots), which copies them (plan.lock held, under no_grad): the values of
    nn_to_ops_layout, with the transposed weight matrices written into buffers of the plan
    kept between packs. A training loop packs at every step, and there fresh buffers of
    megabytes cost page faults, and torch.cat of transposed views is several times slower than
    copying each into its rows of the joined matrix (an I = H = 512 LSTM: 9 against 2.5 ms,
    measured)."""
    w_ih, w_hh, b_ih, b_hh, peepholes = _nn_group(cfg, group)
    if cfg.mode == "lstm":  # rows in TensorFlow's gate order: indexing copies anyway
        return [t.contiguous() for t in nn_to_ops_layout(cfg.mode, cfg.H, w_ih, w_hh, b_ih,
                                                         b_hh, peepholes)]
    H, I_l = cfg.H, int(w_ih.shape[1])

    def joined(n: int, top: Tensor, bottom: Tensor) -> Tensor:  # [topᵀ; bottomᵀ]
        out = _pack_buffer(plan, n, (I_l + H, int(top.shape[0])), top)
        out[:I_l].copy_(top.t())
        out[I_l:].copy_(bottom.t())
        return out

    def bias(a: Optional[Tensor], b: Optional[Tensor], rows: slice) -> Tensor:
        G = int(w_ih[rows].shape[0])
        return w_ih.new_zeros(G) if a is None else a[rows] + b[rows]
    ru, c = slice(0, 2 * H), slice(2 * H, 3 * H)
    return [joined(0, w_ih[ru], w_hh[ru]), joined(1, w_ih[c], w_hh[c]), bias(b_ih, b_hh, ru),
            bias(b_ih, b_hh, c)]


def _pack_buffer(plan: _Plan, n: int, shape: Tuple[int, int], like: Tensor) -> Tensor:
    """The plan's buffer number n of `shape` with like's dtype and device for
    _nn_weights_to_pack (made at the first pack that needs it, kept between packs; on like's
    device, so that a parameter off the CPU is refused by name as before)."""
    key = (n, shape, like.dtype, str(like.device))
    buf = plan.pack_bufs.get(key)
    if buf is None:
        buf = plan.pack_bufs[key] = like.new_empty(shape)
    return buf


def _pack(plan: _Plan, cfg: _Config, params: List[Tensor], op: str,
          by_value: bool = False) -> None:
    """Sets the plan's weights from `params` unless they are the ones it holds (plan.lock
    held)."""
    if _unchanged(plan.stamp, params, by_value):
        return
    old_values = plan.stamp[1] if plan.stamp is not None else None
    plan.stamp = None
    D = 2 if cfg.bidirectional else 1
    P = _per_direction(cfg)
    with torch.no_grad():
        for k in range(cfg.L * D):
            group = params[k * P:(k + 1) * P]
            if _torch_layout(cfg):
                group = [None if t is None else t.contiguous() for t in _torch_slots(cfg, group)]
            elif cfg.layout == "nn":
                group = _nn_weights_to_pack(plan, cfg, group)
            plan.rnn.set_weights(k // D, k % D,
                                 [None if t is None else _core_np(t, op, "params") for t in group])
    plan.stamp = _stamp(params, old_values)
    with _PLANS_LOCK:
        _PACKS[0] += 1


def lengths_array(seq_lengths: Optional[Tensor], op: str) -> Optional[np.ndarray]:
    """seq_lengths as the library takes them (int64 [B], a numpy view), None when absent. Any
    integer dtype is taken, as pack_padded_sequence takes its lengths."""
    if seq_lengths is None:
        return None
    if not isinstance(seq_lengths, Tensor) or seq_lengths.device.type != "cpu" \
            or seq_lengths.dtype.is_floating_point or seq_lengths.dtype.is_complex \
            or seq_lengths.dtype == torch.bool:
        what = (f"{seq_lengths.dtype} on {seq_lengths.device}" if isinstance(seq_lengths, Tensor)
                else type(seq_lengths).__name__)
        raise TypeError(f"blockrnn.torch: {op}: seq_lengths must be an integer CPU tensor "
                        f"(int64, or another integer dtype as pack_padded_sequence takes), got "
                        f"{what}")
    return seq_lengths.to(torch.int64).contiguous().numpy()


def _check_params(cfg: _Config, params, op: str) -> None:
    D = 2 if cfg.bidirectional else 1
    want = cfg.L * D * _per_direction(cfg)
    if len(params) != want:
        raise ValueError(f"{op}: params must hold {want} tensors ({_per_direction(cfg)} per "
                         f"layer and direction), got {len(params)}")


def _check_stack_memory(op, x: Tensor, elems: int, what: str) -> None:
    """Refuses (ResourceExhaustedError naming the op) a call whose `elems` elements of
    outputs, which torch allocates here before the library checks the call, and the
    contiguous copy of a strided x, need more than the memory limit."""
    if not x.is_contiguous():
        elems += x.numel()
        what += f" and a contiguous copy of x {list(x.shape)}"
    _check_memory(op, elems * x.element_size(), what)


def _opt(t: Optional[Tensor], op, arg):
    return None if t is None else _core_np(t, op, arg)


def _stack_forward(op, layout, x, h0, c0, params, seq_lengths, dropout_mask, mode, num_layers,
                   bidirectional, has_bias, forget_bias, cell_clip, use_peephole):
    cfg = _config(layout, mode, x, h0, num_layers, bidirectional, has_bias, forget_bias,
                  cell_clip, use_peephole, op)
    _check_params(cfg, params, op)
    T, B, D, H = int(x.shape[0]), int(x.shape[1]), 2 if bidirectional else 1, cfg.H
    lens = lengths_array(seq_lengths, op)
    lstm_ = mode.startswith("lstm")
    reserve_elems = _reserve_elems(cfg, T, B)
    _check_stack_memory(op, x, T * B * D * H + (2 if lstm_ else 1) * num_layers * D * B * H
                        + reserve_elems, f"y [{T}, {B}, {D * H}], the final states and the "
                        f"reserve of {reserve_elems} elements")
    x = x.contiguous()  # a strided x (an expanded one) is copied once its memory has passed
    y = x.new_empty((T, B, D * H))
    h_n = x.new_empty((num_layers * D, B, H))
    c_n = x.new_empty((num_layers * D, B, H) if lstm_ else (0,))
    reserve = x.new_empty((reserve_elems,))
    plan = _plan(cfg, id(params[0]) if layout == "nn" else None, T, B)
    with plan.lock:
        _pack(plan, cfg, params, op)
        plan.rnn.forward(_core_np(x, op, "x"), _core_np(h0, op, "h0"), _opt(c0, op, "c0"), lens,
                         _opt(dropout_mask, op, "dropout_mask"), _out_np(y), _out_np(h_n),
                         _out_np(c_n) if lstm_ else None, _out_np(reserve))
    return y, h_n, c_n, reserve


def _ops_layout_grads(plan: _Plan, cfg: _Config, x: Tensor) -> List[Tensor]:
    """Tensors for the library's parameter gradients in the ops' layout, on the way to
    torch.nn's (plan.lock held). The weight matrices' (2-D) are the plan's own buffers, kept
    between calls: _ops_grads_to_nn copies each into a new tensor in torch.nn's layout, so
    they never leave the call, and reusing them spares the page faults of fresh megabytes at
    every backward (a tenth of a one-step call at I = H = 512). The vectors are new tensors
    (_ops_grads_to_nn may return them as they are)."""
    D = 2 if cfg.bidirectional else 1
    shapes = [shape for k in range(cfg.L * D)
              for shape in _ops_shapes(cfg, _layer_input_size(cfg, k // D))]
    key = (x.dtype, tuple(shapes))
    if plan.grad_key != key:
        plan.grad_bufs = {n: x.new_empty(shape) for n, shape in enumerate(shapes)
                          if len(shape) == 2}
        plan.grad_key = key
    return [plan.grad_bufs[n] if n in plan.grad_bufs else x.new_empty(shape)
            for n, shape in enumerate(shapes)]


def _stack_backward(op, layout, x, h0, c0, params, seq_lengths, dropout_mask, reserve, y_grad,
                    h_n_grad, c_n_grad, mode, num_layers, bidirectional, has_bias, forget_bias,
                    cell_clip, use_peephole, flat: bool = False, x_grad_wanted: bool = True,
                    states_grad_wanted: bool = True):
    cfg = _config(layout, mode, x, h0, num_layers, bidirectional, has_bias, forget_bias,
                  cell_clip, use_peephole, op)
    _check_params(cfg, params, op)
    T, B, D = int(x.shape[0]), int(x.shape[1]), 2 if bidirectional else 1
    lens = lengths_array(seq_lengths, op)
    lstm_ = mode.startswith("lstm")
    _check_stack_memory(op, x, 2 * x.numel() + 2 * h0.numel() + sum(p.numel() for p in params),
                        f"x_grad {list(x.shape)}, the states' and the parameters' gradients")
    x = x.contiguous()
    # x_grad_wanted False (x needs no gradient, as the first layer's data input): x_grad is
    # returned empty and the library skips the input-gradient products.
    x_grad = torch.empty_like(x, memory_format=torch.contiguous_format) if x_grad_wanted else \
        x.new_empty((0,))
    # states_grad_wanted False (neither h0 nor c0 needs a gradient, as torch.nn's zero initial
    # states): h0_grad and c0_grad are returned empty and the library skips the first step's
    # recurrent products (a third of a one-step backward's work).
    h0_grad = torch.empty_like(h0, memory_format=torch.contiguous_format) \
        if states_grad_wanted else x.new_empty((0,))
    c0_wanted = lstm_ and states_grad_wanted
    c0_grad = x.new_empty(tuple(h0.shape) if c0_wanted else (0,))
    owner = "flat" if flat else (id(params[0]) if layout == "nn" else None)
    plan = _plan(cfg, owner, T, B)
    # The gradients in the parameters' own layout, which the library writes (the ops' layout,
    # and torch.nn's own variants); the other torch.nn modes' are rearranged below.
    rearranged = layout == "nn" and not _torch_layout(cfg)
    if not rearranged:
        grads = [torch.empty_like(p, memory_format=torch.contiguous_format) for p in params]
        views = grads
        if _torch_layout(cfg):  # in the library's slots per (layer, direction), None: absent
            P = _per_direction(cfg)
            views = [g for k in range(num_layers * D)
                     for g in _torch_slots(cfg, grads[k * P:(k + 1) * P])]
    with plan.lock:
        if rearranged:  # the ops' layout first; torch.nn's below
            grads = views = _ops_layout_grads(plan, cfg, x)
        _pack(plan, cfg, params, op, by_value=flat)
        plan.rnn.backward(_core_np(x, op, "x"), _core_np(h0, op, "h0"), _opt(c0, op, "c0"),
                          lens, _opt(dropout_mask, op, "dropout_mask"),
                          _core_np(y_grad, op, "y_grad"), _core_np(h_n_grad, op, "h_n_grad"),
                          _opt(c_n_grad, op, "c_n_grad"),
                          _out_np(x_grad) if x_grad_wanted else None,
                          _out_np(h0_grad) if states_grad_wanted else None,
                          _out_np(c0_grad) if c0_wanted else None,
                          [None if g is None else _out_np(g) for g in views],
                          _core_np(reserve, op, "reserve"))
        if rearranged:  # while the plan's buffers are ours
            Q = 5 if lstm_ else 4
            grads = [g for k in range(num_layers * D)
                     for g in _ops_grads_to_nn(cfg, _layer_input_size(cfg, k // D),
                                               grads[k * Q:(k + 1) * Q])]
    return [x_grad, h0_grad, c0_grad, *grads]


def _stack_fake(x, h0, mode, num_layers, bidirectional):
    # T and B stay symbolic under torch.export's dynamic shapes (int() would specialise them)
    T, B, I, H = x.shape[0], x.shape[1], int(x.shape[2]), int(h0.shape[2])
    D = 2 if bidirectional else 1
    lstm_ = mode.startswith("lstm")
    elems = _layout_reserve_elems(mode, I, H, num_layers, bool(bidirectional), T, B)
    return (x.new_empty((T, B, D * H)), x.new_empty((num_layers * D, B, H)),
            x.new_empty((num_layers * D, B, H) if lstm_ else (0,)), x.new_empty((elems,)))


def _stack_grad_fake(x, h0, params, mode, x_grad_wanted, states_grad_wanted):
    lstm_ = mode.startswith("lstm")
    return [x.new_empty(x.shape if x_grad_wanted else (0,)),
            x.new_empty(h0.shape if states_grad_wanted else (0,)),
            x.new_empty(tuple(h0.shape) if lstm_ and states_grad_wanted else (0,)),
            *[p.new_empty(p.shape) for p in params]]


def _stack_setup(ctx, x, h0, c0, params, seq_lengths, mask, attrs, reserve) -> list:
    """What a stack op's backward keeps of its forward call (the setup_context of both the
    custom op's autograd and _NNStack): the saved tensors, which _stack_saved reads back."""
    # Gradients of outputs the loss does not use arrive as None, not as zeros that autograd
    # would fill: the reserve is never differentiated, and a zero tensor of its size (the
    # gates of every step) cost ~6 ms a step at T = 50, B = 64, H = 512; the backward makes
    # the small zero state gradients it needs itself.
    ctx.set_materialize_grads(False)
    ctx.attrs = tuple(attrs)
    ctx.n_params = len(params)
    ctx.has_c0 = c0 is not None
    ctx.lens = seq_lengths
    ctx.has_mask = mask is not None
    saved = [x, h0, reserve, *params]
    if c0 is not None:
        saved.append(c0)
    if mask is not None:
        saved.append(mask)
    ctx.save_for_backward(*saved)
    return saved


def _stack_saved(ctx) -> tuple:
    """(x, h0, c0, params, dropout_mask, reserve) as _stack_setup saved them."""
    saved = list(ctx.saved_tensors)
    x, h0, reserve = saved[:3]
    params = saved[3:3 + ctx.n_params]
    rest = saved[3 + ctx.n_params:]
    c0 = rest.pop(0) if ctx.has_c0 else None
    mask = rest.pop(0) if ctx.has_mask else None
    return x, h0, c0, params, mask, reserve


def _stack_grads(ctx, grad, layout: str, gy, ghn, gcn) -> list:
    """A stack op's backward from what _stack_setup kept: [x_grad, h0_grad, c0_grad, *param
    grads], None where no gradient is wanted. ctx.needs_input_grad[0:3] are x's, h0's, c0's.
    attrs: mode, num_layers, bidirectional, (has_bias: the "nn" layout), forget_bias,
    cell_clip, use_peephole."""
    x, h0, c0, params, mask, reserve = _stack_saved(ctx)
    mode = ctx.attrs[0]
    D = 2 if ctx.attrs[2] else 1
    H = h0.shape[2]
    gy = gy if gy is not None else x.new_zeros((x.shape[0], x.shape[1], D * H))
    ghn = ghn if ghn is not None else torch.zeros_like(h0)
    if mode.startswith("lstm"):
        gcn = gcn if gcn is not None else torch.zeros_like(h0)
    else:
        gcn = None
    grads = (gy.contiguous(), ghn.contiguous(), None if gcn is None else gcn.contiguous())
    attrs = ctx.attrs if layout == "nn" else (*ctx.attrs[:3], True, *ctx.attrs[3:])
    g = None
    if torch._C._functorch.maybe_current_level() is not None:
        # inside a torch.func transform (grad, vjp, jacrev, jacfwd, hessian, vmap): the
        # gradients through torch.func.vjp of the recurrence in torch operations, which every
        # enclosing transform differentiates or maps (the library's backward would be a
        # constant to them: a zero second derivative)
        cfg = _config(layout, mode, x, h0, *attrs[1:], "blockrnn: torch.func backward")
        g = _differentiable.stack_vjp(cfg, x, h0, c0, params, ctx.lens, mask, *grads)
    elif torch.is_grad_enabled():
        # create_graph=True: the gradients as a differentiable graph (double backward),
        # computed with torch operations instead of the library's backward (None: nothing
        # here requires grad)
        cfg = _config(layout, mode, x, h0, *attrs[1:], "blockrnn: double backward")
        g = _differentiable.stack_gradients(cfg, x, h0, c0, params, ctx.lens, mask, *grads)
    if g is None and any(t is not None and torch._C._functorch.is_legacy_batchedtensor(t)
                         for t in grads):
        # torch.autograd.grad(is_grads_batched=True) and gradcheck's batched check vmap
        # this backward with torch's legacy vmap, which loops over an op for us only when
        # it takes and returns plain tensors: the flat twin of the grad op
        g = _flat_grad(x, h0, c0, params, ctx.lens, mask, reserve, *grads, layout, *attrs)
    elif g is None:
        states_wanted = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        g = grad(x, h0, c0, params, ctx.lens, mask, reserve, *grads, *ctx.attrs,
                 ctx.needs_input_grad[0], states_wanted)
        if not ctx.needs_input_grad[0]:
            g = [None, *g[1:]]
        if not states_wanted:
            g = [g[0], None, None, *g[3:]]
    return [g[0], g[1], g[2] if ctx.has_c0 else None, *g[3:]]


def _wire_stack(fwd, grad, layout: str):
    """register_autograd for a stack op pair: fwd(x, h0, c0, params, seq_lengths,
    dropout_mask, *attrs) -> (y, h_n, c_n, reserve); grad(x, h0, c0, params, seq_lengths,
    dropout_mask, reserve, y_grad, h_n_grad, c_n_grad, *attrs, x_grad_wanted,
    states_grad_wanted) -> [x_grad, h0_grad, c0_grad, *param grads]. attrs: mode, num_layers,
    bidirectional, (has_bias: the "nn" layout), forget_bias, cell_clip, use_peephole.
    x_grad_wanted is whether x needs a gradient, states_grad_wanted whether h0 or c0 does
    (torch.nn computes none for an input that does not require one, nor do we)."""
    n_attrs = 7 if layout == "nn" else 6

    def setup(ctx, inputs, output):
        x, h0, c0, params, seq_lengths, mask = inputs[:6]
        _stack_setup(ctx, x, h0, c0, params, seq_lengths, mask, inputs[6:], output[3])

    def backward(ctx, gy, ghn, gcn, _greserve):
        g = _stack_grads(ctx, grad, layout, gy, ghn, gcn)
        return (g[0], g[1], g[2], list(g[3:]), None, None, *([None] * n_attrs))

    fwd.register_autograd(backward, setup_context=setup)


def _param_shapes(cfg: _Config) -> List[Tuple[int, ...]]:
    """The shapes of a stack op's `params` in the config's layout, in order."""
    D = 2 if cfg.bidirectional else 1
    out = []
    for k in range(cfg.L * D):
        I_l = _layer_input_size(cfg, k // D)
        if cfg.layout == "ops":
            out += _ops_shapes(cfg, I_l)
            continue
        G = (4 if cfg.mode.startswith("lstm") else 3) * cfg.H
        out += [(G, I_l), (G, cfg.H)] + ([(G,), (G,)] if cfg.has_bias else []) + \
            ([(cfg.H,)] * 3 if cfg.use_peephole else [])
    return out


@torch.library.custom_op("blockrnn::rnn_grad_flat", mutates_args=())
def rnn_grad_flat(x: Tensor, h0: Tensor, c0: Optional[Tensor], flat_params: Tensor,
                  seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor],
                  reserve: Tensor, y_grad: Tensor, h_n_grad: Tensor,
                  c_n_grad: Optional[Tensor], layout: str, mode: str, num_layers: int,
                  bidirectional: bool, has_bias: bool, forget_bias: float, cell_clip: float,
                  use_peephole: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """rnn_grad / nn_rnn_grad (layout "ops" / "nn") with the parameters and their gradients
    flattened into one 1-D tensor each, so that the op takes and returns plain tensors."""
    op = "blockrnn::rnn_grad_flat"
    cfg = _config(layout, mode, x, h0, num_layers, bidirectional, has_bias, forget_bias,
                  cell_clip, use_peephole, op)
    shapes = _param_shapes(cfg)
    sizes = [int(np.prod(s)) for s in shapes]
    if flat_params.dim() != 1 or flat_params.numel() != sum(sizes):
        raise ValueError(f"{op}: flat_params must have shape [{sum(sizes)}], got "
                         f"{list(flat_params.shape)}")
    params = [t.view(s) for t, s in zip(flat_params.split(sizes), shapes)]
    g = _stack_backward(op, layout, x, h0, c0, params, seq_lengths, dropout_mask, reserve,
                        y_grad, h_n_grad, c_n_grad, mode, num_layers, bidirectional, has_bias,
                        forget_bias, cell_clip, use_peephole, flat=True)
    return g[0], g[1], g[2], torch.cat([t.reshape(-1) for t in g[3:]])


@rnn_grad_flat.register_fake
def _(x, h0, c0, flat_params, seq_lengths, dropout_mask, reserve, y_grad, h_n_grad, c_n_grad,
      layout, mode, num_layers, bidirectional, has_bias, forget_bias, cell_clip, use_peephole):
    return (x.new_empty(x.shape), x.new_empty(h0.shape),
            x.new_empty(tuple(h0.shape) if mode.startswith("lstm") else (0,)),
            x.new_empty(flat_params.shape))


def _flat_grad(x, h0, c0, params, seq_lengths, mask, reserve, gy, ghn, gcn, layout, *attrs):
    """The stack's gradients through rnn_grad_flat: [x_grad, h0_grad, c0_grad, *param grads]
    (views of one flat gradient, each contiguous in its parameter's shape)."""
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    xg, hg, cg, fg = rnn_grad_flat(x, h0, c0, flat, seq_lengths, mask, reserve, gy, ghn, gcn,
                                   layout, *attrs)
    sizes = [p.numel() for p in params]
    return [xg, hg, cg, *[t.view(p.shape) for t, p in zip(fg.split(sizes), params)]]


@torch.library.custom_op("blockrnn::rnn", mutates_args=())
def rnn(x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
        seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor], mode: str,
        num_layers: int, bidirectional: bool, forget_bias: float, cell_clip: float,
        use_peephole: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The stack's forward, parameters in the ops' layout: y [T,B,D*H], h_n [L*D,B,H], c_n
    (LSTM; else empty), reserve."""
    return _stack_forward("blockrnn::rnn", "ops", x, h0, c0, params, seq_lengths,
                          dropout_mask, mode, num_layers, bidirectional, True, forget_bias,
                          cell_clip, use_peephole)


@rnn.register_fake
def _(x, h0, c0, params, seq_lengths, dropout_mask, mode, num_layers, bidirectional,
      forget_bias, cell_clip, use_peephole):
    return _stack_fake(x, h0, mode, num_layers, bidirectional)


@torch.library.custom_op("blockrnn::rnn_grad", mutates_args=())
def rnn_grad(x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
             seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor], reserve: Tensor,
             y_grad: Tensor, h_n_grad: Tensor, c_n_grad: Optional[Tensor], mode: str,
             num_layers: int, bidirectional: bool, forget_bias: float, cell_clip: float,
             use_peephole: bool, x_grad_wanted: bool = True,
             states_grad_wanted: bool = True) -> List[Tensor]:
    """The stack's backward: [x_grad (empty when not x_grad_wanted), h0_grad, c0_grad (LSTM;
    else empty; both empty when not states_grad_wanted), *param grads]."""
    return _stack_backward("blockrnn::rnn_grad", "ops", x, h0, c0, params, seq_lengths,
                           dropout_mask, reserve, y_grad, h_n_grad, c_n_grad, mode, num_layers,
                           bidirectional, True, forget_bias, cell_clip, use_peephole,
                           x_grad_wanted=x_grad_wanted, states_grad_wanted=states_grad_wanted)


@rnn_grad.register_fake
def _(x, h0, c0, params, seq_lengths, dropout_mask, reserve, y_grad, h_n_grad, c_n_grad, mode,
      num_layers, bidirectional, forget_bias, cell_clip, use_peephole, x_grad_wanted=True,
      states_grad_wanted=True):
    return _stack_grad_fake(x, h0, params, mode, x_grad_wanted, states_grad_wanted)


_wire_stack(rnn, rnn_grad, "ops")


@torch.library.custom_op("blockrnn::nn_rnn", mutates_args=())
def nn_rnn(x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
           seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor], mode: str,
           num_layers: int, bidirectional: bool, has_bias: bool, forget_bias: float,
           cell_clip: float, use_peephole: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The stack's forward on torch.nn's parameters (see above): y [T,B,D*H], h_n [L*D,B,H],
    c_n (LSTM; else empty), reserve."""
    return _stack_forward("blockrnn::nn_rnn", "nn", x, h0, c0, params, seq_lengths,
                          dropout_mask, mode, num_layers, bidirectional, has_bias, forget_bias,
                          cell_clip, use_peephole)


@nn_rnn.register_fake
def _(x, h0, c0, params, seq_lengths, dropout_mask, mode, num_layers, bidirectional, has_bias,
      forget_bias, cell_clip, use_peephole):
    return _stack_fake(x, h0, mode, num_layers, bidirectional)


@torch.library.custom_op("blockrnn::nn_rnn_grad", mutates_args=())
def nn_rnn_grad(x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
                seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor], reserve: Tensor,
                y_grad: Tensor, h_n_grad: Tensor, c_n_grad: Optional[Tensor], mode: str,
                num_layers: int, bidirectional: bool, has_bias: bool, forget_bias: float,
                cell_clip: float, use_peephole: bool, x_grad_wanted: bool = True,
                states_grad_wanted: bool = True) -> List[Tensor]:
    """The backward of nn_rnn: [x_grad (empty when not x_grad_wanted), h0_grad, c0_grad (LSTM;
    else empty; both empty when not states_grad_wanted), *param grads in torch.nn's layout,
    contiguous]."""
    return _stack_backward("blockrnn::nn_rnn_grad", "nn", x, h0, c0, params, seq_lengths,
                           dropout_mask, reserve, y_grad, h_n_grad, c_n_grad, mode, num_layers,
                           bidirectional, has_bias, forget_bias, cell_clip, use_peephole,
                           x_grad_wanted=x_grad_wanted, states_grad_wanted=states_grad_wanted)


@nn_rnn_grad.register_fake
def _(x, h0, c0, params, seq_lengths, dropout_mask, reserve, y_grad, h_n_grad, c_n_grad, mode,
      num_layers, bidirectional, has_bias, forget_bias, cell_clip, use_peephole,
      x_grad_wanted=True, states_grad_wanted=True):
    return _stack_grad_fake(x, h0, params, mode, x_grad_wanted, states_grad_wanted)


_wire_stack(nn_rnn, nn_rnn_grad, "nn")


def _nn_rnn_grad_impl(x, h0, c0, params, seq_lengths, dropout_mask, reserve, y_grad,
                      h_n_grad, c_n_grad, mode, num_layers, bidirectional, has_bias, forget_bias,
                      cell_clip, use_peephole, x_grad_wanted, states_grad_wanted):
    """nn_rnn_grad's implementation, called without the custom op's dispatch (its argument
    binding costs ~50 µs a call): _NNStack's backward outside torch.func. Tensors of a
    torch.func level that has ended (a vjp function called after its transform returned) are
    unwrapped first, as the op's dispatch would."""
    x, h0, c0, seq_lengths, dropout_mask, reserve, y_grad, h_n_grad, c_n_grad = [
        None if t is None else torch._C._functorch.unwrap_if_dead(t)
        for t in (x, h0, c0, seq_lengths, dropout_mask, reserve, y_grad, h_n_grad, c_n_grad)]
    params = [torch._C._functorch.unwrap_if_dead(p) for p in params]
    return _stack_backward("blockrnn::nn_rnn_grad", "nn", x, h0, c0, params, seq_lengths,
                           dropout_mask, reserve, y_grad, h_n_grad, c_n_grad, mode, num_layers,
                           bidirectional, has_bias, forget_bias, cell_clip, use_peephole,
                           x_grad_wanted=x_grad_wanted, states_grad_wanted=states_grad_wanted)


class _NNStack(torch.autograd.Function):
    """blockrnn::nn_rnn and its backward as an autograd.Function: the modules' path in eager
    mode. It runs what the custom op pair runs (the op's implementation forward, the grad op
    backward, through the same _stack_setup / _stack_grads), and differs in two ways that
    matter to a caller. torch.func's transforms (grad, vjp, jacrev, vmap of them: per-example
    gradients, functional_call training) accept an autograd.Function with setup_context and a
    vmap rule, and refuse a custom op's register_autograd. And a call skips the custom op's
    dispatch wrappers (the arguments' pytree flattening and default filling: ~0.1 ms a
    training step, a tenth of a small model's). Under torch.compile, torch.export (ONNX) and
    jit tracing the modules call the custom op itself (nn_rnn_call)."""

    @staticmethod
    def forward(x, h0, c0, seq_lengths, dropout_mask, attrs, *params):
        return _stack_forward("blockrnn::nn_rnn", "nn", x, h0, c0, list(params), seq_lengths,
                              dropout_mask, *attrs)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, h0, c0, seq_lengths, mask, attrs, *params = inputs
        ctx.mark_non_differentiable(output[3])
        saved = _stack_setup(ctx, x, h0, c0, params, seq_lengths, mask, attrs, output[3])
        ctx.save_for_forward(*saved)  # the same tensors for jvp (forward-mode AD)

    @staticmethod
    def backward(ctx, gy, ghn, gcn, _greserve):
        g = _stack_grads(ctx, _nn_rnn_grad_impl, "nn", gy, ghn, gcn)
        return (g[0], g[1], g[2], None, None, None, *g[3:])

    @staticmethod
    def jvp(ctx, tx, th0, tc0, _tlens, _tmask, _tattrs, *tparams):
        # Forward-mode AD (torch.func.jvp, jacfwd, hessian): the tangents of the recurrence
        # recomputed with torch operations (_differentiable: the library's gate formulas),
        # whose derivative is the library's gradient's transpose.
        x, h0, c0, params, mask, _ = _stack_saved(ctx)
        cfg = _config("nn", ctx.attrs[0], x, h0, *ctx.attrs[1:], "blockrnn::nn_rnn")
        if cfg.mode.startswith("lstm") and _unbits(cfg.cell_clip) > 0:
            raise NotImplementedError(
                "blockrnn.torch.LSTM: forward-mode AD (torch.func.jvp, jacfwd, hessian) of an "
                "LSTM with cell_clip > 0 is not supported: its gradient (TensorFlow's) passes "
                "through the clip as if unclipped, which no forward derivative matches; use "
                "reverse mode (torch.func.grad, vjp, jacrev)")
        outs = _differentiable.stack_jvp(cfg, x, h0, c0, params, ctx.lens, mask,
                                         [tx, th0, tc0, *tparams])
        c_n_tangent = outs[2] if cfg.mode.startswith("lstm") else x.new_zeros((0,))
        return outs[0], outs[1], c_n_tangent, None

    @staticmethod
    def vmap(info, in_dims, *args):
        # one call per batch entry, stacked, as the custom ops' vmap rule (below) does
        return _vmap_by_loop(_NNStack.apply, info, in_dims, args)


def _traced() -> bool:
    """True while torch.compile / torch.export (dynamo) or torch.jit.trace records the call:
    they need the custom op (opaque to them, with its fake implementation and ONNX
    translation), not the Python autograd.Function."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def nn_rnn_call(x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
                seq_lengths: Optional[Tensor], dropout_mask: Optional[Tensor], mode: str,
                num_layers: int, bidirectional: bool, has_bias: bool, forget_bias: float,
                cell_clip: float, use_peephole: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """blockrnn::nn_rnn's call, differentiable: the op itself where a compiler or tracer
    records it, else _NNStack (eager: torch.func's transforms work, less dispatch)."""
    if _traced():
        return torch.ops.blockrnn.nn_rnn(x, h0, c0, params, seq_lengths, dropout_mask, mode,
                                         num_layers, bidirectional, has_bias, forget_bias,
                                         cell_clip, use_peephole)
    return _NNStack.apply(x, h0, c0, seq_lengths, dropout_mask,
                          (mode, num_layers, bidirectional, has_bias, forget_bias, cell_clip,
                           use_peephole), *params)


# ------------------------------------------------------------------------------ vmap
#
# torch.vmap over any of the ops above (and so torch.autograd.grad(..., is_grads_batched=True),
# gradcheck(check_batched_grad=True), torch.func's per-example gradients) runs the op once per
# batch entry and stacks the results: the library has no batch-of-problems entry point, and a
# stack of independent recurrences is what a batching rule would compute anyway. The plan and
# its packed weights are shared by the entries (the parameters do not change between them).

def _vmap_slice(a, dim, k: int):
    """Entry k of argument `a` batched along `dim` (None: not batched); lists elementwise."""
    if isinstance(a, (list, tuple)):
        dims = dim if isinstance(dim, (list, tuple)) else [dim] * len(a)
        return [_vmap_slice(t, d, k) for t, d in zip(a, dims)]
    return a if dim is None else a.select(dim, k)


def _vmap_by_loop(fn, info, in_dims, args):
    """A vmap rule's result for fn over args batched along in_dims: fn once per batch entry,
    its outputs (a tensor, a tuple or a list of tensors) stacked along dimension 0."""
    outs = [fn(*[_vmap_slice(a, d, k) for a, d in zip(args, in_dims)])
            for k in range(info.batch_size)]
    if isinstance(outs[0], Tensor):
        return torch.stack(outs), 0
    stacked = [torch.stack([o[n] for o in outs]) for n in range(len(outs[0]))]
    if isinstance(outs[0], tuple):
        return tuple(stacked), tuple(0 for _ in stacked)
    return stacked, [0 for _ in stacked]


def _loop_vmap(op):
    op.register_vmap(lambda info, in_dims, *args: _vmap_by_loop(op, info, in_dims, args))


for _op in (lstm, lstm_grad, gru_reset_after, gru_reset_after_grad, gru_reset_before,
            gru_reset_before_grad, rnn, rnn_grad, nn_rnn, nn_rnn_grad, rnn_grad_flat):
    _loop_vmap(_op)
