"""BlockLSTM, BlockLSTMV2, BlockLSTMGrad and BlockLSTMGradV2 against tensorflow-cpu on random
shapes (T 1…100, B including 0 and 1, seq_len_max in {0, 1, T−1, T}, peepholes and clip on and
off, both layouts), V1 ≡ V2 with reordered weights, finite differences in float64, float16, and
every validation path from Python (docs/ops.md)."""
import numpy as np
import pytest

import blockrnn
from conftest import assert_close, seq_len_max_validation, sequence_cases

INPUTS = ["x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"]
OUTPUTS = ["i", "cs", "f", "o", "ci", "co", "h"]
GRADS = ["x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad", "wco_grad",
         "b_grad"]


def lstm_inputs(rng, T, B, I, H, dtype=np.float32):
    """docs/tolerances.md's unit scale: inputs, states and biases ~U(±1), the weights w and the peephole
    vectors ~U(±1/√(I+H)). (Peepholes ~U(±1) make the cs recurrence expansive: over 100 steps
    the gradients grow to ~1e5, outside A7's unit scale.)"""
    s = 1.0 / np.sqrt(max(I + H, 1))
    u = lambda shape, a=1.0: rng.uniform(-a, a, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((T, B, I)), cs_prev=u((B, H)), h_prev=u((B, H)), w=u((I + H, 4 * H), s),
                wci=u((H,), s), wcf=u((H,), s), wco=u((H,), s), b=u((4 * H,)))


def icfo_to_ifco(a, H):
    """Swap column blocks 1 and 2 (docs/ops.md): w, b, w_grad, b_grad between ICFO and IFCO."""
    a = np.array(a)
    out = a.copy()
    out[..., H:2 * H], out[..., 2 * H:3 * H] = a[..., 2 * H:3 * H], a[..., H:2 * H]
    return out


def draw_attrs(rng, v2):
    """Attrs of one case; None means "leave at the op's default" (V1: 1.0 / 3.0; V2: 0.0)."""
    attrs = {"use_peephole": bool(rng.integers(2))}
    clip = rng.choice([None, 0.0, 0.5]) if v2 else rng.choice([None, 0.0, 0.5, -1.0])
    if clip is not None:
        attrs["cell_clip"] = float(clip)
    if not v2:
        fb = rng.choice([None, 0.0, 0.3])
        if fb is not None:
            attrs["forget_bias"] = float(fb)
    return attrs


# 80 random cases per path in 8 groups with their own seeds. Sizes from conftest.SIZES (at,
# below and above SIMD widths, primes, 0 and 1), shrunk to keep TensorFlow and the plain-loop
# reference quick. Case 0 of every group has B = 0 and case 1 has B = 1.
@pytest.mark.parametrize("group", range(8))
def test_matches_tensorflow(tf, path, group, base_seed):
    for seed, rng, case, T, B, I, H, S in sequence_cases(group, 10, 4, path, base_seed, 4000):
        v2 = bool(rng.integers(2))
        op, gop = ("BlockLSTMV2", "BlockLSTMGradV2") if v2 else ("BlockLSTM", "BlockLSTMGrad")
        attrs = draw_attrs(rng, v2)
        inp = lstm_inputs(rng, T, B, I, H)
        what = f"{op} seed {seed} case {case} T={T} B={B} I={I} H={H} S={S} {attrs}"
        # docs/tolerances.md: sequence ops within 1e-4 at unit scale for T ≤ 100.
        tol = 1e-4
        got = getattr(blockrnn.raw_ops, op)(seq_len_max=S, **inp, **attrs)
        want = [t.numpy() for t in getattr(tf.raw_ops, op)(seq_len_max=np.int64(S), **inp,
                                                            **attrs)]
        for k, name in enumerate(OUTPUTS):
            g = getattr(got, name)
            assert g.shape == (T, B, H) and g.dtype == np.float32
            # Past seq_len_max TF writes only cs and h (zeros); ours are all zero (docs/ops.md).
            assert not np.any(g[S:]), f"{name} past seq_len_max {what}"
            w = want[k] if name in ("cs", "h") else want[k][:S]
            assert_close(g if name in ("cs", "h") else g[:S], w, tol, tol, f"{name} {what}", seed)
        cs_grad = rng.uniform(-1, 1, size=(T, B, H)).astype(np.float32)
        h_grad = rng.uniform(-1, 1, size=(T, B, H)).astype(np.float32)
        fwd = dict(zip(OUTPUTS, want))  # TF's forward outputs feed both grads
        peep = attrs["use_peephole"]
        if H == 0:  # w has no columns: the grads reject it, as TensorFlow does (docs/ops.md)
            with pytest.raises(blockrnn.InvalidArgumentError, match="positive multiple of 4"):
                getattr(blockrnn.raw_ops, gop)(seq_len_max=S, **inp, **fwd, cs_grad=cs_grad,
                                               h_grad=h_grad, use_peephole=peep)
            continue
        got_g = getattr(blockrnn.raw_ops, gop)(seq_len_max=S, **inp, **fwd, cs_grad=cs_grad,
                                               h_grad=h_grad, use_peephole=peep)
        want_g = getattr(tf.raw_ops, gop)(seq_len_max=np.int64(S), **inp, **fwd, cs_grad=cs_grad,
                                          h_grad=h_grad, use_peephole=peep)
        for k, name in enumerate(GRADS):
            g = getattr(got_g, name)
            assert g.shape == inp[INPUTS[k]].shape
            if B == 0 and name == "w_grad":
                # TensorFlow returns uninitialised memory here when B = 0 and S > 0 (its
                # per-step weight GEMMs have depth 0); ours is the correct zero (docs/ops.md).
                assert not np.any(g), what
                continue
            assert_close(g, want_g[k], tol, tol, f"{name} {what}", seed)
        assert not np.any(got_g.x_grad[S:])


