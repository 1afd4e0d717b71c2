#!/usr/bin/env python3
"""Writes the model-file fuzzer's seed corpus (tests/fuzz/corpus_model/): well-formed model files
(docs/model-format.md) of every layer kind and option — LSTM with peepholes and clip, V2, both
GRUs, bidirectional with every merge mode, go_backwards, masking, a two-layer stack, the last
step only, float64 — each behind the 4 call-parameter bytes that tests/fuzz/fuzz_model.cc reads
first, with and without seq_lengths and initial states. Standard library only.
Usage: python3 tests/fuzz/make_model_seeds.py"""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus_model")


def params(kind, I, H, peephole):
    if kind in ("BlockLSTM", "BlockLSTMV2"):
        p = [("w", [I + H, 4 * H]), ("b", [4 * H])]
        return p + [(n, [H]) for n in ("wci", "wcf", "wco")] if peephole else p
    if kind == "BlockGRU":
        return [("w_ru", [I + H, 2 * H]), ("w_c", [I + H, H]), ("b_ru", [2 * H]), ("b_c", [H])]
    return [("w_i", [I, 3 * H]), ("w_h", [H, 3 * H]), ("b_i", [3 * H]), ("b_h", [3 * H])]


def model_file(layers, I, dtype="float32", return_sequences=True, masking=None, seed=0):
    """The bytes of a model file: layers as (kind, H, directions, merge, extra attrs)."""
    rng = random.Random(seed)
    fmt, size, code = ("<d", 8, "F64") if dtype == "float64" else ("<f", 4, "F32")
    config_layers, tensors = [], []
    width = I
    for l, (kind, H, directions, merge, attrs) in enumerate(layers):
        layer = {"kind": kind, "hidden_size": H, "directions": directions, "merge": merge,
                 "go_backwards": attrs.get("go_backwards", False),
                 "padded_output": attrs.get("padded_output", "zero"), "name": f"layer{l}"}
        peephole = False
        if kind.startswith("BlockLSTM"):
            peephole = attrs.get("use_peephole", False)
            layer.update(forget_bias=attrs.get("forget_bias", 0.0),
                         cell_clip=attrs.get("cell_clip"), use_peephole=peephole)
        config_layers.append(layer)
        for d in range(directions):
            for name, shape in params(kind, width, H, peephole):
                n = 1
                for s in shape:
                    n *= s
                data = b"".join(struct.pack(fmt, rng.uniform(-0.5, 0.5)) for _ in range(n))
                tensors.append((f"layers.{l}.{d}.{name}", shape, data))
        width = 2 * H if merge == "concat" else H
    config = {"format": "blockrnn-model", "version": 1, "dtype": dtype, "input_size": I,
              "return_sequences": return_sequences, "masking": masking, "layers": config_layers,
              "source": {"framework": "fuzz seed"}}
    header = {"__metadata__": {"blockrnn": json.dumps(config)}}
    offset, blobs = 0, []
    for name, shape, data in sorted(tensors):
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def main():
    os.makedirs(OUT, exist_ok=True)
    lstm = ("BlockLSTM", 3, 1, None, {"use_peephole": True, "cell_clip": 2.0, "forget_bias": 1.0})
    files = {
        "lstm_peephole_clip": model_file([lstm], 2),
        "lstm_v2": model_file([("BlockLSTMV2", 4, 1, None, {"padded_output": "hold"})], 3),
        "gru": model_file([("BlockGRU", 3, 1, None, {"go_backwards": True})], 2),
        "gru_reset_after_bidir_ave": model_file([("BlockGRUResetAfter", 2, 2, "ave", {})], 3),
        "lstm_bidir_concat_stack": model_file(
            [("BlockLSTM", 2, 2, "concat", {}), ("BlockGRU", 3, 2, "sum", {})], 2),
        "gru_bidir_mul_last_step": model_file([("BlockGRU", 2, 2, "mul", {})], 2,
                                              return_sequences=False),
        "lstm_masking": model_file([("BlockLSTM", 2, 1, None, {})], 2,
                                   masking={"mask_value": 0.0}),
        "gru_reset_after_float64": model_file([("BlockGRUResetAfter", 3, 1, None, {})], 2,
                                              dtype="float64"),
    }
    # T, B, flags (bit0 seq_lengths, bit1 initial states, bit3 raw x; bits 4-7 memory), lengths
    calls = {"plain": bytes([3, 2, 0, 0]), "lengths_states": bytes([4, 3, 3, 1]),
             "raw_x_small_memory": bytes([5, 3, 8 | 9 << 4, 0])}
    for name, body in files.items():
        for call, head in calls.items():
            with open(os.path.join(OUT, f"{name}_{call}"), "wb") as f:
                f.write(head + body)


if __name__ == "__main__":
    main()
