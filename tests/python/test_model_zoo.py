"""The model zoo: Keras and PyTorch models made here, converted to blockrnn model files, then
run from the files in a subprocess that never imports TensorFlow or Keras, and compared with
the framework's own output (Keras `predict`, the torch module's forward).

The zoo is built once per module (one TensorFlow session, one subprocess for every model);
sizes are small and odd so that no size coincides with a SIMD width.
"""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import blockrnn
import blockrnn.convert as bc

torch = pytest.importorskip("torch")

# float32: the frameworks and blockrnn sum the same products in different orders (GEMM
# blocking, bias added before or after the recurrent product); over these depths (I + H <= 20)
# and T <= 9 steps of tanh-bounded values that stays far below the 1e-5 relative bound.
# atol covers outputs near zero, where a relative bound means nothing.
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _keras_cases(K):
    """name -> (input size, layers, file extension, dtype, masked, name of the last layer the
    file holds or None for the model's output)."""
    L = K.layers
    f64 = "float64"
    return {
        "lstm_seq": (3, [L.LSTM(5, return_sequences=True)], ".keras", "float32", False, None),
        "lstm_last_nobias": (4, [L.LSTM(7, use_bias=False)], ".h5", "float32", False, None),
        "gru_reset_after": (3, [L.GRU(6, return_sequences=True)], ".keras", "float32", False,
                            None),
        "gru_reset_before": (5, [L.GRU(5, reset_after=False, return_sequences=True)], ".h5",
                             "float32", False, None),
        "gru_nobias_last": (2, [L.GRU(3, use_bias=False)], ".keras", "float32", False, None),
        "bidi_concat_lstm": (3, [L.Bidirectional(L.LSTM(4, return_sequences=True))], ".keras",
                             "float32", False, None),
        "bidi_sum_gru": (3, [L.Bidirectional(L.GRU(3, return_sequences=True), merge_mode="sum")],
                         ".h5", "float32", False, None),
        "bidi_mul_gru_rb": (4, [L.Bidirectional(L.GRU(5, reset_after=False,
                                                      return_sequences=True), merge_mode="mul")],
                            ".keras", "float32", False, None),
        "bidi_ave_lstm_last": (3, [L.Bidirectional(L.LSTM(3), merge_mode="ave")], ".keras",
                               "float32", False, None),
        "stack_mixed": (3, [L.LSTM(4, return_sequences=True, name="s0"), L.Dropout(0.3),
                            L.Bidirectional(L.GRU(3, return_sequences=True), name="s1"),
                            L.GRU(5, reset_after=False, return_sequences=True, name="s2"),
                            L.Dense(2, name="head")], ".keras", "float32", False, "s2"),
        "go_backwards": (3, [L.LSTM(4, go_backwards=True, return_sequences=True),
                             L.GRU(3, go_backwards=True, return_sequences=True)], ".h5",
                         "float32", False, None),
        "masked_stack": (3, [L.Masking(0.0), L.LSTM(4, return_sequences=True),
                             L.Bidirectional(L.GRU(3, return_sequences=True), merge_mode="ave")],
                         ".keras", "float32", True, None),
        "masked_last": (4, [L.Masking(0.0), L.GRU(5)], ".h5", "float32", True, None),
        "masked_go_backwards": (3, [L.Masking(0.0), L.LSTM(3, go_backwards=True,
                                                           return_sequences=True),
                                    L.LSTM(4, return_sequences=True)], ".keras", "float32", True,
                                None),
        "masked_bidi_last": (3, [L.Masking(0.0), L.Bidirectional(L.LSTM(3), merge_mode="concat")],
                             ".h5", "float32", True, None),
        "float64_stack": (3, [L.Bidirectional(L.LSTM(3, return_sequences=True, dtype=f64),
                                              dtype=f64),
                              L.GRU(4, return_sequences=True, dtype=f64)], ".keras", f64, False,
                          None),
    }


T, B = 7, 3


def _suffix_masked(rng, x):
    """x [B, T, I] with example b zero from step lengths[b] on (a per-example suffix)."""
    lengths = np.array([T, 4, 1][:x.shape[0]])
    for b, n in enumerate(lengths):
        x[b, n:] = 0
    return x


def _build_keras(K, rng, tmp, name, case):
    I, layers, ext, dtype, masked, upto = case
    inp = K.Input((None, I), dtype=dtype)
    model = K.Sequential([inp] + layers)
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(w.dtype)
                       for w in model.get_weights()])
    x = rng.uniform(-1, 1, (B, T, I)).astype(dtype)
    if masked:
        x = _suffix_masked(rng, x)
    ref = model if upto is None else K.Model(model.inputs, model.get_layer(upto).output)
    if dtype == "float64":
        # predict casts its numpy input to floatx (float32) first; called directly, the
        # model computes in float64 throughout.
        want = np.asarray(ref(x, training=False))
    else:
        want = ref.predict(x, verbose=0)
    path = os.path.join(tmp, name + ext)
    model.save(path)
    return model, path, x, want


