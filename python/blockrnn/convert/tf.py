"""TensorFlow 1.x-style checkpoints of TensorFlow's LSTM and GRU cells -> blockrnn models
(needs TensorFlow to read the checkpoint; the model file then runs without it).

Variable names under a cell's scope (e.g. `rnn/multi_rnn_cell/cell_0/lstm_cell`):
  LSTMCell, LSTMBlockCell, LSTMBlockFusedCell: `kernel` [I+H, 4H] (gates i, c, f, o: BlockLSTM's
    layout as is), `bias` [4H], with peepholes `w_i_diag`, `w_f_diag`, `w_o_diag` [H];
  GRUCell, GRUBlockCell(V2): `gates/kernel` [I+H, 2H] (r, u), `gates/bias` [2H],
    `candidate/kernel` [I+H, H], `candidate/bias` [H]: BlockGRU's w_ru, b_ru, w_c, b_c.
A checkpoint does not record an LSTM's forget_bias (added at run time; the cells' default is 1.0)
nor its cell_clip (default: none), so the caller passes them: forget_bias is required.
Refused: num_proj (a `projection/kernel`), partial peepholes, anything else under the scope.
"""
import numpy as np

from ..model import LayerConfig, Model
from .keras import ConversionError

__all__ = ["from_tf_checkpoint"]

_PEEPHOLES = ("w_i_diag", "w_f_diag", "w_o_diag")


def _cell_scopes(names):
    """Scopes that hold an LSTM cell (kernel + bias) or a GRU cell (gates/kernel)."""
    out = set()
    for n in names:
        if n.endswith("/gates/kernel"):
            out.add(n[:-len("/gates/kernel")])
        elif n.endswith("/kernel") and n[:-len("/kernel")] + "/bias" in names and \
                not n.endswith("/candidate/kernel") and not n.endswith("/projection/kernel"):
            out.add(n[:-len("/kernel")])
    return sorted(out)


def _direction(reader, names, scope, forget_bias, cell_clip, where):
    """(LayerConfig fields, op-layout weights) of the cell under `scope`."""
    def get(name):
        full = f"{scope}/{name}"
        if full not in names:
            raise ConversionError(f"{where}: variable {full!r} is missing")
        return np.asarray(reader.get_tensor(full))

    under = sorted(n[len(scope) + 1:] for n in names if n.startswith(scope + "/"))
    if f"{scope}/gates/kernel" in names:
        expected = {"gates/kernel", "gates/bias", "candidate/kernel", "candidate/bias"}
        kind = "BlockGRU"
    else:
        if f"{scope}/projection/kernel" in names:
            raise ConversionError(f"{where}: cell {scope!r} has a projection/kernel (LSTMCell "
                                  f"num_proj): an LSTM with projections has no blockrnn op")
        peep = [p for p in _PEEPHOLES if f"{scope}/{p}" in names]
        if peep and len(peep) != 3:
            raise ConversionError(f"{where}: cell {scope!r} has peepholes {peep} but not all "
                                  f"of {list(_PEEPHOLES)}")
        expected = {"kernel", "bias", *peep}
        kind = "BlockLSTM"
    # optimizer slots live under the variable's own name (kernel/Adam, ...): not cell variables
    extra = [n for n in under if n not in expected and
             not any(n.startswith(e + "/") for e in expected)]
    if extra:
        raise ConversionError(f"{where}: cell {scope!r} holds variables {extra} that a "
                              f"{'GRU' if kind == 'BlockGRU' else 'LSTM'} cell does not have")
    if kind == "BlockGRU":
        w = {"w_ru": get("gates/kernel"), "w_c": get("candidate/kernel"),
             "b_ru": get("gates/bias"), "b_c": get("candidate/bias")}
        return dict(kind=kind, hidden_size=w["b_c"].shape[0]), w
    if forget_bias is None:
        raise ConversionError(f"{where}: forget_bias: a TensorFlow checkpoint does not record "
                              f"it; pass the value the LSTM cell was built with (LSTMCell, "
                              f"LSTMBlockCell and LSTMBlockFusedCell default to 1.0)")
    w = {"w": get("kernel"), "b": get("bias")}
    if len(expected) == 5:
        w.update(wci=get("w_i_diag"), wcf=get("w_f_diag"), wco=get("w_o_diag"))
    if w["b"].ndim != 1 or w["b"].shape[0] % 4:
        raise ConversionError(f"{where}: {scope}/bias must be [4H], got {list(w['b'].shape)}")
    return dict(kind=kind, hidden_size=w["b"].shape[0] // 4, forget_bias=float(forget_bias),
                cell_clip=None if cell_clip is None or cell_clip <= 0 else float(cell_clip),
                use_peephole=len(expected) == 5), w


