"""Keras models -> blockrnn models, without importing TensorFlow or Keras for files.

A `.keras` file is a zip of config.json (the model's configuration), metadata.json and
model.weights.h5; a legacy `.h5` file holds the configuration as the attribute `model_config`
and the weights under `model_weights/<layer name>/` listed by the attribute `weight_names`.
Both are read here with zipfile, json and h5py. A live Keras model goes through the same rules
(its layers' get_config() and get_weights()).

The recurrent stack is the run of LSTM, GRU and Bidirectional(LSTM | GRU) layers (Dropout
between them is the identity at inference and is skipped). A Masking layer right in front of it
becomes the model's masking; InputLayer is dropped; every other layer before or after the stack
(Embedding, Dense, ...) is listed by name in Model.not_converted and in a warning. A setting the
ops cannot compute is refused with ConversionError naming the layer and the setting.

Weight layouts (gate column blocks): Keras LSTM kernel [I, 4H] / recurrent_kernel [H, 4H] /
bias [4H] in i, f, c, o -> BlockLSTM w = [kernel; recurrent_kernel] [I+H, 4H] in i, c, f, o,
forget_bias 0 (Keras adds no forget bias at run time), no cell clip. Keras GRU z, r, h:
reset_after=False -> BlockGRU w_ru = [r | z], w_c = h; reset_after=True (bias [2, 3H]: input
and recurrent bias) -> BlockGRUResetAfter w_i = kernel, w_h = recurrent_kernel in r, z, n.
Both directions only move numbers: the converted model computes Keras' math exactly (the
remaining difference is the order of floating-point sums).
"""
import io
import json
import os
import re
import warnings
import zipfile

import numpy as np

from .._core import InvalidArgumentError
from ..model import LayerConfig, Model

__all__ = ["ConversionError", "from_keras", "from_keras_file", "keras_lstm_weights",
           "keras_gru_weights", "check_keras_rnn_config"]


class ConversionError(InvalidArgumentError):
    """A source model that blockrnn cannot run exactly (the message names the layer and the
    setting)."""


_RNN = ("LSTM", "GRU")
# Recurrent layers with no blockrnn op: refused wherever they are (never listed as merely "not
# converted", which would suggest the rest of the model is the recurrent part).
_UNSUPPORTED_RNN = ("SimpleRNN", "RNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D")
_IDENTITY_AT_INFERENCE = ("Dropout", "SpatialDropout1D", "GaussianNoise", "GaussianDropout",
                          "AlphaDropout", "ActivityRegularization")


def _blocks(a, H, order):
    return np.concatenate([a[..., k * H:(k + 1) * H] for k in order], axis=-1)


def keras_lstm_weights(kernel, recurrent_kernel, bias=None):
    """{w, b} of BlockLSTM (gates i, c, f, o) from Keras LSTM weights (gates i, f, c, o);
    bias None (use_bias=False) gives a zero b."""
    kernel, recurrent = np.asarray(kernel), np.asarray(recurrent_kernel)
    H = recurrent.shape[0]
    _check_shapes("LSTM", kernel, recurrent, 4)
    bias = np.zeros(4 * H, kernel.dtype) if bias is None else np.asarray(bias)
    if bias.shape != (4 * H,):
        raise ConversionError(f"LSTM: bias must have shape [{4 * H}], got {list(bias.shape)}")
    order = (0, 2, 1, 3)
    w = _blocks(np.concatenate([kernel, recurrent], axis=0), H, order)
    return {"w": np.ascontiguousarray(w), "b": np.ascontiguousarray(_blocks(bias, H, order))}


