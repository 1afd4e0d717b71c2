"""blockrnn.torch.LSTM and blockrnn.torch.GRU: torch.nn.LSTM / torch.nn.GRU on blockrnn's ops.

Layers, directions, dropout between layers and per-example lengths run in the library: one
blockrnn::nn_rnn custom op call for the forward of the whole stack and one blockrnn::nn_rnn_grad
for its backward (blockrnn.RNN, blockrnn/layer.h), on the module's parameters themselves (the
op maps them onto the ops' layout when it packs them; in eager mode the same code runs as an
autograd.Function, _ops.nn_rnn_call, so that torch.func's transforms work). This module
checks the call as torch.nn does, draws the dropout masks with torch's RNG, and handles
PackedSequence, batch_first, unbatched input and hx, in float32, float64, float16 and bfloat16
alike. Only the
padded fallback (USE_SEQ_LENGTHS = False) goes layer by layer through the one-shot ops; see
docs/torch.md.
"""
import contextlib
import math
import numbers
import warnings
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from . import _ops
from .. import _cuda
from .._device import device_message

# Pass PackedSequence lengths to the ops' seq_lengths input when the core has it (the padded
# steps are then skipped); False forces the padded fallback (docs/torch.md).
USE_SEQ_LENGTHS = True


@contextlib.contextmanager
def _as_torch_nn(name: str):
    """Checks that raise torch.nn's own exception (type and message, so that code written
    for torch.nn catches and matches them unchanged) run inside this; it adds a note naming
    the blockrnn module, shown in the traceback."""
    try:
        yield
    except (TypeError, ValueError, RuntimeError) as e:
        if str(e).startswith("blockrnn"):  # one of blockrnn's own checks
            raise
        e.add_note(f"raised by blockrnn.torch.{name} (the same check and message as "
                   f"torch.nn.{name})")
        raise


class _Lengths:
    """Per-example lengths of a padded, time-major batch (from a PackedSequence, sorted by
    decreasing length): the index that reverses each sequence within its own length (its own
    inverse; padding positions map to themselves), the output mask and the last-step index."""

    def __init__(self, lengths: Tensor, steps: int, dtype, device):
        lengths = lengths.to(device=device, dtype=torch.int64)
        t = torch.arange(steps, device=device, dtype=torch.int64).unsqueeze(1)  # [T,1]
        valid = t < lengths.unsqueeze(0)  # [T,B]
        self.rev = torch.where(valid, lengths.unsqueeze(0) - 1 - t, t)
        self.mask = valid.to(dtype).unsqueeze(2)
        self.last = (lengths - 1).view(1, -1, 1)
        self.lengths = lengths

    def reverse(self, x: Tensor) -> Tensor:
        return x.gather(0, self.rev.unsqueeze(2).expand(x.shape))

    def final(self, seq: Tensor) -> Tensor:
        return seq.gather(0, self.last.expand(1, seq.shape[1], seq.shape[2])).squeeze(0)


class _ContiguousGrad(torch.autograd.Function):
    """Identity whose gradient is made contiguous: autograd gives a parameter the gradient of a
    transpose or a slice of a concatenation as a strided view, where torch.nn's is contiguous."""

    @staticmethod
    def forward(t):
        return t.view_as(t)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g.contiguous()


