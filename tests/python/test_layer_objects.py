"""The layer objects and the RNN stack of blockrnn/layer.h through Python (blockrnn._core):
each layer object's forward and backward equal the one-shot raw ops bit for bit, repeatedly and
at sizes below the planned maximum; errors name the layer and the argument; and the stack's
torch custom ops (blockrnn::rnn, blockrnn::rnn_grad) pass torch.library.opcheck (in a fresh
process: see test_torch_modules.py for why TensorFlow must not be loaded there).
"""
import subprocess
import sys

import numpy as np
import pytest

import blockrnn
from blockrnn import _core, raw_ops

T, B, I, H = 5, 4, 3, 6


def _rand(rng, shape, dtype):
    return rng.uniform(-1, 1, shape).astype(dtype)


def _dtype(name):
    """numpy's dtype of a layer dtype name (bfloat16: ml_dtypes')."""
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    return np.dtype(name)


def _c(a):
    """An array as _core's layer objects take it: bfloat16 as a uint16 view of its bits."""
    return a.view(np.uint16) if a.dtype.name == "bfloat16" else a


def _equal(got, want):
    np.testing.assert_array_equal(_c(got).view(np.uint8), _c(np.asarray(want)).view(np.uint8))


_ALL_DTYPES = ["float32", "float64", "float16", "bfloat16"]


@pytest.mark.parametrize("name", _ALL_DTYPES)
@pytest.mark.parametrize("lengths", [None, np.array([5, 2, 0, 4])])
def test_lstm_layer_equals_raw_ops_bitwise(name, lengths):
    rng = np.random.default_rng(1)
    dtype = _dtype(name)
    layer = _core.LSTMLayer(I, H, name, T + 2, B + 1, v2=False, forget_bias=0.5, cell_clip=0.9,
                            use_peephole=True)
    w, b = _rand(rng, (I + H, 4 * H), dtype), _rand(rng, (4 * H,), dtype)
    peep = [_rand(rng, (H,), dtype) for _ in range(3)]
    layer.set_weights(_c(w), _c(b), *map(_c, peep))
    for _ in range(2):  # the same object, called again
        x = _rand(rng, (T, B, I), dtype)
        cs0, h0 = _rand(rng, (B, H), dtype), _rand(rng, (B, H), dtype)
        kw = dict(seq_len_max=np.int64(T), x=x, cs_prev=cs0, h_prev=h0, w=w, wci=peep[0],
                  wcf=peep[1], wco=peep[2], b=b, forget_bias=0.5, cell_clip=0.9,
                  use_peephole=True)
        if lengths is not None:
            kw["seq_lengths"] = lengths
        want = raw_ops.BlockLSTM(**kw)
        acts = [np.empty((T, B, H), dtype) for _ in range(7)]
        layer.forward(_c(x), _c(cs0), _c(h0), [_c(a) for a in acts], seq_lengths=lengths)
        for got, ref in zip(acts, want):
            _equal(got, ref)
        csg, hg = _rand(rng, (T, B, H), dtype), _rand(rng, (T, B, H), dtype)
        kw.pop("forget_bias"), kw.pop("cell_clip")
        gwant = raw_ops.BlockLSTMGrad(**kw, i=acts[0], cs=acts[1], f=acts[2], o=acts[3],
                                      ci=acts[4], co=acts[5], h=acts[6], cs_grad=csg, h_grad=hg)
        grads = [np.empty_like(a) for a in (x, cs0, h0, w, *peep, b)]
        layer.backward(_c(x), _c(cs0), _c(h0), [_c(a) for a in acts], _c(csg), _c(hg),
                       [_c(g) for g in grads], seq_lengths=lengths)
        for got, ref in zip(grads, gwant):
            _equal(got, ref)


