#!/usr/bin/env python3
"""cuDNN's LSTM and GRU through torch.nn.LSTM / torch.nn.GRU: the reference side of the runbook's
`bench` stage (scripts/gpu_runbook.sh bench; docs/cuda.md, "On a GPU").

    gpu_bench_torch.py --csv FILE [--cells lstm,gru] [--modes fp32,tf32,fp16,bf16]
                       [--device cuda] [--target-ms 1000] T B H [T B H ...]

For each shape (I = H, one layer, unidirectional, batch_first=False, the layout of blockrnn's
[T, B, ·] tensors), cell and mode: the training forward (autograd on, as a training step runs it:
cuDNN keeps its reserve space for the backward) and the forward + backward (torch.autograd.grad of
the output with respect to the input, the initial state and every weight: what blockrnn's Grad ops
compute), timed with CUDA events after warm-up calls; the number of timed calls is chosen from the
warm-up's time so that they take about --target-ms, within [3, 20]; the median is reported.

Modes: fp32 = exact float32 (TF32 off for cuDNN and for matmul), tf32 = TF32 allowed, fp16 and bf16
= the module and the inputs in that dtype (cuDNN computes the RNN in half precision with float32
accumulation; PyTorch picks cuDNN's persistent algorithm itself where its rules allow). A mode the
device or library cannot run (bf16 RNNs on an old cuDNN, say) becomes a row with status
"unsupported: <error>" instead of stopping the run.

The CSV columns are blockrnn_cuda_timing's (tests/cuda/cuda_timing.cc), with impl = cudnn when
torch gives the call to cuDNN, torch-native when it does not (torch runs bfloat16 RNNs with its
own per-step kernels, not cuDNN: such rows are labelled so, never as cuDNN), torch-cpu with
--device cpu (the runbook's dry run on a machine without a GPU, where the timings mean nothing). Rows are appended and flushed as they are measured.
"""

import argparse
import csv
import os
import statistics
import sys
import time

CSV_HEADER = [
    "impl", "cell", "mode", "T", "B", "H", "I", "pass", "us_per_call", "us_per_step", "tflops",
    "reps", "device", "status",
]
CELLS = ("lstm", "gru")
MODES = ("fp32", "tf32", "fp16", "bf16")


def fwd_step_flops(cell, B, I, H):
    """The GEMM arithmetic of one forward step: input projection and recurrent product."""
    gates = 4 * H if cell == "lstm" else 3 * H
    return 2.0 * B * (I + H) * gates


def csv_row(impl, cell, mode, T, B, H, pass_, us, reps, device, status="ok"):
    """One CSV row (a list of strings) in the columns of CSV_HEADER."""
    if us is None:
        per_step, tflops, call = "", "", ""
    else:
        step_us = us / T
        flops = fwd_step_flops(cell, B, H, H) * (1.0 if pass_ == "fwd" else 3.0)
        per_step = "%.4f" % step_us
        tflops = "%.4f" % (flops / (step_us * 1e-6) / 1e12)
        call = "%.3f" % us
    return [impl, cell, mode, str(T), str(B), str(H), str(H), pass_, call, per_step, tflops,
            str(reps), device, status]


class CsvOut:
    """Appends rows to a CSV file (the header when the file is new), flushed row by row."""

    def __init__(self, path):
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        self._f = open(path, "a", newline="")
        self._w = csv.writer(self._f)
        if new:
            self._w.writerow(CSV_HEADER)
            self._f.flush()

    def write(self, row):
        self._w.writerow(row)
        self._f.flush()

    def close(self):
        self._f.close()


def parse_shapes(values):
    if len(values) == 0 or len(values) % 3 != 0:
        raise SystemExit("gpu_bench_torch.py: give shapes as T B H triples, got %r" % (values,))
    shapes = []
    for k in range(0, len(values), 3):
        T, B, H = (int(v) for v in values[k:k + 3])
        if min(T, B, H) <= 0:
            raise SystemExit("gpu_bench_torch.py: T, B and H must be positive")
        shapes.append((T, B, H))
    return shapes


def split_list(text, allowed, what):
    items = [s for s in text.split(",") if s]
    for s in items:
        if s not in allowed:
            raise SystemExit("gpu_bench_torch.py: unknown %s %r (one of %s)"
                             % (what, s, ", ".join(allowed)))
    return items


