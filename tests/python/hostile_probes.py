"""The hostile-input probes: a table of adversarial calls, each run in a child
process under a time and an address-space limit, with the outcome each must have.

Every probe is a snippet of Python run with `np`, `blockrnn`, `kw(op, **dims)` (consistent
inputs for any op, tests/python/opinputs.py), `fn(op)` (the op's function) and `bcast(shape)`
(a zero-stride float32 array of any shape: huge inputs that take no memory) in scope.
Its expected outcome is either "ok" (the snippet returns; outputs it checks are right) or the
name of the blockrnn error (or KeyboardInterrupt) it must raise, with the strings its message
must contain (the op's name and the argument's, and the number where one is involved).

What counts as a failure: a crash (the child dies on a signal), an exit, a hang past the time
limit, running out of memory (MemoryError other than blockrnn's ResourceExhaustedError, or the
limit killing the child), another exception type, or a message missing what it must name.

Run all probes and print the outcome table: `python tests/python/hostile_probes.py [--markdown]`
(docs/reliability.md holds the table); tests/python/test_hostile_input.py runs them in pytest.
"""
import dataclasses
import multiprocessing as mp
import os
import resource
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

TIME_LIMIT_S = 20.0          # per probe; a probe that is not refused at once is a hang
MEMORY_LIMIT = 4 << 30       # address space of each child (RLIMIT_AS)

SEQ_OPS = ["BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2", "BlockGRU",
           "BlockGRUGrad", "BlockGRUResetAfter", "BlockGRUResetAfterGrad"]
CELL_OPS = ["GRUBlockCell", "GRUBlockCellGrad", "gradients.GRUBlockCell", "LSTMBlockCell",
            "LSTMBlockCellGrad", "gradients.LSTMBlockCell"]
ALL_OPS = CELL_OPS + SEQ_OPS


@dataclasses.dataclass
class Probe:
    cls: str         # the class of hostile input (the table's rows)
    name: str        # unique id
    code: str        # the snippet
    expect: str      # "ok", an error class name of blockrnn, or "KeyboardInterrupt"
    contains: tuple = ()  # strings the error message must contain
    known_bug: str = ""   # a bug this probe finds that is not fixed yet (where, what)


