"""Reliability guarantees of every op (docs/reliability.md): bitwise determinism across runs
and thread counts, thread safety under concurrent calls, inputs never modified, and NaN / Inf
propagating as TensorFlow propagates them."""
import concurrent.futures

import numpy as np
import pytest

import blockrnn
from opinputs import make_kwargs, op_function, op_names

OPS = op_names()


@pytest.fixture
def restore_threads():
    saved = blockrnn.get_num_threads()
    yield
    blockrnn.set_num_threads(saved)


# Big enough that the element-wise passes and the GEMMs really split over threads; the second
# and third reach the few-row GEMM path and reductions of 333 / 700 values (docs/reliability.md).
DET_SHAPES = [(5, 64, 96, 128), (3, 5, 333, 333), (4, 1, 700, 90)]


@pytest.mark.parametrize("shape", DET_SHAPES, ids=lambda s: "T%dB%dI%dH%d" % s)
@pytest.mark.parametrize("op", OPS)
def test_bitwise_deterministic_across_runs_and_thread_counts(op, shape, path, restore_threads):
    rng = np.random.default_rng(11)
    T, B, I, H = shape
    kw = make_kwargs(op, rng, T=T, B=B, I=I, H=H)
    fn = op_function(op)
    results = []
    for threads in (1, 2, 4, 2):
        blockrnn.set_num_threads(threads)
        results.append(fn(**kw))
    for other in results[1:]:
        for name in results[0]._fields:
            np.testing.assert_array_equal(getattr(other, name), getattr(results[0], name),
                                          err_msg=f"{op}.{name}")


@pytest.mark.parametrize("op", OPS)
def test_inputs_are_never_modified(op, path):
    rng = np.random.default_rng(12)
    kw = make_kwargs(op, rng)
    before = {k: np.array(v, copy=True) for k, v in kw.items()}
    op_function(op)(**kw)
    for k, v in kw.items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"{op} modified {k}")


@pytest.mark.parametrize("op", OPS)
def test_concurrent_calls_match_serial_results(op):
    rng = np.random.default_rng(13)
    fn = op_function(op)
    cases = [make_kwargs(op, rng, T=4, B=16, I=24, H=32) for _ in range(8)]
    serial = [fn(**kw) for kw in cases]
    for _ in range(3):
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            parallel = list(pool.map(lambda kw: fn(**kw), cases))
        for s, p in zip(serial, parallel):
            for name in s._fields:
                np.testing.assert_array_equal(getattr(p, name), getattr(s, name))


TF_FORWARD_OPS = [op for op in OPS if op in
                  ("GRUBlockCell", "LSTMBlockCell", "BlockLSTM", "BlockLSTMV2")]


@pytest.mark.parametrize("op", TF_FORWARD_OPS)
@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_propagate_as_in_tensorflow(tf, op, special):
    rng = np.random.default_rng(14)
    kw = make_kwargs(op, rng, T=3, B=4, I=5, H=6)
    if "cell_clip" in kw or op.startswith(("LSTM", "BlockLSTM")):
        kw.setdefault("cell_clip", -1.0)
    x = kw["x"]
    x[(0,) * x.ndim] = special          # one poisoned input element
    kw["h_prev"][1, 2] = special        # and one poisoned state element
    got = op_function(op)(**kw)
    want = getattr(tf.raw_ops, op)(**kw)
    for k, name in enumerate(got._fields):
        g, w = getattr(got, name), want[k].numpy()
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{op}.{name} NaN mask")
        np.testing.assert_array_equal(np.isinf(g), np.isinf(w), err_msg=f"{op}.{name} inf mask")
        fin = np.isfinite(w)
        np.testing.assert_allclose(g[fin], w[fin], rtol=1e-4, atol=1e-5,
                                   err_msg=f"{op}.{name} finite values")


# --- Denormals. TensorFlow runs its CPU kernels with denormals flushed to zero;
# blockrnn flushes subnormal attrs as TensorFlow does and keeps IEEE gradual underflow for
# tensor data (docs/reliability.md, "Denormals").

LSTM_ATTR_OPS = ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2"]


SUBNORMAL_ATTRS = [(op, attr, value) for op in LSTM_ATTR_OPS
                   for attr, value in [("cell_clip", 1e-39), ("cell_clip", 1.1e-38),
                                       ("forget_bias", 1e-39), ("forget_bias", -5e-40)]
                   if not (attr == "forget_bias" and op == "BlockLSTMV2")]  # V2: no forget_bias


@pytest.mark.parametrize("op,attr,value", SUBNORMAL_ATTRS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_subnormal_attrs_act_as_zero_as_in_tensorflow(tf, op, attr, value, dtype):
    rng = np.random.default_rng(15)
    kw = make_kwargs(op, rng, T=3, B=4, I=5, H=6, dtype=dtype)
    kw["cs_prev"] *= 4  # cell states well away from 0, so a clip would show
    kw.setdefault("cell_clip", -1.0)
    kw[attr] = value
    got = op_function(op)(**kw)
    want = getattr(tf.raw_ops, op)(**kw)
    zero = dict(kw, **{attr: 0.0 if attr == "forget_bias" else -1.0})
    unclipped = op_function(op)(**zero)
    for k, name in enumerate(got._fields):
        # Bitwise what the attr = 0 (no clip) call gives, and within docs/tolerances.md of TensorFlow
        # (float16: TensorFlow's own half tolerance; docs/tolerances.md).
        np.testing.assert_array_equal(getattr(got, name), getattr(unclipped, name))
        rtol, atol = (1e-4, 1e-5) if dtype == np.float32 else (8e-3, 8e-4)
        np.testing.assert_allclose(getattr(got, name).astype(np.float32),
                                   want[k].numpy().astype(np.float32), rtol=rtol, atol=atol,
                                   err_msg=f"{op}.{name}")


def test_subnormal_tensor_data_keeps_gradual_underflow(tf):
    """Where blockrnn differs from TensorFlow on purpose: with x = h = 0 and b = 0 every gate
    is exactly σ(0) = 0.5 or tanh(0) = 0, so cs = 0.5·cs_prev. For a subnormal cs_prev
    blockrnn returns that subnormal product exactly; TensorFlow's flushed kernel returns 0.
    Either way the difference is below float32's smallest normal (1.18e-38)."""
    rng = np.random.default_rng(16)
    kw = make_kwargs("LSTMBlockCell", rng, B=2, I=3, H=4)
    kw["x"][:] = 0
    kw["h_prev"][:] = 0
    kw["b"][:] = 0
    kw["cs_prev"][:] = np.float32(2e-39)
    got = blockrnn.raw_ops.LSTMBlockCell(**kw, forget_bias=0.0, cell_clip=-1.0)
    want = tf.raw_ops.LSTMBlockCell(**kw, forget_bias=0.0, cell_clip=-1.0)
    np.testing.assert_array_equal(got.cs, np.float32(0.5) * kw["cs_prev"])
    assert np.all(want.cs.numpy() == 0)  # TensorFlow flushed
    assert np.max(np.abs(got.cs - want.cs.numpy())) < np.finfo(np.float32).tiny
