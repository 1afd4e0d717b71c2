#!/usr/bin/env python3
"""Writes the RNN fuzzer's seed corpus (tests/fuzz/corpus_rnn/): for every mode, well-formed
stacks (one and two layers, bidirectional, peepholes, lengths, dropout masks, a caller reserve,
the reference path, torch.nn's parameter layout), and from them the hostile cases: huge sizes, unsupported dtypes, NaN and
huge attrs, every view mutation, a backward with one step fewer, a small memory limit. The
byte layout is documented at the top of tests/fuzz/fuzz_rnn.cc.
Usage: python3 tests/fuzz/make_rnn_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_rnn")
BIDIR, RESERVE, F64, BAD_DTYPE, PEEP, HUGE, REF, SHORTER = 1, 2, 4, 8, 16, 32, 64, 128
MODES = {"lstm": 0, "lstm_v2": 1, "gru": 2, "gru_reset_after": 3}
TORCH, NO_BIAS = 4, 8  # bits of the mode byte


def seed(mode, flags=0, I=3, H=2, L=1, max_time=5, max_batch=4, T=4, B=3, forget_bias=0,
         cell_clip=0, mutation=0, lengths=0, dropout=0, memory=0):
    head = bytes([mode, flags, I, H, L, max_time, max_batch, T, B, forget_bias, cell_clip,
                  mutation, lengths, dropout, memory])
    # Element values: small floats, so that the well-formed seeds compute finite results.
    values = b"".join(struct.pack(">f", ((k * 37) % 200 - 100) / 400.0) for k in range(64))
    return head + values


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    for name, m in MODES.items():
        seeds[f"{name}_plain"] = seed(m)
        seeds[f"{name}_stack_bidir_lengths"] = seed(m, BIDIR, L=2, lengths=3)
        seeds[f"{name}_dropout_reserve_f64"] = seed(m, RESERVE | F64, L=3, dropout=1)
        seeds[f"{name}_reference"] = seed(m, REF | BIDIR, lengths=1)
        seeds[f"{name}_shorter_backward"] = seed(m, SHORTER)
        seeds[f"{name}_huge_sizes"] = seed(m, HUGE, I=6, H=5, L=7)
        seeds[f"{name}_bad_dtype"] = seed(m, BAD_DTYPE)
        seeds[f"{name}_small_memory"] = seed(m, memory=10)
        for kind in range(4):
            for target in (4, 9):  # y, x_grad
                seeds[f"{name}_mutation_{target}_{kind}"] = seed(m, mutation=160 + target + 12 * kind)
    seeds["lstm_peephole_attrs_nan"] = seed(0, PEEP, forget_bias=5, cell_clip=5)
    seeds["lstm_attrs_float_max"] = seed(0, PEEP, forget_bias=7, cell_clip=7)
    seeds["lstm_v2_forget_bias"] = seed(1, forget_bias=2)
    # torch.nn's parameter layout (mode bit 2; bit 3: the biases absent), and its refusal for
    # TensorFlow's variants
    for name, m in MODES.items():
        seeds[f"{name}_torch_layout"] = seed(m | TORCH, BIDIR, L=2, lengths=3)
    seeds["lstm_v2_torch_layout_peephole_no_bias"] = seed(1 | TORCH | NO_BIAS, PEEP | RESERVE)
    seeds["gru_reset_after_torch_layout_f64_no_bias"] = seed(3 | TORCH | NO_BIAS, F64, L=2)
    seeds["gru_reset_after_torch_layout_mutation"] = seed(3 | TORCH, mutation=160 + 9 + 12)
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