def probes():
    out = []

    def add(cls, name, code, expect, *contains):
        out.append(Probe(cls, name, code, expect, tuple(contains)))

    # --- Threads: only 1 .. max_threads() is accepted; anything else is the library's error.
    for v in ["10**6", "32768", "2**31", "0", "-1", "2.7", "None", "'4'", "True", "float('nan')"]:
        add("threads", f"set_num_threads({v})",
            f"blockrnn.set_num_threads({v})", "InvalidArgumentError", "set_num_threads")
    add("threads", "max_threads then an op",
        "blockrnn.set_num_threads(blockrnn.max_threads())\n"
        "out = fn('BlockLSTM')(**kw('BlockLSTM', T=2, B=64, I=32, H=32))\n"
        "assert np.isfinite(out.h).all()", "ok")
    add("threads", "max_threads under a tight address space",
        "import resource\n"
        "vsz = int(open('/proc/self/stat').read().split(')')[1].split()[20])\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vsz + (48 << 20), vsz + (48 << 20)))\n"
        "blockrnn.set_num_threads(blockrnn.max_threads())\n"
        "try:\n"
        "    out = fn('BlockLSTM')(**kw('BlockLSTM', T=2, B=64, I=32, H=32))\n"
        "except blockrnn.ResourceExhaustedError as e:\n"
        "    assert 'BlockLSTM' in str(e), e\n",
        "ok")

    # --- Zero-size work returns at once, however long the (empty) sequence or batch.
    big = "2**40"
    for ref in (False, True):
        mode = "reference" if ref else "fast"
        pre = f"blockrnn.set_force_reference({ref})\n"
        for op in SEQ_OPS:
            for dims in (f"T={big}, B=0, I=3, H=4", f"T={big}, B=3, I=0, H=0",
                         f"T={big}, B=0, I=0, H=0"):
                if "H=0" in dims and "LSTMGrad" in op:
                    continue  # the grads take H from w's columns, which must be positive
                add("zero-size work", f"{op} {dims} ({mode})",
                    pre + f"a = kw('{op}', {dims}, empty=True)\nout = fn('{op}')(**a)\n"
                    "assert all(o.size == 0 or np.all(o == 0) for o in out)", "ok")
        for op in CELL_OPS:
            for dims in (f"B={big}, I=0, H=0", "B=0, I=5, H=6", f"B=0, I={big}, H=0"):
                code = pre + f"a = kw('{op}', {dims}, empty=True)\nout = fn('{op}')(**a)\n" \
                    "assert all(o.size == 0 or np.all(o == 0) for o in out)"
                if "LSTM" in op:  # TensorFlow's LSTM cell ops refuse an empty cs_prev
                    add("zero-size work", f"{op} {dims} ({mode})", code,
                        "InvalidArgumentError", op, "cs_prev")
                else:
                    add("zero-size work", f"{op} {dims} ({mode})", code, "ok")

    # --- Memory: the total is checked before anything is allocated or copied.
    for op in SEQ_OPS:
        # Outputs of ~TBs from inputs that take no memory (zero-stride views).
        add("memory", f"{op} outputs beyond the machine",
            f"a = kw('{op}', T=10**6, B=1000, I=0, H=100, broadcast=True)\nfn('{op}')(**a)",
            "ResourceExhaustedError", op, "bytes")
    for op in CELL_OPS:
        add("memory", f"{op} outputs beyond the machine",
            f"a = kw('{op}', B=10**7, I=3, H=10**4, broadcast=True)\nfn('{op}')(**a)",
            "ResourceExhaustedError", op, "bytes")
    for op in ["GRUBlockCell", "LSTMBlockCell", "BlockLSTM", "BlockGRUGrad"]:
        add("memory", f"{op} over set_memory_limit",
            "blockrnn.set_memory_limit(1 << 20)\n"
            f"a = kw('{op}', T=4, B=64, I=64, H=64)\nfn('{op}')(**a)",
            "ResourceExhaustedError", op, "memory limit")
        add("memory", f"{op} non-contiguous huge input of the wrong shape",
            f"a = kw('{op}', T=4, B=8, I=4, H=4)\n"
            "a['h_prev'] = np.broadcast_to(np.float32(1), (64 * 1024, 64 * 1024))\n"
            f"fn('{op}')(**a)", "InvalidArgumentError", op, "h_prev")
        add("memory", f"{op} non-contiguous huge input of the right shape",
            f"a = kw('{op}', T=2, B=2**17, I=2**14, H=4, broadcast=True)\n"
            "a = {k: (np.ascontiguousarray(v) if k != 'x' and isinstance(v, np.ndarray) "
            "and v.ndim else v) for k, v in a.items()}\n"
            "blockrnn.set_memory_limit(1 << 30)\n"
            f"fn('{op}')(**a)", "ResourceExhaustedError", op, "x")
    add("memory", "unaddressable output shape",
        "a = kw('BlockLSTM', T=2**40, B=2**20, I=0, H=2**10, broadcast=True)\nfn('BlockLSTM')(**a)",
        "ResourceExhaustedError", "BlockLSTM", "[1099511627776, 1048576, 1024]")

    # --- Conversion: anything that is not a real floating array of the op's dtype.
    bad_values = {
        "object array": "np.array([[object()] * 5] * 4, dtype=object)",
        "string array": "np.full((4, 5), 'a')",
        "bytes array": "np.full((4, 5), b'a')",
        "datetime array": "np.zeros((4, 5), 'datetime64[s]')",
        "timedelta array": "np.zeros((4, 5), 'timedelta64[s]')",
        "structured array": "np.zeros((4, 5), [('a', 'f4'), ('b', 'f4')])",
        "complex array": "np.zeros((4, 5), np.complex64)",
        "int array": "np.zeros((4, 5), np.int32)",
        "bool array": "np.zeros((4, 5), bool)",
        "list with None": "[[1.0, None, 0.0, 0.0, 0.0]] * 4",
        "ragged list": "[[1.0] * 5] * 3 + [[1.0] * 4]",
        "string": "'hello'",
        "None": "None",
        "dict": "{}",
        "rank 9": "np.zeros((1,) * 9, np.float32)",
        "rank 40": "np.zeros((1,) * 40, np.float32)",
        "mixed dtype": "np.zeros((4, 5), np.float64)",
        # (bfloat16 is an op dtype: an x of it among float32 inputs is the dtype mismatch.)
        "bfloat16 array": "np.zeros((4, 5), __import__('ml_dtypes').bfloat16)",
        "float8 array": "np.zeros((4, 5), __import__('ml_dtypes').float8_e4m3fn)",
    }
    for op in ALL_OPS:
        for what, v in bad_values.items():
            dims = "T=3, B=4, I=5, H=6"
            add("conversion", f"{op} x = {what}",
                f"a = kw('{op}', {dims})\na['x'] = {v}\nfn('{op}')(**a)",
                "InvalidArgumentError", op, "x")
    for op in ["GRUBlockCell", "LSTMBlockCellGrad", "BlockLSTM", "BlockGRUGrad"]:
        add("conversion", f"{op} big-endian inputs give the native result",
            f"a = kw('{op}', T=3, B=4, I=5, H=6)\n"
            "b = {k: (v.astype(v.dtype.newbyteorder('>')) if isinstance(v, np.ndarray) and "
            "v.dtype.kind == 'f' else v) for k, v in a.items()}\n"
            f"r, s = fn('{op}')(**a), fn('{op}')(**b)\n"
            "assert all(np.array_equal(p, q) for p, q in zip(r, s))", "ok")
        add("conversion", f"{op} lists of numbers",
            f"a = kw('{op}', T=3, B=4, I=5, H=6)\n"
            "b = {k: (v.tolist() if k not in ('seq_len_max', 'x') and isinstance(v, np.ndarray) "
            "else v) for k, v in a.items()}\n"
            f"r, s = fn('{op}')(**a), fn('{op}')(**b)\n"
            "assert all(np.array_equal(p, q) for p, q in zip(r, s))", "ok")

    # --- seq_len_max and attrs: range-checked as numbers.
    for op in ["BlockLSTM", "BlockGRUGrad"]:
        for v, shown in [("np.uint64(2**64 - 1)", "18446744073709551615"), ("2**63", str(2**63)),
                         ("-1", "-1"), ("2**100", str(2**100)), ("np.int64(-2**63)", str(-2**63))]:
            add("attrs", f"{op} seq_len_max = {v}",
                f"a = kw('{op}', T=3, B=4, I=5, H=6)\na['seq_len_max'] = {v}\nfn('{op}')(**a)",
                "InvalidArgumentError", op, "seq_len_max", shown)
        for v in ["1.5", "np.float64(2)", "'2'", "None", "[2]", "np.array([2])"]:
            add("attrs", f"{op} seq_len_max = {v}",
                f"a = kw('{op}', T=3, B=4, I=5, H=6)\na['seq_len_max'] = {v}\nfn('{op}')(**a)",
                "InvalidArgumentError", op, "seq_len_max")
    for op in ["LSTMBlockCell", "BlockLSTM", "gradients.LSTMBlockCell"]:
        for attr, v in [("forget_bias", "10**400"), ("forget_bias", "'1'"), ("cell_clip", "10**400"),
                        ("cell_clip", "None"), ("forget_bias", "1j"), ("use_peephole", "2"),
                        ("use_peephole", "'yes'"), ("forget_bias", "np.float64(1e300)")]:
            add("attrs", f"{op} {attr} = {v}",
                f"a = kw('{op}', T=3, B=4, I=5, H=6)\nfn('{op}')(**a, {attr}={v})",
                "InvalidArgumentError", op, attr)

    # --- seq_lengths (blockrnn's optional [B] lengths of the sequence ops): shape, dtype and
    # every value are checked before anything runs; garbage past the lengths never leaks.
    for op in SEQ_OPS:
        for v, expect, shown in [
                ("np.array([1, 2, 3], np.int64)", "InvalidArgumentError", "[4]"),
                ("np.zeros((4, 1), np.int64)", "InvalidArgumentError", "rank 1"),
                ("np.int64(2)", "InvalidArgumentError", "rank 1"),
                ("np.array([1.0, 2.0, 3.0, 1.0])", "InvalidArgumentError", "float64"),
                ("np.array([1, 2, np.nan, 1])", "InvalidArgumentError", "float64"),
                ("np.array([True, False, True, True])", "InvalidArgumentError", "bool"),
                ("'1234'", "InvalidArgumentError", "seq_lengths"),
                ("[1, 2, None, 3]", "InvalidArgumentError", "seq_lengths"),
                ("np.array([1, -1, 2, 3], np.int64)", "InvalidArgumentError", "seq_lengths[1] = -1"),
                ("np.array([1, 2, 4, 3], np.int32)", "InvalidArgumentError", "seq_lengths[2] = 4"),
                ("np.array([2**63 - 1, 0, 0, 0], np.int64)", "InvalidArgumentError",
                 "9223372036854775807"),
                ("np.array([2**64 - 1, 0, 0, 0], np.uint64)", "InvalidArgumentError",
                 "18446744073709551615"),
                ("[3, 0, 2, 1]", "ok", ""),
                ("np.array([3, 0, 2, 1], np.int32)", "ok", ""),
                ("np.array([3, 0, 2, 1], '>i8')", "ok", ""),
                ("np.array([3, 3, 0, 1, 2, 3, 1, 0], np.int64)[::2]", "ok", "")]:
            code = (f"a = kw('{op}', T=3, B=4, I=5, H=6)\n"
                    f"out = fn('{op}')(**a, seq_lengths={v})\n")
            if expect == "ok":
                code += "assert all(np.isfinite(o).all() for o in out)"
                add("seq_lengths", f"{op} seq_lengths = {v}", code, "ok")
            else:
                add("seq_lengths", f"{op} seq_lengths = {v}", code, expect, op, "seq_lengths",
                    shown)
        add("seq_lengths", f"{op} NaN past the lengths does not leak",
            f"a = kw('{op}', T=3, B=4, I=5, H=6)\n"
            "L = np.array([3, 0, 2, 1])\n"
            "clean = fn('" + op + "')(**a, seq_lengths=L)\n"
            "for k, v in a.items():\n"
            "    if isinstance(v, np.ndarray) and v.ndim == 3:\n"
            "        v = v.copy()\n"
            "        for b in range(4):\n"
            "            v[L[b]:, b] = np.nan\n"
            "        a[k] = v\n"
            "dirty = fn('" + op + "')(**a, seq_lengths=L)\n"
            "assert all(np.array_equal(p, q) for p, q in zip(clean, dirty))", "ok")

    # --- Silent wrong answers: denormal attrs follow TensorFlow (flush to zero).
    for op in ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2", "gradients.LSTMBlockCell"]:
        add("denormals", f"{op} subnormal cell_clip does not clip (as TensorFlow)",
            f"a = kw('{op}', T=3, B=4, I=5, H=6)\n"
            f"r = fn('{op}')(**a, cell_clip=1e-39)\ns = fn('{op}')(**a, cell_clip=-1.0)\n"
            "assert all(np.array_equal(p, q) for p, q in zip(r, s))", "ok")

    # --- Long calls stop on a signal (Ctrl-C) at a step boundary. How soon is measured in the
    # process's CPU time, the work done between the start and the stop (the signal comes after
    # 0.3 s of wall time, at most 0.6 s of CPU on two threads): on a loaded machine the wall
    # time also counts the waits for a CPU, which say nothing about where the call stopped.
    for op, dims in [("BlockLSTM", "T=10**6, B=1, I=64, H=64"),
                     ("BlockGRU", "T=10**6, B=1, I=64, H=64"),
                     ("BlockLSTMGrad", "T=3 * 10**5, B=1, I=64, H=64"),
                     ("BlockGRUGrad", "T=3 * 10**5, B=1, I=64, H=64"),
                     ("BlockGRUResetAfter", "T=10**6, B=1, I=64, H=64"),
                     ("BlockGRUResetAfterGrad", "T=3 * 10**5, B=1, I=64, H=64")]:
        for ref in (False, True):
            add("interrupt", f"{op} {dims} Ctrl-C ({'reference' if ref else 'fast'})",
                f"blockrnn.set_force_reference({ref})\n"
                f"a = kw('{op}', {dims})\n"
                "import signal, threading, os\n"
                "threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
                "c0 = time.process_time()\n"
                "try:\n"
                f"    fn('{op}')(**a)\n"
                "    raise AssertionError('finished before the signal')\n"
                "except KeyboardInterrupt:\n"
                "    assert time.process_time() - c0 < 3, time.process_time() - c0\n"
                "    raise\n", "KeyboardInterrupt")
    out.extend(layer_probes())
    out.extend(torch_probes())
    out.extend(model_file_probes())
    return out


