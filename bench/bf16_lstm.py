#!/usr/bin/env python3
"""BlockLSTM then BlockLSTMGrad in bfloat16 against float32, interleaved A/B rounds.

The same work as bench/blockrnn_rnn.py --op block_lstm (no peepholes, cell_clip=-1,
forget_bias=1, seq_len_max=T) on the same values, once as float32 arrays and once as
ml_dtypes.bfloat16 arrays (the float32 values rounded). Each round times --reps calls of
forward + backward of each dtype, in an order that alternates by round, and keeps each dtype's
median; the speedup is the median over rounds of the per-round ratio float32 / bfloat16, with
its range. This is a tool, not a test: nothing here asserts a speed.

    .venv/bin/python bench/bf16_lstm.py [--threads 1 2] [--rounds 7] [--reps 5]
"""
import argparse
import json
import statistics
import time

import ml_dtypes
import numpy as np

import blockrnn


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in dict(T=50, B=64, I=512, H=512, rounds=7, reps=5, seed=1234).items():
        p.add_argument("--" + flag, type=int, default=default)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = p.parse_args()
    T, B, I, H = a.T, a.B, a.I, a.H
    rng = np.random.default_rng(a.seed)
    ws = 1.0 / np.sqrt(I + H)
    f32 = lambda *shape, s=1.0: rng.uniform(-s, s, size=shape).astype(np.float32)  # noqa: E731
    kw32 = dict(x=f32(T, B, I), cs_prev=f32(B, H), h_prev=f32(B, H), w=f32(I + H, 4 * H, s=ws),
                wci=f32(H), wcf=f32(H), wco=f32(H), b=f32(4 * H))
    up32 = dict(cs_grad=f32(T, B, H), h_grad=f32(T, B, H))
    bf = np.dtype(ml_dtypes.bfloat16)
    calls = {}
    for name, dt in (("float32", np.float32), ("bfloat16", bf)):
        kw = {k: v.astype(dt) for k, v in kw32.items()}
        up = {k: v.astype(dt) for k, v in up32.items()}

        def run(kw=kw, up=up):
            o = blockrnn.raw_ops.BlockLSTM(seq_len_max=np.int64(T), **kw, forget_bias=1.0,
                                           cell_clip=-1.0, use_peephole=False)
            blockrnn.raw_ops.BlockLSTMGrad(seq_len_max=np.int64(T), **kw, i=o.i, cs=o.cs, f=o.f,
                                           o=o.o, ci=o.ci, co=o.co, h=o.h, **up,
                                           use_peephole=False)
        calls[name] = run

    for threads in a.threads:
        blockrnn.set_num_threads(threads)
        for run in calls.values():
            run()  # warm-up
        ratios, times = [], {name: [] for name in calls}
        for r in range(a.rounds):
            order = list(calls) if r % 2 == 0 else list(reversed(calls))
            med = {}
            for name in order:
                ts = []
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    calls[name]()
                    ts.append((time.perf_counter() - t0) * 1e3)
                med[name] = statistics.median(ts)
                times[name].append(med[name])
            ratios.append(med["float32"] / med["bfloat16"])
        print(json.dumps(dict(
            T=T, B=B, I=I, H=H, threads=threads, isa=blockrnn.get_isa(), rounds=a.rounds,
            reps=a.reps,
            fwdbwd_ms_float32=round(statistics.median(times["float32"]), 1),
            fwdbwd_ms_bfloat16=round(statistics.median(times["bfloat16"]), 1),
            speedup_median=round(statistics.median(ratios), 3),
            speedup_range=[round(min(ratios), 3), round(max(ratios), 3)])), flush=True)


if __name__ == "__main__":
    main()