def _build_functional(K, rng, tmp):
    inp = K.Input((None, 4))
    h = K.layers.GRU(5, return_sequences=True, name="rec")(inp)
    out = K.layers.Dense(2, name="head")(h)
    model = K.Model(inp, out)
    model.set_weights([rng.uniform(-0.6, 0.6, w.shape).astype(w.dtype)
                       for w in model.get_weights()])
    x = rng.uniform(-1, 1, (B, T, 4)).astype(np.float32)
    want = K.Model(inp, h).predict(x, verbose=0)
    path = os.path.join(tmp, "functional.keras")
    model.save(path)
    return model, path, x, want


def _torch_cases():
    """name -> (module, dtype, lengths or None, saved as state_dict .pt (True) or converted
    live (False))."""
    import blockrnn.torch as brt
    torch.manual_seed(0)
    nn = torch.nn
    return {
        "torch_lstm_2x_bidi": (nn.LSTM(3, 5, num_layers=2, bidirectional=True), torch.float32,
                               None, True),
        "torch_gru_2x_nobias_f64": (nn.GRU(4, 3, num_layers=2, bias=False).double(),
                                    torch.float64, None, True),
        "torch_lstm_nobias_lengths": (nn.LSTM(5, 4, bias=False), torch.float32, [7, 2, 5],
                                      True),
        "torch_gru_bidi_lengths": (nn.GRU(3, 6, bidirectional=True), torch.float32, [3, 7, 1],
                                   True),
        "torch_lstm_live": (nn.LSTM(3, 3), torch.float32, None, False),
        "brt_gru_reset_before": (brt.GRU(3, 4, num_layers=2, reset_after=False), torch.float32,
                                 None, False),
        "brt_lstm_tf_attrs_f64": (brt.LSTM(4, 3, bidirectional=True, forget_bias=1.0,
                                           cell_clip=0.7, use_peephole=True,
                                           dtype=torch.float64), torch.float64, [7, 5, 1],
                                  False),
    }


def _torch_reference(module, x, lengths):
    """(y [T, B, D·H], h_n, c_n or None) of the module on x [T, B, I] (time-major)."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    with torch.no_grad():
        xt = torch.from_numpy(x)
        if lengths is None:
            y, state = module(xt)
        else:
            packed = pack_padded_sequence(xt, torch.tensor(lengths),
                                          enforce_sorted=False)
            y, state = module(packed)
            y, _ = pad_packed_sequence(y, total_length=x.shape[0])
    h, c = state if isinstance(state, tuple) else (state, None)
    return y.numpy(), h.numpy(), None if c is None else c.numpy()


# The subprocess: converts the source files (h5py / torch only), loads every model file and runs
# it; proves TensorFlow and Keras were never imported.
_RUNNER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import blockrnn, blockrnn.convert as bc
    manifest = json.load(open(sys.argv[1]))
    for case in manifest:
        if case["src"]:
            bc.convert(case["src"], case["file"])
        model = blockrnn.load_model(case["file"])
        x = np.load(case["x"])
        lengths = None if case["lengths"] is None else np.array(case["lengths"])
        y, states = model.forward(x, seq_lengths=lengths)
        flat = {"y": y}
        for l, per_dir in enumerate(states):
            for d, s in enumerate(per_dir):
                if isinstance(s, tuple):
                    flat[f"c{l}_{d}"], flat[f"h{l}_{d}"] = s
                else:
                    flat[f"h{l}_{d}"] = s
        np.savez(case["out"], **flat)
    bad = [m for m in ("tensorflow", "keras", "tf_keras") if m in sys.modules]
    assert not bad, f"imported {bad}"
    print("ran", len(manifest), "models without TensorFlow")
""")


