"""Shared fixtures for the Python suite.

TensorFlow (tensorflow-cpu, pinned in scripts/requirements-test.txt) is the oracle. Every
randomized test draws from a seed that is printed on failure; replay a case with
`pytest -k <test> --blockrnn-seed N`.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

try:
    # torch's compiler stack (and with it triton, when installed) must be loaded before
    # TensorFlow: the two wheels' LLVM copies abort the process in the other order
    # (docs/torch.md). blockrnn.torch's custom ops load it on their first call.
    import torch._dynamo  # noqa: E402,F401
except ImportError:
    pass

import blockrnn  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--blockrnn-seed", type=int, default=None,
                     help="base seed of the randomized tests (default: fixed per test)")


@pytest.fixture(scope="session")
def tf():
    import tensorflow as tf
    try:
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        # A test that imported TensorFlow itself already ran an op, which fixes the setting;
        # it only schedules independent ops, and no result depends on it.
        pass
    return tf


@pytest.fixture(params=[False, True], ids=["fast", "reference"])
def path(request):
    """Runs a test on the fast path and with the reference forced (every op has both)."""
    saved = blockrnn.force_reference()
    blockrnn.set_force_reference(request.param)
    yield request.param
    blockrnn.set_force_reference(saved)


@pytest.fixture
def base_seed(request):
    return request.config.getoption("--blockrnn-seed")


SIZES = [0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 3, 5, 13, 37, 97, 127, 257, 509]


def draw_size(rng, allow_zero=True, cap=512):
    s = int(rng.choice([v for v in SIZES if v <= cap and (allow_zero or v > 0)]))
    return s


def load_golden_family(name):
    """tools/golden/<name>.py: the TensorFlow oracle (inputs and stepped reference) that also
    makes the golden files of the C++ suite."""
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "golden", name + ".py")
    spec = importlib.util.spec_from_file_location("golden_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sequence_cases(group, count, gates, path, base_seed, default_seed):
    """The randomized cases of `group` of a sequence-op test against TensorFlow, drawn from seed
    (base_seed, else default_seed) + group: yields (seed, rng, case, T, B, I, H, S) for `count`
    cases. T is uniform in [1, 100] half of the time, else one of the extremes; B = 0 for case 0
    and 1 for case 1; sizes from SIZES, halved until T·B·(I+H)·gates·H multiply-adds fit the
    budget (2e6 on the plain-loop reference path, 3e7 on the fast path); seq_len_max S is one of
    0, 1, T − 1, T. The rest of a case draws from the same rng."""
    seed = (base_seed if base_seed is not None else default_seed) + group
    rng = np.random.default_rng(seed)
    budget = 2e6 if path else 3e7
    for case in range(count):
        T = int(rng.integers(1, 101)) if rng.random() < 0.5 else int(rng.choice([1, 2, 3, 100]))
        B = 0 if case == 0 else 1 if case == 1 else draw_size(rng, cap=64)
        I, H = draw_size(rng, cap=128), draw_size(rng, cap=128)
        while T * max(B, 1) * (I + H) * gates * H > budget:
            H, I = max(H // 2, 1), I // 2
        S = int(rng.choice([0, 1, T - 1, T]))
        yield seed, rng, case, T, B, I, H, S


def seq_len_max_validation(T):
    """(argument, bad value, message without the op prefix) for the seq_len_max of a sequence op
    whose x has time_len T: not a scalar, outside [0, T], not an integer."""
    shapes = [(2,), (13, 11, 0)]
    return [("seq_len_max", np.zeros(s, np.int64),
             f"seq_len_max must be a scalar (rank 0), got shape {list(s)}") for s in shapes] + \
        [("seq_len_max", S, f"seq_len_max must be between 0 and {T} (time_len of x), got {S}")
         for S in (T + 1, -1, -2)] + \
        [("seq_len_max", v, "seq_len_max must be an integer (int64), got float64")
         for v in (1.0, 2.0)]


def assert_close(got, want, rtol, atol, what, seed):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape} (seed {seed})"
    err = np.abs(got - want) - (atol + rtol * np.abs(want))
    if err.size and not np.all(err <= 0) or np.isnan(got).any() != np.isnan(want).any():
        k = int(np.nanargmax(err)) if err.size else 0
        pytest.fail(f"{what}: element {np.unravel_index(k, got.shape)}: {got.flat[k]!r} vs "
                    f"{want.flat[k]!r} (rtol {rtol}, atol {atol}); replay with "
                    f"--blockrnn-seed {seed}")
