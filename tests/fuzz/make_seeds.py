#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus (tests/fuzz/corpus/): for every op index, one well-formed
call per dtype and a few classic bad inputs, in the byte layout documented at the top of
tests/fuzz/fuzz_ops.cc. Usage: python3 tests/fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_INPUTS, MAX_ATTRS = 18, 3


def seed(op, flags, T, B, I, H, mutations=(), seq_len_max=None, attrs=()):
    b = bytes([op, flags, T, B, I, H])
    muts = dict(mutations)
    for k in range(MAX_INPUTS):
        b += bytes(muts.get(k, (0, 0)))
    b += struct.pack("<q", T if seq_len_max is None else seq_len_max)
    for k in range(MAX_ATTRS):
        present, value = attrs[k] if k < len(attrs) else (0, 0.0)
        b += bytes([present]) + struct.pack("<d", value)
    b += struct.pack("<16f", *[0.1 * (k - 8) for k in range(16)])
    return b


def main():
    out = os.path.join(HERE, "corpus")
    os.makedirs(out, exist_ok=True)
    n = 0
    for op in range(16):
        for dtype in range(3):
            for flags in (1, 3):
                cases = [seed(op, flags | dtype << 3, 3, 2, 4, 5),
                         seed(op, flags | dtype << 3, 0, 0, 0, 0),
                         seed(op, flags | dtype << 3, 4, 1, 0, 3, seq_len_max=2),
                         seed(op, flags | dtype << 3, 3, 2, 4, 5, seq_len_max=-1),
                         seed(op, flags | dtype << 3, 3, 2, 4, 5, seq_len_max=99),
                         seed(op, flags | dtype << 3, 3, 2, 4, 5, mutations=[(1, (200, 1))]),
                         seed(op, flags | dtype << 3, 3, 2, 4, 5, mutations=[(4, (210, 0))]),
                         seed(op, flags | dtype << 3, 3, 2, 4, 5, mutations=[(2, (241, 40))]),
                         seed(op, flags | dtype << 3, 3, 2, 4, 5, attrs=[(3, float("nan"))])]
                for c in cases:
                    with open(os.path.join(out, f"seed_{n:04d}"), "wb") as f:
                        f.write(c)
                    n += 1
    print(f"wrote {n} seeds to {out}")


if __name__ == "__main__":
    main()
