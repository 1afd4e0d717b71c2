"""Builds the Python functions of `raw_ops` and `gradients` from the C++ op table.

Each generated function takes TensorFlow's keyword names (keyword-only, `name=None` accepted
and ignored), converts each argument once to a numpy array without copying it (anything that
is not a real floating array of the op's dtype is the library's InvalidArgumentError naming the
op and the argument; an array in device memory is UnimplementedError naming it), calls the core with the GIL released, and returns a namedtuple of
TensorFlow's output names. Shapes, dtypes and memory are validated by the core before any
copy (strided or byte-swapped inputs are gathered there, counted against the memory limit).

bfloat16 is numpy arrays of `ml_dtypes.bfloat16` (numpy has no bfloat16 of its own): they reach
the core as uint16 views of their bits with a flag, and bfloat16 outputs come back as uint16 bits
viewed as `ml_dtypes.bfloat16`, without copies either way.
"""
import collections
import inspect
import numbers
import sys

import numpy as np

from . import _core, _cuda
from ._device import device_of, device_message

_INT_INPUTS = {"seq_len_max", "seq_lengths"}
# blockrnn's optional inputs (trailing in the op table): keyword default None = not given.
_OPTIONAL_INPUTS = {"seq_lengths"}
_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1
_NOT_FLOAT = {"b": "bool", "i": "integer", "u": "unsigned integer", "c": "complex",
              "O": "Python object", "U": "string", "S": "bytes", "M": "datetime",
              "m": "timedelta", "V": "structured or opaque"}


def _bfloat16():
    """numpy's dtype of ml_dtypes.bfloat16 once ml_dtypes is loaded (an array of it cannot exist
    before), else None."""
    m = sys.modules.get("ml_dtypes")
    return np.dtype(m.bfloat16) if m is not None else None


def _is_bfloat16(dtype):
    bf16 = _bfloat16()
    return bf16 is not None and dtype.newbyteorder("=") == bf16


def _is_float(dtype):
    """A floating dtype the ops take: float16, bfloat16, float32 or float64 (any byte order)."""
    return (dtype.kind == "f" and dtype.itemsize in (2, 4, 8)) or _is_bfloat16(dtype)


def _error(op, message):
    return _core.InvalidArgumentError(f"{op}: {message}")


def _to_array(op, name, v):
    """numpy's view of `v` without a copy where it has one; the library's error otherwise. An
    array in device memory (a CUDA tensor, a CuPy array) is UnimplementedError naming it, never
    copied (_device.py)."""
    if isinstance(v, np.ndarray):
        return v
    device = device_of(v)
    if device is not None:
        raise _core.UnimplementedError(device_message(op, name, device))
    if v is None or isinstance(v, (str, bytes, dict, set)):
        raise _error(op, f"{name} must be an array of numbers, got {type(v).__name__}")
    try:
        return np.asarray(v)
    except ValueError as e:
        if "inhomogeneous" in str(e):
            raise _error(op, f"{name} is a ragged nested sequence (its rows differ in length); "
                             "it must be a rectangular array") from None
        raise _error(op, f"{name} cannot be read as an array: {e}") from None
    except TypeError as e:
        raise _error(op, f"{name} cannot be read as an array: {e}") from None


def _int64_values(op, name, a, integer, in_range):
    """Array `a` as int64: a dtype that is not an integer is refused ("<name> must be <integer>,
    got <dtype>"), and so is an unsigned value past int64 ("<name> must <in_range>, got
    <value>")."""
    if a.dtype.kind not in "iu":
        what = _NOT_FLOAT.get(a.dtype.kind, str(a.dtype)) if a.dtype.kind != "f" else str(a.dtype)
        raise _error(op, f"{name} must be {integer}, got {what}")
    if a.dtype.kind == "u" and a.size and int(a.max()) > _INT64_MAX:
        raise _error(op, f"{name} must {in_range}, got {int(a.max())}")
    return a.astype(np.int64, copy=False)


def _seq_len_max(op, name, v):
    """seq_len_max as a 0-d int64 array; any integer outside int64 is refused with its value."""
    a = _to_array(op, name, v)
    if a.dtype.kind == "O" and a.ndim == 0 and isinstance(a.item(), numbers.Integral) and \
            not isinstance(a.item(), bool):
        value = int(a.item())  # a Python int beyond int64
        raise _error(op, f"{name} must be an int64 between 0 and time_len of x, got {value}")
    return _int64_values(op, name, a, "an integer (int64)",
                         "be an int64 between 0 and time_len of x")


def _seq_lengths(op, name, v):
    """seq_lengths as an int64 array: any integer array (int32, int64, unsigned, a list of ints, a
    CPU torch tensor) converts to int64 when its values fit; anything else is refused. Its shape
    and values (0 <= L_b <= time_len) are validated by the core."""
    a = _to_array(op, name, v)
    a = _int64_values(op, name, a, "an integer array (int64 or int32)",
                      "hold int64 values between 0 and time_len of x")
    # Contiguous (a [B] copy at most): the core reads the values while it validates.
    return a if a.flags.c_contiguous else a.copy(order="C")