# The surfaces beyond the one-shot ops: blockrnn.layers, the library's layer objects and RNN
# (blockrnn._core), blockrnn.torch's modules and model files. Snippets also have
# `small_lstm(T, B, I, H)` (a _core.LSTMLayer with weights set, x, a zero state and the 7
# outputs of a call) and `run_threads(f, n)` (f(k) from n Python threads at once; the first
# exception re-raised) in scope.

def _concurrent(T):
    """A snippet that runs `call(x)` (defined before it) on 4 inputs serially, then from 4
    threads at once, 4 times each: every result must be the serial one's bits. A call refused
    because another one runs would also do (an error saying "one call at a time"); none may
    differ."""
    return ("rng = np.random.default_rng(1)\n"
            f"xs = [rng.standard_normal(({T}, 8, 32)).astype(np.float32) for _ in range(4)]\n"
            "ref = [call(x).copy() for x in xs]\n"
            "wrong = []\n"
            "def work(k):\n"
            "    for _ in range(4):\n"
            "        try:\n"
            "            y = call(xs[k])\n"
            "        except (RuntimeError, ValueError) as e:\n"
            "            assert 'one call at a time' in str(e), e\n"
            "            continue\n"
            "        if not np.array_equal(y, ref[k]):\n"
            "            wrong.append(k)\n"
            "run_threads(work, 4)\n"
            "assert not wrong, f'{len(wrong)} of 16 concurrent results differ from the serial'\n")


