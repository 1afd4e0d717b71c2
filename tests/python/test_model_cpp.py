"""The C++ model reader (blockrnn::Model, include/blockrnn/model.h) on model files written by the
Python converters, through the built command-line tool (`blockrnn run` / `blockrnn info`,
build/dev/tools/blockrnn; BLOCKRNN_CLI overrides the path).

Every model of the model zoo (Keras and PyTorch models converted to files, test_model_zoo.py)
is run by the C++ reader and compared with the framework's own output and with the Python
reader's (blockrnn.load_model). Hand-made models add what the zoo does not reach: explicit
lengths with padded_output "hold", lengths of 0, initial states, the last step only with
lengths, float64 GRUs; and the CLI's error paths.

Every zoo model is also run through the C API and the Java binding, by two small programs made
for this test: tests/c/model_run.c (build/dev/tests/c/model_run, target model_run;
BLOCKRNN_MODEL_RUN overrides the path) and the main class org.blockrnn.ModelRun of the Java test
jar (build/dev/java: blockrnn.jar, blockrnn-tests.jar and libblockrnn_jni.so, targets
blockrnn_java_tests and blockrnn_jni; BLOCKRNN_JAVA_DIR overrides the folder). Each runs all the
zoo's models in one process; their outputs are compared with the framework's.
"""
import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import blockrnn
from blockrnn.model import LayerConfig, Model
# The zoo fixture (built once for this module) and its names and tolerances.
from test_model_zoo import KERAS_NAMES, TOL, TORCH_NAMES, zoo  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = pathlib.Path(os.environ.get("BLOCKRNN_CLI", ROOT / "build/dev/tools/blockrnn"))
C_RUNNER = pathlib.Path(os.environ.get("BLOCKRNN_MODEL_RUN", ROOT / "build/dev/tests/c/model_run"))
JAVA_DIR = pathlib.Path(os.environ.get("BLOCKRNN_JAVA_DIR", ROOT / "build/dev/java"))


@pytest.fixture(scope="module")
def cli():
    if not CLI.is_file() or not os.access(CLI, os.X_OK):
        pytest.fail(f"the blockrnn command-line tool is missing at {CLI}: build it first with "
                    "`cmake --preset dev && cmake --build --preset dev`, or point BLOCKRNN_CLI "
                    "at a built binary", pytrace=False)
    return str(CLI)


def run_cli(cli, *args):
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=120)


def run_cpp(cli, tmp, model_file, x, lengths=None, initial=None):
    """The C++ reader's outputs {"y", "states.<l>.<d>.<cs|h>"} for x [T, B, I]."""
    tensors = {"x": np.ascontiguousarray(x)}
    if lengths is not None:
        tensors["seq_lengths"] = np.asarray(lengths, dtype=np.int64)
    tensors.update(initial or {})
    inp, out = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
    save_file(tensors, inp)
    proc = run_cli(cli, "run", model_file, "--input", inp, "--output", out)
    assert proc.returncode == 0, proc.stderr
    return load_file(out)


def framework_key_to_state(key):
    """A key of the zoo's expected outputs ("y", "h<layer>_<direction>", "c<layer>_<direction>")
    as the readers' name of that output ("y", "states.<layer>.<direction>.<h|cs>")."""
    if key == "y":
        return key
    layer, direction = key[1:].split("_")
    return f"states.{layer}.{direction}.{'cs' if key[0] == 'c' else 'h'}"


def python_states(states):
    """Model.forward's states[l][d] as the CLI's flat names."""
    flat = {}
    for l, per_dir in enumerate(states):
        for d, s in enumerate(per_dir):
            if isinstance(s, tuple):
                flat[f"states.{l}.{d}.cs"], flat[f"states.{l}.{d}.h"] = s
            else:
                flat[f"states.{l}.{d}.h"] = s
    return flat


