#!/usr/bin/env python3
"""The loss chart of a `blockrnn train` run, drawn with matplotlib from the metrics.csv the
trainer writes (columns step, loss, smoothed_loss, grad_norm, learning_rate, chars_per_sec,
elapsed_s): the loss of every step and the trainer's smoothed loss (the debiased moving
average its progress line shows) against the step.

    python scripts/plot_loss.py out/metrics.csv                 # writes out/loss.svg
    python scripts/plot_loss.py out/metrics.csv -o loss.png     # any format matplotlib writes

scripts/run.sh calls it after training when matplotlib is installed (scripts/requirements.txt).
A file that is not such a CSV is an error naming the file, the line and the column (exit 1).
"""
import argparse
import csv
import math
import os
import sys

COLUMNS = ("step", "loss", "smoothed_loss")


def read_metrics(path):
    """(steps, losses, smoothed losses) of a metrics.csv; ValueError naming the file, the line
    and the column for anything else. A non-finite loss is kept (matplotlib breaks the line
    there)."""
    with open(path, newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None:
            raise ValueError(f"{path}: empty (no header line)")
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise ValueError(f"{path}: line 1: no column {missing[0]!r} (header {header})")
        index = [header.index(c) for c in COLUMNS]
        steps, loss, smoothed = [], [], []
        for line, row in enumerate(rows, start=2):
            if len(row) != len(header):
                raise ValueError(f"{path}: line {line}: {len(row)} fields, the header has "
                                 f"{len(header)}")
            values = []
            for name, k in zip(COLUMNS, index):
                try:
                    values.append(float(row[k]))
                except ValueError:
                    raise ValueError(f"{path}: line {line}: {name} {row[k]!r} is not a number") \
                        from None
            if not math.isfinite(values[0]):
                raise ValueError(f"{path}: line {line}: step {row[index[0]]!r} is not finite")
            steps.append(values[0])
            loss.append(values[1])
            smoothed.append(values[2])
    if not steps:
        raise ValueError(f"{path}: no rows after the header")
    return steps, loss, smoothed


def plot(steps, loss, smoothed, out, title):
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    matplotlib.rcParams["svg.hashsalt"] = "blockrnn"  # fixed element ids in an SVG
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(steps, loss, color="#9ab8d8", linewidth=0.8, label="loss")
    ax.plot(steps, smoothed, color="#1f4e8c", linewidth=1.8, label="smoothed")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per character)")
    ax.set_title(title)
    ax.grid(True, color="#e0e0e0")
    ax.legend()
    fig.tight_layout()
    # Without a date or a random id in the SVG, the same CSV gives the same bytes.
    fig.savefig(out, metadata={"Date": None} if out.endswith(".svg") else None)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", help="metrics.csv written by `blockrnn train`")
    parser.add_argument("-o", "--output", help="chart file (default: loss.svg beside the CSV)")
    parser.add_argument("--title", default="blockrnn train", help="chart title")
    args = parser.parse_args(argv)
    out = args.output or os.path.join(os.path.dirname(args.metrics) or ".", "loss.svg")
    try:
        steps, loss, smoothed = read_metrics(args.metrics)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    plot(steps, loss, smoothed, out, args.title)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