def keras_gru_weights(kernel, recurrent_kernel, bias=None, *, reset_after):
    """The op-layout weights of a Keras GRU (gates z, r, h): reset_after=False -> BlockGRU's
    {w_ru, w_c, b_ru, b_c}; reset_after=True -> BlockGRUResetAfter's {w_i, w_h, b_i, b_h}
    (gates r, z, n). bias None (use_bias=False) gives zero biases."""
    kernel, recurrent = np.asarray(kernel), np.asarray(recurrent_kernel)
    H = recurrent.shape[0]
    _check_shapes("GRU", kernel, recurrent, 3)
    want = (2, 3 * H) if reset_after else (3 * H,)
    bias = np.zeros(want, kernel.dtype) if bias is None else np.asarray(bias)
    if bias.shape != want:
        hint = ""
        if bias.shape == (2, 3 * H):
            hint = " (a [2, 3H] bias is Keras' reset_after=True GRU)"
        elif bias.shape == (3 * H,):
            hint = " (a [3H] bias is Keras' reset_after=False GRU)"
        raise ConversionError(f"GRU(reset_after={reset_after}): bias must have shape "
                              f"{list(want)}, got {list(bias.shape)}{hint}")
    if reset_after:
        order = (1, 0, 2)  # z, r, h -> r, z, n
        return {"w_i": np.ascontiguousarray(_blocks(kernel, H, order)),
                "w_h": np.ascontiguousarray(_blocks(recurrent, H, order)),
                "b_i": np.ascontiguousarray(_blocks(bias[0], H, order)),
                "b_h": np.ascontiguousarray(_blocks(bias[1], H, order))}
    w = np.concatenate([kernel, recurrent], axis=0)
    return {"w_ru": np.ascontiguousarray(_blocks(w, H, (1, 0))),
            "w_c": np.ascontiguousarray(w[:, 2 * H:]),
            "b_ru": np.ascontiguousarray(_blocks(bias, H, (1, 0))),
            "b_c": np.ascontiguousarray(bias[2 * H:])}


def _check_shapes(what, kernel, recurrent, gates):
    if recurrent.ndim != 2 or recurrent.shape[1] != gates * recurrent.shape[0] or \
            recurrent.shape[0] < 1:
        raise ConversionError(f"{what}: recurrent_kernel must have shape [H, {gates}H], got "
                              f"{list(recurrent.shape)}")
    H = recurrent.shape[0]
    if kernel.ndim != 2 or kernel.shape[1] != gates * H:
        raise ConversionError(f"{what}: kernel must have shape [I, {gates * H}], got "
                              f"{list(kernel.shape)}")


def _activation_name(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict):  # a serialized function or object
        return v.get("config", v.get("class_name"))
    return getattr(v, "__name__", repr(v))


def check_keras_rnn_config(cls, cfg, layer_name):
    """Refuses (ConversionError naming the layer and the setting) what the ops cannot compute
    in a Keras LSTM or GRU configuration; dropout, recurrent_dropout, unroll, initializers,
    regularizers and constraints do not change inference and are ignored."""
    where = f"layer {layer_name!r} ({cls})"
    act = _activation_name(cfg.get("activation", "tanh"))
    if act != "tanh":
        raise ConversionError(f"{where}: activation={act!r}: the ops compute tanh only")
    ract = _activation_name(cfg.get("recurrent_activation", "sigmoid"))
    if ract != "sigmoid":
        raise ConversionError(f"{where}: recurrent_activation={ract!r}: the ops compute the "
                              f"logistic sigmoid only")
    if cfg.get("stateful", False):
        raise ConversionError(f"{where}: stateful=True: the state carried from one batch to "
                              f"the next is not in the file (pass initial_state to forward)")
    if cfg.get("time_major", False):
        raise ConversionError(f"{where}: time_major=True is not supported (save the model "
                              f"batch-major)")
    for key in ("units",):
        if not isinstance(cfg.get(key), int) or cfg[key] < 1:
            raise ConversionError(f"{where}: {key} must be a positive integer, got "
                                  f"{cfg.get(key)!r}")
    dtype = cfg.get("dtype")
    policy = dtype.get("config", {}).get("name") if isinstance(dtype, dict) else dtype
    if policy is not None and policy not in ("float32", "float64"):
        raise ConversionError(f"{where}: dtype policy {policy!r}: blockrnn models run float32 "
                              f"or float64")


