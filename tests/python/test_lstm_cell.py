"""LSTMBlockCell, LSTMBlockCellGrad and gradients.LSTMBlockCell against tensorflow-cpu over
random shapes x attrs, float16 against TensorFlow's float32, TensorFlow's golden two-layer
values, finite differences in float64 of all eight gradients, the straight-through clip, and
validation from Python. Shape letters: B batch, I input size, H cell size."""
import numpy as np
import pytest

import blockrnn
from conftest import assert_close, draw_size

NAMES = ["x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"]
OUTS = ["i", "cs", "f", "o", "ci", "co", "h"]
GATES = ["i", "cs", "f", "o", "ci", "co"]
KERNEL_GRADS = ["cs_prev_grad", "dicfo", "wci_grad", "wcf_grad", "wco_grad"]


def lstm_inputs(rng, B, I, H, cs_scale=1.0, dtype=np.float32):
    """Unit-scale inputs, weights ~U(±1/sqrt(I+H)) (docs/tolerances.md); cs_prev ~U(±cs_scale), so a
    cs_scale above the clip makes |cs| exceed it."""
    w = 1.0 / np.sqrt(I + H)
    u = lambda shape, s: rng.uniform(-s, s, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((B, I), 1.0), cs_prev=u((B, H), cs_scale), h_prev=u((B, H), 1.0),
                w=u((I + H, 4 * H), w), wci=u((H,), 1.0), wcf=u((H,), 1.0), wco=u((H,), 1.0),
                b=u((4 * H,), 1.0))


def tf_full_backward(tf, inp, gates, cs_grad, h_grad, use_peephole):
    """TF's kernel plus what TF1's registered gradient computed in Python (docs/ops.md)."""
    k = tf.raw_ops.LSTMBlockCellGrad(**inp, **gates, cs_grad=cs_grad, h_grad=h_grad,
                                     use_peephole=use_peephole)
    kernel = dict(zip(KERNEL_GRADS, k))
    dicfo = kernel["dicfo"]
    I = inp["x"].shape[1]
    xh = tf.concat([inp["x"], inp["h_prev"]], axis=1)
    xh_grad = tf.matmul(dicfo, inp["w"], transpose_b=True)
    full = dict(x=xh_grad[:, :I], cs_prev=kernel["cs_prev_grad"], h_prev=xh_grad[:, I:],
                w=tf.matmul(xh, dicfo, transpose_a=True), wci=kernel["wci_grad"],
                wcf=kernel["wcf_grad"], wco=kernel["wco_grad"],
                b=tf.raw_ops.BiasAddGrad(out_backprop=dicfo))
    return full, kernel


# (id, attrs passed (None: omitted, the op's defaults), cs_prev scale, what the clip must do)
ATTR_CASES = [
    ("omitted", None, 1.0, None),
    ("omitted_large_state", None, 5.0, "active"),  # the default clip at 3 really clips
    ("explicit_defaults", dict(forget_bias=1.0, cell_clip=3.0, use_peephole=False), 1.0, None),
    ("peephole", dict(use_peephole=True), 1.0, None),
    ("forget_bias", dict(forget_bias=-0.7, cell_clip=-1.0, use_peephole=True), 1.0, None),
    ("forget_bias_no_peephole", dict(forget_bias=2.5), 1.0, None),
    ("clip_active", dict(cell_clip=0.5, use_peephole=True), 4.0, "active"),
    ("clip_active_no_peephole", dict(cell_clip=1.25, forget_bias=0.0), 4.0, "active"),
    ("clip_off_negative", dict(cell_clip=-1.0, use_peephole=True), 5.0, "off"),
    ("clip_off_zero", dict(cell_clip=0.0), 5.0, "off"),
]


# 300 random cases: 10 attr cases x 3 groups x 10 shapes, each group with its own seed; B and H
# at least 1 (the cell rejects empty states), I may be 0; sizes at, below and above SIMD widths,
# primes and 1, up to 512.
@pytest.mark.parametrize("group", range(3))
@pytest.mark.parametrize("case_id,attrs,cs_scale,clip", ATTR_CASES,
                         ids=[c[0] for c in ATTR_CASES])
