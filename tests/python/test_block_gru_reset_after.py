"""BlockGRUResetAfter and BlockGRUResetAfterGrad (blockrnn's reset-after GRU, docs/ops.md) against
Keras' GRU(reset_after=True) — PyTorch's and cuDNN's GRU — forward outputs, final state and
every gradient (tf.GradientTape); finite differences in float64.

Keras stores the weights in gate order (z, r, h): kernel [I, 3H], recurrent_kernel [H, 3H],
bias [2, 3H] (row 0 the input bias, row 1 the recurrent bias). blockrnn's order is PyTorch's
(r, z, n), so the conversion swaps the first two H-wide column blocks (docs/ops.md):
    w_i = kernel[:, [r | z | h]],  w_h = recurrent_kernel[:, [r | z | h]],
    b_i = bias[0][[r | z | h]],    b_h = bias[1][[r | z | h]]
and the same swap maps the gradients back. Keras is batch-major, blockrnn time-major.
"""
import numpy as np
import pytest

import blockrnn
from conftest import assert_close

GRADS = ["x_grad", "h_prev_grad", "w_i_grad", "w_h_grad", "b_i_grad", "b_h_grad"]


def keras_to_blockrnn(w, H):
    """(z, r, h) column blocks → (r, z, n); the swap is its own inverse."""
    return np.concatenate([w[..., H:2 * H], w[..., 0:H], w[..., 2 * H:]], axis=-1)


def random_case(rng, T, B, I, H):
    """docs/tolerances.md's unit scale: x, h_prev and biases ~U(±1), weights ~U(±1/√(I+H))."""
    s = 1.0 / np.sqrt(I + H)
    u = lambda shape, a=1.0: rng.uniform(-a, a, size=shape).astype(np.float32)  # noqa: E731
    return dict(x=u((T, B, I)), h_prev=u((B, H)), kernel=u((I, 3 * H), s),
                recurrent_kernel=u((H, 3 * H), s), bias=u((2, 3 * H)), h_grad=u((T, B, H)))


def keras_reference(tf, c):
    """Keras GRU(reset_after=True) on c: (sequence [T,B,H], final state [B,H], gradients of
    L = Σ h_grad ⊙ h with respect to x, h_prev, kernel, recurrent_kernel, bias)."""
    import keras
    T, B, I = c["x"].shape
    H = c["h_prev"].shape[1]
    layer = keras.layers.GRU(H, activation="tanh", recurrent_activation="sigmoid",
                             reset_after=True, return_sequences=True, return_state=True)
    layer.build((B, T, I))
    layer.set_weights([c["kernel"], c["recurrent_kernel"], c["bias"]])
    x = tf.Variable(np.transpose(c["x"], (1, 0, 2)))  # batch-major
    h0 = tf.Variable(c["h_prev"])
    with tf.GradientTape() as tape:
        seq, state = layer(x, initial_state=[h0])
        loss = tf.reduce_sum(seq * np.transpose(c["h_grad"], (1, 0, 2)))
    cell = layer.cell
    grads = tape.gradient(loss, [x, h0, cell.kernel, cell.recurrent_kernel, cell.bias])
    g = [np.asarray(v) for v in grads]
    g[0] = np.transpose(g[0], (1, 0, 2))
    return np.transpose(np.asarray(seq), (1, 0, 2)), np.asarray(state), g


def blockrnn_inputs(c, H):
    return dict(x=c["x"], h_prev=c["h_prev"],
                w_i=keras_to_blockrnn(c["kernel"], H),
                w_h=keras_to_blockrnn(c["recurrent_kernel"], H),
                b_i=keras_to_blockrnn(c["bias"][0], H), b_h=keras_to_blockrnn(c["bias"][1], H))


