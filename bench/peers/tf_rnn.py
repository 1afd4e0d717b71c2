#!/usr/bin/env python3
"""Peer benchmark: TensorFlow's fused RNN block ops, forward and backward.

Prints one JSON object on stdout, with the same core fields as onednn_rnn_peer
(peer, cell, T, B, I, H, threads, fwd_ms, fwdbwd_ms, reps, peak_rss_mb).
See README.md in this folder for what exactly is timed.

Ops:
  block_lstm  tf.raw_ops.BlockLSTM, then tf.raw_ops.BlockLSTMGrad.
  gru_seq     tf.raw_ops.GRUBlockCell stepped T times, then GRUBlockCellGrad
              stepped backward T times with the carried d_h, plus the
              weight-gradient matmuls and bias sums a user has to add.
  lstm_cell   one LSTMBlockCell + LSTMBlockCellGrad (T must be 1).
  gru_cell    one GRUBlockCell + GRUBlockCellGrad (T must be 1).
"""

import argparse
import json
import os
import statistics
import sys

from rnn_timing import current_rss_mb, peak_rss_mb, time_fwd_bwd

OPS = ("block_lstm", "gru_seq", "lstm_cell", "gru_cell")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=OPS, required=True)
    p.add_argument("--T", type=int, default=50)
    p.add_argument("--B", type=int, default=64)
    p.add_argument("--I", type=int, default=512)
    p.add_argument("--H", type=int, default=512)
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads (inter-op is always 1)")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed calls after the (also untimed) tracing call")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--full-grad", action="store_true",
                   help="lstm_cell/gru_cell: also compute the gradients the raw Grad op "
                   "leaves to the caller (x/h_prev/w/b for LSTM, w/b for GRU)")
    p.add_argument("--gru-wgrad", choices=("per_step", "batched"), default="per_step",
                   help="gru_seq: weight-gradient matmuls accumulated per step (default) "
                   "or done once over the concatenated steps")
    a = p.parse_args(argv)
    for name in ("T", "B", "I", "H", "threads", "reps"):
        if getattr(a, name) <= 0:
            p.error(f"--{name} must be positive")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    if a.op in ("lstm_cell", "gru_cell") and a.T != 1:
        p.error(f"--op {a.op} times a single cell step: use --T 1")
    return a