def run_pair(rng, T, B, I, H, S, peephole, clip, dtype=np.float64):
    """V1 (forget_bias 0) on ICFO weights and V2 on the same weights reordered to IFCO."""
    v1 = lstm_inputs(rng, T, B, I, H, dtype)
    v2 = dict(v1, w=icfo_to_ifco(v1["w"], H), b=icfo_to_ifco(v1["b"], H))
    f1 = blockrnn.raw_ops.BlockLSTM(seq_len_max=S, **v1, forget_bias=0.0, cell_clip=clip,
                                    use_peephole=peephole)
    f2 = blockrnn.raw_ops.BlockLSTMV2(seq_len_max=S, **v2, cell_clip=clip, use_peephole=peephole)
    return v1, v2, f1, f2


@pytest.mark.parametrize("peephole,clip", [(False, 0.0), (True, 0.0), (True, 0.4)])
def test_v1_equals_v2_with_reordered_weights(path, peephole, clip):
    """docs/ops.md item 4 at T > 1: forward outputs equal; gradients equal after reordering
    (TensorFlow's own V1/V2 test uses T = 1, where its V2 autodiff bug cannot show, §8.4)."""
    rng = np.random.default_rng(31 + peephole)
    T, B, I, H, S = 7, 3, 5, 6, 6
    v1, v2, f1, f2 = run_pair(rng, T, B, I, H, S, peephole, clip)
    for name in OUTPUTS:
        np.testing.assert_allclose(getattr(f1, name), getattr(f2, name), rtol=1e-13, atol=1e-13)
    cs_grad, h_grad = rng.uniform(-1, 1, (T, B, H)), rng.uniform(-1, 1, (T, B, H))
    g1 = blockrnn.raw_ops.BlockLSTMGrad(seq_len_max=S, **v1, **f1._asdict(), cs_grad=cs_grad,
                                        h_grad=h_grad, use_peephole=peephole)
    g2 = blockrnn.raw_ops.BlockLSTMGradV2(seq_len_max=S, **v2, **f2._asdict(), cs_grad=cs_grad,
                                          h_grad=h_grad, use_peephole=peephole)
    for name in GRADS:
        a = getattr(g1, name)
        if name in ("w_grad", "b_grad"):
            a = icfo_to_ifco(a, H)
        np.testing.assert_allclose(a, getattr(g2, name), rtol=1e-12, atol=1e-12, err_msg=name)