@pytest.mark.parametrize("name", _ALL_DTYPES)
def test_gru_layers_equal_raw_ops_bitwise(name):
    rng = np.random.default_rng(2)
    dtype = _dtype(name)
    x, h0 = _rand(rng, (T, B, I), dtype), _rand(rng, (B, H), dtype)
    hg = _rand(rng, (T, B, H), dtype)
    # BlockGRU
    ws = [_rand(rng, s, dtype) for s in ((I + H, 2 * H), (I + H, H), (2 * H,), (H,))]
    gru = _core.GRULayer(I, H, name, T, B)
    gru.set_weights(*map(_c, ws))
    want = raw_ops.BlockGRU(seq_len_max=np.int64(T), x=x, h_prev=h0, w_ru=ws[0], w_c=ws[1],
                            b_ru=ws[2], b_c=ws[3])
    acts = [np.empty((T, B, H), dtype) for _ in range(4)]
    gru.forward(_c(x), _c(h0), [_c(a) for a in acts])
    for got, ref in zip(acts, want):
        _equal(got, ref)
    gwant = raw_ops.BlockGRUGrad(seq_len_max=np.int64(T), x=x, h_prev=h0, w_ru=ws[0], w_c=ws[1],
                                 b_ru=ws[2], b_c=ws[3], r=acts[0], u=acts[1], c=acts[2],
                                 h=acts[3], h_grad=hg)
    grads = [np.empty_like(a) for a in (x, h0, *ws)]
    gru.backward(_c(x), _c(h0), [_c(a) for a in acts], _c(hg), [_c(g) for g in grads])
    for got, ref in zip(grads, gwant):
        _equal(got, ref)
    # BlockGRUResetAfter, at a smaller T and B than planned
    ws = [_rand(rng, s, dtype) for s in ((I, 3 * H), (H, 3 * H), (3 * H,), (3 * H,))]
    ra = _core.GRUResetAfterLayer(I, H, name, T + 3, B + 3)
    ra.set_weights(*map(_c, ws))
    want = raw_ops.BlockGRUResetAfter(seq_len_max=np.int64(T), x=x, h_prev=h0, w_i=ws[0],
                                      w_h=ws[1], b_i=ws[2], b_h=ws[3])
    acts = [np.empty((T, B, H), dtype) for _ in range(5)]
    ra.forward(_c(x), _c(h0), [_c(a) for a in acts])
    for got, ref in zip(acts, want):
        _equal(got, ref)
    gwant = raw_ops.BlockGRUResetAfterGrad(seq_len_max=np.int64(T), x=x, h_prev=h0, w_i=ws[0],
                                           w_h=ws[1], b_i=ws[2], b_h=ws[3], r=acts[0],
                                           u=acts[1], n=acts[2], hn=acts[3], h=acts[4],
                                           h_grad=hg)
    grads = [np.empty_like(a) for a in (x, h0, *ws)]
    ra.backward(_c(x), _c(h0), [_c(a) for a in acts], _c(hg), [_c(g) for g in grads])
    for got, ref in zip(grads, gwant):
        _equal(got, ref)


def test_layer_errors_name_the_layer_and_argument():
    with pytest.raises(blockrnn.InvalidArgumentError, match=r"GRULayer.create: hidden_size"):
        _core.GRULayer(3, 0, "float32", 4, 4)
    layer = _core.GRULayer(3, 2, "float32", 4, 2)
    with pytest.raises(blockrnn.InvalidArgumentError, match="set_weights has not been called"):
        layer.forward(np.zeros((4, 2, 3), np.float32), np.zeros((2, 2), np.float32),
                      [np.zeros((4, 2, 2), np.float32) for _ in range(4)])
    with pytest.raises(blockrnn.InvalidArgumentError, match=r"w_c must have shape \[5, 2\]"):
        layer.set_weights(np.zeros((5, 4), np.float32), np.zeros((5, 3), np.float32),
                          np.zeros(4, np.float32), np.zeros(2, np.float32))
    layer.set_weights(np.zeros((5, 4), np.float32), np.zeros((5, 2), np.float32),
                      np.zeros(4, np.float32), np.zeros(2, np.float32))
    with pytest.raises(blockrnn.InvalidArgumentError, match="max_time"):
        layer.forward(np.zeros((5, 2, 3), np.float32), np.zeros((2, 2), np.float32),
                      [np.zeros((5, 2, 2), np.float32) for _ in range(4)])
    with pytest.raises(blockrnn.InvalidArgumentError, match="RNN.create: num_layers"):
        _core.RNN("gru", 3, 2, 0, False, "float32", 4, 2)



# ---- The cell plans (blockrnn.layers.LSTMCell / GRUCell on _core.LSTMCellLayer / GRUCellLayer)