def main(argv):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import numpy as np
    import tensorflow as tf

    # Threading must be configured before the first op runs.
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    # Initialise the eager runtime and its thread pools, then take the baseline.
    _ = (tf.constant(1.0) + 1.0).numpy()
    rss_baseline = current_rss_mb()
    peak_at_baseline = peak_rss_mb()

    T, B, I, H = args.T, args.B, args.I, args.H
    rng = np.random.default_rng(args.seed)
    wbound = 1.0 / np.sqrt(I + H)

    def uni(shape, bound=1.0):
        return tf.constant(rng.uniform(-bound, bound, size=shape).astype(np.float32))

    f32 = tf.float32

    if args.op in ("block_lstm", "lstm_cell"):
        cell = "lstm"
        x = uni((T, B, I)) if args.op == "block_lstm" else uni((B, I))
        cs_prev = uni((B, H))
        h_prev = uni((B, H))
        w = uni((I + H, 4 * H), wbound)
        b = uni((4 * H,), wbound)
        zeros_h = tf.zeros((H,), f32)  # peephole weights (unused, use_peephole=False)
        gshape = (T, B, H) if args.op == "block_lstm" else (B, H)
        cs_grad = uni(gshape)
        h_grad = uni(gshape)

        if args.op == "block_lstm":
            seq_len_max = tf.constant(T, tf.int64)

            @tf.function
            def fwd(x, cs_prev, h_prev, w, b):
                return tf.raw_ops.BlockLSTM(
                    seq_len_max=seq_len_max, x=x, cs_prev=cs_prev, h_prev=h_prev, w=w,
                    wci=zeros_h, wcf=zeros_h, wco=zeros_h, b=b, forget_bias=1.0,
                    cell_clip=-1.0, use_peephole=False)

            @tf.function
            def bwd(x, cs_prev, h_prev, w, b, acts, cs_grad, h_grad):
                i, cs, f, o, ci, co, h = acts
                g = tf.raw_ops.BlockLSTMGrad(
                    seq_len_max=seq_len_max, x=x, cs_prev=cs_prev, h_prev=h_prev, w=w,
                    wci=zeros_h, wcf=zeros_h, wco=zeros_h, b=b, i=i, cs=cs, f=f, o=o, ci=ci,
                    co=co, h=h, cs_grad=cs_grad, h_grad=h_grad, use_peephole=False)
                return g.x_grad, g.cs_prev_grad, g.h_prev_grad, g.w_grad, g.b_grad
        else:
            full = args.full_grad

            @tf.function
            def fwd(x, cs_prev, h_prev, w, b):
                return tf.raw_ops.LSTMBlockCell(
                    x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=zeros_h, wcf=zeros_h,
                    wco=zeros_h, b=b, forget_bias=1.0, cell_clip=-1.0, use_peephole=False)

            @tf.function
            def bwd(x, cs_prev, h_prev, w, b, acts, cs_grad, h_grad):
                i, cs, f, o, ci, co, h = acts
                g = tf.raw_ops.LSTMBlockCellGrad(
                    x=x, cs_prev=cs_prev, h_prev=h_prev, w=w, wci=zeros_h, wcf=zeros_h,
                    wco=zeros_h, b=b, i=i, cs=cs, f=f, o=o, ci=ci, co=co, cs_grad=cs_grad,
                    h_grad=h_grad, use_peephole=False)
                if not full:
                    return g.cs_prev_grad, g.dicfo
                # What the caller must add to get the remaining gradients.
                xh_grad = tf.matmul(g.dicfo, w, transpose_b=True)
                x_grad, h_prev_grad = tf.split(xh_grad, [I, H], axis=1)
                xh = tf.concat([x, h_prev], axis=1)
                w_grad = tf.matmul(xh, g.dicfo, transpose_a=True)
                b_grad = tf.reduce_sum(g.dicfo, axis=0)
                return g.cs_prev_grad, x_grad, h_prev_grad, w_grad, b_grad

        def call_fwd():
            return fwd(x, cs_prev, h_prev, w, b)

        def call_bwd(acts):
            return bwd(x, cs_prev, h_prev, w, b, acts, cs_grad, h_grad)

    else:
        cell = "gru"
        x = uni((T, B, I)) if args.op == "gru_seq" else uni((B, I))
        h0 = uni((B, H))
        w_ru = uni((I + H, 2 * H), wbound)
        w_c = uni((I + H, H), wbound)
        b_ru = uni((2 * H,), wbound)
        b_c = uni((H,), wbound)

        if args.op == "gru_seq":
            dh_seq = uni((T, B, H))  # gradient w.r.t. the output sequence
            batched = args.gru_wgrad == "batched"

            @tf.function
            def fwd(x, h0, w_ru, w_c, b_ru, b_c):
                xs = tf.unstack(x, num=T)
                h = h0
                rs, us, cs, hs = [], [], [], []
                for t in range(T):
                    r, u, c, h = tf.raw_ops.GRUBlockCell(x=xs[t], h_prev=h, w_ru=w_ru, w_c=w_c,
                                                         b_ru=b_ru, b_c=b_c)
                    rs.append(r)
                    us.append(u)
                    cs.append(c)
                    hs.append(h)
                # Layer output [T, B, H] plus the per-step activations backward needs.
                return tf.stack(hs), rs, us, cs, hs

            @tf.function
            def bwd(x, h0, w_ru, w_c, b_ru, b_c, acts, dh_seq):
                _, rs, us, cs, hs = acts
                xs = tf.unstack(x, num=T)
                dhs = tf.unstack(dh_seq, num=T)
                d_h_carry = tf.zeros((B, H), f32)
                dxs = [None] * T
                dw_ru = tf.zeros((I + H, 2 * H), f32)
                dw_c = tf.zeros((I + H, H), f32)
                db_ru = tf.zeros((2 * H,), f32)
                db_c = tf.zeros((H,), f32)
                xh_l, xhr_l, dru_l, dc_l = [], [], [], []
                for t in reversed(range(T)):
                    h_prev = h0 if t == 0 else hs[t - 1]
                    d_h = dhs[t] + d_h_carry
                    g = tf.raw_ops.GRUBlockCellGrad(
                        x=xs[t], h_prev=h_prev, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c,
                        r=rs[t], u=us[t], c=cs[t], d_h=d_h)
                    dxs[t] = g.d_x
                    d_h_carry = g.d_h_prev
                    xh = tf.concat([xs[t], h_prev], axis=1)
                    xhr = tf.concat([xs[t], h_prev * rs[t]], axis=1)
                    if batched:
                        xh_l.append(xh)
                        xhr_l.append(xhr)
                        dru_l.append(g.d_r_bar_u_bar)
                        dc_l.append(g.d_c_bar)
                    else:
                        dw_ru += tf.matmul(xh, g.d_r_bar_u_bar, transpose_a=True)
                        dw_c += tf.matmul(xhr, g.d_c_bar, transpose_a=True)
                        db_ru += tf.reduce_sum(g.d_r_bar_u_bar, axis=0)
                        db_c += tf.reduce_sum(g.d_c_bar, axis=0)
                if batched:
                    dru = tf.concat(dru_l, axis=0)
                    dc = tf.concat(dc_l, axis=0)
                    dw_ru = tf.matmul(tf.concat(xh_l, axis=0), dru, transpose_a=True)
                    dw_c = tf.matmul(tf.concat(xhr_l, axis=0), dc, transpose_a=True)
                    db_ru = tf.reduce_sum(dru, axis=0)
                    db_c = tf.reduce_sum(dc, axis=0)
                return tf.stack(dxs), d_h_carry, dw_ru, dw_c, db_ru, db_c

            def call_fwd():
                return fwd(x, h0, w_ru, w_c, b_ru, b_c)

            def call_bwd(acts):
                return bwd(x, h0, w_ru, w_c, b_ru, b_c, acts, dh_seq)

        else:
            d_h = uni((B, H))
            full = args.full_grad

            @tf.function
            def fwd(x, h0, w_ru, w_c, b_ru, b_c):
                return tf.raw_ops.GRUBlockCell(x=x, h_prev=h0, w_ru=w_ru, w_c=w_c, b_ru=b_ru,
                                               b_c=b_c)

            @tf.function
            def bwd(x, h0, w_ru, w_c, b_ru, b_c, acts, d_h):
                r, u, c, _ = acts
                g = tf.raw_ops.GRUBlockCellGrad(x=x, h_prev=h0, w_ru=w_ru, w_c=w_c, b_ru=b_ru,
                                                b_c=b_c, r=r, u=u, c=c, d_h=d_h)
                if not full:
                    return g.d_x, g.d_h_prev, g.d_c_bar, g.d_r_bar_u_bar
                xh = tf.concat([x, h0], axis=1)
                xhr = tf.concat([x, h0 * r], axis=1)
                dw_ru = tf.matmul(xh, g.d_r_bar_u_bar, transpose_a=True)
                dw_c = tf.matmul(xhr, g.d_c_bar, transpose_a=True)
                db_ru = tf.reduce_sum(g.d_r_bar_u_bar, axis=0)
                db_c = tf.reduce_sum(g.d_c_bar, axis=0)
                return g.d_x, g.d_h_prev, dw_ru, dw_c, db_ru, db_c

            def call_fwd():
                return fwd(x, h0, w_ru, w_c, b_ru, b_c)

            def call_bwd(acts):
                return bwd(x, h0, w_ru, w_c, b_ru, b_c, acts, d_h)

    def finite_check(out):
        first = tf.nest.flatten(out)[0]
        if not np.isfinite(first.numpy()).all():
            print("warning: non-finite gradient", file=sys.stderr)

    # Tracing call (untimed), then untimed warm-up calls.
    for _ in range(1 + args.warmup):
        grads = call_bwd(call_fwd())
    finite_check(grads)
    del grads  # one repetition's tensors alive at a time, from here on too

    fwd_ms, fwdbwd_ms = time_fwd_bwd(call_fwd, call_bwd, args.reps)
    peak = peak_rss_mb()

    rec = {
        "peer": "tensorflow",
        "op": args.op,
        "cell": cell,
        "T": T,
        "B": B,
        "I": I,
        "H": H,
        "threads": args.threads,
        "fwd_ms": round(statistics.median(fwd_ms), 4),
        "fwdbwd_ms": round(statistics.median(fwdbwd_ms), 4),
        "reps": args.reps,
        "warmup": args.warmup,
        "fwd_min_ms": round(min(fwd_ms), 4),
        "fwdbwd_min_ms": round(min(fwdbwd_ms), 4),
        "peak_rss_mb": round(peak, 1),
        "rss_baseline_mb": round(rss_baseline, 1),
        "rss_increase_mb": round(peak - rss_baseline, 1),
        "peak_rss_at_baseline_mb": round(peak_at_baseline, 1),
        "tf_version": tf.__version__,
        "tf_onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
    }
    if args.op in ("lstm_cell", "gru_cell"):
        rec["full_grad"] = bool(args.full_grad)
    if args.op == "gru_seq":
        rec["gru_wgrad"] = args.gru_wgrad
    print(json.dumps(rec, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
