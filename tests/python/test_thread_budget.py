"""The process-wide thread budget (docs/reliability.md, "Thread budget") from Python: 12 Python
threads (the ops release the GIL) call the same sequence ops at once, each asking for many
OpenMP threads, under an address-space limit that fits about one team of 64 MiB worker
stacks. Before the budget, libgomp ended such a process ("Thread creation failed", exit status
1). Each case runs in a child process under a hard time limit, so that an ended process is a
failed test rather than a dead test runner."""
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = textwrap.dedent("""
    import resource, sys, threading
    import numpy as np
    import blockrnn
    from opinputs import make_kwargs, op_function

    callers, threads, teams = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    threads = min(threads, blockrnn.max_threads())
    rng = np.random.default_rng(25)
    # Big enough that the GEMMs and the time loop ask for every thread.
    cases = [(op_function(op), make_kwargs(op, rng, T=3, B=64, I=64, H=128))
             for op in ("BlockLSTM", "BlockGRU")]
    blockrnn.set_num_threads(1)
    serial = [fn(**kw) for fn, kw in cases]

    counts = {"same": 0, "exhausted": 0, "wrong": 0}
    lock = threading.Lock()
    ready = threading.Barrier(callers + 1)
    go = threading.Event()

    def caller():
        warm = np.ones(16)  # this thread's malloc arena, before the limit
        ready.wait()
        go.wait()
        for _ in range(2):
            for (fn, kw), expected in zip(cases, serial):
                try:
                    out = fn(**kw)
                    ok = all(np.array_equal(getattr(out, f), getattr(expected, f))
                             for f in expected._fields)
                    key = "same" if ok else "wrong"
                except blockrnn.ResourceExhaustedError:
                    key = "exhausted"
                except Exception as e:  # anything else is a failure, reported
                    print("unexpected:", type(e).__name__, e, flush=True)
                    key = "wrong"
                with lock:
                    counts[key] += 1
        del warm

    pool = [threading.Thread(target=caller) for _ in range(callers)]
    for t in pool:
        t.start()
    ready.wait()
    # The callers exist; the limit leaves room for `teams` teams of 64 MiB worker stacks (a
    # worker's malloc arena takes up to 128 MiB more while glibc maps it: 3 teams of stacks are
    # one team of workers with their arenas).
    mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    limit = mapped + int(teams * (threads - 1) * (64 << 20))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    blockrnn.set_num_threads(threads)
    go.set()
    for t in pool:
        t.join()
    print(counts, flush=True)
    sys.exit(2 if counts["wrong"] else 0 if counts["same"] else 3)
""")


@pytest.mark.parametrize("threads,teams", [(3, 1.0), (7, 1.0), (10**6, 1.0), (10**6, 0.25),
                                           (10**6, 3.0)],
                         ids=["3-threads", "7-threads", "max-threads", "max-threads-quarter-team",
                              "max-threads-with-arenas"])
def test_concurrent_python_callers_under_an_address_space_for_one_team(threads, teams):
    # glibc's malloc arenas as it makes them (no MALLOC_ARENA_MAX): the budget counts their room
    # (tests/cpp/test_thread_budget.cc says more).
    env = dict(os.environ, OMP_STACKSIZE="64M",
               PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    for name in ("GOMP_STACKSIZE", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"):
        env.pop(name, None)
    # 60 s: a run takes a few seconds even on two busy cores; a hang is a failure.
    r = subprocess.run([sys.executable, "-c", CHILD, "12", str(threads), str(teams)], env=env,
                       capture_output=True, text=True, timeout=60)
    output = r.stdout + r.stderr
    assert r.returncode == 0, (
        f"exit status {r.returncode} (1: libgomp ended the process; 2: a wrong result or "
        f"error; 3: every call refused; negative: a signal):\n{output}")