def _rnn_direction(cls, cfg, weights, layer_name):
    """(kind, op-layout weights) of one Keras LSTM / GRU from its configuration and weight
    list [kernel, recurrent_kernel(, bias)]."""
    check_keras_rnn_config(cls, cfg, layer_name)
    use_bias = cfg.get("use_bias", True)
    n = 3 if use_bias else 2
    if len(weights) != n:
        raise ConversionError(f"layer {layer_name!r} ({cls}): expected {n} weight arrays "
                              f"(kernel, recurrent_kernel{', bias' if use_bias else ''}), "
                              f"got {len(weights)}")
    kernel, recurrent = weights[0], weights[1]
    bias = weights[2] if use_bias else None
    if recurrent.shape[0] != cfg["units"]:
        raise ConversionError(f"layer {layer_name!r} ({cls}): recurrent_kernel has "
                              f"{recurrent.shape[0]} rows but units={cfg['units']}")
    try:
        if cls == "LSTM":
            return "BlockLSTM", keras_lstm_weights(kernel, recurrent, bias)
        reset_after = cfg.get("reset_after", True)
        kind = "BlockGRUResetAfter" if reset_after else "BlockGRU"
        return kind, keras_gru_weights(kernel, recurrent, bias, reset_after=reset_after)
    except ConversionError as e:
        raise ConversionError(f"layer {layer_name!r}: {e}") from None


def _convert_layer(cls, cfg, weights, name):
    """(LayerConfig, [per-direction weights], return_sequences) of one recurrent layer."""
    if cls in _RNN:
        kind, w = _rnn_direction(cls, cfg, weights, name)
        zero = cfg.get("zero_output_for_mask", False)
        spec = LayerConfig(kind, cfg["units"], go_backwards=bool(cfg.get("go_backwards", False)),
                           padded_output="zero" if zero else "hold", name=name)
        return spec, [w], bool(cfg.get("return_sequences", False))
    # Bidirectional
    inner = cfg.get("layer", {})
    icls, icfg = inner.get("class_name"), inner.get("config", {})
    where = f"layer {name!r} (Bidirectional)"
    if icls not in _RNN:
        raise ConversionError(f"{where}: wraps {icls!r}; blockrnn converts LSTM and GRU")
    merge = cfg.get("merge_mode", "concat")
    if merge not in ("concat", "sum", "mul", "ave"):
        raise ConversionError(f"{where}: merge_mode={merge!r}: blockrnn merges the directions "
                              f"by concat, sum, mul or ave (None returns two outputs)")
    if icfg.get("go_backwards", False):
        raise ConversionError(f"{where}: the wrapped layer has go_backwards=True")
    back = cfg.get("backward_layer")
    bcls, bcfg = icls, dict(icfg)
    if back is not None:
        bcls, bcfg = back.get("class_name"), back.get("config", {})
        keys = ("units", "use_bias", "reset_after", "activation", "recurrent_activation")
        if bcls != icls or any(bcfg.get(k) != icfg.get(k) for k in keys):
            raise ConversionError(f"{where}: backward_layer differs from the forward layer "
                                  f"(class or {', '.join(keys)}); blockrnn runs both "
                                  f"directions with one configuration")
    n = len(weights) // 2
    kind, wf = _rnn_direction(icls, icfg, weights[:n], f"{name}/forward")
    _, wb = _rnn_direction(bcls, bcfg, weights[n:], f"{name}/backward")
    rs = bool(icfg.get("return_sequences", False))
    # Bidirectional forces zero_output_for_mask = return_sequences on both layers.
    spec = LayerConfig(kind, icfg["units"], directions=2, merge=merge,
                       padded_output="zero" if rs else "hold", name=name)
    return spec, [wf, wb], rs


