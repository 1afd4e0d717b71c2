"""What the converters refuse, each with a message naming the layer and the setting, and the
from_keras methods of blockrnn.layers reading the Keras configuration."""
import json
import os
import zipfile

import numpy as np
import pytest

import blockrnn
import blockrnn.convert as bc
from blockrnn.convert import ConversionError
from blockrnn.layers import GRU, LSTM


@pytest.fixture(scope="module")
def keras(tf):
    import keras
    return keras


def _seq(keras, I, *layers, batch=None):
    inp = keras.Input((None, I)) if batch is None else keras.Input(batch_shape=(batch, None, I))
    return keras.Sequential([inp, *layers])


@pytest.mark.parametrize("make, fragments", [
    (lambda L: L.LSTM(3, activation="relu"), ["'bad' (LSTM)", "activation='relu'"]),
    (lambda L: L.GRU(3, recurrent_activation="hard_sigmoid"),
     ["'bad' (GRU)", "recurrent_activation='hard_sigmoid'"]),
    (lambda L: L.LSTM(3, recurrent_activation="tanh"), ["recurrent_activation='tanh'"]),
    (lambda L: L.Bidirectional(L.LSTM(3, return_sequences=True), merge_mode=None),
     ["'bad' (Bidirectional)", "merge_mode=None"]),
    (lambda L: L.Bidirectional(L.GRU(3, activation="sigmoid")),
     ["'bad/forward' (GRU)", "activation='sigmoid'"]),
    (lambda L: L.LSTM(3, dtype="mixed_float16"), ["dtype policy 'mixed_float16'"]),
])
def test_refused_layer_settings(keras, make, fragments):
    layer = make(keras.layers)
    layer.name = "bad"
    model = _seq(keras, 2, layer)
    with pytest.raises(ConversionError) as e:
        bc.from_keras(model)
    for f in fragments:
        assert f in str(e.value)


def test_refused_stateful(keras):
    model = _seq(keras, 2, keras.layers.LSTM(3, stateful=True, name="st"), batch=4)
    with pytest.raises(ConversionError, match=r"'st' \(LSTM\): stateful=True"):
        bc.from_keras(model)


def test_refused_stack_shapes(keras):
    L = keras.layers
    with pytest.raises(ConversionError, match=r"'a' \(LSTM\) has return_sequences=False but "
                                              r"feeds another recurrent layer"):
        bc.from_keras(_seq(keras, 2, L.LSTM(3, name="a"), L.RepeatVector(4), L.GRU(2)))
    with pytest.raises(ConversionError, match=r"'d' \(Dense\) sits between recurrent layers"):
        bc.from_keras(_seq(keras, 2, L.LSTM(3, return_sequences=True), L.Dense(3, name="d"),
                           L.GRU(2)))
    with pytest.raises(ConversionError, match=r"'e' \(Embedding\) has mask_zero=True"):
        bc.from_keras(keras.Sequential([keras.Input((None,), dtype="int32"),
                                        L.Embedding(10, 3, mask_zero=True, name="e"),
                                        L.LSTM(2)]))
    with pytest.raises(ConversionError, match=r"'s' \(SimpleRNN\) is a recurrent layer "
                                              r"blockrnn has no op for"):
        bc.from_keras(_seq(keras, 2, L.SimpleRNN(3, name="s", return_sequences=True),
                           L.LSTM(2)))
    with pytest.raises(ConversionError, match="no LSTM, GRU or Bidirectional layer"):
        bc.from_keras(_seq(keras, 2, L.Dense(3, name="s")))


def test_embedding_in_front_is_listed_not_dropped(keras):
    L = keras.layers
    model = keras.Sequential([keras.Input((None,), dtype="int32"), L.Embedding(10, 3, name="e"),
                              L.GRU(2, name="g"), L.Dense(1, name="d")])
    with pytest.warns(UserWarning, match=r"e \(Embedding\), d \(Dense\)"):
        m = bc.from_keras(model)
    assert m.not_converted == ["e (Embedding)", "d (Dense)"] and m.input_size == 3


