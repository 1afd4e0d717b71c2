"""blockrnn model files (docs/model-format.md): the round trip, the Model's forward semantics
against the layer objects run by hand, and every way a file can be wrong — each a clear
InvalidArgumentError naming the file and the field, never a crash, an allocation the file
cannot back, or a silently different model. No TensorFlow here."""
import json
import struct

import numpy as np
import pytest

import blockrnn
from blockrnn import InvalidArgumentError
from blockrnn.model import LayerConfig, Model, load_model


def _weights(rng, layers, I, dtype):
    out = []
    for c in layers:
        per_dir = []
        for _ in range(c.directions):
            per_dir.append({p: rng.uniform(-0.5, 0.5, s).astype(dtype)
                            for p, s in c.param_shapes(I).items()})
        out.append(per_dir)
        I = c.output_size
    return out


def small_model(dtype=np.float32, seed=0):
    layers = [LayerConfig("BlockLSTM", 3, directions=2, merge="concat", forget_bias=1.0,
                          cell_clip=0.9, use_peephole=True, name="a"),
              LayerConfig("BlockGRU", 4, go_backwards=True, name="b"),
              LayerConfig("BlockGRUResetAfter", 2, directions=2, merge="sum"),
              LayerConfig("BlockLSTMV2", 5, padded_output="hold")]
    rng = np.random.default_rng(seed)
    return Model(dtype, 3, layers, _weights(rng, layers, 3, dtype),
                 source={"framework": "test"})


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "m.safetensors"
    small_model().save(path)
    return path


def split(path):
    raw = path.read_bytes()
    (n,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join(path, header, data, n=None):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if n is None else n) + text + data)
    return path


def with_config(src, dst, edit):
    header, data = split(src)
    cfg = json.loads(header["__metadata__"]["blockrnn"])
    edit(cfg)
    header["__metadata__"]["blockrnn"] = json.dumps(cfg)
    return join(dst, header, data)


def with_header(src, dst, edit):
    header, data = split(src)
    edit(header)
    return join(dst, header, data)


def refused(path, *fragments):
    with pytest.raises(InvalidArgumentError) as e:
        load_model(path)
    msg = str(e.value)
    assert str(path) in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


# ---- round trip and interoperability ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_trip_is_bit_exact(tmp_path, dtype):
    m = small_model(dtype)
    m.save(tmp_path / "m.safetensors")
    again = load_model(tmp_path / "m.safetensors")
    assert again.config() == m.config()
    for k, a in m.tensors().items():
        assert again.tensors()[k].dtype == a.dtype and np.array_equal(again.tensors()[k], a)
    x = np.random.default_rng(1).uniform(-1, 1, (6, 4, 3)).astype(dtype)
    lengths = np.array([6, 0, 3, 1])
    y1, s1 = m.forward(x, lengths)
    y2, s2 = again.forward(x, lengths)
    assert np.array_equal(y1, y2)


