"""Recurrent layers on the sequence ops: parameters as numpy arrays in TensorFlow's block-op
layout, a forward pass over a whole sequence and its backward pass, and conversion from and
to the weights of Keras' LSTM and GRU layers.

    lstm = blockrnn.layers.LSTM(input_size=64, hidden_size=256, seed=0)
    h_seq, (cs, h) = lstm.forward(x)                  # x [T, B, I], time-major
    dx, (dcs0, dh0) = lstm.backward(dh_seq)           # fills lstm.grads["w"], lstm.grads["b"]

Shape letters: T time steps, B batch, I input size, H hidden size. Sequences are time-major
([T, B, ...]) as the ops; Keras is batch-major, so `x_keras = x.transpose(1, 0, 2)`.

LSTM = BlockLSTM / BlockLSTMGrad (gate columns ICFO = [i, ci, f, o]):
    gates = [x_t, h_{t-1}]·w + b;   i = σ(g_i [+ cs_{t-1}⊙wci]);   ci = tanh(g_ci)
    f = σ(g_f + forget_bias [+ cs_{t-1}⊙wcf]);   cs_t = clip(i⊙ci + f⊙cs_{t-1})
    o = σ(g_o [+ cs_t⊙wco]);   h_t = o⊙tanh(cs_t)
GRU = BlockGRU / BlockGRUGrad (GRUBlockCell's math, Keras' reset_after=False variant):
    [r, u] = σ([x_t, h_{t-1}]·w_ru + b_ru);   c = tanh([x_t, r⊙h_{t-1}]·w_c + b_c)
    h_t = u⊙h_{t-1} + (1 − u)⊙c

Keras conversion (`from_keras` / `to_keras`): Keras keeps `kernel` [I, nH] and
`recurrent_kernel` [H, nH] apart (the op stacks them as rows [kernel; recurrent_kernel]) and
orders the gate columns LSTM i, f, c, o (the op: i, c, f, o) and GRU z, r, h (the op: w_ru =
[r | z], w_c = h; Keras' z is the op's u). Keras adds no forget bias at run time (its
unit_forget_bias only initialises the bias), so a converted LSTM has forget_bias = 0; both
directions move numbers without arithmetic, so a round trip is bit-exact.

The layers run on the library's layer objects (blockrnn/layer.h, "plan once, run many": the
ops' work without the per-call lookup and re-validation, the workspace sized to the largest
call, never to the largest T times the largest B) in every dtype: float32, float64, float16 and
bfloat16 (`ml_dtypes.bfloat16`, or the name "bfloat16"; the 16-bit layers compute in float32
as the raw ops do). The parameters are numpy arrays the caller may change at any time, so each
forward and backward sets them (copied and packed) first. Results are bit for bit those of the
raw ops.

LSTMCell and GRUCell are one step of LSTMBlockCell / GRUBlockCell set up once (the library's cell
layer objects): the caller sets the weights when they change, and each forward / backward runs
on the weights packed then, bit for bit raw_ops.LSTMBlockCell / GRUBlockCell and
gradients.LSTMBlockCell / GRUBlockCell (float32 and float64).
"""
import collections
import functools
import math
import numbers
import threading

import numpy as np

from . import _bitwise, _core, _opgen

__all__ = ["LSTM", "GRU", "LSTMCell", "GRUCell"]

_DTYPES = (np.float16, np.float32, np.float64)


# The layer objects' outputs, named as the raw ops' (raw_ops returns the same fields).
_LSTMActs = collections.namedtuple("_LSTMActs", "i cs f o ci co h")
_LSTMGrads = collections.namedtuple(
    "_LSTMGrads", "x_grad cs_prev_grad h_prev_grad w_grad wci_grad wcf_grad wco_grad b_grad")
_GRUActs = collections.namedtuple("_GRUActs", "r u c h")
_GRUGrads = collections.namedtuple(
    "_GRUGrads", "x_grad h_prev_grad w_ru_grad w_c_grad b_ru_grad b_c_grad")


def _bits(a):
    """`a` as the layer objects take it: a bfloat16 array as a uint16 view of its bits (numpy
    cannot hand ml_dtypes' bfloat16 to the library), any other array itself."""
    return a.view(np.uint16) if _opgen._is_bfloat16(a.dtype) else a


# How many times a layer has set (copied and packed) its parameters into its library layer
# object: weight_packs().
_WEIGHT_PACKS = 0


def weight_packs():
    """How many times the layers of this module have set their parameters into the library's
    layer objects (copied and packed them) since the module was loaded. A layer does so at its
    first call and after its parameters change, not at every call (but for parameters of at
    most 64 KiB in all, which are set at every call: cheaper than comparing them); the tests
    read it."""
    return _WEIGHT_PACKS


# Parameters of at most this many bytes in all are set at every call: copying and packing them
# costs less than comparing them from Python (LSTM, float32, AMD EPYC Zen 4: 8.6 KB set in 7
# µs, compared in 16; 133 KB set in 30 µs, compared in 19).
_COMPARE_FROM_BYTES = 64 << 10

