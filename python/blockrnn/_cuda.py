"""The ops on arrays in CUDA device memory, in an extension built with its CUDA backend
(`pip install . -C cmake.define.BLOCKRNN_PYTHON_CUDA=ON`; docs/cuda.md, "Python").

An argument is read without a copy from, in this order:
  - a torch CUDA tensor: its data pointer, shape, strides and dtype;
  - `__cuda_array_interface__` (versions 2 and 3: CuPy, Numba, PyTorch, ...): `shape`, `typestr`,
    `data` (pointer, read-only flag), `strides` (None or C-contiguous), `mask` (None), `stream`;
  - DLPack (`__dlpack_device__` CUDA or CUDA managed; `__dlpack__(stream=...)`).
Device arrays must be C-contiguous (no strided gathers on the device) in native byte order, of
float16, float32 or float64; seq_len_max is a host integer (TensorFlow's GPU kernels take it in
host memory too). Every floating argument of a call must be on the same CUDA device; an array in
host memory among device arrays is refused by name, never copied.

Streams: the op runs on the caller's stream: torch's current stream when an argument is a torch
tensor, CuPy's current stream when one is a CuPy array, else the stream set with
`blockrnn.cuda_stream(...)`, else the legacy default stream. It waits for each input's
`__cuda_array_interface__` `stream` (an event), and a DLPack producer is told the stream
(`__dlpack__(stream=...)`), so no synchronisation happens on the host. Outputs are allocated on
the device of the inputs: torch tensors (torch's allocator, on its current stream) when an input
is a torch tensor, else DeviceArray objects exposing `__cuda_array_interface__` (version 3, with
the op's stream) and `__dlpack__`, which CuPy, Numba and torch read without a copy.

Everything about an argument is checked before anything is allocated: the descriptors here, the
shapes and dtypes by the core (the CPU path's validation), then that a device exists and that
every pointer is device memory on one device.
"""
import contextlib
import numbers
import sys
import threading

import numpy as np

from . import _core

# typestr (the CUDA array interface's numpy-style type) of the dtypes the device ops take.
_TYPESTR = {"<f2": "float16", "<f4": "float32", "<f8": "float64", "<i8": "int64"}
_ITEMSIZE = {"float16": 2, "float32": 4, "float64": 8, "int64": 8}
_DLPACK_CUDA = {2: "CUDA", 13: "CUDA managed"}
_LEGACY_DEFAULT_STREAM = 1

_local = threading.local()


def available() -> bool:
    """Whether this build of blockrnn computes on CUDA device arrays."""
    return getattr(_core, "cuda_backend", None) is not None


@contextlib.contextmanager
def cuda_stream(stream):
    """Runs the ops in the block on `stream` (an integer cudaStream_t, or an object with `.ptr`
    (CuPy), `.cuda_stream` (torch) or `.handle` (Numba)) unless an argument is a torch tensor or
    a CuPy array, whose framework's current stream is used."""
    previous = getattr(_local, "stream", None)
    _local.stream = _stream_int(stream)
    try:
        yield
    finally:
        _local.stream = previous


def _stream_int(s) -> int:
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(s, attr):
            s = getattr(s, attr)
            break
    if hasattr(s, "value"):  # ctypes' c_void_p (Numba's handle)
        s = s.value or 0
    if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
        raise TypeError(f"blockrnn.cuda_stream: expected a CUDA stream, got {type(s).__name__}")
    return int(s) or _LEGACY_DEFAULT_STREAM


def _error(op, message):
    return _core.InvalidArgumentError(f"{op}: {message}")


class DeviceArg:
    """One argument in device memory: pointer, dtype name, shape, the CUDA device when the
    producer says (None when only the pointer will tell), the stream its producer last used (an
    integer, or None), and the object that keeps the memory alive."""

    def __init__(self, ptr, dtype, shape, device, stream, owner, kind):
        self.ptr, self.dtype, self.shape = ptr, dtype, tuple(shape)
        self.device, self.stream, self.owner, self.kind = device, stream, owner, kind

    def desc(self):
        return (self.ptr, self.dtype, list(self.shape))


def _contiguous_strides(shape, itemsize):
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


def _check_strides(op, name, shape, strides, unit):
    """Strides (None, or in `unit`s) must be C-contiguous; dimensions of size 1 may have any."""
    if strides is None:
        return
    want = _contiguous_strides(shape, unit)
    if len(strides) != len(shape) or any(
            int(d) != 1 and int(s) != int(w) for d, s, w in zip(shape, strides, want)):
        raise _error(op, f"{name} is not C-contiguous (shape {tuple(shape)}, strides "
                         f"{tuple(strides)}{' bytes' if unit != 1 else ' elements'}); device "
                         f"arrays must be C-contiguous (e.g. .contiguous() or cupy."
                         f"ascontiguousarray)")