def test_matches_tensorflow(tf, path, group, case_id, attrs, cs_scale, clip, base_seed):
    seed = (base_seed if base_seed is not None else 3000) + 97 * group + \
        sum(map(ord, case_id))
    rng = np.random.default_rng(seed)
    kw = attrs or {}
    use_peephole = kw.get("use_peephole", False)
    clip_value = kw.get("cell_clip", 3.0)
    clipped, above = 0, 0
    for case in range(10):
        B, I, H = draw_size(rng, False), draw_size(rng), draw_size(rng, False)
        if B * (I + H) * H > 4_000_000:  # keep the reference path's plain loops quick
            H = min(H, 65)
        inp = lstm_inputs(rng, B, I, H, cs_scale)
        what = f"{case_id} seed {seed} case {case} B={B} I={I} H={H}"
        # docs/tolerances.md: 1e-5, for every output and gradient, also with states up to 5 and batch
        # sums over up to 509 rows (measured worst: ~6e-7 forward, ~4e-6 relative for w's
        # gradient at B=509; the element-wise backward usually matches bit for bit).
        tol = 1e-5
        got = blockrnn.raw_ops.LSTMBlockCell(**inp, **kw)
        want = [t.numpy() for t in tf.raw_ops.LSTMBlockCell(**inp, **kw)]
        for k, name in enumerate(OUTS):
            assert_close(getattr(got, name), want[k], tol, tol, f"{name} {what}", seed)
        clipped += int(np.sum(np.abs(want[1]) == np.float32(clip_value)))
        above += int(np.sum(np.abs(want[1]) > 3.0))

        # The backward on TF's forward outputs, with random upstream gradients.
        gates = dict(zip(GATES, want[:6]))
        cs_grad = rng.uniform(-1, 1, size=(B, H)).astype(np.float32)
        h_grad = rng.uniform(-1, 1, size=(B, H)).astype(np.float32)
        want_full, want_kernel = tf_full_backward(tf, inp, gates, cs_grad, h_grad, use_peephole)
        got_kernel = blockrnn.raw_ops.LSTMBlockCellGrad(**inp, **gates, cs_grad=cs_grad,
                                                        h_grad=h_grad, use_peephole=use_peephole)
        # The forward call's keywords pass through unchanged (docs/ops.md).
        got_full = blockrnn.gradients.LSTMBlockCell(**inp, **kw, **gates, cs_grad=cs_grad,
                                                    h_grad=h_grad)
        for name, w in want_kernel.items():
            assert_close(getattr(got_kernel, name), w, tol, tol, f"{name} {what}", seed)
        for name, w in want_full.items():
            assert_close(getattr(got_full, name), w, tol, tol, f"d_{name} {what}", seed)
    if clip == "active":
        assert clipped > 0, f"{case_id}: the clip was never active (seed {seed})"
    if clip == "off":
        assert clipped == 0 and above > 0, f"{case_id}: |cs| never exceeded 3 (seed {seed})"