def test_v2_gradient_is_the_ifco_gradient(tf):
    """docs/ops.md: TensorFlow's autodiff of BlockLSTMV2 runs the ICFO kernel on IFCO weights.
    The correct V2 gradient is TensorFlow's (correct) autodiff of V1 on the same weights in ICFO
    order, reordered; BlockLSTMGradV2 must equal that, and TF's BlockLSTMGradV2 kernel."""
    rng = np.random.default_rng(32)
    T, B, I, H = 6, 3, 4, 5
    v1 = lstm_inputs(rng, T, B, I, H)
    v2 = dict(v1, w=icfo_to_ifco(v1["w"], H), b=icfo_to_ifco(v1["b"], H))
    cs_grad = rng.uniform(-1, 1, (T, B, H)).astype(np.float32)
    h_grad = rng.uniform(-1, 1, (T, B, H)).astype(np.float32)
    variables = {k: tf.Variable(v) for k, v in v1.items()}
    with tf.GradientTape() as tape:
        out = tf.raw_ops.BlockLSTM(seq_len_max=np.int64(T), **variables, forget_bias=0.0,
                                   cell_clip=0.0, use_peephole=True)
        loss = tf.reduce_sum(out[1] * cs_grad) + tf.reduce_sum(out[6] * h_grad)
    tape_grads = dict(zip(INPUTS, tape.gradient(loss, [variables[k] for k in INPUTS])))
    fwd = blockrnn.raw_ops.BlockLSTMV2(seq_len_max=T, **v2, use_peephole=True)
    got = blockrnn.raw_ops.BlockLSTMGradV2(seq_len_max=T, **v2, **fwd._asdict(), cs_grad=cs_grad,
                                           h_grad=h_grad, use_peephole=True)
    kernel = tf.raw_ops.BlockLSTMGradV2(seq_len_max=np.int64(T), **v2, **fwd._asdict(),
                                        cs_grad=cs_grad, h_grad=h_grad, use_peephole=True)
    for k, (name, g) in enumerate(zip(INPUTS, GRADS)):
        want = tape_grads[name].numpy()
        if name in ("w", "b"):
            want = icfo_to_ifco(want, H)
        assert_close(getattr(got, g), want, 1e-4, 1e-4, g, 32)
        assert_close(getattr(got, g), kernel[k], 1e-4, 1e-4, g, 32)


def test_float16_within_tensorflow_tolerance(tf):
    """float16 runs in float32 and rounds once per stored value (docs/design.md): against TF's float32
    on the same half values within TF's fp16 tolerance (rtol 8e-3, atol 8e-4)."""
    rng = np.random.default_rng(50)
    T, B, I, H = 5, 4, 8, 16
    inp16 = lstm_inputs(rng, T, B, I, H, np.float16)
    inp32 = {k: v.astype(np.float32) for k, v in inp16.items()}
    for op in ("BlockLSTM", "BlockLSTMV2"):
        got = getattr(blockrnn.raw_ops, op)(seq_len_max=T - 1, **inp16, use_peephole=True)
        want = getattr(tf.raw_ops, op)(seq_len_max=np.int64(T - 1), **inp32, use_peephole=True)
        for k, name in enumerate(OUTPUTS):
            assert getattr(got, name).dtype == np.float16
            w = want[k].numpy() if name in ("cs", "h") else want[k].numpy()[:T - 1]
            g = getattr(got, name) if name in ("cs", "h") else getattr(got, name)[:T - 1]
            assert_close(g, w, 8e-3, 8e-4, f"{op} {name}", 50)
        gop = op.replace("BlockLSTM", "BlockLSTMGrad")
        fwd = {k: getattr(got, k) for k in OUTPUTS}
        cs_grad = rng.uniform(-1, 1, (T, B, H)).astype(np.float16)
        h_grad = rng.uniform(-1, 1, (T, B, H)).astype(np.float16)
        g16 = getattr(blockrnn.raw_ops, gop)(seq_len_max=T - 1, **inp16, **fwd, cs_grad=cs_grad,
                                             h_grad=h_grad, use_peephole=True)
        g32 = getattr(tf.raw_ops, gop)(
            seq_len_max=np.int64(T - 1), **inp32, **{k: v.astype(np.float32) for k, v in
                                                     fwd.items()},
            cs_grad=cs_grad.astype(np.float32), h_grad=h_grad.astype(np.float32),
            use_peephole=True)
        for k, name in enumerate(GRADS):
            assert getattr(g16, name).dtype == np.float16
            assert_close(getattr(g16, name), g32[k], 8e-3, 8e-4, f"{gop} {name}", 50)