class Timer:
    """Median time of a callable in µs: CUDA events on the current stream, or the host clock."""

    def __init__(self, torch, device, target_ms):
        self.torch, self.cuda, self.target_ms = torch, device.startswith("cuda"), target_ms

    def _once_ms(self, f):
        torch = self.torch
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        t0 = time.perf_counter()
        f()
        return 1000.0 * (time.perf_counter() - t0)

    def median_us(self, f, warmup=2):
        warm = 0.0
        for _ in range(warmup):
            warm = self._once_ms(f)
        reps = int(min(20, max(3, self.target_ms / max(warm, 1e-3))))
        times = [self._once_ms(f) for _ in range(reps)]
        return 1000.0 * statistics.median(times), reps


def set_mode(torch, mode):
    tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode, torch.float32)


def bench_one(torch, timer, cell, mode, T, B, H, device):
    """impl, (fwd µs, reps), (fwd+bwd µs, reps) of one configuration. impl: "cudnn" when torch
    hands the input to cuDNN (torch.backends.cudnn.is_acceptable: float16/32/64 on CUDA), else
    "torch-native" (torch's own per-step CUDA implementation, which bfloat16 gets), or
    "torch-cpu"."""
    dtype = set_mode(torch, mode)
    gen = torch.Generator(device="cpu").manual_seed(1)
    Module = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
    rnn = Module(H, H, num_layers=1).to(device=device, dtype=dtype)
    x = (torch.rand(T, B, H, generator=gen) * 0.2 - 0.1).to(device=device, dtype=dtype)
    h0 = torch.zeros(1, B, H, device=device, dtype=dtype)
    x.requires_grad_(True)
    h0.requires_grad_(True)
    state = (h0, torch.zeros_like(h0).requires_grad_(True)) if cell == "lstm" else h0
    wrt = [x] + list(state if cell == "lstm" else [state]) + list(rnn.parameters())
    grad_out = torch.rand(T, B, H, generator=gen).to(device=device, dtype=dtype)

    def fwd():
        return rnn(x, state)[0]

    def fwd_bwd():
        torch.autograd.grad(fwd(), wrt, grad_out)

    if not device.startswith("cuda"):
        impl = "torch-cpu"
    else:
        impl = "cudnn" if torch.backends.cudnn.is_acceptable(x) else "torch-native"
    return impl, timer.median_us(fwd), timer.median_us(fwd_bwd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", required=True)
    ap.add_argument("--cells", default="lstm,gru")
    ap.add_argument("--modes", default="fp32,tf32,fp16,bf16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--target-ms", type=float, default=1000.0)
    ap.add_argument("shapes", nargs="+", help="T B H triples")
    args = ap.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    cells = split_list(args.cells, CELLS, "cell")
    modes = split_list(args.modes, MODES, "mode")

    import torch  # after the arguments: a usage error needs no torch

    if args.device.startswith("cuda"):
        if not torch.cuda.is_available():
            print("gpu_bench_torch.py: torch sees no CUDA device", file=sys.stderr)
            return 77
        impl = "cudnn"
        name = torch.cuda.get_device_name(0)
        torch.backends.cudnn.enabled = True
        torch.backends.cudnn.benchmark = False
        print("torch %s, CUDA %s, cuDNN %s, %s" % (torch.__version__, torch.version.cuda,
                                                  torch.backends.cudnn.version(), name))
    else:
        impl, name = "torch-cpu", "cpu"
        print("torch %s on the CPU (a dry run: the timings mean nothing)" % torch.__version__)
    sys.stdout.flush()
    timer = Timer(torch, args.device, args.target_ms)
    out = CsvOut(args.csv)
    try:
        for (T, B, H) in shapes:
            for mode in modes:
                for cell in cells:
                    try:
                        row_impl, (f_us, f_reps), (fb_us, fb_reps) = bench_one(
                            torch, timer, cell, mode, T, B, H, args.device)
                    except (RuntimeError, NotImplementedError) as e:
                        if "out of memory" in str(e):
                            raise
                        why = "unsupported: " + str(e).splitlines()[0][:120].replace(",", ";")
                        for p in ("fwd", "fwd+bwd"):
                            out.write(csv_row(impl, cell, mode, T, B, H, p, None, 0, name, why))
                        print("%s %-4s %-4s T=%d B=%d H=%d %s" % (impl, cell, mode, T, B, H, why))
                        continue
                    for p, us, reps in (("fwd", f_us, f_reps), ("fwd+bwd", fb_us, fb_reps)):
                        out.write(csv_row(row_impl, cell, mode, T, B, H, p, us, reps, name))
                        print("%s %-4s %-4s %-7s T=%d B=%d H=%d %12.1f us/call %9.2f us/step"
                              % (row_impl, cell, mode, p, T, B, H, us, us / T))
                    sys.stdout.flush()
                    if args.device.startswith("cuda"):
                        torch.cuda.empty_cache()
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