def test_outputs_fields_and_signatures():
    rng = np.random.default_rng(1)
    inp = lstm_inputs(rng, 2, 3, 4)
    out = blockrnn.raw_ops.LSTMBlockCell(**inp, name="ignored")
    assert out._fields == tuple(OUTS)
    assert all(a.dtype == np.float32 and a.shape == (2, 4) for a in out)
    gates = {n: getattr(out, n) for n in GATES}
    g = blockrnn.raw_ops.LSTMBlockCellGrad(**inp, **gates, cs_grad=out.cs, h_grad=out.h,
                                           use_peephole=False)
    assert g._fields == tuple(KERNEL_GRADS)
    assert g.dicfo.shape == (2, 16) and g.wci_grad.shape == (4,)
    full = blockrnn.gradients.LSTMBlockCell(**inp, **gates, cs_grad=out.cs, h_grad=out.h)
    assert full._fields == tuple(NAMES)
    for name in NAMES:
        assert getattr(full, name).shape == inp[name].shape
    import inspect
    sig = inspect.signature(blockrnn.raw_ops.LSTMBlockCell).parameters
    assert (sig["forget_bias"].default, sig["cell_clip"].default,
            sig["use_peephole"].default) == (1.0, 3.0, False)
    sig = inspect.signature(blockrnn.raw_ops.LSTMBlockCellGrad).parameters
    assert sig["use_peephole"].default is inspect.Parameter.empty
    assert list(sig)[:16] == NAMES + GATES + ["cs_grad", "h_grad"]
    sig = inspect.signature(blockrnn.gradients.LSTMBlockCell).parameters
    assert (sig["forget_bias"].default, sig["cell_clip"].default,
            sig["use_peephole"].default) == (1.0, 3.0, False)


