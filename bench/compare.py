#!/usr/bin/env python3
"""Side-by-side comparison: blockrnn vs TensorFlow vs oneDNN vs PyTorch vs the GEMM-only floor.

In one run and at one thread count at a time, times identical work (float32, one layer,
forward + backward) on the shapes of bench/compare_shapes.txt, prints a table of times,
GFLOP/s, the fraction of the machine's measured FMA peak and ratios, and regenerates the top
of docs/performance.md (naming the CPU, the command, the date and the FMA peaks; the sections
below its HAND_WRITTEN line are kept) and docs/performance.png.

    scripts/setup.sh && .venv/bin/pip install --no-build-isolation .
    .venv/bin/python bench/compare.py [--threads 1 2] [--rounds 3] [--reps 5] [--quick]

--quick is a smoke test (1 round of 3 reps, the first LSTM and the first GRU shape only).

Each measurement runs in its own process (bench/blockrnn_rnn.py, bench/peers/tf_rnn.py,
bench/peers/torch_rnn.py in float32 and bfloat16, bench/peers/onednn_rnn_peer, and
bench/peers/fma_peak once per thread count for the FMA peak), so no library's idle threads
slow another's. The peers are interleaved: each of --rounds rounds runs every peer once, in an
order rotated by one per round, and a round in which some process's median repetition lies
more than --max-noise above its best is run again. A peer's time is the median over rounds of
its per-process median; its speedup is the median over rounds of its time over blockrnn's in
the same round, with the range over rounds. Absolute times on a shared machine are noisy:
read the per-round ratios. This is a tool, not a test: nothing here asserts a speed.
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS_BUILD = os.path.join(ROOT, "build", "peers")
PY = sys.executable


def gemm_gflop(cell, T, B, I, H):
    """GEMM work of one layer, forward + backward: forward x·W_x and h·W_h over T steps is
    2·T·B·(I+H)·G·H flops; the backward has twice that (x/h gradients and weight gradients)."""
    G = 4 if cell == "lstm" else 3
    fwd = 2.0 * T * B * (I + H) * G * H
    return fwd / 1e9, 3 * fwd / 1e9


def run_json(cmd, timeout=900):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                             cwd=ROOT)
    except subprocess.TimeoutExpired:
        print(f"  timeout: {' '.join(cmd)}", file=sys.stderr)
        return []
    if out.returncode != 0:
        print(f"  failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr[-2000:]}",
              file=sys.stderr)
        return []
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def build_peers():
    """Builds bench/peers into build/peers if either program is missing; returns the paths of
    onednn_rnn_peer and fma_peak."""
    exe = os.path.join(PEERS_BUILD, "onednn_rnn_peer")
    fma = os.path.join(PEERS_BUILD, "fma_peak")
    if not (os.path.exists(exe) and os.path.exists(fma)):
        subprocess.run(["cmake", "-S", os.path.join(ROOT, "bench", "peers"), "-B", PEERS_BUILD,
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", PEERS_BUILD, "-j2"], check=True,
                       stdout=subprocess.DEVNULL)
    return exe, fma


def measure_fma_peak(fma_exe, threads, isa="auto"):
    """The machine's float32 FMA peak at `threads` threads (bench/peers/fma_peak's JSON
    record), or with isa="avx512_bf16" its bfloat16 dot-product peak; None if it could not be
    measured (or the CPU lacks the instructions)."""
    recs = run_json([fma_exe, "--threads", str(threads), "--isa", isa], timeout=120)
    return recs[0] if recs and recs[0].get("gflops") else None


def peak_scaling_note(peaks, threads):
    """A warning if the FMA peak at `threads` is well below `threads` times the best per-thread
    figure of this run (another process was using the cores), else ''."""
    per_thread = [pk["gflops_per_thread"] for pk in peaks.values() if pk]
    pk = peaks.get(threads)
    if not pk or not per_thread or pk["gflops_per_thread"] >= 0.8 * max(per_thread):
        return ""
    return (f"only {pk['gflops'] / max(per_thread):.2f}× the best single-thread rate at "
            f"{threads} threads: were the cores busy?")


def cpu_info():
    """lscpu-like facts from /proc/cpuinfo (first processor): model name, family/model/stepping
    and the SIMD flags that matter here."""
    info, flags = {}, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # end of the first processor's block
                key, _, val = line.partition(":")
                key, val = key.strip(), val.strip()
                if key == "flags":
                    flags = set(val.split())
                elif key in ("model name", "cpu family", "model", "stepping", "vendor_id"):
                    info[key] = val
    except OSError:
        pass
    info["flags"] = {f: f in flags for f in ("avx2", "fma", "avx512f", "avx512_bf16")}
    info["hypervisor"] = "hypervisor" in flags
    return info


def read_shapes(path):
    shapes = []
    for line in open(path):
        line = line.split("#")[0].split()
        if line:
            name, cell, T, B, I, H = line[0], line[1], *map(int, line[2:6])
            shapes.append(dict(name=name, cell=cell, T=T, B=B, I=I, H=H))
    return shapes


def peer_commands(shape, threads, reps, peer_exe, torch_peers, bf16_peers):
    """The command line of every peer for one shape at one thread count: name → list of
    commands (the GEMM floors have two each, padded rows or not; the faster one counts).
    bf16_peers: the bfloat16 rows (blockrnn_bf16, torch_bf16), left out on a CPU without
    AVX512_BF16, where blockrnn's bfloat16 runs its float32 kernels on widened operands and
    PyTorch's CPU bfloat16 is emulated (more than a minute a run at T50 B64 on an AVX2-only
    Zen 3): neither says anything about bfloat16 speed there."""
    cell, T, B, I, H = shape["cell"], shape["T"], shape["B"], shape["I"], shape["H"]
    dims = ["--T", str(T), "--B", str(B), "--I", str(I), "--H", str(H),
            "--threads", str(threads), "--reps", str(reps), "--warmup", "2"]
    if T == 1:
        ours_op, tf_op = f"{cell}_cell", f"{cell}_cell"
        tf_extra = ["--full-grad"]
    else:
        ours_op = "block_lstm" if cell == "lstm" else "block_gru"
        tf_op = "block_lstm" if cell == "lstm" else "gru_seq"
        tf_extra = []
    cmds = {"blockrnn": [[PY, "bench/blockrnn_rnn.py", "--op", ours_op] + dims]}
    if T > 1:  # the layer object, weights packed once: the oneDNN peer's terms
        cmds["blockrnn_plan"] = [[PY, "bench/blockrnn_rnn.py", "--op", ours_op, "--plan"] + dims]
    if bf16_peers:
        cmds["blockrnn_bf16"] = [[PY, "bench/blockrnn_rnn.py", "--op", ours_op, "--dtype",
                                  "bfloat16"] + dims]
    cmds["tensorflow"] = [[PY, "bench/peers/tf_rnn.py", "--op", tf_op] + dims + tf_extra]
    if T > 1:
        cmds["onednn"] = [[peer_exe, "--cell", cell] + dims]
    if torch_peers:
        torch_dtypes = [("float32", "torch_fp32")]
        if bf16_peers:
            torch_dtypes.append(("bfloat16", "torch_bf16"))
        for dtype, name in torch_dtypes:
            cmds[name] = [[PY, "bench/peers/torch_rnn.py", "--cell", cell, "--dtype", dtype]
                          + dims]
    for lib in ("openblas", "onednn"):
        cmds[f"{lib}_gemm_floor"] = [
            [peer_exe, "--cell", cell, "--gemm-floor", "--gemm-ld-pad", pad] + dims
            for pad in ("0", "16")]
    return cmds


def run_peer(cmds):
    """The fastest record of a peer's commands (one process each), or None."""
    best = None
    for cmd in cmds:
        for rec in run_json(cmd):
            if best is None or rec["fwdbwd_ms"] < best["fwdbwd_ms"]:
                best = rec
    return best


