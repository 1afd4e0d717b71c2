"""Thread and CPU-path settings (include/blockrnn/context.h): where the defaults come from,
that bad values are clear errors, and that every path is bitwise deterministic and agrees with
TensorFlow. Environment cases run in a fresh interpreter (the defaults are read once)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import blockrnn
import opinputs

PROBE = """
import numpy as np, blockrnn
x = np.ones((2, 3), np.float32); h = np.ones((2, 4), np.float32)
try:
    blockrnn.raw_ops.GRUBlockCell(x=x, h_prev=h, w_ru=np.ones((7, 8), np.float32),
                                  w_c=np.ones((7, 4), np.float32), b_ru=np.ones(8, np.float32),
                                  b_c=np.ones(4, np.float32))
    print("ok", blockrnn.get_num_threads(), blockrnn.get_isa())
except blockrnn.InvalidArgumentError as e:
    print("error", e)
"""


def probe(**env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("BLOCKRNN_NUM_THREADS", "OMP_NUM_THREADS", "BLOCKRNN_ISA")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_thread_count_comes_from_blockrnn_then_openmp_variables():
    assert probe(BLOCKRNN_NUM_THREADS="3").split()[:2] == ["ok", "3"]
    assert probe(OMP_NUM_THREADS="5").split()[:2] == ["ok", "5"]
    assert probe(OMP_NUM_THREADS="6,2").split()[:2] == ["ok", "6"]  # nesting list: the first
    assert probe(BLOCKRNN_NUM_THREADS="2", OMP_NUM_THREADS="7").split()[:2] == ["ok", "2"]
    cores = len(os.sched_getaffinity(0))
    assert probe().split()[:2] == ["ok", str(cores)]


@pytest.mark.parametrize("value", ["abc", "0", "-1", "4097", "2.5", "1e3"])
def test_bad_thread_variable_is_a_clear_error(value):
    top = f"[1, {blockrnn.max_threads()}]"
    for var in ("BLOCKRNN_NUM_THREADS", "OMP_NUM_THREADS"):
        out = probe(**{var: value})
        assert out.startswith("error"), out
        assert var in out and top in out and value in out, out


def test_max_threads_is_four_times_the_cores_within_bounds():
    cores = len(os.sched_getaffinity(0))
    assert blockrnn.max_threads() == min(max(4 * cores, 16), 1024)


def test_set_num_threads_range():
    saved = blockrnn.get_num_threads()
    top = blockrnn.max_threads()
    try:
        for bad in (0, -3, top + 1, 10**6, 2**31, 2**64):
            with pytest.raises(blockrnn.InvalidArgumentError,
                               match=rf"set_num_threads: n must be in \[1, {top}\]"):
                blockrnn.set_num_threads(bad)
        for bad in (2.7, None, "4", True, 4.0, float("nan")):
            with pytest.raises(blockrnn.InvalidArgumentError,
                               match=rf"set_num_threads: n must be an integer in \[1, {top}\]"):
                blockrnn.set_num_threads(bad)
        blockrnn.set_num_threads(np.int64(top))
        assert blockrnn.get_num_threads() == top
    finally:
        blockrnn.set_num_threads(saved)


def test_workspace_cache_limit_round_trips_and_keeps_the_bits():
    """The workspace cache (blockrnn.set_workspace_cache_limit): a sequence op that reuses its
    thread's kept workspace gives the bits of one that allocates its own."""
    assert blockrnn.get_workspace_cache_limit() == 256 << 20
    for bad in (-1, 2**63, 2.5, "1", True):
        with pytest.raises(blockrnn.InvalidArgumentError, match="set_workspace_cache_limit"):
            blockrnn.set_workspace_cache_limit(bad)
    rng = np.random.default_rng(5)
    T, B, I, H = 7, 5, 6, 9
    inputs = dict(seq_len_max=np.int64(T), x=rng.uniform(-1, 1, (T, B, I)).astype(np.float32),
                  h_prev=rng.uniform(-1, 1, (B, H)).astype(np.float32),
                  w_ru=rng.uniform(-0.3, 0.3, (I + H, 2 * H)).astype(np.float32),
                  w_c=rng.uniform(-0.3, 0.3, (I + H, H)).astype(np.float32),
                  b_ru=np.zeros(2 * H, np.float32), b_c=np.zeros(H, np.float32))
    try:
        blockrnn.set_workspace_cache_limit(0)
        assert blockrnn.get_workspace_cache_limit() == 0
        uncached = blockrnn.raw_ops.BlockGRU(**inputs)
        blockrnn.set_workspace_cache_limit(None)
        assert blockrnn.get_workspace_cache_limit() == 256 << 20
        blockrnn.raw_ops.BlockGRU(**inputs)
        cached = blockrnn.raw_ops.BlockGRU(**inputs)
        for a, b in zip(uncached, cached):
            assert a.tobytes() == b.tobytes()
    finally:
        blockrnn.set_workspace_cache_limit(None)


