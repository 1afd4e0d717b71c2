"""ONNX export of blockrnn.torch.LSTM / GRU (docs/torch.md, "ONNX export"): the exported model
holds ONNX LSTM / GRU nodes, and onnxruntime running it matches the module itself.

Tolerance: 1e-5 absolute in float32. onnxruntime's CPU LSTM / GRU kernels and blockrnn's
compute the same recurrence in float32 with different summation orders (their own GEMMs);
with |values| <= 1 (tanh / sigmoid outputs, inputs ~ N(0, 1), weights ~ U(-1/sqrt(H), ..))
the differences seen are ~2e-7, and a gate-order or bias mistake is O(0.1).
"""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import blockrnn.torch as brt

TOL = 1e-5  # see the header
T, B, I, H = 6, 3, 4, 5


class Wrap(torch.nn.Module):
    """module(x, hx) with hx as separate tensors (ONNX inputs are tensors)."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *hx):
        if not hx:
            return self.rnn(x)
        return self.rnn(x, hx[0] if len(hx) == 1 else (hx[0], hx[1]))


def _inputs(rnn, with_hx, dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    x = torch.randn((B, T, I) if rnn.batch_first else (T, B, I), generator=g, dtype=dtype)
    if not with_hx:
        return (x,)
    LD = rnn.num_layers * (2 if rnn.bidirectional else 1)
    n = 2 if isinstance(rnn, brt.LSTM) else 1
    return (x, *(torch.randn(LD, B, H, generator=g, dtype=dtype) for _ in range(n)))


def _flat(out):
    y, states = out
    return [y, *(states if isinstance(states, tuple) else (states,))]


def _export(model, args, path, plain=False):
    if plain:  # the documented plain call
        return torch.onnx.export(model, args, str(path), dynamo=True,
                                 custom_translation_table=brt.onnx_translation_table())
    return brt.onnx_export(model, args, str(path))


def _check(model, args, path, node, plain=False):
    model.eval()
    _export(model, args, path, plain)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    ops = [n.op_type for n in proto.graph.node]
    assert node in ops, ops
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    got = sess.run(None, {n: a.numpy() for n, a in zip(names, args)})
    with torch.no_grad():
        want = _flat(model(*args))
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert tuple(w.shape) == g.shape
        np.testing.assert_allclose(g, w.numpy(), rtol=0, atol=TOL)
    return ops


KINDS = {
    "lstm": (lambda **kw: brt.LSTM(I, H, **kw), "LSTM"),
    "gru": (lambda **kw: brt.GRU(I, H, **kw), "GRU"),
    "gru_reset_before": (lambda **kw: brt.GRU(I, H, reset_after=False, **kw), "GRU"),
}
# (num_layers, bidirectional, batch_first, with hx)
CONFIGS = [(1, False, False, False), (1, True, False, True), (2, False, True, True),
           (2, True, True, False), (2, True, False, True)]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("layers,bidir,batch_first,with_hx", CONFIGS)
def test_export_matches_onnxruntime(tmp_path, kind, layers, bidir, batch_first, with_hx):
    make, node = KINDS[kind]
    torch.manual_seed(0)
    rnn = make(num_layers=layers, bidirectional=bidir, batch_first=batch_first,
               dropout=0.5 if layers > 1 else 0.0)  # dropout: eval mode exports without it
    ops = _check(Wrap(rnn), _inputs(rnn, with_hx), tmp_path / "m.onnx", node)
    assert ops.count(node) == layers  # one node per layer, both directions in it


def test_gru_linear_before_reset(tmp_path):
    """torch's GRU is ONNX linear_before_reset=1, TensorFlow's reset-before GRU is 0."""
    for reset_after, want in ((True, 1), (False, 0)):
        rnn = brt.GRU(I, H, reset_after=reset_after)
        brt.onnx_export(Wrap(rnn).eval(), _inputs(rnn, False), str(tmp_path / "g.onnx"))
        (gru,) = [n for n in onnx.load(str(tmp_path / "g.onnx")).graph.node
                  if n.op_type == "GRU"]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in gru.attribute}
        assert attrs.get("linear_before_reset", 0) == want


@pytest.mark.parametrize("kw", [{"use_peephole": True}, {"forget_bias": 1.0},
                                {"bias": False}, {"bias": False, "forget_bias": 0.5},
                                {"use_peephole": True, "forget_bias": 1.0,
                                 "bidirectional": True, "num_layers": 2}])
def test_lstm_extras(tmp_path, kw):
    torch.manual_seed(0)
    rnn = brt.LSTM(I, H, **kw)
    _check(Wrap(rnn), _inputs(rnn, True), tmp_path / "m.onnx", "LSTM")


def test_gru_without_bias(tmp_path):
    for reset_after in (True, False):
        rnn = brt.GRU(I, H, bias=False, reset_after=reset_after, bidirectional=True)
        _check(Wrap(rnn), _inputs(rnn, True), tmp_path / "m.onnx", "GRU")


def test_plain_torch_onnx_export(tmp_path):
    torch.manual_seed(0)
    rnn = brt.LSTM(I, H, num_layers=2, bidirectional=True)
    _check(Wrap(rnn), _inputs(rnn, True), tmp_path / "m.onnx", "LSTM", plain=True)


def test_model_around_the_rnn(tmp_path):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, I)
            self.rnn = brt.GRU(I, H, batch_first=True, bidirectional=True)
            self.out = torch.nn.Linear(2 * H, 3)

        def forward(self, tokens):
            y, _ = self.rnn(self.emb(tokens))
            return self.out(y)

    torch.manual_seed(0)
    net = Net().eval()
    tokens = torch.randint(0, 10, (B, T))
    brt.onnx_export(net, (tokens,), str(tmp_path / "n.onnx"))
    sess = ort.InferenceSession(str(tmp_path / "n.onnx"), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: tokens.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(got, net(tokens).numpy(), rtol=0, atol=TOL)


def test_dynamic_time_and_batch(tmp_path):
    torch.manual_seed(0)
    rnn = brt.LSTM(I, H, bidirectional=True)
    model = Wrap(rnn).eval()
    x = torch.randn(T, B, I)
    dim_t, dim_b = torch.export.Dim("time"), torch.export.Dim("batch")
    brt.onnx_export(model, (x,), str(tmp_path / "d.onnx"),
                    dynamic_shapes=({0: dim_t, 1: dim_b},))
    sess = ort.InferenceSession(str(tmp_path / "d.onnx"), providers=["CPUExecutionProvider"])
    x2 = torch.randn(T + 3, B + 2, I)
    got = sess.run(None, {sess.get_inputs()[0].name: x2.numpy()})
    with torch.no_grad():
        want = _flat(model(x2))
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w.numpy(), rtol=0, atol=TOL)


def _refused(model, args, tmp_path, *words):
    with pytest.raises(Exception) as info:
        brt.onnx_export(model, args, str(tmp_path / "r.onnx"))
    chain, e = [], info.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    ours = [e for e in chain if isinstance(e, brt.OnnxExportError)]
    assert ours, f"no OnnxExportError in {chain!r}"
    for w in words:
        assert w in str(ours[0])


def test_cell_clip_refused(tmp_path):
    rnn = brt.LSTM(I, H, cell_clip=1.0)
    _refused(Wrap(rnn).eval(), _inputs(rnn, False), tmp_path, "blockrnn.torch.LSTM",
             "cell_clip")


def test_cell_clip_off_exports(tmp_path):
    rnn = brt.LSTM(I, H, cell_clip=0.0)  # 0: no clipping (as None)
    _check(Wrap(rnn), _inputs(rnn, False), tmp_path / "m.onnx", "LSTM")


@pytest.mark.filterwarnings("ignore:Exporting a model while it is in training mode")
def test_training_dropout_refused(tmp_path):
    rnn = brt.GRU(I, H, num_layers=2, dropout=0.5)
    _refused(Wrap(rnn).train(), _inputs(rnn, False), tmp_path, "blockrnn.torch.GRU",
             "dropout", "eval")


def test_float16_refused(tmp_path):
    rnn = brt.LSTM(I, H).half()
    _refused(Wrap(rnn).eval(), _inputs(rnn, False, torch.float16), tmp_path, "float16")


def test_onnx_export_refuses_torchscript_exporter(tmp_path):
    rnn = brt.GRU(I, H)
    with pytest.raises(ValueError, match="blockrnn.torch.onnx_export: dynamo"):
        brt.onnx_export(Wrap(rnn), _inputs(rnn, False), str(tmp_path / "x.onnx"), dynamo=False)