def noise(rec):
    """How far a process's median repetition lies above its best one (0.1: 10 %)."""
    return rec["fwdbwd_ms"] / rec["fwdbwd_min_ms"] - 1.0 if rec.get("fwdbwd_min_ms") else 0.0


def measure(shape, threads, reps, rounds, max_noise, retries, peer_exe, torch_peers, bf16_peers):
    """Interleaved rounds: each round runs every peer once (one process each), in an order
    rotated by one per round (A B C, B C A, …), so that a load change on the shared machine
    hits every peer alike. A round in which some process's median lies more than max_noise
    above its best repetition is run again, up to `retries` times (the last try is kept and
    counted as noisy). Per peer: the median over rounds of the per-round medians; per peer
    and round: the ratio of its time to blockrnn's in that round, summarised as the median
    ratio and its range over rounds."""
    cmds = peer_commands(shape, threads, reps, peer_exe, torch_peers, bf16_peers)
    names = list(cmds)
    per_round, noisy_rounds = [], 0
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for attempt in range(retries + 1):
            recs = {name: run_peer(cmds[name]) for name in order}
            recs = {k: v for k, v in recs.items() if v}
            worst = max((noise(v) for v in recs.values()), default=0.0)
            if worst <= max_noise:
                break
            print(f"   round {r + 1}: a median {100 * worst:.0f} % above its best repetition"
                  + (", running the round again" if attempt < retries else ", kept (noisy)"),
                  file=sys.stderr, flush=True)
        else:
            noisy_rounds += 1
        per_round.append(recs)
    rows, ratios = {}, {}
    for name in names:
        recs = [rr[name] for rr in per_round if name in rr]
        if not recs:
            continue
        row = dict(recs[0])
        row["fwd_ms"] = statistics.median(x["fwd_ms"] for x in recs)
        row["fwdbwd_ms"] = statistics.median(x["fwdbwd_ms"] for x in recs)
        row["rounds"] = len(recs)
        rows[name] = row
        rr = [rd[name]["fwdbwd_ms"] / rd["blockrnn"]["fwdbwd_ms"] for rd in per_round
              if name in rd and "blockrnn" in rd]
        if rr and name != "blockrnn":
            ratios[name] = (statistics.median(rr), min(rr), max(rr))
        # The bfloat16 peers against blockrnn's bfloat16 row as well.
        rb = [rd[name]["fwdbwd_ms"] / rd["blockrnn_bf16"]["fwdbwd_ms"] for rd in per_round
              if name in rd and "blockrnn_bf16" in rd]
        if rb and name in BF16_PEERS:
            ratios[name + " vs bf16"] = (statistics.median(rb), min(rb), max(rb))
    return rows, ratios, noisy_rounds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--reps", type=int, default=None,
                   help="repetitions per process and round (default 5, 3 with --quick)")
    p.add_argument("--rounds", type=int, default=None,
                   help="interleaved rounds per shape (default 3, 1 with --quick)")
    p.add_argument("--max-noise", type=float, default=0.15,
                   help="a round is run again when a process's median repetition lies more "
                        "than this fraction above its best (default 0.15)")
    p.add_argument("--retries", type=int, default=2, help="re-runs of a noisy round")
    p.add_argument("--no-torch", action="store_true", help="leave out the PyTorch peers")
    p.add_argument("--shapes", default=os.path.join(ROOT, "bench", "compare_shapes.txt"))
    p.add_argument("--only", nargs="*", help="shape names to run")
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/performance.*")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 3 reps (unless --reps is given), only the first shape of "
                        "each cell (unless --only is given)")
    a = p.parse_args()
    if a.reps is None:
        a.reps = 3 if a.quick else 5
    if a.rounds is None:
        a.rounds = 1 if a.quick else 3
    torch_peers = not a.no_torch and torch_available()
    peer_exe, fma_exe = build_peers()
    shapes = [s for s in read_shapes(a.shapes) if not a.only or s["name"] in a.only]
    if a.quick and not a.only:
        firsts = {}
        for s in shapes:
            firsts.setdefault(s["cell"], s)
        shapes = list(firsts.values())
    results, peaks, bf16_peaks = [], {}, {}
    has_bf16 = cpu_info()["flags"]["avx512_bf16"]
    if not has_bf16:
        print("note: no avx512_bf16 on this CPU: the bfloat16 rows are left out",
              file=sys.stderr, flush=True)
    for threads in a.threads:
        print(f"== FMA peak threads={threads}", file=sys.stderr, flush=True)
        peaks[threads] = measure_fma_peak(fma_exe, threads)
        pk = peaks[threads]
        print(f"   {pk['gflops']:.1f} GFLOP/s ({pk['isa']})" if pk else "   not measured",
              file=sys.stderr, flush=True)
        if has_bf16:
            bf16_peaks[threads] = measure_fma_peak(fma_exe, threads, "avx512_bf16")
            pk = bf16_peaks[threads]
            print(f"   bf16 {pk['gflops']:.1f} GFLOP/s" if pk else "   bf16 not measured",
                  file=sys.stderr, flush=True)
        for s in shapes:
            print(f"== {s['name']} threads={threads}", file=sys.stderr, flush=True)
            rows, ratios, noisy = measure(s, threads, a.reps, a.rounds, a.max_noise, a.retries,
                                          peer_exe, torch_peers, has_bf16)
            results.append(dict(shape=s, threads=threads, rows=rows, ratios=ratios,
                                noisy_rounds=noisy))
    for th in peaks:
        if peak_scaling_note(peaks, th):
            print(f"warning: FMA peak {peak_scaling_note(peaks, th)}", file=sys.stderr)
    lines = render(results, peaks)
    print("\n".join(lines))
    if not a.no_docs:
        write_docs(results, peaks, bf16_peaks, lines, a)


