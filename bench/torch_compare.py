#!/usr/bin/env python3
"""blockrnn.torch.LSTM / GRU against torch.nn.LSTM / GRU: forward + backward on the same shapes,
the same thread count (torch.set_num_threads and blockrnn.set_num_threads) and machine.

    .venv/bin/python bench/torch_compare.py --threads 1 2 --clock process
    .venv/bin/python bench/torch_compare.py --threads 2 --shapes T50,B64,I512,H512 --reps 10

Without --shapes, the shapes of bench/compare_shapes.txt (the ones the speed targets name), each
for both modules. Several --threads values run one after the other, each with its own table.

Each measurement: the module's forward on x [T,B,I] (time-major, zero initial state), then
backward of sum(output * g) for a fixed g, parameter gradients zeroed in between (with --train,
also an SGD step on the parameters, in place: a training loop, where blockrnn packs the changed
weights once per step); 2 warm-up runs,
then --reps runs of each module, alternating torch.nn and blockrnn so that a load change on a
shared machine hits both; the minimum and the median in milliseconds. Ratio = blockrnn / torch
of the minima (< 1: blockrnn is faster); "rounds": the median over the rounds of each
round's blockrnn / torch time (the robust figure on a loaded machine). Both modules hold the
same weights. "packs/step": how many times blockrnn packed its weights per measured step
(blockrnn.torch.ops.weight_packs; 0 without --train, where the weights never change, 1 with
it). The load average is printed before and after: on a loaded machine the medians are
unreliable.

--clock cpu times with time.thread_time (the CPU time of the calling thread) instead of the wall
clock: at --threads 1 both libraries compute on the calling thread, so that clock counts their
own work only, not the time the thread waited for a CPU held by another process (the figure to
take on a loaded machine). With more threads it would miss the worker threads' time:
--clock process (time.process_time: every thread of the process) then, which counts the
workers' spinning too.
"""
import argparse
import pathlib
import statistics
import subprocess
import sys
import time

import torch

import blockrnn
import blockrnn.torch as brt

SHAPES_FILE = pathlib.Path(__file__).with_name("compare_shapes.txt")


def default_shapes():
    """The distinct (T, B, I, H) of bench/compare_shapes.txt ("name mode T B I H" per line, #
    comments), in file order, as T..,B..,I..,H.. strings."""
    shapes = []
    for line in SHAPES_FILE.read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) != 6:
            continue
        shape = "T{},B{},I{},H{}".format(*fields[2:])
        if shape not in shapes:
            shapes.append(shape)
    return shapes


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return "unknown CPU"


def parse(shape):
    d = {p[0]: int(p[1:]) for p in shape.split(",")}
    return d["T"], d["B"], d["I"], d["H"]


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time, "process": time.process_time}
clock = time.perf_counter


def run_once(module, x, g, train):
    for p in module.parameters():
        p.grad = None
    t0 = clock()
    out, _ = module(x)
    (out * g).sum().backward()
    if train:
        with torch.no_grad():
            for p in module.parameters():
                p.add_(p.grad, alpha=-1e-4)
    return (clock() - t0) * 1e3


def measure_pair(ref, mine, x, g, reps, train):
    for _ in range(2):
        run_once(ref, x, g, train), run_once(mine, x, g, train)
    a, b = [], []
    packs = brt.ops.weight_packs()
    for _ in range(reps):
        a.append(run_once(ref, x, g, train))
        b.append(run_once(mine, x, g, train))
    packs = (brt.ops.weight_packs() - packs) / reps
    # per-round ratios: each round runs both modules back to back, so a load change on a shared
    # machine hits both; their median is the figure to quote on a loaded machine
    rounds = statistics.median(y / x for x, y in zip(a, b))
    return (min(a), statistics.median(a)), (min(b), statistics.median(b)), packs, rounds


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[2],
                    help="thread counts, one table each (default 2)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shapes", nargs="*", default=None,
                    help="T..,B..,I..,H.. each (default: the shapes of bench/compare_shapes.txt)")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--train", action="store_true",
                    help="an SGD step after each backward (the weights change every step)")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall: time.perf_counter; cpu: the calling thread's CPU time "
                         "(time.thread_time); process: the process's CPU time, all threads")
    args = ap.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    shapes = args.shapes if args.shapes is not None else default_shapes()
    for threads in args.threads:
        table(threads, shapes, args)


def table(threads, shapes, args):
    """One table: every shape, both modules, at `threads` threads."""
    torch.set_num_threads(threads)
    blockrnn.set_num_threads(threads)
    dtype = getattr(torch, args.dtype)
    print(f"CPU: {cpu_name()}; threads {threads} (torch and blockrnn); {args.dtype}; "
          f"{'training loop (SGD step each run)' if args.train else 'fixed weights'}; "
          f"clock {args.clock}; "
          f"torch {torch.__version__}, blockrnn {blockrnn.__version__}; ISA {blockrnn.get_isa()}")
    print("command: " + " ".join([sys.executable.split("/")[-1]] + sys.argv))
    print(f"load average (1 min) before: {loadavg()}")
    print(f"{'shape':<20}{'module':<6}{'torch.nn min/median ms':>24}"
          f"{'blockrnn min/median ms':>24}{'ratio':>7}{'rounds':>8}{'packs/step':>12}")
    for shape in shapes:
        T, B, I, H = parse(shape)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(T, B, I, generator=gen, dtype=dtype)
        g = torch.randn(T, B, H, generator=gen, dtype=dtype)
        for name, ref_cls, my_cls in (("LSTM", torch.nn.LSTM, brt.LSTM),
                                      ("GRU", torch.nn.GRU, brt.GRU)):
            torch.manual_seed(0)
            ref = ref_cls(I, H).to(dtype)
            mine = my_cls(I, H).to(dtype)
            mine.load_state_dict(ref.state_dict())
            (r_min, r_med), (m_min, m_med), packs, rounds = measure_pair(ref, mine, x, g,
                                                                         args.reps, args.train)
            print(f"{shape:<20}{name:<6}{r_min:12.1f} /{r_med:9.1f}{m_min:14.1f} /{m_med:9.1f}"
                  f"{m_min / r_min:7.2f}{rounds:8.2f}{packs:12.1f}", flush=True)
    print(f"load average (1 min) after: {loadavg()}")

if __name__ == "__main__":
    main()
