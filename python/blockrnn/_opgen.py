"""Builds the Python functions of `raw_ops` and `gradients` from the C++ op table.

Each generated function takes TensorFlow's keyword names (keyword-only, `name=None` accepted
and ignored), converts its arguments to C-contiguous numpy arrays (any layout is read
correctly, never misread), calls the core with the GIL released, and returns a namedtuple of
TensorFlow's output names. Validation is the core's.
"""
import collections
import inspect
import numbers

import numpy as np

from . import _core

_FLOAT_DTYPES = (np.float16, np.float32, np.float64)
_INT_INPUTS = {"seq_len_max"}


def _convert_inputs(op, names, values):
    arrays = []
    # Non-array arguments (lists, scalars) take the dtype of the array arguments.
    common = None
    for name, v in zip(names, values):
        if name not in _INT_INPUTS and isinstance(v, np.ndarray) and v.dtype in _FLOAT_DTYPES:
            common = v.dtype
            break
    for name, v in zip(names, values):
        if name in _INT_INPUTS:
            a = np.asarray(v)
            if a.dtype.kind not in "iu":
                raise _core.InvalidArgumentError(
                    f"{op}: {name} must be an integer (int64), got {a.dtype}")
            a = a.astype(np.int64)
        elif isinstance(v, np.ndarray) or common is None:
            a = np.asarray(v)
            if a.dtype.kind in "iub":
                raise _core.InvalidArgumentError(
                    f"{op}: {name} must be float16, float32 or float64, got {a.dtype}")
        else:
            a = np.asarray(v, dtype=common)
        # (np.ascontiguousarray would turn a 0-d array into 1-d.)
        arrays.append(a if a.flags.c_contiguous else a.copy(order="C"))
    return arrays


def _convert_attr(op, attr, kind, value):
    if kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise _core.InvalidArgumentError(
                f"{op}: attr {attr} must be a bool, got {type(value).__name__}")
        return 1.0 if value else 0.0
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _core.InvalidArgumentError(
            f"{op}: attr {attr} must be a float, got {type(value).__name__}")
    return float(value)


def make_op(op_name, inputs, attrs, outputs, public_name=None, doc=None):
    public_name = public_name or op_name
    result_type = collections.namedtuple(public_name.replace(".", "_"), outputs)
    required = set(inputs) | {a for a, _, has_default, _ in attrs if not has_default}
    attr_kinds = {a: kind for a, kind, _, _ in attrs}

    def fn(**kwargs):
        kwargs.pop("name", None)
        unknown = set(kwargs) - set(inputs) - set(attr_kinds)
        if unknown:
            raise TypeError(f"{public_name}() got unexpected keyword argument(s) "
                            f"{', '.join(sorted(unknown))}")
        missing = [n for n in list(inputs) + list(attr_kinds) if n in required
                   and n not in kwargs]
        if missing:
            raise TypeError(f"{public_name}() missing required keyword argument(s): "
                            f"{', '.join(missing)}")
        arrays = _convert_inputs(op_name, inputs, [kwargs[n] for n in inputs])
        attr_values = {a: _convert_attr(op_name, a, attr_kinds[a], kwargs[a])
                       for a in attr_kinds if a in kwargs}
        return result_type(*_core.run(op_name, arrays, attr_values))

    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in inputs]
    for a, kind, has_default, default in attrs:
        d = (bool(default) if kind == "bool" else default) if has_default else \
            inspect.Parameter.empty
        params.append(inspect.Parameter(a, inspect.Parameter.KEYWORD_ONLY, default=d))
    params.append(inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None))
    fn.__signature__ = inspect.Signature(params)
    fn.__name__ = public_name.split(".")[-1]
    fn.__qualname__ = public_name
    fn.__doc__ = doc or (f"{public_name}({', '.join(inputs)}) -> ({', '.join(outputs)}); "
                         "see docs/ops.md.")
    fn.Output = result_type
    return fn


def build(prefix):
    """Functions for every op whose name starts with `prefix` (prefix stripped)."""
    out = {}
    for name, inputs, attrs, outputs in _core.op_defs():
        if prefix:
            if not name.startswith(prefix):
                continue
            short = name[len(prefix):]
        else:
            if "." in name:
                continue
            short = name
        out[short] = make_op(name, inputs, attrs, outputs, public_name=name)
    return out