def from_interface(op, name, iface, writable=False, owner=None):
    """A DeviceArg from a `__cuda_array_interface__` dict; every malformed or unsupported entry
    is InvalidArgumentError naming the op and the argument. `writable`: an output, whose data
    must not be read-only."""
    if not isinstance(iface, dict):
        raise _error(op, f"{name}.__cuda_array_interface__ must be a dict, got "
                         f"{type(iface).__name__}")
    for key in ("shape", "typestr", "data", "version"):
        if key not in iface:
            raise _error(op, f"{name}.__cuda_array_interface__ has no '{key}'")
    version = iface["version"]
    if version not in (2, 3):
        raise _error(op, f"{name}.__cuda_array_interface__ has version {version!r}; blockrnn "
                         f"reads versions 2 and 3")
    shape = iface["shape"]
    if not isinstance(shape, tuple) or any(
            isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0 for d in shape):
        raise _error(op, f"{name}.__cuda_array_interface__ shape must be a tuple of "
                         f"non-negative integers, got {shape!r}")
    typestr = iface["typestr"]
    if typestr in ("=f2", "=f4", "=f8", "=i8") and sys.byteorder == "little":
        typestr = "<" + typestr[1:]
    dtype = _TYPESTR.get(typestr)
    if dtype is None:
        raise _error(op, f"{name} has typestr {typestr!r}; device arrays must be float16 "
                         f"('<f2'), float32 ('<f4') or float64 ('<f8')")
    data = iface["data"]
    if not (isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], numbers.Integral)
            and not isinstance(data[0], bool) and isinstance(data[1], bool)):
        raise _error(op, f"{name}.__cuda_array_interface__ data must be a tuple (pointer: int, "
                         f"read_only: bool), got {data!r}")
    ptr, read_only = int(data[0]), data[1]
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if ptr == 0 and size > 0:
        raise _error(op, f"{name} has a null data pointer and {size} elements")
    if writable and read_only:
        raise _error(op, f"{name} is read-only (its __cuda_array_interface__ data flag); an "
                         f"output must be writable")
    _check_strides(op, name, shape, iface.get("strides"), _ITEMSIZE[dtype])
    if iface.get("mask") is not None:
        raise _error(op, f"{name} has a mask; masked device arrays are not supported")
    stream = iface.get("stream") if version >= 3 else None
    if stream is not None:
        if isinstance(stream, bool) or not isinstance(stream, numbers.Integral) or stream <= 0:
            raise _error(op, f"{name}.__cuda_array_interface__ stream must be None or a positive "
                             f"integer (0 is disallowed by the protocol), got {stream!r}")
        stream = int(stream)
    return DeviceArg(ptr, dtype, shape, None, stream, owner, "interface")


def _torch_arg(op, name, t):
    import torch
    if t.dtype == torch.bfloat16:
        raise _core.UnimplementedError(f"{op}: {name} is bfloat16, which is not supported on the "
                                       f"CUDA backend yet")
    dtype = {torch.float16: "float16", torch.float32: "float32",
             torch.float64: "float64", torch.int64: "int64"}.get(t.dtype)
    if dtype is None:
        raise _error(op, f"{name} must be float16, float32 or float64, got {t.dtype}")
    _check_strides(op, name, tuple(t.shape), tuple(t.stride()), 1)
    # (no detach: the pointer, shape and strides need none, and autograd is the caller's)
    return DeviceArg(t.data_ptr(), dtype, tuple(t.shape), t.device.index, None, t, "torch")


def _dlpack_arg(op, name, v, stream):
    try:
        capsule = v.__dlpack__(stream=stream)
    except TypeError as e:
        raise _error(op, f"{name}.__dlpack__ does not take a stream ({e}); blockrnn needs a "
                         f"producer that orders its work before the caller's stream") from None
    ptr, dtype, shape, strides, kind, device = _core.dlpack_info(capsule)
    if kind not in _DLPACK_CUDA:
        raise _error(op, f"{name}.__dlpack__ gave an array of DLPack device type {kind}, not "
                         f"CUDA")
    if dtype not in _ITEMSIZE:
        raise _error(op, f"{name} must be float16, float32 or float64, got {dtype}")
    _check_strides(op, name, shape, strides, 1)
    return DeviceArg(ptr, dtype, shape, device, None, (v, capsule), "dlpack")


def _is_torch_cuda(v):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(v, torch.Tensor) and v.device.type == "cuda"


def _is_cupy(v):
    return type(v).__module__.split(".")[0] == "cupy"


def _dlpack_device(v):
    probe = getattr(type(v), "__dlpack_device__", None)
    if probe is None:
        return None
    try:
        return int(probe(v)[0]), int(probe(v)[1])
    except Exception:
        return None


