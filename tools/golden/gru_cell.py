"""Golden cases for GRUBlockCell, GRUBlockCellGrad and gradients.GRUBlockCell."""
import numpy as np


def gru_inputs(rng, B, I, H, scale=1.0, dtype=np.float32):
    w = 1.0 / np.sqrt(max(I + H, 1))
    u = lambda shape, s: rng.uniform(-s, s, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((B, I), scale), h_prev=u((B, H), 1.0), w_ru=u((I + H, 2 * H), w * scale),
                w_c=u((I + H, H), w * scale), b_ru=u((2 * H,), scale), b_c=u((H,), scale))


def cases(rng, tf):
    cases = []
    shapes = [(1, 1, 1), (2, 3, 4), (4, 7, 9), (3, 16, 17), (5, 33, 8), (0, 3, 4), (2, 0, 5),
              (3, 4, 0)]
    for k, (B, I, H) in enumerate(shapes):
        scale = 4.0 if k % 3 == 2 else 1.0  # some cases saturate the gates
        inp = gru_inputs(rng, B, I, H, scale)
        r, u, c, h = [t.numpy() for t in tf.raw_ops.GRUBlockCell(**inp)]
        names = ["x", "h_prev", "w_ru", "w_c", "b_ru", "b_c"]
        ins = [(n, inp[n]) for n in names]
        cases.append(("GRUBlockCell", {}, ins, [("r", r), ("u", u), ("c", c), ("h", h)]))
        d_h = rng.uniform(-1, 1, size=(B, H)).astype(np.float32)
        grad_ins = ins + [("r", r), ("u", u), ("c", c), ("d_h", d_h)]
        d_x, d_h_prev, d_c_bar, d_rbar_ubar = [
            t.numpy() for t in tf.raw_ops.GRUBlockCellGrad(**inp, r=r, u=u, c=c, d_h=d_h)]
        grad_outs = [("d_x", d_x), ("d_h_prev", d_h_prev), ("d_c_bar", d_c_bar),
                     ("d_r_bar_u_bar", d_rbar_ubar)]
        if H == 0:
            # With H = 0 TensorFlow's kernel never writes d_x (its GEMMs have depth 0) and
            # returns uninitialised memory; blockrnn returns the correct zeros (docs/ops.md).
            grad_outs = grad_outs[1:]
        cases.append(("GRUBlockCellGrad", {}, grad_ins, grad_outs))
        # docs/ops.md: what TF1's registered gradient computed around the kernel.
        xh = tf.concat([inp["x"], inp["h_prev"]], axis=1)
        xhr = tf.concat([inp["x"], inp["h_prev"] * r], axis=1)
        d_w_ru = tf.matmul(xh, d_rbar_ubar, transpose_a=True).numpy()
        d_w_c = tf.matmul(xhr, d_c_bar, transpose_a=True).numpy()
        d_b_ru = tf.reduce_sum(d_rbar_ubar, axis=0).numpy()
        d_b_c = tf.reduce_sum(d_c_bar, axis=0).numpy()
        full = [("x", d_x), ("h_prev", d_h_prev), ("w_ru", d_w_ru), ("w_c", d_w_c),
                ("b_ru", d_b_ru), ("b_c", d_b_c)]
        cases.append(("gradients.GRUBlockCell", {}, grad_ins, full[1:] if H == 0 else full))
    return cases