_CELL_SHAPES = [(1, 5, 7), (3, 0, 4), (13, 33, 16), (100, 7, 5), (5, 98, 3)]  # B, I, H


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("peephole", [False, True])
@pytest.mark.parametrize("B,I,H", _CELL_SHAPES)
def test_lstm_cell_plan_equals_raw_ops_bitwise(dtype, peephole, B, I, H):
    rng = np.random.default_rng(B * 100 + I * 10 + H)
    cell = blockrnn.layers.LSTMCell(I, H, max_batch=B + 2, forget_bias=0.7, cell_clip=0.9,
                                    use_peephole=peephole, dtype=dtype)
    w, b = _rand(rng, (I + H, 4 * H), dtype), _rand(rng, (4 * H,), dtype)
    peep = [_rand(rng, (H,), dtype) for _ in range(3)]
    cell.set_weights(w, b, *(peep if peephole else []))
    zeros = [np.zeros(H, dtype)] * 3
    for _ in range(2):  # the same object, called again
        x = _rand(rng, (B, I), dtype)
        cs0, h0 = _rand(rng, (B, H), dtype), _rand(rng, (B, H), dtype)
        kw = dict(x=x, cs_prev=cs0, h_prev=h0, w=w, b=b, forget_bias=0.7, cell_clip=0.9,
                  use_peephole=peephole)
        kw.update(zip(("wci", "wcf", "wco"), peep if peephole else zeros))
        want = raw_ops.LSTMBlockCell(**kw)
        got = cell.forward(x, cs0, h0)
        assert got._fields == want._fields
        for g, r in zip(got, want):
            np.testing.assert_array_equal(g, r)
        csg, hg = _rand(rng, (B, H), dtype), _rand(rng, (B, H), dtype)
        acts = dict(i=want.i, cs=want.cs, f=want.f, o=want.o, ci=want.ci, co=want.co,
                    cs_grad=csg, h_grad=hg)
        gwant = blockrnn.gradients.LSTMBlockCell(**kw, **acts)
        grads, dicfo = cell.backward(x, cs0, h0, got, csg, hg, dicfo=True)
        for g, r in zip(grads, gwant):
            np.testing.assert_array_equal(g, r)
        kw.pop("forget_bias"), kw.pop("cell_clip")
        np.testing.assert_array_equal(dicfo, raw_ops.LSTMBlockCellGrad(**kw, **acts).dicfo)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("B,I,H", _CELL_SHAPES + [(0, 4, 6)])
def test_gru_cell_plan_equals_raw_ops_bitwise(dtype, B, I, H):
    rng = np.random.default_rng(B * 100 + I * 10 + H + 1)
    cell = blockrnn.layers.GRUCell(I, H, max_batch=B + 1, dtype=dtype)
    for _ in range(2):  # new weights, the same object
        ws = [_rand(rng, s, dtype) for s in ((I + H, 2 * H), (I + H, H), (2 * H,), (H,))]
        cell.set_weights(*ws)
        x, h0 = _rand(rng, (B, I), dtype), _rand(rng, (B, H), dtype)
        kw = dict(x=x, h_prev=h0, w_ru=ws[0], w_c=ws[1], b_ru=ws[2], b_c=ws[3])
        want = raw_ops.GRUBlockCell(**kw)
        got = cell.forward(x, h0)
        for g, r in zip(got, want):
            np.testing.assert_array_equal(g, r)
        hg = _rand(rng, (B, H), dtype)
        acts = dict(r=want.r, u=want.u, c=want.c, d_h=hg)
        gwant = blockrnn.gradients.GRUBlockCell(**kw, **acts)
        grads, d_c, d_ru = cell.backward(x, h0, got, hg, gate_grads=True)
        for g, r in zip(grads, gwant):
            np.testing.assert_array_equal(g, r)
        dwant = raw_ops.GRUBlockCellGrad(**kw, **acts)
        np.testing.assert_array_equal(d_c, dwant.d_c_bar)
        np.testing.assert_array_equal(d_ru, dwant.d_r_bar_u_bar)


