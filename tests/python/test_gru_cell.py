"""GRUBlockCell, GRUBlockCellGrad and gradients.GRUBlockCell against tensorflow-cpu, finite
differences in float64, validation from Python, and the numpy/GIL contract (docs/ops.md)."""
import threading
import time

import numpy as np
import pytest

import blockrnn
from conftest import assert_close, draw_size

NAMES = ["x", "h_prev", "w_ru", "w_c", "b_ru", "b_c"]


def gru_inputs(rng, B, I, H, scale=1.0, dtype=np.float32):
    w = 1.0 / np.sqrt(max(I + H, 1))
    u = lambda shape, s: rng.uniform(-s, s, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((B, I), scale), h_prev=u((B, H), 1.0), w_ru=u((I + H, 2 * H), w * scale),
                w_c=u((I + H, H), w * scale), b_ru=u((2 * H,), scale), b_c=u((H,), scale))


def tf_full_backward(tf, inp, r, u, c, d_h):
    """TF's kernel plus what TF1's registered gradient computed in Python (docs/ops.md)."""
    d_x, d_h_prev, d_c_bar, d_ru = tf.raw_ops.GRUBlockCellGrad(**inp, r=r, u=u, c=c, d_h=d_h)
    xh = tf.concat([inp["x"], inp["h_prev"]], axis=1)
    xhr = tf.concat([inp["x"], inp["h_prev"] * r], axis=1)
    return dict(x=d_x, h_prev=d_h_prev,
                w_ru=tf.matmul(xh, d_ru, transpose_a=True),
                w_c=tf.matmul(xhr, d_c_bar, transpose_a=True),
                b_ru=tf.reduce_sum(d_ru, axis=0), b_c=tf.reduce_sum(d_c_bar, axis=0)), \
        dict(d_x=d_x, d_h_prev=d_h_prev, d_c_bar=d_c_bar, d_r_bar_u_bar=d_ru)


# 200 random cases in 8 groups, each group with its own seed; B, I, H drawn from sizes at,
# below and above SIMD widths, primes, 0 and 1, up to 512.
@pytest.mark.parametrize("group", range(8))
def test_matches_tensorflow(tf, path, group, base_seed):
    seed = (base_seed if base_seed is not None else 1000) + group
    rng = np.random.default_rng(seed)
    for case in range(25):
        B, I, H = draw_size(rng), draw_size(rng), draw_size(rng)
        if B * (I + H) * H > 8_000_000:  # keep the reference path's plain loops quick
            H = min(H, 65)
        # Value scale: 1 is docs/tolerances.md's unit scale; 3 and 8 push pre-activations to |z| ~ 10+
        # where σ and tanh saturate (TF returns exactly 0/±1 there, libm nearly so).
        scale = float(rng.choice([1.0, 1.0, 3.0, 8.0]))
        inp = gru_inputs(rng, B, I, H, scale)
        what = f"seed {seed} case {case} B={B} I={I} H={H} scale={scale}"
        # docs/tolerances.md: 1e-5 at unit scale. The absolute rounding error of a pre-activation
        # (GEMM of depth I+H, accumulated in a different order than TF's oneDNN sgemm) grows
        # with its magnitude, so the absolute tolerance scales with the value scale.
        tol = 1e-5 * scale
        got = blockrnn.raw_ops.GRUBlockCell(**inp)
        want = tf.raw_ops.GRUBlockCell(**inp)
        for k, name in enumerate(["r", "u", "c", "h"]):
            assert_close(getattr(got, name), want[k], tol, tol, f"{name} {what}", seed)
        r, u, c = want[0].numpy(), want[1].numpy(), want[2].numpy()
        d_h = rng.uniform(-1, 1, size=(B, H)).astype(np.float32)
        want_full, want_kernel = tf_full_backward(tf, inp, r, u, c, d_h)
        got_kernel = blockrnn.raw_ops.GRUBlockCellGrad(**inp, r=r, u=u, c=c, d_h=d_h)
        got_full = blockrnn.gradients.GRUBlockCell(**inp, r=r, u=u, c=c, d_h=d_h)
        for name, w in want_kernel.items():
            if H == 0 and name == "d_x":
                # TF never writes d_x when H = 0 (uninitialised memory); ours is zeros.
                assert not np.any(got_kernel.d_x)
                continue
            assert_close(getattr(got_kernel, name), w, tol, tol, f"{name} {what}", seed)
        for name, w in want_full.items():
            if H == 0 and name == "x":
                continue
            # Weight gradients sum over the batch: the error grows with sqrt(B) terms of size
            # scale (log2-depth scaling would be tighter; this is conservative).
            t = tol * max(1.0, np.sqrt(B)) if name.startswith(("w_", "b_")) else tol
            assert_close(getattr(got_full, name), w, t, t, f"d_{name} {what}", seed)