class RNNBase(nn.Module):
    """The modules' common base. Its name and __init__'s signature (mode first) are
    torch.nn.RNNBase's, so that Python's own errors for the constructor's arguments (an
    unknown keyword, too many positional arguments, a missing hidden_size) read as torch.nn's."""
    _gates = 0
    _name = ""
    __jit_unused_properties__ = ["_flat_weights", "all_weights"]  # Python-only conveniences

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        with _as_torch_nn(self._name):
            # torch.nn.RNNBase's checks, in its order, with its exception types and messages
            # (a model's error handling written for torch.nn sees the same errors).
            self.mode = mode
            self.input_size = input_size
            self.hidden_size = hidden_size
            self.num_layers = num_layers
            self.bias = bias
            self.batch_first = batch_first
            self.dropout = float(dropout)
            self.bidirectional = bidirectional
            self.proj_size = proj_size
            if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 \
                    or isinstance(dropout, bool):
                raise ValueError("dropout should be a number in range [0, 1] representing the "
                                 "probability of an element being zeroed")
            if dropout > 0 and num_layers == 1:
                warnings.warn("dropout option adds dropout after all but last recurrent layer, "
                              "so non-zero dropout expects num_layers greater than 1, but got "
                              f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
            if not isinstance(bias, bool):
                raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
            if not isinstance(batch_first, bool):
                raise TypeError(f"batch_first should be of type bool, got: "
                                f"{type(batch_first).__name__}")
            if not isinstance(input_size, int):
                raise TypeError(f"input_size should be of type int, got: "
                                f"{type(input_size).__name__}")
            if input_size <= 0:
                raise ValueError("input_size must be greater than zero")
            if not isinstance(hidden_size, int):
                raise TypeError(f"hidden_size should be of type int, got: "
                                f"{type(hidden_size).__name__}")
            if hidden_size <= 0:
                raise ValueError("hidden_size must be greater than zero")
            if num_layers <= 0:
                raise ValueError("num_layers must be greater than zero")
            if proj_size < 0:
                raise ValueError("proj_size should be a positive integer or zero to disable "
                                 "projections")
            if proj_size >= hidden_size:
                raise ValueError("proj_size has to be smaller than hidden_size")
            layers = range(num_layers)  # torch's TypeError for a non-integral num_layers
        if isinstance(proj_size, bool) or not isinstance(proj_size, numbers.Integral):
            # (torch.nn fails in torch.empty with a TypeError on the parameter's shape)
            raise TypeError(f"blockrnn.torch.{self._name}: proj_size should be of type int, "
                            f"got: {type(proj_size).__name__}")
        if proj_size != 0:
            # an argument value the module does not support: a ValueError, as torch.nn.GRU
            # refuses proj_size
            raise ValueError(
                f"blockrnn.torch.{self._name}: proj_size={proj_size} (an LSTM with "
                f"projections) is not supported by blockrnn; use torch.nn.LSTM for projected "
                f"LSTMs")
        fk = {"device": device, "dtype": dtype}
        dirs = 2 if bidirectional else 1
        self._num_directions = dirs
        g = self._gates * hidden_size
        self._flat_weights_names = []
        for layer in layers:
            layer_in = input_size if layer == 0 else hidden_size * dirs
            for d in range(dirs):
                sfx = self._suffix(layer, d)
                params = [("weight_ih" + sfx, (g, layer_in)), ("weight_hh" + sfx, (g, hidden_size))]
                if bias:
                    params += [("bias_ih" + sfx, (g,)), ("bias_hh" + sfx, (g,))]
                for pname, shape in params:
                    setattr(self, pname, nn.Parameter(torch.empty(shape, **fk)))
                    self._flat_weights_names.append(pname)
        self._extra_params(fk)
        self.reset_parameters()

    @staticmethod
    def _suffix(layer: int, d: int) -> str:
        return f"_l{layer}" + ("_reverse" if d == 1 else "")

    def _extra_params(self, fk):
        pass

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        per = 4 if self.bias else 2
        w = self._flat_weights
        return [w[i:i + per] for i in range(0, len(w), per)]

    def reset_parameters(self) -> None:
        """Every parameter ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as torch.nn does."""
        k = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for p in self.parameters():
            nn.init.uniform_(p, -k, k)

    def flatten_parameters(self) -> None:
        """No-op (cuDNN's flat weight buffer does not exist here); kept for drop-in use."""

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ------------------------------------------------------------------ forward plumbing

    def _layer_params(self, layer: int, d: int):
        """torch.nn's parameters of (layer, direction): w_ih, w_hh, b_ih, b_hh (None without
        bias), then the peephole vectors (LSTM with use_peephole; else none)."""
        sfx = self._suffix(layer, d)
        w_ih = getattr(self, "weight_ih" + sfx)
        w_hh = getattr(self, "weight_hh" + sfx)
        b_ih = b_hh = None
        if self.bias:
            b_ih, b_hh = getattr(self, "bias_ih" + sfx), getattr(self, "bias_hh" + sfx)
        return w_ih, w_hh, b_ih, b_hh, self._peepholes(sfx)

    def _peepholes(self, sfx: str):
        return ()

    def _op_params(self, layer: int, d: int):
        """(layer, direction)'s parameters in the layout of the op of _stack_mode() (the
        per-op path), their gradients arriving contiguous in torch.nn's layout."""
        w_ih, w_hh, b_ih, b_hh, peep = self._layer_params(layer, d)
        g = _ContiguousGrad.apply
        return _ops.nn_to_ops_layout(self._stack_mode()[0], self.hidden_size, g(w_ih), g(w_hh),
                                     None if b_ih is None else g(b_ih),
                                     None if b_hh is None else g(b_hh),
                                     tuple(g(p) for p in peep))

    def _check_device(self, t: Tensor) -> None:
        if t.device.type == "cuda":
            # A build with the CUDA backend runs eager modules there (_run_on_cuda); TorchScript
            # keeps the CPU-only stack.
            if torch.jit.is_scripting() or not _cuda_build():
                raise NotImplementedError(device_message(f"blockrnn.torch.{self.mode}", "input",
                                                         "CUDA"))
            return
        if t.device.type != "cpu":
            raise NotImplementedError(
                f"blockrnn.torch.{self.mode}: input is on device '{t.device}'; blockrnn runs "
                f"on the CPU only (a GPU backend is a separate issue)")

    def _check_call(self, x: Tensor, hx: Optional[List[Tensor]]) -> None:
        """torch.nn's checks of a time-major batch x [T, B, I] and the initial states hx
        ([L*D, B, H] each), with its exception types and messages."""
        w0 = self.weight_ih_l0
        if not torch.jit.is_scripting():  # (torch.nn's scripted modules skip it too)
            if x.dtype != w0.dtype:
                raise ValueError(f"RNN input dtype ({x.dtype}) does not match weight dtype "
                                 f"({w0.dtype}). Convert input: input.to({w0.dtype}), or "
                                 f"convert model: model.to({x.dtype})")
        if x.shape[2] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[2]}")
        # x.shape[1], not int(): a symbolic batch size (torch.export) must not be specialised
        expected = (self.num_layers * self._num_directions, x.shape[1], self.hidden_size)
        if hx is not None:
            for k, h in enumerate(hx):
                if list(h.shape) != [expected[0], expected[1], expected[2]]:
                    which = "hidden" if self.mode == "GRU" else f"hidden[{k}]"
                    raise RuntimeError(f"Expected {which} size {expected}, got {list(h.shape)}")
            for h in hx:
                if h.dtype != x.dtype:
                    raise RuntimeError(f"blockrnn.torch.{self.mode}: hx must have the "
                                       f"input's dtype {x.dtype}, got {h.dtype}")
        if x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")

    def _tensor_input(self, input: Tensor, hx: Optional[List[Tensor]]
                      ) -> Tuple[Tensor, Optional[List[Tensor]], bool]:
        """A Tensor input's checks (torch.nn's) and its time-major view: (x [T,B,I], hx
        [L*D,B,H] each or None, unbatched)."""
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"{self.mode}: Expected input to be 2D or 3D, got {input.dim()}D "
                             f"instead")
        unbatched = input.dim() == 2
        kind = "unbatched 2-D" if unbatched else "batched 3-D"
        if hx is not None:
            for h in hx:
                if h.dim() != input.dim():
                    if self.mode == "LSTM":
                        raise RuntimeError(f"For {kind} input, hx and cx should also be "
                                           f"{input.dim()}-D but got ({hx[0].dim()}-D, "
                                           f"{hx[1].dim()}-D) tensors")
                    raise RuntimeError(f"For {kind} input, hx should also be {input.dim()}-D "
                                       f"but got {h.dim()}-D tensor")
        self._check_device(input)
        if unbatched:
            x = input.unsqueeze(1)
            if hx is not None:
                hx = [h.unsqueeze(1) for h in hx]
        else:
            x = input.transpose(0, 1) if self.batch_first else input
        self._check_call(x, hx)
        return x, hx, unbatched

    def _initial_states(self, x: Tensor, hx: Optional[List[Tensor]]) -> List[Tensor]:
        """hx, or zeros [L*D, B, H] (h_0, and c_0 for the LSTM)."""
        if hx is not None:
            return hx
        shape = (self.num_layers * self._num_directions, x.shape[1], self.hidden_size)
        z = torch.zeros(shape, dtype=x.dtype, device=x.device)
        return [z, z] if self.mode == "LSTM" else [z]

    def _forward_tensor(self, input: Tensor, hx: Optional[List[Tensor]]
                        ) -> Tuple[Tensor, List[Tensor]]:
        """forward on a Tensor input (TorchScript's path, and eager's through _forward_eager):
        the output and the final states, in torch.nn's shapes."""
        x, hxl, unbatched = self._checked_tensor_input(input, hx)
        out, states = self._run_stack(x, self._initial_states(x, hxl))
        if unbatched:
            return out.squeeze(1), [s.squeeze(1) for s in states]
        if self.batch_first:
            return out.transpose(0, 1), states
        return out, states

    def _checked_tensor_input(self, input: Tensor, hx: Optional[List[Tensor]]
                              ) -> Tuple[Tensor, Optional[List[Tensor]], bool]:
        if torch.jit.is_scripting():
            return self._tensor_input(input, hx)
        return self._tensor_input_noted(input, hx)

    @torch.jit.unused
    def _tensor_input_noted(self, input: Tensor, hx: Optional[List[Tensor]]
                            ) -> Tuple[Tensor, Optional[List[Tensor]], bool]:
        with _as_torch_nn(self.mode):
            return self._tensor_input(input, hx)

    @torch.jit.unused
    def _forward_eager(self, input, hx: Optional[List[Tensor]]) -> Tuple[Tensor, List[Tensor]]:
        """forward outside TorchScript: a Tensor, or a PackedSequence (unpacked to a padded,
        time-major batch sorted by length, run with the lengths and packed again)."""
        if not isinstance(input, (Tensor, PackedSequence)):
            raise TypeError(f"blockrnn.torch.{self.mode}: input must be a Tensor or a "
                            f"PackedSequence, got {type(input).__name__}")
        if isinstance(input, Tensor):
            return self._forward_tensor(input, hx)
        data, batch_sizes, sorted_idx, unsorted_idx = input
        self._check_device(data)
        x, lengths = pad_packed_sequence(PackedSequence(data, batch_sizes))
        with _as_torch_nn(self.mode):
            self._check_call(x, hx)
        if hx is not None and sorted_idx is not None:
            # each example's initial state goes with it into the sorted batch
            hx = [h.index_select(1, sorted_idx) for h in hx]
        lens = _Lengths(lengths, x.shape[0], x.dtype, x.device)
        out, states = self._run_layers(x, lens, self._initial_states(x, hx))
        data = pack_padded_sequence(out, lens.lengths.cpu(), enforce_sorted=True).data
        out = PackedSequence(data, batch_sizes, sorted_idx, unsorted_idx)
        if unsorted_idx is not None:
            states = [s.index_select(1, unsorted_idx) for s in states]
        return out, states

    def __prepare_scriptable__(self):
        # torch.jit.script: the scripted forward takes the parameters from this list (scripting
        # fixes a module's parameters)
        self._script_params = self._stack_params()
        return self

    def _stack_params(self):
        """The parameters themselves, layer-major then direction, in the order of
        blockrnn::nn_rnn's `params`: weight_ih, weight_hh, (bias_ih, bias_hh), (peepholes)."""
        dirs = 2 if self.bidirectional else 1
        out = []
        for layer in range(self.num_layers):
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, peep = self._layer_params(layer, d)
                out += [w_ih, w_hh, *([b_ih, b_hh] if self.bias else []), *peep]
        return out

    def _dropout_masks(self, x: Tensor, T: int, B: int) -> Optional[Tensor]:
        """[L-1, T, B, D*H] masks scaled as torch's dropout multiplies (0 or 1/(1-p)), drawn
        with torch's RNG one layer after another; None when no dropout applies."""
        if not (self.dropout > 0 and self.training and self.num_layers > 1):
            return None
        shape = (self.num_layers - 1, T, B, self._num_directions * self.hidden_size)
        if self.dropout >= 1:
            return x.new_zeros(shape)
        return x.new_empty(shape).bernoulli_(1 - self.dropout).div_(1 - self.dropout)

    @torch.jit.unused
    def _run_on_cuda(self, x: Tensor, seq_lengths: Optional[Tensor],
                     init_states: List[Tensor]) -> Tuple[Tensor, List[Tensor]]:
        """A batch without lengths on CUDA tensors (a build with the CUDA backend): one sequence
        op per (layer, direction) through the custom ops, forward and backward on the device on
        torch's current stream (the layer objects of nn_rnn are CPU-only)."""
        if seq_lengths is not None:
            raise NotImplementedError(f"blockrnn.torch.{self.mode}: lengths are not supported on "
                                      f"CUDA tensors yet")
        return self._run_layers_per_op(x, None, init_states)

    def _run_layers(self, x, lens, init_states):
        """init_states: list over state kinds of [L*D,B,H]; lens: the lengths or None. Returns
        out [T,B,D*H] and the final states (list over kinds of [L*D,B,H])."""
        if x.device.type == "cuda":
            # the masked per-op fallback: the CUDA ops take no seq_lengths yet
            return self._run_layers_per_op(x, lens, init_states, lengths_input=False)
        if lens is not None and not USE_SEQ_LENGTHS:
            return self._run_layers_per_op(x, lens, init_states)
        return self._run_stack_on(x, None if lens is None else lens.lengths.cpu(), init_states)

    def _run_stack(self, x: Tensor, init_states: List[Tensor]) -> Tuple[Tensor, List[Tensor]]:
        """The stack on a batch without lengths."""
        return self._run_stack_on(x, None, init_states)

    def _run_stack_on(self, x: Tensor, seq_lengths: Optional[Tensor],
                      init_states: List[Tensor]) -> Tuple[Tensor, List[Tensor]]:
        """blockrnn::nn_rnn on x [T,B,I] (float16, bfloat16, float32, float64), optional
        lengths."""
        if x.device.type == "cuda" and not torch.jit.is_scripting():
            return self._run_on_cuda(x, seq_lengths, init_states)
        T, B = x.shape[0], x.shape[1]
        mode, fb, clip, peep = self._stack_mode()
        h0 = init_states[0].contiguous()
        c0: Optional[Tensor] = None
        if len(init_states) > 1:
            c0 = init_states[1].contiguous()
        params, masks = self._params(), self._dropout_masks(x, T, B)
        if torch.jit.is_scripting():
            y, h_n, c_n, _ = torch.ops.blockrnn.nn_rnn(
                x, h0, c0, params, seq_lengths, masks, mode, self.num_layers,
                self._num_directions == 2, self.bias, fb, clip, peep)
        else:
            y, h_n, c_n, _ = self._eager_stack(x, h0, c0, params, seq_lengths, masks, mode, fb,
                                               clip, peep)
        if c0 is not None:
            return y, [h_n, c_n]
        return y, [h_n]

    @torch.jit.unused
    def _eager_stack(self, x: Tensor, h0: Tensor, c0: Optional[Tensor], params: List[Tensor],
                     seq_lengths: Optional[Tensor], masks: Optional[Tensor], mode: str,
                     fb: float, clip: float,
                     peep: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """nn_rnn outside TorchScript (_ops.nn_rnn_call: the op under a compiler or tracer, the
        autograd.Function that torch.func's transforms accept in eager mode)."""
        return _ops.nn_rnn_call(x, h0, c0, params, seq_lengths, masks, mode, self.num_layers,
                                self._num_directions == 2, self.bias, fb, clip, peep)

    def _params(self) -> List[Tensor]:
        """The parameters in blockrnn::nn_rnn's order (scripted: as they were when scripted)."""
        if torch.jit.is_scripting():
            return self._script_params
        return self._eager_params()

    @torch.jit.unused
    def _eager_params(self) -> List[Tensor]:
        return self._stack_params()

    def _run_layers_per_op(self, x, lens, init_states, lengths_input=True):
        """The stack in Python, one sequence op per (layer, direction): the padded fallback
        (USE_SEQ_LENGTHS off: the ops run on the padding and the steps past each length are
        masked)."""
        dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in init_states]
        sl = None
        if lens is not None and USE_SEQ_LENGTHS and _ops.HAS_SEQ_LENGTHS and lengths_input:
            sl = lens.lengths.cpu()
        inp = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                xin = inp
                if d == 1:
                    xin = inp.flip(0) if lens is None else lens.reverse(inp)
                seq_out, seq_states = self._cell_sequence(
                    xin, [s[k] for s in init_states], layer, d, sl)
                for kind, s in enumerate(seq_states):
                    finals[kind].append(s[-1] if lens is None else lens.final(s))
                if d == 1:
                    seq_out = seq_out.flip(0) if lens is None else lens.reverse(seq_out)
                if lens is not None and sl is None:
                    # without seq_lengths the steps past each length were computed on padding
                    seq_out = seq_out * lens.mask
                outs.append(seq_out)
            inp = outs[0] if dirs == 1 else torch.cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                inp = F.dropout(inp, self.dropout, training=True)
        return inp, [torch.stack(f, 0) for f in finals]