def test_cell_plan_errors_name_the_layer_and_argument():
    with pytest.raises(blockrnn.InvalidArgumentError, match=r"GRUCellLayer.create: hidden_size"):
        blockrnn.layers.GRUCell(3, 0, max_batch=2)
    with pytest.raises(blockrnn.InvalidArgumentError, match=r"LSTMCellLayer.create: max_batch"):
        blockrnn.layers.LSTMCell(3, 2, max_batch=0)
    cell = blockrnn.layers.LSTMCell(3, 2, max_batch=2)
    x, s = np.zeros((2, 3), np.float32), np.zeros((2, 2), np.float32)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="LSTMCellLayer.forward: set_weights has not been called"):
        cell.forward(x, s, s)
    with pytest.raises(blockrnn.InvalidArgumentError, match=r"w must have shape \[5, 8\]"):
        cell.set_weights(np.zeros((5, 4), np.float32), np.zeros(8, np.float32))
    cell.set_weights(np.zeros((5, 8), np.float32), np.zeros(8, np.float32))
    with pytest.raises(blockrnn.InvalidArgumentError, match="x has batch 3"):
        cell.forward(np.zeros((3, 3), np.float32), s, s)
    with pytest.raises(blockrnn.InvalidArgumentError, match="h_prev must have dtype float32"):
        cell.forward(x, s, s.astype(np.float64))


_OPCHECK = r"""
import torch
import blockrnn.torch as brt
from blockrnn.torch import _ops

g = torch.Generator().manual_seed(3)
r = lambda *s: torch.randn(*s, dtype=torch.float64, generator=g)
T, B, I, H = 4, 3, 3, 2
for mode, L, bidi, lens, drop in [("lstm_v2", 2, True, [4, 1, 3], True),
                                  ("lstm", 1, False, None, False),
                                  ("gru", 2, False, [2, 4, 0], True),
                                  ("gru_reset_after", 2, True, None, False)]:
    D = 2 if bidi else 1
    params = []
    for l in range(L):
        for d in range(D):
            i = I if l == 0 else D * H
            if mode.startswith("lstm"):
                params += [r(i + H, 4 * H), r(4 * H), r(H), r(H), r(H)]
            elif mode == "gru":
                params += [r(i + H, 2 * H), r(i + H, H), r(2 * H), r(H)]
            else:
                params += [r(i, 3 * H), r(H, 3 * H), r(3 * H), r(3 * H)]
    params = [p.requires_grad_(True) for p in params]
    x = r(T, B, I).requires_grad_(True)
    h0 = r(L * D, B, H).requires_grad_(True)
    c0 = r(L * D, B, H).requires_grad_(True) if mode.startswith("lstm") else None
    sl = None if lens is None else torch.tensor(lens)
    mask = (torch.rand(L - 1, T, B, D * H, generator=g, dtype=torch.float64) > 0.3).double() / 0.7 \
        if drop else None
    args = (x, h0, c0, params, sl, mask, mode, L, bidi, 1.0 if mode == "lstm" else 0.0,
            0.0, mode == "lstm")
    torch.library.opcheck(_ops.rnn, args)
    # gradcheck of the whole stack through the custom ops
    def f(x, h0, *ps):
        y, hn, cn, _ = _ops.rnn(x, h0, c0, list(ps), sl, mask, mode, L, bidi,
                                1.0 if mode == "lstm" else 0.0, 0.0, mode == "lstm")
        return y, hn
    assert torch.autograd.gradcheck(f, (x, h0, *params))
print("ok")
"""