@pytest.mark.parametrize("name", KERAS_NAMES + TORCH_NAMES)
def test_cpp_reader_matches_framework_and_python(zoo, cli, tmp_path, name):  # noqa: F811
    case = next(c for c in json.load(open(os.path.join(zoo["tmp"], "manifest.json")))
                if c["name"] == name)
    x = np.load(case["x"])
    got = run_cpp(cli, str(tmp_path), case["file"], x, case["lengths"])
    dtype = got["y"].dtype.type
    # The framework's outputs (y, and the torch modules' final states).
    for key, want in zoo["expected"][name].items():
        cpp_key = framework_key_to_state(key)
        assert got[cpp_key].shape == want.shape, (name, key)
        np.testing.assert_allclose(got[cpp_key], want, **TOL[dtype], err_msg=f"{name}: {key}")
    # The Python reader: the same layer objects on the same weights, so the same numbers up to
    # the summation order of the GEMM, which can differ between the two processes' thread
    # counts; the tolerance is the framework comparison's.
    model = blockrnn.load_model(case["file"])
    y, states = model.forward(x, seq_lengths=case["lengths"])
    np.testing.assert_allclose(got["y"], y, **TOL[dtype], err_msg=name)
    for key, s in python_states(states).items():
        np.testing.assert_allclose(got[key], s, **TOL[dtype], err_msg=f"{name}: {key}")


def _random_model(rng, dtype, layers, *, input_size, **kw):
    I = input_size
    weights = []
    for c in layers:
        shapes = c.param_shapes(I)
        weights.append([{p: rng.uniform(-0.7, 0.7, shapes[p]).astype(dtype)
                         for p in c.param_names()} for _ in range(c.directions)])
        I = c.output_size
    return Model(dtype, input_size, layers, weights, **kw)


def _hand_made(rng):
    L = LayerConfig
    return {
        "hold_lengths_lstm_peephole": (_random_model(rng, np.float32, [
            L("BlockLSTM", 4, padded_output="hold", forget_bias=1.0, cell_clip=0.5,
              use_peephole=True),
            L("BlockLSTMV2", 3, directions=2, merge="concat", padded_output="hold")],
            input_size=3), [6, 0, 3, 1]),
        "backwards_ave_gru_last": (_random_model(rng, np.float32, [
            L("BlockGRUResetAfter", 5, go_backwards=True, padded_output="hold"),
            L("BlockGRU", 3, directions=2, merge="ave")],
            input_size=2, return_sequences=False), [2, 6, 0, 5]),
        "mul_sum_float64_last": (_random_model(rng, np.float64, [
            L("BlockGRU", 3, directions=2, merge="mul"),
            L("BlockLSTM", 2, directions=2, merge="sum", cell_clip=None)],
            input_size=4, return_sequences=False), None),
    }


@pytest.mark.parametrize("name", ["hold_lengths_lstm_peephole", "backwards_ave_gru_last",
                                  "mul_sum_float64_last"])
def test_cpp_reader_hand_made_models(cli, tmp_path, name):
    rng = np.random.default_rng(7)
    model, lengths = _hand_made(rng)[name]
    T, B = 6, 4
    path = str(tmp_path / "m.safetensors")
    model.save(path)
    x = rng.uniform(-1, 1, (T, B, model.input_size)).astype(model.dtype)
    # Initial states for every state but layer 0's first one, which the C++ run is not given
    # (absent: zeros) and Python gets as zeros.
    initial = {}
    init_nested = []
    for l, c in enumerate(model.layers):
        per_dir = []
        for d in range(c.directions):
            parts = {}
            for part in (("cs", "h") if c.is_lstm else ("h",)):
                parts[part] = rng.uniform(-1, 1, (B, c.hidden_size)).astype(model.dtype)
                if l == 0 and d == 0 and part == ("cs" if c.is_lstm else "h"):
                    parts[part][:] = 0
                else:
                    initial[f"states.{l}.{d}.{part}"] = parts[part]
            per_dir.append((parts["cs"], parts["h"]) if c.is_lstm else parts["h"])
        init_nested.append(per_dir)
    y, states = model.forward(x, seq_lengths=lengths, initial_state=init_nested)
    got = run_cpp(cli, str(tmp_path), path, x, lengths, initial)
    # Both readers run the same layer objects on the same bytes; only the GEMM's summation
    # order may differ (thread counts), hence the zoo's float tolerances.
    tol = TOL[model.dtype.type]
    np.testing.assert_allclose(got["y"], y, **tol)
    for key, s in python_states(states).items():
        np.testing.assert_allclose(got[key], s, **tol, err_msg=key)


