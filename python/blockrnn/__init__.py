"""blockrnn: TensorFlow's fused RNN block ops, exactly, and fast.

    import blockrnn
    out = blockrnn.raw_ops.GRUBlockCell(x=x, h_prev=h, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c)
    grads = blockrnn.gradients.GRUBlockCell(x=x, ..., r=out.r, u=out.u, c=out.c, d_h=d_h)

`raw_ops` mirrors `tf.raw_ops` (keyword names, attr defaults, output names); `gradients`
holds the full backward of each cell op. A trained model (Keras, PyTorch) converted with
`python -m blockrnn.convert SRC OUT` runs with `blockrnn.load_model(OUT).forward(x)`
(docs/bring-your-model.md). Errors are `blockrnn.InvalidArgumentError` (a
ValueError) with the same message as the C++ library.
"""
import numbers

import numpy as np

from . import _core
from ._core import (InternalError, InvalidArgumentError, ResourceExhaustedError,
                    UnimplementedError)
from . import raw_ops, gradients, layers, model
from .model import Model, load_model, load_tensor_file
from ._cuda import DeviceArray, cuda_stream, to_device

__version__ = _core.version()


def has_cuda() -> bool:
    """Whether this build computes on CUDA device arrays (an extension built with
    BLOCKRNN_PYTHON_CUDA, docs/cuda.md); the default wheel is CPU-only."""
    return _core.cuda_backend is not None


def max_threads() -> int:
    """The largest thread count this machine accepts: 4 x the cores this process may use, at
    least 16, at most 1024."""
    return _core.max_threads()


def set_num_threads(n: int) -> None:
    """Threads used by every op, an integer in 1..max_threads() (default: BLOCKRNN_NUM_THREADS,
    else OMP_NUM_THREADS, else the cores this process may use); anything else is an
    InvalidArgumentError. Results are bitwise the same at every count; the host's OpenMP
    settings are never changed. This is what one call asks for: all calling threads share one
    process-wide budget of worker threads, and a call that the budget (or the system) cannot
    give them runs with fewer, with the same bits (docs/reliability.md, "Thread budget")."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise InvalidArgumentError(
            f"set_num_threads: n must be an integer in [1, {max_threads()}], got {n!r}")
    if not 1 <= int(n) <= max_threads():
        raise InvalidArgumentError(
            f"set_num_threads: n must be in [1, {max_threads()}], got {int(n)}")
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    return _core.get_num_threads()


def _is_byte_count(nbytes) -> bool:
    """An integer (not a bool) in [0, 2**63): what the byte limits below take."""
    return not isinstance(nbytes, (bool, np.bool_)) and isinstance(nbytes, numbers.Integral) \
        and 0 <= int(nbytes) < 2**63


def set_memory_limit(nbytes) -> None:
    """Refuse (ResourceExhaustedError, before allocating anything) any call whose outputs,
    workspace and input copies together need more than `nbytes`; None or 0 restores the default:
    what this machine can hold (physical memory, RLIMIT_AS/RLIMIT_DATA and the cgroup's
    memory.max, whichever is smallest)."""
    if nbytes is None:
        nbytes = 0
    if not _is_byte_count(nbytes):
        raise InvalidArgumentError(
            f"set_memory_limit: nbytes must be an integer in [0, 2**63), got {nbytes!r}")
    _core.set_memory_limit(int(nbytes))


def get_memory_limit() -> int:
    """The memory limit in bytes (see set_memory_limit)."""
    return _core.get_memory_limit()


def set_workspace_cache_limit(nbytes) -> None:
    """The most bytes of one-shot op workspace kept between calls, over all calling threads:
    each thread keeps its last workspace for its next call instead of mapping and faulting in
    tens of MB afresh (a layer object owns its own). Default 256 MiB; 0 keeps none; None
    restores the default. Lowering it frees this thread's buffer when it no longer fits."""
    if nbytes is None:
        nbytes = -1
    elif not _is_byte_count(nbytes):
        raise InvalidArgumentError(
            f"set_workspace_cache_limit: nbytes must be an integer in [0, 2**63) or None, "
            f"got {nbytes!r}")
    _core.set_workspace_cache_limit(int(nbytes))


def get_workspace_cache_limit() -> int:
    """The workspace cache limit in bytes (see set_workspace_cache_limit)."""
    return _core.get_workspace_cache_limit()


def set_isa(name: str) -> None:
    """Force the CPU kernels' instruction-set path: "avx512", "avx2", "baseline" or "auto"
    ("" returns to the default: BLOCKRNN_ISA, else the best this CPU has). A path the CPU
    lacks is an InvalidArgumentError."""
    _core.set_isa(str(name))


def get_isa() -> str:
    """The instruction-set path the CPU kernels use now."""
    return _core.get_isa()


def set_force_reference(on: bool) -> None:
    """Route every op through the plain-loop reference implementation (for testing)."""
    _core.set_force_reference(bool(on))


def force_reference() -> bool:
    return _core.force_reference()


__all__ = ["raw_ops", "gradients", "layers", "model", "Model", "load_model", "load_tensor_file", "InvalidArgumentError", "UnimplementedError",
           "ResourceExhaustedError", "InternalError", "set_num_threads", "get_num_threads", "max_threads",
           "set_memory_limit", "get_memory_limit",
           "set_workspace_cache_limit", "get_workspace_cache_limit",
           "set_isa", "get_isa",
           "set_force_reference", "force_reference", "has_cuda", "cuda_stream", "to_device",
           "DeviceArray", "__version__"]