def _same_bits(a, kept):
    """`a` is a C-contiguous array holding exactly kept's bits (_bitwise.same_bits)."""
    return isinstance(a, np.ndarray) and a.flags.c_contiguous and _bitwise.same_bits(a, kept)


def _kept_copies(given, old):
    """Copies of the arrays just set, in the previous copies where they fit (_bitwise.refill)."""
    return _bitwise.refill(old, given, lambda o, g: o.shape == g.shape and o.dtype == g.dtype,
                           np.copyto, np.copy)


def _uniform(rng, shape, scale, dtype):
    return rng.uniform(-scale, scale, size=shape).astype(dtype)


def _check_dtype(dtype):
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes  # numpy's bfloat16 is ml_dtypes'
        except ImportError:
            raise ValueError("dtype bfloat16 needs the ml_dtypes package (pip install "
                             "ml_dtypes)") from None
        dtype = ml_dtypes.bfloat16
    dtype = np.dtype(dtype)
    if dtype not in [np.dtype(d) for d in _DTYPES] and not _opgen._is_bfloat16(dtype):
        raise ValueError(f"dtype must be float16, bfloat16, float32 or float64, got {dtype}")
    return dtype


def _size(value, layer, what):
    """int(value) for an integer size, else TypeError naming the layer and the argument."""
    if not isinstance(value, numbers.Integral):
        raise TypeError(f"{layer}: {what} must be an integer, got {value!r} "
                        f"({type(value).__name__})")
    return int(value)


def _real(value, layer, what):
    """float(value) for a real number (NaN and inf kept), else TypeError naming the layer and
    the argument."""
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{layer}: {what} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    return float(value)


def _check_memory(where, need, what):
    """Refuses (ResourceExhaustedError, before anything is allocated) `need` bytes of arrays
    this module allocates itself (`what` says which) above the memory limit
    (blockrnn.set_memory_limit), as the library refuses the calls it allocates for."""
    limit = _core.get_memory_limit()
    if need > limit:
        raise _core.ResourceExhaustedError(
            f"{where}: needs {need} bytes ({what}), more than the memory limit of {limit} "
            f"bytes (blockrnn.set_memory_limit)")


def _nbytes(dtype, *shapes):
    return sum(math.prod(s) for s in shapes) * np.dtype(dtype).itemsize


def _float_array(value, where, what, dtype):
    """`value` as an array of `dtype`: a floating array of any width, or a list of numbers.
    Anything else (a list holding None, complex, string, object, bool or integer arrays) is
    the library's InvalidArgumentError naming `where` and the argument, as the raw ops refuse
    them, never a silent NaN or a dropped imaginary part. A conversion to `dtype` (a copy) is
    checked against the memory limit first."""
    a = _opgen._float_input(where, what, value, np.dtype(dtype))
    if a.dtype != dtype:
        _check_memory(where, _nbytes(dtype, a.shape), f"{what} {list(a.shape)} converted to "
                      f"{np.dtype(dtype).name}")
    return np.asarray(a, dtype=dtype)


def _check_parameter_memory(layer, input_size, hidden_size, dtype, elements, largest):
    """Refuses parameters of `elements` values whose initialisation, which draws the `largest`
    array in float64 first, needs more than the memory limit."""
    _check_memory(layer, elements * dtype.itemsize + largest * 8,
                  f"the parameters of input_size={input_size}, hidden_size={hidden_size}: "
                  f"{elements} {dtype.name} values and a float64 draw of {largest}")