def test_refused_functional_that_is_not_a_chain(keras):
    L = keras.layers
    inp = keras.Input((None, 3))
    a = L.LSTM(2, return_sequences=True)(inp)
    b = L.GRU(2, return_sequences=True)(inp)
    model = keras.Model(inp, L.Add()([a, b]))
    with pytest.raises(ConversionError, match="chain of layers"):
        bc.from_keras(model)
    _, h, c = L.LSTM(2, return_state=True, name="s")(inp)
    model = keras.Model(inp, L.Dense(1, name="d")(h))
    with pytest.raises(ConversionError, match=r"layer 'd' does not take the previous layer's "
                                              r"output alone"):
        bc.from_keras(model)
    seq = L.LSTM(2, return_sequences=True, name="t")(inp)
    model = keras.Model(inp, L.GRU(2, name="u")(seq, initial_state=[h]))
    with pytest.raises(ConversionError, match="blockrnn converts a chain of layers"):
        bc.from_keras(model)


def test_refused_in_files(keras, tmp_path):
    """The file path reads the same configuration: one refusal through .keras and .h5."""
    model = _seq(keras, 2, keras.layers.GRU(3, recurrent_activation="hard_sigmoid", name="g"))
    for ext in (".keras", ".h5"):
        path = str(tmp_path / ("m" + ext))
        model.save(path)
        with pytest.raises(ConversionError, match=r"'g' \(GRU\): recurrent_activation="
                                                  r"'hard_sigmoid'"):
            bc.from_keras_file(path)


def test_broken_keras_files(keras, tmp_path):
    bad = tmp_path / "bad.keras"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("config.json", "{}")
    with pytest.raises(ConversionError, match="model.weights.h5 is missing"):
        bc.from_keras_file(bad)
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("config.json", "{not json")
        z.writestr("model.weights.h5", b"")
    with pytest.raises(ConversionError, match="config.json is not valid JSON"):
        bc.from_keras_file(bad)
    other = tmp_path / "x.h5"
    other.write_bytes(b"not hdf5")
    with pytest.raises(ConversionError, match="neither a .keras archive nor an HDF5 file"):
        bc.from_keras_file(other)


# ---- torch ----

def test_torch_refusals():
    torch = pytest.importorskip("torch")
    with pytest.raises(ConversionError, match=r"proj_size=2"):
        bc.from_torch(torch.nn.LSTM(3, 4, proj_size=2))
    with pytest.raises(ConversionError, match=r"weight_hr_l"):
        bc.from_torch(torch.nn.LSTM(3, 4, proj_size=2).state_dict())
    with pytest.raises(ConversionError, match="not an LSTM or GRU module"):
        bc.from_torch(torch.nn.RNN(3, 4))
    with pytest.raises(ConversionError, match="no weight_ih_l0"):
        bc.from_torch({"weight": torch.zeros(3)})
    sd = torch.nn.GRU(3, 4).state_dict()
    sd["extra"] = torch.zeros(1)
    with pytest.raises(ConversionError, match=r"unexpected state_dict entries \['extra'\]"):
        bc.from_torch(sd)
    with pytest.raises(ConversionError, match="float16"):
        bc.from_torch(torch.nn.GRU(3, 4).half())


def test_torch_gru_state_dict_reset_before(tmp_path):
    torch = pytest.importorskip("torch")
    import blockrnn.torch as brt
    module = brt.GRU(3, 4, reset_after=False)
    sd_path = tmp_path / "g.pt"
    torch.save(module.state_dict(), sd_path)
    m = bc.convert(sd_path, reset_after=False)
    assert m.layers[0].kind == "BlockGRU"
    x = np.random.default_rng(0).uniform(-1, 1, (5, 2, 3)).astype(np.float32)
    with torch.no_grad():
        want, _ = module(torch.from_numpy(x))
    # float32, different summation order (torch module vs layer objects): see test_model_zoo
    np.testing.assert_allclose(m.forward(x)[0], want.numpy(), rtol=1e-5, atol=1e-6)


def test_to_torch_refusals():
    from blockrnn.model import LayerConfig, Model
    pytest.importorskip("torch")

    def model(*layers, **kw):
        I, ws = 2, []
        for c in layers:
            ws.append([{p: np.zeros(s, np.float32) for p, s in c.param_shapes(I).items()}
                       for _ in range(c.directions)])
            I = c.output_size
        return Model(np.float32, 2, list(layers), ws, **kw)

    cases = [
        (model(LayerConfig("BlockGRU", 3), LayerConfig("BlockLSTM", 3)),
         "layer 1: its kind/hidden_size/directions"),
        (model(LayerConfig("BlockGRU", 3, directions=2, merge="sum")), "merge 'sum'"),
        (model(LayerConfig("BlockGRU", 3, go_backwards=True)), "go_backwards"),
        (model(LayerConfig("BlockGRU", 3, padded_output="hold")), "padded_output 'hold'"),
        (model(LayerConfig("BlockGRU", 3), masking={"mask_value": 0.0}), "masking"),
        (model(LayerConfig("BlockGRU", 3), return_sequences=False), "return_sequences"),
        (model(LayerConfig("BlockLSTM", 3), LayerConfig("BlockLSTM", 3, forget_bias=1.0)),
         "layer 1: its LSTM attrs differ"),
    ]
    for m, fragment in cases:
        with pytest.raises(blockrnn.InvalidArgumentError, match="Model.to_torch: .*" + fragment):
            m.to_torch()


