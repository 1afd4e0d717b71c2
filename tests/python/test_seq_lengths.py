"""seq_lengths, the sequence ops' optional per-example lengths (blockrnn's extension beyond
TensorFlow, docs/ops.md), through the Python interface.

Oracles: TensorFlow's own BlockLSTM / BlockLSTMGrad run on each example alone with
seq_len_max = its length (TF has no lengths; that is the definition), blockrnn's op without
lengths on each example alone, float64 central differences, and the reference path.
"""
import numpy as np
import pytest

import blockrnn
from blockrnn import raw_ops

tf = pytest.importorskip("tensorflow")

T, B, I, H = 6, 7, 4, 5
UNSORTED = np.array([3, 0, 6, 5, 1, 6, 2])
SORTED = np.array([6, 6, 5, 3, 2, 1, 0])

FAMILIES = {
    "BlockLSTM": ("BlockLSTMGrad", ["cs_prev", "h_prev"], {"w": (I + H, 4 * H), "wci": (H,),
                                                           "wcf": (H,), "wco": (H,),
                                                           "b": (4 * H,)}),
    "BlockLSTMV2": ("BlockLSTMGradV2", ["cs_prev", "h_prev"], {"w": (I + H, 4 * H), "wci": (H,),
                                                               "wcf": (H,), "wco": (H,),
                                                               "b": (4 * H,)}),
    "BlockGRU": ("BlockGRUGrad", ["h_prev"], {"w_ru": (I + H, 2 * H), "w_c": (I + H, H),
                                             "b_ru": (2 * H,), "b_c": (H,)}),
    "BlockGRUResetAfter": ("BlockGRUResetAfterGrad", ["h_prev"],
                           {"w_i": (I, 3 * H), "w_h": (H, 3 * H), "b_i": (3 * H,),
                            "b_h": (3 * H,)}),
}


def problem(op, dtype, seed=0, S=T):
    rng = np.random.default_rng(seed)
    grad_op, states, weights = FAMILIES[op]
    kw = {"seq_len_max": np.int64(S), "x": rng.uniform(-1, 1, (T, B, I)).astype(dtype)}
    for s in states:
        kw[s] = rng.uniform(-1, 1, (B, H)).astype(dtype)
    for name, shape in weights.items():
        kw[name] = (rng.uniform(-1, 1, shape) / np.sqrt(I + H)).astype(dtype)
    attrs = {"use_peephole": True} if "LSTM" in op else {}
    return kw, attrs


def incoming(op, dtype, seed=1):
    rng = np.random.default_rng(seed)
    g = {"h_grad": rng.uniform(-1, 1, (T, B, H)).astype(dtype)}
    if "LSTM" in op:
        g["cs_grad"] = rng.uniform(-1, 1, (T, B, H)).astype(dtype)
    return g


def run(op, kw, attrs, lengths, g):
    """Forward and grad; returns (forward namedtuple, grad namedtuple)."""
    grad_op = FAMILIES[op][0]
    fwd = getattr(raw_ops, op)(**kw, **attrs, seq_lengths=lengths)
    gkw = dict(kw, **fwd._asdict(), **g)
    grad = getattr(raw_ops, grad_op)(**gkw, **attrs, seq_lengths=lengths)
    return fwd, grad


def alone(kw, g, b, steps):
    """The problem of example b alone with seq_len_max = steps."""
    one = {}
    for k, v in kw.items():
        if k == "seq_len_max":
            one[k] = np.int64(steps)
        elif k == "x" or v.ndim == 3:
            one[k] = v[:, b:b + 1]
        elif k in ("cs_prev", "h_prev"):
            one[k] = v[b:b + 1]
        else:
            one[k] = v
    return one, {k: v[:, b:b + 1] for k, v in g.items()}


def per_example(name):
    return name == "x_grad" or name.endswith("prev_grad")


# float64 sums of parameter gradients in another order than per example: rounding only.
PARAM_RTOL = {np.float64: 1e-12, np.float32: 2e-5, np.float16: 2e-3}