def is_device(v) -> bool:
    """Whether `v` is an array in CUDA device memory that this module reads."""
    if _is_torch_cuda(v):
        return True
    try:
        if hasattr(v, "__cuda_array_interface__"):
            return True
    except Exception:
        pass
    d = _dlpack_device(v)
    return d is not None and d[0] in _DLPACK_CUDA


def read(op, name, v, stream):
    """The DeviceArg of a device array `v` (is_device(v))."""
    if _is_torch_cuda(v):
        return _torch_arg(op, name, v)
    try:
        iface = v.__cuda_array_interface__
    except AttributeError:
        iface = None
    except Exception as e:
        raise _error(op, f"{name}.__cuda_array_interface__ failed: {e}") from None
    if iface is not None:
        return from_interface(op, name, iface, owner=v)
    return _dlpack_arg(op, name, v, stream)


def _caller_stream(values):
    """The stream of the call (an integer; 1 the legacy default stream) and a torch device when
    the outputs are to be torch tensors."""
    for v in values:
        if _is_torch_cuda(v):
            import torch
            return _stream_int(torch.cuda.current_stream(v.device).cuda_stream), v.device
    for v in values:
        if _is_cupy(v):
            return _stream_int(sys.modules["cupy"].cuda.get_current_stream().ptr), None
    s = getattr(_local, "stream", None)
    return (s if s is not None else _LEGACY_DEFAULT_STREAM), None


def _seq_len_max(op, name, v):
    """seq_len_max in host memory, as a 0-d int64 numpy array (kept alive by the caller)."""
    if is_device(v):
        raise _error(op, f"{name} must be a host integer (a Python int or a numpy/CPU scalar); "
                         f"TensorFlow's GPU kernels take it in host memory too")
    a = np.asarray(v)
    if a.dtype.kind not in "iu" or a.ndim != 0:
        raise _error(op, f"{name} must be an int64 scalar, got {a.dtype} of shape {a.shape}")
    if int(a) > 2**63 - 1:
        raise _error(op, f"{name} must be an int64 between 0 and time_len of x, got {int(a)}")
    return np.ascontiguousarray(a, dtype=np.int64)