@torch.jit.unused
def _cuda_build() -> bool:
    """Whether blockrnn is built with its CUDA backend (docs/cuda.md, "Python")."""
    return _cuda.available()


_RNNBase = RNNBase  # (the former name)


class LSTM(RNNBase):
    """Drop-in torch.nn.LSTM on blockrnn's BlockLSTMV2 (see docs/torch.md).

    Same constructor, parameters (weight_ih_l{k}[_reverse], weight_hh_..., bias_ih_...,
    bias_hh_...) and forward as torch.nn.LSTM. TensorFlow extras (keyword-only):
      use_peephole: adds parameters weight_ci_l{k}[_reverse], weight_cf_..., weight_co_...
        (each [hidden_size]): i and f see c[t-1], o sees c[t] (TensorFlow's BlockLSTM).
      cell_clip: clip the cell state to [-cell_clip, cell_clip] (None or <= 0: no clipping).
      forget_bias: added to the forget gate's pre-activation (TensorFlow's BlockLSTM; runs on
        BlockLSTM in TensorFlow's gate order i,c,f,o). Default 0.0, i.e. torch's LSTM.
    proj_size > 0 raises a ValueError naming it (torch.nn's range checks on it apply first).
    """
    _gates = 4
    _name = "LSTM"
    cell_clip: Optional[float]  # (the attribute's type, for TorchScript)

    def __init__(self, *args, use_peephole: bool = False, cell_clip: Optional[float] = None,
                 forget_bias: float = 0.0, **kwargs):
        if not isinstance(use_peephole, bool):
            raise TypeError(f"blockrnn.torch.LSTM: use_peephole should be of type bool, got: "
                            f"{type(use_peephole).__name__}")
        for arg, v in (("cell_clip", cell_clip), ("forget_bias", forget_bias)):
            if (v is not None or arg == "forget_bias") and (
                    isinstance(v, bool) or not isinstance(v, numbers.Real)):
                raise TypeError(f"blockrnn.torch.LSTM: {arg} should be a real number"
                                f"{' or None' if arg == 'cell_clip' else ''}, got: "
                                f"{type(v).__name__}")
        self.use_peephole = use_peephole
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.forget_bias = float(forget_bias)
        super().__init__("LSTM", *args, **kwargs)

    def _extra_params(self, fk):
        if not self.use_peephole:
            return
        dirs = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            for d in range(dirs):
                for g in ("ci", "cf", "co"):
                    setattr(self, f"weight_{g}" + self._suffix(layer, d),
                            nn.Parameter(torch.empty(self.hidden_size, **fk)))

    def extra_repr(self) -> str:
        s = super().extra_repr()
        if self.use_peephole:
            s += ", use_peephole=True"
        if self.cell_clip is not None:
            s += f", cell_clip={self.cell_clip}"
        if self.forget_bias != 0.0:
            s += f", forget_bias={self.forget_bias}"
        return s

    def _peepholes(self, sfx: str):
        if not self.use_peephole:
            return ()
        return tuple(getattr(self, f"weight_{g}" + sfx) for g in ("ci", "cf", "co"))

    def _stack_mode(self) -> Tuple[str, float, float, bool]:
        c = self.cell_clip
        clip = 0.0 if c is None else c
        mode = "lstm" if self.forget_bias != 0.0 else "lstm_v2"
        return mode, self.forget_bias, clip, self.use_peephole

    def _cell_sequence(self, x, states, layer, d, seq_lengths=None):
        h0, c0 = states
        w, b, *peep = self._op_params(layer, d)
        wci, wcf, wco = peep if peep else [w.new_zeros(self.hidden_size)] * 3
        tf_order = self.forget_bias != 0.0
        clip = 0.0 if self.cell_clip is None else float(self.cell_clip)
        i, cs, f, o, ci, co, h = _ops.lstm(x, c0, h0, w, wci, wcf, wco, b, self.forget_bias,
                                           clip, self.use_peephole, tf_order, seq_lengths)
        return h, (h, cs)

    @torch.jit.unused
    def _check_two_states(self, hx) -> None:
        # torch.nn.LSTM's backend's error (a third state used to be ignored); with one state
        # hx[1] raises torch.nn's IndexError
        if len(hx) > 2:
            with _as_torch_nn("LSTM"):
                raise RuntimeError("lstm expects two hidden states")

    def forward(self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None
                ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        # input: a Tensor or (outside TorchScript) a PackedSequence
        hxl: Optional[List[Tensor]] = None
        if hx is not None:
            if not torch.jit.is_scripting():
                self._check_two_states(hx)
            hxl = [hx[0], hx[1]]
        if torch.jit.is_scripting():
            out, states = self._forward_tensor(input, hxl)
        else:
            out, states = self._forward_eager(input, hxl)
        return out, (states[0], states[1])


class GRU(RNNBase):
    """Drop-in torch.nn.GRU on blockrnn's ops (see docs/torch.md).

    reset_after=True (default): PyTorch's GRU exactly (BlockGRUResetAfter), same parameters.
    reset_after=False: TensorFlow's GRUBlockCell / Keras GRU(reset_after=False) variant
    (BlockGRU): the reset gate multiplies h[t-1] before the recurrent product of the candidate.
    Parameters keep torch's names and shapes (rows r, z, n); the mapping to TensorFlow's
    w_ru, w_c, b_ru, b_c is in docs/torch.md (bias_ih and bias_hh are summed), and
    blockrnn.torch.gru_weights_from_keras / gru_weights_to_keras convert Keras weights.
    """
    _gates = 3
    _name = "GRU"

    def __init__(self, *args, reset_after: bool = True, **kwargs):
        if not isinstance(reset_after, bool):
            raise TypeError(f"blockrnn.torch.GRU: reset_after should be of type bool, got: "
                            f"{type(reset_after).__name__}")
        self.reset_after = reset_after
        with _as_torch_nn("GRU"):
            if "proj_size" in kwargs:
                raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.reset_after else s + ", reset_after=False"

    def _stack_mode(self) -> Tuple[str, float, float, bool]:
        return ("gru_reset_after" if self.reset_after else "gru"), 0.0, 0.0, False

    def _cell_sequence(self, x, states, layer, d, seq_lengths=None):
        (h0,) = states
        # reset-after: weight_ihᵀ, weight_hhᵀ as transposed views (the one-shot ops read them
        # strided); reset-before: the concatenated w_ru, w_c (copies)
        params = self._op_params(layer, d)
        if self.reset_after:
            r, u, n, hn, h = _ops.gru_reset_after(x, h0, *params, seq_lengths)
        else:
            r, u, c, h = _ops.gru_reset_before(x, h0, *params, seq_lengths)
        return h, (h,)

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        # input: a Tensor or (outside TorchScript) a PackedSequence
        hxl: Optional[List[Tensor]] = None
        if hx is not None:
            hxl = [hx]
        if torch.jit.is_scripting():
            out, states = self._forward_tensor(input, hxl)
        else:
            out, states = self._forward_eager(input, hxl)
        return out, states[0]


# ------------------------------------------------------------------ Keras conversion helpers

def _keras_perm(H: int) -> np.ndarray:
    # Keras' column blocks z, r, h <-> torch's rows r, z, n (the swap is its own inverse).
    return np.concatenate([np.arange(H, 2 * H), np.arange(0, H), np.arange(2 * H, 3 * H)])


def gru_weights_from_keras(kernel, recurrent_kernel, bias=None, *, layer: int = 0,
                           reverse: bool = False) -> dict:
    """Keras GRU weights -> a state_dict fragment of blockrnn.torch.GRU (or torch.nn.GRU).

    kernel [I,3H] and recurrent_kernel [H,3H] have column blocks z, r, h. bias is [3H]
    (Keras GRU(reset_after=False): goes to bias_ih, bias_hh is zero; load into
    GRU(reset_after=False)) or [2,3H] (reset_after=True: rows input and recurrent bias), or
    None (use_bias=False). Use with module.load_state_dict(d, strict=False) or merge dicts for
    several layers. Keras must use activation="tanh", recurrent_activation="sigmoid"."""
    kernel = np.asarray(kernel)
    recurrent_kernel = np.asarray(recurrent_kernel)
    H = recurrent_kernel.shape[0]
    if kernel.ndim != 2 or kernel.shape[1] != 3 * H or recurrent_kernel.shape != (H, 3 * H):
        raise ValueError(f"gru_weights_from_keras: kernel must be [I,3H] and recurrent_kernel "
                         f"[H,3H], got {list(kernel.shape)} and {list(recurrent_kernel.shape)}")
    p = _keras_perm(H)
    sfx = RNNBase._suffix(layer, 1 if reverse else 0)
    out = {"weight_ih" + sfx: torch.from_numpy(np.ascontiguousarray(kernel[:, p].T)),
           "weight_hh" + sfx: torch.from_numpy(np.ascontiguousarray(recurrent_kernel[:, p].T))}
    if bias is not None:
        bias = np.asarray(bias)
        if bias.shape == (3 * H,):
            out["bias_ih" + sfx] = torch.from_numpy(np.ascontiguousarray(bias[p]))
            out["bias_hh" + sfx] = torch.zeros(3 * H, dtype=out["bias_ih" + sfx].dtype)
        elif bias.shape == (2, 3 * H):
            out["bias_ih" + sfx] = torch.from_numpy(np.ascontiguousarray(bias[0][p]))
            out["bias_hh" + sfx] = torch.from_numpy(np.ascontiguousarray(bias[1][p]))
        else:
            raise ValueError(f"gru_weights_from_keras: bias must be [3H] or [2,3H] with "
                             f"H={H}, got {list(bias.shape)}")
    return out


def gru_weights_to_keras(module: GRU, *, layer: int = 0, reverse: bool = False):
    """(kernel [I,3H], recurrent_kernel [H,3H], bias) as numpy arrays for a Keras GRU with the
    module's variant: bias [3H] = (bias_ih + bias_hh) for reset_after=False (TensorFlow's
    variant has one bias set), [2,3H] for reset_after=True; None when bias=False."""
    sfx = RNNBase._suffix(layer, 1 if reverse else 0)
    H = module.hidden_size
    p = _keras_perm(H)
    with torch.no_grad():
        w_ih = getattr(module, "weight_ih" + sfx).cpu().numpy()
        w_hh = getattr(module, "weight_hh" + sfx).cpu().numpy()
        kernel = np.ascontiguousarray(w_ih.T[:, p])
        rec = np.ascontiguousarray(w_hh.T[:, p])
        if not module.bias:
            return kernel, rec, None
        b_ih = getattr(module, "bias_ih" + sfx).cpu().numpy()
        b_hh = getattr(module, "bias_hh" + sfx).cpu().numpy()
    if getattr(module, "reset_after", True):
        return kernel, rec, np.stack([b_ih[p], b_hh[p]])
    return kernel, rec, (b_ih + b_hh)[p]