def from_tf_checkpoint(path, scopes=None, *, forget_bias=None, cell_clip=None,
                       merge="concat"):
    """The Model of TensorFlow LSTM / GRU cells in a checkpoint (a path prefix or directory).

    scopes: one entry per layer, input first: a cell's variable scope (a string), or a pair
    (forward scope, backward scope) for a bidirectional layer whose outputs are merged by
    `merge` (bidirectional_dynamic_rnn returns them apart; concat is the usual). None: the
    checkpoint's only cell (an error lists the cells when there are several).
    forget_bias (required for LSTM cells) and cell_clip (None: no clipping) are the values the
    cells were built with: the checkpoint does not record them."""
    import tensorflow as tf

    where = str(path)
    try:
        reader = tf.train.load_checkpoint(where)
    except Exception as e:  # TensorFlow raises several types for an unreadable checkpoint
        raise ConversionError(f"{where}: cannot read as a TensorFlow checkpoint "
                              f"({type(e).__name__}: {e})") from None
    names = set(reader.get_variable_to_shape_map())
    cells = _cell_scopes(names)
    if scopes is None:
        if len(cells) != 1:
            raise ConversionError(f"{where}: the checkpoint holds {len(cells)} cells "
                                  f"({cells}); pass scopes=[...] in layer order")
        scopes = cells
    layers, weights = [], []
    for l, entry in enumerate(scopes):
        pair = (entry,) if isinstance(entry, str) else tuple(entry)
        if len(pair) not in (1, 2):
            raise ConversionError(f"{where}: scopes[{l}] must be a scope or a (forward, "
                                  f"backward) pair, got {entry!r}")
        specs, dirs = [], []
        for scope in pair:
            if scope not in cells:
                raise ConversionError(f"{where}: scopes[{l}]: {scope!r} is not a cell scope "
                                      f"of the checkpoint (cells: {cells})")
            spec, w = _direction(reader, names, scope, forget_bias, cell_clip, where)
            specs.append(spec)
            dirs.append(w)
        if len(specs) == 2 and specs[0] != specs[1]:
            raise ConversionError(f"{where}: scopes[{l}]: the forward and backward cells differ "
                                  f"({specs[0]} vs {specs[1]})")
        D = len(pair)
        layers.append(LayerConfig(directions=D, merge=merge if D == 2 else None, name=pair[0],
                                  **specs[0]))
        weights.append(dirs)
    dtypes = {a.dtype for d in weights for w in d for a in w.values()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
        raise ConversionError(f"{where}: variables of dtype {sorted(map(str, dtypes))}; "
                              f"blockrnn models are float32 or float64 throughout")
    first = weights[0][0]
    I = (first["w"] if "w" in first else first["w_ru"]).shape[0] - layers[0].hidden_size
    source = {"framework": "tensorflow", "version": tf.__version__, "file": where,
              "format": "checkpoint"}
    try:
        return Model(next(iter(dtypes)), I, layers, weights, source=source)
    except ConversionError:
        raise
    except ValueError as e:
        raise ConversionError(f"{where}: {e}") from None