def test_keyword_contract():
    rng = np.random.default_rng(7)
    inp = lstm_inputs(rng, 2, 3, 4)
    out = blockrnn.raw_ops.LSTMBlockCell(**inp)
    gates = {n: getattr(out, n) for n in GATES}
    with pytest.raises(TypeError, match="missing required keyword argument"):
        blockrnn.raw_ops.LSTMBlockCell(x=inp["x"])
    with pytest.raises(TypeError, match=r"missing required keyword argument\(s\): use_peephole"):
        blockrnn.raw_ops.LSTMBlockCellGrad(**inp, **gates, cs_grad=out.cs, h_grad=out.h)
    with pytest.raises(TypeError, match="unexpected keyword"):
        blockrnn.raw_ops.LSTMBlockCellGrad(**inp, **gates, cs_grad=out.cs, h_grad=out.h,
                                           use_peephole=False, cell_clip=1.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        blockrnn.raw_ops.LSTMBlockCell(**inp, clip=1.0)
    with pytest.raises(blockrnn.InvalidArgumentError, match="attr use_peephole must be a bool"):
        blockrnn.raw_ops.LSTMBlockCell(**inp, use_peephole=1)
    with pytest.raises(blockrnn.InvalidArgumentError, match="attr cell_clip must be a float"):
        blockrnn.raw_ops.LSTMBlockCell(**inp, cell_clip="3")
    # Integer attr values are floats.
    np.testing.assert_array_equal(blockrnn.raw_ops.LSTMBlockCell(**inp, forget_bias=1).h, out.h)


def loss_and_grads(inp, attrs, cs_grad, h_grad):
    out = blockrnn.raw_ops.LSTMBlockCell(**inp, **attrs)
    gates = {n: getattr(out, n) for n in GATES}
    g = blockrnn.gradients.LSTMBlockCell(**inp, **attrs, **gates, cs_grad=cs_grad, h_grad=h_grad)
    return float(np.sum(out.cs * cs_grad) + np.sum(out.h * h_grad)), g, out


def test_clip_is_straight_through(tf, path):
    """With the clip active the backward treats it as the identity, as TensorFlow does (docs/ops.md): where cs is held at ±cell_clip the true derivative is 0, but the gradient flows."""
    rng = np.random.default_rng(21)
    B, I, H, clip = 4, 3, 8, 0.6
    inp = lstm_inputs(rng, B, I, H, cs_scale=3.0, dtype=np.float64)
    attrs = dict(cell_clip=clip, use_peephole=True)
    cs_grad, h_grad = rng.uniform(-1, 1, size=(B, H)), rng.uniform(-1, 1, size=(B, H))
    _, g, out = loss_and_grads(inp, attrs, cs_grad, h_grad)
    at_clip = np.abs(out.cs) == clip
    assert at_clip.any() and (~at_clip).any()
    # Straight-through: dcs (the kernel's formula, clip ignored) times f is ∂/∂cs_prev.
    do = out.o * (1 - out.o) * h_grad * out.co
    dcs = (1 - out.co ** 2) * h_grad * out.o + cs_grad + do * inp["wco"]
    di = out.i * (1 - out.i) * dcs * out.ci
    df = out.f * (1 - out.f) * dcs * inp["cs_prev"]
    np.testing.assert_allclose(g.cs_prev, dcs * out.f + di * inp["wci"] + df * inp["wcf"],
                               rtol=1e-13, atol=1e-14)
    # Finite differences disagree exactly where the clip holds.
    eps = 1e-7
    p = inp["cs_prev"]
    num = np.zeros_like(p)
    for idx in np.ndindex(p.shape):
        saved = p[idx]
        p[idx] = saved + eps
        lp, _, _ = loss_and_grads(inp, attrs, cs_grad, h_grad)
        p[idx] = saved - eps
        lm, _, _ = loss_and_grads(inp, attrs, cs_grad, h_grad)
        p[idx] = saved
        num[idx] = (lp - lm) / (2 * eps)
    # cs_prev feeds only its own element (and, with peepholes, i and f of that element).
    np.testing.assert_allclose(num[~at_clip], g.cs_prev[~at_clip], rtol=1e-6, atol=1e-7)
    assert np.all(np.abs(num[at_clip] - g.cs_prev[at_clip]) > 1e-3)
    # TensorFlow's kernel does the same (float32).
    inp32 = {k: v.astype(np.float32) for k, v in inp.items()}
    gates = {n: getattr(out, n).astype(np.float32) for n in GATES}
    want = tf.raw_ops.LSTMBlockCellGrad(**inp32, **gates, cs_grad=cs_grad.astype(np.float32),
                                        h_grad=h_grad.astype(np.float32), use_peephole=True)
    assert_close(g.cs_prev, want[0], 1e-5, 1e-5, "cs_prev_grad", 21)


def test_golden_two_layer_values(tf, path):
    """docs/ops.md: two stacked LSTMBlockCell(2) layers, every weight 0.5, bias 0, x = [[1, 1]],
    every state 0.1, forget_bias 1, no clip (TF's Python cell passed cell_clip=-1), no
    peepholes. TensorFlow's values: layer 1 (cs, h) = (0.68967271, 0.44848421), layer 2
    (0.39897051, 0.24024698)."""
    for dt in (np.float32, np.float64):
        x = np.ones((1, 2), dt)
        state = np.full((1, 2), 0.1, dt)
        w = np.full((4, 8), 0.5, dt)
        zeros = dict(wci=np.zeros(2, dt), wcf=np.zeros(2, dt), wco=np.zeros(2, dt),
                     b=np.zeros(8, dt))
        kw = dict(cs_prev=state, h_prev=state, w=w, **zeros, cell_clip=-1.0)
        l1 = blockrnn.raw_ops.LSTMBlockCell(x=x, **kw)
        l2 = blockrnn.raw_ops.LSTMBlockCell(x=l1.h, **kw)
        np.testing.assert_allclose(l1.cs, [[0.68967271] * 2], rtol=0, atol=2e-7)
        np.testing.assert_allclose(l1.h, [[0.44848421] * 2], rtol=0, atol=2e-7)
        np.testing.assert_allclose(l2.cs, [[0.39897051] * 2], rtol=0, atol=2e-7)
        np.testing.assert_allclose(l2.h, [[0.24024698] * 2], rtol=0, atol=2e-7)
        if dt == np.float32:  # and today's TensorFlow still gives them
            t1 = tf.raw_ops.LSTMBlockCell(x=x, **kw)
            t2 = tf.raw_ops.LSTMBlockCell(x=t1[6], **kw)
            np.testing.assert_allclose(t2[6].numpy(), [[0.24024698] * 2], rtol=0, atol=2e-7)


@pytest.mark.parametrize("use_peephole", [False, True])
def test_float16_within_tensorflow_tolerance(tf, path, use_peephole):
    """float16 (stored half, computed in float32, docs/design.md) within TensorFlow's own fp16
    tolerance (rtol 8e-3, atol 8e-4) of TensorFlow's float32 result on the same half values."""
    rng = np.random.default_rng(4 + use_peephole)
    # (64, 256, 256): a GEMM depth of 512, where TensorFlow's own half kernel (which appears
    # to accumulate in half) misses this tolerance by up to 4x; blockrnn stays near 5% of it.
    for B, I, H in [(8, 16, 32), (3, 5, 7), (1, 0, 9), (33, 17, 64), (64, 256, 256)]:
        inp16 = lstm_inputs(rng, B, I, H, cs_scale=2.0, dtype=np.float16)
        inp32 = {k: v.astype(np.float32) for k, v in inp16.items()}
        attrs = dict(use_peephole=use_peephole, cell_clip=1.5)  # half-representable attrs
        got = blockrnn.raw_ops.LSTMBlockCell(**inp16, **attrs)
        assert all(a.dtype == np.float16 for a in got)
        want = [t.numpy() for t in tf.raw_ops.LSTMBlockCell(**inp32, **attrs)]
        for k, name in enumerate(OUTS):
            assert_close(getattr(got, name), want[k], 8e-3, 8e-4, f"{name} {B, I, H}", 4)
        # The backward, on the same half-rounded forward values.
        gates16 = {n: want[k].astype(np.float16) for k, n in enumerate(GATES)}
        gates32 = {n: v.astype(np.float32) for n, v in gates16.items()}
        cs_grad = rng.uniform(-1, 1, size=(B, H)).astype(np.float16)
        h_grad = rng.uniform(-1, 1, size=(B, H)).astype(np.float16)
        got_full = blockrnn.gradients.LSTMBlockCell(**inp16, **attrs, **gates16,
                                                    cs_grad=cs_grad, h_grad=h_grad)
        want_full, _ = tf_full_backward(tf, inp32, gates32, cs_grad.astype(np.float32),
                                        h_grad.astype(np.float32), use_peephole)
        for name, w in want_full.items():
            assert getattr(got_full, name).dtype == np.float16
            assert_close(getattr(got_full, name), w, 8e-3, 8e-4, f"d_{name} {B, I, H}", 4)


def test_float16_attrs_are_rounded_to_half(tf):
    """As TensorFlow's half kernel: forget_bias and cell_clip are converted to half first."""
    rng = np.random.default_rng(6)
    inp16 = lstm_inputs(rng, 4, 5, 6, cs_scale=3.0, dtype=np.float16)
    got = blockrnn.raw_ops.LSTMBlockCell(**inp16, forget_bias=0.1, cell_clip=0.7)
    inp32 = {k: v.astype(np.float32) for k, v in inp16.items()}
    ref = blockrnn.raw_ops.LSTMBlockCell(**inp32, forget_bias=float(np.float16(0.1)),
                                         cell_clip=float(np.float16(0.7)))
    for name in OUTS:
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=2 ** -11,
                                   atol=1e-7)
    assert np.any(np.abs(got.cs) == np.float16(0.7))
    want = tf.raw_ops.LSTMBlockCell(**inp16, forget_bias=0.1, cell_clip=0.7)
    assert np.array_equal(np.abs(got.cs) == np.float16(0.7), np.abs(want[1].numpy()) ==
                          np.float16(0.7))
    # A positive clip that rounds to 0 in half clips to ±0, as in TensorFlow.
    tiny = blockrnn.raw_ops.LSTMBlockCell(**inp16, cell_clip=1e-9)
    assert not np.any(tiny.cs)
    assert not np.any(tf.raw_ops.LSTMBlockCell(**inp16, cell_clip=1e-9)[1].numpy())