@pytest.fixture(scope="module")
def zoo(tmp_path_factory, tf):
    import keras as K
    tmp = str(tmp_path_factory.mktemp("zoo"))
    rng = np.random.default_rng(24)
    manifest, expected = [], {}

    def add(name, src, file, x_tm, lengths, want):
        np.save(os.path.join(tmp, name + "_x.npy"), x_tm)
        manifest.append({"name": name, "src": src, "file": file, "lengths": lengths,
                         "x": os.path.join(tmp, name + "_x.npy"),
                         "out": os.path.join(tmp, name + "_out.npz")})
        expected[name] = want

    live = {}
    cases = _keras_cases(K)
    assert sorted(cases) == sorted(KERAS_NAMES[:-1])
    for name, case in cases.items():
        model, path, x, want = _build_keras(K, rng, tmp, name, case)
        live[name] = model
        want = want.transpose(1, 0, 2) if want.ndim == 3 else want  # Keras is batch-major
        add(name, path, os.path.join(tmp, name + ".safetensors"), x.transpose(1, 0, 2), None,
            {"y": want})
    model, path, x, want = _build_functional(K, rng, tmp)
    live["functional"] = model
    add("functional", path, os.path.join(tmp, "functional.safetensors"), x.transpose(1, 0, 2),
        None, {"y": want.transpose(1, 0, 2)})

    cases = _torch_cases()
    assert sorted(cases) == sorted(TORCH_NAMES)
    for name, (module, dtype, lengths, as_pt) in cases.items():
        x = rng.uniform(-1, 1, (T, B, module.input_size)).astype(
            np.float64 if dtype == torch.float64 else np.float32)
        y, h, c = _torch_reference(module, x, lengths)
        D = 2 if module.bidirectional else 1
        want = {"y": y}
        for k in range(h.shape[0]):
            want[f"h{k // D}_{k % D}"] = h[k]
            if c is not None:
                want[f"c{k // D}_{k % D}"] = c[k]
        file = os.path.join(tmp, name + ".safetensors")
        if as_pt:
            src = os.path.join(tmp, name + ".pt")
            torch.save(module.state_dict(), src)
        else:
            src = None
            bc.from_torch(module).save(file)
        live[name] = module
        add(name, src, file, x, lengths, want)

    manifest_path = os.path.join(tmp, "manifest.json")
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", _RUNNER, manifest_path], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {c["name"]: dict(np.load(c["out"])) for c in manifest}
    files = {c["name"]: c["file"] for c in manifest}
    return {"expected": expected, "got": got, "files": files, "live": live, "tmp": tmp}


KERAS_NAMES = ["lstm_seq", "lstm_last_nobias", "gru_reset_after", "gru_reset_before",
               "gru_nobias_last", "bidi_concat_lstm", "bidi_sum_gru", "bidi_mul_gru_rb",
               "bidi_ave_lstm_last", "stack_mixed", "go_backwards", "masked_stack",
               "masked_last", "masked_go_backwards", "masked_bidi_last", "float64_stack",
               "functional"]
TORCH_NAMES = ["torch_lstm_2x_bidi", "torch_gru_2x_nobias_f64", "torch_lstm_nobias_lengths",
               "torch_gru_bidi_lengths", "torch_lstm_live", "brt_gru_reset_before",
               "brt_lstm_tf_attrs_f64"]


@pytest.mark.parametrize("name", KERAS_NAMES + TORCH_NAMES)
def test_model_file_matches_framework(zoo, name):
    want, got = zoo["expected"][name], zoo["got"][name]
    dtype = got["y"].dtype.type
    for key, w in want.items():
        assert got[key].shape == w.shape, f"{name}: {key} shape {got[key].shape} vs {w.shape}"
        np.testing.assert_allclose(got[key], w, **TOL[dtype], err_msg=f"{name}: {key}")


def test_live_keras_conversion_equals_file_conversion(zoo):
    for name in ("stack_mixed", "masked_stack", "functional", "float64_stack"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            live = bc.from_keras(zoo["live"][name])
        from_file = blockrnn.load_model(zoo["files"][name])
        assert live.config()["layers"] == from_file.config()["layers"], name
        for k, a in from_file.tensors().items():
            assert np.array_equal(live.tensors()[k], a), (name, k)


def test_not_converted_layers_are_listed(zoo):
    model = blockrnn.load_model(zoo["files"]["stack_mixed"])
    assert model.not_converted == ["head (Dense)"]
    assert "head (Dense)" in model.summary()
    with pytest.warns(UserWarning, match=r"not converted .*head \(Dense\)"):
        bc.from_keras(zoo["live"]["stack_mixed"])


def test_to_torch_matches_the_model(zoo):
    for name in ("torch_lstm_2x_bidi", "brt_gru_reset_before", "brt_lstm_tf_attrs_f64",
                 "torch_gru_2x_nobias_f64", "bidi_concat_lstm"):
        model = blockrnn.load_model(zoo["files"][name])
        module = model.to_torch()
        x = np.random.default_rng(5).uniform(-1, 1, (T, B, model.input_size)).astype(model.dtype)
        y, _ = model.forward(x)
        with torch.no_grad():
            y_t, _ = module(torch.from_numpy(x))
        np.testing.assert_allclose(y_t.numpy(), y, **TOL[model.dtype.type], err_msg=name)


def test_convert_cli(zoo, tmp_path):
    out = tmp_path / "cli.safetensors"
    src = os.path.join(zoo["tmp"], "stack_mixed.keras")
    proc = subprocess.run([sys.executable, "-m", "blockrnn.convert", src, str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "NOT converted (run them yourself): head (Dense)" in proc.stdout
    a, b = blockrnn.load_model(out), blockrnn.load_model(zoo["files"]["stack_mixed"])
    assert all(np.array_equal(a.tensors()[k], v) for k, v in b.tensors().items())
    bad = tmp_path / "bad.txt"
    bad.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "blockrnn.convert", str(bad), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "unknown extension '.txt'" in proc.stderr
