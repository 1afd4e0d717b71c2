"""The generic Python op tester: every row of optable.py against TensorFlow (tf.raw_ops, float32,
randomized shapes, both paths), float64 finite differences for the full gradients, and validation
(every input's rank and dtype is an InvalidArgumentError naming the op and the argument). The
op-specific tests (attr semantics, value scales, TF quirks, float16 against TF) stay in the
per-op files; the C++ twin is tests/cpp/test_ops.cc."""
import inspect

import numpy as np
import pytest

import blockrnn
from optable import OPS, ROWS, make_call, op_function, random_dims, upstream_of

TF_ROWS = [r.op for r in OPS if r.tf]
FD_ROWS = [r.op for r in OPS if r.full_gradient]


def _tf_call(tf, row, kw, attrs):
    args = {k: tf.constant(v) for k, v in kw.items()}
    return [t.numpy() for t in getattr(tf.raw_ops, row.tf)(**args, **attrs)]


@pytest.mark.parametrize("op", TF_ROWS)
def test_matches_tf_raw_ops(tf, path, op, base_seed):
    """float32 on random shapes that cross tile edges, seq_len_max = T (TensorFlow's values past
    it are op-specific, tested in the per-op files)."""
    row = ROWS[op]
    for k in range(3):
        seed = (base_seed or 0) * 1000 + 17 * k + len(op)
        rng = np.random.default_rng(seed)
        kw, attrs, _ = make_call(row, random_dims(row, rng), np.float32, rng)
        got = op_function(op)(**kw, **attrs)
        want = _tf_call(tf, row, kw, attrs)
        rtol, atol = row.tol
        for name, g, w in zip(got._fields, got, want):
            assert g.shape == w.shape, (op, name)
            bound = rtol * np.abs(w) + atol * max(1.0, float(np.max(np.abs(w), initial=0)))
            err = np.abs(g.astype(np.float64) - w)
            assert np.all(err <= bound), \
                f"{op}.{name}: max excess {float(np.max(err - bound))} (seed {seed}, {attrs})"


@pytest.mark.parametrize("op", FD_ROWS)
def test_finite_differences_float64(path, op):
    """L = Σ upstream ⊙ forward output; every output (d L / d input of the forward op) against
    central differences (ε = 1e-6; SPEC A7: 1e-6 · max(1, max|numeric|)), with seq_len_max = T
    and < T, I = 0 too, clipping off (optable.FD_ATTRS)."""
    row = ROWS[op]
    seq = op.startswith("Block")
    for dims in ([(4, 2, 3, 3, 4), (5, 2, 3, 3, 3), (3, 1, 0, 2, 3)] if seq
                 else [(1, 3, 4, 5, 1), (1, 1, 1, 1, 1), (1, 2, 0, 3, 1)]):
        rng = np.random.default_rng(sum(dims) + len(op))
        kw, attrs, fattrs = make_call(row, dims, np.float64, rng, fd=True)
        grads = op_function(op)(**kw, **attrs)
        fwd = op_function(row.forward)
        fkw = {n: kw[n] for n in inspect.signature(fwd).parameters if n in kw}
        upstream = {upstream_of(n): kw[n] for n in kw if upstream_of(n)}

        def loss():
            out = fwd(**fkw, **fattrs)
            return sum(float(np.sum(getattr(out, o) * u)) for o, u in upstream.items()
                       if o in out._fields)

        for name, g in zip(grads._fields, grads):
            pname = name if name in fkw else name[:-5]
            p = fkw[pname]
            num = np.zeros_like(p)
            for idx in np.ndindex(p.shape):
                saved = p[idx]
                p[idx] = saved + 1e-6
                lp = loss()
                p[idx] = saved - 1e-6
                lm = loss()
                p[idx] = saved
                num[idx] = (lp - lm) / 2e-6
            assert g.dtype == np.float64
            scale = max(1.0, float(np.max(np.abs(num), initial=0)))
            assert np.max(np.abs(g - num), initial=0) <= 1e-6 * scale, (op, name, dims)


@pytest.mark.parametrize("op", [r.op for r in OPS])
def test_validation_names_op_and_argument(op):
    """One more dimension, or another dtype, on any input: InvalidArgumentError (a ValueError)
    whose message starts with the op and names the argument."""
    row = ROWS[op]
    rng = np.random.default_rng(5)
    kw, attrs, _ = make_call(row, (3, 2, 3, 4, 2), np.float32, rng)
    op_function(op)(**kw, **attrs)
    for name, v in kw.items():
        bad_values = [np.asarray(v)[..., None],
                      np.asarray(v).astype(np.float32 if name == "seq_len_max" else np.float64)]
        for bad in bad_values:
            with pytest.raises(blockrnn.InvalidArgumentError) as e:
                op_function(op)(**dict(kw, **{name: bad}), **attrs)
            message = str(e.value)
            assert message.startswith(op + ": ") and name in message, (name, message)
