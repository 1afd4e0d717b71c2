#!/usr/bin/env python3
"""Times blockrnn on the same work as the peers in bench/peers/, with the same JSON output.

  --op block_lstm   BlockLSTM forward, then BlockLSTMGrad (no peepholes, cell_clip=-1,
                    forget_bias=1, seq_len_max=T) — the same work as tf_rnn.py --op block_lstm
  --op block_gru    BlockGRU forward, then BlockGRUGrad (all parameter gradients included)
  --op lstm_cell    T=1: LSTMBlockCell, then gradients.LSTMBlockCell (the kernel + the
                    parameter gradients, like tf_rnn.py --full-grad)
  --op gru_cell     T=1: GRUBlockCell, then gradients.GRUBlockCell

--dtype bfloat16 runs the same ops on bfloat16 inputs (peer blockrnn_bf16).

--plan (block_lstm, block_gru) runs the same work on the library's layer object, the plan
(`blockrnn/layer.h`'s BlockLSTMLayer / BlockGRULayer through the binding, what blockrnn.layers,
blockrnn.torch and a C++ caller hold; peer blockrnn_plan): the weights set and packed once
before the clock starts, as the oneDNN peer reorders its weights once, and the outputs,
gradients and workspace allocated once and reused by every repetition, as the oneDNN peer's
are. The one-shot ops (without --plan) pack the weights and allocate their workspace and
outputs at every call.

One JSON object on stdout: peer, op, T, B, I, H, threads, fwd_ms, fwdbwd_ms (medians),
fwd_min_ms, fwdbwd_min_ms, reps, warmup, peak_rss_mb, rss_increase_mb, and isa (the kernel
path blockrnn.get_isa() reports, null if this build of the package has no get_isa).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
from rnn_timing import current_rss_mb, peak_rss_mb, time_fwd_bwd  # noqa: E402


def plan_calls(op, kw, cs_grad, h_grad, T, B, I, H):
    """fwd() and bwd(outputs) of the sequence op `op` on a layer object made and given the
    weights of `kw` here (the one-shot ops' inputs), every output and gradient allocated here
    once."""
    from blockrnn import _core
    x = kw["x"]
    empty = lambda *shape: np.empty(shape, np.float32)  # noqa: E731
    if op == "block_lstm":
        layer = _core.LSTMLayer(I, H, "float32", T, B, v2=False, forget_bias=1.0,
                                cell_clip=-1.0, use_peephole=False)
        layer.set_weights(kw["w"], kw["b"], kw["wci"], kw["wcf"], kw["wco"])
        states = [kw["cs_prev"], kw["h_prev"]]
        outs = [empty(T, B, H) for _ in range(7)]  # i cs f o ci co h
        grads = [empty(T, B, I), empty(B, H), empty(B, H), empty(I + H, 4 * H),
                 empty(H), empty(H), empty(H), empty(4 * H)]
        incoming = [cs_grad, h_grad]
    else:
        layer = _core.GRULayer(I, H, "float32", T, B)
        layer.set_weights(kw["w_ru"], kw["w_c"], kw["b_ru"], kw["b_c"])
        states = [kw["h_prev"]]
        outs = [empty(T, B, H) for _ in range(4)]  # r u c h
        grads = [empty(T, B, I), empty(B, H), empty(I + H, 2 * H), empty(I + H, H),
                 empty(2 * H), empty(H)]
        incoming = [h_grad]

    def fwd():
        layer.forward(x, *states, outs)
        return outs

    def bwd(o):
        layer.backward(x, *states, o, *incoming, grads)
        return grads
    return fwd, bwd


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", choices=["block_lstm", "block_gru", "lstm_cell", "gru_cell"],
                   required=True)
    for flag, default in dict(T=50, B=64, I=512, H=512, threads=1, reps=10, warmup=2,
                              seed=1234).items():
        p.add_argument("--" + flag, type=int, default=default)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="bfloat16: every input in ml_dtypes.bfloat16 (the ops' bfloat16 path: "
                        "bfloat16 products on a CPU with AVX512_BF16); the record's peer is "
                        "then blockrnn_bf16")
    p.add_argument("--plan", action="store_true",
                   help="the layer object (plan) instead of the one-shot ops: block_lstm and "
                        "block_gru, float32; the record's peer is then blockrnn_plan")
    a = p.parse_args()
    if a.plan and (a.op not in ("block_lstm", "block_gru") or a.dtype != "float32"):
        p.error("--plan times the float32 sequence ops (block_lstm, block_gru)")

    import blockrnn
    blockrnn.set_num_threads(a.threads)
    get_isa = getattr(blockrnn, "get_isa", None)  # newer builds only
    isa = get_isa() if callable(get_isa) else get_isa
    ops, grads = blockrnn.raw_ops, blockrnn.gradients
    rng = np.random.default_rng(a.seed)
    T, B, I, H = a.T, a.B, a.I, a.H
    ws = 1.0 / np.sqrt(I + H)
    dtype = np.float32
    if a.dtype == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    # Every floating input, in the run's dtype (the name says what the float32 run takes).
    f32 = lambda *shape, s=1.0: rng.uniform(-s, s, size=shape).astype(dtype)  # noqa: E731
    slm = np.int64(T)
    baseline = current_rss_mb()

    if a.op == "block_lstm":
        kw = dict(seq_len_max=slm, x=f32(T, B, I), cs_prev=f32(B, H), h_prev=f32(B, H),
                  w=f32(I + H, 4 * H, s=ws), wci=f32(H), wcf=f32(H), wco=f32(H), b=f32(4 * H))
        cs_grad, h_grad = f32(T, B, H), f32(T, B, H)

        def fwd():
            return ops.BlockLSTM(**kw, forget_bias=1.0, cell_clip=-1.0, use_peephole=False)

        def bwd(o):
            return ops.BlockLSTMGrad(**kw, i=o.i, cs=o.cs, f=o.f, o=o.o, ci=o.ci, co=o.co, h=o.h,
                                     cs_grad=cs_grad, h_grad=h_grad, use_peephole=False)
    elif a.op == "block_gru":
        kw = dict(seq_len_max=slm, x=f32(T, B, I), h_prev=f32(B, H), w_ru=f32(I + H, 2 * H, s=ws),
                  w_c=f32(I + H, H, s=ws), b_ru=f32(2 * H), b_c=f32(H))
        h_grad = f32(T, B, H)

        def fwd():
            return ops.BlockGRU(**kw)

        def bwd(o):
            return ops.BlockGRUGrad(**kw, r=o.r, u=o.u, c=o.c, h=o.h, h_grad=h_grad)
    elif a.op == "lstm_cell":
        kw = dict(x=f32(B, I), cs_prev=f32(B, H), h_prev=f32(B, H), w=f32(I + H, 4 * H, s=ws),
                  wci=f32(H), wcf=f32(H), wco=f32(H), b=f32(4 * H))
        cs_grad, h_grad = f32(B, H), f32(B, H)

        def fwd():
            return ops.LSTMBlockCell(**kw, forget_bias=1.0, cell_clip=-1.0, use_peephole=False)

        def bwd(o):
            return grads.LSTMBlockCell(**kw, i=o.i, cs=o.cs, f=o.f, o=o.o, ci=o.ci, co=o.co,
                                       cs_grad=cs_grad, h_grad=h_grad, use_peephole=False)
    else:
        kw = dict(x=f32(B, I), h_prev=f32(B, H), w_ru=f32(I + H, 2 * H, s=ws),
                  w_c=f32(I + H, H, s=ws), b_ru=f32(2 * H), b_c=f32(H))
        d_h = f32(B, H)

        def fwd():
            return ops.GRUBlockCell(**kw)

        def bwd(o):
            return grads.GRUBlockCell(**kw, r=o.r, u=o.u, c=o.c, d_h=d_h)

    if a.plan:
        fwd, bwd = plan_calls(a.op, kw, cs_grad if a.op == "block_lstm" else None, h_grad, T, B,
                              I, H)

    for _ in range(a.warmup):
        bwd(fwd())
    fwd_t, all_t = time_fwd_bwd(fwd, bwd, a.reps)  # timed as the TensorFlow peer
    peak = peak_rss_mb()
    peer = "blockrnn_plan" if a.plan else "blockrnn" if a.dtype == "float32" else "blockrnn_bf16"
    rec = dict(peer=peer, op=a.op, T=T, B=B, I=I, H=H, threads=a.threads,
               fwd_ms=float(np.median(fwd_t)), fwdbwd_ms=float(np.median(all_t)),
               fwd_min_ms=min(fwd_t), fwdbwd_min_ms=min(all_t), reps=a.reps, warmup=a.warmup,
               peak_rss_mb=peak, rss_baseline_mb=baseline, rss_increase_mb=peak - baseline,
               isa=None if isa is None else str(isa))
    print(json.dumps(rec, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