def test_weights_are_the_models_own_and_read_only():
    # The layer objects pack the weights at their first use, so a later write could not reach
    # them: the Model keeps its own read-only copies (it does not alias the arrays it was
    # given) in read-only containers, and a write is refused instead of silently ignored. A
    # copy (pickle, deepcopy) is read-only too and computes the same.
    import copy
    import pickle
    layers = [LayerConfig("BlockLSTM", 3, name="a")]
    given = _weights(np.random.default_rng(2), layers, 3, np.float32)
    m = Model(np.float32, 3, layers, given)
    x = np.random.default_rng(3).uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    y, _ = m.forward(x)
    given[0][0]["w"][...] = 0.0  # the caller's array: not the model's
    assert np.array_equal(m.forward(x)[0], y)
    for model in (m, pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        w = model.weights[0][0]["w"]
        assert not w.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            w[0, 0] = 1.0
        with pytest.raises(TypeError):
            model.weights[0][0]["w"] = np.zeros_like(w)
        with pytest.raises(TypeError):
            model.weights[0] = ({},)
        assert np.array_equal(model.forward(x)[0], y)


def test_safetensors_package_reads_our_files(model_file):
    safetensors = pytest.importorskip("safetensors.numpy")
    tensors = safetensors.load_file(str(model_file))
    ours = load_model(model_file).tensors()
    assert sorted(tensors) == sorted(ours)
    assert all(np.array_equal(tensors[k], ours[k]) for k in ours)


def test_file_written_by_safetensors_package_loads(tmp_path):
    safetensors = pytest.importorskip("safetensors.numpy")
    m = small_model()
    safetensors.save_file(m.tensors(), str(tmp_path / "s.safetensors"),
                          metadata={"blockrnn": json.dumps(m.config()), "note": "other keys ok"})
    again = load_model(tmp_path / "s.safetensors")
    assert all(np.array_equal(again.tensors()[k], a) for k, a in m.tensors().items())


# ---- forward semantics ----

def _direction(c, w, I, x, lengths, reverse):
    """One direction by hand on the raw ops (seq_len_max passed explicitly)."""
    T, B = x.shape[0], x.shape[1]
    if reverse:
        rev = np.array([[(L - 1 - t) if t < L else t for L in lengths] for t in range(T)])
        x = x[rev, np.arange(B)]
    z = np.zeros((B, c.hidden_size), x.dtype)
    kw = dict(seq_len_max=np.int64(T), x=x, seq_lengths=np.asarray(lengths, np.int64))
    if c.is_lstm:
        op = blockrnn.raw_ops.BlockLSTM if c.kind == "BlockLSTM" else blockrnn.raw_ops.BlockLSTMV2
        extra = dict(forget_bias=c.forget_bias) if c.kind == "BlockLSTM" else {}
        peep = {k: w.get(k, np.zeros(c.hidden_size, x.dtype)) for k in ("wci", "wcf", "wco")}
        h = op(cs_prev=z, h_prev=z, w=w["w"], b=w["b"], **peep, **extra,
               cell_clip=c.cell_clip or 0.0, use_peephole=c.use_peephole, **kw).h
    elif c.kind == "BlockGRU":
        h = blockrnn.raw_ops.BlockGRU(h_prev=z, **w, **kw).h
    else:
        h = blockrnn.raw_ops.BlockGRUResetAfter(h_prev=z, **w, **kw).h
    return h[rev, np.arange(B)] if reverse else h


def test_forward_matches_the_ops_by_hand():
    m = small_model(np.float64)
    T, B = 6, 4
    x = np.random.default_rng(2).uniform(-1, 1, (T, B, 3))
    lengths = [6, 0, 3, 1]
    y, states = m.forward(x, lengths)
    inp, I = x, 3
    for l, c in enumerate(m.layers):
        outs = []
        for d in range(c.directions):
            h = _direction(c, m.weights[l][d], I, inp, lengths, d == 1 or c.go_backwards)
            if c.go_backwards:
                h = h[::-1]
            if c.padded_output == "hold":
                for b, L in enumerate(lengths):
                    h[L:, b] = h[L - 1, b] if L else 0
            outs.append(h)
        inp = outs[0] if c.directions == 1 else (
            np.concatenate(outs, -1) if c.merge == "concat" else outs[0] + outs[1])
        I = c.output_size
    np.testing.assert_array_equal(y, inp)
    assert len(states) == 4 and len(states[0]) == 2 and len(states[0][0]) == 2


def test_lengths_equal_to_T_and_none_agree():
    m = small_model()
    x = np.random.default_rng(3).uniform(-1, 1, (5, 2, 3)).astype(np.float32)
    assert np.array_equal(m.forward(x)[0], m.forward(x, [5, 5])[0])


def test_initial_state_is_used_and_checked():
    m = small_model()
    x = np.random.default_rng(4).uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    _, states = m.forward(x)
    y0, _ = m.forward(x)
    y1, _ = m.forward(x, initial_state=states)
    assert not np.array_equal(y0, y1)
    zero = [[None] * c.directions for c in m.layers]
    assert np.array_equal(m.forward(x, initial_state=zero)[0], y0)
    bad = [list(s) for s in states]
    bad[1] = [np.zeros((2, 5), np.float32)]
    with pytest.raises(InvalidArgumentError,
                       match=r"initial_state\[1\]\[0\] must have shape \[2, 4\]"):
        m.forward(x, initial_state=bad)
    with pytest.raises(InvalidArgumentError, match="one entry per layer"):
        m.forward(x, initial_state=states[:2])


def test_forward_arguments_are_checked():
    m = small_model()
    with pytest.raises(InvalidArgumentError, match=r"x must have shape \[T, B, 3\]"):
        m.forward(np.zeros((4, 2, 5), np.float32))
    x = np.zeros((4, 2, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match=r"seq_lengths must be in \[0, 4\]"):
        m.forward(x, [5, 1])
    with pytest.raises(InvalidArgumentError, match=r"seq_lengths must be \[2\] integers"):
        m.forward(x, [1.5, 2.0])


def test_return_sequences_false_gives_each_directions_last_reading_step():
    layers = [LayerConfig("BlockGRU", 3, directions=2, merge="concat")]
    w = _weights(np.random.default_rng(5), layers, 2, np.float32)
    full = Model(np.float32, 2, layers, w)
    last = Model(np.float32, 2, layers, w, return_sequences=False)
    x = np.random.default_rng(6).uniform(-1, 1, (5, 2, 2)).astype(np.float32)
    y, _ = full.forward(x, [5, 3])
    y_last, states = last.forward(x, [5, 3])
    assert y_last.shape == (2, 6)
    np.testing.assert_array_equal(y_last[:, 3:], y[0, :, 3:])  # reverse: its step 0
    np.testing.assert_array_equal(y_last[:, :3], y[-1, :, :3])  # forward, padded_output zero
    np.testing.assert_array_equal(y_last[1, :3], 0)


def test_masking_gives_lengths_and_refuses_a_mask_that_is_not_a_suffix():
    layers = [LayerConfig("BlockLSTM", 3)]
    w = _weights(np.random.default_rng(7), layers, 2, np.float32)
    m = Model(np.float32, 2, layers, w, masking={"mask_value": 0.0})
    x = np.random.default_rng(8).uniform(-1, 1, (5, 3, 2)).astype(np.float32)
    x[3:, 1] = 0
    x[:, 2] = 0
    assert list(m.lengths_from_mask(x)) == [5, 3, 0]
    assert np.array_equal(m.forward(x)[0], m.forward(x, [5, 3, 0])[0])
    x[1, 0] = 0  # example 0: step 1 masked, step 2 not
    with pytest.raises(InvalidArgumentError, match=r"example 0 is not a suffix: step 1 is masked"):
        m.forward(x)


# ---- the configuration, checked in memory as from a file ----

@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="BlockLSTM", hidden_size=3, directions=1, merge="sum"),
     "layers[0].merge: must be null for a layer of 1 direction, got 'sum'"),
    (dict(kind="BlockGRU", hidden_size=3, directions=2),
     "layers[0].merge: must be one of concat, sum, mul, ave for a layer of 2 directions"),
    (dict(kind="BlockGRU", hidden_size=3, directions=2, merge="concat", go_backwards=True),
     "layers[0].go_backwards: must be false for a layer of 2 directions"),
    (dict(kind="BlockLSTMV2", hidden_size=3, forget_bias=1.0),
     "layers[0].forget_bias: must be 0 for BlockLSTMV2"),
    (dict(kind="BlockLSTM", hidden_size=3, cell_clip=-1.0),
     "layers[0].cell_clip: must be null (no clipping) or a finite number > 0"),
    (dict(kind="BlockLSTM", hidden_size=0), "layers[0].hidden_size: must be an integer >= 1"),
    (dict(kind="LSTM", hidden_size=3), "layers[0].kind: must be one of BlockLSTM"),
    (dict(kind="BlockGRU", hidden_size=3, padded_output="last"),
     "layers[0].padded_output: must be one of zero, hold"),
])
def test_inconsistent_configurations_are_refused(kwargs, message):
    c = LayerConfig(**kwargs)
    with pytest.raises(InvalidArgumentError) as e:
        Model(np.float32, 2, [c], [[]])
    assert message in str(e.value)