def layer_probes():
    out = []

    def add(name, code, expect, *contains, known_bug=""):
        out.append(Probe("layers and RNN", name, code, expect, tuple(contains), known_bug))

    limit_1m = "blockrnn.set_memory_limit(1 << 20)\n"
    # --- Sizes that would allocate terabytes, and the memory limit.
    add("layers.LSTM hidden_size 10**6",
        "blockrnn.layers.LSTM(3, 10**6)",
        "ResourceExhaustedError", "LSTM", "hidden_size=1000000", "bytes")
    add("layers.GRU over set_memory_limit",
        limit_1m + "blockrnn.layers.GRU(64, 1024)",
        "ResourceExhaustedError", "GRU", "memory limit")
    add("layers.LSTM.forward outputs beyond the machine (broadcast x)",
        "blockrnn.layers.LSTM(3, 100).forward(bcast((10**6, 1000, 3)))",
        "ResourceExhaustedError", "LSTM.forward", "[1000000, 1000, 100]")
    add("layers.GRU.forward float64 x whose conversion is beyond the machine",
        "blockrnn.layers.GRU(3, 4).forward(np.broadcast_to(1.0, (10**6, 10**4, 3)))",
        "ResourceExhaustedError", "GRU.forward", "x [1000000, 10000, 3]")
    for cls in ("LSTM", "GRU"):
        add(f"layers.{cls}.forward over set_memory_limit",
            limit_1m + f"l = blockrnn.layers.{cls}(64, 64)\n"
            "l.forward(np.zeros((64, 64, 64), np.float32))",
            "ResourceExhaustedError", f"{cls}.forward", "memory limit")
        add(f"layers.{cls}.backward over set_memory_limit",
            f"l = blockrnn.layers.{cls}(64, 64)\n"
            "h, _ = l.forward(np.zeros((8, 64, 64), np.float32))\n"
            "blockrnn.set_memory_limit(64 << 10)\n"
            "l.backward(np.ones_like(h))",
            "ResourceExhaustedError", f"{cls}.backward", "memory limit")
    add("LSTMLayer weights beyond the machine",
        "blockrnn._core.LSTMLayer(2**40, 2**40, 'float32', 1, 1)",
        "ResourceExhaustedError", "LSTMLayer.create", "input_size")
    add("LSTMLayer max_time x max_batch beyond the machine",
        "blockrnn._core.LSTMLayer(4, 4, 'float32', 2**62, 2**62)",
        "ResourceExhaustedError", "LSTMLayer.create", "max_time")
    add("LSTMLayer with max_time = max_batch = 2**20 holds nothing for them",
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "l = blockrnn._core.LSTMLayer(4, 4, 'float32', 2**20, 2**20)\n"
        "l.set_weights(np.zeros((8, 16), np.float32), np.zeros(16, np.float32))\n"
        "z = np.zeros((2, 4), np.float32)\n"
        "o = [np.empty((3, 2, 4), np.float32) for _ in range(7)]\n"
        "l.forward(np.zeros((3, 2, 4), np.float32), z, z, o)\n"
        "assert np.isfinite(o[6]).all()", "ok")
    add("LSTMCellLayer weights beyond the machine",
        "blockrnn._core.LSTMCellLayer(2**40, 2**40, 'float32', 1)",
        "ResourceExhaustedError", "LSTMCellLayer.create", "input_size")
    add("GRUCellLayer max_batch beyond the machine",
        "blockrnn._core.GRUCellLayer(4, 4, 'float32', 2**62)",
        "ResourceExhaustedError", "GRUCellLayer.create", "max_batch")
    add("layers.LSTMCell.forward over set_memory_limit",
        "c = blockrnn.layers.LSTMCell(64, 64, max_batch=4096)\n"
        "c.set_weights(np.zeros((128, 256), np.float32), np.zeros(256, np.float32))\n"
        "z = np.zeros((4096, 64), np.float32)\n" + limit_1m + "c.forward(z, z, z)",
        "ResourceExhaustedError", "LSTMCell.forward", "memory limit")
    add("GRUCellLayer.forward workspace over set_memory_limit",
        "c = blockrnn._core.GRUCellLayer(64, 64, 'float32', 4096)\n"
        "c.set_weights(np.zeros((128, 128), np.float32), np.zeros((128, 64), np.float32),\n"
        "              np.zeros(128, np.float32), np.zeros(64, np.float32))\n"
        "x, h = np.zeros((4096, 64), np.float32), np.zeros((4096, 64), np.float32)\n"
        "o = [np.empty((4096, 64), np.float32) for _ in range(4)]\n"
        + limit_1m + "c.forward(x, h, o)",
        "ResourceExhaustedError", "GRUCellLayer.forward", "memory limit")
    add("RNN num_layers 10**9",
        "blockrnn._core.RNN('lstm', 8, 8, 10**9, False, 'float32', 1, 1)",
        "ResourceExhaustedError", "RNN.create", "layer objects")
    add("LSTMLayer.forward over set_memory_limit",
        "l, x, z, o = small_lstm(64, 64, 64, 64)\n" + limit_1m + "l.forward(x, z, z, o)",
        "ResourceExhaustedError", "LSTMLayer.forward", "memory limit")

    # --- Overlapping outputs, wrong dtypes, calls beyond the layer's bounds or its forward.
    grads = ("g = [np.empty(a.shape, np.float32) for a in (x, z, z)] + "
             "[np.empty((11, 24), np.float32)] + [np.empty(6, np.float32) for _ in range(3)] + "
             "[np.empty(24, np.float32)]\n")
    add("LSTMLayer output h on input x",
        "l, x, z, o = small_lstm(3, 4, 6, 6)\no[6] = x\nl.forward(x, z, z, o)",
        "InvalidArgumentError", "LSTMLayer.forward", "overlaps")
    add("LSTMLayer one array as two outputs",
        "l, x, z, o = small_lstm(3, 4, 5, 6)\no[1] = o[0]\nl.forward(x, z, z, o)",
        "InvalidArgumentError", "LSTMLayer.forward", "outputs i and cs overlap")
    add("LSTMLayer.backward x_grad on an activation",
        "l, x, z, o = small_lstm(3, 4, 5, 6)\nl.forward(x, z, z, o)\n" + grads +
        "g[0] = o[0][:, :, :5].copy()\ng[0] = o[0].reshape(-1)[:60].reshape(3, 4, 5)\n"
        "l.backward(x, z, z, o, np.zeros_like(o[0]), np.ones_like(o[0]), g)",
        "InvalidArgumentError", "LSTMLayer.backward", "overlaps")
    add("RNN bidirectional y on x",
        "r = blockrnn._core.RNN('gru', 4, 2, 1, True, 'float32', 3, 2)\n"
        "for d in range(2):\n"
        "    r.set_weights(0, d, [np.zeros((6, 4), np.float32), np.zeros((6, 2), np.float32),"
        " np.zeros(4, np.float32), np.zeros(2, np.float32)])\n"
        "x = np.zeros((3, 2, 4), np.float32)\n"
        "r.forward(x, None, None, None, None, x, np.empty((2, 2, 2), np.float32), None)",
        "InvalidArgumentError", "RNN.forward", "overlaps")
    add("LSTMLayer float64 x into a float32 layer",
        "l, x, z, o = small_lstm(3, 4, 5, 6)\nl.forward(x.astype(np.float64), z, z, o)",
        "InvalidArgumentError", "LSTMLayer.forward", "x")
    add("LSTMLayer T beyond max_time",
        "l, x, z, o = small_lstm(3, 4, 5, 6)\n"
        "o2 = [np.empty((4, 4, 6), np.float32) for _ in range(7)]\n"
        "l.forward(np.zeros((4, 4, 5), np.float32), z, z, o2)",
        "InvalidArgumentError", "LSTMLayer.forward", "max_time")
    add("LSTMLayer.backward with activations of another T",
        "l, x, z, o = small_lstm(3, 4, 5, 6)\nl.forward(x, z, z, o)\n" + grads +
        "l.backward(x, z, z, [a[:2].copy() for a in o], np.zeros_like(o[0]), "
        "np.ones_like(o[0]), g)",
        "InvalidArgumentError", "LSTMLayer.backward")
    add("RNN.backward with a T other than the forward's",
        "r = blockrnn._core.RNN('gru', 4, 2, 1, False, 'float32', 5, 2)\n"
        "r.set_weights(0, 0, [np.full((6, 4), .1, np.float32), np.full((6, 2), .1, np.float32),"
        " np.zeros(4, np.float32), np.zeros(2, np.float32)])\n"
        "x = np.ones((5, 2, 4), np.float32)\n"
        "r.forward(x, None, None, None, None, np.empty((5, 2, 2), np.float32), "
        "np.empty((1, 2, 2), np.float32), None)\n"
        "g = [np.empty((6, 4), np.float32), np.empty((6, 2), np.float32), "
        "np.empty(4, np.float32), np.empty(2, np.float32)]\n"
        "r.backward(x[:3].copy(), None, None, None, None, np.ones((3, 2, 2), np.float32), None, "
        "None, np.empty((3, 2, 4), np.float32), np.empty((1, 2, 2), np.float32), None, g)",
        "InvalidArgumentError", "RNN.backward")
    add("layers.LSTM.backward with grad_h_seq of another T",
        "l = blockrnn.layers.LSTM(5, 6)\n"
        "h, _ = l.forward(np.ones((3, 4, 5), np.float32))\n"
        "l.backward(np.ones((2, 4, 6), np.float32))",
        "InvalidArgumentError", "LSTM", "grad_h_seq", "[3, 4, 6]")

    # --- Attrs: what the raw op takes, with its meaning; wrong types named.
    add("LSTMLayer cell_clip 1e39",
        "blockrnn._core.LSTMLayer(4, 4, 'float32', 1, 1, cell_clip=1e39)",
        "InvalidArgumentError", "LSTMLayer", "cell_clip")
    add("layers.LSTM forget_bias 1e39 refused as the raw op refuses it",
        "blockrnn.layers.LSTM(5, 6, forget_bias=1e39).forward(np.ones((3, 4, 5), np.float32))",
        "InvalidArgumentError", "forget_bias")
    for attr in ("forget_bias", "cell_clip"):
        for v in ("float('nan')", "float('inf')", "3.4028235e38"):
            add(f"layers.LSTM {attr} = {v} gives the raw op's bits",
                f"l = blockrnn.layers.LSTM(5, 6, seed=1, {attr}={v})\n"
                "x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)\n"
                "z = np.zeros((4, 6), np.float32)\n"
                "for _ in range(3):\n"
                "    h, _ = l.forward(x)\n"
                "r = blockrnn.raw_ops.BlockLSTM(seq_len_max=np.int64(3), x=x, cs_prev=z, "
                "h_prev=z, w=l.w, wci=l.wci, wcf=l.wcf, wco=l.wco, b=l.b, "
                "forget_bias=l.forget_bias, cell_clip=l.cell_clip if l.cell_clip else -1.0)\n"
                "assert np.array_equal(h, r.h, equal_nan=True)", "ok")
    add("layers.LSTM cell_clip 'a'",
        "blockrnn.layers.LSTM(3, 4, cell_clip='a')", "TypeError", "LSTM", "cell_clip")

    # --- Conversion: the raw ops' rules (no silent NaN, no dropped imaginary part).
    for what, v in [("list with None", "[[[1.0, None, 0.0]]] * 2"),
                    ("complex array", "np.ones((2, 1, 3), np.complex64) * 1j"),
                    ("string array", "np.full((2, 1, 3), '1')"),
                    ("object array", "np.array([[[object()] * 3]] * 2, dtype=object)"),
                    ("ragged list", "[[[1.0, 2.0, 3.0]], [[1.0, 2.0]]]"),
                    ("None", "None")]:
        for cls in ("LSTM", "GRU"):
            add(f"layers.{cls}.forward x = {what}",
                f"blockrnn.layers.{cls}(3, 4).forward({v})",
                "InvalidArgumentError", f"{cls}.forward", "x")
    add("layers.LSTM.forward state with None",
        "blockrnn.layers.LSTM(3, 4).forward(np.ones((2, 1, 3)), "
        "(np.zeros((1, 4)), [[0.0, None, 0.0, 0.0]]))",
        "InvalidArgumentError", "LSTM", "state[1] (h)", "None")
    add("layers.GRU.backward grad_h_seq complex",
        "l = blockrnn.layers.GRU(3, 4)\nh, _ = l.forward(np.ones((2, 1, 3)))\n"
        "l.backward(h.astype(np.complex64))",
        "InvalidArgumentError", "GRU.backward", "grad_h_seq")
    model = ("from blockrnn.model import LayerConfig, Model\n"
             "c = LayerConfig('BlockLSTM', 32, forget_bias=1.0, cell_clip=None, "
             "use_peephole=False)\n"
             "m = Model(np.float32, 32, [c], [[{p: np.random.default_rng(2).uniform(-.3, .3, s)"
             ".astype(np.float32) for p, s in c.param_shapes(32).items()}]])\n")
    add("Model.forward x with None",
        model + "m.forward([[[1.0, None] + [0.0] * 30]])",
        "InvalidArgumentError", "Model.forward", "x", "None")
    add("Model.forward initial state complex",
        model + "m.forward(np.ones((2, 1, 32)), initial_state=[[(np.zeros((1, 32)), "
        "np.zeros((1, 32), np.complex64))]])",
        "InvalidArgumentError", "Model.forward", "initial_state[0][0][1]")
    add("Model.forward x beyond the machine (broadcast)",
        model + "m.forward(bcast((10**6, 1000, 32)))",
        "ResourceExhaustedError", "Model.forward", "[1000000, 1000, 32]")
    add("Model.forward over set_memory_limit",
        model + "blockrnn.set_memory_limit(1 << 20)\nm.forward(np.zeros((64, 64, 32)))",
        "ResourceExhaustedError", "Model.forward", "memory limit")

    # --- One call at a time: concurrent callers on one object wait (or are refused), never
    # corrupt each other (each object owns one workspace; the library releases the GIL).
    add("layers.LSTM forward from 4 threads",
        "l = blockrnn.layers.LSTM(32, 32, seed=0)\n"
        "call = lambda x: l.forward(x)[0]\n" + _concurrent(100), "ok")
    add("layers.GRU forward from 4 threads",
        "l = blockrnn.layers.GRU(32, 32, seed=0)\n"
        "call = lambda x: l.forward(x)[0]\n" + _concurrent(100), "ok")
    add("Model.forward from 4 threads",
        model + "call = lambda x: m.forward(x)[0]\n" + _concurrent(100), "ok")
    add("_core.LSTMLayer forward from 4 threads",
        "l, x, z, o = small_lstm(100, 8, 32, 32)\n"
        "def call(x):\n"
        "    out = [np.empty((100, 8, 32), np.float32) for _ in range(7)]\n"
        "    l.forward(x, z, z, out)\n"
        "    return out[6]\n" + _concurrent(100), "ok")
    return out