def _stack_from_layers(entries, source, where):
    """The Model of a list of (class_name, config, weights or a callable returning them)
    in the order the model runs them."""
    recurrent = [k for k, (cls, _, _) in enumerate(entries)
                 if cls in _RNN or cls == "Bidirectional"]
    names = [cfg.get("name", f"#{k}") for k, (_, cfg, _) in enumerate(entries)]
    for k, (cls, _, _) in enumerate(entries):
        if cls in _UNSUPPORTED_RNN:
            raise ConversionError(f"{where}: layer {names[k]!r} ({cls}) is a recurrent layer "
                                  f"blockrnn has no op for (it converts LSTM and GRU)")
    if not recurrent:
        others = ", ".join(f"{n} ({c})" for n, (c, _, _) in zip(names, entries))
        raise ConversionError(f"{where}: no LSTM, GRU or Bidirectional layer to convert "
                              f"(layers: {others or 'none'})")
    first, last = recurrent[0], recurrent[-1]
    not_converted = []
    masking = None
    for k in range(first):
        cls, cfg, _ = entries[k]
        if cls == "InputLayer":
            continue
        if cls == "Masking" and k == first - 1:
            masking = {"mask_value": float(cfg.get("mask_value", 0.0))}
            continue
        if cls == "Embedding" and cfg.get("mask_zero", False):
            raise ConversionError(f"{where}: layer {names[k]!r} (Embedding) has mask_zero=True: "
                                  f"its mask comes from the token ids, which the converted "
                                  f"stack does not see (convert a model without it and pass "
                                  f"seq_lengths to forward)")
        if cls == "Masking":
            raise ConversionError(f"{where}: layer {names[k]!r} (Masking) is not directly in "
                                  f"front of the recurrent stack")
        not_converted.append(f"{names[k]} ({cls})")
    layers, weights = [], []
    return_sequences = True
    for k in range(first, last + 1):
        cls, cfg, w = entries[k]
        if cls in _IDENTITY_AT_INFERENCE:
            continue
        if cls not in _RNN and cls != "Bidirectional":
            raise ConversionError(f"{where}: layer {names[k]!r} ({cls}) sits between recurrent "
                                  f"layers; blockrnn converts a contiguous recurrent stack")
        w = w() if callable(w) else w
        spec, dir_weights, rs = _convert_layer(cls, cfg, [np.asarray(a) for a in w], names[k])
        if k != last and not rs:
            raise ConversionError(f"{where}: layer {names[k]!r} ({cls}) has "
                                  f"return_sequences=False but feeds another recurrent layer")
        layers.append(spec)
        weights.append(dir_weights)
        return_sequences = rs
    for k in range(last + 1, len(entries)):
        cls = entries[k][0]
        if cls in _RNN or cls == "Bidirectional":
            continue  # not reached: last is the last recurrent layer
        not_converted.append(f"{names[k]} ({cls})")
    dtypes = {a.dtype for per_dir in weights for d in per_dir for a in d.values()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
        raise ConversionError(f"{where}: the recurrent weights' dtypes are "
                              f"{sorted(map(str, dtypes))}; blockrnn models are float32 or "
                              f"float64 throughout")
    dtype = next(iter(dtypes))
    input_size = next(iter(weights[0][0].values())).shape[0]
    if layers[0].kind != "BlockGRUResetAfter":
        input_size -= layers[0].hidden_size  # w is [I+H, .]
    if not_converted:
        warnings.warn(f"{where}: not converted (the model file holds the recurrent stack "
                      f"only): {', '.join(not_converted)}", stacklevel=3)
    try:
        return Model(dtype, input_size, layers, weights, return_sequences=return_sequences,
                     masking=masking, source=source, not_converted=not_converted)
    except InvalidArgumentError as e:
        raise ConversionError(f"{where}: {e}") from None


# ---- files ----

def _snake(name):
    # keras.src.utils.naming.to_snake_case: the name of a layer's group in model.weights.h5
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _chain(config, where):
    """The layer list of a Sequential or Functional configuration, in the order they run."""
    cls = config.get("class_name")
    inner = config.get("config", {})
    layers = inner.get("layers")
    if cls not in ("Sequential", "Functional", "Model") or not isinstance(layers, list):
        raise ConversionError(f"{where}: the model is a {cls!r}; blockrnn converts Sequential "
                              f"models and Functional models that are a chain of layers")
    for entry in layers:
        if entry.get("class_name") in ("Sequential", "Functional", "Model"):
            raise ConversionError(f"{where}: layer {entry.get('config', {}).get('name')!r} is a "
                                  f"nested model; save the recurrent part as its own model")
    if cls != "Sequential":
        previous = None
        for entry in layers:
            nodes = entry.get("inbound_nodes") or []
            name = entry.get("config", {}).get("name")
            if entry.get("class_name") == "InputLayer":
                if previous is not None:
                    raise ConversionError(f"{where}: the model has more than one input")
                previous = name
                continue
            try:
                (node,) = nodes
                if isinstance(node, list):  # tf.keras 2: [[name, node, tensor, kwargs]]
                    ((src, _, tensor, kwargs),) = node
                    extra = [v for v in kwargs.values() if v] if kwargs else []
                else:  # Keras 3: {"args": [keras tensor], "kwargs": {...}}
                    (arg,) = [a for a in node["args"] if isinstance(a, dict)]
                    src, _, tensor = arg["config"]["keras_history"]
                    extra = [v for v in node.get("kwargs", {}).values()
                             if isinstance(v, (dict, list)) and v]
                if tensor != 0:  # e.g. the state output of a return_state=True layer
                    extra.append(tensor)
            except (KeyError, TypeError, ValueError, AttributeError):
                raise ConversionError(f"{where}: layer {name!r} is not called once on one "
                                      f"tensor; blockrnn converts a chain of layers") from None
            if src != previous or extra:
                raise ConversionError(f"{where}: layer {name!r} does not take the previous "
                                      f"layer's output alone; blockrnn converts a chain of "
                                      f"layers")
            previous = name
    return cls, layers


def _keras_file_entries(zf_or_h5, config, is_zip, where):
    import h5py

    cls, layers = _chain(config, where)
    entries = []
    if is_zip:
        h5 = zf_or_h5
        used = {}
        for entry in layers:
            lcls = entry.get("class_name")
            if lcls == "InputLayer" and cls == "Sequential":
                continue  # Sequential.layers (what the weights file walks) omits it
            base = _snake(lcls)
            if base in used:
                used[base] += 1
                base = f"{base}_{used[base]}"
            else:
                used[base] = 0
            path = f"layers/{base}"
            entries.append((lcls, entry.get("config", {}),
                            _zip_weights(h5, path, lcls, where)))
    else:
        mw = zf_or_h5["model_weights"]
        for entry in layers:
            lcls = entry.get("class_name")
            name = entry.get("config", {}).get("name")
            entries.append((lcls, entry.get("config", {}), _h5_weights(mw, name, where)))
    return entries


def _read_vars(h5, path, where):
    import h5py

    group = h5.get(path)
    if not isinstance(group, h5py.Group):
        raise ConversionError(f"{where}: weights group {path!r} is missing")
    keys = sorted(group.keys(), key=lambda k: int(k) if k.isdigit() else -1)
    if any(not k.isdigit() for k in keys) or keys != [str(i) for i in range(len(keys))]:
        raise ConversionError(f"{where}: weights group {path!r} holds {keys}, expected 0, 1, ...")
    return [np.asarray(group[k][()]) for k in keys]


def _zip_weights(h5, path, cls, where):
    def read():
        if cls == "Bidirectional":
            return (_read_vars(h5, f"{path}/forward_layer/cell/vars", where) +
                    _read_vars(h5, f"{path}/backward_layer/cell/vars", where))
        return _read_vars(h5, f"{path}/cell/vars", where)
    return read


def _h5_weights(mw, name, where):
    def read():
        group = mw.get(name)
        if group is None:
            raise ConversionError(f"{where}: model_weights/{name} is missing")
        out = []
        for wn in group.attrs.get("weight_names", []):
            wn = wn.decode("utf-8") if isinstance(wn, bytes) else str(wn)
            if wn not in group:
                raise ConversionError(f"{where}: model_weights/{name}/{wn} is missing")
            out.append(np.asarray(group[wn][()]))
        return out
    return read


def from_keras_file(path):
    """The Model of the recurrent stack of a Keras `.keras` or legacy `.h5` file, read with
    zipfile, json and h5py only (TensorFlow and Keras are not imported)."""
    try:
        import h5py
    except ImportError:
        raise ConversionError("blockrnn.convert: reading Keras files needs h5py "
                              "(pip install h5py)") from None

    where = os.fspath(path)
    if zipfile.is_zipfile(where):
        with zipfile.ZipFile(where) as zf:
            names = zf.namelist()
            for need in ("config.json", "model.weights.h5"):
                if need not in names:
                    raise ConversionError(f"{where}: {need} is missing from the .keras archive")
            try:
                config = json.loads(zf.read("config.json"))
                meta = json.loads(zf.read("metadata.json")) if "metadata.json" in names else {}
            except ValueError as e:
                raise ConversionError(f"{where}: config.json is not valid JSON ({e})") from None
            source = {"framework": "keras", "version": str(meta.get("keras_version", "")),
                      "file": os.path.basename(where), "format": ".keras"}
            with h5py.File(io.BytesIO(zf.read("model.weights.h5")), "r") as h5:
                entries = _keras_file_entries(h5, config, True, where)
                return _stack_from_layers(entries, source, where)
    try:
        h5 = h5py.File(where, "r")
    except OSError as e:
        raise ConversionError(f"{where}: neither a .keras archive nor an HDF5 file ({e})") \
            from None
    with h5:
        raw = h5.attrs.get("model_config")
        if raw is None or "model_weights" not in h5:
            raise ConversionError(f"{where}: not a Keras model file (no model_config attribute "
                                  f"or model_weights group; a weights-only .h5 has no "
                                  f"configuration)")
        config = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        version = h5.attrs.get("keras_version", b"")
        version = version.decode("utf-8") if isinstance(version, bytes) else str(version)
        source = {"framework": "keras", "version": version, "file": os.path.basename(where),
                  "format": ".h5"}
        entries = _keras_file_entries(h5, config, False, where)
        return _stack_from_layers(entries, source, where)


def from_keras(model):
    """The Model of a live Keras model (Sequential, or Functional chain) or a single LSTM,
    GRU or Bidirectional layer: the same rules as the files, from get_config() and
    get_weights()."""
    import keras

    version = getattr(keras, "__version__", "")
    if isinstance(model, keras.layers.Layer) and not isinstance(model, keras.Model):
        entries = [(type(model).__name__, model.get_config(), model.get_weights())]
        where = f"keras layer {model.name!r}"
    else:
        where = f"keras model {model.name!r}"
        config = {"class_name": type(model).__name__, "config": model.get_config()}
        if isinstance(model, keras.Sequential):
            config["class_name"] = "Sequential"
        _, layers = _chain(config, where)
        by_name = {l.name: l for l in model.layers}
        entries = []
        for entry in layers:
            name = entry.get("config", {}).get("name")
            layer = by_name.get(name)
            entries.append((entry.get("class_name"), entry.get("config", {}),
                            layer.get_weights if layer is not None else []))
    source = {"framework": "keras", "version": version, "object": where}
    return _stack_from_layers(entries, source, where)