def _float_input(op, name, v, common):
    a = _to_array(op, name, v)
    kind = a.dtype.kind
    from_list = not isinstance(v, np.ndarray)
    if from_list and kind in "iuf" and common is not None:
        return a.astype(common)  # lists of numbers take the dtype of the array arguments
    if _is_float(a.dtype):
        return a
    if from_list and kind == "O":
        flat = a.ravel().tolist()
        if any(e is None for e in flat):
            raise _error(op, f"{name} contains None; it must hold numbers only")
        bad = next((e for e in flat if isinstance(e, bool) or not isinstance(e, numbers.Real)),
                   None)
        if bad is not None:
            raise _error(op, f"{name} must hold numbers only, got {type(bad).__name__}")
    what = _NOT_FLOAT.get(kind, "")
    raise _error(op, f"{name} must be float16, bfloat16, float32 or float64, got {a.dtype}"
                     + (f" ({what})" if what and what not in str(a.dtype) else ""))


def _convert_inputs(op, names, values):
    """Every input once, without copies: the core validates the whole call (shapes, dtypes,
    memory) before it copies anything (strided arrays are gathered there). Arrays in the other
    byte order are passed as native-order views of the same bytes with a flag; the core swaps
    them while copying."""
    common = None
    for name, v in zip(names, values):
        if name not in _INT_INPUTS and isinstance(v, np.ndarray) and _is_float(v.dtype):
            common = v.dtype.newbyteorder("=")
            break
    arrays, swapped, bfloat16 = [], [], []
    for name, v in zip(names, values):
        if name == "seq_lengths":
            a = _seq_lengths(op, name, v)
        elif name in _INT_INPUTS:
            a = _seq_len_max(op, name, v)
        else:
            a = _float_input(op, name, v, common)
        swap = not a.dtype.isnative
        if swap:
            a = a.view(a.dtype.newbyteorder("="))
        bf16 = _is_bfloat16(a.dtype)
        if bf16:
            a = a.view(np.uint16)
        arrays.append(a)
        swapped.append(swap)
        bfloat16.append(bf16)
    return arrays, swapped, bfloat16


def _run(op_index, arrays, attrs, swapped, bfloat16):
    """The core's outputs; bfloat16 ones (uint16 bits from the core) viewed as bfloat16.
    `op_index`: the op's position in _core.op_defs(), so the core does not look its name up."""
    outs = _core.run(op_index, arrays, attrs, swapped, bfloat16)
    if any(bfloat16):
        outs = [o.view(_bfloat16()) if o.dtype == np.uint16 else o for o in outs]
    return outs


def _convert_attr(op, attr, kind, value):
    if kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise _error(op, f"attr {attr} must be a bool, got {type(value).__name__}")
        return 1.0 if value else 0.0
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _error(op, f"attr {attr} must be a float, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        shown = str(value) if len(str(value)) <= 24 else f"an integer of {len(str(abs(value)))} digits"
        raise _error(op, f"attr {attr} must be representable as float32 (|value| <= "
                         f"3.4028235e+38), got {shown}") from None


def make_op(op_index, op_name, inputs, attrs, outputs, public_name=None, doc=None):
    public_name = public_name or op_name
    result_type = collections.namedtuple(public_name.replace(".", "_"), outputs)
    required = (set(inputs) - _OPTIONAL_INPUTS) | \
        {a for a, _, has_default, _ in attrs if not has_default}
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
        # Optional inputs left out (or None) are not passed: they are the op table's last.
        given = [n for n in inputs if not (n in _OPTIONAL_INPUTS and kwargs.get(n) is None)]
        values = [kwargs[n] for n in given]
        if _cuda.available() and any(_cuda.is_device(v) for v in values):
            # A build with the CUDA backend: device arrays, zero-copy on the caller's stream.
            attr_values = {a: _convert_attr(op_name, a, attr_kinds[a], kwargs[a])
                           for a in attr_kinds if a in kwargs}
            return result_type(*_cuda.run(op_index, op_name, given, values, attr_values))
        arrays, swapped, bfloat16 = _convert_inputs(op_name, given, values)
        attr_values = {a: _convert_attr(op_name, a, attr_kinds[a], kwargs[a])
                       for a in attr_kinds if a in kwargs}
        return result_type(*_run(op_index, arrays, attr_values, swapped, bfloat16))

    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY,
                                default=None if n in _OPTIONAL_INPUTS else inspect.Parameter.empty)
              for n in inputs]
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
    for index, (name, inputs, attrs, outputs) in enumerate(_core.op_defs()):
        if prefix:
            if not name.startswith(prefix):
                continue
            short = name[len(prefix):]
        else:
            if "." in name:
                continue
            short = name
        out[short] = make_op(index, name, inputs, attrs, outputs, public_name=name)
    return out