def test_rnn_custom_ops_opcheck_and_gradcheck_in_fresh_process():
    pytest.importorskip("torch")
    res = subprocess.run([sys.executable, "-c", _OPCHECK], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr


_STACK_VS_PER_OP = r"""
import torch
import blockrnn.torch as brt
from blockrnn.torch import _modules
from torch.nn.utils.rnn import pack_padded_sequence

def run(m, per_op, x, lengths, hx):
    orig = _modules._RNNBase._run_layers
    if per_op:
        _modules._RNNBase._run_layers = _modules._RNNBase._run_layers_per_op
    try:
        m.zero_grad()
        xx = x.detach().clone().requires_grad_(True)
        hh = [h.detach().clone().requires_grad_(True) for h in hx]
        inp = pack_padded_sequence(xx, lengths, enforce_sorted=False) if lengths is not None else xx
        out, st = m(inp, tuple(hh) if len(hh) == 2 else hh[0])
        out_t = out.data if lengths is not None else out
        st = list(st) if isinstance(st, tuple) else [st]
        g = torch.Generator().manual_seed(1)
        loss = (out_t * torch.randn(out_t.shape, dtype=out_t.dtype, generator=g)).sum()
        for s in st:
            loss = loss + (s * torch.randn(s.shape, dtype=s.dtype, generator=g)).sum()
        loss.backward()
        return [out_t.detach(), *[s.detach() for s in st], xx.grad, *[h.grad for h in hh],
                *[p.grad.clone() for p in m.parameters()]]
    finally:
        _modules._RNNBase._run_layers = orig

torch.manual_seed(0)
T, B, I, H = 6, 3, 4, 5
for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
    for make in (lambda: brt.LSTM(I, H, num_layers=2, bidirectional=True),
                 lambda: brt.LSTM(I, H, num_layers=2, use_peephole=True, cell_clip=0.8,
                                  forget_bias=0.5),
                 lambda: brt.GRU(I, H, num_layers=3, bidirectional=True),
                 lambda: brt.GRU(I, H, num_layers=2, bidirectional=True, reset_after=False)):
        m = make().to(dtype)
        L = m.num_layers * (2 if m.bidirectional else 1)
        x = torch.randn(T, B, I, dtype=dtype)
        hx = [torch.randn(L, B, H, dtype=dtype) for _ in range(2 if isinstance(m, brt.LSTM) else 1)]
        for lengths in (None, torch.tensor([6, 2, 4])):
            a = run(m, False, x, lengths, hx)
            b = run(m, True, x, lengths, hx)
            assert len(a) == len(b)
            for k, (u, v) in enumerate(zip(a, b)):
                assert torch.equal(u, v), (type(m).__name__, dtype, lengths, k)
print("ok")
"""


def test_torch_stack_is_bitwise_the_per_op_path():
    # blockrnn::rnn (the library's stack) against the same module run one op per (layer,
    # direction) with the glue in torch, as before the stack: outputs, final states and every
    # gradient equal bit for bit, in float32, float64, float16 and bfloat16 (the stack's own
    # sums and products are torch's on the 16-bit values: one float32 operation rounded once),
    # with and without lengths.
    pytest.importorskip("torch")
    res = subprocess.run([sys.executable, "-c", _STACK_VS_PER_OP], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr


# ---- hostile input: overlap, memory, sizes, attrs ---------------------------------------------

class _MemoryLimit:
    """The memory limit of one test; the previous one afterwards."""

    def __init__(self, nbytes):
        self.nbytes, self.before = nbytes, blockrnn.get_memory_limit()

    def __enter__(self):
        blockrnn.set_memory_limit(self.nbytes)

    def __exit__(self, *exc):
        blockrnn.set_memory_limit(self.before)


def test_layers_lstm_argument_types_are_named():
    with pytest.raises(TypeError, match=r"LSTM: cell_clip must be a real number, got 'a'"):
        blockrnn.layers.LSTM(3, 4, cell_clip="a")
    with pytest.raises(TypeError, match=r"LSTM: forget_bias must be a real number"):
        blockrnn.layers.LSTM(3, 4, forget_bias=None)
    with pytest.raises(TypeError, match=r"GRU: hidden_size must be an integer, got 2.5"):
        blockrnn.layers.GRU(3, 2.5)


def test_layer_and_rnn_refuse_an_output_on_an_input():
    rng = np.random.default_rng(7)
    n = 4  # I = H: x and every output have one shape
    layer = _core.LSTMLayer(n, n, "float32", 3, 2)
    layer.set_weights(_rand(rng, (2 * n, 4 * n), np.float32), _rand(rng, (4 * n,), np.float32))
    x = _rand(rng, (3, 2, n), np.float32)
    before = x.copy()
    acts = [np.empty((3, 2, n), np.float32) for _ in range(6)] + [x]  # h on x
    z = np.zeros((2, n), np.float32)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="LSTMLayer.forward: output h overlaps input x"):
        layer.forward(x, z, z, acts)
    np.testing.assert_array_equal(x, before)
    # Bidirectional y [T, B, 2H] on x [T, B, I = 2H].
    rnn = _core.RNN("lstm_v2", 2 * n, n, 1, True, "float32", 3, 2)
    for d in range(2):
        rnn.set_weights(0, d, [_rand(rng, (3 * n, 4 * n), np.float32),
                               _rand(rng, (4 * n,), np.float32)])
    x2 = _rand(rng, (3, 2, 2 * n), np.float32)
    before2 = x2.copy()
    hn, cn = np.empty((2, 2, n), np.float32), np.empty((2, 2, n), np.float32)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="RNN.forward: output y overlaps input x"):
        rnn.forward(x2, None, None, None, None, x2, hn, cn)
    np.testing.assert_array_equal(x2, before2)


