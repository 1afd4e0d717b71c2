#!/usr/bin/env python3
"""A sequence op then its grad in bfloat16 against float32, interleaved A/B rounds.

--op block_lstm (the default): BlockLSTM then BlockLSTMGrad, the same work as
bench/blockrnn_rnn.py --op block_lstm (no peepholes, cell_clip=-1, forget_bias=1,
seq_len_max=T); --op block_gru: BlockGRU then BlockGRUGrad; --op block_gru_reset_after:
BlockGRUResetAfter then BlockGRUResetAfterGrad. Each on the same values, once as float32 arrays
and once as ml_dtypes.bfloat16 arrays (the float32 values rounded). Each round times --reps
calls of forward + backward of each dtype, in an order that alternates by round, and keeps each
dtype's median; the speedup is the median over rounds of the per-round ratio float32 /
bfloat16, with its range. --clock wall (the default) times with time.perf_counter; --clock cpu
with time.process_time, the CPU time of the process (all its threads: at one thread the time
the call ran, whatever else holds the machine). This is a tool, not a test: nothing here
asserts a speed.

    .venv/bin/python bench/bf16_lstm.py [--op block_gru_reset_after] [--threads 1 2]
        [--rounds 7] [--reps 5] [--clock cpu]
"""
import argparse
import json
import statistics
import time

import ml_dtypes
import numpy as np

import blockrnn


def problem(op, T, B, I, H, f32):
    """(forward op, grad op, forward inputs, forward attrs, the forward outputs the grad takes,
    upstream gradients) of `op`, float32, weights ~U(±1/√(I+H))."""
    ws = 1.0 / np.sqrt(I + H)
    if op == "block_lstm":
        kw = dict(x=f32(T, B, I), cs_prev=f32(B, H), h_prev=f32(B, H), w=f32(I + H, 4 * H, s=ws),
                  wci=f32(H), wcf=f32(H), wco=f32(H), b=f32(4 * H))
        return ("BlockLSTM", "BlockLSTMGrad", kw,
                dict(forget_bias=1.0, cell_clip=-1.0, use_peephole=False),
                ("i", "cs", "f", "o", "ci", "co", "h"),
                dict(cs_grad=f32(T, B, H), h_grad=f32(T, B, H)))
    if op == "block_gru":
        kw = dict(x=f32(T, B, I), h_prev=f32(B, H), w_ru=f32(I + H, 2 * H, s=ws),
                  w_c=f32(I + H, H, s=ws), b_ru=f32(2 * H), b_c=f32(H))
        return "BlockGRU", "BlockGRUGrad", kw, {}, ("r", "u", "c", "h"), dict(h_grad=f32(T, B, H))
    if op == "block_gru_reset_after":
        kw = dict(x=f32(T, B, I), h_prev=f32(B, H), w_i=f32(I, 3 * H, s=ws),
                  w_h=f32(H, 3 * H, s=ws), b_i=f32(3 * H), b_h=f32(3 * H))
        return ("BlockGRUResetAfter", "BlockGRUResetAfterGrad", kw, {},
                ("r", "u", "n", "hn", "h"), dict(h_grad=f32(T, B, H)))
    raise SystemExit("unknown --op " + op)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in dict(T=50, B=64, I=512, H=512, rounds=7, reps=5, seed=1234).items():
        p.add_argument("--" + flag, type=int, default=default)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--op", default="block_lstm",
                   choices=["block_lstm", "block_gru", "block_gru_reset_after"])
    p.add_argument("--clock", default="wall", choices=["wall", "cpu"])
    a = p.parse_args()
    T, B, I, H = a.T, a.B, a.I, a.H
    clock = time.perf_counter if a.clock == "wall" else time.process_time
    rng = np.random.default_rng(a.seed)
    f32 = lambda *shape, s=1.0: rng.uniform(-s, s, size=shape).astype(np.float32)  # noqa: E731
    fwd_op, grad_op, kw32, attrs, outs, up32 = problem(a.op, T, B, I, H, f32)
    fwd, grad = getattr(blockrnn.raw_ops, fwd_op), getattr(blockrnn.raw_ops, grad_op)
    grad_attrs = {k: v for k, v in attrs.items() if k == "use_peephole"}
    bf = np.dtype(ml_dtypes.bfloat16)
    calls = {}
    for name, dt in (("float32", np.float32), ("bfloat16", bf)):
        kw = {k: v.astype(dt) for k, v in kw32.items()}
        up = {k: v.astype(dt) for k, v in up32.items()}

        def run(kw=kw, up=up):
            o = fwd(seq_len_max=np.int64(T), **kw, **attrs)
            grad(seq_len_max=np.int64(T), **kw, **{k: getattr(o, k) for k in outs}, **up,
                 **grad_attrs)
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
                    t0 = clock()
                    calls[name]()
                    ts.append((clock() - t0) * 1e3)
                med[name] = statistics.median(ts)
                times[name].append(med[name])
            ratios.append(med["float32"] / med["bfloat16"])
        print(json.dumps(dict(
            op=a.op, T=T, B=B, I=I, H=H, threads=threads, isa=blockrnn.get_isa(),
            clock=a.clock, rounds=a.rounds, reps=a.reps,
            fwdbwd_ms_float32=round(statistics.median(times["float32"]), 1),
            fwdbwd_ms_bfloat16=round(statistics.median(times["bfloat16"]), 1),
            speedup_median=round(statistics.median(ratios), 3),
            speedup_range=[round(min(ratios), 3), round(max(ratios), 3)])), flush=True)


if __name__ == "__main__":
    main()