def test_weights_are_checked_in_memory():
    layers = [LayerConfig("BlockGRU", 3)]
    w = _weights(np.random.default_rng(9), layers, 2, np.float32)
    w[0][0]["w_c"] = w[0][0]["w_c"][:, :2]
    with pytest.raises(InvalidArgumentError, match=r"'layers.0.0.w_c'.shape: must be \[5, 3\]"):
        Model(np.float32, 2, layers, w)
    w = _weights(np.random.default_rng(9), layers, 2, np.float32)
    w[0][0]["b_c"][1] = np.nan
    with pytest.raises(InvalidArgumentError, match="'layers.0.0.b_c': holds NaN or infinite"):
        Model(np.float32, 2, layers, w)


# ---- hostile and broken files ----

def test_truncated_at_many_offsets(model_file, tmp_path):
    # every offset of the first 64 bytes and the header's last, then strides through the
    # header and the data (writing each file costs a few ms)
    raw = model_file.read_bytes()
    (n,) = struct.unpack_from("<Q", raw)
    bad = tmp_path / "t.safetensors"
    cuts = set(range(64)) | set(range(64, 8 + n, 7)) | set(range(n, 8 + n + 2)) | \
        set(range(8 + n, len(raw), 37)) | {len(raw) - 1}
    for cut in sorted(cuts):
        bad.write_bytes(raw[:cut])
        msg = refused(bad)
        assert "header" in msg or "data" in msg, (cut, msg)


