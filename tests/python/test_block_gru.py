"""BlockGRU and BlockGRUGrad (docs/ops.md) against stepping tensorflow-cpu's GRUBlockCell and
GRUBlockCellGrad over time (TF has no GRU sequence op) with the parameter gradients of docs/ops.md summed over steps; finite differences in float64; float16; every validation path."""
import numpy as np
import pytest

import blockrnn
from conftest import assert_close, load_golden_family, seq_len_max_validation, sequence_cases

# TensorFlow has no GRU sequence op: the oracle steps its cell ops, as the golden files do.
golden = load_golden_family("block_gru")
INPUTS, OUTPUTS, GRADS = golden.INPUTS, golden.OUTPUTS, golden.GRADS


# 64 random cases per path in 8 groups with their own seeds; T from 1 to 100, sizes from
# conftest.SIZES shrunk to keep the stepped TensorFlow loop and the plain-loop reference quick.
# Case 0 of every group has B = 0 and case 1 has B = 1.
@pytest.mark.parametrize("group", range(8))
def test_matches_stepped_tensorflow(tf, path, group, base_seed):
    for seed, rng, case, T, B, I, H, S in sequence_cases(group, 8, 3, path, base_seed, 5000):
        inp = golden.gru_inputs(rng, T, B, I, H)
        what = f"seed {seed} case {case} T={T} B={B} I={I} H={H} S={S}"
        tol = 1e-4  # docs/tolerances.md: sequence ops within 1e-4 at unit scale for T ≤ 100
        want = golden.stepped_forward(tf, inp, S)
        got = blockrnn.raw_ops.BlockGRU(seq_len_max=S, **inp)
        for name in OUTPUTS:
            assert getattr(got, name).dtype == np.float32
            assert_close(getattr(got, name), want[name], tol, tol, f"{name} {what}", seed)
        h_grad = rng.uniform(-1, 1, size=(T, B, H)).astype(np.float32)
        want_g = golden.stepped_backward(tf, inp, want, h_grad, S)
        got_g = blockrnn.raw_ops.BlockGRUGrad(seq_len_max=S, **inp, **want, h_grad=h_grad)
        for k, name in enumerate(GRADS):
            g = getattr(got_g, name)
            assert g.shape == inp[INPUTS[k]].shape and g.dtype == np.float32
            if H == 0 and name == "x_grad":
                # TF's GRUBlockCellGrad never writes d_x when H = 0 (uninitialised memory);
                # ours is the correct zero (docs/ops.md).
                assert not np.any(g)
                continue
            assert_close(g, want_g[name], tol, tol, f"{name} {what}", seed)
        assert not np.any(got_g.x_grad[S:])


def test_float16_within_tensorflow_tolerance(tf):
    """float16 runs in float32 and rounds once per stored value (docs/design.md). TF has no half GRU:
    compare with its float32 on the same values, at TF's fp16 tolerance."""
    rng = np.random.default_rng(60)
    T, B, I, H, S = 6, 4, 8, 16, 5
    inp16 = golden.gru_inputs(rng, T, B, I, H, np.float16)
    inp32 = {k: v.astype(np.float32) for k, v in inp16.items()}
    got = blockrnn.raw_ops.BlockGRU(seq_len_max=S, **inp16)
    want = golden.stepped_forward(tf, inp32, S)
    for name in OUTPUTS:
        assert getattr(got, name).dtype == np.float16
        assert_close(getattr(got, name), want[name], 8e-3, 8e-4, name, 60)
    h_grad = rng.uniform(-1, 1, size=(T, B, H)).astype(np.float16)
    g16 = blockrnn.raw_ops.BlockGRUGrad(seq_len_max=S, **inp16, **got._asdict(), h_grad=h_grad)
    want_g = golden.stepped_backward(tf, inp32, {k: getattr(got, k).astype(np.float32)
                                             for k in OUTPUTS}, h_grad.astype(np.float32), S)
    for name in GRADS:
        assert getattr(g16, name).dtype == np.float16
        assert_close(getattr(g16, name), want_g[name], 8e-3, 8e-4, name, 60)