class DeviceArray:
    """An op's output in device memory (cudaMalloc'd by blockrnn, freed when the last reference
    goes): `__cuda_array_interface__` (version 3, with the stream the op ran on) and
    `__dlpack__` / `__dlpack_device__`, so `cupy.asarray(a)`, `torch.from_dlpack(a)` or
    `numba.cuda.as_cuda_array(a)` read it without a copy. `.shape`, `.dtype`, `.device`; `.get()`
    copies it to a numpy array (synchronising)."""

    def __init__(self, buffer, dtype, shape, stream):
        self._buffer, self.dtype, self.shape = buffer, np.dtype(dtype), tuple(shape)
        self.device, self._stream = buffer.device, stream

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._buffer.ptr, False),
                "version": 3, "strides": None, "stream": self._stream}

    def __dlpack_device__(self):
        return (2, self.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule. The consumer's `stream` (None: the legacy default stream, as the
        protocol says; -1: no synchronisation) waits for the op's stream. The array API's
        keywords: `max_version` is accepted and the capsule is always the unversioned
        "dltensor" (the protocol lets a producer answer any version with it); `dl_device` other
        than this array's own device and `copy=True` raise `BufferError` (blockrnn exports its
        memory in place and copies nothing), as the protocol asks of a producer that cannot."""
        if max_version is not None and not (isinstance(max_version, tuple)
                                            and len(max_version) == 2):
            raise TypeError(f"DeviceArray.__dlpack__: max_version must be a (major, minor) "
                            f"tuple or None, got {max_version!r}")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray.__dlpack__: dl_device {tuple(dl_device)} is not "
                              f"this array's device {self.__dlpack_device__()}; blockrnn "
                              f"exports device memory in place and does not copy across devices")
        if copy:
            raise BufferError("DeviceArray.__dlpack__: copy=True is not supported (blockrnn "
                              "exports its memory in place); copy after import instead")
        if stream != -1:
            _core.cuda_wait(_stream_int(_LEGACY_DEFAULT_STREAM if stream is None else stream),
                            self._stream)
        return _core.cuda_dlpack(self._buffer, self.dtype.name, list(self.shape))

    def get(self):
        """A numpy copy (waits for the op's stream)."""
        _core.cuda_synchronize(self._stream)
        out = np.empty(self.shape, self.dtype)
        _core.cuda_copy_to_host(self._buffer, out)
        return out

    def __repr__(self):
        return f"blockrnn.DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"


def check_one_device(op, named):
    """The devices the producers name (torch, DLPack) are one; (name, device or None) pairs. The
    pointers' own devices are checked by the core (cudaPointerGetAttributes)."""
    first = None
    for name, device in named:
        if device is None:
            continue
        if first is None:
            first = (name, device)
        elif device != first[1]:
            raise _error(op, f"{name} is on CUDA device {device} and {first[0]} on CUDA "
                             f"device {first[1]}; all arrays of one call must be on one device")


def _named_device(v):
    """The CUDA device a torch tensor or a DLPack producer names, else None (read first, before
    any argument's data pointer)."""
    if _is_torch_cuda(v):
        return v.device.index
    try:
        if hasattr(v, "__cuda_array_interface__"):
            return None
    except Exception:
        return None
    d = _dlpack_device(v)
    return d[1] if d is not None and d[0] in _DLPACK_CUDA else None


def to_device(a, device=0):
    """A DeviceArray holding a copy of numpy array `a` (float16/32/64; synchronous). For callers
    without CuPy or torch, and the tests."""
    if not available():
        raise _core.UnimplementedError(f"blockrnn.to_device: this build of blockrnn has no CUDA "
                                       f"backend")
    a = np.ascontiguousarray(a)
    if a.dtype.newbyteorder("=").name not in _ITEMSIZE:
        raise _core.InvalidArgumentError(f"blockrnn.to_device: expected float16, float32 or "
                                         f"float64, got {a.dtype}")
    a = a.astype(a.dtype.newbyteorder("="), copy=False)
    buffer = _core.DeviceBuffer(a.nbytes, device)
    _core.cuda_copy_from_host(buffer, a)
    return DeviceArray(buffer, a.dtype, a.shape, _LEGACY_DEFAULT_STREAM)


def _needs_stream(v):
    """A DLPack-only producer (no torch tensor, no __cuda_array_interface__): reading it tells it
    the stream, so it is read once the call's stream is known."""
    if _is_torch_cuda(v):
        return False
    try:
        return not hasattr(v, "__cuda_array_interface__")
    except Exception:
        return True


def run(op_index, op, names, values, attrs):
    """`op` on device arrays: names/values of the given inputs, attrs already converted. Every
    argument is checked before the call's stream is looked up (torch's needs a device) and
    before anything is allocated."""
    if not available():
        raise AssertionError("blockrnn._cuda.run in a build without CUDA")
    check_one_device(op, [(n, _named_device(v)) for n, v in zip(names, values)
                          if n not in ("seq_len_max", "seq_lengths")])
    args, keep, later = [None] * len(names), [], []
    for k, (name, v) in enumerate(zip(names, values)):
        if name == "seq_lengths":
            raise _core.UnimplementedError(
                f"{op}: seq_lengths is not supported on the CUDA backend yet (docs/cuda.md); "
                f"omit it, or run the op on the CPU")
        if name == "seq_len_max":
            a = _seq_len_max(op, name, v)
            keep.append(a)
            args[k] = DeviceArg(a.ctypes.data, "int64", (), None, None, a, "host")
            continue
        if not is_device(v):
            other = next(n for n, w in zip(names, values) if n != "seq_len_max" and is_device(w))
            raise _error(op, f"{name} is in host memory and {other} on a CUDA device; all arrays "
                             f"of one call must be on the same device (copy {name} to the device "
                             f"first)")
        if _needs_stream(v):
            later.append(k)
        else:
            args[k] = read(op, name, v, None)
    stream, torch_device = _caller_stream(values)
    for k in later:
        args[k] = read(op, names[k], values[k], stream)
    for name, arg in zip(names, args):
        if name != "seq_len_max" and arg.dtype == "int64":
            raise _error(op, f"{name} must be float16, float32 or float64, got int64")
    descs = [a.desc() for a in args]
    dtype, shapes, device = _core.cuda_prepare(op_index, descs, attrs)
    if torch_device is not None:
        import torch
        tdtype = getattr(torch, dtype)
        outs = [torch.empty(s, dtype=tdtype, device=torch_device) for s in shapes]
        out_descs = [(t.data_ptr(), dtype, list(s)) for t, s in zip(outs, shapes)]
    else:
        itemsize = _ITEMSIZE[dtype]
        buffers = [_core.DeviceBuffer(int(np.prod(s, dtype=np.int64)) * itemsize, device)
                   for s in shapes]
        outs = [DeviceArray(b, dtype, s, stream) for b, s in zip(buffers, shapes)]
        out_descs = [(b.ptr, dtype, list(s)) for b, s in zip(buffers, shapes)]
    producers = sorted({a.stream for a in args if a.stream is not None})
    _core.cuda_run(op_index, descs, attrs, out_descs, device, stream, producers)
    del keep
    return outs
