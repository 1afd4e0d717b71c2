#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus (tests/fuzz/corpus/): for every op index, one well-formed
call per dtype and a few classic bad inputs; then, for the first four op indices (every op of
a family the fuzzer is run on), hostile attrs, huge-but-empty shapes, a small memory limit,
cancellation of long sequences, and calls through the C API with hostile strides. The byte layout is documented at the top of
tests/fuzz/fuzz_ops.cc. Usage: python3 tests/fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_INPUTS, MAX_ATTRS = 19, 3  # fuzz_ops.cc kMaxInputs, kMaxAttrs

# flags bits
CONSISTENT, OWNED_OUTPUTS, TABLE_DIMS, SEQ_LEN_IS_T, REFERENCE = 1, 2, 32, 64, 128
# indices into fuzz_ops.cc's kDims
D0, D1, D2, D3, D5, D17, D64, D4096, D1000 = 0, 1, 2, 3, 4, 5, 6, 7, 8
D2P31, D2P32P1, D2P40, D2P62, DMAX_4, DMAX = 9, 10, 11, 12, 13, 14
# indices into fuzz_ops.cc's kSpecial
NAN, INF, NEG_INF, F32_SUB, F32_SUB_HALF_MIN, F64_SUB, F64_SUB_HALF_MIN = 0, 3, 4, 5, 7, 9, 11
JUST_ABOVE_F32, E39, NEG_E39, E300, NEG_E300, TWO, NEG_ONE = 15, 16, 17, 18, 19, 25, 26
# attrs where the (present, value) pair is a well-formed value for every op's attr in that slot
WELL_FORMED = [(1, 1.0), (1, 3.0), (1, 0.0)]


def given(mode, index=0, value=0.0):
    """An attr selector: mode 0 well-formed, 1 raw double, 2 kSpecial[index], 3 kNames[index]."""
    return (1 | mode << 1 | index << 3, value)


def seed(op, flags, T, B, I, H, mutations=(), seq_len_max=None, attrs=(), memory=0, cancel=0,
         empty_data=0, c_api=0):
    b = bytes([op, flags, T, B, I, H])
    muts = dict(mutations)
    for k in range(MAX_INPUTS):
        b += bytes(muts.get(k, (0, 0)))
    b += struct.pack("<q", T if seq_len_max is None else seq_len_max)
    for k in range(MAX_ATTRS):
        present, value = attrs[k] if k < len(attrs) else (0, 0.0)
        b += bytes([present]) + struct.pack("<d", value)
    b += bytes([memory, cancel, empty_data, c_api])
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
    for name, c in hostile_seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(c)
        n += 1
    print(f"wrote {n} seeds to {out}")


def hostile_seeds():
    """(file name, bytes) of the issue-14 cases, for op indices 0-3."""
    table = CONSISTENT | TABLE_DIMS | SEQ_LEN_IS_T
    for op in range(4):
        # Attrs (slot 0 is use_peephole for the LSTM grads; GRU ops have none, so only the
        # unknown name reaches them): NaN, inf, float32 and float64 subnormals, just beyond
        # float32, a bool of 2, an unknown name.
        yield f"attr_nan_inf_{op}", seed(op, 1, 3, 2, 4, 5, attrs=[
            given(2, NAN), given(2, INF), WELL_FORMED[2]])
        yield f"attr_subnormal_{op}", seed(op, 1, 3, 2, 4, 5, attrs=[
            given(2, F32_SUB), (1, 0.0), WELL_FORMED[2]])
        yield f"attr_beyond_f32_{op}", seed(op, 1, 3, 2, 4, 5, attrs=[
            given(2, F64_SUB), given(2, JUST_ABOVE_F32), WELL_FORMED[2]])
        yield f"attr_bool_two_{op}", seed(op, 1, 3, 2, 4, 5, attrs=[
            WELL_FORMED[0], WELL_FORMED[1], given(2, TWO)])
        yield f"attr_unknown_{op}", seed(op, 1, 3, 2, 4, 5, attrs=[
            given(3, 1, 1.0), given(2, NEG_E300), WELL_FORMED[2]])
        # Huge-but-empty shapes: B = 0 beside T = seq_len_max = 2^40; B = 2^62 with I = H = 0;
        # T = INT64_MAX with B = 0 (caller-owned outputs, an unmapped data pointer for every
        # empty tensor, the reference path).
        yield f"empty_huge_{op}_a", seed(op, table, D2P40, D0, D3, D5, attrs=WELL_FORMED)
        yield f"empty_huge_{op}_b", seed(op, table | OWNED_OUTPUTS, D3, D2P62, D0, D0,
                                         attrs=WELL_FORMED, empty_data=2)
        yield f"empty_huge_{op}_c", seed(op, table | OWNED_OUTPUTS | REFERENCE, DMAX, D0, D3, D5,
                                         attrs=WELL_FORMED, empty_data=2)
        # Memory limit 1 KiB (everything non-empty refused) or 8 MiB (a [64, 17, 17] problem fits);
        # cancellation after the first poll: 4096 steps outlast the 20 ms poll interval.
        if op < 2:
            yield f"memory_limit_{op}", seed(op, 1, 3, 2, 4, 5, attrs=WELL_FORMED, memory=1)
            yield f"cancel_{op}_fast", seed(op, table, D4096, D3, D5, D5, attrs=WELL_FORMED,
                                            cancel=1)
        else:
            yield f"memory_limit_{op}", seed(op, table, D64, D17, D17, D17, attrs=WELL_FORMED,
                                             memory=14)
            yield f"cancel_{op}_reference", seed(op, table | REFERENCE, D4096, D3, D5, D5,
                                                 attrs=WELL_FORMED, cancel=1)
        # The C API with strides (fuzz_ops.cc kStrides[c & 7] in dimension (c >> 3) % rank):
        # dense, a broadcast and a reversed dimension (valid, computed), and 2^62, INT64_MAX,
        # INT64_MIN, -2^62 and -2^61 (refused), on dimension 1 and dimension 2 (mod the rank;
        # c_api = 0 would be the C++ API).
        for mode in range(8):
            for dim in (1, 2):
                yield f"c_api_strides_{op}_{mode}_{dim}", seed(
                    op, 1 | OWNED_OUTPUTS, 3, 2, 4, 5, attrs=WELL_FORMED, c_api=mode | dim << 3)


if __name__ == "__main__":
    main()
