"""blockrnn: TensorFlow's fused RNN block ops, exactly, and fast.

    import blockrnn
    out = blockrnn.raw_ops.GRUBlockCell(x=x, h_prev=h, w_ru=w_ru, w_c=w_c, b_ru=b_ru, b_c=b_c)
    grads = blockrnn.gradients.GRUBlockCell(x=x, ..., r=out.r, u=out.u, c=out.c, d_h=d_h)

`raw_ops` mirrors `tf.raw_ops` (keyword names, attr defaults, output names); `gradients`
holds the full backward of each cell op. Errors are `blockrnn.InvalidArgumentError` (a
ValueError) with the same message as the C++ library.
"""
from . import _core
from ._core import (InternalError, InvalidArgumentError, ResourceExhaustedError,
                    UnimplementedError)
from . import raw_ops, gradients, layers

__version__ = _core.version()


def set_num_threads(n: int) -> None:
    """Threads used by every op, 1..4096 (default: BLOCKRNN_NUM_THREADS, else OMP_NUM_THREADS,
    else the cores this process may use). Results are bitwise the same at every count; the
    host's OpenMP settings are never changed."""
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    return _core.get_num_threads()


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


__all__ = ["raw_ops", "gradients", "layers", "InvalidArgumentError", "UnimplementedError",
           "ResourceExhaustedError", "InternalError", "set_num_threads", "get_num_threads",
           "set_isa", "get_isa",
           "set_force_reference", "force_reference", "__version__"]