# ---- blockrnn.layers.LSTM / GRU.from_keras read the configuration ----

@pytest.mark.parametrize("cls, make, message", [
    (LSTM, lambda L: L.LSTM(3, activation="relu"), "activation='relu'"),
    (LSTM, lambda L: L.LSTM(3, recurrent_activation="hard_sigmoid"),
     "recurrent_activation='hard_sigmoid'"),
    (LSTM, lambda L: L.LSTM(3, go_backwards=True), "go_backwards=True"),
    (GRU, lambda L: L.GRU(3, reset_after=False, go_backwards=True), "go_backwards=True"),
    (GRU, lambda L: L.GRU(3), "reset_after=True GRU .* BlockGRUResetAfter"),
    (GRU, lambda L: L.GRU(3, reset_after=False, activation="relu"), "activation='relu'"),
])
def test_layers_from_keras_refuses(keras, cls, make, message):
    layer = make(keras.layers)
    layer.build((None, None, 2))
    with pytest.raises(ValueError, match=message):
        cls.from_keras(layer)


def test_layers_from_keras_use_bias_false(keras, tf):
    rng = np.random.default_rng(3)
    for cls, layer in ((LSTM, keras.layers.LSTM(3, use_bias=False, return_sequences=True)),
                       (GRU, keras.layers.GRU(3, use_bias=False, reset_after=False,
                                              return_sequences=True))):
        layer.build((None, None, 2))
        layer.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32)
                           for w in layer.get_weights()])
        x = rng.uniform(-1, 1, (2, 5, 2)).astype(np.float32)
        want = np.asarray(layer(x)).transpose(1, 0, 2)
        ours = cls.from_keras(layer)
        assert not np.any(ours.parameters()["b" if cls is LSTM else "b_c"])
        # float32, summation order: the tolerance of test_layers' Keras comparisons
        np.testing.assert_allclose(ours.forward(x.transpose(1, 0, 2))[0], want, rtol=1e-5,
                                   atol=1e-6)


def test_lstm_attrs_rebuild_the_layer():
    a = LSTM(3, 4, forget_bias=0.5, cell_clip=2.0, use_peephole=True, seed=1)
    b = LSTM(3, 4, **a.attrs(), seed=2)
    for k, v in a.parameters().items():
        setattr(b, k, v.copy())
    x = np.random.default_rng(0).uniform(-1, 1, (5, 2, 3)).astype(np.float32)
    assert np.array_equal(a.forward(x)[0], b.forward(x)[0])
    assert GRU(2, 3).attrs() == {}


def test_single_live_layer(keras, tf):
    rng = np.random.default_rng(11)
    layer = keras.layers.Bidirectional(keras.layers.GRU(3, return_sequences=True),
                                       merge_mode="mul")
    layer.build((None, None, 2))
    layer.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(np.float32)
                       for w in layer.get_weights()])
    x = rng.uniform(-1, 1, (2, 5, 2)).astype(np.float32)
    m = bc.from_keras(layer)
    assert m.layers[0].merge == "mul" and m.layers[0].kind == "BlockGRUResetAfter"
    # float32, summation order: see test_model_zoo
    np.testing.assert_allclose(m.forward(x.transpose(1, 0, 2))[0],
                               np.asarray(layer(x)).transpose(1, 0, 2), rtol=1e-5, atol=1e-6)


def test_tf_keras_2_functional_config(keras, tmp_path):
    """Legacy .h5 files written by tf.keras 2 list a Functional layer's inputs as
    [[[name, node, tensor, kwargs]]]; the same chain converts to the same model."""
    import h5py
    inp = keras.Input((None, 3))
    out = keras.layers.Dense(2)(keras.layers.LSTM(4, return_sequences=True, name="rec")(inp))
    path = str(tmp_path / "f.h5")
    keras.Model(inp, out).save(path)
    with pytest.warns(UserWarning):
        want = bc.from_keras_file(path)
    with h5py.File(path, "r+") as f:
        cfg = json.loads(f.attrs["model_config"])
        for layer in cfg["config"]["layers"]:
            nodes = layer.get("inbound_nodes") or []
            if nodes:
                src = nodes[0]["args"][0]["config"]["keras_history"][0]
                layer["inbound_nodes"] = [[[src, 0, 0, {}]]]
        f.attrs["model_config"] = json.dumps(cfg)
    with pytest.warns(UserWarning):
        got = bc.from_keras_file(path)
    assert got.config()["layers"] == want.config()["layers"]
    assert all(np.array_equal(got.tensors()[k], a) for k, a in want.tensors().items())