def test_layers_forward_keeps_the_memory_limit_the_raw_op_keeps():
    rng = np.random.default_rng(8)
    lstm = blockrnn.layers.LSTM(16, 16, seed=0)
    x = _rand(rng, (256, 64, 16), np.float32)
    with _MemoryLimit(4 << 20):
        with pytest.raises(blockrnn.ResourceExhaustedError, match="BlockLSTM: this call needs"):
            raw_ops.BlockLSTM(seq_len_max=np.int64(256), x=x,
                              cs_prev=np.zeros((64, 16), np.float32),
                              h_prev=np.zeros((64, 16), np.float32), w=lstm.w, wci=lstm.wci,
                              wcf=lstm.wcf, wco=lstm.wco, b=lstm.b)
        # refused before blockrnn.layers allocates the outputs (7.3 MiB), then by the layer
        # object for what it allocates itself (the raw op's bound for the call)
        with pytest.raises(blockrnn.ResourceExhaustedError,
                           match=r"LSTM.forward: needs 7340032 bytes .* memory limit of 4194304"):
            lstm.forward(x)
        lstm_object = _core.LSTMLayer(16, 16, "float32", 256, 64)
        lstm_object.set_weights(lstm.w, lstm.b, lstm.wci, lstm.wcf, lstm.wco)
        out = [np.empty((256, 64, 16), np.float32) for _ in range(7)]
        state = np.zeros((64, 16), np.float32)
        with pytest.raises(blockrnn.ResourceExhaustedError,
                           match=r"LSTMLayer.forward: this call needs .* memory limit of 4.0 MiB"):
            lstm_object.forward(x, state, state, out)
        with pytest.raises(blockrnn.ResourceExhaustedError,
                           match=r"LSTMLayer.create: this call needs .* the weights for "
                                 r"input_size 2048 and hidden_size 2048"):
            _core.LSTMLayer(2048, 2048, "float32", 1, 1)
        with pytest.raises(blockrnn.ResourceExhaustedError, match=r"RNN.create: this call needs"):
            _core.RNN("lstm", 4, 4, 10**9, False, "float32", 1, 1)


def test_layers_size_the_workspace_to_the_call_not_to_the_largest_t_times_b():
    # T = 20000, B = 1 then T = 10, B = 512: max(T) x max(B) would need gigabytes, each call a
    # few MiB; under a limit far below the product both run and equal the raw op.
    rng = np.random.default_rng(9)
    lstm = blockrnn.layers.LSTM(16, 16, seed=1)
    with _MemoryLimit(256 << 20):
        for T, B in ((20000, 1), (10, 512)):
            x = _rand(rng, (T, B, 16), np.float32)
            h, _ = lstm.forward(x)
            z = np.zeros((B, 16), np.float32)
            want = raw_ops.BlockLSTM(seq_len_max=np.int64(T), x=x, cs_prev=z, h_prev=z, w=lstm.w,
                                     wci=lstm.wci, wcf=lstm.wcf, wco=lstm.wco, b=lstm.b,
                                     forget_bias=1.0, cell_clip=-1.0)
            np.testing.assert_array_equal(h, want.h)