def test_isa_variable_forces_a_path_or_is_an_error():
    assert probe(BLOCKRNN_ISA="baseline").split() [2] == "baseline"
    out = probe(BLOCKRNN_ISA="sse9")
    assert out.startswith("error") and "BLOCKRNN_ISA" in out and "avx512, avx2, baseline" in out


def supported_paths():
    saved = blockrnn.get_isa()
    paths = []
    for name in ("avx512", "avx2", "baseline"):
        try:
            blockrnn.set_isa(name)
            paths.append(name)
        except blockrnn.InvalidArgumentError:
            pass
    blockrnn.set_isa("")
    assert blockrnn.get_isa() == saved
    return paths


def test_unsupported_or_unknown_path_is_an_error():
    with pytest.raises(blockrnn.InvalidArgumentError, match="expected one of"):
        blockrnn.set_isa("neon")
    assert "baseline" in supported_paths()


@pytest.mark.parametrize("isa", ["avx512", "avx2", "baseline"])
def test_every_path_matches_tensorflow_and_is_thread_count_invariant(isa):
    """BlockLSTM + BlockLSTMGrad on each path: within docs/tolerances.md of TensorFlow, and bitwise the same
    at 1, 2, 3 and 7 threads (shapes above the paths' tiles: B·T = 600 rows, K = 300)."""
    if isa not in supported_paths():
        pytest.skip(f"this CPU lacks the {isa} path")
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(7)
    T, B, I, H = 6, 100, 173, 127
    f = lambda *s, sc=1.0: rng.uniform(-sc, sc, s).astype(np.float32)  # noqa: E731
    kw = dict(seq_len_max=np.int64(T), x=f(T, B, I), cs_prev=f(B, H), h_prev=f(B, H),
              w=f(I + H, 4 * H, sc=1 / np.sqrt(I + H)), wci=f(H), wcf=f(H), wco=f(H),
              b=f(4 * H), forget_bias=1.0, cell_clip=-1.0, use_peephole=True)
    grads = dict(cs_grad=f(T, B, H), h_grad=f(T, B, H))
    saved = blockrnn.get_num_threads()
    try:
        blockrnn.set_isa(isa)
        results = []
        for threads in (1, 2, 3, 7):
            blockrnn.set_num_threads(threads)
            fwd = blockrnn.raw_ops.BlockLSTM(**kw)
            bwd = blockrnn.raw_ops.BlockLSTMGrad(
                **{k: v for k, v in kw.items() if k not in ("forget_bias", "cell_clip")},
                **fwd._asdict(), **grads)
            results.append([np.asarray(a) for a in (*fwd, *bwd)])
        for r in results[1:]:
            for a, b in zip(results[0], r):
                assert a.tobytes() == b.tobytes()
    finally:
        blockrnn.set_isa("")
        blockrnn.set_num_threads(saved)
    tf_fwd = tf.raw_ops.BlockLSTM(**kw)
    tf_bwd = tf.raw_ops.BlockLSTMGrad(
        **{k: v for k, v in kw.items() if k not in ("forget_bias", "cell_clip")},
        **{k: getattr(tf_fwd, k) for k in tf_fwd._fields}, **grads)
    # docs/tolerances.md: sequence ops within 1e-4 of TensorFlow for T <= 100 (GEMM accumulation order
    # and activations differ by a few ulp per step).
    for ours, theirs in zip(results[0], [*tf_fwd, *tf_bwd]):
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-4, atol=1e-4)



@pytest.mark.parametrize("op", opinputs.op_names())
def test_the_fma_paths_give_the_same_bits(op):
    """Every op, forward and backward: bitwise the same on the avx512 and avx2 paths (one FMA
    chain per GEMM output in the same k order, and element-wise kernels that compute the same
    operations: docs/design.md; the baseline path's GEMM has no FMA and may differ in the last
    bits, its element-wise kernels are checked against the others in
    tests/cpp/test_pointwise_paths.cc). Odd sizes leave vector tails; a second input set, scaled
    up, drives the activations into their saturated and clamped ranges; the LSTM ops run with a
    positive cell_clip and peepholes where they take them."""
    import inspect
    paths = [p for p in supported_paths() if p != "baseline"]
    if len(paths) < 2:
        pytest.skip("this CPU has one FMA path only")
    params = inspect.signature(opinputs.op_function(op)).parameters
    rng = np.random.default_rng(11)
    cases = []
    for scale in (1.0, 24.0):
        kw = opinputs.make_kwargs(op, rng, T=4, B=9, I=37, H=45)
        for name in ("x", "h_prev", "cs_prev"):
            if name in kw:
                kw[name] = kw[name] * np.float32(scale)
        if "cell_clip" in params:
            kw["cell_clip"] = 0.75
        if "use_peephole" in params:
            kw["use_peephole"] = True
        cases.append(kw)
    results = {}
    try:
        for isa in paths:
            blockrnn.set_isa(isa)
            results[isa] = [[np.asarray(a).tobytes() for a in opinputs.op_function(op)(**kw)]
                            for kw in cases]
    finally:
        blockrnn.set_isa("")
    assert results["avx2"] == results["avx512"], op