def _one_call_at_a_time(method):
    """Runs `method` holding the object's lock. A layer object of the library owns one
    workspace and is not safe to call from two threads at once (blockrnn/layer.h), and the
    library releases the GIL while it computes: concurrent calls from Python threads on one
    object wait for each other instead of sharing the workspace and weights."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return run


def _keras_arrays(weights, n_gates, what):
    """[kernel, recurrent_kernel, bias or None] from a Keras layer or its get_weights() list
    ([kernel, recurrent_kernel] for use_bias=False). A layer's configuration is checked first:
    what these layers cannot compute (another activation, go_backwards, stateful, ...) is a
    ValueError naming the setting."""
    from .convert.keras import ConversionError, check_keras_rnn_config

    config = None
    if hasattr(weights, "get_config"):
        config = weights.get_config()
        cls = "LSTM" if n_gates == 4 else "GRU"
        try:
            check_keras_rnn_config(cls, config, getattr(weights, "name", cls))
        except ConversionError as e:
            raise ValueError(f"{what}: {e}") from None
        if config.get("go_backwards", False):
            raise ValueError(f"{what}: go_backwards=True: this layer runs forward in time; "
                             f"blockrnn.convert.from_keras(layer) builds a Model that reads "
                             f"the sequence backwards as Keras does")
        if n_gates == 3 and config.get("reset_after", True):
            raise ValueError(_RESET_AFTER_HINT.format(what=what))
        weights = weights.get_weights()
    weights = [np.asarray(a) for a in weights]
    if len(weights) not in (2, 3):
        raise ValueError(f"{what}: expected [kernel, recurrent_kernel, bias] (or [kernel, "
                         f"recurrent_kernel] for use_bias=False), got {len(weights)} arrays")
    if config is not None and len(weights) != (3 if config.get("use_bias", True) else 2):
        raise ValueError(f"{what}: the layer has use_bias={config.get('use_bias', True)} but "
                         f"{len(weights)} weight arrays")
    kernel, recurrent = weights[0], weights[1]
    if recurrent.ndim != 2 or recurrent.shape[1] % n_gates or \
            recurrent.shape[0] * n_gates != recurrent.shape[1]:
        raise ValueError(f"{what}: recurrent_kernel must be [H, {n_gates}H], got "
                         f"{recurrent.shape}")
    H = recurrent.shape[0]
    if kernel.ndim != 2 or kernel.shape[1] != n_gates * H:
        raise ValueError(f"{what}: kernel must be [I, {n_gates * H}], got {kernel.shape}")
    bias = weights[2] if len(weights) == 3 else np.zeros(n_gates * H, kernel.dtype)
    if bias.shape != (n_gates * H,):
        if bias.shape == (2, n_gates * H):
            raise ValueError(_RESET_AFTER_HINT.format(what=what))
        raise ValueError(f"{what}: bias must be [{n_gates * H}], got {bias.shape}")
    return kernel, recurrent, bias, H


_RESET_AFTER_HINT = (
    "{what}: this is Keras' reset_after=True GRU (its default; a [2, 3H] bias), which "
    "BlockGRUResetAfter computes, not BlockGRU: blockrnn.convert.from_keras(layer) builds a "
    "blockrnn Model running it, and blockrnn.convert.keras_gru_weights(kernel, "
    "recurrent_kernel, bias, reset_after=True) gives the op's w_i, w_h, b_i, b_h for "
    "blockrnn.raw_ops.BlockGRUResetAfter; GRU.from_keras takes reset_after=False layers")


class _Recurrent:
    """Shared parts: parameter bookkeeping, dtype handling, the saved forward pass."""

    _PARAMS = ()

    def parameters(self):
        """The parameter arrays by op input name (the arrays themselves, not copies). The
        layer's attrs (LSTM: forget_bias, cell_clip, use_peephole) are in attrs(): a layer
        rebuilt as cls(input_size, hidden_size, **layer.attrs()) with these parameters
        computes the same."""
        return {name: getattr(self, name) for name in self._PARAMS}

    def attrs(self):
        """The op attrs this layer runs with, as constructor keywords (GRU: none)."""
        return {}

    def __getstate__(self):
        # The lock, the library's layer object and the copies of what it holds are not copied
        # (deepcopy, pickle): a copy makes its own at its first call.
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_lock", "_layer", "_held")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _input(self, x):
        x = _float_array(x, f"{type(self).__name__}.forward", "x", self.dtype)
        if x.ndim != 3 or x.shape[2] != self.input_size:
            raise _core.InvalidArgumentError(f"{type(self).__name__}: x must be [T, B, "
                                             f"{self.input_size}] (time-major), got shape "
                                             f"{x.shape}")
        return x

    def _state_array(self, a, batch, what):
        a = _float_array(a, type(self).__name__, what, self.dtype)
        if a.shape != (batch, self.hidden_size):
            raise _core.InvalidArgumentError(f"{type(self).__name__}: {what} must be [{batch}, "
                                             f"{self.hidden_size}], got shape {a.shape}")
        return a

    def _check_call_memory(self, where, inputs, shapes):
        """Refuses a call whose outputs (`shapes`) and contiguous copies of `inputs` need more
        than the memory limit, before this module allocates them (the library checks the
        call again, with its workspace, when it runs)."""
        copies = [a.shape for a in inputs if not a.flags.c_contiguous]
        _check_memory(where, _nbytes(self.dtype, *shapes, *copies),
                      f"{len(shapes)} outputs of {self.dtype.name}"
                      + (f" and contiguous copies of {len(copies)} inputs" if copies else "")
                      + f", the largest {list(max(shapes + copies, key=math.prod))}")

    def _saved(self):
        if self._cache is None:
            raise RuntimeError(f"{type(self).__name__}.backward() needs a forward() first")
        return self._cache

    def _grad_h(self, grad_h_seq, T, B):
        g = _float_array(grad_h_seq, f"{type(self).__name__}.backward", "grad_h_seq", self.dtype)
        if g.shape != (T, B, self.hidden_size):
            raise _core.InvalidArgumentError(f"{type(self).__name__}: grad_h_seq must be "
                                             f"[{T}, {B}, {self.hidden_size}], got shape {g.shape}")
        return g

    def __call__(self, x, state=None):
        return self.forward(x, state)

    def _layer_object(self, T, B):
        """The _core layer object for a call of T steps and B examples, with the current
        parameters set: set (copied and packed) only when they differ from what it holds."""
        key = self._layer_key()
        held = self.__dict__.get("_layer")
        if held is None or held[0] != key or held[1] < T or held[2] < B:
            T = max(T, 1, held[1] if held and held[0] == key else 0)
            B = max(B, 1, held[2] if held and held[0] == key else 0)
            held = (key, T, B, self._make_layer(T, B))
            self._layer = held
            self._held = None
        layer = held[3]
        arrays = [getattr(self, n) for n in self._SET_WEIGHTS]
        kept = self.__dict__.get("_held")
        if kept is not None and all(_same_bits(a, k) for a, k in zip(arrays, kept)):
            return layer
        self._held = None  # until set_weights has taken the new values
        given = [np.ascontiguousarray(a, dtype=self.dtype) for a in arrays]
        layer.set_weights(*(_bits(a) for a in given))
        if sum(a.nbytes for a in given) > _COMPARE_FROM_BYTES:
            self._held = _kept_copies(given, kept)
        global _WEIGHT_PACKS
        _WEIGHT_PACKS += 1
        return layer

    def _acts(self, T, B, n):
        return [np.empty((T, B, self.hidden_size), self.dtype) for _ in range(n)]



class LSTM(_Recurrent):
    """An LSTM layer on BlockLSTM (ICFO). Parameters (numpy, op layout):
    w [I+H, 4H], b [4H] and, with use_peephole, wci, wcf, wco [H] each.

    forget_bias is added to the forget gate at run time (1.0: TensorFlow's LSTMBlockCell /
    LSTMBlockFusedCell default; 0.0 for weights converted from Keras). cell_clip clips the cell
    state at ±cell_clip when positive; None disables it."""

    def __init__(self, input_size, hidden_size, *, forget_bias=1.0, cell_clip=None,
                 use_peephole=False, dtype=np.float32, seed=None):
        self.input_size = _size(input_size, "LSTM", "input_size")
        self.hidden_size = _size(hidden_size, "LSTM", "hidden_size")
        if self.input_size < 0 or self.hidden_size < 1:
            raise ValueError(f"LSTM: need input_size >= 0 and hidden_size >= 1, got "
                             f"{input_size}, {hidden_size}")
        self.dtype = _check_dtype(dtype)
        self.forget_bias = _real(forget_bias, "LSTM", "forget_bias")
        if cell_clip is not None:
            cell_clip = _real(cell_clip, "LSTM", "cell_clip")
        self.cell_clip = None if cell_clip is None or cell_clip <= 0 else cell_clip
        self.use_peephole = bool(use_peephole)
        I, H = self.input_size, self.hidden_size
        _check_parameter_memory("LSTM", I, H, self.dtype, (I + H) * 4 * H + 7 * H,
                                (I + H) * 4 * H)
        self._lock = threading.Lock()
        rng = np.random.default_rng(seed)
        s = 1.0 / np.sqrt(H)
        self.w = _uniform(rng, (I + H, 4 * H), s, self.dtype)  # [I+H, 4H] ICFO
        self.b = np.zeros(4 * H, self.dtype)                     # [4H]
        self.wci, self.wcf, self.wco = (
            _uniform(rng, (H,), s, self.dtype) if self.use_peephole else
            np.zeros(H, self.dtype) for _ in range(3))           # [H] each
        self.grads = {}
        self._cache = None

    @property
    def _PARAMS(self):
        return ("w", "b", "wci", "wcf", "wco") if self.use_peephole else ("w", "b")

    _SET_WEIGHTS = ("w", "b", "wci", "wcf", "wco")

    def attrs(self):
        """{forget_bias, cell_clip, use_peephole}: the constructor keywords that, with
        parameters(), rebuild this layer exactly (TensorFlow's defaults differ: forget_bias 1,
        and BlockLSTM's cell_clip 3 when the attr is left unset)."""
        return {"forget_bias": self.forget_bias, "cell_clip": self.cell_clip,
                "use_peephole": self.use_peephole}

    def _layer_key(self):
        return (self.input_size, self.hidden_size, self.dtype, self.forget_bias,
                self.cell_clip, self.use_peephole)

    def _make_layer(self, T, B):
        return _core.LSTMLayer(self.input_size, self.hidden_size, self.dtype.name, T, B,
                               v2=False, forget_bias=self.forget_bias,
                               cell_clip=self.cell_clip if self.cell_clip else -1.0,
                               use_peephole=self.use_peephole)

    def zero_state(self, batch):
        """(cs, h), each zeros [B, H]."""
        z = np.zeros((batch, self.hidden_size), self.dtype)
        return z, z.copy()

    @_one_call_at_a_time
    def forward(self, x, state=None):
        """x [T, B, I], state (cs, h) each [B, H] or None (zeros).
        Returns (h_seq [T, B, H], (cs_T, h_T)) and keeps what backward() needs."""
        x = self._input(x)
        T, B = x.shape[0], x.shape[1]
        cs0, h0 = self.zero_state(B) if state is None else state
        cs0 = self._state_array(cs0, B, "state[0] (cs)")
        h0 = self._state_array(h0, B, "state[1] (h)")
        self._check_call_memory("LSTM.forward", [x], 7 * [(T, B, self.hidden_size)])
        layer = self._layer_object(T, B)
        x, cs0, h0 = (np.ascontiguousarray(a) for a in (x, cs0, h0))
        out = _LSTMActs(*self._acts(T, B, 7))
        layer.forward(_bits(x), _bits(cs0), _bits(h0), [_bits(a) for a in out])
        self._cache = (x, cs0, h0, out)
        final = (out.cs[-1].copy(), out.h[-1].copy()) if T else (cs0.copy(), h0.copy())
        return out.h, final

    @_one_call_at_a_time
    def backward(self, grad_h_seq, grad_state=None):
        """grad_h_seq [T, B, H] = ∂L/∂h_seq; grad_state (dcs_T, dh_T) or None: ∂L/∂ of the
        final state. Returns (dx [T, B, I], (dcs_0, dh_0)) and sets self.grads (same keys
        and shapes as parameters())."""
        x, cs0, h0, out = self._saved()
        T, B = x.shape[0], x.shape[1]
        # the gradient copies h_grad, cs_grad and the gradients of x, the states and parameters
        self._check_call_memory("LSTM.backward", [],
                                [x.shape] + 2 * [(T, B, self.hidden_size)] + [cs0.shape, h0.shape]
                                + [p.shape for p in self.parameters().values()])
        h_grad = self._grad_h(grad_h_seq, T, B).copy()
        cs_grad = np.zeros_like(h_grad)
        if grad_state is not None:
            dcs_T = self._state_array(grad_state[0], B, "grad_state[0] (cs)")
            dh_T = self._state_array(grad_state[1], B, "grad_state[1] (h)")
            if T == 0:
                self.grads = {k: np.zeros_like(v) for k, v in self.parameters().items()}
                return np.zeros_like(x), (dcs_T.copy(), dh_T.copy())
            cs_grad[-1] += dcs_T
            h_grad[-1] += dh_T
        layer = self._layer_object(T, B)
        g = _LSTMGrads(*(np.empty(a.shape, self.dtype) for a in (x, cs0, h0, self.w, self.wci,
                                                                  self.wcf, self.wco, self.b)))
        layer.backward(_bits(x), _bits(cs0), _bits(h0), [_bits(a) for a in out], _bits(cs_grad),
                       _bits(h_grad), [_bits(a) for a in g])
        self.grads = {"w": g.w_grad, "b": g.b_grad}
        if self.use_peephole:
            self.grads.update(wci=g.wci_grad, wcf=g.wcf_grad, wco=g.wco_grad)
        return g.x_grad, (g.cs_prev_grad, g.h_prev_grad)

    # ---- Keras ----

    @classmethod
    def from_keras(cls, weights, dtype=None):
        """A layer computing what keras.layers.LSTM computes with these weights: a Keras
        LSTM layer, or its get_weights() list [kernel [I, 4H], recurrent_kernel [H, 4H],
        bias [4H]] (gate columns i, f, c, o; no bias for use_bias=False). A layer's
        configuration is read: activation other than tanh, recurrent_activation other than
        sigmoid, go_backwards, stateful or a dtype policy other than float32/float64 are a
        ValueError naming the setting. A bare weight list carries no configuration: it is
        taken as the default activations. forget_bias is 0 (Keras adds none at run time)."""
        from .convert.keras import keras_lstm_weights

        kernel, recurrent, bias, H = _keras_arrays(weights, 4, "LSTM.from_keras")
        dtype = kernel.dtype if dtype is None else dtype
        layer = cls(kernel.shape[0], H, forget_bias=0.0, dtype=dtype)
        for name, a in keras_lstm_weights(kernel, recurrent, bias).items():
            setattr(layer, name, np.ascontiguousarray(a, dtype=layer.dtype))
        return layer

    def to_keras(self):
        """[kernel, recurrent_kernel, bias] for keras.layers.LSTM(H).set_weights(...).
        A non-zero forget_bias is folded into the forget-gate bias (exact when it is 0);
        peepholes and cell clipping have no Keras equivalent (ValueError)."""
        if self.use_peephole or self.cell_clip:
            raise ValueError("LSTM.to_keras: Keras' LSTM has no peepholes and no cell clipping")
        I, H = self.input_size, self.hidden_size
        i, c, f, o = (slice(k * H, (k + 1) * H) for k in range(4))
        w = np.concatenate([self.w[:, i], self.w[:, f], self.w[:, c], self.w[:, o]], axis=1)
        b_f = self.b[f] + self.dtype.type(self.forget_bias) if self.forget_bias else self.b[f]
        bias = np.concatenate([self.b[i], b_f, self.b[c], self.b[o]])
        return [np.ascontiguousarray(w[:I]), np.ascontiguousarray(w[I:]), bias]


class GRU(_Recurrent):
    """A GRU layer on BlockGRU (GRUBlockCell's math = Keras GRU with reset_after=False).
    Parameters (numpy, op layout): w_ru [I+H, 2H] (columns [r | u]), w_c [I+H, H], b_ru [2H],
    b_c [H]. Initial b_ru = 1, b_c = 0, as TensorFlow's GRUBlockCell."""

    _PARAMS = ("w_ru", "w_c", "b_ru", "b_c")
    _SET_WEIGHTS = _PARAMS

    def _layer_key(self):
        return (self.input_size, self.hidden_size, self.dtype)

    def _make_layer(self, T, B):
        return _core.GRULayer(self.input_size, self.hidden_size, self.dtype.name, T, B)


    def __init__(self, input_size, hidden_size, *, dtype=np.float32, seed=None):
        self.input_size = _size(input_size, "GRU", "input_size")
        self.hidden_size = _size(hidden_size, "GRU", "hidden_size")
        if self.input_size < 0 or self.hidden_size < 1:
            raise ValueError(f"GRU: need input_size >= 0 and hidden_size >= 1, got "
                             f"{input_size}, {hidden_size}")
        self.dtype = _check_dtype(dtype)
        I, H = self.input_size, self.hidden_size
        _check_parameter_memory("GRU", I, H, self.dtype, (I + H) * 3 * H + 3 * H,
                                (I + H) * 2 * H)
        self._lock = threading.Lock()
        rng = np.random.default_rng(seed)
        s = 1.0 / np.sqrt(H)
        self.w_ru = _uniform(rng, (I + H, 2 * H), s, self.dtype)  # [I+H, 2H]
        self.w_c = _uniform(rng, (I + H, H), s, self.dtype)       # [I+H, H]
        self.b_ru = np.ones(2 * H, self.dtype)                    # [2H]
        self.b_c = np.zeros(H, self.dtype)                        # [H]
        self.grads = {}
        self._cache = None

    def zero_state(self, batch):
        """h, zeros [B, H]."""
        return np.zeros((batch, self.hidden_size), self.dtype)

    @_one_call_at_a_time
    def forward(self, x, state=None):
        """x [T, B, I], state h [B, H] or None (zeros). Returns (h_seq [T, B, H], h_T)."""
        x = self._input(x)
        T, B = x.shape[0], x.shape[1]
        h0 = self._state_array(self.zero_state(B) if state is None else state, B, "state")
        self._check_call_memory("GRU.forward", [x], 4 * [(T, B, self.hidden_size)])
        layer = self._layer_object(T, B)
        x, h0 = np.ascontiguousarray(x), np.ascontiguousarray(h0)
        out = _GRUActs(*self._acts(T, B, 4))
        layer.forward(_bits(x), _bits(h0), [_bits(a) for a in out])
        self._cache = (x, h0, out)
        return out.h, (out.h[-1].copy() if T else h0.copy())

    @_one_call_at_a_time
    def backward(self, grad_h_seq, grad_state=None):
        """grad_h_seq [T, B, H]; grad_state dh_T [B, H] or None. Returns (dx [T, B, I], dh_0)
        and sets self.grads."""
        x, h0, out = self._saved()
        T, B = x.shape[0], x.shape[1]
        # the gradient copy h_grad and the gradients of x, the state and the parameters
        self._check_call_memory("GRU.backward", [], [x.shape, (T, B, self.hidden_size), h0.shape]
                                + [p.shape for p in self.parameters().values()])
        h_grad = self._grad_h(grad_h_seq, T, B).copy()
        if grad_state is not None:
            dh_T = self._state_array(grad_state, B, "grad_state")
            if T == 0:
                self.grads = {k: np.zeros_like(v) for k, v in self.parameters().items()}
                return np.zeros_like(x), dh_T.copy()
            h_grad[-1] += dh_T
        layer = self._layer_object(T, B)
        g = _GRUGrads(*(np.empty(a.shape, self.dtype) for a in (x, h0, self.w_ru, self.w_c,
                                                                 self.b_ru, self.b_c)))
        layer.backward(_bits(x), _bits(h0), [_bits(a) for a in out], _bits(h_grad),
                       [_bits(a) for a in g])
        self.grads = {"w_ru": g.w_ru_grad, "w_c": g.w_c_grad, "b_ru": g.b_ru_grad,
                      "b_c": g.b_c_grad}
        return g.x_grad, g.h_prev_grad

    # ---- Keras ----

    @classmethod
    def from_keras(cls, weights, dtype=None):
        """A layer computing what keras.layers.GRU(reset_after=False) computes with these
        weights: the layer, or [kernel [I, 3H], recurrent_kernel [H, 3H], bias [3H]] with gate
        columns z, r, h (no bias for use_bias=False). The configuration is checked as in
        LSTM.from_keras; Keras' default GRU (reset_after=True, bias [2, 3H]) is a ValueError
        pointing to blockrnn.convert.from_keras, which runs it on BlockGRUResetAfter."""
        from .convert.keras import keras_gru_weights

        kernel, recurrent, bias, H = _keras_arrays(weights, 3, "GRU.from_keras")
        dtype = kernel.dtype if dtype is None else dtype
        layer = cls(kernel.shape[0], H, dtype=dtype)
        for name, a in keras_gru_weights(kernel, recurrent, bias, reset_after=False).items():
            setattr(layer, name, np.ascontiguousarray(a, dtype=layer.dtype))
        return layer

    def to_keras(self):
        """[kernel, recurrent_kernel, bias] for keras.layers.GRU(H, reset_after=False)."""
        I, H = self.input_size, self.hidden_size
        r, u = slice(0, H), slice(H, 2 * H)
        w = np.concatenate([self.w_ru[:, u], self.w_ru[:, r], self.w_c], axis=1)
        bias = np.concatenate([self.b_ru[u], self.b_ru[r], self.b_c])
        return [np.ascontiguousarray(w[:I]), np.ascontiguousarray(w[I:]), bias]


# ---- Cell plans: one step, set up once ------------------------------------------------------

_LSTMCellGrads = collections.namedtuple(
    "_LSTMCellGrads", "x_grad cs_prev_grad h_prev_grad w_grad wci_grad wcf_grad wco_grad b_grad")
_GRUCellGrads = collections.namedtuple(
    "_GRUCellGrads", "x_grad h_prev_grad w_ru_grad w_c_grad b_ru_grad b_c_grad")


class _Cell:
    """Shared parts of the cell plans: the library's cell layer object, one call at a time,
    outputs allocated here (everything else is checked by the library, which names the layer
    and the argument)."""

    def __getstate__(self):
        raise TypeError(f"{type(self).__name__} holds a library object and cannot be copied")

    def workspace_bytes(self, batch):
        """Bytes of the workspace the object keeps for a call of `batch` examples."""
        return self._obj.workspace_bytes(batch)

    def _batch(self, x):
        """The call's B for the outputs it allocates: x's first dimension when x is [B, I] with
        B <= max_batch; else 0, and the library refuses x by name."""
        x = np.ascontiguousarray(x)
        ok = x.ndim == 2 and x.shape[0] <= self.max_batch
        return x, (x.shape[0] if ok else 0)

    def _empty(self, where, *shapes):
        """Arrays of `shapes` for a call's outputs, checked against the memory limit first."""
        _check_memory(where, _nbytes(self.dtype, *shapes),
                      f"{len(shapes)} outputs of {self.dtype.name}")
        return [np.empty(s, self.dtype) for s in shapes]


class LSTMCell(_Cell):
    """LSTMBlockCell set up once for many calls (the library's LSTMCellLayer): the sizes, dtype
    (float32 or float64) and attrs are checked at creation, set_weights copies and packs the
    weights once, and each forward / backward runs on them without repacking or allocating
    scratch. Results are bit for bit those of raw_ops.LSTMBlockCell and
    gradients.LSTMBlockCell (and LSTMBlockCellGrad's dicfo).

        cell = blockrnn.layers.LSTMCell(I, H, max_batch=64, use_peephole=True)
        cell.set_weights(w, b, wci, wcf, wco)          # w [I+H, 4H] ICFO, b [4H], peepholes [H]
        out = cell.forward(x, cs_prev, h_prev)         # i, cs, f, o, ci, co, h: [B, H] each
        g = cell.backward(x, cs_prev, h_prev, out, cs_grad, h_grad)   # g.x_grad, g.w_grad, ...
    """

    def __init__(self, input_size, hidden_size, max_batch, *, forget_bias=1.0, cell_clip=3.0,
                 use_peephole=False, dtype=np.float32):
        self.input_size = _size(input_size, "LSTMCell", "input_size")
        self.hidden_size = _size(hidden_size, "LSTMCell", "hidden_size")
        self.max_batch = _size(max_batch, "LSTMCell", "max_batch")
        self.dtype = np.dtype(dtype)
        self.use_peephole = bool(use_peephole)
        self._obj = _core.LSTMCellLayer(self.input_size, self.hidden_size, self.dtype.name,
                                        self.max_batch,
                                        forget_bias=_real(forget_bias, "LSTMCell", "forget_bias"),
                                        cell_clip=_real(cell_clip, "LSTMCell", "cell_clip"),
                                        use_peephole=self.use_peephole)
        self._lock = threading.Lock()

    @_one_call_at_a_time
    def set_weights(self, w, b, wci=None, wcf=None, wco=None):
        """Copies and packs w [I+H, 4H] and b [4H] (ICFO), and with use_peephole wci, wcf, wco
        [H]; call again after the arrays change."""
        c = np.ascontiguousarray
        self._obj.set_weights(c(w), c(b), *(None if a is None else c(a) for a in (wci, wcf, wco)))

    @_one_call_at_a_time
    def forward(self, x, cs_prev, h_prev):
        """LSTMBlockCell: the namedtuple (i, cs, f, o, ci, co, h), each [B, H]."""
        x, B = self._batch(x)
        out = self._empty("LSTMCell.forward", *[(B, self.hidden_size)] * 7)
        self._obj.forward(x, np.ascontiguousarray(cs_prev), np.ascontiguousarray(h_prev), out)
        return _LSTMActs(*out)

    @_one_call_at_a_time
    def backward(self, x, cs_prev, h_prev, acts, cs_grad, h_grad, dicfo=False):
        """gradients.LSTMBlockCell through a forward call (`acts`: its outputs): the namedtuple
        of x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad, wcf_grad, wco_grad, b_grad (the
        peephole gradients are zeros without use_peephole); with dicfo=True, (that, dicfo
        [B, 4H]) where dicfo is LSTMBlockCellGrad's gate gradient."""
        x, B = self._batch(x)
        I, H = self.input_size, self.hidden_size
        c = np.ascontiguousarray
        shapes = [(B, I), (B, H), (B, H), (I + H, 4 * H), (H,), (H,), (H,), (4 * H,)]
        out = self._empty("LSTMCell.backward", *shapes, *([(B, 4 * H)] if dicfo else []))
        d = out.pop() if dicfo else None
        self._obj.backward(x, c(cs_prev), c(h_prev), [c(a) for a in acts], c(cs_grad), c(h_grad),
                           out, d)
        return (_LSTMCellGrads(*out), d) if dicfo else _LSTMCellGrads(*out)


class GRUCell(_Cell):
    """GRUBlockCell set up once for many calls (the library's GRUCellLayer), as LSTMCell.
    Results are bit for bit those of raw_ops.GRUBlockCell and gradients.GRUBlockCell (and
    GRUBlockCellGrad's d_c_bar, d_r_bar_u_bar).

        cell = blockrnn.layers.GRUCell(I, H, max_batch=64)
        cell.set_weights(w_ru, w_c, b_ru, b_c)   # [I+H, 2H], [I+H, H], [2H], [H]
        out = cell.forward(x, h_prev)            # r, u, c, h: [B, H] each
        g = cell.backward(x, h_prev, out, h_grad)
    """

    def __init__(self, input_size, hidden_size, max_batch, *, dtype=np.float32):
        self.input_size = _size(input_size, "GRUCell", "input_size")
        self.hidden_size = _size(hidden_size, "GRUCell", "hidden_size")
        self.max_batch = _size(max_batch, "GRUCell", "max_batch")
        self.dtype = np.dtype(dtype)
        self._obj = _core.GRUCellLayer(self.input_size, self.hidden_size, self.dtype.name,
                                       self.max_batch)
        self._lock = threading.Lock()

    @_one_call_at_a_time
    def set_weights(self, w_ru, w_c, b_ru, b_c):
        """Copies and packs the weights; call again after the arrays change."""
        c = np.ascontiguousarray
        self._obj.set_weights(c(w_ru), c(w_c), c(b_ru), c(b_c))

    @_one_call_at_a_time
    def forward(self, x, h_prev):
        """GRUBlockCell: the namedtuple (r, u, c, h), each [B, H]."""
        x, B = self._batch(x)
        out = self._empty("GRUCell.forward", *[(B, self.hidden_size)] * 4)
        self._obj.forward(x, np.ascontiguousarray(h_prev), out)
        return _GRUActs(*out)

    @_one_call_at_a_time
    def backward(self, x, h_prev, acts, h_grad, gate_grads=False):
        """gradients.GRUBlockCell through a forward call (`acts`: its outputs): the namedtuple
        of x_grad, h_prev_grad, w_ru_grad, w_c_grad, b_ru_grad, b_c_grad; with gate_grads=True,
        (that, d_c_bar [B, H], d_r_bar_u_bar [B, 2H]) as GRUBlockCellGrad returns them."""
        x, B = self._batch(x)
        I, H = self.input_size, self.hidden_size
        c = np.ascontiguousarray
        shapes = [(B, I), (B, H), (I + H, 2 * H), (I + H, H), (2 * H,), (H,)]
        out = self._empty("GRUCell.backward", *shapes,
                          *([(B, H), (B, 2 * H)] if gate_grads else []))
        d_c, d_ru = (out.pop(-2), out.pop()) if gate_grads else (None, None)
        self._obj.backward(x, c(h_prev), [c(a) for a in acts], c(h_grad), out, d_c, d_ru)
        g = _GRUCellGrads(*out)
        return (g, d_c, d_ru) if gate_grads else g