@pytest.mark.parametrize("forget_bias", [float("nan"), float("inf"), 3.4028235e38])
def test_lstm_layer_accepts_the_attrs_the_raw_op_accepts(forget_bias):
    rng = np.random.default_rng(10)
    x = _rand(rng, (3, 2, 2), np.float32)
    w, b = _rand(rng, (5, 12), np.float32), _rand(rng, (12,), np.float32)
    z = np.zeros((2, 3), np.float32)
    layer = _core.LSTMLayer(2, 3, "float32", 3, 2, forget_bias=forget_bias, cell_clip=3.4028235e38)
    layer.set_weights(w, b)
    acts = [np.empty((3, 2, 3), np.float32) for _ in range(7)]
    layer.forward(x, z, z, acts)
    zh = np.zeros(3, np.float32)
    want = raw_ops.BlockLSTM(seq_len_max=np.int64(3), x=x, cs_prev=z, h_prev=z, w=w, wci=zh,
                             wcf=zh, wco=zh, b=b, forget_bias=forget_bias,
                             cell_clip=3.4028235e38)
    for got, ref in zip(acts, want):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_layers_classes_in_16bit_run_the_layer_objects_as_the_raw_ops(name):
    # blockrnn.layers.LSTM / GRU in float16 and bfloat16 run on the layer objects: the same
    # bits as the raw ops, forward and backward.
    dtype = _dtype(name)
    rng = np.random.default_rng(7)
    x = _rand(rng, (T, B, I), dtype)
    hg = _rand(rng, (T, B, H), dtype)
    lstm = blockrnn.layers.LSTM(I, H, dtype=dtype, seed=3, forget_bias=0.5)
    h_seq, _ = lstm.forward(x)
    assert lstm._layer is not None
    z = np.zeros((B, H), dtype)
    want = raw_ops.BlockLSTM(seq_len_max=np.int64(T), x=x, cs_prev=z, h_prev=z, w=lstm.w,
                             wci=lstm.wci, wcf=lstm.wcf, wco=lstm.wco, b=lstm.b, forget_bias=0.5,
                             cell_clip=-1.0, use_peephole=False)
    _equal(h_seq, want.h)
    dx, _ = lstm.backward(hg)
    gwant = raw_ops.BlockLSTMGrad(seq_len_max=np.int64(T), x=x, cs_prev=z, h_prev=z, w=lstm.w,
                                  wci=lstm.wci, wcf=lstm.wcf, wco=lstm.wco, b=lstm.b, i=want.i,
                                  cs=want.cs, f=want.f, o=want.o, ci=want.ci, co=want.co,
                                  h=want.h, cs_grad=np.zeros_like(hg), h_grad=hg,
                                  use_peephole=False)
    _equal(dx, gwant.x_grad)
    _equal(lstm.grads["w"], gwant.w_grad)
    gru = blockrnn.layers.GRU(I, H, dtype=dtype, seed=4)
    h_seq, _ = gru.forward(x)
    want = raw_ops.BlockGRU(seq_len_max=np.int64(T), x=x, h_prev=z, **gru.parameters())
    _equal(h_seq, want.h)
    dx, _ = gru.backward(hg)
    gwant = raw_ops.BlockGRUGrad(seq_len_max=np.int64(T), x=x, h_prev=z, **gru.parameters(),
                                 r=want.r, u=want.u, c=want.c, h=want.h, h_grad=hg)
    _equal(dx, gwant.x_grad)
    _equal(gru.grads["w_ru"], gwant.w_ru_grad)


