#!/usr/bin/env python3
"""Produce TensorFlow golden data for the C++ test suite (tests/cpp/test_golden.cc).

Runs the real tensorflow-cpu kernels (tf.raw_ops) on small seeded inputs and writes one
binary file per op family in the versioned format of docs/golden-format.md. The parameter
gradients of `gradients.<Cell>` are computed the way TensorFlow's registered Python gradient
did (SPEC §3.4, §6.4): the kernel, then tf.matmul / tf.reduce_sum around it.

Usage:  .venv/bin/python tools/make_golden.py --out tests/golden [--only gru]
"""
import argparse
import os
import struct

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

FORMAT_VERSION = 1
DTYPE_CODES = {np.dtype(np.float16): 0, np.dtype(np.float32): 1, np.dtype(np.float64): 2,
               np.dtype(np.int64): 3}


def _str(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def _tensor(name, a):
    a = np.ascontiguousarray(a)
    out = _str(name) + struct.pack("<BI", DTYPE_CODES[a.dtype], a.ndim)
    out += b"".join(struct.pack("<q", d) for d in a.shape)
    return out + a.astype(a.dtype.newbyteorder("<")).tobytes()


def write_golden(path, cases):
    """cases: list of (op, attrs dict, [(name, array)] inputs, [(name, array)] outputs)."""
    blob = b"BRNNGOLD" + struct.pack("<II", FORMAT_VERSION, len(cases))
    for op, attrs, inputs, outputs in cases:
        blob += _str(op) + struct.pack("<I", len(attrs))
        for k, v in attrs.items():
            blob += _str(k) + struct.pack("<d", float(v))
        blob += struct.pack("<I", len(inputs)) + b"".join(_tensor(n, a) for n, a in inputs)
        blob += struct.pack("<I", len(outputs)) + b"".join(_tensor(n, a) for n, a in outputs)
    with open(path, "wb") as f:
        f.write(blob)
    print(f"wrote {path}: {len(cases)} cases, {len(blob)} bytes")


def gru_inputs(rng, B, I, H, scale=1.0, dtype=np.float32):
    w = 1.0 / np.sqrt(max(I + H, 1))
    u = lambda shape, s: rng.uniform(-s, s, size=shape).astype(dtype)  # noqa: E731
    return dict(x=u((B, I), scale), h_prev=u((B, H), 1.0), w_ru=u((I + H, 2 * H), w * scale),
                w_c=u((I + H, H), w * scale), b_ru=u((2 * H,), scale), b_c=u((H,), scale))


def gru_cases(rng):
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
        # SPEC §3.4: what TF1's registered gradient computed around the kernel.
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


FAMILIES = {"gru_cell": gru_cases}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="tests/golden")
    p.add_argument("--only", choices=sorted(FAMILIES), action="append")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"tensorflow {tf.__version__}")
    for i, (name, fn) in enumerate(sorted(FAMILIES.items())):
        if args.only and name not in args.only:
            continue
        rng = np.random.default_rng(1000 + i)
        write_golden(os.path.join(args.out, f"{name}_v{FORMAT_VERSION}.bin"), fn(rng))


if __name__ == "__main__":
    main()