def test_nan_propagates_through_the_clip(tf):
    """min(max(NaN, −c), c) is NaN on TensorFlow's CPU kernel, and here; a NaN cell_clip
    disables clipping (NaN > 0 is false)."""
    rng = np.random.default_rng(8)
    inp = lstm_inputs(rng, 8, 3, 16, cs_scale=5.0)
    inp["cs_prev"][0, 0] = inp["cs_prev"][3, 5] = np.nan
    for clip in (0.5, float("nan"), -1.0):
        got = blockrnn.raw_ops.LSTMBlockCell(**inp, cell_clip=clip)
        want = tf.raw_ops.LSTMBlockCell(**inp, cell_clip=clip)
        for k, name in enumerate(OUTS):
            g, w = getattr(got, name), want[k].numpy()
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))  # the same NaNs …
            ok = ~np.isnan(w)
            assert_close(g[ok], w[ok], 1e-5, 1e-5, f"{name} clip={clip}", 8)  # … and values
        assert np.isnan(got.cs[0, 0]) and np.isnan(got.cs[3, 5])


def test_dtype_errors():
    """(Memory layouts and dtypes of every op: test_ops.py's generic tester.)"""
    inp = lstm_inputs(np.random.default_rng(3), 5, 6, 7)
    with pytest.raises(blockrnn.InvalidArgumentError, match="wco must have the dtype of x"):
        blockrnn.raw_ops.LSTMBlockCell(**dict(inp, wco=inp["wco"].astype(np.float64)))
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="cs_prev must be float16, bfloat16, float32 or float64, got int64"):
        blockrnn.raw_ops.LSTMBlockCell(**dict(inp, cs_prev=np.ones((5, 7), dtype=np.int64)))