def test_trailing_bytes(model_file, tmp_path):
    bad = tmp_path / "t.safetensors"
    bad.write_bytes(model_file.read_bytes() + b"\0" * 8)
    refused(bad, "data: the tensors cover")


def test_huge_header_length(model_file, tmp_path):
    header, data = split(model_file)
    for n in (2**63, 2**64 - 1, 10**12):
        refused(join(tmp_path / "h.safetensors", header, data, n=n), "header: declares a header")


def test_bad_header_json(model_file, tmp_path):
    bad = tmp_path / "j.safetensors"
    for text in (b"{", b"[1, 2]", b'{"a": NaN}', b"\xff\xfe", b'{"a": 1, "a": 2}'):
        bad.write_bytes(struct.pack("<Q", len(text)) + text)
        refused(bad, "header")


def test_bad_config_json(model_file, tmp_path):
    def edit(h):
        h["__metadata__"]["blockrnn"] = '{"format": "blockrnn-model",'
    refused(with_header(model_file, tmp_path / "c.safetensors", edit),
            "__metadata__.blockrnn: is not valid JSON")


def test_not_a_model_file(model_file, tmp_path):
    refused(with_header(model_file, tmp_path / "n.safetensors",
                        lambda h: h.pop("__metadata__")), "__metadata__: is missing")
    refused(with_header(model_file, tmp_path / "n.safetensors",
                        lambda h: h["__metadata__"].pop("blockrnn")),
            "__metadata__.blockrnn: is missing")


@pytest.mark.parametrize("edit, fragments", [
    (lambda c: c.update(version=2), ["version: must be 1", "got 2"]),
    (lambda c: c.update(version="1"), ["version: must be 1"]),
    (lambda c: c.update(format="other"), ["format: must be 'blockrnn-model'"]),
    (lambda c: c.update(dtype="float16"), ["dtype: must be 'float32' or 'float64'"]),
    (lambda c: c.pop("layers"), ["layers: is missing"]),
    (lambda c: c.update(layers=[]), ["layers: must be a list of 1 to"]),
    (lambda c: c.update(extra=1), ["extra: is not a field of format version 1"]),
    (lambda c: c["layers"][1].update(kind="BlockRNN"), ["layers[1].kind"]),
    (lambda c: c["layers"][1].update(merge="concat"), ["layers[1].merge: must be null"]),
    (lambda c: c["layers"][0].update(hidden_size=4),
     ["tensor 'layers.0.0.w'.shape: must be [7, 16]", "got [6, 12]"]),
    (lambda c: c.update(input_size=4), ["tensor 'layers.0.0.w'.shape"]),
    (lambda c: c["layers"][0].update(use_peephole=False),
     ["tensor 'layers.0.0.wcf': is not a parameter of the configured layers"]),
    (lambda c: c["layers"][1].update(forget_bias=1.0),
     ["layers[1].forget_bias: is not a field of a BlockGRU layer"]),
    (lambda c: c["layers"][0].pop("cell_clip"), ["layers[0].cell_clip: is missing"]),
    (lambda c: c["layers"][0].update(hidden_size=2**40), ["tensor 'layers.0.0.w'.shape"]),
    (lambda c: c.update(masking={"mask_value": "0"}), ["masking.mask_value"]),
    (lambda c: c.update(dtype="float64"), ["tensor 'layers.0.0.w'.dtype: must be F64"]),
])
def test_bad_configuration_in_file(model_file, tmp_path, edit, fragments):
    refused(with_config(model_file, tmp_path / "c.safetensors", edit), *fragments)


