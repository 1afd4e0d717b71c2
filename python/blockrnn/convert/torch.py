"""PyTorch recurrent modules -> blockrnn models.

torch.nn.LSTM -> BlockLSTMV2 (torch's gate order i, f, g, o): w = [weight_ihᵀ; weight_hhᵀ]
[I+H, 4H], b = bias_ih + bias_hh. torch.nn.GRU -> BlockGRUResetAfter: w_i = weight_ihᵀ,
w_h = weight_hhᵀ, b_i = bias_ih, b_h = bias_hh (gates r, z, n). bias=False gives zero biases;
num_layers and bidirectional (concat) carry over; dropout and batch_first do not change the
model (the file is time-major; dropout only acts in training). proj_size > 0 is refused.
blockrnn.torch modules keep their extras: LSTM forget_bias (-> BlockLSTM, gates i, c, f, o),
cell_clip and peepholes; GRU(reset_after=False) -> BlockGRU.
"""
import numpy as np

from ..model import LayerConfig, Model
from .keras import ConversionError

__all__ = ["from_torch"]


def _np(t):
    return t.detach().cpu().numpy()


def _layout(kind, H, I, p):
    """Op-layout weights of one (layer, direction) from torch-named arrays p."""
    w_ih, w_hh = p["weight_ih"], p["weight_hh"]
    G = w_hh.shape[0]
    zeros = np.zeros(G, w_ih.dtype)
    b_ih, b_hh = p.get("bias_ih", zeros), p.get("bias_hh", zeros)
    if kind in ("BlockLSTM", "BlockLSTMV2"):
        w = np.concatenate([w_ih.T, w_hh.T], axis=0)
        b = b_ih + b_hh
        if kind == "BlockLSTM":  # torch's i, f, g, o -> TensorFlow's i, c, f, o
            order = (0, 2, 1, 3)
            w = np.concatenate([w[:, k * H:(k + 1) * H] for k in order], axis=1)
            b = np.concatenate([b[k * H:(k + 1) * H] for k in order])
        out = {"w": w, "b": b}
        if "weight_ci" in p:
            out.update(wci=p["weight_ci"], wcf=p["weight_cf"], wco=p["weight_co"])
        return out
    if kind == "BlockGRU":
        H2 = 2 * H
        return {"w_ru": np.concatenate([w_ih[:H2].T, w_hh[:H2].T], axis=0),
                "w_c": np.concatenate([w_ih[H2:].T, w_hh[H2:].T], axis=0),
                "b_ru": b_ih[:H2] + b_hh[:H2], "b_c": b_ih[H2:] + b_hh[H2:]}
    return {"w_i": w_ih.T, "w_h": w_hh.T, "b_i": b_ih, "b_h": b_hh}


