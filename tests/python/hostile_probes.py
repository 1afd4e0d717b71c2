"""The hostile-input probes (issue 14): a table of adversarial calls, each run in a child
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

    # --- Long calls stop on a signal (Ctrl-C) at a step boundary.
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
                "t0 = time.monotonic()\n"
                "try:\n"
                f"    fn('{op}')(**a)\n"
                "    raise AssertionError('finished before the signal')\n"
                "except KeyboardInterrupt:\n"
                "    assert time.monotonic() - t0 < 3, time.monotonic() - t0\n"
                "    raise\n", "KeyboardInterrupt")
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

    return {"np": np, "blockrnn": blockrnn, "kw": kw, "fn": opinputs.op_function,
            "bcast": bcast, "time": time}


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