def torch_probes():
    out = []
    pre = "import torch, blockrnn.torch\n"

    def add(name, code, expect, *contains, known_bug=""):
        out.append(Probe("torch modules", name, pre + code, expect, tuple(contains), known_bug))

    add("LSTM over set_memory_limit",
        "m = blockrnn.torch.LSTM(64, 64)\n"
        "blockrnn.set_memory_limit(1 << 20)\n"
        "m(torch.zeros(64, 64, 64))", "ResourceExhaustedError", "nn_rnn", "memory limit")
    add("GRU outputs beyond the machine (expanded x)",
        "m = blockrnn.torch.GRU(3, 100)\n"
        "m(torch.zeros(1, 1, 3).expand(10**6, 1000, 3))",
        "ResourceExhaustedError", "nn_rnn", "memory limit", "[1000000, 1000, 100]")
    add("LSTM cell_clip NaN: bounded plans, finite results",
        "m = blockrnn.torch.LSTM(4, 5, cell_clip=float('nan'))\n"
        "x = torch.randn(3, 2, 4, requires_grad=True)\n"
        "for _ in range(30):\n"
        "    y, _ = m(x)\n"
        "    y.sum().backward()\n"
        "assert blockrnn.torch._ops.cached_plans() <= 8, blockrnn.torch._ops.cached_plans()\n"
        "assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()", "ok")
    add("LSTM 100 distinct cell_clip values keep at most 8 plans",
        "x = torch.randn(3, 2, 4)\n"
        "for k in range(100):\n"
        "    blockrnn.torch.LSTM(4, 5, cell_clip=1.0 + k)(x)\n"
        "assert blockrnn.torch._ops.cached_plans() <= 8, blockrnn.torch._ops.cached_plans()", "ok")
    add("LSTM forward and backward from 4 threads",
        "m = blockrnn.torch.LSTM(32, 32)\n"
        "def call(x):\n"
        "    xt = torch.from_numpy(x).requires_grad_()\n"
        "    y, _ = m(xt)\n"
        "    (gx,) = torch.autograd.grad(y.sum(), xt)\n"
        "    return torch.cat([y.detach().flatten(), gx.flatten()]).numpy()\n" + _concurrent(50),
        "ok")
    add("LSTM backward with a gradient of another shape",
        "m = blockrnn.torch.LSTM(4, 5)\n"
        "y, _ = m(torch.randn(3, 2, 4, requires_grad=True))\n"
        "y.backward(torch.ones(2, 2, 5))", "RuntimeError", "shape")
    add("GRU float64 x against float32 weights",
        "blockrnn.torch.GRU(4, 5)(torch.zeros(3, 2, 4, dtype=torch.float64))",
        "ValueError", "dtype")  # torch.nn.GRU's error and message (a drop-in)
    return out