def test_outputs_and_fields(tf):
    rng = np.random.default_rng(1)
    inp = gru_inputs(rng, 2, 3, 4)
    out = blockrnn.raw_ops.GRUBlockCell(**inp, name="ignored")
    assert out._fields == ("r", "u", "c", "h")
    assert all(a.dtype == np.float32 and a.shape == (2, 4) for a in out)
    g = blockrnn.raw_ops.GRUBlockCellGrad(**inp, r=out.r, u=out.u, c=out.c, d_h=out.h)
    assert g._fields == ("d_x", "d_h_prev", "d_c_bar", "d_r_bar_u_bar")
    assert g.d_r_bar_u_bar.shape == (2, 8)
    full = blockrnn.gradients.GRUBlockCell(**inp, r=out.r, u=out.u, c=out.c, d_h=out.h)
    assert full._fields == tuple(NAMES)
    for name in NAMES:
        assert getattr(full, name).shape == inp[name].shape


def test_lists_take_the_dtype_of_the_arrays():
    """(Memory layouts and dtypes of every op: test_ops.py's generic tester.)"""
    rng = np.random.default_rng(2)
    inp = gru_inputs(rng, 5, 6, 7)
    want = blockrnn.raw_ops.GRUBlockCell(**inp)
    # Lists take the dtype of the array arguments.
    lists = dict(inp, b_c=inp["b_c"].tolist())
    np.testing.assert_array_equal(blockrnn.raw_ops.GRUBlockCell(**lists).h, want.h)


def test_dtype_errors():
    rng = np.random.default_rng(3)
    inp = gru_inputs(rng, 2, 3, 4)
    with pytest.raises(blockrnn.InvalidArgumentError, match="w_c must have the dtype of x"):
        blockrnn.raw_ops.GRUBlockCell(**dict(inp, w_c=inp["w_c"].astype(np.float64)))
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="x must be float16, bfloat16, float32 or float64, got int64"):
        blockrnn.raw_ops.GRUBlockCell(**dict(inp, x=np.ones((2, 3), dtype=np.int64)))
    with pytest.raises(blockrnn.InvalidArgumentError, match="got int32"):
        blockrnn.raw_ops.GRUBlockCell(**dict(inp, x=np.ones((2, 3), dtype=np.int32)))
    with pytest.raises(blockrnn.InvalidArgumentError, match="got bool"):
        blockrnn.raw_ops.GRUBlockCell(**dict(inp, b_c=np.ones(4, dtype=bool)))
    with pytest.raises(blockrnn.InvalidArgumentError, match="x must be float16, bfloat16, float32 or float64, got complex64"):
        blockrnn.raw_ops.GRUBlockCell(**dict(inp, x=np.ones((2, 3), dtype=np.complex64)))


def test_float16_within_tensorflow_tolerance(tf):
    rng = np.random.default_rng(4)
    inp16 = gru_inputs(rng, 8, 16, 32, dtype=np.float16)
    inp32 = {k: v.astype(np.float32) for k, v in inp16.items()}
    got = blockrnn.raw_ops.GRUBlockCell(**inp16)
    want = tf.raw_ops.GRUBlockCell(**inp32)  # TF has no half GRU: its float32 on the same values
    for k, name in enumerate(["r", "u", "c", "h"]):
        assert_close(getattr(got, name), want[k], 8e-3, 8e-4, name, 4)


VALIDATION = [
    # (argument, bad shape, expected message); every input's rank: test_ops.py's generic tester.
    ("h_prev", (5, 16), "h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]"),
    ("w_ru", (18, 32), "w_ru must have shape [19, 32]"),
    ("w_ru", (19, 31), "w_ru must have shape [19, 32]"),
    ("w_c", (19, 15), "w_c must have shape [19, 16]"),
    # An x of the wrong width: both weights agree on another input_size, so x is named first.
    ("x", (4, 8), "GRUBlockCell: x and the weights disagree on input_size: x has input_size 8 "
                  "(its last dimension), but w_ru and w_c have 19 rows, which are input_size + "
                  "cell_size for input_size 3 (cell_size 16): either x must be [4, 3], or w_ru "
                  "must have shape [24, 32] (input_size + cell_size, 2 * cell_size), got [19, 32] "
                  "and w_c [24, 16]"),
    ("b_ru", (31,), "b_ru must have shape [32] (2 * cell_size), got [31]"),
    ("b_c", (17,), "b_c must have shape [16] (cell_size), got [17]"),
]


