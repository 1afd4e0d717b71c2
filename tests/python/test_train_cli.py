"""`blockrnn train` and `blockrnn sample` end to end through the built command-line tool
(build/dev/tools/blockrnn, which scripts/test.sh builds before pytest; BLOCKRNN_CLI overrides
the path): a short deterministic run whose loss falls, the files it writes, the progress bar
on a terminal and plain lines without one, sampling, resuming, the safetensors checkpoint
read by the `safetensors` package and by the demo's Python reader
(tools/train/char_checkpoint.py), and every bad-input
path (usage errors exit 2, runtime errors exit 1, each with a clear message, never a crash)."""
import json
import os
import pathlib
import pty
import struct
import subprocess
import sys
from xml.etree import ElementTree

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = pathlib.Path(os.environ.get("BLOCKRNN_CLI", ROOT / "build/dev/tools/blockrnn"))
# The demo's Python reader of the checkpoint lives with the demo, outside the package.
CHAR_CHECKPOINT = ROOT / "tools/train/char_checkpoint.py"
sys.path.insert(0, str(CHAR_CHECKPOINT.parent))
PLOT_LOSS = ROOT / "scripts/plot_loss.py"

TINY = ["--hidden", "32", "--embed", "16", "--batch", "8", "--seq-len", "16", "--lr", "0.01",
        "--threads", "1"]


@pytest.fixture(scope="module")
def cli():
    if not CLI.is_file() or not os.access(CLI, os.X_OK):
        pytest.fail(f"the blockrnn command-line tool is missing at {CLI}: build it first with "
                    "`cmake --preset dev && cmake --build --preset dev` (scripts/test.sh does), "
                    "or point BLOCKRNN_CLI at a built binary", pytrace=False)
    return str(CLI)


def run(cli, *args, timeout=120):
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def trained(cli, tmp_path_factory):
    """A tiny model trained for 40 steps on the embedded corpus."""
    out = tmp_path_factory.mktemp("trained")
    r = run(cli, "train", *TINY, "--steps", 40, "--out", out)
    assert r.returncode == 0, r.stderr
    return out, r


def read_metrics(path):
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    return header, rows


def test_train_writes_metrics_checkpoint_and_learns(trained):
    out, r = trained
    header, rows = read_metrics(out / "metrics.csv")
    assert header[:2] == ["step", "loss"]
    assert {"grad_norm", "chars_per_sec", "elapsed_s"} <= set(header)
    assert [int(row["step"]) for row in rows] == list(range(1, 41))
    losses = [float(row["loss"]) for row in rows]
    assert losses[0] > 3.8                                  # ≈ ln(62) at the start
    assert sum(losses[-10:]) / 10 < losses[0] - 0.8         # and clearly lower after 40 steps
    assert not (out / "loss.svg").exists()                  # the chart is the script's job
    ckpt = (out / "checkpoint.safetensors").read_bytes()
    (n,) = struct.unpack_from("<Q", ckpt, 0)
    assert json.loads(ckpt[8:8 + n])["__metadata__"]["format"] == "blockrnn-char-lm"
    # Without a terminal: plain progress lines, then the summary.
    assert "\r" not in r.stdout
    assert "step 40/40 (100%)" in r.stdout
    assert "loss " in r.stdout and "checkpoint.safetensors" in r.stdout


