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
    central differences (ε = 1e-6; docs/tolerances.md: 1e-6 · max(1, max|numeric|)), with seq_len_max = T
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


def _rank_message(op, name, rank, bad):
    """The core's message for an input of the wrong rank (src/core/validate.h)."""
    shape = "[" + ", ".join(str(n) for n in bad.shape) + "]"
    if name == "seq_len_max":
        return f"{op}: seq_len_max must be a scalar (rank 0), got shape {shape}"
    return f"{op}: {name} must be rank {rank}, got rank {bad.ndim} (shape {shape})"


@pytest.mark.parametrize("op", [r.op for r in OPS])
def test_validation_names_op_and_argument(op):
    """One more or one fewer dimension on any input: InvalidArgumentError (a ValueError) with
    the core's rank message for the op and the argument, whichever input it is (ranks are
    checked before anything else); another dtype: a message that starts with the op and names
    the argument."""
    row = ROWS[op]
    rng = np.random.default_rng(5)
    kw, attrs, _ = make_call(row, (3, 2, 3, 4, 2), np.float32, rng)
    op_function(op)(**kw, **attrs)

    def error(name, bad):
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            op_function(op)(**dict(kw, **{name: bad}), **attrs)
        return str(e.value)

    for name, v in kw.items():
        a = np.asarray(v)
        for bad in [a[..., None]] + ([a[0]] if a.ndim else []):
            assert error(name, bad) == _rank_message(op, name, a.ndim, bad)
        message = error(name, a.astype(np.float32 if name == "seq_len_max" else np.float64))
        assert message.startswith(op + ": ") and name in message, (name, message)


def _every_other(v):
    """v as a non-contiguous view: every other element of every axis of a larger array."""
    v = np.asarray(v)
    big = np.zeros(tuple(2 * d for d in v.shape), dtype=v.dtype)
    every_other = tuple(slice(None, None, 2) for _ in v.shape)
    big[every_other] = v
    return big[every_other]


@pytest.mark.parametrize("op", [r.op for r in OPS])
def test_any_memory_layout_and_every_float_dtype(op):
    """Fortran-order, non-contiguous (strided) and transposed-view inputs give bit for bit the
    outputs of C-contiguous ones (the core gathers strided inputs itself); float16, float32 and
    float64 inputs give outputs of that dtype."""
    row = ROWS[op]
    dims = (3, 5, 6, 7, 2)
    kw, attrs, _ = make_call(row, dims, np.float32, np.random.default_rng(2))
    if "use_peephole" in attrs:
        attrs["use_peephole"] = True  # the peephole vectors are read too
    want = op_function(op)(**kw, **attrs)
    layouts = {"fortran": np.asfortranarray, "strided": _every_other,
               "transposed": lambda v: np.ascontiguousarray(np.asarray(v).T).T}
    for layout, relayout in layouts.items():
        # (seq_len_max stays a scalar: np.asfortranarray would make it [1])
        args = {k: relayout(v) if np.ndim(v) else v for k, v in kw.items()}
        got = op_function(op)(**args, **attrs)
        for name, g, w in zip(want._fields, got, want):
            np.testing.assert_array_equal(g, w, err_msg=f"{op} {layout}: {name}")
    for dt in (np.float16, np.float32, np.float64):
        kw, attrs, _ = make_call(row, dims, dt, np.random.default_rng(3))
        out = op_function(op)(**kw, **attrs)
        assert all(a.dtype == dt for a in out), (dt, [a.dtype for a in out])
