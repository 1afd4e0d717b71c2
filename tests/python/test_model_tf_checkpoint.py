"""TensorFlow checkpoints of TensorFlow's own LSTM / GRU cells (the variable names of
LSTMCell / LSTMBlockCell and GRUCell / GRUBlockCell) -> blockrnn models, compared with
TensorFlow's block ops run on the checkpoint's variables. The pinned TensorFlow (with Keras 3)
no longer builds tf.compat.v1 cells, so the checkpoints are written with their variable names
by a tf.compat.v1 Saver."""
import numpy as np
import pytest

import blockrnn.convert as bc
from blockrnn.convert import ConversionError

T, B, I, H1, H2 = 6, 3, 4, 5, 3


def _save(tf, path, variables):
    g = tf.Graph()
    with g.as_default():
        vs = [tf.compat.v1.Variable(a, name=n) for n, a in variables.items()]
        saver = tf.compat.v1.train.Saver(vs)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return saver.save(sess, str(path))


def _variables(rng, dtype):
    u = lambda *s: rng.uniform(-0.6, 0.6, s).astype(dtype)
    v = {}
    for d in ("fw", "bw"):
        s = f"bidirectional_rnn/{d}/lstm_cell"
        v.update({f"{s}/kernel": u(I + H1, 4 * H1), f"{s}/bias": u(4 * H1),
                  f"{s}/w_i_diag": u(H1), f"{s}/w_f_diag": u(H1), f"{s}/w_o_diag": u(H1),
                  f"{s}/kernel/Adam": u(I + H1, 4 * H1)})  # an optimizer slot: ignored
    s = "rnn/gru_cell"
    v.update({f"{s}/gates/kernel": u(2 * H1 + H2, 2 * H2), f"{s}/gates/bias": u(2 * H2),
              f"{s}/candidate/kernel": u(2 * H1 + H2, H2), f"{s}/candidate/bias": u(H2)})
    return v


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _lstm_cell(x, c, h, w, b, wci, wcf, wco, forget_bias, cell_clip):
    """tf.compat.v1 LSTMCell's step with peepholes and cell_clip, written out (gates i, j, f,
    o = BlockLSTM's i, c, f, o)."""
    H = h.shape[1]
    g = np.concatenate([x, h], 1) @ w + b
    i, j, f, o = (g[:, k * H:(k + 1) * H] for k in range(4))
    c = _sigmoid(f + forget_bias + wcf * c) * c + _sigmoid(i + wci * c) * np.tanh(j)
    c = np.clip(c, -cell_clip, cell_clip)
    return c, _sigmoid(o + wco * c) * np.tanh(c)


def _gru_cell(x, h, w_ru, w_c, b_ru, b_c):
    """tf.compat.v1 GRUCell's step written out (gates r, u; reset before the product)."""
    H = h.shape[1]
    ru = _sigmoid(np.concatenate([x, h], 1) @ w_ru + b_ru)
    r, u = ru[:, :H], ru[:, H:]
    c = np.tanh(np.concatenate([x, r * h], 1) @ w_c + b_c)
    return u * h + (1 - u) * c


def _reference(tf, v, x, forget_bias, cell_clip):
    """TensorFlow's BlockLSTM (both directions, concat) then GRUBlockCell step by step in
    float32; in float64, which those TensorFlow kernels do not take, the cells' equations."""
    f32 = x.dtype == np.float32
    outs = []
    for d in ("fw", "bw"):
        s = f"bidirectional_rnn/{d}/lstm_cell"
        xin = x if d == "fw" else x[::-1]
        z = np.zeros((B, H1), x.dtype)
        p = dict(w=v[f"{s}/kernel"], b=v[f"{s}/bias"], wci=v[f"{s}/w_i_diag"],
                 wcf=v[f"{s}/w_f_diag"], wco=v[f"{s}/w_o_diag"])
        if f32:
            h = tf.raw_ops.BlockLSTM(seq_len_max=np.int64(T), x=xin, cs_prev=z, h_prev=z, **p,
                                     forget_bias=forget_bias, cell_clip=cell_clip,
                                     use_peephole=True).h.numpy()
        else:
            c, hh, steps = z, z, []
            for t in range(T):
                c, hh = _lstm_cell(xin[t], c, hh, **p, forget_bias=forget_bias,
                                   cell_clip=cell_clip)
                steps.append(hh)
            h = np.stack(steps)
        outs.append(h if d == "fw" else h[::-1])
    seq = np.concatenate(outs, -1)
    s = "rnn/gru_cell"
    p = dict(w_ru=v[f"{s}/gates/kernel"], w_c=v[f"{s}/candidate/kernel"],
             b_ru=v[f"{s}/gates/bias"], b_c=v[f"{s}/candidate/bias"])
    h = np.zeros((B, H2), x.dtype)
    ys = []
    for t in range(T):
        h = tf.raw_ops.GRUBlockCell(x=seq[t], h_prev=h, **p).h.numpy() if f32 else \
            _gru_cell(seq[t], h, **p)
        ys.append(h)
    return np.stack(ys)


