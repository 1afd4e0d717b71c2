"""Every op the generic Python tester (test_ops.py) checks, read from tests/data/op_table.json —
the one table it shares with the C++ tester (tests/cpp/op_table.h): its forward op (for a grad
op), its TensorFlow twin in tf.raw_ops ("" where TensorFlow has none), whether its outputs are
full gradients (checked by float64 finite differences), the attr values to draw, and the float32
tolerance against TensorFlow with its reason (docs/tolerances.md). Input shapes come from the
names (opinputs.py); an input the shape table does not know is an optional trailing input, left
out. Adding an op is one row of the JSON file."""
import dataclasses
import inspect
import json
import os

import numpy as np

import blockrnn
from opinputs import _shape, op_function

with open(os.path.join(os.path.dirname(__file__), "..", "data", "op_table.json")) as _f:
    TABLE = json.load(_f)

# TensorFlow's backward passes the clip straight through, which is not the derivative where it
# clips: finite differences run with clipping off (the table's finite_differences.attrs).
FD_ATTRS = TABLE["finite_differences"]["attrs"]


def _tf_tolerance(family):
    """(rtol, atol · max(1, max|want|)) of float32 against TensorFlow float32."""
    t = TABLE["tolerances"]["tensorflow_float32"][family]
    return (t["rtol"], t["atol"])


def derived_tolerance(dtype, K, T, op=None):
    """The table's rule for a result in `dtype` ("float16", "bfloat16", "float32", "float64")
    against the float64 reference on the same inputs (tests/cpp/op_table.h applies the same):
    tol = c·log2(max(2, K·T))·eps, K = I + H, T the steps; rtol = tol + the 16-bit storage
    rounding, atol = tol, plus for bfloat16 on a row with bf16_products = P (`op`) the table's
    per_product bound times P·T + 1; nmse = (rtol + atol)²."""
    t = TABLE["tolerances"]
    eps = t["eps"]["float64" if dtype == "float64" else "float32"]
    tol = t["c"] * np.log2(max(2.0, float(K) * float(T))) * eps
    rtol = tol + t["storage"].get(dtype, 0.0)
    atol = tol
    if dtype == "bfloat16" and op is not None and ROWS[op].bf16_products:
        atol += t["bf16_products"]["per_product"] * (ROWS[op].bf16_products * max(int(T), 1) + 1)
    return {"rtol": rtol, "atol": atol, "nmse": (rtol + atol) ** 2}


@dataclasses.dataclass(frozen=True)
class OpRow:
    op: str
    forward: str = ""            # for a grad op: the op whose inputs and outputs it takes
    tf: str = ""                 # its name in tf.raw_ops ("" where TensorFlow has none)
    full_gradient: bool = False  # outputs are d loss / d forward inputs
    attrs: dict = dataclasses.field(default_factory=dict)
    tol: tuple = (0.0, 0.0)
    bf16_products: int = 0  # recurrent bfloat16 products in sequence per step (0: none)


OPS = [OpRow(r["op"], r.get("forward", ""), r.get("tf", ""), r.get("full_gradient", False),
             dict(TABLE["attr_sets"][r["attrs"]]) if "attrs" in r else {},
             _tf_tolerance(r["tolerance"]), r.get("bf16_products", 0))
       for r in TABLE["ops"]]
ROWS = {r.op: r for r in OPS}

FORWARD_INPUTS = {"seq_len_max", "x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b",
                  "w_ru", "w_c", "b_ru", "b_c", "w_i", "w_h", "b_i", "b_h"}


def upstream_of(name):
    """The forward output an upstream-gradient input stands for: h_grad, d_h -> h."""
    if name.startswith("d_"):
        return name[2:]
    if name.endswith("_grad"):
        return name[:-5]
    return ""


def params(op):
    return inspect.signature(op_function(op)).parameters


def tensor_inputs(op):
    """The op's tensor inputs the tester knows, in order (attrs and optional inputs left out)."""
    names = []
    for p in params(op).values():
        if p.name == "name" or p.default is not inspect.Parameter.empty:
            break
        names.append(p.name)
    return [n for n in names if n != "use_peephole"]


def forward_kwargs(row, fwd, dims, dtype, rng, fd=False):
    T, B, I, H, S = dims
    kw = {}
    for name in tensor_inputs(fwd):
        if name not in FORWARD_INPUTS:
            break  # an optional trailing input
        if name == "seq_len_max":
            kw[name] = np.int64(S)
            continue
        shape = _shape(fwd, name, T, B, I, H)
        scale = 1.0 / np.sqrt(max(I + H, 1)) if name.startswith("w") and len(shape) == 2 else 1.0
        kw[name] = rng.uniform(-scale, scale, size=shape).astype(dtype)
    attrs = {k: v[rng.integers(len(v))] for k, v in row.attrs.items() if k in params(fwd)}
    if fd:
        attrs.update({k: v for k, v in FD_ATTRS.items() if k in attrs})
    return kw, attrs


def make_call(row, dims, dtype, rng, fd=False):
    """(kwargs, attrs, forward attrs) of a consistent call of row.op in dtype."""
    if not row.forward:
        kw, attrs = forward_kwargs(row, row.op, dims, dtype, rng, fd)
        return kw, attrs, attrs
    fkw, fattrs = forward_kwargs(row, row.forward, dims, dtype, rng, fd)
    out = op_function(row.forward)(**fkw, **fattrs)
    outs = dict(zip(out._fields, out))
    T, B, I, H, S = dims
    kw = {}
    for name in tensor_inputs(row.op):
        if name in fkw:
            kw[name] = fkw[name]
        elif name in outs:
            kw[name] = outs[name]
        elif upstream_of(name):
            kw[name] = rng.uniform(-1, 1, size=_shape(row.op, name, T, B, I, H)).astype(dtype)
        else:
            break  # an optional trailing input
    attrs = {k: v for k, v in fattrs.items() if k in params(row.op)}
    if "use_peephole" in params(row.op) and "use_peephole" not in attrs:
        attrs["use_peephole"] = False
    return kw, attrs, fattrs


def random_dims(row, rng):
    sizes = [1, 2, 7, 8, 9, 16, 17, 33]
    seq = row.op.startswith("Block")
    T = int(rng.integers(1, 6)) if seq else 1
    B, I, H = (int(rng.choice(sizes)) for _ in range(3))
    return T, B, I, H, T


__all__ = ["OPS", "ROWS", "OpRow", "derived_tolerance", "make_call", "random_dims", "upstream_of", "tensor_inputs",
           "op_function", "blockrnn"]
