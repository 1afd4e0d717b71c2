"""Golden cases for BlockGRU and BlockGRUGrad (docs/ops.md). TensorFlow has no GRU sequence op:
the expected values come from stepping tf.raw_ops.GRUBlockCell over time and
tf.raw_ops.GRUBlockCellGrad in reverse with the carry, plus the parameter gradients of docs/ops.md
(tf.matmul / tf.reduce_sum per step) summed over steps. With H = 0 TensorFlow's
GRUBlockCellGrad leaves d_x uninitialised, so x_grad is left out there.
tests/python/test_block_gru.py compares with the same stepped TensorFlow oracle.
"""
import numpy as np

OUTPUTS = ["r", "u", "c", "h"]
INPUTS = ["x", "h_prev", "w_ru", "w_c", "b_ru", "b_c"]
GRADS = ["x_grad", "h_prev_grad", "w_ru_grad", "w_c_grad", "b_ru_grad", "b_c_grad"]


def gru_inputs(rng, T, B, I, H, dtype=np.float32):
    """docs/tolerances.md's unit scale: inputs, state and biases ~U(±1), weights ~U(±1/√(I+H))."""
    s = 1.0 / np.sqrt(max(I + H, 1))
    u = lambda shape, a=1.0: rng.uniform(-a, a, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((T, B, I)), h_prev=u((B, H)), w_ru=u((I + H, 2 * H), s),
                w_c=u((I + H, H), s), b_ru=u((2 * H,)), b_c=u((H,)))


def stepped_forward(tf, inp, S):
    """GRUBlockCell on x[t] with state h[t−1] for t < S; zeros after (docs/ops.md)."""
    T, B, _ = inp["x"].shape
    H = inp["h_prev"].shape[1]
    w = {k: inp[k] for k in ("w_ru", "w_c", "b_ru", "b_c")}
    fwd = {k: np.zeros((T, B, H), np.float32) for k in OUTPUTS}
    for t in range(S):
        hp = inp["h_prev"] if t == 0 else fwd["h"][t - 1]
        for k, v in zip(OUTPUTS, tf.raw_ops.GRUBlockCell(x=inp["x"][t], h_prev=hp, **w)):
            fwd[k][t] = v.numpy()
    return fwd


def stepped_backward(tf, inp, fwd, h_grad, S):
    """GRUBlockCellGrad stepped t = S−1 … 0 with the carry, plus the parameter gradients TF's
    registered Python gradient computed (docs/ops.md), summed over steps in float64 (h_prev_grad,
    the last carry, is float32)."""
    T, B, I = inp["x"].shape
    H = inp["h_prev"].shape[1]
    w = {k: inp[k] for k in ("w_ru", "w_c", "b_ru", "b_c")}
    g = {"x_grad": np.zeros((T, B, I)), "w_ru_grad": np.zeros((I + H, 2 * H)),
         "w_c_grad": np.zeros((I + H, H)), "b_ru_grad": np.zeros(2 * H), "b_c_grad": np.zeros(H)}
    carry = np.zeros((B, H), np.float32)
    for t in reversed(range(S)):
        hp = inp["h_prev"] if t == 0 else fwd["h"][t - 1]
        d_x, carry_next, d_c_bar, d_ru = tf.raw_ops.GRUBlockCellGrad(
            x=inp["x"][t], h_prev=hp, **w, r=fwd["r"][t], u=fwd["u"][t], c=fwd["c"][t],
            d_h=carry + h_grad[t])
        g["x_grad"][t] = d_x.numpy()
        xh = tf.concat([inp["x"][t], hp], axis=1)
        xhr = tf.concat([inp["x"][t], hp * fwd["r"][t]], axis=1)
        g["w_ru_grad"] += tf.matmul(xh, d_ru, transpose_a=True).numpy()
        g["w_c_grad"] += tf.matmul(xhr, d_c_bar, transpose_a=True).numpy()
        g["b_ru_grad"] += tf.reduce_sum(d_ru, axis=0).numpy()
        g["b_c_grad"] += tf.reduce_sum(d_c_bar, axis=0).numpy()
        carry = carry_next.numpy()
    g["h_prev_grad"] = carry
    return g


def cases(rng, tf):
    cases = []
    # (T, B, I, H, seq_len_max)
    for T, B, I, H, S in [(1, 1, 1, 1, 1), (3, 2, 3, 4, 3), (5, 3, 4, 5, 4), (6, 2, 7, 9, 6),
                          (8, 3, 5, 8, 1), (4, 2, 3, 4, 0), (12, 2, 6, 5, 12), (4, 0, 3, 4, 4),
                          (3, 2, 0, 4, 2), (3, 2, 3, 0, 3), (0, 2, 3, 4, 0)]:
        inp = gru_inputs(rng, T, B, I, H)
        h_grad = rng.uniform(-1, 1, size=(T, B, H)).astype(np.float32)
        fwd = stepped_forward(tf, inp, S)
        grad = stepped_backward(tf, inp, fwd, h_grad, S)
        grad = {k: v.astype(np.float32) for k, v in grad.items()}
        ins = [("seq_len_max", np.array(S, np.int64))] + [(n, inp[n]) for n in INPUTS]
        cases.append(("BlockGRU", {}, ins, [(n, fwd[n]) for n in OUTPUTS]))
        grad_ins = ins + [(n, fwd[n]) for n in OUTPUTS] + [("h_grad", h_grad)]
        grad_outs = [(n, grad[n]) for n in GRADS if not (H == 0 and n == "x_grad")]
        cases.append(("BlockGRUGrad", {}, grad_ins, grad_outs))
    return cases
