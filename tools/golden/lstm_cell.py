"""Golden cases for LSTMBlockCell, LSTMBlockCellGrad and gradients.LSTMBlockCell.

Shape letters: B batch, I input size, H cell size. Every shape runs one attr combination of the
conformance suite (defaults, peepholes, forget_bias != 1, an active clip, the clip disabled by
-1 and by 0); the backward takes TensorFlow's forward outputs as its gate inputs. float16 cases
hold half inputs and TensorFlow's float32 result on those same values (TensorFlow's own fp16
criterion; tests/cpp/test_golden.cc compares them at 8e-3).
"""
import numpy as np

NAMES = ["x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"]
OUTS = ["i", "cs", "f", "o", "ci", "co", "h"]
GATES = ["i", "cs", "f", "o", "ci", "co"]

# (attrs given to the forward op, cs_prev scale); {} means the op's defaults (clip at 3).
ATTRS = [
    ({}, 1.0),
    (dict(use_peephole=True), 1.0),
    (dict(forget_bias=-0.75, cell_clip=-1.0, use_peephole=True), 1.0),
    (dict(cell_clip=0.5, use_peephole=True), 4.0),  # clip active
    (dict(cell_clip=-1.0), 5.0),                    # clip disabled by -1
    (dict(cell_clip=0.0, forget_bias=0.0, use_peephole=True), 5.0),  # … and by 0
    ({}, 5.0),                                      # the default clip at 3, active
]


def lstm_inputs(rng, B, I, H, cs_scale, dtype):
    w = 1.0 / np.sqrt(I + H)
    u = lambda shape, s: rng.uniform(-s, s, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((B, I), 1.0), cs_prev=u((B, H), cs_scale), h_prev=u((B, H), 1.0),
                w=u((I + H, 4 * H), w), wci=u((H,), 1.0), wcf=u((H,), 1.0), wco=u((H,), 1.0),
                b=u((4 * H,), 1.0))


def add_cases(out, rng, tf, B, I, H, attrs, cs_scale, dtype):
    inp = lstm_inputs(rng, B, I, H, cs_scale, dtype)
    # TensorFlow runs in float32 on the (possibly half-rounded) values.
    inp32 = {k: v.astype(np.float32) for k, v in inp.items()}
    fwd = [t.numpy() for t in tf.raw_ops.LSTMBlockCell(**inp32, **attrs)]
    ins = [(n, inp[n]) for n in NAMES]
    out.append(("LSTMBlockCell", attrs, ins, list(zip(OUTS, fwd))))

    gates = dict(zip(GATES, fwd[:6]))
    cs_grad = rng.uniform(-1, 1, size=(B, H)).astype(np.float32)
    h_grad = rng.uniform(-1, 1, size=(B, H)).astype(np.float32)
    if dtype == np.float16:  # the gate values and upstream gradients the op sees, in half
        gates = {k: v.astype(np.float16).astype(np.float32) for k, v in gates.items()}
        cs_grad = cs_grad.astype(np.float16).astype(np.float32)
        h_grad = h_grad.astype(np.float16).astype(np.float32)
    peep = attrs.get("use_peephole", False)
    k = [t.numpy() for t in tf.raw_ops.LSTMBlockCellGrad(
        **inp32, **gates, cs_grad=cs_grad, h_grad=h_grad, use_peephole=peep)]
    grad_ins = ins + [(n, gates[n].astype(dtype)) for n in GATES] + \
        [("cs_grad", cs_grad.astype(dtype)), ("h_grad", h_grad.astype(dtype))]
    out.append(("LSTMBlockCellGrad", {"use_peephole": peep}, grad_ins,
                list(zip(["cs_prev_grad", "dicfo", "wci_grad", "wcf_grad", "wco_grad"], k))))

    # docs/ops.md: what TF1's registered gradient computed around the kernel.
    cs_prev_grad, dicfo, wci_grad, wcf_grad, wco_grad = k
    xh = np.concatenate([inp32["x"], inp32["h_prev"]], axis=1)
    xh_grad = tf.matmul(dicfo, inp32["w"], transpose_b=True).numpy()
    full = [("x", xh_grad[:, :I]), ("cs_prev", cs_prev_grad), ("h_prev", xh_grad[:, I:]),
            ("w", tf.matmul(xh, dicfo, transpose_a=True).numpy()), ("wci", wci_grad),
            ("wcf", wcf_grad), ("wco", wco_grad),
            ("b", tf.raw_ops.BiasAddGrad(out_backprop=dicfo).numpy())]
    out.append(("gradients.LSTMBlockCell", attrs, grad_ins, full))


def cases(rng, tf):
    out = []
    shapes = [(1, 1, 1), (2, 3, 4), (4, 7, 9), (3, 12, 13), (5, 21, 8), (2, 0, 5), (6, 5, 3),
              (1, 9, 11)]
    for n, (B, I, H) in enumerate(shapes):
        attrs, cs_scale = ATTRS[n % len(ATTRS)]
        add_cases(out, rng, tf, B, I, H, attrs, cs_scale, np.float32)
    # float16: attrs representable in half.
    for n, (B, I, H) in enumerate([(3, 5, 7), (4, 8, 12), (2, 0, 3)]):
        attrs, cs_scale = ATTRS[(n * 3 + 1) % len(ATTRS)]
        add_cases(out, rng, tf, B, I, H, attrs, cs_scale, np.float16)
    return out
