#!/usr/bin/env python3
"""Side-by-side comparison: blockrnn vs TensorFlow vs oneDNN vs the GEMM-only floor.

In one run and at one thread count at a time, times identical work (float32, one layer,
forward + backward) on the shapes of bench/compare_shapes.txt, prints a table of times,
GFLOP/s and ratios, and regenerates docs/performance.md and docs/performance.png.

    scripts/setup.sh && .venv/bin/pip install --no-build-isolation .
    .venv/bin/python bench/compare.py [--threads 1 2] [--reps 10] [--quick]

Each measurement runs in its own process (bench/blockrnn_rnn.py, bench/peers/tf_rnn.py,
bench/peers/onednn_rnn_peer), so no library's idle threads slow another's. Times are medians
over --reps; absolute times on a shared machine are noisy, ratios within one run are the
figures to read. This is a tool, not a test: nothing here asserts a speed.
"""
import argparse
import datetime
import json
import os
import platform
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
    exe = os.path.join(PEERS_BUILD, "onednn_rnn_peer")
    if not os.path.exists(exe):
        subprocess.run(["cmake", "-S", os.path.join(ROOT, "bench", "peers"), "-B", PEERS_BUILD,
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", PEERS_BUILD, "-j2"], check=True,
                       stdout=subprocess.DEVNULL)
    return exe


def read_shapes(path):
    shapes = []
    for line in open(path):
        line = line.split("#")[0].split()
        if line:
            name, cell, T, B, I, H = line[0], line[1], *map(int, line[2:6])
            shapes.append(dict(name=name, cell=cell, T=T, B=B, I=I, H=H))
    return shapes


def measure(shape, threads, reps, peer_exe):
    cell, T, B, I, H = shape["cell"], shape["T"], shape["B"], shape["I"], shape["H"]
    dims = ["--T", str(T), "--B", str(B), "--I", str(I), "--H", str(H),
            "--threads", str(threads), "--reps", str(reps), "--warmup", "2"]
    rows = {}
    if T == 1:
        ours_op, tf_op = f"{cell}_cell", f"{cell}_cell"
        tf_extra = ["--full-grad"]
    else:
        ours_op = "block_lstm" if cell == "lstm" else "block_gru"
        tf_op = "block_lstm" if cell == "lstm" else "gru_seq"
        tf_extra = []
    for rec in run_json([PY, "bench/blockrnn_rnn.py", "--op", ours_op] + dims):
        rows["blockrnn"] = rec
    for rec in run_json([PY, "bench/peers/tf_rnn.py", "--op", tf_op] + dims + tf_extra):
        rows["tensorflow"] = rec
    if T > 1:
        for rec in run_json([peer_exe, "--cell", cell] + dims):
            rows["onednn"] = rec
    floors = []
    for pad in ("0", "16"):
        for rec in run_json([peer_exe, "--cell", cell, "--gemm-floor", "--gemm-ld-pad", pad]
                            + dims):
            floors.append(rec)
    best = {}
    for rec in floors:
        lib = rec.get("peer", "gemm")
        if lib not in best or rec["fwdbwd_ms"] < best[lib]["fwdbwd_ms"]:
            best[lib] = rec
    for lib, rec in best.items():
        rows[lib] = rec
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--shapes", default=os.path.join(ROOT, "bench", "compare_shapes.txt"))
    p.add_argument("--only", nargs="*", help="shape names to run")
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/performance.*")
    a = p.parse_args()
    peer_exe = build_peers()
    shapes = [s for s in read_shapes(a.shapes) if not a.only or s["name"] in a.only]
    results = []
    for threads in a.threads:
        for s in shapes:
            print(f"== {s['name']} threads={threads}", file=sys.stderr, flush=True)
            rows = measure(s, threads, a.reps, peer_exe)
            results.append(dict(shape=s, threads=threads, rows=rows))
    lines = render(results, a)
    print("\n".join(lines))
    if not a.no_docs:
        write_docs(results, lines, a)


PEER_ORDER = ["blockrnn", "tensorflow", "onednn", "openblas_gemm_floor", "onednn_gemm_floor"]


def render(results, a):
    out = []
    hdr = ("| shape | threads | peer | fwd ms | fwd+bwd ms | GFLOP/s | blockrnn speedup | "
           "floor ratio | memory MB |")
    out += [hdr, "|" + "---|" * 9]
    for r in results:
        s, th, rows = r["shape"], r["threads"], r["rows"]
        _, gf = gemm_gflop(s["cell"], s["T"], s["B"], s["I"], s["H"])
        ours = rows.get("blockrnn")
        floors = [rows[k]["fwdbwd_ms"] for k in ("openblas_gemm_floor", "onednn_gemm_floor")
                  if k in rows]
        floor = min(floors) if floors else None
        for peer in PEER_ORDER:
            if peer not in rows:
                continue
            rec = rows[peer]
            ms = rec["fwdbwd_ms"]
            speed = f"{rec['fwdbwd_ms'] / ours['fwdbwd_ms']:.2f}×" if ours and peer != "blockrnn" \
                else ""
            fr = f"{floor / ms:.2f}" if floor else ""
            # Python peers: growth of the process RSS over its baseline after imports (the
            # op's own memory); the C++ peers: the whole process's peak RSS.
            rss = rec.get("rss_increase_mb", rec.get("peak_rss_mb"))
            out.append(f"| {s['name']} | {th} | {peer} | {rec['fwd_ms']:.2f} | {ms:.2f} | "
                       f"{gf / (ms / 1e3):.1f} | {speed} | {fr} | "
                       f"{'' if rss is None else f'{rss:.0f}'} |")
    return out


def write_docs(results, table, a):
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
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))])
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("GFLOP/s of GEMM work (forward + backward)")
        ax.set_title("blockrnn vs peers, float32 (higher is better)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(png, dpi=100)
    except ImportError:
        print("matplotlib missing: no chart", file=sys.stderr)
    cmd = "bench/compare.py " + " ".join(sys.argv[1:])
    with open(md, "w") as f:
        f.write("# Performance\n\n")
        f.write(f"Generated by `.venv/bin/python {cmd.strip()}` on "
                f"{datetime.date.today().isoformat()} ({platform.machine()}, "
                f"{os.cpu_count()} cores; reps {a.reps}). Do not edit by hand: rerun the "
                "command. Times are medians; the machine is shared, so compare within one run.\n\n")
        f.write("Work: one layer, float32, forward + backward. `GFLOP/s` counts the GEMM work "
                "of the layer (3 × 2·T·B·(I+H)·G·H, G = 4 for LSTM, 3 for GRU) over the "
                "measured time. `blockrnn speedup` is the peer's time over blockrnn's. "
                "`floor ratio` is the GEMM-only floor's time (the faster of OpenBLAS and "
                "oneDNN sgemm, rows padded or not) over the row's time: 1.0 means running at "
                "the floor. `memory MB`: for blockrnn and TensorFlow the growth of the process's "
                "peak RSS over its RSS after imports and input creation (the op's own memory); "
                "for the C++ peers the whole process's peak RSS.\n\n")
        f.write("What each peer runs: blockrnn `BlockLSTM`+`BlockLSTMGrad`, `BlockGRU`+"
                "`BlockGRUGrad`, or at T = 1 the cell op + `gradients.<Cell>`; TensorFlow "
                "`BlockLSTM`+`BlockLSTMGrad`, for GRU `GRUBlockCell`+`GRUBlockCellGrad` stepped "
                "in a `tf.function` with the weight-gradient matmuls, at T = 1 the cell op + "
                "grad + matmuls; oneDNN's LSTM and vanilla-GRU primitives (see "
                "bench/peers/README.md).\n\n")
        f.write("\n".join(table) + "\n\n![chart](performance.png)\n")
        notes = os.path.join(ROOT, "docs", "performance-notes.md")
        if os.path.exists(notes):
            f.write("\n" + open(notes).read())
    print(f"wrote {md} and {png}", file=sys.stderr)


if __name__ == "__main__":
    main()