SCOPES = [("bidirectional_rnn/fw/lstm_cell", "bidirectional_rnn/bw/lstm_cell"), "rnn/gru_cell"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_checkpoint_matches_tensorflow(tf, tmp_path, dtype):
    rng = np.random.default_rng(7)
    v = _variables(rng, dtype)
    prefix = _save(tf, tmp_path / "ckpt", v)
    model = bc.from_tf_checkpoint(prefix, SCOPES, forget_bias=1.0, cell_clip=0.8)
    assert model.layers[0].use_peephole and model.layers[0].forget_bias == 1.0
    model.save(tmp_path / "m.safetensors")
    x = rng.uniform(-1, 1, (T, B, I)).astype(dtype)
    want = _reference(tf, v, x, 1.0, 0.8)
    y, _ = model.forward(x)
    # float32: summation order only (TF's op vs the layer objects), depth I + H <= 13
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(y, want, **tol)


def test_checkpoint_refusals(tf, tmp_path):
    rng = np.random.default_rng(8)
    v = _variables(rng, np.float32)
    prefix = _save(tf, tmp_path / "ckpt", v)
    with pytest.raises(ConversionError, match=r"forget_bias: a TensorFlow checkpoint does not "
                                              r"record it"):
        bc.from_tf_checkpoint(prefix, SCOPES)
    with pytest.raises(ConversionError, match=r"holds 3 cells .* pass scopes"):
        bc.from_tf_checkpoint(prefix, forget_bias=1.0)
    with pytest.raises(ConversionError, match=r"'nope' is not a cell scope"):
        bc.from_tf_checkpoint(prefix, ["nope"], forget_bias=1.0)
    del v["bidirectional_rnn/fw/lstm_cell/w_o_diag"]
    v["bidirectional_rnn/fw/lstm_cell/projection/kernel"] = np.zeros((H1, 2), np.float32)
    prefix = _save(tf, tmp_path / "ckpt2", v)
    with pytest.raises(ConversionError, match="projection/kernel .* num_proj"):
        bc.from_tf_checkpoint(prefix, SCOPES, forget_bias=1.0)
    with pytest.raises(ConversionError, match="cannot read as a TensorFlow checkpoint"):
        bc.from_tf_checkpoint(tmp_path / "missing", forget_bias=1.0)


def test_more_checkpoint_refusals(tf, tmp_path):
    rng = np.random.default_rng(9)
    v = _variables(rng, np.float32)
    del v["bidirectional_rnn/fw/lstm_cell/w_o_diag"]
    v["rnn/gru_cell/extra"] = np.zeros(2, np.float32)
    v["bidirectional_rnn/bw2/lstm_cell/kernel"] = np.zeros((I + 2, 8), np.float32)
    v["bidirectional_rnn/bw2/lstm_cell/bias"] = np.zeros(8, np.float32)
    prefix = _save(tf, tmp_path / "ckpt", v)
    with pytest.raises(ConversionError, match=r"peepholes \['w_i_diag', 'w_f_diag'\] but not "
                                              r"all"):
        bc.from_tf_checkpoint(prefix, SCOPES, forget_bias=1.0)
    with pytest.raises(ConversionError, match=r"holds variables \['extra'\] that a GRU cell"):
        bc.from_tf_checkpoint(prefix, ["rnn/gru_cell"])
    with pytest.raises(ConversionError, match=r"the forward and backward cells differ"):
        bc.from_tf_checkpoint(prefix, [("bidirectional_rnn/bw/lstm_cell",
                                        "bidirectional_rnn/bw2/lstm_cell")], forget_bias=1.0)
    with pytest.raises(ConversionError, match=r"scopes\[0\] must be a scope or a \(forward, "):
        bc.from_tf_checkpoint(prefix, [("a", "b", "c")], forget_bias=1.0)


def test_checkpoint_cli(tf, tmp_path, capsys):
    """The command line's TensorFlow options (run in-process: a subprocess would import
    TensorFlow again for seconds)."""
    import blockrnn
    from blockrnn.convert.__main__ import main
    v = _variables(np.random.default_rng(10), np.float32)
    prefix = _save(tf, tmp_path / "ckpt", v)
    out = tmp_path / "m.safetensors"
    argv = [prefix, str(out), "--scope", ",".join(SCOPES[0]), "--scope", SCOPES[1],
            "--cell-clip", "0.8"]
    assert main(argv) == 1
    assert "forget_bias: a TensorFlow checkpoint" in capsys.readouterr().err
    assert main(argv + ["--forget-bias", "1"]) == 0
    assert "BlockLSTM H=5, bidirectional (concat), forget_bias=1, cell_clip=0.8" in \
        capsys.readouterr().out
    want = bc.from_tf_checkpoint(prefix, SCOPES, forget_bias=1.0, cell_clip=0.8)
    got = blockrnn.load_model(out)
    assert got.config()["layers"] == want.config()["layers"]
    assert all(np.array_equal(got.tensors()[k], a) for k, a in want.tensors().items())
