"""Golden cases for BlockLSTM, BlockLSTMV2, BlockLSTMGrad and BlockLSTMGradV2 (docs/ops.md).

Past seq_len_max TensorFlow writes only cs and h (zeros) and leaves i, f, o, ci, co
uninitialised (docs/ops.md), so a case with seq_len_max < T lists only cs and h; the grads never
read those entries, and the file stores zeros there. With B = 0 TensorFlow's BlockLSTMGrad
returns an uninitialised w_grad, which is left out (blockrnn returns zeros, docs/ops.md).
"""
import numpy as np

OUTPUTS = ["i", "cs", "f", "o", "ci", "co", "h"]
GRADS = ["x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad", "wco_grad",
         "b_grad"]
INPUTS = ["x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"]


def lstm_inputs(rng, T, B, I, H, dtype=np.float32):
    """Unit scale (docs/tolerances.md): x, states, biases ~U(±1); w and peepholes ~U(±1/√(I+H))."""
    s = 1.0 / np.sqrt(max(I + H, 1))
    u = lambda shape, a=1.0: rng.uniform(-a, a, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((T, B, I)), cs_prev=u((B, H)), h_prev=u((B, H)), w=u((I + H, 4 * H), s),
                wci=u((H,), s), wcf=u((H,), s), wco=u((H,), s), b=u((4 * H,)))


def cases(rng, tf):
    cases = []
    # (T, B, I, H, seq_len_max, V2, use_peephole, attrs)
    configs = [
        (1, 1, 1, 1, 1, False, False, {}),
        (3, 2, 3, 4, 3, False, True, {"forget_bias": 0.5, "cell_clip": 0.4}),
        (5, 3, 4, 5, 4, True, True, {"cell_clip": 0.5}),
        (6, 2, 7, 9, 6, True, False, {}),
        (8, 3, 5, 8, 1, False, True, {"cell_clip": -1.0}),
        (4, 2, 3, 4, 0, True, True, {}),
        (12, 2, 6, 5, 12, False, False, {"forget_bias": 0.0, "cell_clip": 0.0}),
        (4, 0, 3, 4, 4, False, True, {}),
        (3, 2, 0, 4, 2, True, True, {}),
        (3, 2, 3, 0, 3, False, False, {}),
        (0, 2, 3, 4, 0, True, False, {}),
        (4, 2, 5, 6, 3, False, True, {"forget_bias": 1.0, "cell_clip": 0.5, "half": True}),
    ]
    for T, B, I, H, S, v2, peep, attrs in configs:
        attrs = dict(attrs)
        dtype = np.float16 if attrs.pop("half", False) else np.float32
        op, gop = ("BlockLSTMV2", "BlockLSTMGradV2") if v2 else ("BlockLSTM", "BlockLSTMGrad")
        attrs["use_peephole"] = peep
        inp = lstm_inputs(rng, T, B, I, H, dtype)
        ins = [("seq_len_max", np.array(S, np.int64))] + [(n, inp[n]) for n in INPUTS]
        out = [t.numpy() for t in getattr(tf.raw_ops, op)(seq_len_max=np.int64(S), **inp,
                                                           **attrs)]
        for k, name in enumerate(OUTPUTS):
            if name not in ("cs", "h"):
                out[k][S:] = 0  # uninitialised in TensorFlow; never read by the grads
        outs = [(n, out[k]) for k, n in enumerate(OUTPUTS) if S == T or n in ("cs", "h")]
        cases.append((op, attrs, ins, outs))
        if H == 0:
            continue  # the grads reject H = 0 (w must have a positive multiple of 4 columns)
        cs_grad = rng.uniform(-1, 1, size=(T, B, H)).astype(dtype)
        h_grad = rng.uniform(-1, 1, size=(T, B, H)).astype(dtype)
        fwd = dict(zip(OUTPUTS, out))
        grad = [t.numpy() for t in getattr(tf.raw_ops, gop)(
            seq_len_max=np.int64(S), **inp, **fwd, cs_grad=cs_grad, h_grad=h_grad,
            use_peephole=peep)]
        grad_ins = ins + [(n, fwd[n]) for n in OUTPUTS] + [("cs_grad", cs_grad),
                                                             ("h_grad", h_grad)]
        grad_outs = [(n, grad[k]) for k, n in enumerate(GRADS) if not (B == 0 and n == "w_grad")]
        cases.append((gop, {"use_peephole": peep}, grad_ins, grad_outs))
    return cases
