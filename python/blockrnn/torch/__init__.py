"""blockrnn.torch: drop-in torch.nn.LSTM / torch.nn.GRU on blockrnn's fused sequence ops.

    import blockrnn.torch as brt
    lstm = brt.LSTM(input_size, hidden_size, num_layers=2, bidirectional=True)
    lstm.load_state_dict(torch_lstm.state_dict())     # same names and shapes as torch.nn.LSTM
    out, (h_n, c_n) = lstm(x)

Needs torch (`pip install blockrnn[torch]`); the core package `blockrnn` never imports it.
The modules run their whole stack (layers, directions, dropout, lengths) through the library in
one custom op each way, `blockrnn::nn_rnn` and `blockrnn::nn_rnn_grad` (on the modules' own
parameters; `blockrnn::rnn` and `blockrnn::rnn_grad` take the ops' layout; in eager mode the
modules call the same code as an autograd.Function, which torch.func's transforms accept);
the per-op custom ops
`blockrnn::lstm`, `blockrnn::lstm_grad`, `blockrnn::gru_reset_after(_grad)`,
`blockrnn::gru_reset_before(_grad)` serve the padded fallback. ONNX export:
`blockrnn.torch.onnx_export(model, args, f)` (ONNX LSTM / GRU nodes). See docs/torch.md.
"""
try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("blockrnn.torch needs PyTorch: pip install 'blockrnn[torch]' "
                      "(or pip install torch)") from e

import importlib.util as _ilu
import sys as _sys

if "tensorflow" in _sys.modules and "triton" not in _sys.modules \
        and _ilu.find_spec("triton") is not None:
    # torch.library custom ops load torch._dynamo on their first call, which imports triton;
    # triton's bundled LLVM and TensorFlow's abort the process ("Option ... registered more
    # than once") when TensorFlow was loaded first. Fail clearly instead of aborting later.
    raise ImportError(
        "blockrnn.torch: tensorflow was imported before torch's compiler stack; with PyPI's "
        "wheels, triton (loaded by torch custom ops) then aborts the process. Import "
        "blockrnn.torch (or torch._dynamo) before tensorflow (docs/torch.md).")

import torch._dynamo as _dynamo  # noqa: E402,F401  (loads triton now, before any TensorFlow)

from . import _ops as ops  # noqa: E402
from ._modules import GRU, LSTM, gru_weights_from_keras, gru_weights_to_keras  # noqa: E402

__all__ = ["LSTM", "GRU", "ops", "gru_weights_from_keras", "gru_weights_to_keras"]

# (not in __all__: a star import must not need onnx / onnxscript)
_ONNX_NAMES = ("onnx_export", "onnx_translation_table", "OnnxExportError")


def __getattr__(name):
    # ONNX export needs onnx and onnxscript: imported on first use only
    if name in _ONNX_NAMES:
        from . import _onnx
        return getattr(_onnx, name)
    raise AttributeError(f"module 'blockrnn.torch' has no attribute '{name}'")
