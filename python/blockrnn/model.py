"""blockrnn model files: a trained recurrent stack in one safetensors file, and the Model that
runs it on blockrnn's layer objects (no TensorFlow, no PyTorch).

    model = blockrnn.load_model("model.safetensors")
    y, states = model.forward(x)              # x [T, B, I] time-major
    model.save("copy.safetensors")
    module = model.to_torch()                 # a blockrnn.torch module, where one exists

The file format is docs/model-format.md: the configuration is JSON under the `__metadata__`
key "blockrnn" (format name, version, dtype, input size, one entry per layer with its op, size,
attrs, directions and merge mode) and the weights are the layer objects' own arrays, named
`layers.<l>.<d>.<param>`. Converters from Keras, PyTorch and blockrnn.torch are in
blockrnn.convert.

Reading checks everything before it allocates: the header is parsed here with bounds checks
(header length within the file, every tensor's bytes inside the data section and matching its
dtype and shape, no overlap, no gap), then the configuration, then every tensor against the
configuration. Any problem is an InvalidArgumentError naming the file and the field.

Shape letters: T time steps, B batch, I input size, H hidden size of a layer, D directions.
"""
import json
import math
import numbers
import os
import struct
import threading
import types

import numpy as np

from . import _core, _opgen
from ._core import InvalidArgumentError
from .layers import _check_memory, _float_array, _one_call_at_a_time

__all__ = ["Model", "LayerConfig", "load_model", "FORMAT", "VERSION", "KINDS", "MERGE_MODES"]

FORMAT = "blockrnn-model"
VERSION = 1
METADATA_KEY = "blockrnn"

# kind -> (parameter names in set_weights' order, gates per step). LSTM kinds without
# use_peephole have only the first two.
KINDS = {
    "BlockLSTM": ("w", "b", "wci", "wcf", "wco"),
    "BlockLSTMV2": ("w", "b", "wci", "wcf", "wco"),
    "BlockGRU": ("w_ru", "w_c", "b_ru", "b_c"),
    "BlockGRUResetAfter": ("w_i", "w_h", "b_i", "b_h"),
}
_LSTM_KINDS = ("BlockLSTM", "BlockLSTMV2")
MERGE_MODES = ("concat", "sum", "mul", "ave")
PADDED_OUTPUTS = ("zero", "hold")
_DTYPES = {"float32": ("F32", np.float32), "float64": ("F64", np.float64)}
_ST_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8")}
# Every safetensors dtype name, so that a known-but-unsupported one gets a precise message.
_ST_ALL = ("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32",
           "F32", "F64", "I64", "U64")
# The header is JSON text; the safetensors reference implementation refuses more than 100 MB.
MAX_HEADER_BYTES = 100 * 1000 * 1000
MAX_LAYERS = 4096
MAX_RANK = 8

_CONFIG_KEYS = ("format", "version", "dtype", "input_size", "return_sequences", "masking",
                "layers", "source")
_OPTIONAL_CONFIG_KEYS = ("not_converted",)
_LAYER_KEYS = ("kind", "hidden_size", "directions", "merge", "go_backwards", "padded_output")
_LSTM_KEYS = ("forget_bias", "cell_clip", "use_peephole")


def _fail(where, field, message):
    raise InvalidArgumentError(f"{where}: {field}: {message}")


# ---- the layer configuration -------------------------------------------------------------------