PEER_ORDER = ["blockrnn", "blockrnn_plan", "blockrnn_bf16", "tensorflow", "onednn", "torch_fp32",
              "torch_bf16", "openblas_gemm_floor", "onednn_gemm_floor"]


# Peers computing in bfloat16, whose speedup is also given over blockrnn's bfloat16 row.
BF16_PEERS = ("torch_bf16",)


def torch_available():
    """Whether PyTorch is installed, without importing it: this process must stay small, as
    every peer it starts reports its peak RSS, and on Linux a child's ru_maxrss starts at
    the parent's resident size when it forks (an imported torch made every row ~500 MB)."""
    if importlib.util.find_spec("torch") is None:
        print("torch missing: no PyTorch peers", file=sys.stderr)
        return False
    return True


def ratio_text(ratio):
    """A median per-round ratio and its range: "1.12× [1.05–1.20]"."""
    med, lo, hi = ratio
    return f"{med:.2f}× [{lo:.2f}–{hi:.2f}]" if hi > lo else f"{med:.2f}×"


def render(results, peaks):
    out = []
    hdr = ("| shape | threads | peer | fwd ms | fwd+bwd ms | GFLOP/s | % FMA peak | "
           "blockrnn speedup [range] | floor ratio | memory MB |")
    out += [hdr, "|" + "---|" * 10]
    for r in results:
        s, th, rows = r["shape"], r["threads"], r["rows"]
        _, gf = gemm_gflop(s["cell"], s["T"], s["B"], s["I"], s["H"])
        peak = peaks.get(th)
        ours = rows.get("blockrnn")
        floors = [rows[k]["fwdbwd_ms"] for k in ("openblas_gemm_floor", "onednn_gemm_floor")
                  if k in rows]
        floor = min(floors) if floors else None
        for peer in PEER_ORDER:
            if peer not in rows:
                continue
            rec = rows[peer]
            ms = rec["fwdbwd_ms"]
            speed = ""
            if peer in r.get("ratios", {}):
                speed = ratio_text(r["ratios"][peer])
                if peer + " vs bf16" in r["ratios"]:
                    speed += f"; over blockrnn_bf16 {ratio_text(r['ratios'][peer + ' vs bf16'])}"
            elif ours and peer != "blockrnn":
                speed = f"{rec['fwdbwd_ms'] / ours['fwdbwd_ms']:.2f}×"
            if peer == "blockrnn" and r.get("noisy_rounds"):
                speed = f"({r['noisy_rounds']} noisy round{'s' if r['noisy_rounds'] > 1 else ''})"
            fr = f"{floor / ms:.2f}" if floor else ""
            # Python peers: growth of the process RSS over its baseline after imports (the
            # op's own memory); the C++ peers: the whole process's peak RSS.
            rss = rec.get("rss_increase_mb", rec.get("peak_rss_mb"))
            gflops = gf / (ms / 1e3)
            pct = f"{100.0 * gflops / peak['gflops']:.0f} %" if peak else ""
            out.append(f"| {s['name']} | {th} | {peer} | {rec['fwd_ms']:.2f} | {ms:.2f} | "
                       f"{gflops:.1f} | {pct} | {speed} | {fr} | "
                       f"{'' if rss is None else f'{rss:.0f}'} |")
    return out