def model_file_probes():
    """Hostile model files beyond tests/python/test_model_file.py's: blockrnn.load_model on
    headers that nest, repeat or declare what no file can back, and the character-model
    checkpoints of `blockrnn train` (load_char_model of tools/train/char_checkpoint.py)."""
    import json
    out = []
    # write(header bytes, data bytes) writes a safetensors file and returns its path
    pre = ("import struct, tempfile\n"
           "def write(text, data=b''):\n"
           "    f = tempfile.NamedTemporaryFile(suffix='.safetensors', delete=False)\n"
           "    f.write(struct.pack('<Q', len(text)) + text + data)\n"
           "    f.close()\n"
           "    return f.name\n")

    def add(name, code, expect, *contains, known_bug=""):
        out.append(Probe("model files", name, pre + code, expect, tuple(contains), known_bug))

    def header(meta, tensors=None):
        h = {"__metadata__": meta}
        h.update(tensors or {})
        return repr(json.dumps(h).encode())

    def model_header(layers, tensors=None):
        config = dict(format="blockrnn-model", version=1, dtype="float32", input_size=3,
                      return_sequences=True, masking=None, layers=layers, source={})
        return header({"blockrnn": json.dumps(config)}, tensors)

    gru = dict(kind="BlockGRU", hidden_size=2, directions=1, merge=None, go_backwards=False,
               padded_output="zeros")
    add("header nested 10**5 deep",
        "blockrnn.load_model(write(b'[' * 10**5 + b']' * 10**5))",
        "InvalidArgumentError", "header")
    add("config nested 10**5 deep",
        f"blockrnn.load_model(write({header({'blockrnn': '[' * 10**5})}))",
        "InvalidArgumentError", "__metadata__.blockrnn")
    add("10**4 layers declared",
        f"blockrnn.load_model(write({model_header([gru] * 10**4)}))",
        "InvalidArgumentError", "layers")
    big = {"layers.0.0.w_ru": {"dtype": "F32", "shape": [2**40 + 3, 2**41],
                               "data_offsets": [0, 4]}}
    add("hidden_size 2**40 with a tensor declaring that shape",
        f"blockrnn.load_model(write({model_header([dict(gru, hidden_size=2**40)], big)}, "
        "b'0000'))",
        "InvalidArgumentError", "layers.0.0.w_ru")
    odd = {"t": {"dtype": "F32", "shape": [1.5, True] + [1] * 100, "data_offsets": [0, 4]}}
    add("shape with a float, a bool and rank 102",
        f"blockrnn.load_model(write({model_header([gru], odd)}, b'0000'))",
        "InvalidArgumentError", "'t'", "shape")
    far = {"t": {"dtype": "F32", "shape": [1], "data_offsets": [2**70, 2**70 + 4]}}
    add("data_offsets of 2**70",
        f"blockrnn.load_model(write({model_header([gru], far)}, b'0000'))",
        "InvalidArgumentError", "'t'", "data_offsets")

    # load_char_model (`blockrnn train`'s checkpoints, read by the demo's Python reader): a
    # damaged file is a ValueError naming the file, with nothing allocated that the file cannot
    # back.
    reader = os.path.join(os.path.dirname(HERE), os.pardir, "tools", "train")
    meta = {"format": "blockrnn-char-lm", "format_version": "1", "cell": "gru", "hidden": "2",
            "layers": "1", "vocabulary": "ab", "forget_bias": "1"}
    emb = {"embedding": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
    for name, text in [
            ("bad JSON", "b'{'"),
            ("header a list", "b'[1]'"),
            ("dtype I32", header(meta, {"embedding": dict(emb["embedding"], dtype="I32")})),
            ("shape not matching the bytes",
             header(meta, {"embedding": dict(emb["embedding"], shape=[5, 3])})),
            ("embedding rank 1", header(meta, {"embedding": dict(emb["embedding"], shape=[6])})),
            ("hidden 10**6", header(dict(meta, hidden="1000000"), emb)),
            ("layers 10**9", header(dict(meta, layers="1000000000"), emb)),
            ("hidden not a number", header(dict(meta, hidden="x"), emb)),
            ("cell missing", header({k: v for k, v in meta.items() if k != "cell"}, emb))]:
        add(f"load_char_model {name}",
            f"import sys; sys.path.insert(0, {os.path.normpath(reader)!r})\n"
            "from char_checkpoint import load_char_model\n"
            f"p = write({text}, b'0' * 24)\n"
            "try:\n"
            "    load_char_model(p)\n"
            "except ValueError as e:\n"
            "    assert p in str(e), e\n"
            "    raise blockrnn.InvalidArgumentError(str(e))\n",
            "InvalidArgumentError")
    return out


# ----------------------------------------------------------------------------------------------
# The child side.

def _child_env():
    import numpy as np

    import blockrnn
    sys.path.insert(0, HERE)
    import opinputs

    def kw(op, T=3, B=4, I=5, H=6, empty=False, broadcast=False):
        """opinputs.make_kwargs for any dims; `empty`/`broadcast` build the float inputs as
        zero-stride views (no memory), so huge-but-empty or huge-but-constant inputs are cheap."""
        if empty or broadcast:
            import inspect
            kwargs = {}
            for p in inspect.signature(opinputs.op_function(op)).parameters.values():
                if p.name == "name":
                    continue
                if p.name == "seq_len_max":
                    kwargs[p.name] = np.int64(T)
                elif p.default is inspect.Parameter.empty and p.name == "use_peephole":
                    kwargs[p.name] = False
                elif p.default is inspect.Parameter.empty:
                    shape = opinputs._shape(op, p.name, T, B, I, H)
                    kwargs[p.name] = np.broadcast_to(np.float32(0.5), shape)
            return kwargs
        return opinputs.make_kwargs(op, np.random.default_rng(0), T=T, B=B, I=I, H=H)

    def bcast(shape, value=0.5):
        return np.broadcast_to(np.float32(value), shape)

    def small_lstm(T, B, I, H):
        """A _core.LSTMLayer (float32, max_time T, max_batch B) with weights set, and x, a zero
        state and the 7 outputs of a call."""
        rng = np.random.default_rng(0)
        layer = blockrnn._core.LSTMLayer(I, H, "float32", T, B)
        layer.set_weights(rng.uniform(-.3, .3, (I + H, 4 * H)).astype(np.float32),
                          np.zeros(4 * H, np.float32))
        x = rng.standard_normal((T, B, I)).astype(np.float32)
        out = [np.empty((T, B, H), np.float32) for _ in range(7)]
        return layer, x, np.zeros((B, H), np.float32), out

    def run_threads(f, n):
        import threading
        errors = []

        def run(k):
            try:
                f(k)
            except BaseException as e:  # noqa: B902 — re-raised in the calling thread
                errors.append(e)
        threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    return {"np": np, "blockrnn": blockrnn, "kw": kw, "fn": opinputs.op_function,
            "bcast": bcast, "time": time, "small_lstm": small_lstm, "run_threads": run_threads}


def _child(code, conn):
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    try:
        env = _child_env()
        exec(compile(code, "<probe>", "exec"), env)
        conn.send(("ok", ""))
    except BaseException as e:  # noqa: B902 — the outcome is the exception itself
        conn.send((type(e).__name__, str(e) or traceback.format_exc(limit=2)))
    finally:
        conn.close()


_ctx = None


def _context():
    global _ctx
    if _ctx is None:
        # A fork server that has imported numpy and blockrnn but never run an op (so no OpenMP
        # team exists when it forks): each probe is a fresh, cheap child.
        _ctx = mp.get_context("forkserver")
        sys.path.insert(0, HERE)
        _ctx.set_forkserver_preload(["numpy", "blockrnn", "opinputs", "hostile_probes"])
    return _ctx


@dataclasses.dataclass
class Outcome:
    probe: Probe
    got: str       # "ok", an exception name, "crash (signal N)", "exit N", "hang", "no report"
    message: str
    seconds: float

    @property
    def passed(self):
        if self.got != self.probe.expect:
            return False
        return all(s in self.message for s in self.probe.contains)


def run_probe(probe):
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(probe.code, child))
    t0 = time.monotonic()
    p.start()
    child.close()
    got, message = "no report", ""
    if parent.poll(TIME_LIMIT_S):
        try:
            got, message = parent.recv()
        except EOFError:
            pass
    p.join(max(0.0, TIME_LIMIT_S - (time.monotonic() - t0)) + 1.0)
    if p.is_alive():
        p.kill()
        p.join()
        got = "hang" if got == "no report" else got
    elif p.exitcode and p.exitcode < 0:
        got = f"crash (signal {-p.exitcode})"
    elif p.exitcode and got == "no report":
        got = f"exit {p.exitcode}"
    return Outcome(probe, got, message, time.monotonic() - t0)


