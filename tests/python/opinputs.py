"""Generic, consistent inputs for any blockrnn op, built from TensorFlow's input names, so
that suites covering every op (determinism, thread safety, input immutability, NaN
propagation) need no per-op code."""
import numpy as np

import blockrnn


def _shape(op, name, T, B, I, H):
    seq = op.startswith("Block")
    K = I + H
    table = {
        "x": (T, B, I) if seq else (B, I),
        "cs_prev": (B, H), "h_prev": (B, H),
        "w": (K, 4 * H), "w_ru": (K, 2 * H), "w_c": (K, H),
        "wci": (H,), "wcf": (H,), "wco": (H,), "b": (4 * H,), "b_ru": (2 * H,), "b_c": (H,),
        "w_i": (I, 3 * H), "w_h": (H, 3 * H), "b_i": (3 * H,), "b_h": (3 * H,),
    }
    return table.get(name, (T, B, H) if seq else (B, H))


def op_names():
    """Every op: raw ops by their TF name, full backwards as 'gradients.<Cell>'."""
    return sorted(blockrnn.raw_ops.__all__) + \
        sorted("gradients." + n for n in blockrnn.gradients.__all__)


def op_function(op):
    if op.startswith("gradients."):
        return getattr(blockrnn.gradients, op[len("gradients."):])
    return getattr(blockrnn.raw_ops, op)


def make_kwargs(op, rng, T=3, B=4, I=5, H=6, dtype=np.float32, seq_len_max=None):
    """Keyword arguments for `op_function(op)`: uniform values in [-1, 1) (weights scaled by
    1/sqrt(I+H)); required bool attrs (use_peephole on the grads) set to False."""
    import inspect
    fn = op_function(op)
    kw = {}
    for p in inspect.signature(fn).parameters.values():
        if p.name == "name":
            continue
        if p.name == "seq_len_max":
            kw[p.name] = np.int64(T if seq_len_max is None else seq_len_max)
        elif p.default is inspect.Parameter.empty and p.name == "use_peephole":
            kw[p.name] = False
        elif p.default is inspect.Parameter.empty:
            shape = _shape(op, p.name, T, B, I, H)
            scale = 1.0 / np.sqrt(I + H) if p.name.startswith("w") and len(shape) == 2 else 1.0
            kw[p.name] = rng.uniform(-scale, scale, size=shape).astype(dtype)
    return kw
