"""ONNX export of blockrnn.torch.LSTM / GRU: blockrnn::nn_rnn as ONNX LSTM / GRU nodes.

torch.onnx.export (the torch.export-based exporter, dynamo=True) translates each custom op
through a `custom_translation_table` entry: an onnxscript function that builds the ONNX nodes.
nn_rnn becomes one ONNX LSTM or GRU node per layer (both directions in one node), its
parameters reordered from torch.nn's gate order to ONNX's. Settings ONNX's operators do not
compute exactly are refused with an error naming the setting (docs/torch.md, "ONNX export").
"""
from typing import Optional, Sequence

import torch

try:
    from onnxscript import opset18 as op  # the opset torch's exporter builds with
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("blockrnn.torch ONNX export needs onnx and onnxscript: "
                      "pip install onnx onnxscript") from e

# torch.nn's gate blocks (rows of weight_ih / weight_hh / the biases) in ONNX's order:
# LSTM torch i, f, g, o -> ONNX i, o, f, c; GRU torch r, z, n -> ONNX z, r, h.
_LSTM_ORDER = [0, 3, 1, 2]
_GRU_ORDER = [1, 0, 2]
# the forget gate's block in ONNX's LSTM order (where forget_bias is added)
_ONNX_LSTM_FORGET = 2


class OnnxExportError(ValueError):
    """A blockrnn.torch setting that ONNX's LSTM / GRU operators cannot compute exactly."""


def _refuse(mode: str, what: str) -> None:
    module = "LSTM" if mode.startswith("lstm") else "GRU"
    raise OnnxExportError(f"blockrnn.torch.{module} ONNX export: {what}")


def _check_exportable(mode: str, seq_lengths, dropout_mask, cell_clip: float) -> None:
    if mode not in ("lstm", "lstm_v2", "gru", "gru_reset_after"):
        _refuse(mode, f"mode must be one of lstm, lstm_v2, gru, gru_reset_after, got '{mode}'")
    if cell_clip > 0:
        # ONNX LSTM's `clip` bounds the gates' pre-activations; TensorFlow's cell_clip bounds
        # the cell state after each step: no ONNX attribute computes it.
        _refuse(mode, f"cell_clip={cell_clip} (clipping of the cell state) has no ONNX "
                      f"equivalent (ONNX LSTM's clip bounds the gates' inputs instead)")
    if dropout_mask is not None:
        _refuse(mode, "dropout_mask: dropout between layers is random; export the module in "
                      "eval mode (module.eval())")
    if seq_lengths is not None:
        _refuse(mode, "seq_lengths (a PackedSequence input) is not exported; export with a "
                      "padded Tensor input")


def _reorder(t, order: Sequence[int], H: int):
    """Rows [G*H, ...] (or a vector [G*H]) in torch's gate order -> [1, G*H, ...] in ONNX's."""
    G = len(order)
    rank = len(t.shape)
    blocks = op.Reshape(t, op.Constant(value_ints=[G, H, -1] if rank == 2 else [G, H]))
    picked = op.Gather(blocks, op.Constant(value_ints=list(order)), axis=0)
    return op.Reshape(picked, op.Constant(value_ints=[1, G * H, -1] if rank == 2
                                          else [1, G * H]))


def _forget_bias_vector(like, forget_bias: float, H: int):
    """[1, 8H]: forget_bias on the forget gate's block of ONNX LSTM's W bias, else 0."""
    vals = [0.0] * (8 * H)
    for k in range(_ONNX_LSTM_FORGET * H, (_ONNX_LSTM_FORGET + 1) * H):
        vals[k] = forget_bias
    c = op.Constant(value_floats=vals)
    return op.Reshape(op.CastLike(c, like), op.Constant(value_ints=[1, 8 * H]))


def _direction_params(mode, params, k0, has_bias, use_peephole, forget_bias, H, like):
    """One direction's (W, R, B, P) in ONNX's layout, each with a leading direction axis of 1,
    from its torch.nn parameters starting at params[k0]; the index of the next direction."""
    lstm = mode.startswith("lstm")
    order = _LSTM_ORDER if lstm else _GRU_ORDER
    w = _reorder(params[k0], order, H)
    r = _reorder(params[k0 + 1], order, H)
    k = k0 + 2
    b = None
    if has_bias:
        b = op.Concat(_reorder(params[k], order, H), _reorder(params[k + 1], order, H), axis=1)
        k += 2
    if lstm and forget_bias != 0.0:
        fb = _forget_bias_vector(like, forget_bias, H)
        b = fb if b is None else op.Add(b, fb)
    p = None
    if use_peephole:
        ci, cf, co = params[k], params[k + 1], params[k + 2]  # ONNX's P: i, o, f
        p = op.Reshape(op.Concat(ci, co, cf, axis=0), op.Constant(value_ints=[1, 3 * H]))
        k += 3
    return (w, r, b, p), k


def _cat0(values):
    return values[0] if len(values) == 1 else op.Concat(*values, axis=0)