def command_line():
    """The command that ran this script, as it would be typed in the repository root."""
    def rel(path):
        r = os.path.relpath(os.path.abspath(path), ROOT)
        return path if r.startswith("..") else r
    return shlex.join([rel(sys.executable), rel(sys.argv[0])] + sys.argv[1:])


def blockrnn_isa(results):
    """blockrnn's kernel path(s) as reported by bench/blockrnn_rnn.py (blockrnn.get_isa())."""
    isas = sorted({str(r["rows"]["blockrnn"].get("isa")) for r in results
                   if "blockrnn" in r["rows"] and r["rows"]["blockrnn"].get("isa")})
    return ", ".join(f"`{i}`" for i in isas) if isas else None


# The line of docs/performance.md below which it is written by hand: write_docs rewrites only
# what is above it.
HAND_WRITTEN = ("<!-- Written by hand below this line: bench/compare.py rewrites only what is "
                "above it. -->")


def write_docs(results, peaks, bf16_peaks, table, a):
    md = os.path.join(ROOT, "docs", "performance.md")
    png = os.path.join(ROOT, "docs", "performance.png")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        labels, series = [], {}
        for r in results:
            s, th, rows = r["shape"], r["threads"], r["rows"]
            _, gf = gemm_gflop(s["cell"], s["T"], s["B"], s["I"], s["H"])
            labels.append(f"{s['name']}\n{th} thr")
            for peer in PEER_ORDER:
                v = gf / (rows[peer]["fwdbwd_ms"] / 1e3) if peer in rows else 0.0
                series.setdefault(peer, []).append(v)
        fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(labels)), 5))
        width = 0.8 / len(series)
        for k, (peer, vals) in enumerate(series.items()):
            ax.bar([i + k * width for i in range(len(labels))], vals, width, label=peer)
        # The measured FMA peak at each group's thread count, as a dashed segment over the group.
        for i, r in enumerate(results):
            pk = peaks.get(r["threads"])
            if pk:
                ax.hlines(pk["gflops"], i - width / 2, i + 0.8 - width / 2, colors="k",
                          linestyles="dashed", label="FMA peak (measured)" if i == 0 else None)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))])
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("GFLOP/s of GEMM work (forward + backward)")
        ax.set_ylim(bottom=0)
        ax.set_title("blockrnn vs peers, float32 and bfloat16 (higher is better)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.25)  # headroom for the legend above the peaks
        ax.legend(fontsize=8, ncol=3, loc="upper left")
        fig.tight_layout()
        fig.savefig(png, dpi=100)
    except ImportError:
        print("matplotlib missing: no chart", file=sys.stderr)
    cpu = cpu_info()
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    ident = ", ".join(f"{k} {cpu[k]}" for k in ("cpu family", "model", "stepping") if k in cpu)
    flags = ", ".join(f"`{k}` {yes(v)}" for k, v in cpu["flags"].items())
    peak_txt = "; ".join(
        (f"{th} thread{'s' if th > 1 else ''}: **{pk['gflops']:.1f} GFLOP/s** ({pk['isa']})"
         + (f" (warning: {peak_scaling_note(peaks, th)})" if peak_scaling_note(peaks, th) else "")
         if pk else f"{th} thread{'s' if th > 1 else ''}: not measured")
        for th, pk in peaks.items())
    pk0 = next((pk for pk in peaks.values() if pk), None)
    how = f"{pk0['reps']} × {pk0['seconds']:g} s" if pk0 else "its repetitions"
    isa = blockrnn_isa(results)
    isa_txt = (f"{isa} (`blockrnn.get_isa()`)" if isa else
               "not reported (this build of the package has no `blockrnn.get_isa()`)")
    vm = ", under a hypervisor" if cpu["hypervisor"] else ""
    # What follows HAND_WRITTEN in the present file (the notes, analyses and other benchmarks'
    # sections) is kept as it is.
    kept = HAND_WRITTEN + "\n"
    if os.path.exists(md):
        old = open(md).read()
        if HAND_WRITTEN in old:
            kept = old[old.index(HAND_WRITTEN):]
    with open(md, "w") as f:
        f.write("# Performance\n\n")
        f.write("Generated by the command below; do not edit by hand: rerun it. The peers run "
                "interleaved, in rounds (each round runs every peer once, in an order rotated "
                "per round); a time is the median over rounds of each process's median, a "
                "speedup the median over rounds of the per-round ratio, with its range in "
                "brackets. The machine is shared, so compare within one run.\n\n")
        f.write(f"- Command: `{command_line()}`\n")
        f.write(f"- Date: {datetime.date.today().isoformat()}\n")
        f.write(f"- CPU: {cpu.get('model name', 'unknown')} ({ident}; {platform.machine()}, "
                f"{os.cpu_count()} logical CPUs{vm}); flags: {flags}\n")
        f.write(f"- Threads: {', '.join(str(t) for t in a.threads)}; {a.rounds} rounds of "
                f"{a.reps} reps per peer\n")
        f.write(f"- Measured float32 FMA peak (`bench/peers/fma_peak --threads N`: independent "
                f"FMA chains in registers, best of {how}): {peak_txt}\n")
        bf16_txt = "; ".join(
            f"{th} thread{'s' if th > 1 else ''}: **{pk['gflops']:.1f} GFLOP/s**"
            for th, pk in bf16_peaks.items() if pk) or "not measured (no avx512_bf16)"
        f.write(f"- Measured bfloat16 dot-product peak (`bench/peers/fma_peak --isa avx512_bf16`, "
                f"vdpbf16ps chains): {bf16_txt}\n")
        f.write(f"- blockrnn ISA path: {isa_txt}\n\n")
        f.write("Work: one layer, float32 (the `_bf16` rows: bfloat16), forward + backward. "
                "`GFLOP/s` counts the GEMM work "
                "of the layer (3 × 2·T·B·(I+H)·G·H, G = 4 for LSTM, 3 for GRU) over the "
                "measured time. `% FMA peak` is that GFLOP/s figure as a percentage of the FMA "
                "peak measured above at the same thread count: the fraction of the physical "
                "limit the GEMM work alone reaches (element-wise work and data movement are in "
                "the time but not in the FLOP count). `blockrnn speedup` is the peer's time "
                "over blockrnn's (its float32 row); a bfloat16 peer's also over "
                "`blockrnn_bf16`'s. The bfloat16 rows' `% FMA peak` is against the float32 FMA "
                "peak too (the bfloat16 dot-product peak above is twice it). "
                "`floor ratio` is the GEMM-only floor's time (the faster of OpenBLAS and "
                "oneDNN sgemm, rows padded or not) over the row's time: 1.0 means running at "
                "the floor. `memory MB`: for blockrnn and TensorFlow the growth of the process's "
                "peak RSS over its RSS after imports and input creation (the op's own memory); "
                "for the C++ peers the whole process's peak RSS.\n\n")
        f.write("What each peer runs: blockrnn `BlockLSTM`+`BlockLSTMGrad`, `BlockGRU`+"
                "`BlockGRUGrad`, or at T = 1 the cell op + `gradients.<Cell>` (`blockrnn_bf16`: "
                "the same ops on bfloat16 inputs; `blockrnn_plan`: the same work on the layer "
                "object, weights packed once and every buffer allocated once, as the oneDNN "
                "peer's; the one-shot ops pack and allocate at every call); TensorFlow "
                "`BlockLSTM`+`BlockLSTMGrad`, for GRU `GRUBlockCell`+`GRUBlockCellGrad` stepped "
                "in a `tf.function` with the weight-gradient matmuls, at T = 1 the cell op + "
                "grad + matmuls; oneDNN's LSTM and vanilla-GRU primitives; PyTorch "
                "`torch.nn.LSTM`/`torch.nn.GRU` (one layer, the reset-after GRU) in float32 "
                "and bfloat16, at T = 1 with one step (see bench/peers/README.md).\n\n")
        f.write("\n".join(table) + "\n\n![chart](performance.png)\n\n" + kept)
    print(f"wrote {md} and {png}", file=sys.stderr)


if __name__ == "__main__":
    main()