@pytest.mark.parametrize("op", list(FAMILIES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("lengths", [UNSORTED, SORTED], ids=["unsorted", "sorted"])
@pytest.mark.parametrize("S", [T, 4])
def test_each_example_alone_is_the_oracle(op, dtype, lengths, S):
    kw, attrs = problem(op, dtype, S=S)
    g = incoming(op, dtype)
    fwd, grad = run(op, kw, attrs, lengths, g)
    sums = {k: np.zeros(v.shape) for k, v in grad._asdict().items() if not per_example(k)}
    for b in range(B):
        steps = min(int(lengths[b]), S)
        one_kw, one_g = alone(kw, g, b, steps)
        f1, g1 = run(op, one_kw, attrs, None, one_g)
        for name, v in fwd._asdict().items():
            np.testing.assert_array_equal(v[:, b:b + 1], getattr(f1, name), err_msg=name)
            assert not v[steps:, b].any(), name  # zero past the length
        for name, v in grad._asdict().items():
            if per_example(name):
                want = v[:, b:b + 1] if name == "x_grad" else v[b:b + 1]
                np.testing.assert_array_equal(want, getattr(g1, name), err_msg=name)
            else:
                sums[name] += getattr(g1, name)
    for name, s in sums.items():
        np.testing.assert_allclose(getattr(grad, name), s, rtol=PARAM_RTOL[dtype],
                                   atol=PARAM_RTOL[dtype], err_msg=name)


@pytest.mark.parametrize("v2", [False, True])
def test_tensorflow_per_example_is_the_oracle(v2):
    """TensorFlow's BlockLSTM(V2)/BlockLSTMGrad(V2) on each example alone with seq_len_max = its
    length against blockrnn's batched call with seq_lengths, in float32 (TF's BlockLSTM takes
    half and float only). Tolerance 1e-5 (docs/tolerances.md: float32 rounding of a different GEMM order
    over T = 6 steps of K = 9 terms)."""
    dtype = np.float32
    op = "BlockLSTMV2" if v2 else "BlockLSTM"
    kw, attrs = problem(op, dtype)
    g = incoming(op, dtype)
    fwd, grad = run(op, kw, attrs, UNSORTED, g)
    tf_fwd = tf.raw_ops.BlockLSTMV2 if v2 else tf.raw_ops.BlockLSTM
    tf_grad = tf.raw_ops.BlockLSTMGradV2 if v2 else tf.raw_ops.BlockLSTMGrad
    tol = 1e-5
    wsum = None
    for b in range(B):
        steps = int(UNSORTED[b])
        if steps == 0:
            continue  # TF's ops on an empty sequence are not an oracle (blockrnn's zeros are
            # checked by test_each_example_alone_is_the_oracle)
        one, one_g = alone(kw, g, b, steps)
        extra = {} if v2 else {"forget_bias": 1.0, "cell_clip": 3.0}
        if v2:
            extra = {"cell_clip": 0.0}
        out = tf_fwd(**one, use_peephole=True, **extra)
        names = ["i", "cs", "f", "o", "ci", "co", "h"]
        for name, t in zip(names, out):
            t = t.numpy()
            got = getattr(fwd, name)[:, b:b + 1]
            # TF leaves steps >= seq_len_max of some outputs unwritten (docs/ops.md): compare the run.
            np.testing.assert_allclose(got[:steps], t[:steps], rtol=tol, atol=tol, err_msg=name)
            assert not got[steps:].any()
        gi = tf_grad(**one, **{n: getattr(fwd, n)[:, b:b + 1] for n in names},
                     **one_g, use_peephole=True)
        gnames = ["x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad",
                  "wco_grad", "b_grad"]
        res = dict(zip(gnames, [t.numpy() for t in gi]))
        np.testing.assert_allclose(grad.x_grad[:steps, b:b + 1], res["x_grad"][:steps],
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(grad.h_prev_grad[b:b + 1], res["h_prev_grad"], rtol=tol,
                                   atol=tol)
        np.testing.assert_allclose(grad.cs_prev_grad[b:b + 1], res["cs_prev_grad"], rtol=tol,
                                   atol=tol)
        part = {n: res[n].astype(np.float64) for n in gnames[3:]}
        wsum = part if wsum is None else {n: wsum[n] + part[n] for n in wsum}
    for n, v in wsum.items():
        np.testing.assert_allclose(getattr(grad, n), v, rtol=10 * tol, atol=10 * tol, err_msg=n)


@pytest.mark.parametrize("op", list(FAMILIES))
def test_finite_differences(op):
    """float64 central differences of L = Σ h·R_h (+ Σ cs·R_cs) against every gradient."""
    kw, attrs = problem(op, np.float64, seed=5)
    lengths = np.array([3, 0, 6, 5, 1, 6, 2])
    g = incoming(op, np.float64, seed=6)
    fwd_fn = getattr(raw_ops, op)

    def loss(k):
        out = fwd_fn(**k, **attrs, seq_lengths=lengths)
        v = float(np.sum(out.h * g["h_grad"]))
        if "cs_grad" in g:
            v += float(np.sum(out.cs * g["cs_grad"]))
        return v

    _, grad = run(op, kw, attrs, lengths, g)
    eps = 1e-6
    for name in kw:
        if name == "seq_len_max":
            continue
        analytic = getattr(grad, name + "_grad")
        flat = kw[name].reshape(-1)
        idx = np.random.default_rng(7).choice(flat.size, size=min(flat.size, 12), replace=False)
        for e in idx:
            keep = flat[e]
            flat[e] = keep + eps
            up = loss(kw)
            flat[e] = keep - eps
            down = loss(kw)
            flat[e] = keep
            num = (up - down) / (2 * eps)
            # docs/tolerances.md: 1e-6 relative to max(1, |numeric|) for central differences in float64.
            assert abs(analytic.reshape(-1)[e] - num) <= 1e-6 * max(1.0, abs(num)), (name, e)


@pytest.mark.parametrize("op", list(FAMILIES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_nan_past_the_lengths_does_not_leak(op, dtype):
    kw, attrs = problem(op, dtype, seed=8)
    g = incoming(op, dtype, seed=9)
    fwd, grad = run(op, kw, attrs, UNSORTED, g)
    dirty = {k: (v.copy() if k == "x" else v) for k, v in kw.items()}
    dirty_g = {k: v.copy() for k, v in g.items()}
    for b in range(B):
        dirty["x"][UNSORTED[b]:, b] = np.nan
        for v in dirty_g.values():
            v[UNSORTED[b]:, b] = np.nan
    f2 = getattr(raw_ops, op)(**dirty, **attrs, seq_lengths=UNSORTED)
    for a, c in zip(fwd, f2):
        np.testing.assert_array_equal(a, c)
    fo = {k: v.copy() for k, v in fwd._asdict().items()}
    for v in fo.values():
        for b in range(B):
            v[UNSORTED[b]:, b] = np.inf  # garbage forward outputs past the lengths too
    g2 = getattr(raw_ops, FAMILIES[op][0])(**dirty, **fo, **dirty_g, **attrs,
                                          seq_lengths=UNSORTED)
    for a, c in zip(grad, g2):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("op", list(FAMILIES))
def test_full_lengths_equal_absent_and_int32_lists(op):
    kw, attrs = problem(op, np.float32, seed=10, S=4)
    g = incoming(op, np.float32)
    f0, g0 = run(op, kw, attrs, None, g)
    for lengths in (np.full(B, T), [4] * B, np.array([6, 4, 5, 6, 4, 4, 6], np.int32)):
        f1, g1 = run(op, kw, attrs, lengths, g)
        for a, c in zip(f0 + g0, f1 + g1):
            np.testing.assert_array_equal(a, c)
    # int32, lists and int64 give the same results.
    ra = run(op, kw, attrs, UNSORTED.astype(np.int32), g)
    rb = run(op, kw, attrs, UNSORTED.tolist(), g)
    rc = run(op, kw, attrs, UNSORTED.astype(np.int64), g)
    for a, b_, c in zip(ra[0] + ra[1], rb[0] + rb[1], rc[0] + rc[1]):
        np.testing.assert_array_equal(a, b_)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("op", list(FAMILIES))
def test_threads_and_reference(op):
    """1, 2, 3 threads bitwise; the fast path against the reference (float64, rounding only)."""
    rng = np.random.default_rng(11)
    kw, attrs = problem(op, np.float64, seed=12)
    g = incoming(op, np.float64)
    saved = blockrnn.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            blockrnn.set_num_threads(n)
            f, gr = run(op, kw, attrs, SORTED, g)
            results.append(f + gr)
        for r in results[1:]:
            for a, c in zip(results[0], r):
                np.testing.assert_array_equal(a, c)
    finally:
        blockrnn.set_num_threads(saved)
    blockrnn.set_force_reference(True)
    try:
        for lengths in (SORTED, UNSORTED):
            ref = run(op, kw, attrs, lengths, g)
            blockrnn.set_force_reference(False)
            fast = run(op, kw, attrs, lengths, g)
            blockrnn.set_force_reference(True)
            for a, c in zip(ref[0] + ref[1], fast[0] + fast[1]):
                np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-12)
    finally:
        blockrnn.set_force_reference(False)
    del rng


@pytest.mark.parametrize("op", list(FAMILIES))
def test_validation(op):
    kw, attrs = problem(op, np.float32)
    fn = getattr(raw_ops, op)
    cases = [
        (np.arange(B - 1), "must have shape [7]"),
        (np.zeros((B, 1), np.int64), "rank 1"),
        (np.ones(B, np.float32), "must be an integer array"),
        (np.array([1.0] * (B - 1) + [np.nan]), "float64"),
        (np.array([1, -1] + [0] * (B - 2)), "seq_lengths[1] = -1"),
        (np.array([0, 0, T + 1] + [0] * (B - 3)), f"seq_lengths[2] = {T + 1}"),
        (np.array([2**63 - 1] + [0] * (B - 1)), "9223372036854775807"),
    ]
    for lengths, needle in cases:
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            fn(**kw, **attrs, seq_lengths=lengths)
        assert str(e.value).startswith(f"{op}: "), str(e.value)
        assert "seq_lengths" in str(e.value) and needle in str(e.value), str(e.value)


def test_signature_and_absent():
    import inspect
    for op, (grad_op, _, _) in FAMILIES.items():
        for name in (op, grad_op):
            p = inspect.signature(getattr(raw_ops, name)).parameters["seq_lengths"]
            assert p.default is None
    kw, attrs = problem("BlockGRU", np.float32)
    a = raw_ops.BlockGRU(**kw)
    b = raw_ops.BlockGRU(**kw, seq_lengths=None)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_torch_tensor_lengths():
    torch = pytest.importorskip("torch")
    kw, attrs = problem("BlockGRU", np.float32)
    a = raw_ops.BlockGRU(**kw, seq_lengths=torch.tensor(UNSORTED))
    b = raw_ops.BlockGRU(**kw, seq_lengths=UNSORTED)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
