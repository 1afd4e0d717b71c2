#!/usr/bin/env python3
"""The short table at the end of the runbook's `bench` stage (scripts/gpu_runbook.sh): blockrnn's
per-step path against cuDNN, from the CSV rows of blockrnn_cuda_timing and gpu_bench_torch.py.

    gpu_bench_table.py BENCH_CSV [--out TABLE_TXT]

One line per (cell, mode, T, B, H, pass): µs per step of blockrnn (and of its persistent kernels,
when the persistent stage added their rows) and of torch.nn's RNN (torch_impl says which: cudnn,
or torch-native where torch does not use cuDNN, as for bfloat16), the ratio torch / blockrnn
(above 1: blockrnn is faster), and blockrnn's GEMM TFLOP/s (the CSV's tflops: 2·B·(I+H)·G per forward step,
three times that for forward + backward) as a percentage of the device's dense peak for the mode. The peaks are the vendor's datasheet figures (dense, no
sparsity; not measured here), by device name:

    H100 SXM / H200:  fp32 67 (CUDA cores: exact float32 uses no tensor cores), tf32 495,
                      fp16 / bf16 989 TFLOP/s
    H100 PCIe:        fp32 51, tf32 378, fp16 / bf16 756 TFLOP/s

Other devices get no fraction ("-"). blockrnn's GRU is the reset-after BlockGRUResetAfter
(cuDNN's GRU); gru_rb, the reset-before BlockGRU, has no cuDNN counterpart. blockrnn has no bf16
(the mode's cuDNN row stands alone). Rows whose status is not "ok" (unsupported modes) are shown
with their status.
"""

import argparse
import csv
import sys

# TFLOP/s, dense, from the vendor's datasheets.
PEAKS = (
    # (substring of the device name, {mode: peak})
    ("H100 PCIe", {"fp32": 51.0, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0}),
    ("H100", {"fp32": 67.0, "tf32": 495.0, "fp16": 989.0, "bf16": 989.0}),
    ("H200", {"fp32": 67.0, "tf32": 495.0, "fp16": 989.0, "bf16": 989.0}),
)
MODE_ORDER = {"fp32": 0, "tf32": 1, "fp16": 2, "bf16": 3}
PASS_ORDER = {"fwd": 0, "fwd+bwd": 1}


def peak_tflops(device, mode):
    """The dense peak of `device` in `mode`, or None for a device not in PEAKS."""
    for key, peaks in PEAKS:
        if key in device:
            return peaks.get(mode)
    return None


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# The reference side's impl names (gpu_bench_torch.py): cuDNN, torch's own CUDA RNN (what
# bfloat16 gets), torch on the CPU (dry runs).
REFERENCES = ("cudnn", "torch-native", "torch-cpu")


def _step(r):
    """µs per step of a row, its status when it has no time, "-" without a row."""
    if r is None:
        return "-"
    if r["status"] != "ok":
        return r["status"].split(":")[0]
    return "%.2f" % float(r["us_per_step"])


def table_lines(rows):
    """The table's lines: a header, then one line per configuration. Columns: µs per step of each
    of blockrnn's implementations (blockrnn, the per-step path, first; persistent kernels when
    their rows are there) and of the reference (cuDNN), then for each of blockrnn's: the speedup
    over the reference (reference µs / its µs) and its % of the dense peak."""
    key = lambda r: (r["cell"], r["mode"], int(r["T"]), int(r["B"]), int(r["H"]), r["pass"])
    impls = sorted({r["impl"] for r in rows if r["impl"] not in REFERENCES},
                   key=lambda i: (i != "blockrnn", i))
    by_impl = {i: {} for i in impls}
    ref = {}
    for r in rows:
        (ref if r["impl"] in REFERENCES else by_impl[r["impl"]])[key(r)] = r
    keys = set(ref)
    for table in by_impl.values():
        keys |= set(table)
    cols = ["cell", "mode", "T", "B", "H", "pass"] + [i + "_us" for i in impls] + ["torch_us", "torch_impl"]
    for i in impls:
        cols += [i + "_speedup", i + "_%peak"]
    fmt = ("%-6s %-4s %5s %4s %5s %-7s" + " %12s" * (len(impls) + 1) + " %-12s"
           + " %16s %14s" * len(impls))
    lines = [fmt % tuple(cols)]
    order = lambda k: (k[0], MODE_ORDER.get(k[1], 9), k[2], k[3], k[4], PASS_ORDER.get(k[5], 9))
    for k in sorted(keys, key=order):
        cell, mode, T, B, H, pass_ = k
        t = ref.get(k)  # none for gru_rb, which cuDNN does not compute
        fields = [cell, mode, T, B, H, pass_]
        fields += [_step(by_impl[i].get(k)) for i in impls] + [_step(t)]
        fields += [t["impl"] if t is not None else "-"]
        for i in impls:
            o = by_impl[i].get(k)
            speed, frac = "-", "-"
            if o is not None and o["status"] == "ok":
                if t is not None and t["status"] == "ok":
                    speed = "%.2fx" % (float(t["us_per_step"]) / float(o["us_per_step"]))
                peak = peak_tflops(o["device"], mode)
                if peak:
                    frac = "%.1f" % (100.0 * float(o["tflops"]) / peak)
            fields += [speed, frac]
        lines.append(fmt % tuple(fields))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = read_rows(args.csv)
    lines = table_lines(rows)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if len(lines) > 1 else 1


if __name__ == "__main__":
    sys.exit(main())
