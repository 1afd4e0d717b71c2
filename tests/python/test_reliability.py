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
