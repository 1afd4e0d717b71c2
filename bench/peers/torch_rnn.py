#!/usr/bin/env python3
"""Peer benchmark: PyTorch's torch.nn.LSTM / torch.nn.GRU on the CPU, forward and backward.

Prints one JSON object on stdout with the common fields of the other peers (peer, cell, T, B,
I, H, threads, fwd_ms, fwdbwd_ms, fwd_min_ms, fwdbwd_min_ms, reps, warmup, peak_rss_mb,
rss_increase_mb) and the dtype.

What is timed, per repetition: `y, _ = module(x)` (one layer, unidirectional, time-major,
zero initial state) → fwd_ms; that plus `(y * g).sum().backward()` with a fixed random g and
every parameter's gradient (x's too) → fwdbwd_ms. The gradients are set to None at the start
of each repetition (inside the timed forward; it costs nothing measurable). At T = 1 this is the sequence module with one step
(torch.nn has no fused cell op with the LSTMBlockCell/GRUBlockCell contract): the same GEMM
work as the cell op plus its parameter gradients.

  --dtype float32   torch's fp32 path (its own kernels, or oneDNN where torch picks it)
  --dtype bfloat16  the module and x in bfloat16: on a CPU with AVX512_BF16 torch runs oneDNN's
                    bf16 RNN (bf16 operands, fp32 accumulation)
"""
import argparse
import json
import statistics

from rnn_timing import current_rss_mb, peak_rss_mb, time_fwd_bwd


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cell", choices=("lstm", "gru"), required=True)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    for flag, default in dict(T=50, B=64, I=512, H=512, threads=1, reps=10, warmup=2,
                              seed=1234).items():
        p.add_argument("--" + flag, type=int, default=default)
    a = p.parse_args()
    for name in ("T", "B", "I", "H", "threads", "reps"):
        if getattr(a, name) <= 0:
            p.error(f"--{name} must be positive")

    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dtype = getattr(torch, a.dtype)
    cls = torch.nn.LSTM if a.cell == "lstm" else torch.nn.GRU
    module = cls(a.I, a.H).to(dtype)  # torch.nn's own init: U(±1/sqrt(H))
    x = torch.empty(a.T, a.B, a.I).uniform_(-1, 1).to(dtype).requires_grad_()
    g = torch.empty(a.T, a.B, a.H).uniform_(-1, 1).to(dtype)
    baseline = current_rss_mb()

    def fwd():
        for prm in module.parameters():
            prm.grad = None
        x.grad = None
        y, _ = module(x)
        return y

    def bwd(y):
        (y * g).sum().backward()

    for _ in range(a.warmup):
        bwd(fwd())
    fwd_ms, fwdbwd_ms = time_fwd_bwd(fwd, bwd, a.reps)
    print(json.dumps(dict(
        peer=f"torch_{'fp32' if a.dtype == 'float32' else 'bf16'}", cell=a.cell, dtype=a.dtype,
        T=a.T, B=a.B, I=a.I, H=a.H, threads=a.threads, fwd_ms=statistics.median(fwd_ms),
        fwdbwd_ms=statistics.median(fwdbwd_ms), fwd_min_ms=min(fwd_ms),
        fwdbwd_min_ms=min(fwdbwd_ms), reps=a.reps, warmup=a.warmup,
        peak_rss_mb=peak_rss_mb(), rss_increase_mb=current_rss_mb() - baseline,
        torch=torch.__version__)))


if __name__ == "__main__":
    main()
