"""TensorFlow's crash reports as regression tests (docs/ops.md).

Every input behind a TensorFlow crash report about the LSTM block ops (a CHECK failure, an abort,
a segfault, an out-of-bounds read) is one case of tests/data/tf_crash_inputs.json, shared with
tests/cpp/test_tf_crash_inputs.cc (its "about" says what a case holds, its "issues" what each
report was). Each is replayed here against blockrnn, which must answer with a clean
`blockrnn.InvalidArgumentError` (a ValueError) naming the op and the argument, or, where the
input is valid under docs/design.md, with correctly shaped outputs. Nothing here may crash.
"""
import inspect
import json
import pathlib
import re

import numpy as np
import pytest

import blockrnn

DATA = json.loads((pathlib.Path(__file__).parent.parent / "data" / "tf_crash_inputs.json")
                  .read_text())
CASES = DATA["cases"]


def op_fn(op):
    if op.startswith("gradients."):
        return getattr(blockrnn.gradients, op.split(".", 1)[1])
    return getattr(blockrnn.raw_ops, op)


def _shape(op, name, d):
    """The shape an input has under dims d (tests/cpp/op_shapes.h for the LSTM ops)."""
    T, B, I, H = d.get("T", 1), d["B"], d["I"], d["H"]
    seq = op.startswith("Block")
    table = {"x": (T, B, I) if seq else (B, I), "cs_prev": (B, H), "h_prev": (B, H),
             "w": (I + H, 4 * H), "wci": (H,), "wcf": (H,), "wco": (H,), "b": (4 * H,)}
    return table.get(name, (T, B, H) if seq else (B, H))


def _tensor(rng, shape, dtype, values):
    if values == "uniform":
        return rng.uniform(0.0, 1.0, size=shape).astype(dtype)
    if values == "small_ints":
        return rng.integers(0, 64, size=shape).astype(dtype)
    if isinstance(values, list):
        flat = np.zeros(int(np.prod(shape)), dtype)
        flat[:len(values)] = values[:flat.size]
        return flat.reshape(shape)
    return np.full(shape, values, dtype)


def case_kwargs(case, rng):
    """Inputs by name (an override, else the shape under `dims`; a name neither gives is an
    optional trailing input, left out) and the attrs."""
    op, dtype = case["op"], np.dtype(case["dtype"])
    overrides = case.get("inputs", {})
    params = [p.name for p in inspect.signature(op_fn(op)).parameters.values()]
    kw = {}
    for name in params:
        if name in overrides:
            o = overrides[name]
            kw[name] = _tensor(rng, tuple(o["shape"]), np.dtype(o.get("dtype", dtype)),
                               o.get("values", case["values"]))
        elif name == "seq_len_max" and "dims" in case:
            kw[name] = np.int64(case["dims"]["S"])
        elif "dims" in case and name not in case["attrs"] and name != "name":
            if inspect.signature(op_fn(op)).parameters[name].default is not \
                    inspect.Parameter.empty:
                continue  # an optional input or attr the case does not set
            kw[name] = _tensor(rng, _shape(op, name, case["dims"]), dtype, case["values"])
    kw.update({k: (bool(v) if k == "use_peephole" else v) for k, v in case["attrs"].items()})
    return kw


def replay(k):
    case = CASES[k]
    op = case["op"]
    kw = case_kwargs(case, np.random.default_rng(k))
    if "error" in case:
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            op_fn(op)(**kw)
        message = str(e.value)
        assert isinstance(e.value, ValueError)
        assert re.match(re.escape(op + ": "), message), message
        assert case["error"] in message, f"case {k}: {message!r} lacks {case['error']!r}"
        return
    out = op_fn(op)(**kw)
    assert len(out) == len(case["outputs"])
    for name, v, shape in zip(out._fields, out, case["outputs"]):
        assert v.shape == tuple(shape) and v.dtype == np.dtype(case["dtype"]), (k, name)
        if case.get("zeros"):
            assert not np.any(v), (k, name)


@pytest.mark.parametrize("issue", list(DATA["issues"]))
def test_tf_crash_inputs(issue, path):
    """Every case of one TensorFlow issue (see the data file's "issues"), fast and reference."""
    ks = [k for k, c in enumerate(CASES) if c["issue"] == issue]
    assert ks
    for k in ks:
        replay(k)


def test_every_case_names_a_listed_issue():
    assert all(c["issue"] in DATA["issues"] for c in CASES)