def test_outputs_fields_and_defaults(tf):
    rng = np.random.default_rng(51)
    inp = lstm_inputs(rng, 3, 2, 3, 4)
    out = blockrnn.raw_ops.BlockLSTM(seq_len_max=np.int64(3), **inp, name="ignored")
    assert out._fields == tuple(OUTPUTS)
    # The op definition's defaults: forget_bias 1, cell_clip 3 (V1); cell_clip 0 (V2).
    explicit = blockrnn.raw_ops.BlockLSTM(seq_len_max=3, **inp, forget_bias=1.0, cell_clip=3.0,
                                          use_peephole=False)
    np.testing.assert_array_equal(out.h, explicit.h)
    v2 = blockrnn.raw_ops.BlockLSTMV2(seq_len_max=np.array(3), **inp)
    np.testing.assert_array_equal(
        v2.h, blockrnn.raw_ops.BlockLSTMV2(seq_len_max=3, **inp, cell_clip=0.0).h)
    g = blockrnn.raw_ops.BlockLSTMGrad(seq_len_max=3, **inp, **out._asdict(), cs_grad=out.cs,
                                       h_grad=out.h, use_peephole=False)
    assert g._fields == tuple(GRADS)
    with pytest.raises(TypeError, match="missing required keyword argument"):
        blockrnn.raw_ops.BlockLSTMGrad(seq_len_max=3, **inp, **out._asdict(), cs_grad=out.cs,
                                       h_grad=out.h)
    with pytest.raises(TypeError, match="unexpected keyword"):
        blockrnn.raw_ops.BlockLSTMV2(seq_len_max=3, **inp, forget_bias=1.0)
    # Same keyword names as tf.raw_ops.
    tf_out = tf.raw_ops.BlockLSTM(seq_len_max=np.int64(3), **inp)
    assert_close(out.h, tf_out.h, 1e-5, 1e-5, "h", 51)


def test_empty_and_degenerate_shapes():
    rng = np.random.default_rng(52)
    for T, B, I, H in [(3, 0, 3, 4), (3, 2, 0, 4), (3, 2, 3, 0), (0, 2, 3, 4), (1, 1, 1, 1)]:
        inp = lstm_inputs(rng, T, B, I, H)
        for op in ("BlockLSTM", "BlockLSTMV2"):
            out = getattr(blockrnn.raw_ops, op)(seq_len_max=T, **inp)
            assert all(getattr(out, n).shape == (T, B, H) for n in OUTPUTS)
            gop = op.replace("BlockLSTM", "BlockLSTMGrad")
            kw = dict(seq_len_max=T, **inp, **out._asdict(), cs_grad=out.cs, h_grad=out.h,
                      use_peephole=True)
            if H == 0:
                with pytest.raises(blockrnn.InvalidArgumentError,
                                   match=rf"{gop}: w must have a positive multiple of 4"):
                    getattr(blockrnn.raw_ops, gop)(**kw)
                continue
            g = getattr(blockrnn.raw_ops, gop)(**kw)
            for k, name in enumerate(GRADS):
                assert getattr(g, name).shape == inp[INPUTS[k]].shape
            if B == 0 or T == 0:
                assert not any(np.any(getattr(g, n)) for n in GRADS)


def valid_grad_kwargs(rng, T=5, B=4, I=3, H=16):
    inp = lstm_inputs(rng, T, B, I, H)
    out = blockrnn.raw_ops.BlockLSTM(seq_len_max=T, **inp)
    return dict(seq_len_max=T, **inp, **out._asdict(), cs_grad=out.cs, h_grad=out.h)


Z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731

# (argument, bad value, expected message without the op prefix); T=5, B=4, I=3, H=16. Every
# input's rank: test_ops.py's generic tester.
FWD_VALIDATION = seq_len_max_validation(5) + [
    ("cs_prev", Z(5, 16), "cs_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]"),
    ("h_prev", Z(4, 15), "h_prev must have shape [4, 16] (batch_size, cell_size), got [4, 15]"),
    # Only w's rows off: x or w may be wrong (input_size comes from x), so both are named.
    ("w", Z(18, 64), "x and w disagree on input_size: x has input_size 3 (its last dimension), "
                     "but w's 18 rows are input_size + cell_size for input_size 2 (cell_size 16): "
                     "either x must be [5, 4, 2], or w must have shape [19, 64] "
                     "(input_size + cell_size, 4 * cell_size), got [18, 64]"),
    ("x", Z(5, 4, 7), "x and w disagree on input_size: x has input_size 7 (its last dimension), "
                      "but w's 19 rows are input_size + cell_size for input_size 3 (cell_size "
                      "16): either x must be [5, 4, 3], or w must have shape [23, 64]"),
    ("w", Z(19, 60), "w must have shape [19, 64]"),
    ("wci", Z(3), "wci must have shape [16] (cell_size), got [3]"),
    ("wcf", Z(17), "wcf must have shape [16] (cell_size), got [17]"),
    ("wco", Z(2), "wco must have shape [16] (cell_size), got [2]"),
    ("b", Z(67), "b must have shape [64] (4 * cell_size), got [67]"),
    ("b", Z(63), "b must have shape [64] (4 * cell_size), got [63]"),
    ("wco", np.zeros(16, np.float64), "wco must have the dtype of x (float32), got float64"),
]