# ---- the remaining refusals, on hand-written layer lists (the form both the file readers and
# from_keras hand to the stack builder) ----

def _lstm_entry(name="r", I=2, H=3, use_bias=True, dtype=np.float32, **cfg):
    ws = [np.zeros((I, 4 * H), dtype), np.zeros((H, 4 * H), dtype)]
    if use_bias:
        ws.append(np.zeros(4 * H, dtype))
    return ("LSTM", {"name": name, "units": H, "use_bias": use_bias, **cfg}, ws)


@pytest.mark.parametrize("entries, message", [
    ([_lstm_entry(time_major=True)], r"'r' \(LSTM\): time_major=True"),
    ([_lstm_entry(units=0)], r"'r' \(LSTM\): units must be a positive integer"),
    ([("LSTM", dict(name="r", units=3, use_bias=False), _lstm_entry()[2])],
     r"'r' \(LSTM\): expected 2 weight arrays"),
    ([("LSTM", dict(name="r", units=4), _lstm_entry()[2])],
     r"'r' \(LSTM\): recurrent_kernel has 3 rows but units=4"),
    ([_lstm_entry(dtype=np.float16)], r"dtypes are \['float16'\]"),
    ([("Bidirectional", dict(name="b", layer={"class_name": "SimpleRNN", "config": {}}), [])],
     r"'b' \(Bidirectional\): wraps 'SimpleRNN'"),
    ([("Bidirectional", dict(name="b", layer={"class_name": "LSTM",
                                              "config": dict(units=3, name="f")},
                             backward_layer={"class_name": "LSTM",
                                             "config": dict(units=4, name="g")}), [])],
     r"'b' \(Bidirectional\): backward_layer differs"),
    ([("Masking", dict(name="m"), []), ("Dense", dict(name="d"), []), _lstm_entry()],
     r"'m' \(Masking\) is not directly in front"),
    ([("GRU", dict(name="g", units=3, reset_after=True),
       [np.zeros((2, 9), np.float32), np.zeros((3, 9), np.float32), np.zeros(9, np.float32)])],
     r"'g': GRU\(reset_after=True\): bias must have shape \[2, 9\], got \[9\] \(a \[3H\] bias "
     r"is Keras' reset_after=False GRU\)"),
])
def test_refused_layer_lists(entries, message):
    from blockrnn.convert.keras import _stack_from_layers
    with pytest.raises(ConversionError, match=message):
        _stack_from_layers(entries, {}, "m")


def test_refused_nested_model(keras):
    inner = keras.Sequential([keras.Input((None, 2)), keras.layers.LSTM(3)], name="inner")
    with pytest.raises(ConversionError, match=r"'inner' is a nested model"):
        bc.from_keras(keras.Sequential([keras.Input((None, 2)), inner]))


def test_more_torch_refusals():
    torch = pytest.importorskip("torch")
    with pytest.raises(ConversionError, match="expected a torch.nn.LSTM / GRU module"):
        bc.from_torch([1, 2])
    sd = torch.nn.LSTM(3, 4, num_layers=2).state_dict()
    del sd["weight_hh_l1"]
    with pytest.raises(ConversionError, match="weight_hh_l1 is missing"):
        bc.from_torch(sd)
    sd = torch.nn.GRU(3, 4).state_dict()
    del sd["bias_hh_l0"]
    with pytest.raises(ConversionError, match="bias_ih_l0 and bias_hh_l0 must both be present"):
        bc.from_torch(sd)
    sd = {"weight_ih_l0": torch.zeros(10, 3), "weight_hh_l0": torch.zeros(10, 3)}
    with pytest.raises(ConversionError, match="weight_hh_l0 must be"):
        bc.from_torch(sd)
    sd = {"weight_ih_l0": torch.zeros(10, 3), "weight_hh_l0": torch.zeros(10, 5)}
    with pytest.raises(ConversionError, match="neither an LSTM"):
        bc.from_torch(sd)