def run_all(selected=None, jobs=2):
    from concurrent.futures import ThreadPoolExecutor
    todo = [p for p in probes() if selected is None or selected(p)]
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(run_probe, todo))


def markdown(outcomes):
    classes = {}
    for o in outcomes:
        c = classes.setdefault(o.probe.cls, [0, 0, 0.0])
        c[0] += 1
        c[1] += o.passed
        c[2] = max(c[2], o.seconds)
    lines = ["| class | probes | as expected | slowest (s) |", "|---|---|---|---|"]
    for cls, (n, ok, slow) in classes.items():
        lines.append(f"| {cls} | {n} | {ok} | {slow:.1f} |")
    total = sum(c[0] for c in classes.values())
    passed = sum(c[1] for c in classes.values())
    lines.append(f"| **all** | **{total}** | **{passed}** | |")
    return "\n".join(lines)


if __name__ == "__main__":
    outcomes = run_all()
    for o in outcomes:
        if not o.passed:
            print(f"FAIL [{o.probe.cls}] {o.probe.name}: expected {o.probe.expect} "
                  f"{o.probe.contains}, got {o.got}: {o.message[:300]}")
    if "--markdown" in sys.argv:
        import platform
        import blockrnn
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                    if line.startswith("model name")), platform.processor())
        print(f"Outcomes on {cpu}, {os.cpu_count()} cores, ISA path {blockrnn.get_isa()} "
              f"(`python tests/python/hostile_probes.py --markdown`):\n")
    print(markdown(outcomes))
    sys.exit(0 if all(o.passed for o in outcomes) else 1)