def nn_rnn_to_onnx(x, h0, c0, params, seq_lengths=None, dropout_mask=None, mode: str = "lstm_v2",
                   num_layers: int = 1, bidirectional: bool = False, has_bias: bool = True,
                   forget_bias: float = 0.0, cell_clip: float = 0.0,
                   use_peephole: bool = False):
    """The ONNX translation of blockrnn::nn_rnn (its schema's arguments; see _ops.py): one
    ONNX LSTM / GRU node per layer. Returns (y, h_n, c_n, reserve); the reserve (what the
    backward reads) and a GRU's c_n are empty tensors, unused by inference graphs."""
    _check_exportable(mode, seq_lengths, dropout_mask, cell_clip)
    lstm = mode.startswith("lstm")
    D = 2 if bidirectional else 1
    H = int(params[1].shape[1])  # weight_hh_l0 [G*H, H]
    direction = "bidirectional" if bidirectional else "forward"
    layer_in = x
    h_finals, c_finals = [], []
    k = 0
    for layer in range(num_layers):
        per_dir = []
        for _ in range(D):
            ps, k = _direction_params(mode, params, k, has_bias, use_peephole, forget_bias, H, x)
            per_dir.append(ps)
        w, r = (_cat0([ps[j] for ps in per_dir]) for j in range(2))
        b = None  # no bias (and no forget_bias): ONNX's default, zeros
        if per_dir[0][2] is not None:
            b = _cat0([ps[2] for ps in per_dir])
        starts = op.Constant(value_ints=[layer * D])
        ends = op.Constant(value_ints=[(layer + 1) * D])
        h_init = op.Slice(h0, starts, ends)
        if lstm:
            c_init = op.Slice(c0, starts, ends)
            p = _cat0([ps[3] for ps in per_dir]) if use_peephole else None
            y, y_h, y_c = op.LSTM(layer_in, w, r, b, None, h_init, c_init, p,
                                  direction=direction, hidden_size=H)
            c_finals.append(y_c)
        else:
            y, y_h = op.GRU(layer_in, w, r, b, None, h_init, direction=direction, hidden_size=H,
                            linear_before_reset=1 if mode == "gru_reset_after" else 0)
        h_finals.append(y_h)
        # Y [T, D, B, H] -> [T, B, D*H] (the directions side by side, as torch.nn's output)
        y = op.Transpose(y, perm=[0, 2, 1, 3])
        layer_in = op.Reshape(y, op.Constant(value_ints=[0, 0, D * H]))
    empty = op.CastLike(op.ConstantOfShape(op.Constant(value_ints=[0])), x)
    c_n = _cat0(c_finals) if lstm else empty
    return layer_in, _cat0(h_finals), c_n, empty


def _per_op_refused(name: str):
    def refuse(*args, **kwargs):
        raise OnnxExportError(
            f"blockrnn.torch ONNX export: blockrnn::{name} (the per-op path of the padded "
            f"fallback) is not exported; export a module with USE_SEQ_LENGTHS on")
    refuse.__name__ = f"{name}_to_onnx"
    return refuse


def onnx_translation_table() -> dict:
    """The `custom_translation_table` for torch.onnx.export(..., dynamo=True) of models with
    blockrnn.torch modules: blockrnn::nn_rnn -> ONNX LSTM / GRU; the per-op custom ops (used
    only for the padded fallback) raise OnnxExportError."""
    ops = torch.ops.blockrnn
    table = {ops.nn_rnn.default: nn_rnn_to_onnx}
    for name in ("lstm", "gru_reset_after", "gru_reset_before"):
        table[getattr(ops, name).default] = _per_op_refused(name)
    return table


def onnx_export(model: torch.nn.Module, args: tuple, f=None, *,
                custom_translation_table: Optional[dict] = None, **kwargs):
    """torch.onnx.export(model, args, f, dynamo=True, ...) with blockrnn's translations added
    to `custom_translation_table` (entries passed in take precedence). Other keyword arguments
    go to torch.onnx.export unchanged. Returns its ONNXProgram."""
    if kwargs.get("dynamo", True) is not True:
        raise ValueError("blockrnn.torch.onnx_export: dynamo must be True (blockrnn's ops are "
                         "translated by the torch.export-based exporter only)")
    kwargs["dynamo"] = True
    from ._modules import RNNBase
    for m in model.modules():
        half = [p.dtype for p in m.parameters(recurse=False)
                if p.dtype in (torch.float16, torch.bfloat16)]
        if isinstance(m, RNNBase) and half:
            raise OnnxExportError(
                f"blockrnn.torch ONNX export: a {half[0]} blockrnn.torch.{type(m).__name__} is not "
                f"exported (the ONNX LSTM / GRU nodes are exported for float32 and float64 "
                f"modules); export a float32 or float64 module")
    table = onnx_translation_table()
    table.update(custom_translation_table or {})
    return torch.onnx.export(model, args, f, custom_translation_table=table, **kwargs)


__all__ = ["OnnxExportError", "nn_rnn_to_onnx", "onnx_translation_table", "onnx_export"]