@pytest.mark.parametrize("mode", ["lstm_v2", "gru_reset_after"])
def test_rnn_takes_torch_nn_parameters_as_they_are(mode):
    # param_layout "torch": a torch.nn layer's tensors as they are (None for bias=False), the
    # weight gradients written in that layout; the values are the ops layout's, bit for bit.
    rng = np.random.default_rng(12)
    T, B, I, H = 3, 2, 5, 4
    G = (4 if mode == "lstm_v2" else 3) * H
    w_ih, w_hh = _rand(rng, (G, I), np.float32), _rand(rng, (G, H), np.float32)
    b_ih = (np.round(_rand(rng, (G,), np.float32) * 64) / 64).astype(np.float32)
    b_hh = (np.round(_rand(rng, (G,), np.float32) * 64) / 64).astype(np.float32)
    x, gy = _rand(rng, (T, B, I), np.float32), _rand(rng, (T, B, H), np.float32)
    h0 = _rand(rng, (1, B, H), np.float32)
    lstm = mode == "lstm_v2"
    c0 = _rand(rng, (1, B, H), np.float32) if lstm else None
    if lstm:
        ops_params = [np.ascontiguousarray(np.concatenate([w_ih.T, w_hh.T])), b_ih + b_hh]
    else:
        ops_params = [np.ascontiguousarray(w_ih.T), np.ascontiguousarray(w_hh.T), b_ih, b_hh]
    results = []
    for layout, params in (("ops", ops_params), ("torch", [w_ih, w_hh, b_ih, b_hh])):
        rnn = _core.RNN(mode, I, H, 1, False, "float32", T, B, param_layout=layout)
        rnn.set_weights(0, 0, params)
        y, hn = np.empty((T, B, H), np.float32), np.empty((1, B, H), np.float32)
        cn = np.empty((1, B, H), np.float32) if lstm else None
        rnn.forward(x, h0, c0, None, None, y, hn, cn)
        shapes = [p.shape for p in params] + ([(H,)] * 3 if lstm and layout == "ops" else [])
        if lstm and layout == "torch":
            shapes += [None] * 3  # no peepholes: their gradients not asked for
        grads = [None if s is None else np.empty(s, np.float32) for s in shapes]
        xg = np.empty_like(x)
        rnn.backward(x, h0, c0, None, None, gy, None, None, xg, None, None, grads)
        results.append((y, xg, grads))
    (y_ops, xg_ops, g_ops), (y_t, xg_t, g_t) = results
    np.testing.assert_array_equal(y_ops, y_t)
    np.testing.assert_array_equal(xg_ops, xg_t)
    if lstm:
        want = [g_ops[0][:I].T, g_ops[0][I:].T, g_ops[1], g_ops[1]]
    else:
        want = [g_ops[0].T, g_ops[1].T, g_ops[2], g_ops[3]]
    for w, g in zip(want, g_t):
        np.testing.assert_array_equal(w, g)
        assert g.flags.c_contiguous
    # bias=False: absent biases are zeros
    rnn = _core.RNN(mode, I, H, 1, False, "float32", T, B, param_layout="torch")
    rnn.set_weights(0, 0, [w_ih, w_hh, None, None])
    zero_bias = _core.RNN(mode, I, H, 1, False, "float32", T, B)
    zero_bias.set_weights(0, 0, [p if p.ndim == 2 else np.zeros_like(p) for p in ops_params])
    ys = []
    for r in (rnn, zero_bias):
        ys.append(np.empty((T, B, H), np.float32))
        r.forward(x, h0, c0, None, None, ys[-1], np.empty((1, B, H), np.float32),
                  np.empty((1, B, H), np.float32) if lstm else None)
    np.testing.assert_array_equal(ys[0], ys[1])
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=r"RNN.set_weights: weight_hh_l0 must have shape \[%d, 4\]" % G):
        rnn.set_weights(0, 0, [w_ih, np.ascontiguousarray(w_hh.T), None, None])
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="RNN.create: param_layout must be 'ops' or 'torch', got 'nn'"):
        _core.RNN(mode, I, H, 1, False, "float32", T, B, param_layout="nn")
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="param_layout kTorch .* got mode kGRU"):
        _core.RNN("gru", I, H, 1, False, "float32", T, B, param_layout="torch")



def test_same_bits_compares_bit_patterns_of_every_layout():
    # blockrnn._bitwise.same_bits: what the layers and the torch plans compare their kept copy
    # of the parameters by (one memcmp for C-contiguous arrays, numpy's views otherwise)
    from blockrnn import _bitwise
    rng = np.random.default_rng(13)
    for dtype in (np.float16, np.float32, np.float64, _dtype("bfloat16")):
        a = _rand(rng, (70, 33), np.float32).astype(dtype)
        assert _bitwise.same_bits(a, a.copy())
        assert _bitwise.same_bits(a.T, a.copy().T)  # not C-contiguous: numpy's path
        b = a.copy()
        b[69, 32] = b[69, 32] * 2 + 1  # the last element
        assert not _bitwise.same_bits(a, b)
        assert not _bitwise.same_bits(a.T, b.T)
        zeros, signed = np.zeros(4, dtype), np.zeros(4, dtype)
        signed[2] = -0.0
        assert not _bitwise.same_bits(zeros, signed)  # -0.0 differs from 0.0
        nan = np.full(3, np.nan, dtype)
        assert _bitwise.same_bits(nan, nan.copy())  # NaN equals itself
        assert not _bitwise.same_bits(a, a[:, :32].copy())  # shapes differ
    assert not _core.same_bytes(np.zeros(4, np.float32), np.zeros(5, np.float32))