class LayerConfig:
    """One layer of a model file: its op (`kind`), hidden size, attrs and directions.

    kind: "BlockLSTM" (gates i, c, f, o; forget_bias added at run time), "BlockLSTMV2" (gates
      i, f, c, o, PyTorch's; no forget bias), "BlockGRU" (TensorFlow's reset-before GRU),
      "BlockGRUResetAfter" (PyTorch's GRU and Keras' default GRU).
    directions: 1, or 2 (forward and reverse, each example reversed within its own length)
      with merge "concat" (forward first), "sum", "mul" or "ave"; merge is None for 1.
    go_backwards: (1 direction only) the layer reads each example from its last valid step to
      its first, and its output sequence is in reading order: the reverse direction's
      time-ordered output flipped along the whole time axis (Keras' go_backwards).
    padded_output: what the output holds at steps t >= L_b of an example of length L_b < T:
      "zero", or "hold" (the forward direction repeats its output of step L_b - 1; Keras' RNN
      layers with zero_output_for_mask=False).
    forget_bias, cell_clip (None: no clipping), use_peephole: the LSTM kinds' attrs."""

    def __init__(self, kind, hidden_size, *, directions=1, merge=None, go_backwards=False,
                 padded_output="zero", forget_bias=0.0, cell_clip=None, use_peephole=False,
                 name=""):
        self.kind = kind
        self.hidden_size = hidden_size
        self.directions = directions
        self.merge = merge
        self.go_backwards = go_backwards
        self.padded_output = padded_output
        self.forget_bias = forget_bias
        self.cell_clip = cell_clip
        self.use_peephole = use_peephole
        self.name = name

    @property
    def is_lstm(self):
        return self.kind in _LSTM_KINDS

    @property
    def output_size(self):
        """Width of this layer's output: D·H with concat, else H."""
        return self.hidden_size * (2 if self.directions == 2 and self.merge == "concat" else 1)

    def param_names(self):
        names = KINDS[self.kind]
        return names if not self.is_lstm or self.use_peephole else names[:2]

    def param_shapes(self, input_size):
        """{name: shape} of one direction's parameters (the layer objects' set_weights)."""
        I, H = input_size, self.hidden_size
        if self.is_lstm:
            shapes = {"w": (I + H, 4 * H), "b": (4 * H,)}
            if self.use_peephole:
                shapes.update(wci=(H,), wcf=(H,), wco=(H,))
            return shapes
        if self.kind == "BlockGRU":
            return {"w_ru": (I + H, 2 * H), "w_c": (I + H, H), "b_ru": (2 * H,), "b_c": (H,)}
        return {"w_i": (I, 3 * H), "w_h": (H, 3 * H), "b_i": (3 * H,), "b_h": (3 * H,)}

    def to_json(self):
        d = {"kind": self.kind, "hidden_size": self.hidden_size, "directions": self.directions,
             "merge": self.merge, "go_backwards": self.go_backwards,
             "padded_output": self.padded_output}
        if self.is_lstm:
            d.update(forget_bias=self.forget_bias, cell_clip=self.cell_clip,
                     use_peephole=self.use_peephole)
        if self.name:
            d["name"] = self.name
        return d

    def __repr__(self):
        return f"LayerConfig({self.to_json()!r})"


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _parse_layer(d, l, where):
    field = f"layers[{l}]"
    if not isinstance(d, dict):
        _fail(where, field, f"must be a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    if kind not in KINDS:
        _fail(where, f"{field}.kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    allowed = set(_LAYER_KEYS) | {"name"} | (set(_LSTM_KEYS) if kind in _LSTM_KINDS else set())
    for key in d:
        if key not in allowed:
            _fail(where, f"{field}.{key}", f"is not a field of a {kind} layer (format version "
                  f"{VERSION})")
    required = _LAYER_KEYS + (_LSTM_KEYS if kind in _LSTM_KINDS else ())
    for key in required:
        if key not in d:
            _fail(where, f"{field}.{key}", "is missing")
    H = d["hidden_size"]
    if not _is_int(H) or H < 1:
        _fail(where, f"{field}.hidden_size", f"must be an integer >= 1, got {H!r}")
    D = d["directions"]
    if not _is_int(D) or D not in (1, 2):
        _fail(where, f"{field}.directions", f"must be 1 or 2, got {D!r}")
    merge = d["merge"]
    if D == 1 and merge is not None:
        _fail(where, f"{field}.merge", f"must be null for a layer of 1 direction, got {merge!r}")
    if D == 2 and merge not in MERGE_MODES:
        _fail(where, f"{field}.merge", f"must be one of {', '.join(MERGE_MODES)} for a layer "
              f"of 2 directions, got {merge!r}")
    gb = d["go_backwards"]
    if not isinstance(gb, bool):
        _fail(where, f"{field}.go_backwards", f"must be true or false, got {gb!r}")
    if gb and D == 2:
        _fail(where, f"{field}.go_backwards", "must be false for a layer of 2 directions (the "
              "second direction is the reverse one)")
    po = d["padded_output"]
    if po not in PADDED_OUTPUTS:
        _fail(where, f"{field}.padded_output", f"must be one of {', '.join(PADDED_OUTPUTS)}, "
              f"got {po!r}")
    name = d.get("name", "")
    if not isinstance(name, str):
        _fail(where, f"{field}.name", f"must be a string, got {name!r}")
    attrs = {}
    if kind in _LSTM_KINDS:
        fb, clip, peep = d["forget_bias"], d["cell_clip"], d["use_peephole"]
        if not _is_number(fb) or not math.isfinite(fb):
            _fail(where, f"{field}.forget_bias", f"must be a finite number, got {fb!r}")
        if kind == "BlockLSTMV2" and fb != 0:
            _fail(where, f"{field}.forget_bias", f"must be 0 for BlockLSTMV2 (the op has no "
                  f"forget bias), got {fb!r}")
        if clip is not None and (not _is_number(clip) or not math.isfinite(clip) or clip <= 0):
            _fail(where, f"{field}.cell_clip", f"must be null (no clipping) or a finite number "
                  f"> 0, got {clip!r}")
        if not isinstance(peep, bool):
            _fail(where, f"{field}.use_peephole", f"must be true or false, got {peep!r}")
        attrs = dict(forget_bias=float(fb), cell_clip=None if clip is None else float(clip),
                     use_peephole=peep)
    return LayerConfig(kind, int(H), directions=int(D), merge=merge, go_backwards=gb,
                       padded_output=po, name=name, **attrs)


def _parse_config(cfg, where):
    """(dtype, input_size, layers, return_sequences, masking, source, not_converted) of the
    configuration dict, every field checked."""
    if not isinstance(cfg, dict):
        _fail(where, METADATA_KEY, f"must be a JSON object, got {type(cfg).__name__}")
    if cfg.get("format") != FORMAT:
        _fail(where, "format", f"must be {FORMAT!r}, got {cfg.get('format')!r}")
    version = cfg.get("version")
    if not _is_int(version) or version != VERSION:
        _fail(where, "version", f"must be {VERSION} (this blockrnn reads version {VERSION}), "
              f"got {version!r}")
    for key in cfg:
        if key not in _CONFIG_KEYS and key not in _OPTIONAL_CONFIG_KEYS:
            _fail(where, key, f"is not a field of format version {VERSION}")
    for key in _CONFIG_KEYS:
        if key not in cfg:
            _fail(where, key, "is missing")
    dtype = cfg["dtype"]
    if dtype not in _DTYPES:
        _fail(where, "dtype", f"must be 'float32' or 'float64', got {dtype!r}")
    I = cfg["input_size"]
    if not _is_int(I) or I < 1:
        _fail(where, "input_size", f"must be an integer >= 1, got {I!r}")
    rs = cfg["return_sequences"]
    if not isinstance(rs, bool):
        _fail(where, "return_sequences", f"must be true or false, got {rs!r}")
    masking = cfg["masking"]
    if masking is not None:
        if not isinstance(masking, dict) or set(masking) != {"mask_value"}:
            _fail(where, "masking", f"must be null or {{\"mask_value\": number}}, got {masking!r}")
        mv = masking["mask_value"]
        if not _is_number(mv) or not math.isfinite(mv):
            _fail(where, "masking.mask_value", f"must be a finite number, got {mv!r}")
        masking = {"mask_value": float(mv)}
    layers = cfg["layers"]
    if not isinstance(layers, list) or not 1 <= len(layers) <= MAX_LAYERS:
        _fail(where, "layers", f"must be a list of 1 to {MAX_LAYERS} layers, got "
              f"{layers if not isinstance(layers, list) else f'{len(layers)} entries'!r}")
    layers = [_parse_layer(d, l, where) for l, d in enumerate(layers)]
    source = cfg["source"]
    if not isinstance(source, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in source.items()):
        _fail(where, "source", f"must be a JSON object of strings, got {source!r}")
    nc = cfg.get("not_converted", [])
    if not isinstance(nc, list) or not all(isinstance(s, str) for s in nc):
        _fail(where, "not_converted", f"must be a list of strings, got {nc!r}")
    return dtype, int(I), layers, rs, masking, dict(source), list(nc)


# ---- safetensors, read with bounds checks -------------------------------------------------------

def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _json_loads(text):
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def _read_safetensors_header(f, size, where, accepted):
    """(__metadata__ or None, {name: (dtype, shape, begin, end)}, data start) of an open
    safetensors file of `size` bytes whose tensors must be of the safetensors dtypes `accepted`;
    nothing is allocated beyond the header, whose length is bounded by the file and
    MAX_HEADER_BYTES. The same checks, in the same order, as the C++ reader
    (src/model/safetensors.cc)."""
    if size < 8:
        _fail(where, "header", f"the file has {size} bytes; a safetensors file starts with an "
              f"8-byte header length")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > size - 8:
        _fail(where, "header", f"declares a header of {n} bytes but only {size - 8} bytes follow "
              f"(truncated or not a safetensors file)")
    if n > MAX_HEADER_BYTES:
        _fail(where, "header", f"declares a header of {n} bytes, more than {MAX_HEADER_BYTES}")
    raw = f.read(n)
    if len(raw) != n:
        _fail(where, "header", f"could read {len(raw)} of its {n} bytes")
    try:
        header = _json_loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        _fail(where, "header", f"is not valid JSON ({e})")
    if not isinstance(header, dict):
        _fail(where, "header", f"must be a JSON object, got {type(header).__name__}")
    meta = header.pop("__metadata__", None)
    if meta is not None and not isinstance(meta, dict):
        _fail(where, "__metadata__", f"must be a JSON object of strings, got "
              f"{type(meta).__name__}")
    data_start = 8 + n
    data_bytes = size - data_start
    accepted_text = " or ".join(accepted) if len(accepted) < 3 else \
        ", ".join(accepted[:-1]) + " or " + accepted[-1]
    tensors = {}
    for name, info in header.items():
        field = f"tensor {name!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            _fail(where, field, "must be an object with exactly dtype, shape and data_offsets")
        st = info["dtype"]
        if st not in accepted:
            known = "a safetensors dtype blockrnn does not use here" if st in _ST_ALL else \
                "not a safetensors dtype"
            _fail(where, f"{field}.dtype", f"must be {accepted_text}, got {st!r} ({known})")
        shape = info["shape"]
        if not isinstance(shape, list) or len(shape) > MAX_RANK or \
                not all(_is_int(s) and 0 <= s < 2**62 for s in shape):
            _fail(where, f"{field}.shape", f"must be a list of at most {MAX_RANK} non-negative "
                  f"integers, got {shape!r}")
        offsets = info["data_offsets"]
        if not isinstance(offsets, list) or len(offsets) != 2 or \
                not all(_is_int(o) for o in offsets):
            _fail(where, f"{field}.data_offsets", f"must be [begin, end], got {offsets!r}")
        begin, end = offsets
        if not 0 <= begin <= end <= data_bytes:
            _fail(where, f"{field}.data_offsets", f"[{begin}, {end}] is outside the "
                  f"{data_bytes} data bytes of the file (truncated?)")
        nbytes = math.prod(shape) * _ST_DTYPES[st].itemsize  # Python int: no overflow
        if nbytes != end - begin:
            _fail(where, f"{field}.data_offsets", f"span {end - begin} bytes, but shape {shape} "
                  f"of {st} needs {nbytes}")
        tensors[name] = (st, tuple(shape), begin, end)
    spans = sorted((b, e, name) for name, (_, _, b, e) in tensors.items())
    pos = 0
    for b, e, name in spans:
        if b != pos:
            _fail(where, f"tensor {name!r}.data_offsets", f"starts at {b}, expected {pos} (the "
                  f"tensors' bytes must follow each other without gap or overlap)")
        pos = e
    if pos != data_bytes:
        _fail(where, "data", f"the tensors cover {pos} bytes but {data_bytes} follow the header")
    return meta, tensors, data_start


def _open(where):
    try:
        return open(where, "rb")
    except OSError as e:
        raise InvalidArgumentError(f"{where}: cannot open ({e.strerror})") from None


def load_tensor_file(path):
    """({name: array}, {key: str}) of a safetensors file of float32, float64 and int64 tensors:
    its tensors and its __metadata__, every value of which must be a string. The checks of
    load_model's reader (the header length, the JSON, every tensor's dtype, shape and bytes
    inside the file, no gap or overlap); a bad file is an InvalidArgumentError "<path>: <field>:
    <what>". The C++ library's blockrnn::load_tensor_file reads the same files the same way."""
    where = os.fspath(path)
    with _open(where) as f:
        meta, entries, data_start = _read_safetensors_header(
            f, os.fstat(f.fileno()).st_size, where, ("F32", "F64", "I64"))
        for key, value in (meta or {}).items():
            if not isinstance(value, str):
                _fail(where, f"__metadata__.{key}", f"must be a string, got "
                      f"{type(value).__name__}")
        tensors = {name: _read_tensor(f, data_start, e) for name, e in entries.items()}
    return tensors, dict(meta or {})


def _model_config(meta, where):
    """The configuration JSON a model file keeps in its __metadata__."""
    if meta is None:
        _fail(where, "__metadata__", "is missing (not a blockrnn model file)")
    if METADATA_KEY not in meta:
        _fail(where, f"__metadata__.{METADATA_KEY}", "is missing (not a blockrnn model file; "
              f"metadata keys: {', '.join(map(repr, meta)) or 'none'})")
    text = meta[METADATA_KEY]
    if not isinstance(text, str):
        _fail(where, f"__metadata__.{METADATA_KEY}", "must be a string holding JSON")
    try:
        return _json_loads(text)
    except (ValueError, RecursionError) as e:
        _fail(where, f"__metadata__.{METADATA_KEY}", f"is not valid JSON ({e})")


def _read_tensor(f, data_start, entry):
    st, shape, begin, end = entry
    f.seek(data_start + begin)
    raw = f.read(end - begin)
    a = np.frombuffer(raw, dtype=_ST_DTYPES[st]).reshape(shape)
    return a.astype(a.dtype.newbyteorder("="))


def _check_tensors(layers, input_size, dtype, declared, where):
    """{name: shape} expected by the configuration, checked against `declared`
    ({name: (safetensors dtype, shape)}): every one present, of the dtype and shape, no other."""
    expected = {}
    I = input_size
    for l, spec in enumerate(layers):
        for d in range(spec.directions):
            for p, shape in spec.param_shapes(I).items():
                expected[f"layers.{l}.{d}.{p}"] = shape
        I = spec.output_size
    st_dtype = _DTYPES[dtype][0]
    for name, shape in expected.items():
        if name not in declared:
            _fail(where, f"tensor {name!r}", "is missing")
        st, got = declared[name]
        if st != st_dtype:
            _fail(where, f"tensor {name!r}.dtype", f"must be {st_dtype} (the model's dtype is "
                  f"{dtype}), got {st}")
        if tuple(got) != tuple(shape):
            _fail(where, f"tensor {name!r}.shape", f"must be {list(shape)} (from the "
                  f"configuration), got {list(got)}")
    for name in declared:
        if name not in expected:
            _fail(where, f"tensor {name!r}", "is not a parameter of the configured layers")
    return expected


def load_model(path):
    """The Model of a blockrnn model file (docs/model-format.md). Every problem with the file
    is an InvalidArgumentError naming the file and the field."""
    where = os.fspath(path)
    with _open(where) as f:
        size = os.fstat(f.fileno()).st_size
        meta, entries, data_start = _read_safetensors_header(f, size, where, ("F32", "F64"))
        config = _model_config(meta, where)
        dtype, I, layers, rs, masking, source, nc = _parse_config(config, where)
        _check_tensors(layers, I, dtype, {k: (e[0], e[1]) for k, e in entries.items()}, where)
        tensors = {name: _read_tensor(f, data_start, e) for name, e in entries.items()}
    return Model._checked(dtype, I, layers, tensors, return_sequences=rs, masking=masking,
                          source=source, not_converted=nc, where=where)


def _write_safetensors(path, tensors, metadata):
    """Writes {name: array} and {key: str} as a safetensors file (tensors sorted by name)."""
    header = {"__metadata__": metadata}
    offset = 0
    names = sorted(tensors)
    for name in names:
        a = tensors[name]
        st = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}[a.dtype]
        header[name] = {"dtype": st, "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned, as safetensors'
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in names:
            f.write(np.ascontiguousarray(tensors[name]).astype(
                tensors[name].dtype.newbyteorder("<"), copy=False).tobytes())
    os.replace(tmp, path)


# ---- the model -------------------------------------------------------------------------------

def _frozen(weights, dtype):
    """weights[l][d] = {param: array} as the Model keeps them: its own C-contiguous copies of
    `dtype`, read-only, in read-only containers (tuples of mapping proxies). Its layer objects
    pack the weights at their first use, so a later write could not reach them: numpy refuses a
    write into the arrays ("assignment destination is read-only") and the containers refuse
    new arrays, instead of the Model computing with the weights it packed before."""
    def own(a):
        a = np.array(a, dtype=dtype, order="C", copy=True)
        a.flags.writeable = False
        return a
    return tuple(tuple(types.MappingProxyType({p: own(a) for p, a in params.items()})
                       for params in per_dir) for per_dir in weights)


class Model:
    """A stack of recurrent layers (LayerConfig) with their weights, run on blockrnn's layer
    objects: float32 or float64, weights packed once per (layer, direction).

    Attributes: dtype (numpy dtype), input_size, layers (list of LayerConfig), weights
    (weights[l][d] = {param: array}, the layer objects' set_weights arrays), return_sequences,
    masking (None or {"mask_value": v}), source ({str: str}), not_converted (names of source
    layers around the stack that the file does not hold).

    The weights are the Model's own read-only copies (tuples of read-only mappings of
    read-only arrays), packed into each (layer, direction)'s layer object when it is first
    used: a write into them is refused (build a new Model to change them). Like the layer objects, a
    Model runs one call at a time (it owns their workspaces): use one Model per thread."""

    def __init__(self, dtype, input_size, layers, weights, *, return_sequences=True,
                 masking=None, source=None, not_converted=()):
        """weights[l][d]: {param: array} for layer l, direction d. Checked as a file is."""
        tensors = {}
        for l, per_dir in enumerate(weights):
            for d, params in enumerate(per_dir):
                for p, a in params.items():
                    tensors[f"layers.{l}.{d}.{p}"] = a
        dtype = np.dtype(dtype).name
        config = {"format": FORMAT, "version": VERSION, "dtype": dtype,
                  "input_size": input_size, "return_sequences": return_sequences,
                  "masking": masking, "layers": [c.to_json() for c in layers],
                  "source": dict(source or {}), "not_converted": list(not_converted)}
        where = "Model"
        dtype, I, layers, rs, masking, source, nc = _parse_config(config, where)
        self._init(dtype, I, layers, tensors, rs, masking, source, nc, where)

    @classmethod
    def _checked(cls, dtype, I, layers, tensors, *, return_sequences, masking, source,
                 not_converted, where):
        self = cls.__new__(cls)
        self._init(dtype, I, layers, tensors, return_sequences, masking, source, not_converted,
                   where)
        return self

    def _init(self, dtype, I, layers, tensors, rs, masking, source, nc, where):
        declared = {}
        for name, a in tensors.items():
            a = np.asarray(a)
            st = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64"}.get(
                a.dtype.newbyteorder("="), str(a.dtype))
            declared[name] = (st, a.shape)
        _check_tensors(layers, I, dtype, declared, where)
        for name, a in tensors.items():
            if not np.all(np.isfinite(a)):
                _fail(where, f"tensor {name!r}", "holds NaN or infinite values")
        self.dtype = np.dtype(_DTYPES[dtype][1])
        self.input_size = I
        self.layers = layers
        self.return_sequences = rs
        self.masking = masking
        self.source = source
        self.not_converted = nc
        self.weights = _frozen([[{p: tensors[f"layers.{l}.{d}.{p}"] for p in spec.param_names()}
                                 for d in range(spec.directions)]
                                for l, spec in enumerate(layers)], self.dtype)
        self._plans = {}
        self._lock = threading.Lock()

    def __getstate__(self):
        # The lock and the library's layer objects are not copied (deepcopy, pickle): a copy
        # makes its own at its first forward. The weights as plain lists and dicts (a mapping
        # proxy does not pickle), read-only again in the copy.
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_plans")}
        state["weights"] = [[dict(params) for params in per_dir] for per_dir in self.weights]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.weights = _frozen(self.weights, self.dtype)
        self._plans = {}
        self._lock = threading.Lock()

    @property
    def output_size(self):
        return self.layers[-1].output_size

    def config(self):
        """The configuration dict stored under __metadata__["blockrnn"]."""
        return {"format": FORMAT, "version": VERSION, "dtype": self.dtype.name,
                "input_size": self.input_size, "return_sequences": self.return_sequences,
                "masking": self.masking, "layers": [c.to_json() for c in self.layers],
                "source": dict(self.source), "not_converted": list(self.not_converted)}

    def tensors(self):
        """{name: array}: the weights under their file names."""
        return {f"layers.{l}.{d}.{p}": a for l, per_dir in enumerate(self.weights)
                for d, params in enumerate(per_dir) for p, a in params.items()}

    def save(self, path):
        """Writes the model file (docs/model-format.md)."""
        _write_safetensors(path, self.tensors(),
                           {METADATA_KEY: json.dumps(self.config(), separators=(",", ":"))})

    def summary(self):
        """A few lines describing the model (what `python -m blockrnn.convert` prints)."""
        lines = [f"blockrnn model: {self.dtype.name}, input size {self.input_size}, "
                 f"{len(self.layers)} layer(s), output "
                 f"{'[T, B, ' if self.return_sequences else '[B, '}{self.output_size}]"]
        for l, c in enumerate(self.layers):
            extra = []
            if c.directions == 2:
                extra.append(f"bidirectional ({c.merge})")
            if c.go_backwards:
                extra.append("go_backwards")
            if c.is_lstm:
                extra.append(f"forget_bias={c.forget_bias:g}")
                extra.append("no cell clip" if c.cell_clip is None else
                             f"cell_clip={c.cell_clip:g}")
                if c.use_peephole:
                    extra.append("peepholes")
            if c.padded_output == "hold":
                extra.append("padded steps hold the last output")
            name = f" {c.name!r}" if c.name else ""
            lines.append(f"  layer {l}{name}: {c.kind} H={c.hidden_size}"
                         + (", " + ", ".join(extra) if extra else ""))
        if self.masking:
            lines.append(f"  masking: steps whose features all equal {self.masking['mask_value']:g}"
                         f" (per-example suffixes -> lengths)")
        if self.source:
            lines.append("  source: " + ", ".join(f"{k}={v}" for k, v in self.source.items()))
        if self.not_converted:
            lines.append("  NOT converted (run them yourself): " + ", ".join(self.not_converted))
        return "\n".join(lines)

    def __repr__(self):
        return self.summary()

    # ---- forward ----

    def _layer_object(self, l, d, T, B):
        """The layer object of (l, d), sized for at least T steps and B examples, weights set
        (packed) when it is created."""
        held = self._plans.get((l, d))
        if held is not None and held[0] >= T and held[1] >= B:
            return held[2]
        T = max(T, 1, held[0] if held else 0)
        B = max(B, 1, held[1] if held else 0)
        spec = self.layers[l]
        I = self.input_size if l == 0 else self.layers[l - 1].output_size
        dt = self.dtype.name
        if spec.is_lstm:
            # cell_clip <= 0 disables clipping in both LSTM ops (unset would be BlockLSTM's 3.0).
            obj = _core.LSTMLayer(I, spec.hidden_size, dt, T, B, v2=spec.kind == "BlockLSTMV2",
                                  forget_bias=spec.forget_bias,
                                  cell_clip=spec.cell_clip if spec.cell_clip else 0.0,
                                  use_peephole=spec.use_peephole)
        elif spec.kind == "BlockGRU":
            obj = _core.GRULayer(I, spec.hidden_size, dt, T, B)
        else:
            obj = _core.GRUResetAfterLayer(I, spec.hidden_size, dt, T, B)
        obj.set_weights(*(self.weights[l][d][p] for p in spec.param_names()))
        self._plans[(l, d)] = (T, B, obj)
        return obj

    def lengths_from_mask(self, x):
        """Per-example lengths [B] from the Masking layer's mask (a step is masked when all its
        features equal mask_value); InvalidArgumentError when an example's mask is not a suffix
        (masked steps followed by an unmasked one), which lengths cannot express."""
        x = np.asarray(x)
        keep = np.any(x != self.masking["mask_value"], axis=2)  # [T, B], Keras' Masking
        T = keep.shape[0]
        lengths = np.where(keep.any(axis=0), T - np.argmax(keep[::-1], axis=0), 0)
        t = np.arange(T)[:, None]
        bad = keep != (t < lengths[None, :])
        if bad.any():
            tb, b = np.argwhere(bad)[0]
            first_masked = int(np.argmin(keep[:, b]))
            raise InvalidArgumentError(
                f"Model.forward: x: the mask of the Masking layer (mask_value="
                f"{self.masking['mask_value']:g}) of example {b} is not a suffix: step "
                f"{first_masked} is masked and step {int(lengths[b]) - 1} is not; blockrnn runs "
                f"per-example lengths only (pad at the end, or pass seq_lengths)")
        return lengths.astype(np.int64)

    def _initial(self, initial_state, B):
        """initial_state[l][d] (LSTM (cs, h), GRU h, each [B, H]) checked, or zeros."""
        n = len(self.layers)
        if initial_state is None:
            return [[None] * c.directions for c in self.layers]
        if len(initial_state) != n:
            raise InvalidArgumentError(f"Model.forward: initial_state must hold one entry per "
                                       f"layer ({n}), got {len(initial_state)}")
        out = []
        for l, (c, per_dir) in enumerate(zip(self.layers, initial_state)):
            if per_dir is None:
                out.append([None] * c.directions)
                continue
            if len(per_dir) != c.directions:
                raise InvalidArgumentError(f"Model.forward: initial_state[{l}] must hold one "
                                           f"state per direction ({c.directions}), got "
                                           f"{len(per_dir)}")
            states = []
            for d, s in enumerate(per_dir):
                if s is None:
                    states.append(None)
                    continue
                parts = tuple(s) if c.is_lstm else (s,)
                if len(parts) != (2 if c.is_lstm else 1):
                    raise InvalidArgumentError(f"Model.forward: initial_state[{l}][{d}] must be "
                                               f"(cs, h) for an LSTM layer")
                arrays = []
                for k, a in enumerate(parts):
                    what = f"initial_state[{l}][{d}]" + (f"[{k}]" if c.is_lstm else "")
                    a = np.ascontiguousarray(_float_array(a, "Model.forward", what, self.dtype))
                    if a.shape != (B, c.hidden_size):
                        raise InvalidArgumentError(
                            f"Model.forward: {what} must have shape [{B}, {c.hidden_size}] "
                            f"(batch_size, hidden_size), got {list(a.shape)}")
                    arrays.append(a)
                states.append(tuple(arrays) if c.is_lstm else arrays[0])
            out.append(states)
        return out

    def _run_direction(self, l, d, x, lengths, state):
        """One direction of layer l over x [T, B, I_l] in its own reading order (already
        reversed for the reverse directions). Returns (h_seq [T, B, H], final state)."""
        spec = self.layers[l]
        T, B = x.shape[0], x.shape[1]
        H = spec.hidden_size
        obj = self._layer_object(l, d, T, B)
        zeros = np.zeros((B, H), self.dtype)
        if spec.is_lstm:
            cs0, h0 = state if state is not None else (zeros, zeros)
            out = [np.empty((T, B, H), self.dtype) for _ in range(7)]  # i cs f o ci co h
            obj.forward(x, cs0, h0, out, seq_lengths=lengths)
            seqs, firsts = (out[6], out[1]), (h0, cs0)
        else:
            h0 = state if state is not None else zeros
            n_out = 4 if spec.kind == "BlockGRU" else 5
            out = [np.empty((T, B, H), self.dtype) for _ in range(n_out)]
            obj.forward(x, h0, out, seq_lengths=lengths)
            seqs, firsts = (out[-1],), (h0,)
        finals = []
        for seq, first in zip(seqs, firsts):
            if lengths is None:
                finals.append(seq[-1].copy() if T else first.copy())
            else:
                last = np.maximum(lengths - 1, 0)
                f = seq[last, np.arange(B)]
                finals.append(np.where((lengths > 0)[:, None], f, first))
        h_seq = seqs[0]
        final = (finals[1], finals[0]) if spec.is_lstm else finals[0]  # LSTM: (cs, h)
        return h_seq, final

    def _check_forward_memory(self, T, B):
        """Refuses (ResourceExhaustedError) a forward whose arrays, which numpy allocates here
        before the layer objects check their calls, need more than the memory limit. An upper
        bound: the copy of x, and for every layer and direction its reversed input, its
        outputs (LSTM 7, GRU 4, reset-after GRU 5) and their reversal, and the merged output."""
        elems = self.input_size
        I = self.input_size
        for spec in self.layers:
            n_out = 7 if spec.is_lstm else 4 if spec.kind == "BlockGRU" else 5
            elems += spec.directions * (I + (n_out + 1) * spec.hidden_size) + spec.output_size
            I = spec.output_size
        _check_memory("Model.forward", T * B * elems * self.dtype.itemsize,
                      f"x [{T}, {B}, {self.input_size}] and the layers' outputs, "
                      f"{len(self.layers)} layers")

    @_one_call_at_a_time
    def forward(self, x, seq_lengths=None, initial_state=None):
        """Runs the stack on x [T, B, I] (time-major; converted to the model's dtype).

        seq_lengths: [B] integers in [0, T] (example b runs its first L_b steps; the reverse
        directions read each example backwards within its own length); None: every example
        runs T steps, or, with a Masking layer in the file, the lengths its mask gives.
        initial_state: None (zeros) or initial_state[l][d] per layer and direction: an LSTM
        layer's (cs, h), a GRU layer's h, each [B, H] (None for a layer or a direction: zeros).

        Returns (y, states): y [T, B, W] the last layer's output sequence (W = D·H with
        concat, else H), or [B, W] when the model returns its last step only
        (return_sequences false: each direction's output at its last reading step, merged);
        states[l][d] the final state of each layer and direction (LSTM (cs, h), GRU h) at
        each example's last step.

        One call at a time: concurrent calls from several threads wait for each other (the
        layer objects each own one workspace)."""
        # a floating array keeps its width until after the mask is read (as given)
        x = _opgen._float_input("Model.forward", "x", x, self.dtype)
        if x.ndim != 3 or x.shape[2] != self.input_size:
            raise InvalidArgumentError(f"Model.forward: x must have shape [T, B, "
                                       f"{self.input_size}] (time, batch, input_size), got "
                                       f"{list(x.shape)}")
        T, B = x.shape[0], x.shape[1]
        lengths = None
        if seq_lengths is not None:
            lengths = np.asarray(seq_lengths)
            if lengths.shape != (B,) or not (np.issubdtype(lengths.dtype, np.integer) or
                                             lengths.size == 0):
                raise InvalidArgumentError(f"Model.forward: seq_lengths must be [{B}] "
                                           f"integers (batch_size), got {lengths.dtype} "
                                           f"{list(lengths.shape)}")
            lengths = lengths.astype(np.int64)
            if lengths.size and (lengths.min() < 0 or lengths.max() > T):
                raise InvalidArgumentError(f"Model.forward: seq_lengths must be in [0, {T}] "
                                           f"(T), got values in [{lengths.min()}, "
                                           f"{lengths.max()}]")
        elif self.masking is not None:
            lengths = self.lengths_from_mask(x)
        init = self._initial(initial_state, B)
        self._check_forward_memory(T, B)
        x = np.ascontiguousarray(x, dtype=self.dtype)
        if lengths is not None and bool(np.all(lengths == T)):
            lengths = None  # the same results, without the per-example bookkeeping
        rev = None
        if lengths is not None:
            t = np.arange(T)[:, None]
            valid = t < lengths[None, :]
            rev = np.where(valid, lengths[None, :] - 1 - t, t)  # [T, B], its own inverse
            cols = np.arange(B)[None, :]

        def reverse(a):  # each example backwards within its own length
            return np.ascontiguousarray(a[::-1] if rev is None else a[rev, cols])

        states = []
        lasts = None
        inp = x
        for l, spec in enumerate(self.layers):
            outs, finals, last_steps = [], [], []
            for d in range(spec.directions):
                backwards = d == 1 or spec.go_backwards
                h_seq, final = self._run_direction(l, d, reverse(inp) if backwards else inp,
                                                   lengths, init[l][d])
                if backwards:
                    # the output at the last reading step is the time-ordered output's step 0
                    h_seq = reverse(h_seq)
                    last_steps.append(h_seq[0] if T else np.zeros((B, spec.hidden_size),
                                                                 self.dtype))
                    if spec.go_backwards:
                        h_seq = np.ascontiguousarray(h_seq[::-1])
                else:
                    if spec.padded_output == "hold" and lengths is not None:
                        last = np.maximum(lengths - 1, 0)
                        held = np.where((lengths > 0)[:, None], h_seq[last, np.arange(B)], 0)
                        h_seq = np.where(valid[:, :, None], h_seq, held[None])
                    last_steps.append(h_seq[-1] if T else np.zeros((B, spec.hidden_size),
                                                                  self.dtype))
                outs.append(h_seq)
                finals.append(final)
            inp = _merge(outs, spec.merge)
            lasts = last_steps
            states.append(finals)
        y = inp if self.return_sequences else _merge(lasts, self.layers[-1].merge)
        return y, states

    __call__ = forward

    # ---- torch ----

    def to_torch(self):
        """A blockrnn.torch.LSTM or GRU module computing this model (time-major, as the
        module's default batch_first=False), where one can: every layer of the same kind and
        hidden size, the same directions, concat merge, no go_backwards, no masking, padded
        steps zero and the whole output sequence returned. Otherwise InvalidArgumentError
        saying which setting has no blockrnn.torch equivalent."""
        import torch
        from .torch import GRU as TorchGRU, LSTM as TorchLSTM

        first = self.layers[0]
        for l, c in enumerate(self.layers):
            why = None
            if (c.kind, c.hidden_size, c.directions) != (first.kind, first.hidden_size,
                                                         first.directions):
                why = (f"its kind/hidden_size/directions ({c.kind}, {c.hidden_size}, "
                       f"{c.directions}) differ from layer 0's ({first.kind}, "
                       f"{first.hidden_size}, {first.directions}); a torch module stacks one "
                       f"kind of layer")
            elif c.directions == 2 and c.merge != "concat":
                why = f"merge {c.merge!r}: torch's bidirectional layers concatenate"
            elif c.go_backwards:
                why = "go_backwards: torch modules have no backwards-only layer"
            elif c.padded_output != "zero":
                why = "padded_output 'hold': torch modules output zeros at padded steps"
            elif c.is_lstm and (c.forget_bias, c.cell_clip, c.use_peephole) != (
                    first.forget_bias, first.cell_clip, first.use_peephole):
                why = "its LSTM attrs differ from layer 0's"
            if why:
                raise InvalidArgumentError(f"Model.to_torch: layer {l}: {why}")
        if self.masking is not None:
            raise InvalidArgumentError("Model.to_torch: masking: a torch module takes lengths "
                                       "as a PackedSequence, not a mask value")
        if not self.return_sequences:
            raise InvalidArgumentError("Model.to_torch: return_sequences is false: a torch "
                                       "module returns the whole output sequence")
        H, D = first.hidden_size, first.directions
        kw = dict(num_layers=len(self.layers), bidirectional=D == 2,
                  dtype=torch.float64 if self.dtype == np.float64 else torch.float32)
        if first.is_lstm:
            module = TorchLSTM(self.input_size, H, forget_bias=first.forget_bias,
                               cell_clip=first.cell_clip, use_peephole=first.use_peephole, **kw)
        else:
            module = TorchGRU(self.input_size, H, reset_after=first.kind == "BlockGRUResetAfter",
                              **kw)
        state = {}
        for l, c in enumerate(self.layers):
            I = self.input_size if l == 0 else self.layers[l - 1].output_size
            for d in range(D):
                sfx = f"_l{l}" + ("_reverse" if d == 1 else "")
                for name, a in _torch_params(c, I, self.weights[l][d]).items():
                    state[name + sfx] = torch.from_numpy(np.ascontiguousarray(a))
        module.load_state_dict(state)
        return module


def _merge(outs, merge):
    if len(outs) == 1:
        return outs[0]
    a, b = outs
    if merge == "concat":
        return np.concatenate([a, b], axis=-1)
    if merge == "sum":
        return a + b
    if merge == "mul":
        return a * b
    return (a + b) / 2  # "ave", as Keras computes it


def _torch_params(c, I, w):
    """torch.nn-named parameters (weight_ih, weight_hh, bias_ih, bias_hh [, weight_c*]) of one
    direction of layer config c, from the op-layout arrays w."""
    H = c.hidden_size
    blocks = lambda a, order: np.concatenate([a[..., k * H:(k + 1) * H] for k in order], -1)
    if c.is_lstm:
        # BlockLSTM's gate blocks i, c, f, o -> torch's i, f, g, o; BlockLSTMV2 is torch's.
        order = (0, 2, 1, 3) if c.kind == "BlockLSTM" else (0, 1, 2, 3)
        W, b = blocks(w["w"], order), blocks(w["b"], order)
        out = {"weight_ih": W[:I].T, "weight_hh": W[I:].T, "bias_ih": b,
               "bias_hh": np.zeros_like(b)}
        if c.use_peephole:
            out.update(weight_ci=w["wci"], weight_cf=w["wcf"], weight_co=w["wco"])
        return out
    if c.kind == "BlockGRU":
        # blockrnn.torch.GRU(reset_after=False): rows r, z of the ih/hh weights form w_ru, row
        # block n forms w_c; the biases are summed (bias_hh zero here).
        w_ih = np.concatenate([w["w_ru"][:I], w["w_c"][:I]], axis=1).T
        w_hh = np.concatenate([w["w_ru"][I:], w["w_c"][I:]], axis=1).T
        b = np.concatenate([w["b_ru"], w["b_c"]])
        return {"weight_ih": w_ih, "weight_hh": w_hh, "bias_ih": b, "bias_hh": np.zeros_like(b)}
    return {"weight_ih": w["w_i"].T, "weight_hh": w["w_h"].T, "bias_ih": w["b_i"],
            "bias_hh": w["b_h"]}