def test_cpp_reader_masking_and_its_error(cli, tmp_path):
    rng = np.random.default_rng(3)
    model = _random_model(rng, np.float32, [LayerConfig("BlockLSTM", 3, padded_output="hold"),
                                            LayerConfig("BlockGRU", 2, directions=2,
                                                        merge="concat")],
                          input_size=2, masking={"mask_value": 0.5})
    path = str(tmp_path / "m.safetensors")
    model.save(path)
    x = rng.uniform(-1, 1, (5, 3, 2)).astype(np.float32)
    x[3:, 0] = 0.5
    x[1:, 2] = 0.5
    y, _ = model.forward(x)
    got = run_cpp(cli, str(tmp_path), path, x)
    np.testing.assert_allclose(got["y"], y, **TOL[np.float32])
    x[1, 1] = 0.5  # a masked step followed by unmasked ones: no lengths express it
    save_file({"x": x}, str(tmp_path / "bad.safetensors"))
    proc = run_cli(cli, "run", path, "--input", tmp_path / "bad.safetensors", "--output",
                   tmp_path / "o.safetensors")
    assert proc.returncode == 1
    assert ("Model.forward: x: the mask of the Masking layer (mask_value=0.5) of example 1 is "
            "not a suffix: step 1 is masked and step 4 is not") in proc.stderr


