#!/usr/bin/env python3
"""Produce TensorFlow golden data for the C++ test suite (tests/cpp/test_golden.cc).

Runs the real tensorflow-cpu kernels (tf.raw_ops) on small seeded inputs and writes one
binary file per op family in the versioned format of docs/golden-format.md. The parameter
gradients of `gradients.<Cell>` are computed the way TensorFlow's registered Python gradient
did (docs/ops.md): the kernel, then tf.matmul / tf.reduce_sum around it.

Usage:  .venv/bin/python tools/make_golden.py --out tests/golden [--only gru_cell]
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
    a = np.asarray(a)
    a = a if a.flags.c_contiguous else a.copy(order="C")  # keeps 0-d arrays 0-d
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


def load_families():
    """Every module tools/golden/<family>.py defines `cases(rng, tf)` returning a list of
    (op, attrs, inputs, outputs) tuples; the file written is <family>_v<version>.bin."""
    import importlib.util
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
    families = {}
    for fn in sorted(os.listdir(here)):
        if fn.endswith(".py") and not fn.startswith("_"):
            spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(here, fn))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            families[fn[:-3]] = mod.cases
    return families


FAMILIES = load_families()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="tests/golden")
    p.add_argument("--only", choices=sorted(FAMILIES), action="append")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"tensorflow {tf.__version__}")
    for name, fn in sorted(FAMILIES.items()):
        if args.only and name not in args.only:
            continue
        rng = np.random.default_rng(1000 + sum(map(ord, name)))
        write_golden(os.path.join(args.out, f"{name}_v{FORMAT_VERSION}.bin"), fn(rng, tf))


if __name__ == "__main__":
    main()
