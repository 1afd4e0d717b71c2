"""`tf.raw_ops`-compatible functions: `getattr(blockrnn.raw_ops, op)(**kw)` can replace
`getattr(tf.raw_ops, op)(**kw)` for every op blockrnn implements (see `__all__`)."""
from ._opgen import build as _build

globals().update(_build(""))
__all__ = sorted(_build(""))