def test_cli_info_and_errors(cli, tmp_path):
    rng = np.random.default_rng(1)
    model = _random_model(rng, np.float32, [LayerConfig("BlockGRUResetAfter", 3, name="rec")],
                          input_size=2)
    path = str(tmp_path / "m.safetensors")
    model.save(path)
    proc = run_cli(cli, "info", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(model.summary())
    assert "states.0.0.h" in proc.stdout
    # x of the wrong size, an unknown tensor, a missing x: runtime errors naming what is wrong.
    for tensors, message in [
            ({"x": np.zeros((2, 1, 3), np.float32)},
             "Model.forward: x must have shape [T, B, 2] (time, batch, input_size), got "
             "[2, 1, 3]"),
            ({"x": np.zeros((2, 1, 2), np.float32), "h0": np.zeros(1, np.float32)},
             "tensor 'h0': is not an input of the model"),
            ({"seq_lengths": np.zeros(1, np.int64)}, "tensor 'x': is missing"),
            ({"x": np.zeros((2, 1, 2), np.float32), "seq_lengths": np.array([3])},
             "seq_lengths must be in [0, 2] (T), got seq_lengths[0] = 3")]:
        save_file(tensors, str(tmp_path / "in.safetensors"))
        proc = run_cli(cli, "run", path, "--input", tmp_path / "in.safetensors", "--output",
                       tmp_path / "o.safetensors")
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    proc = run_cli(cli, "run", tmp_path / "nope.safetensors", "--input", path, "--output",
                   tmp_path / "o.safetensors")
    assert proc.returncode == 1 and "nope.safetensors: cannot open" in proc.stderr


# ---- The same zoo through the C API and the Java binding ----------------------------------------

def _zoo_runner_args(zoo, out_root):
    """The arguments of model_run / ModelRun for every zoo model: MODEL X T B LENGTHS OUT_DIR,
    with x and seq_lengths written as raw little-endian files; and each model's (OUT_DIR, dtype)."""
    args, out_dirs = [], {}
    for case in json.load(open(os.path.join(zoo["tmp"], "manifest.json"))):
        name = case["name"]
        x = np.load(case["x"])
        T, B, _ = x.shape
        x_file = out_root / f"{name}_x.bin"
        x.astype(x.dtype.newbyteorder("<")).tofile(x_file)
        lengths_file = "-"
        if case["lengths"] is not None:
            lengths_file = out_root / f"{name}_lengths.bin"
            np.asarray(case["lengths"], dtype="<i8").tofile(lengths_file)
        out_dir = out_root / name
        out_dir.mkdir()
        out_dirs[name] = (out_dir, x.dtype)
        args += [case["file"], x_file, T, B, lengths_file, out_dir]
    return [str(a) for a in args], out_dirs


@pytest.fixture(scope="module")
def c_outputs(zoo, tmp_path_factory):  # noqa: F811
    if not C_RUNNER.is_file() or not os.access(C_RUNNER, os.X_OK):
        pytest.fail(f"the C API's model runner is missing at {C_RUNNER}: build it first with "
                    "`cmake --preset dev && cmake --build --preset dev --target model_run`, or "
                    "point BLOCKRNN_MODEL_RUN at a built binary", pytrace=False)
    args, out_dirs = _zoo_runner_args(zoo, tmp_path_factory.mktemp("zoo_c"))
    proc = subprocess.run([str(C_RUNNER), *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out_dirs


@pytest.fixture(scope="module")
def java_outputs(zoo, tmp_path_factory):  # noqa: F811
    java = shutil.which("java") or os.path.join(os.environ.get("JAVA_HOME", ""), "bin", "java")
    needed = [JAVA_DIR / "blockrnn.jar", JAVA_DIR / "blockrnn-tests.jar",
              JAVA_DIR / "libblockrnn_jni.so"]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing or not os.access(java, os.X_OK):
        pytest.fail(f"the Java binding's model runner is missing ({', '.join(missing) or 'java'}): "
                    "build it first with a JDK and JUnit 5 installed, `cmake --preset dev && "
                    "cmake --build --preset dev --target blockrnn_java_tests blockrnn_jni`, or "
                    "point BLOCKRNN_JAVA_DIR at the folder holding blockrnn.jar, "
                    "blockrnn-tests.jar and libblockrnn_jni.so", pytrace=False)
    args, out_dirs = _zoo_runner_args(zoo, tmp_path_factory.mktemp("zoo_java"))
    proc = subprocess.run(
        [java, "-Xcheck:jni", f"-Dblockrnn.jni={needed[2]}",
         "-cp", f"{needed[0]}{os.pathsep}{needed[1]}", "org.blockrnn.ModelRun", *args],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # -Xcheck:jni reports misuse of JNI as warnings on the console, not as a failure.
    assert "in native method" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return out_dirs


@pytest.mark.parametrize("language", ["c", "java"])
@pytest.mark.parametrize("name", KERAS_NAMES + TORCH_NAMES)
def test_c_and_java_match_framework(zoo, request, language, name):  # noqa: F811
    out_dir, dtype = request.getfixturevalue(f"{language}_outputs")[name]
    for key, want in zoo["expected"][name].items():
        path = out_dir / f"{framework_key_to_state(key)}.bin"
        assert path.is_file(), f"{language}: {name}: no output {path.name}"
        got = np.fromfile(path, dtype=dtype.newbyteorder("<"))  # the model's dtype
        assert got.size == want.size, (language, name, key, got.size, want.shape)
        # The same tolerance as the CLI's comparison above: the same C++ reader underneath.
        np.testing.assert_allclose(got.reshape(want.shape), want, **TOL[dtype.type],
                                   err_msg=f"{language}: {name}: {key}")