def test_outputs_fields_and_empty_shapes():
    rng = np.random.default_rng(61)
    inp = golden.gru_inputs(rng, 3, 2, 3, 4)
    out = blockrnn.raw_ops.BlockGRU(seq_len_max=np.int64(2), **inp, name="ignored")
    assert out._fields == tuple(OUTPUTS)
    assert not np.any(out.h[2:])
    g = blockrnn.raw_ops.BlockGRUGrad(seq_len_max=np.array(2), **inp, **out._asdict(),
                                      h_grad=out.h)
    assert g._fields == tuple(GRADS)
    for T, B, I, H in [(3, 0, 3, 4), (3, 2, 0, 4), (3, 2, 3, 0), (0, 2, 3, 4), (2, 0, 0, 0)]:
        inp = golden.gru_inputs(rng, T, B, I, H)
        out = blockrnn.raw_ops.BlockGRU(seq_len_max=T, **inp)
        assert all(getattr(out, n).shape == (T, B, H) for n in OUTPUTS)
        g = blockrnn.raw_ops.BlockGRUGrad(seq_len_max=T, **inp, **out._asdict(), h_grad=out.h)
        for k, name in enumerate(GRADS):
            assert getattr(g, name).shape == inp[INPUTS[k]].shape
        if B == 0 or T == 0:
            assert not any(np.any(getattr(g, n)) for n in GRADS)


Z = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731

# (argument, bad value, message without the op prefix); T=5, B=4, I=3, H=16. Every input's
# rank: test_ops.py's generic tester.
VALIDATION = seq_len_max_validation(5) + [
    ("h_prev", Z(5, 16), "h_prev must have shape [4, 16] (batch_size, cell_size), got [5, 16]"),
    ("w_ru", Z(18, 32), "w_ru must have shape [19, 32] (input_size + cell_size, 2 * cell_size)"),
    ("w_ru", Z(19, 31), "w_ru must have shape [19, 32]"),
    ("w_c", Z(19, 15), "w_c must have shape [19, 16] (input_size + cell_size, cell_size)"),
    # An x of the wrong width: both weights agree on another input_size, so x is named first.
    ("x", Z(5, 4, 2), "x and the weights disagree on input_size: x has input_size 2 (its last "
                      "dimension), but w_ru and w_c have 19 rows, which are input_size + "
                      "cell_size for input_size 3 (cell_size 16): either x must be [5, 4, 3], or "
                      "w_ru must have shape [18, 32] (input_size + cell_size, 2 * cell_size), "
                      "got [19, 32] and w_c [18, 16]"),
    ("b_ru", Z(31), "b_ru must have shape [32] (2 * cell_size), got [31]"),
    ("b_c", Z(17), "b_c must have shape [16] (cell_size), got [17]"),
    ("b_c", np.zeros(16, np.float64), "b_c must have the dtype of x (float32), got float64"),
    ("x", np.zeros((5, 4, 3), np.int32), "x must be float16, bfloat16, float32 or float64, got int32"),
]


@pytest.mark.parametrize("arg,value,message", VALIDATION)
def test_validation(arg, value, message):
    rng = np.random.default_rng(62)
    inp = dict(seq_len_max=5, **golden.gru_inputs(rng, 5, 4, 3, 16))
    out = blockrnn.raw_ops.BlockGRU(**inp)
    with pytest.raises(blockrnn.InvalidArgumentError) as e:
        blockrnn.raw_ops.BlockGRU(**dict(inp, **{arg: value}))
    assert f"BlockGRU: {message}" in str(e.value)
    with pytest.raises(blockrnn.InvalidArgumentError) as e:
        blockrnn.raw_ops.BlockGRUGrad(**dict(inp, **{arg: value}), **out._asdict(), h_grad=out.h)
    assert f"BlockGRUGrad: {message}" in str(e.value)


@pytest.mark.parametrize("arg", OUTPUTS + ["h_grad"])
def test_grad_validation(arg):
    """Every per-step tensor of the grad must be [T, B, H] (docs/design.md)."""
    rng = np.random.default_rng(63)
    inp = dict(seq_len_max=5, **golden.gru_inputs(rng, 5, 4, 3, 16))
    out = blockrnn.raw_ops.BlockGRU(**inp)
    kw = dict(inp, **out._asdict(), h_grad=out.h)
    blockrnn.raw_ops.BlockGRUGrad(**kw)
    for bad in (Z(4, 4, 16), Z(5, 3, 16), Z(5, 4, 15)):
        with pytest.raises(blockrnn.InvalidArgumentError) as e:
            blockrnn.raw_ops.BlockGRUGrad(**dict(kw, **{arg: bad}))
        assert (f"BlockGRUGrad: {arg} must have shape [5, 4, 16] (time_len, batch_size, "
                f"cell_size), got {list(bad.shape)}") in str(e.value)
    with pytest.raises(blockrnn.InvalidArgumentError, match=f"{arg} must be rank 3, got rank 2"):
        blockrnn.raw_ops.BlockGRUGrad(**dict(kw, **{arg: Z(4, 16)}))