# In the grads H comes from w, not cs_prev (docs/ops.md), so a w with 60 columns means H = 15.
GRAD_MESSAGE = {("w", (19, 60)): "cs_prev must have shape [4, 15] (batch_size, cell_size)"}


@pytest.mark.parametrize("op", ["BlockLSTM", "BlockLSTMV2"])
@pytest.mark.parametrize("arg,value,message", FWD_VALIDATION)
def test_validation(op, arg, value, message):
    """Every forward validation path, and the same bad input into the matching grad."""
    rng = np.random.default_rng(53)
    kw = valid_grad_kwargs(rng)
    fwd = {k: kw[k] for k in ["seq_len_max"] + INPUTS}
    getattr(blockrnn.raw_ops, op)(**fwd)  # valid as given
    with pytest.raises(blockrnn.InvalidArgumentError) as e:
        getattr(blockrnn.raw_ops, op)(**dict(fwd, **{arg: value}))
    assert f"{op}: {message}" in str(e.value)
    gop = op.replace("BlockLSTM", "BlockLSTMGrad")
    gmessage = GRAD_MESSAGE.get((arg, np.shape(value)), message)
    for peep in (False, True):
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            getattr(blockrnn.raw_ops, gop)(**dict(kw, **{arg: value}), use_peephole=peep)
        assert f"{gop}: {gmessage}" in str(e.value)


# The checks TensorFlow's grads miss (docs/ops.md) and those specific to the grads.
GRAD_VALIDATION = [(name, bad, f"{name} must have shape [5, 4, 16] (time_len, batch_size, "
                                f"cell_size), got {list(bad.shape)}")
                   for name in OUTPUTS + ["cs_grad", "h_grad"]
                   for bad in (Z(4, 4, 16), Z(5, 3, 16), Z(5, 4, 15))] + \
                  [(name, Z(4, 16), f"{name} must be rank 3, got rank 2")
                   for name in OUTPUTS + ["cs_grad", "h_grad"]] + [
    ("w", Z(19, 63), "w must have a positive multiple of 4 columns (4 * cell_size), "
                     "got shape [19, 63]"),
    ("w", Z(3, 0), "w must have a positive multiple of 4 columns"),
    ("w", Z(20, 64), "x and w disagree on input_size: x has input_size 3 (its last "
                     "dimension), but w's 20 rows are input_size + cell_size for input_size 4 "
                     "(cell_size 16): either x must be [5, 4, 4], or w must have shape [19, 64]"),
    ("cs_prev", Z(4, 17), "cs_prev must have shape [4, 16] (batch_size, cell_size), got [4, 17]"),
    ("h_prev", Z(3, 16), "h_prev must have shape [4, 16] (batch_size, cell_size), got [3, 16]"),
    ("b", Z(67), "b must have shape [64] (4 * cell_size), got [67]"),
    ("wci", Z(3), "wci must have shape [16] (cell_size), got [3]"),
    ("seq_len_max", 7, "seq_len_max must be between 0 and 5 (time_len of x), got 7"),
]


@pytest.mark.parametrize("gop", ["BlockLSTMGrad", "BlockLSTMGradV2"])
@pytest.mark.parametrize("arg,value,message", GRAD_VALIDATION)
def test_grad_validation(gop, arg, value, message):
    rng = np.random.default_rng(54)
    kw = valid_grad_kwargs(rng)
    for peep in (False, True):
        getattr(blockrnn.raw_ops, gop)(**kw, use_peephole=peep)  # valid as given
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            getattr(blockrnn.raw_ops, gop)(**dict(kw, **{arg: value}), use_peephole=peep)
        assert f"{gop}: {message}" in str(e.value)


def test_tensorflow_rejects_what_we_reject(tf):
    """A few of the validation paths against TF's own errors (only those TF 2.21 checks without
    aborting the process: its CPU kernel still crashes on seq_len_max outside [0, T])."""
    rng = np.random.default_rng(55)
    kw = valid_grad_kwargs(rng)
    fwd = {k: kw[k] for k in INPUTS}
    for arg, value in [("x", Z(4, 3)), ("wci", Z(3)), ("b", Z(60)), ("h_prev", Z(4, 15))]:
        with pytest.raises(Exception):
            tf.raw_ops.BlockLSTM(seq_len_max=np.int64(5), **dict(fwd, **{arg: value}))
        with pytest.raises(blockrnn.InvalidArgumentError):
            blockrnn.raw_ops.BlockLSTM(seq_len_max=5, **dict(fwd, **{arg: value}))
