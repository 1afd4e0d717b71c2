"""The full backward of each cell op: the gradient kernel plus the parameter gradients that
TensorFlow's registered Python gradient computed around it (docs/ops.md).

Each takes the forward op's inputs and attrs, its outputs, and the upstream gradients, and
returns a namedtuple with one gradient per forward input, named after that input."""
from ._opgen import build as _build

globals().update(_build("gradients."))
__all__ = sorted(_build("gradients."))