@pytest.mark.parametrize("arg,shape,message", VALIDATION)
def test_validation(arg, shape, message):
    rng = np.random.default_rng(5)
    inp = gru_inputs(rng, 4, 3, 16)
    bad = dict(inp, **{arg: np.zeros(shape, np.float32)})
    with pytest.raises(blockrnn.InvalidArgumentError) as e:
        blockrnn.raw_ops.GRUBlockCell(**bad)
    assert message in str(e.value)
    out = blockrnn.raw_ops.GRUBlockCell(**inp)
    for op in (blockrnn.raw_ops.GRUBlockCellGrad, blockrnn.gradients.GRUBlockCell):
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            op(**bad, r=out.r, u=out.u, c=out.c, d_h=out.h)
        assert message.split(": ", 1)[-1] in str(e.value)


@pytest.mark.parametrize("arg", ["r", "u", "c", "d_h"])
def test_grad_validation(arg):
    rng = np.random.default_rng(6)
    inp = gru_inputs(rng, 4, 3, 16)
    out = blockrnn.raw_ops.GRUBlockCell(**inp)
    kw = dict(inp, r=out.r, u=out.u, c=out.c, d_h=out.h)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=rf"GRUBlockCellGrad: {arg} must have shape \[4, 16\] "
                             rf"\(batch_size, cell_size\), got \[4, 15\]"):
        blockrnn.raw_ops.GRUBlockCellGrad(**dict(kw, **{arg: np.zeros((4, 15), np.float32)}))
    with pytest.raises(blockrnn.InvalidArgumentError, match=f"{arg} must be rank 2"):
        blockrnn.gradients.GRUBlockCell(**dict(kw, **{arg: np.zeros(4, np.float32)}))


def test_keyword_contract():
    rng = np.random.default_rng(7)
    inp = gru_inputs(rng, 2, 3, 4)
    with pytest.raises(TypeError, match="missing required keyword argument"):
        blockrnn.raw_ops.GRUBlockCell(x=inp["x"])
    with pytest.raises(TypeError, match="unexpected keyword"):
        blockrnn.raw_ops.GRUBlockCell(**inp, bogus=1)
    with pytest.raises(TypeError):
        blockrnn.raw_ops.GRUBlockCell(*inp.values())


def test_empty_shapes():
    rng = np.random.default_rng(8)
    for B, I, H in [(0, 3, 4), (2, 0, 4), (2, 3, 0), (0, 0, 0)]:
        inp = gru_inputs(rng, B, I, H)
        out = blockrnn.raw_ops.GRUBlockCell(**inp)
        assert out.h.shape == (B, H)
        g = blockrnn.gradients.GRUBlockCell(**inp, r=out.r, u=out.u, c=out.c, d_h=out.h)
        assert g.w_ru.shape == (I + H, 2 * H) and g.x.shape == (B, I)


def test_threads_setting():
    saved = blockrnn.get_num_threads()
    blockrnn.set_num_threads(1)
    assert blockrnn.get_num_threads() == 1
    blockrnn.set_num_threads(saved)
    with pytest.raises(blockrnn.InvalidArgumentError):
        blockrnn.set_num_threads(0)


def test_gil_released_while_computing():
    """While one thread runs a long op, another Python thread keeps running."""
    rng = np.random.default_rng(9)
    inp = gru_inputs(rng, 256, 512, 512, dtype=np.float64)
    saved = blockrnn.force_reference()
    blockrnn.set_force_reference(True)  # the plain-loop path: a long call (~1 s)
    ticks, done = [0], threading.Event()

    def spin():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0)

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = ticks[0]
        start = time.perf_counter()
        blockrnn.raw_ops.GRUBlockCell(**inp)
        elapsed = time.perf_counter() - start
        during = ticks[0] - before
    finally:
        done.set()
        t.join()
        blockrnn.set_force_reference(saved)
    assert elapsed > 0.05
    assert during > 100, f"only {during} ticks in {elapsed:.2f} s: the GIL was held"