def _from_state_dict(sd, kind_of_gru, lstm_attrs, where, source):
    """The Model of a torch.nn.LSTM / GRU state_dict (names weight_ih_l{k}[_reverse], ...)."""
    arrays = {k: (_np(v) if hasattr(v, "detach") else np.asarray(v)) for k, v in sd.items()}
    if any(k.startswith("weight_hr_l") for k in arrays):
        raise ConversionError(f"{where}: proj_size > 0 (weight_hr_l*: an LSTM with "
                              f"projections) has no blockrnn op")
    L = 0
    while f"weight_ih_l{L}" in arrays:
        L += 1
    if L == 0:
        raise ConversionError(f"{where}: no weight_ih_l0: not the state_dict of a "
                              f"torch.nn.LSTM or torch.nn.GRU (keys: {sorted(arrays)[:8]})")
    D = 2 if "weight_ih_l0_reverse" in arrays else 1
    w_hh = arrays["weight_hh_l0"]
    if w_hh.ndim != 2 or w_hh.shape[0] % w_hh.shape[1]:
        raise ConversionError(f"{where}: weight_hh_l0 must be [G·H, H], got {list(w_hh.shape)}")
    H = w_hh.shape[1]
    gates = w_hh.shape[0] // H
    if gates == 4:
        kind = "BlockLSTM" if lstm_attrs.get("forget_bias", 0.0) else "BlockLSTMV2"
    elif gates == 3:
        kind = kind_of_gru
    else:
        raise ConversionError(f"{where}: weight_hh_l0 has {gates}·H rows: neither an LSTM "
                              f"(4) nor a GRU (3)")
    used = set()
    layers, weights = [], []
    for l in range(L):
        dirs = []
        for d in range(D):
            sfx = f"_l{l}" + ("_reverse" if d else "")
            p = {}
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_ci",
                         "weight_cf", "weight_co"):
                if name + sfx in arrays:
                    p[name] = arrays[name + sfx]
                    used.add(name + sfx)
            for need in ("weight_ih", "weight_hh"):
                if need not in p:
                    raise ConversionError(f"{where}: {need}{sfx} is missing")
            if ("bias_ih" in p) != ("bias_hh" in p):
                raise ConversionError(f"{where}: bias_ih{sfx} and bias_hh{sfx} must both be "
                                      f"present or both absent")
            I = p["weight_ih"].shape[1] if p["weight_ih"].ndim == 2 else -1
            dirs.append(_layout(kind, H, I, p))
        layers.append(LayerConfig(kind, H, directions=D, merge="concat" if D == 2 else None,
                                  **(lstm_attrs if kind.startswith("BlockLSTM") else {})))
        weights.append(dirs)
    extra = sorted(set(arrays) - used)
    if extra:
        raise ConversionError(f"{where}: unexpected state_dict entries {extra}")
    dtypes = {a.dtype for d in weights for p in d for a in p.values()}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
        raise ConversionError(f"{where}: parameters of dtype {sorted(map(str, dtypes))}; "
                              f"blockrnn models are float32 or float64 throughout")
    I = arrays["weight_ih_l0"].shape[1]
    try:
        return Model(next(iter(dtypes)), I, layers, weights, source=source)
    except ConversionError:
        raise
    except ValueError as e:
        raise ConversionError(f"{where}: {e}") from None


def from_torch(module, *, reset_after=True):
    """The Model of a torch.nn.LSTM / torch.nn.GRU, a blockrnn.torch.LSTM / GRU, or the
    state_dict of a torch.nn.LSTM / GRU (a GRU state_dict is PyTorch's reset-after GRU unless
    reset_after=False: a state_dict does not say)."""
    import torch

    version = torch.__version__
    if isinstance(module, dict):
        return _from_state_dict(module, "BlockGRUResetAfter" if reset_after else "BlockGRU",
                                {}, "state_dict", {"framework": "torch", "version": version,
                                                   "object": "state_dict"})
    if not isinstance(module, torch.nn.Module):
        raise ConversionError(f"from_torch: expected a torch.nn.LSTM / GRU module or its "
                              f"state_dict, got {type(module).__name__}")
    name = type(module).__module__ + "." + type(module).__name__
    where = name
    if getattr(module, "proj_size", 0):
        raise ConversionError(f"{where}: proj_size={module.proj_size} (an LSTM with "
                              f"projections) has no blockrnn op")
    mode = getattr(module, "mode", None)
    lstm_attrs = {}
    from_blockrnn = type(module).__module__.startswith("blockrnn.")
    if mode == "LSTM":
        if from_blockrnn:
            clip = module.cell_clip
            lstm_attrs = {"forget_bias": float(module.forget_bias),
                          "cell_clip": float(clip) if clip is not None and clip > 0 else None,
                          "use_peephole": bool(module.use_peephole)}
        gru_kind = None
    elif mode == "GRU":
        gru_kind = "BlockGRUResetAfter" if getattr(module, "reset_after", True) else "BlockGRU"
    else:
        raise ConversionError(f"{where}: not an LSTM or GRU module (mode={mode!r}); blockrnn "
                              f"converts torch.nn.LSTM, torch.nn.GRU and blockrnn.torch's")
    source = {"framework": "blockrnn.torch" if from_blockrnn else "torch", "version": version,
              "object": name}
    return _from_state_dict(module.state_dict(), gru_kind, lstm_attrs, where, source)