VALIDATION = [
    # (argument, bad shape, expected message); B=4, I=3, H=16. Dimensions (every input's rank:
    # test_ops.py's generic tester).
    ("cs_prev", (5, 16), "cs_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]"),
    ("h_prev", (5, 16), "h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]"),
    ("h_prev", (4, 15), "h_prev must have shape [4, 16]"),
    # Only w's rows off: x or w may be wrong (input_size comes from x), so both are named.
    ("w", (18, 64), "LSTMBlockCell: x and w disagree on input_size: x has input_size 3 (its last "
                    "dimension), but w's 18 rows are input_size + cell_size for input_size 2 "
                    "(cell_size 16): either x must be [4, 2], or w must have shape [19, 64] "
                    "(input_size + cell_size, 4 * cell_size), got [18, 64]"),
    ("x", (4, 8), "LSTMBlockCell: x and w disagree on input_size: x has input_size 8 (its last "
                  "dimension), but w's 19 rows are input_size + cell_size for input_size 3 "
                  "(cell_size 16): either x must be [4, 3], or w must have shape [24, 64]"),
    ("w", (19, 60), "w must have shape [19, 64]"),
    # Peephole lengths are checked even without peepholes (newer TensorFlow).
    ("wci", (3,), "wci must have shape [16] (cell_size), got [3]"),
    ("wcf", (17,), "wcf must have shape [16] (cell_size), got [17]"),
    ("wco", (0,), "wco must have shape [16] (cell_size), got [0]"),
    # b exactly [4H] (TensorFlow's BlockLSTMGrad accepted 4H+1 .. 4H+3).
    ("b", (67,), "b must have shape [64] (4 * cell_size), got [67]"),
    ("b", (63,), "b must have shape [64] (4 * cell_size), got [63]"),
    # Emptiness, as TensorFlow (#58270).
    ("cs_prev", (4, 0), "cs_prev is empty, got shape [4, 0]"),
]


@pytest.mark.parametrize("arg,shape,message", VALIDATION)
def test_validation(arg, shape, message):
    rng = np.random.default_rng(5)
    inp = lstm_inputs(rng, 4, 3, 16)
    bad = dict(inp, **{arg: np.zeros(shape, np.float32)})
    for use_peephole in (False, True):
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            blockrnn.raw_ops.LSTMBlockCell(**bad, use_peephole=use_peephole)
        assert message in str(e.value)
    out = blockrnn.raw_ops.LSTMBlockCell(**inp)
    gates = {n: getattr(out, n) for n in GATES}
    for op, prefix in ((blockrnn.raw_ops.LSTMBlockCellGrad, "LSTMBlockCellGrad: "),
                       (blockrnn.gradients.LSTMBlockCell, "gradients.LSTMBlockCell: ")):
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            op(**bad, **gates, cs_grad=out.cs, h_grad=out.h, use_peephole=False)
        assert prefix + message.split(": ", 1)[-1] in str(e.value)