# 12 random cases per path: T ≤ 20, B ≤ 8, I, H ≤ 40, float32. docs/tolerances.md: sequence ops agree
# within 1e-4 (docs/tolerances.md); the weight and bias gradients sum T·B per-row products.
@pytest.mark.parametrize("case", range(12))
def test_matches_keras_gru_reset_after(tf, path, case, base_seed):
    seed = (base_seed if base_seed is not None else 1300) + case
    rng = np.random.default_rng(seed)
    T, B = int(rng.integers(1, 21)), int(rng.integers(1, 9))
    I, H = int(rng.integers(1, 41)), int(rng.integers(1, 41))
    c = random_case(rng, T, B, I, H)
    seq, state, kg = keras_reference(tf, c)
    inp = blockrnn_inputs(c, H)
    out = blockrnn.raw_ops.BlockGRUResetAfter(seq_len_max=np.int64(T), **inp)
    assert out._fields == ("r", "u", "n", "hn", "h")
    tol = 1e-4
    where = f"T={T} B={B} I={I} H={H}"
    assert_close(out.h, seq, tol, tol, f"h ({where})", seed)
    assert_close(out.h[-1], state, tol, tol, f"final state ({where})", seed)
    g = blockrnn.raw_ops.BlockGRUResetAfterGrad(
        seq_len_max=np.int64(T), **inp, r=out.r, u=out.u, n=out.n, hn=out.hn, h=out.h,
        h_grad=c["h_grad"])
    assert g._fields == tuple(GRADS)
    wtol = tol * np.sqrt(T * B)
    want = {
        "x_grad": kg[0], "h_prev_grad": kg[1],
        "w_i_grad": keras_to_blockrnn(kg[2], H), "w_h_grad": keras_to_blockrnn(kg[3], H),
        "b_i_grad": keras_to_blockrnn(kg[4][0], H), "b_h_grad": keras_to_blockrnn(kg[4][1], H),
    }
    for name in GRADS:
        t = tol if name in ("x_grad", "h_prev_grad") else wtol
        assert_close(getattr(g, name), want[name], t, t, f"{name} ({where})", seed)


def test_seq_len_max_below_t_matches_keras_on_the_prefix(tf, path):
    """Steps t < S equal Keras on the first S steps; every output past S is zero."""
    rng = np.random.default_rng(77)
    T, S, B, I, H = 7, 4, 3, 5, 6
    c = random_case(rng, T, B, I, H)
    prefix = dict(c, x=c["x"][:S], h_grad=c["h_grad"][:S])
    seq, _, kg = keras_reference(tf, prefix)
    inp = blockrnn_inputs(c, H)
    out = blockrnn.raw_ops.BlockGRUResetAfter(seq_len_max=np.int64(S), **inp)
    assert_close(out.h[:S], seq, 1e-4, 1e-4, "h", 77)
    for name in out._fields:
        assert not getattr(out, name)[S:].any(), name
    g = blockrnn.raw_ops.BlockGRUResetAfterGrad(
        seq_len_max=np.int64(S), **inp, r=out.r, u=out.u, n=out.n, hn=out.hn, h=out.h,
        h_grad=c["h_grad"])
    assert_close(g.x_grad[:S], kg[0], 1e-4, 1e-4, "x_grad", 77)
    assert not g.x_grad[S:].any()
    assert_close(g.h_prev_grad, kg[1], 1e-4, 1e-4, "h_prev_grad", 77)
    assert_close(g.w_h_grad, keras_to_blockrnn(kg[3], H), 1e-3, 1e-3, "w_h_grad", 77)


def test_validation_names_op_and_argument():
    rng = np.random.default_rng(1)
    c = random_case(rng, 2, 3, 4, 5)
    inp = blockrnn_inputs(c, 5)
    inp["w_i"] = inp["w_i"][:, :14]
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=r"BlockGRUResetAfter: w_i must have shape \[4, 15\] "
                             r"\(input_size, 3 \* cell_size\), got \[4, 14\]"):
        blockrnn.raw_ops.BlockGRUResetAfter(seq_len_max=np.int64(2), **inp)
