"""`blockrnn train` and `blockrnn sample` end to end through the built command-line tool
(build/dev/tools/blockrnn, which scripts/test.sh builds before pytest; BLOCKRNN_CLI overrides
the path): a short deterministic run whose loss falls, the files it writes, the progress bar
on a terminal and plain lines without one, sampling, resuming, and every bad-input path
(usage errors exit 2, runtime errors exit 1, each with a clear message, never a crash)."""
import os
import pathlib
import pty
import struct
import subprocess
import zlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = pathlib.Path(os.environ.get("BLOCKRNN_CLI", ROOT / "build/dev/tools/blockrnn"))

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


def test_train_writes_metrics_png_checkpoint_and_learns(trained):
    out, r = trained
    header, rows = read_metrics(out / "metrics.csv")
    assert header[:2] == ["step", "loss"]
    assert {"grad_norm", "chars_per_sec", "elapsed_s"} <= set(header)
    assert [int(row["step"]) for row in rows] == list(range(1, 41))
    losses = [float(row["loss"]) for row in rows]
    assert losses[0] > 3.8                                  # ≈ ln(62) at the start
    assert sum(losses[-10:]) / 10 < losses[0] - 0.8         # and clearly lower after 40 steps
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "checkpoint.brnn").read_bytes()[:8] == b"BRNNCKPT"
    # Without a terminal: plain progress lines, then the summary.
    assert "\r" not in r.stdout
    assert "step 40/40 (100%)" in r.stdout
    assert "loss " in r.stdout and "checkpoint.brnn" in r.stdout


def test_training_is_deterministic(cli, trained, tmp_path):
    out, _ = trained
    r = run(cli, "train", *TINY, "--steps", 40, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    a = [row["loss"] for row in read_metrics(out / "metrics.csv")[1]]
    b = [row["loss"] for row in read_metrics(tmp_path / "metrics.csv")[1]]
    assert a == b
    assert (out / "checkpoint.brnn").read_bytes() == (tmp_path / "checkpoint.brnn").read_bytes()


def test_gru_and_two_layers_train(cli, tmp_path):
    r = run(cli, "train", *TINY, "--cell", "gru", "--layers", 2, "--steps", 30, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    losses = [float(row["loss"]) for row in read_metrics(tmp_path / "metrics.csv")[1]]
    assert sum(losses[-5:]) / 5 < losses[0] - 0.5
    s = run(cli, "sample", "--checkpoint", tmp_path / "checkpoint.brnn", "--length", 50)
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
    ckpt = trained[0] / "checkpoint.brnn"
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
    ckpt = trained[0] / "checkpoint.brnn"
    r = run(cli, "train", "--resume", ckpt, "--steps", 5, "--batch", 8, "--seq-len", 16,
            "--threads", 1, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "resuming at step 40" in r.stdout
    steps = [int(row["step"]) for row in read_metrics(tmp_path / "metrics.csv")[1]]
    assert steps == [41, 42, 43, 44, 45]


# ---- bad input: usage errors (exit 2) -------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["train", "--bogus"], "--bogus"),
    (["train", "--cell", "rnn"], "--cell"),
    (["train", "--hidden", "0"], "--hidden"),
    (["train", "--hidden", "abc"], "--hidden"),
    (["train", "--layers", "100"], "--layers"),
    (["train", "--steps", "0"], "--steps"),
    (["train", "--steps", "-3"], "--steps"),
    (["train", "--batch", "0"], "--batch"),
    (["train", "--seq-len", "0"], "--seq-len"),
    (["train", "--lr", "0"], "--lr"),
    (["train", "--lr", "nan"], "--lr"),
    (["train", "--threads", "0"], "--threads"),
    (["train", "--seed", "-1"], "--seed"),
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
    r = run(cli, "sample", "--checkpoint", trained[0] / "checkpoint.brnn", "--prime", "Zebra#1")
    assert r.returncode == 2
    assert "--prime: character '#' at byte offset 5" in r.stderr
    assert "not in the vocabulary" in r.stderr


def test_resume_with_conflicting_shape(cli, trained, tmp_path):
    r = run(cli, "train", "--resume", trained[0] / "checkpoint.brnn", "--hidden", 64,
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
    expect_runtime_error(sample_from(cli, tmp_path / "nope.brnn"), "nope.brnn", "does not exist")
    expect_runtime_error(sample_from(cli, tmp_path), "not a regular file")
    locked = tmp_path / "locked.brnn"
    locked.write_bytes(b"BRNNCKPT")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads anything: the directory case above covers it
        locked.chmod(0o600)
    else:
        expect_runtime_error(sample_from(cli, locked), "locked.brnn")


def corrupt_variants(good):
    payload_len = struct.unpack_from("<Q", good, 12)[0]
    flipped = bytearray(good)
    flipped[20 + payload_len // 2] ^= 0x40
    version = bytearray(good)
    struct.pack_into("<I", version, 8, 99)
    magic = bytearray(good)
    magic[0:8] = b"NOTACKPT"
    # Valid checksum, inconsistent content: the hidden size no longer fits the tensors.
    payload = bytearray(good[20:20 + payload_len])
    cell_len = struct.unpack_from("<I", payload, 0)[0]
    struct.pack_into("<q", payload, 4 + cell_len, 33)
    reshaped = good[:20] + bytes(payload) + struct.pack("<I", zlib.crc32(payload))
    return {
        "empty": (b"", "empty"),
        "truncated header": (good[:6], "truncated"),
        "truncated payload": (good[:len(good) // 2], "truncated"),
        "missing checksum": (good[:-2], "truncated"),
        "flipped byte": (bytes(flipped), "CRC"),
        "wrong version": (bytes(version), "version 99"),
        "wrong magic": (bytes(magic), "not a blockrnn checkpoint"),
        "trailing bytes": (good + b"xyz", "trailing"),
        "inconsistent shapes": (reshaped, "has shape"),
    }


@pytest.mark.parametrize("case", ["empty", "truncated header", "truncated payload",
                                  "missing checksum", "flipped byte", "wrong version",
                                  "wrong magic", "trailing bytes", "inconsistent shapes"])
def test_corrupt_checkpoints(cli, trained, tmp_path, case):
    good = (trained[0] / "checkpoint.brnn").read_bytes()
    data, message = corrupt_variants(good)[case]
    bad = tmp_path / "bad.brnn"
    bad.write_bytes(data)
    r = sample_from(cli, bad)
    expect_runtime_error(r, "bad.brnn")
    assert message.lower() in r.stderr.lower(), r.stderr
    # The same file given to train --resume fails the same way.
    expect_runtime_error(run(cli, "train", "--resume", bad, "--out", tmp_path / "o"), "bad.brnn")


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
        run(cli, "train", "--resume", trained[0] / "checkpoint.brnn", "--corpus", odd,
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
    s = run(cli, "sample", "--checkpoint", tmp_path / "checkpoint.brnn", "--length", 60)
    assert s.returncode == 0 and set(s.stdout) <= set("abcd\n")
