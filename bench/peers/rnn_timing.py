"""What the Python RNN benchmarks (bench/peers/tf_rnn.py, bench/blockrnn_rnn.py) measure the
same way: the timed repetitions of forward and forward + backward, and resident memory."""
import resource
import time


def time_fwd_bwd(fwd, bwd, reps):
    """(fwd_ms, fwdbwd_ms): per repetition, the time of `acts = fwd()` and of that plus
    `bwd(acts)`, in ms. Only one repetition's tensors are alive at a time."""
    fwd_ms, fwdbwd_ms = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        acts = fwd()
        t1 = time.perf_counter()
        grads = bwd(acts)
        t2 = time.perf_counter()
        fwd_ms.append((t1 - t0) * 1e3)
        fwdbwd_ms.append((t2 - t0) * 1e3)
        del acts, grads
    return fwd_ms, fwdbwd_ms


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def current_rss_mb():
    """Resident set size now (VmRSS), in MiB (the peak where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return peak_rss_mb()