def test_training_is_deterministic(cli, trained, tmp_path):
    out, _ = trained
    r = run(cli, "train", *TINY, "--steps", 40, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    a = [row["loss"] for row in read_metrics(out / "metrics.csv")[1]]
    b = [row["loss"] for row in read_metrics(tmp_path / "metrics.csv")[1]]
    assert a == b
    assert (out / "checkpoint.safetensors").read_bytes() == (tmp_path / "checkpoint.safetensors").read_bytes()


def test_gru_and_two_layers_train(cli, tmp_path):
    r = run(cli, "train", *TINY, "--cell", "gru", "--layers", 2, "--steps", 30, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    losses = [float(row["loss"]) for row in read_metrics(tmp_path / "metrics.csv")[1]]
    assert sum(losses[-5:]) / 5 < losses[0] - 0.5
    s = run(cli, "sample", "--checkpoint", tmp_path / "checkpoint.safetensors", "--length", 50)
    assert s.returncode == 0, s.stderr


def test_progress_bar_on_a_terminal(cli, tmp_path):
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([cli, "train", *TINY, "--steps", "20", "--out", str(tmp_path)],
                            stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 4096)
        except OSError:  # the terminal closes when the process exits
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    text = b"".join(chunks).decode()
    assert "\r" in text and "ETA" in text and "char/s" in text and "loss" in text


def test_sample_is_deterministic_and_honours_options(cli, trained):
    ckpt = trained[0] / "checkpoint.safetensors"
    a = run(cli, "sample", "--checkpoint", ckpt, "--length", 80, "--seed", 3)
    b = run(cli, "sample", "--checkpoint", ckpt, "--length", 80, "--seed", 3)
    assert a.returncode == 0 and a.stdout == b.stdout
    assert len(a.stdout) == 81 and a.stdout.endswith("\n")
    primed = run(cli, "sample", "--checkpoint", ckpt, "--length", 30, "--prime", "And God",
                 "--temperature", 0)
    assert primed.returncode == 0 and primed.stdout.startswith("And God")
    assert len(primed.stdout.rstrip("\n")) >= 30
    only_prime = run(cli, "sample", "--checkpoint", ckpt, "--length", 0, "--prime", "In")
    assert only_prime.stdout == "In\n"


def test_resume_continues_training(cli, trained, tmp_path):
    ckpt = trained[0] / "checkpoint.safetensors"
    r = run(cli, "train", "--resume", ckpt, "--steps", 5, "--batch", 8, "--seq-len", 16,
            "--threads", 1, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "resuming at step 40" in r.stdout
    steps = [int(row["step"]) for row in read_metrics(tmp_path / "metrics.csv")[1]]
    assert steps == [41, 42, 43, 44, 45]


# ---- bad input: usage errors (exit 2) -------------------------------------------------------

# `train` with a bad flag or value: the message names the flag.
BAD_TRAIN_FLAGS = [["--bogus"], ["--cell", "rnn"], ["--hidden", "0"], ["--hidden", "abc"],
                   ["--layers", "100"], ["--steps", "0"], ["--steps", "-3"], ["--batch", "0"],
                   ["--seq-len", "0"], ["--lr", "0"], ["--lr", "nan"], ["--threads", "0"],
                   ["--seed", "-1"]]


@pytest.mark.parametrize("args, message", [(["train", *f], f[0]) for f in BAD_TRAIN_FLAGS] + [
    (["train", "--hidden", "8192", "--batch", "4096", "--seq-len", "4096"], "GiB of memory"),
    (["sample"], "--checkpoint is required"),
    (["sample", "--checkpoint", "x", "--length", "-5"], "--length"),
    (["sample", "--checkpoint", "x", "--temperature", "-1"], "--temperature"),
    (["frobnicate"], "unknown subcommand 'frobnicate'"),
    (["--threads", "2", "frobnicate"], "unknown subcommand 'frobnicate'"),
    ([], "subcommand"),
])
def test_usage_errors(cli, args, message, tmp_path):
    # (--max-time keeps a check that stopped working from training for minutes.)
    r = run(cli, *args, "--out", tmp_path, "--max-time", 2) if args[:1] == ["train"] else \
        run(cli, *args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert "terminate called" not in r.stderr


def test_prime_outside_vocabulary(cli, trained):
    r = run(cli, "sample", "--checkpoint", trained[0] / "checkpoint.safetensors", "--prime", "Zebra#1")
    assert r.returncode == 2
    assert "--prime: character '#' at byte offset 5" in r.stderr
    assert "not in the vocabulary" in r.stderr


def test_resume_with_conflicting_shape(cli, trained, tmp_path):
    r = run(cli, "train", "--resume", trained[0] / "checkpoint.safetensors", "--hidden", 64,
            "--out", tmp_path)
    assert r.returncode == 2
    assert "--hidden 64 differs from the checkpoint's 32" in r.stderr


# ---- bad input: runtime errors (exit 1) -----------------------------------------------------

def expect_runtime_error(r, *messages):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("error: ")
    for m in messages:
        assert m in r.stderr, r.stderr
    assert "terminate called" not in r.stderr


def sample_from(cli, path):
    return run(cli, "sample", "--checkpoint", path, "--length", 10)


def test_missing_and_unreadable_checkpoint(cli, tmp_path):
    expect_runtime_error(sample_from(cli, tmp_path / "nope.safetensors"), "nope.safetensors",
                         "cannot open (No such file or directory)")
    expect_runtime_error(sample_from(cli, tmp_path), "not a regular file")
    locked = tmp_path / "locked.safetensors"
    locked.write_bytes(b"\x02\0\0\0\0\0\0\0{}")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads anything: the directory case above covers it
        locked.chmod(0o600)
    else:
        expect_runtime_error(sample_from(cli, locked), "locked.safetensors")


def split_safetensors(data):
    (n,) = struct.unpack_from("<Q", data, 0)
    return json.loads(data[8:8 + n]), data[8 + n:]


def join_safetensors(header, data):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def corrupt_variants(good):
    n = struct.unpack_from("<Q", good, 0)[0]
    _, data = split_safetensors(good)

    def edited(change):
        header, _ = split_safetensors(good)
        change(header)
        return join_safetensors(header, data)

    def set_meta(key, value):
        return edited(lambda h: h["__metadata__"].__setitem__(key, value))

    def overlap(h):  # two tensors of one shape: the later one claims the earlier one's bytes
        a, b = sorted((h["adam.m.softmax.b"], h["adam.v.softmax.b"]),
                      key=lambda t: t["data_offsets"])
        b["data_offsets"] = a["data_offsets"]

    not_json = bytearray(good)
    not_json[8] = ord("x")
    return {
        "empty": (b"", "empty"),
        "truncated length": (good[:6], "starts with an 8-byte header length"),
        "truncated header": (good[:8 + n // 2], "truncated"),
        "truncated data": (good[:-4], "outside the"),
        "huge header length": (struct.pack("<Q", 1 << 62) + good[8:],
                               "declares a header of 4611686018427387904 bytes"),
        "not json": (bytes(not_json), "not valid JSON"),
        "wrong dtype": (edited(lambda h: h["embedding"].__setitem__("dtype", "F16")),
                        "tensor 'embedding'.dtype: must be F32, F64 or I64, got \"F16\""),
        "offsets out of range": (
            edited(lambda h: h["softmax.b"].__setitem__("data_offsets", [0, len(data) + 400])),
            "tensor 'softmax.b'.data_offsets: [0,"),
        "overlapping tensors": (edited(overlap), "overlap"),
        "trailing bytes": (good + b"xyz", "data: the tensors cover"),
        "wrong version": (set_meta("format_version", "99"), "'format_version' '99'"),
        "wrong format": (set_meta("format", "other"), "not a character language model"),
        "bad config value": (set_meta("layers", "two"), "metadata 'layers' must be an integer"),
        # Well-formed file, inconsistent content: the hidden size no longer fits the tensors.
        "inconsistent shapes": (set_meta("hidden", "33"), "has shape"),
    }


@pytest.mark.parametrize("case", ["empty", "truncated length", "truncated header",
                                  "truncated data", "huge header length", "not json",
                                  "wrong dtype", "offsets out of range", "overlapping tensors",
                                  "trailing bytes", "wrong version", "wrong format",
                                  "bad config value", "inconsistent shapes"])
def test_corrupt_checkpoints(cli, trained, tmp_path, case):
    good = (trained[0] / "checkpoint.safetensors").read_bytes()
    data, message = corrupt_variants(good)[case]
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(data)
    r = sample_from(cli, bad)
    expect_runtime_error(r, "bad.safetensors")
    assert message.lower() in r.stderr.lower(), r.stderr
    # The same file given to train --resume fails the same way.
    expect_runtime_error(run(cli, "train", "--resume", bad, "--out", tmp_path / "o"),
                         "bad.safetensors")


def test_checkpoint_reads_in_safetensors_and_blockrnn_layers(cli, tmp_path):
    r = run(cli, "train", *TINY, "--cell", "gru", "--layers", 2, "--steps", 3, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "checkpoint.safetensors"
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open
    tensors = safetensors_numpy.load_file(str(path))
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
    assert meta["format"] == "blockrnn-char-lm" and meta["format_version"] == "1"
    assert (meta["cell"], meta["hidden"], meta["layers"], meta["embed"]) == \
        ("gru", "32", "2", "16")
    assert meta["step"] == "3" and meta["adam_t"] == "4"
    vocabulary = meta["vocabulary"].encode("latin-1")
    V = int(meta["vocab_size"])
    assert len(vocabulary) == V == 62 and vocabulary == bytes(sorted(set(vocabulary)))
    params = {"embedding": (V, 16), "softmax.w": (32, V), "softmax.b": (V,)}
    for l, I in ((0, 16), (1, 32)):
        params.update({f"layers.{l}.w_ru": (I + 32, 64), f"layers.{l}.w_c": (I + 32, 32),
                       f"layers.{l}.b_ru": (64,), f"layers.{l}.b_c": (32,)})
    expected = {**params, **{f"adam.{m}.{k}": s for k, s in params.items() for m in "mv"}}
    assert {k: v.shape for k, v in tensors.items()} == expected
    assert all(v.dtype == np.float32 for v in tensors.values())

    from blockrnn.layers import GRU
    from char_checkpoint import greedy, load_char_model
    model = load_char_model(path)
    assert model.vocabulary == vocabulary and model.metadata == meta
    assert len(model.layers) == 2 and all(isinstance(g, GRU) for g in model.layers)
    np.testing.assert_array_equal(model.embedding, tensors["embedding"])
    np.testing.assert_array_equal(model.softmax_w, tensors["softmax.w"])
    for l, layer in enumerate(model.layers):
        for name, value in layer.parameters().items():
            np.testing.assert_array_equal(value, tensors[f"layers.{l}.{name}"])

    # The loaded model predicts what `blockrnn sample` predicts: greedy continuation.
    prime = b"And God"
    s = run(cli, "sample", "--checkpoint", path, "--prime", prime.decode(), "--length", 12,
            "--temperature", 0)
    assert s.returncode == 0, s.stderr
    assert s.stdout == greedy(model, prime, 12).decode() + "\n"
    # The same through the reader run as a script.
    script = subprocess.run([sys.executable, str(CHAR_CHECKPOINT), str(path), "--prime",
                             prime.decode(), "--length", "12"], capture_output=True, text=True,
                            timeout=120)
    assert script.returncode == 0, script.stderr
    assert script.stdout == s.stdout


def test_plot_loss_draws_the_csv(trained, tmp_path):
    """scripts/plot_loss.py draws the trainer's metrics.csv with matplotlib: an SVG with the two
    curves, the same bytes for the same CSV; a CSV without the loss column, or with a value
    that is not a number, is an error naming the file and the line (exit 1)."""
    pytest.importorskip("matplotlib")
    out, _ = trained
    svgs = []
    for k in range(2):
        r = subprocess.run([sys.executable, str(PLOT_LOSS), str(out / "metrics.csv"), "-o",
                            str(tmp_path / f"loss{k}.svg")], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        svgs.append((tmp_path / f"loss{k}.svg").read_bytes())
    assert svgs[0] == svgs[1]
    svg = ElementTree.fromstring(svgs[0])                   # well-formed XML
    ns = "{http://www.w3.org/2000/svg}"
    assert svg.tag == f"{ns}svg"
    # The loss and the smoothed loss, in their colours (each once more in the legend).
    strokes = [p.get("style", "") for p in svg.iter(f"{ns}path")]
    assert sum("stroke: #9ab8d8" in s for s in strokes) == 2
    assert sum("stroke: #1f4e8c" in s for s in strokes) == 2
    bad = tmp_path / "bad.csv"
    for text, message in [("step,smoothed_loss\n1,2\n", "no column 'loss'"),
                          ("step,loss,smoothed_loss\n1,x,2\n", "line 2: loss 'x' is not a number")]:
        bad.write_text(text)
        r = subprocess.run([sys.executable, str(PLOT_LOSS), str(bad)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 1 and str(bad) in r.stderr and message in r.stderr, r.stderr
        assert not (tmp_path / "loss.svg").exists()


def test_corpus_errors(cli, trained, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    expect_runtime_error(run(cli, "train", "--corpus", empty, "--out", tmp_path / "o"),
                         "empty.txt", "is empty")
    expect_runtime_error(run(cli, "train", "--corpus", tmp_path / "missing.txt", "--out",
                             tmp_path / "o"), "missing.txt", "does not exist")
    short = tmp_path / "short.txt"
    short.write_text("too short")
    expect_runtime_error(run(cli, "train", "--corpus", short, "--seq-len", 16, "--out",
                             tmp_path / "o"), "at least --seq-len + 1 = 17")
    # A corpus with characters outside the vocabulary of the checkpoint being resumed.
    odd = tmp_path / "odd.txt"
    odd.write_text("And God said, Let there be light: and there was light.\n" * 3 + "{braces}\n")
    expect_runtime_error(
        run(cli, "train", "--resume", trained[0] / "checkpoint.safetensors", "--corpus", odd,
            "--batch", 2, "--seq-len", 8, "--out", tmp_path / "o"),
        "odd.txt", "character '{'", "line 4", "not in the vocabulary")


def test_unwritable_output_directory(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    expect_runtime_error(run(cli, "train", *TINY, "--steps", 1, "--out", blocker / "sub"),
                         "cannot create output directory")


def test_own_corpus_trains_and_samples_its_characters(cli, tmp_path):
    corpus = tmp_path / "abc.txt"
    corpus.write_text("abcabcabd\n" * 50)
    r = run(cli, "train", *TINY, "--steps", 30, "--corpus", corpus, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "corpus '" in r.stdout and "500 characters" in r.stdout
    s = run(cli, "sample", "--checkpoint", tmp_path / "checkpoint.safetensors", "--length", 60)
    assert s.returncode == 0 and set(s.stdout) <= set("abcd\n")