def test_missing_and_extra_tensor(model_file, tmp_path):
    def drop(h):
        h["layers.2.1.b_h"]["dtype"] = "F32"
        del h["layers.3.0.b"]
    # dropping an entry leaves its bytes unindexed: refused as a gap or as the missing tensor
    refused(with_header(model_file, tmp_path / "m.safetensors", drop))
    header, data = split(model_file)
    begin, end = header["layers.3.0.b"]["data_offsets"]
    del header["layers.3.0.b"]
    for k, v in header.items():
        if k != "__metadata__" and v["data_offsets"][0] >= end:
            v["data_offsets"] = [o - (end - begin) for o in v["data_offsets"]]
    refused(join(tmp_path / "m.safetensors", header, data[:begin] + data[end:]),
            "tensor 'layers.3.0.b': is missing")
    header, data = split(model_file)
    header["extra"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
    refused(join(tmp_path / "m.safetensors", header, data + b"\0" * 4),
            "tensor 'extra': is not a parameter")


def test_wrong_dtype_and_shapes(model_file, tmp_path):
    def to(st):
        def edit(h):
            h["layers.0.0.b"]["dtype"] = st
        return edit
    refused(with_header(model_file, tmp_path / "d.safetensors", to("I32")),
            "tensor 'layers.0.0.b'.dtype: must be F32 or F64, got 'I32'")
    refused(with_header(model_file, tmp_path / "d.safetensors", to("F16")),
            "tensor 'layers.0.0.b'.dtype")
    refused(with_header(model_file, tmp_path / "d.safetensors", to("X9")), "not a safetensors")

    def huge(h):
        h["layers.0.0.w"]["shape"] = [2**31, 2**31]
    refused(with_header(model_file, tmp_path / "d.safetensors", huge),
            "tensor 'layers.0.0.w'.data_offsets", "needs")

    def negative(h):
        h["layers.0.0.w"]["shape"] = [-6, -12]
    refused(with_header(model_file, tmp_path / "d.safetensors", negative),
            "tensor 'layers.0.0.w'.shape")

    def reshaped(h):
        h["layers.0.0.w"]["shape"] = [12, 6]
    refused(with_header(model_file, tmp_path / "d.safetensors", reshaped),
            "tensor 'layers.0.0.w'.shape: must be [6, 12]")


def test_offsets_out_of_range_or_overlapping(model_file, tmp_path):
    def beyond(h):
        h["layers.0.0.b"]["data_offsets"] = [2**40, 2**40 + 48]
    refused(with_header(model_file, tmp_path / "o.safetensors", beyond), "outside the")

    def overlap(h):
        h["layers.0.0.b"]["data_offsets"] = list(h["layers.0.0.w"]["data_offsets"][:1]) + \
            [h["layers.0.0.w"]["data_offsets"][0] + 48]
    refused(with_header(model_file, tmp_path / "o.safetensors", overlap), "data_offsets")


def test_nan_weights_in_file(model_file, tmp_path):
    header, data = split(model_file)
    begin, _ = header["layers.1.0.b_c"]["data_offsets"]
    data = bytearray(data)
    data[begin:begin + 4] = struct.pack("<f", float("inf"))
    refused(join(tmp_path / "nan.safetensors", header, bytes(data)),
            "tensor 'layers.1.0.b_c': holds NaN or infinite values")


def test_missing_file(tmp_path):
    refused(tmp_path / "nope.safetensors", "cannot open")


def test_load_tensor_file(tmp_path):
    """blockrnn.load_tensor_file: the plain safetensors reader (the model reader's checks)
    returns tensors of F32, F64 and I64 bit for bit with the string metadata; a file the
    `safetensors` package writes reads back the same; a non-string metadata value, another
    dtype or a truncated file is refused naming the file and the field."""
    from safetensors.numpy import save_file
    want = {"x": np.array([[1.5, -0.0], [np.finfo(np.float32).tiny, 3]], np.float32),
            "d": np.array([1 / 3], np.float64), "n": np.array([7, -2**40], np.int64),
            "e": np.zeros((0, 5), np.float32)}
    path = tmp_path / "t.safetensors"
    save_file(want, str(path), metadata={"format": "demo", "text": "café"})
    tensors, meta = blockrnn.load_tensor_file(path)
    assert meta == {"format": "demo", "text": "café"}
    assert sorted(tensors) == sorted(want)
    for name, a in want.items():
        assert tensors[name].dtype == a.dtype and tensors[name].shape == a.shape
        assert tensors[name].tobytes() == a.tobytes()

    def write(header, data=b""):
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        path.write_bytes(struct.pack("<Q", len(text)) + text + data)

    write({"__metadata__": {"step": 7}})
    with pytest.raises(InvalidArgumentError, match=r"t\.safetensors: __metadata__\.step: must "
                                                   r"be a string"):
        blockrnn.load_tensor_file(path)
    write({"a": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(InvalidArgumentError, match=r"tensor 'a'\.dtype: must be F32, F64 or "
                                                   r"I64, got 'I32'"):
        blockrnn.load_tensor_file(path)
    write({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4)
    with pytest.raises(InvalidArgumentError, match=r"tensor 'a'\.data_offsets: \[0, 8\] is "
                                                   r"outside the 4 data bytes"):
        blockrnn.load_tensor_file(path)