@pytest.mark.parametrize("B,H", [(0, 16), (0, 0), (4, 0)])
def test_empty_states_are_rejected(B, H):
    rng = np.random.default_rng(9)
    inp = lstm_inputs(rng, B, 3, H)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=rf"LSTMBlockCell: cs_prev is empty, got shape \[{B}, {H}\]"):
        blockrnn.raw_ops.LSTMBlockCell(**inp)
    z = np.zeros((B, H), np.float32)
    gates = {n: z for n in GATES}
    with pytest.raises(blockrnn.InvalidArgumentError, match="LSTMBlockCellGrad: cs_prev is empty"):
        blockrnn.raw_ops.LSTMBlockCellGrad(**inp, **gates, cs_grad=z, h_grad=z, use_peephole=True)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="gradients.LSTMBlockCell: cs_prev is empty"):
        blockrnn.gradients.LSTMBlockCell(**inp, **gates, cs_grad=z, h_grad=z)


def test_no_input_features(tf):
    """I = 0 is fine: the gates come from h_prev alone."""
    rng = np.random.default_rng(10)
    inp = lstm_inputs(rng, 3, 0, 5)
    got = blockrnn.raw_ops.LSTMBlockCell(**inp, use_peephole=True)
    want = tf.raw_ops.LSTMBlockCell(**inp, use_peephole=True)
    for k, name in enumerate(OUTS):
        assert_close(getattr(got, name), want[k], 1e-5, 1e-5, name, 10)
    gates = {n: getattr(got, n) for n in GATES}
    g = blockrnn.gradients.LSTMBlockCell(**inp, **gates, cs_grad=got.cs, h_grad=got.h,
                                         use_peephole=True)
    assert g.x.shape == (3, 0) and g.w.shape == (5, 20)


@pytest.mark.parametrize("arg", GATES + ["cs_grad", "h_grad"])
def test_grad_validation(arg):
    rng = np.random.default_rng(6)
    inp = lstm_inputs(rng, 4, 3, 16)
    out = blockrnn.raw_ops.LSTMBlockCell(**inp)
    kw = dict(inp, **{n: getattr(out, n) for n in GATES}, cs_grad=out.cs, h_grad=out.h)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=rf"LSTMBlockCellGrad: {arg} must have shape \[4, 16\] "
                             rf"\(batch_size, cell_size\), got \[4, 15\]"):
        blockrnn.raw_ops.LSTMBlockCellGrad(**dict(kw, **{arg: np.zeros((4, 15), np.float32)}),
                                           use_peephole=True)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=rf"LSTMBlockCellGrad: {arg} must have shape \[4, 16\].*got \[3, 16\]"):
        blockrnn.raw_ops.LSTMBlockCellGrad(**dict(kw, **{arg: np.zeros((3, 16), np.float32)}),
                                           use_peephole=False)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=f"gradients.LSTMBlockCell: {arg} must be rank 2"):
        blockrnn.gradients.LSTMBlockCell(**dict(kw, **{arg: np.zeros(4, np.float32)}))
    # A wrong rank is reported before a wrong weight dimension.
    with pytest.raises(blockrnn.InvalidArgumentError, match=f"{arg} must be rank 2"):
        blockrnn.gradients.LSTMBlockCell(**dict(kw, w=np.zeros((3, 3), np.float32),
                                                **{arg: np.zeros(4, np.float32)}))
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=f"{arg} must have the dtype of x \\(float32\\), got float64"):
        blockrnn.raw_ops.LSTMBlockCellGrad(**dict(kw, **{arg: kw[arg].astype(np.float64)}),
                                           use_peephole=True)
