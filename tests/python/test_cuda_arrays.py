"""Arrays in CUDA device memory in a build with the CUDA backend (BLOCKRNN_PYTHON_CUDA,
python/blockrnn/_cuda.py; docs/cuda.md, "Python").

Three parts, by the build under test:
  - every build: the reading of `__cuda_array_interface__` dicts and DLPack/torch descriptors
    (stand-in objects; malformed and unsupported ones refused naming the op and the argument);
  - BLOCKRNN_PYTHON_CUDA=ON on a machine without a GPU (CI's nvcc build, scripts/
    build_python_cuda.sh): the ops refuse device arrays with "no CUDA device", naming the op,
    after the arguments and shapes are validated and before anything is allocated;
  - BLOCKRNN_PYTHON_CUDA=EMU (the backend's host emulation): the ops end to end on emulated
    device memory, against the CPU path.
On a GPU, the ON build runs the end-to-end part with real device memory (the runbook's verify
stage: scripts/gpu_runbook.sh verify)."""
import os

import numpy as np
import pytest

import blockrnn
from blockrnn import _core, _cuda, gradients, raw_ops

BACKEND = _core.cuda_backend  # None (CPU-only), "cuda" or "emulation"
DEVICES = _core.cuda_device_count() if BACKEND is not None else 0
needs_cuda_build = pytest.mark.skipif(BACKEND is None, reason="a CPU-only build of blockrnn")
needs_device = pytest.mark.skipif(DEVICES == 0, reason="no CUDA device (real or emulated)")


class Fake:
    """Anything exposing `__cuda_array_interface__` (CuPy, Numba), here with a made-up pointer."""

    def __init__(self, shape, typestr="<f4", ptr=0xdead0000, **extra):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 3, "strides": None,
                                         **extra}


def iface(**kw):
    d = {"shape": (2, 3), "typestr": "<f4", "data": (0xdead0000, False), "version": 3,
         "strides": None}
    d.update(kw)
    return d


def test_the_build_under_test_is_the_expected_one():
    """scripts/test_python_cuda.sh names the build it installed (BLOCKRNN_EXPECT_CUDA_BACKEND):
    the skips below then belong to other builds, never to this one."""
    expected = os.environ.get("BLOCKRNN_EXPECT_CUDA_BACKEND")
    assert BACKEND == (None if expected in (None, "", "none") else expected)


# ---- every build: reading the descriptors -------------------------------------------------------

def test_a_contiguous_interface_is_read():
    a = _cuda.from_interface("GRUBlockCell", "x", iface(strides=(12, 4), stream=7))
    assert (a.ptr, a.dtype, a.shape, a.stream) == (0xdead0000, "float32", (2, 3), 7)
    # Dimensions of size 1 may have any stride; version 2 has no stream.
    a = _cuda.from_interface("GRUBlockCell", "x", iface(shape=(1, 3), strides=(999, 4), version=2,
                                                        stream=5))
    assert a.shape == (1, 3) and a.stream is None
    assert _cuda.from_interface("GRUBlockCell", "x", iface(typestr="<f8")).dtype == "float64"
    assert _cuda.from_interface("GRUBlockCell", "x", iface(typestr="<f2")).dtype == "float16"


@pytest.mark.parametrize("bad, message", [
    (dict(strides=(4, 8)), "x is not C-contiguous (shape (2, 3), strides (4, 8) bytes)"),
    (dict(strides=(16, 4)), "x is not C-contiguous"),
    (dict(typestr="<i4"), "x has typestr '<i4'; device arrays must be float16"),
    (dict(typestr=">f4"), "x has typestr '>f4'"),
    (dict(typestr="<c8"), "x has typestr '<c8'"),
    (dict(version=1), "x.__cuda_array_interface__ has version 1; blockrnn reads versions 2 and 3"),
    (dict(version=4), "has version 4"),
    (dict(mask=object()), "x has a mask"),
    (dict(stream=0), "stream must be None or a positive integer (0 is disallowed"),
    (dict(stream="s"), "stream must be None or a positive integer"),
    (dict(data=(0, False)), "x has a null data pointer and 6 elements"),
    (dict(data=0xdead0000), "data must be a tuple (pointer: int, read_only: bool)"),
    (dict(shape=[2, 3]), "shape must be a tuple of non-negative integers, got [2, 3]"),
    (dict(shape=(2, -1)), "shape must be a tuple of non-negative integers"),
])
def test_bad_interfaces_are_refused_naming_op_and_argument(bad, message):
    with pytest.raises(blockrnn.InvalidArgumentError) as e:
        _cuda.from_interface("BlockLSTM", "x", iface(**bad))
    assert str(e.value).startswith("BlockLSTM: x")
    assert message in str(e.value)


@pytest.mark.parametrize("key", ["shape", "typestr", "data", "version"])
def test_missing_interface_keys_are_refused(key):
    d = iface()
    del d[key]
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=f"GRUBlockCell: h_prev.__cuda_array_interface__ has no '{key}'"):
        _cuda.from_interface("GRUBlockCell", "h_prev", d)


def test_a_read_only_output_is_refused_an_input_is_not():
    d = iface(data=(0xdead0000, True))
    assert _cuda.from_interface("BlockGRU", "x", d).ptr == 0xdead0000
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="BlockGRU: h is read-only .*an output must be writable"):
        _cuda.from_interface("BlockGRU", "h", d, writable=True)


def test_arguments_on_two_devices_are_refused():
    args = [("x", 0), ("w_ru", None), ("h_prev", 1)]
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="GRUBlockCell: h_prev is on CUDA device 1 and x on CUDA device 0; "
                             "all arrays of one call must be on one device"):
        _cuda.check_one_device("GRUBlockCell", args)
    _cuda.check_one_device("GRUBlockCell", args[:2])


def test_streams_are_read_from_frameworks_objects():
    class CupyStream:
        ptr = 0x1234

    class TorchStream:
        cuda_stream = 0x5678

    assert _cuda._stream_int(CupyStream()) == 0x1234
    assert _cuda._stream_int(TorchStream()) == 0x5678
    assert _cuda._stream_int(0) == 1  # 0 (the default stream) is the legacy default stream
    with pytest.raises(TypeError, match="expected a CUDA stream"):
        _cuda._stream_int("stream")
    with _cuda.cuda_stream(0x42):
        assert _cuda._caller_stream([Fake((2, 3))]) == (0x42, None)
    assert _cuda._caller_stream([Fake((2, 3))]) == (1, None)


def test_the_cpu_build_keeps_refusing_device_arrays():
    if BACKEND is not None:
        assert blockrnn.has_cuda()
        return
    assert not blockrnn.has_cuda()
    with pytest.raises(blockrnn.UnimplementedError,
                       match="GRUBlockCell: x is on a CUDA device; this build of blockrnn has no "
                             "CUDA backend"):
        raw_ops.GRUBlockCell(x=Fake((2, 3)), h_prev=np.zeros((2, 4), np.float32),
                             w_ru=np.zeros((7, 8), np.float32), w_c=np.zeros((7, 4), np.float32),
                             b_ru=np.zeros(8, np.float32), b_c=np.zeros(4, np.float32))
    with pytest.raises(blockrnn.UnimplementedError, match="no CUDA backend"):
        blockrnn.to_device(np.zeros(3))


# ---- a CUDA build: refusals before anything is allocated ---------------------------------------

def gru_cell_fakes(typestr="<f4"):
    B, I, H = 2, 3, 4
    shapes = dict(x=(B, I), h_prev=(B, H), w_ru=(I + H, 2 * H), w_c=(I + H, H), b_ru=(2 * H,),
                  b_c=(H,))
    return {k: Fake(s, typestr, ptr=0xdead0000 + 0x1000 * n)
            for n, (k, s) in enumerate(shapes.items())}


@needs_cuda_build
def test_mixed_host_and_device_arguments_are_refused_by_name():
    args = gru_cell_fakes()
    args["w_c"] = np.zeros((7, 4), np.float32)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="GRUBlockCell: w_c is in host memory and x on a CUDA device; all "
                             "arrays of one call must be on the same device"):
        raw_ops.GRUBlockCell(**args)


@needs_cuda_build
def test_bad_interfaces_are_refused_by_the_ops():
    args = gru_cell_fakes()
    args["h_prev"] = Fake((2, 4), strides=(4, 8))
    with pytest.raises(blockrnn.InvalidArgumentError, match="GRUBlockCell: h_prev is not "
                                                            "C-contiguous"):
        raw_ops.GRUBlockCell(**args)
    args = gru_cell_fakes()
    args["b_c"] = Fake((4,), "<i4")
    with pytest.raises(blockrnn.InvalidArgumentError, match="GRUBlockCell: b_c has typestr"):
        gradients.GRUBlockCell(**args, r=Fake((2, 4)), u=Fake((2, 4)), c=Fake((2, 4)),
                               d_h=Fake((2, 4)))


@needs_cuda_build
def test_sequence_ops_take_seq_len_max_from_host_memory_only():
    T, B, I, H = 3, 2, 3, 4
    shapes = dict(x=(T, B, I), h_prev=(B, H), w_ru=(I + H, 2 * H), w_c=(I + H, H),
                  b_ru=(2 * H,), b_c=(H,))
    args = {k: Fake(s, ptr=0xdead0000 + 0x1000 * n) for n, (k, s) in enumerate(shapes.items())}
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="BlockGRU: seq_len_max must be a host integer"):
        raw_ops.BlockGRU(seq_len_max=Fake((), "<i8"), **args)
    with pytest.raises(blockrnn.UnimplementedError,
                       match="BlockGRU: seq_lengths is not supported on the CUDA backend yet"):
        raw_ops.BlockGRU(seq_len_max=T, seq_lengths=np.full(B, T), **args)


@needs_cuda_build
def test_shapes_are_validated_by_the_core_first():
    args = gru_cell_fakes()
    args["w_c"] = Fake((7, 5), ptr=0xbeef0000)
    with pytest.raises(blockrnn.InvalidArgumentError, match="^GRUBlockCell: .*w_c"):
        raw_ops.GRUBlockCell(**args)


@pytest.mark.skipif(BACKEND != "cuda" or DEVICES != 0,
                    reason="the CUDA build on a machine without a GPU")
def test_no_cuda_device_is_a_clear_error_naming_the_op():
    with pytest.raises(blockrnn.UnimplementedError,
                       match="^GRUBlockCell: no CUDA device is available"):
        raw_ops.GRUBlockCell(**gru_cell_fakes())
    T = 3
    args = dict(x=Fake((T, 2, 3)), cs_prev=Fake((2, 4)), h_prev=Fake((2, 4)), w=Fake((7, 16)),
                wci=Fake((4,)), wcf=Fake((4,)), wco=Fake((4,)), b=Fake((16,)))
    with pytest.raises(blockrnn.UnimplementedError, match="^BlockLSTMV2: no CUDA device"):
        raw_ops.BlockLSTMV2(seq_len_max=T, **args)
    with pytest.raises(blockrnn.UnimplementedError, match="no CUDA device"):
        blockrnn.to_device(np.zeros(3))


# ---- on a device (the emulation here; a GPU in the runbook) -------------------------------------

def rand(rng, *shape, dtype=np.float64):
    return rng.uniform(-0.5, 0.5, shape).astype(dtype)


def gru_cell_inputs(rng, dtype=np.float64):
    B, I, H = 3, 5, 4
    return dict(x=rand(rng, B, I, dtype=dtype), h_prev=rand(rng, B, H, dtype=dtype),
                w_ru=rand(rng, I + H, 2 * H, dtype=dtype), w_c=rand(rng, I + H, H, dtype=dtype),
                b_ru=rand(rng, 2 * H, dtype=dtype), b_c=rand(rng, H, dtype=dtype))


def lstm_seq_inputs(rng, T=4, B=3, I=5, H=4, dtype=np.float64):
    return dict(x=rand(rng, T, B, I, dtype=dtype), cs_prev=rand(rng, B, H, dtype=dtype),
                h_prev=rand(rng, B, H, dtype=dtype), w=rand(rng, I + H, 4 * H, dtype=dtype),
                wci=rand(rng, H, dtype=dtype), wcf=rand(rng, H, dtype=dtype),
                wco=rand(rng, H, dtype=dtype), b=rand(rng, 4 * H, dtype=dtype))


def on_device(arrays):
    return {k: blockrnn.to_device(v) for k, v in arrays.items()}


def assert_close(dev_outs, cpu_outs, rtol):
    assert dev_outs._fields == cpu_outs._fields
    for name, d, c in zip(cpu_outs._fields, dev_outs, cpu_outs):
        assert isinstance(d, blockrnn.DeviceArray), name
        got = d.get()
        assert got.dtype == c.dtype and got.shape == c.shape, name
        np.testing.assert_allclose(got, c, rtol=rtol, atol=rtol, err_msg=name)


@needs_device
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-5),
                                         (np.float16, 2e-3)])
def test_cell_ops_and_their_gradients_on_the_device_match_the_cpu(dtype, rtol):
    rng = np.random.default_rng(1)
    host = gru_cell_inputs(rng, dtype)
    cpu = raw_ops.GRUBlockCell(**host)
    dev = raw_ops.GRUBlockCell(**on_device(host))
    assert_close(dev, cpu, rtol)
    d_h = rand(rng, *cpu.h.shape, dtype=dtype)
    grad_host = dict(host, r=cpu.r, u=cpu.u, c=cpu.c, d_h=d_h)
    assert_close(gradients.GRUBlockCell(**on_device(grad_host)),
                 gradients.GRUBlockCell(**grad_host), rtol)
    assert_close(raw_ops.GRUBlockCellGrad(**on_device(grad_host)),
                 raw_ops.GRUBlockCellGrad(**grad_host), rtol)


@needs_device
@pytest.mark.parametrize("use_peephole", [False, True])
def test_sequence_ops_on_the_device_match_the_cpu(use_peephole):
    rng = np.random.default_rng(2)
    host = lstm_seq_inputs(rng)
    attrs = dict(cell_clip=0.5, use_peephole=use_peephole)
    for S in (4, 2):
        cpu = raw_ops.BlockLSTMV2(seq_len_max=S, **host, **attrs)
        dev = raw_ops.BlockLSTMV2(seq_len_max=np.int64(S), **on_device(host), **attrs)
        assert_close(dev, cpu, 1e-12)
        h_grad = rand(rng, *cpu.h.shape)
        grad_host = dict(host, i=cpu.i, cs=cpu.cs, f=cpu.f, o=cpu.o, ci=cpu.ci, co=cpu.co, h=cpu.h,
                         cs_grad=np.zeros_like(h_grad), h_grad=h_grad)
        assert_close(
            raw_ops.BlockLSTMGradV2(seq_len_max=S, **on_device(grad_host),
                                    use_peephole=use_peephole),
            raw_ops.BlockLSTMGradV2(seq_len_max=S, **grad_host, use_peephole=use_peephole), 1e-12)


@needs_device
def test_outputs_read_back_through_both_protocols():
    rng = np.random.default_rng(3)
    host = gru_cell_inputs(rng)
    out = raw_ops.GRUBlockCell(**on_device(host))
    h = out.h
    d = h.__cuda_array_interface__
    assert d["shape"] == (3, 4) and d["typestr"] == "<f8" and d["version"] == 3
    assert d["strides"] is None and d["data"][1] is False and d["stream"] == 1
    assert h.__dlpack_device__() == (2, 0)
    ptr, dtype, shape, strides, kind, device = _core.dlpack_info(h.__dlpack__(stream=1))
    assert (ptr, dtype, shape, kind, device) == (d["data"][0], "float64", [3, 4], 2, 0)
    # The array API's keywords: a consumer asking for DLPack 1.x gets the unversioned capsule
    # (allowed by the protocol); another device or a copy is refused with BufferError.
    v1 = _core.dlpack_info(h.__dlpack__(stream=-1, max_version=(1, 0), dl_device=(2, 0)))
    assert v1[:3] == (ptr, dtype, shape)
    with pytest.raises(BufferError, match=r"dl_device \(1, 0\) is not this array's device"):
        h.__dlpack__(stream=-1, dl_device=(1, 0))
    with pytest.raises(BufferError, match="copy=True is not supported"):
        h.__dlpack__(stream=-1, copy=True)
    with pytest.raises(TypeError, match="max_version must be a"):
        h.__dlpack__(stream=-1, max_version=1)
    # An output is an input of the next call without a copy: the interface round trip.
    again = raw_ops.GRUBlockCell(**dict(on_device(host), h_prev=h))
    cpu = raw_ops.GRUBlockCell(**host)
    np.testing.assert_allclose(again.h.get(),
                               raw_ops.GRUBlockCell(**dict(host, h_prev=cpu.h)).h, rtol=1e-12)


@needs_device
def test_host_pointers_behind_an_interface_are_refused():
    rng = np.random.default_rng(4)
    args = on_device(gru_cell_inputs(rng))
    host_x = rand(rng, 3, 5)
    args["x"] = Fake((3, 5), "<f8", ptr=host_x.ctypes.data)
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="GRUBlockCell: x is not CUDA device memory"):
        raw_ops.GRUBlockCell(**args)


@needs_device
def test_the_op_runs_on_the_callers_stream_after_the_producers():
    """Version 3's `stream`: the op's stream (blockrnn.cuda_stream) waits for the producer's with
    an event; the outputs carry the op's stream. A stream the runtime does not know is the
    runtime's error (the emulation checks every stream handle)."""
    rng = np.random.default_rng(5)
    host = gru_cell_inputs(rng)
    args = on_device(host)
    producer, consumer = _core.CudaStream(), _core.CudaStream()
    x = args["x"]
    args["x"] = Fake(x.shape, "<f8", ptr=x.__cuda_array_interface__["data"][0],
                     stream=producer.ptr)
    with blockrnn.cuda_stream(consumer):
        out = raw_ops.GRUBlockCell(**args)
    assert out.h.__cuda_array_interface__["stream"] == consumer.ptr
    consumer.synchronize()
    np.testing.assert_allclose(out.h.get(), raw_ops.GRUBlockCell(**host).h, rtol=1e-12)
    if BACKEND == "emulation":
        args["x"] = Fake(x.shape, "<f8", ptr=x.__cuda_array_interface__["data"][0],
                         stream=0x7fff0000)
        with pytest.raises(blockrnn.InternalError, match="GRUBlockCell: waiting for an input's "
                                                         "stream failed"):
            raw_ops.GRUBlockCell(**args)


@needs_device
@pytest.mark.parametrize("op", ["LSTMBlockCell", "BlockLSTM", "BlockGRU", "BlockGRUResetAfter"])
def test_more_forward_ops_on_the_device_match_the_cpu(op):
    rng = np.random.default_rng(6)
    T, B, I, H = 5, 3, 4, 6
    lstm = lstm_seq_inputs(rng, T, B, I, H)
    gru = dict(x=rand(rng, T, B, I), h_prev=rand(rng, B, H), w_ru=rand(rng, I + H, 2 * H),
               w_c=rand(rng, I + H, H), b_ru=rand(rng, 2 * H), b_c=rand(rng, H))
    host = {
        "LSTMBlockCell": dict(lstm, x=lstm["x"][0], forget_bias=0.5, use_peephole=True),
        "BlockLSTM": dict(lstm, seq_len_max=T, forget_bias=1.0, cell_clip=0.3),
        "BlockGRU": dict(gru, seq_len_max=T),
        "BlockGRUResetAfter": dict(seq_len_max=T, x=gru["x"], h_prev=gru["h_prev"],
                                   w_i=rand(rng, I, 3 * H), w_h=rand(rng, H, 3 * H),
                                   b_i=rand(rng, 3 * H), b_h=rand(rng, 3 * H)),
    }[op]
    dev = {k: blockrnn.to_device(v) if isinstance(v, np.ndarray) else v for k, v in host.items()}
    assert_close(getattr(raw_ops, op)(**dev), getattr(raw_ops, op)(**host), 1e-12)


# ---- a CUDA build: torch CUDA tensors, refused before their data is touched ---------------------

try:
    import torch
except ImportError:  # the torch tests below are then skipped; the rest of the file runs
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

if torch is not None:
    class FakeCudaTensor(torch.Tensor):
        """A tensor on cuda:`index` without a GPU (torch's wrapper subclass: metadata only). Any
        operation on its data raises, so a test passes only if the refusal comes first."""

        @staticmethod
        def __new__(cls, shape, dtype=torch.float32, index=0, strides=None):
            return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype,
                                                       device=f"cuda:{index}", strides=strides)

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            raise AssertionError(f"FakeCudaTensor: {func} reached the data")


def gru_cell_torch(**replace):
    shapes = dict(x=(2, 3), h_prev=(2, 4), w_ru=(7, 8), w_c=(7, 4), b_ru=(8,), b_c=(4,))
    args = {k: FakeCudaTensor(s) for k, s in shapes.items()}
    args.update(replace)
    return args


@needs_cuda_build
@needs_torch
def test_torch_tensors_are_refused_by_name_before_their_data_is_read():
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="GRUBlockCell: w_c is in host memory and x on a CUDA device"):
        raw_ops.GRUBlockCell(**gru_cell_torch(w_c=np.zeros((7, 4), np.float32)))
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="GRUBlockCell: b_c is on CUDA device 1 and x on CUDA device 0"):
        raw_ops.GRUBlockCell(**gru_cell_torch(b_c=FakeCudaTensor((4,), index=1)))
    with pytest.raises(blockrnn.UnimplementedError,
                       match="GRUBlockCell: h_prev is bfloat16, which is not supported on the "
                             "CUDA backend yet"):
        raw_ops.GRUBlockCell(**gru_cell_torch(h_prev=FakeCudaTensor((2, 4), torch.bfloat16)))
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="GRUBlockCell: w_ru must be float16, float32 or float64, got "
                             "torch.int32"):
        raw_ops.GRUBlockCell(**gru_cell_torch(w_ru=FakeCudaTensor((7, 8), torch.int32)))
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match=r"GRUBlockCell: w_ru is not C-contiguous \(shape \(7, 8\), strides "
                             r"\(1, 7\) elements\)"):
        raw_ops.GRUBlockCell(**gru_cell_torch(w_ru=FakeCudaTensor((7, 8), strides=(1, 7))))


@needs_cuda_build
@needs_torch
def test_torch_functional_ops_in_a_cuda_build_name_the_cpu_only_ones():
    from blockrnn.torch import _ops
    with pytest.raises(NotImplementedError,
                       match="blockrnn.torch: nn_rnn: x is on a CUDA device; this op runs on the "
                             "CPU only"):
        _ops._np(FakeCudaTensor((3, 2, 4)), "nn_rnn", "x")
    with pytest.raises(NotImplementedError,
                       match="blockrnn::lstm .*: seq_lengths is not supported on the CUDA backend"):
        _ops._call(raw_ops.BlockLSTMV2, "blockrnn::lstm (BlockLSTMV2)",
                   dict(x=FakeCudaTensor((3, 2, 4))), torch.tensor([3, 2]))


@needs_cuda_build
@needs_torch
def test_torch_modules_in_a_cuda_build_refuse_lengths_and_torchscript_on_cuda():
    import blockrnn.torch as brt
    module = brt.LSTM(4, 5)
    with pytest.raises(NotImplementedError,
                       match="blockrnn.torch.LSTM: lengths are not supported on CUDA tensors yet"):
        module._run_on_cuda(FakeCudaTensor((3, 2, 4)), torch.tensor([3, 2]), [])
    scripted = torch.jit.script(brt.GRU(4, 5))
    with pytest.raises(Exception, match="input is on a CUDA device"):
        scripted(FakeCudaTensor((3, 2, 4)))


def op_fn(name):
    return getattr(gradients, name.split(".")[1]) if "." in name else getattr(raw_ops, name)


GRAD_OPS = {"GRUBlockCellGrad": "GRUBlockCell", "gradients.GRUBlockCell": "GRUBlockCell",
            "LSTMBlockCellGrad": "LSTMBlockCell", "gradients.LSTMBlockCell": "LSTMBlockCell",
            "BlockLSTMGrad": "BlockLSTM", "BlockLSTMGradV2": "BlockLSTMV2",
            "BlockGRUGrad": "BlockGRU", "BlockGRUResetAfterGrad": "BlockGRUResetAfter"}


@needs_device
@pytest.mark.parametrize("grad_op", sorted(GRAD_OPS))
def test_every_gradient_op_on_the_device_matches_the_cpu(grad_op):
    """Each gradient op on its forward op's outputs (computed on the CPU) and random incoming
    gradients: the device's results against the CPU's."""
    rng = np.random.default_rng(7)
    T, B, I, H = 4, 3, 5, 6
    sizes = dict(x=(T, B, I), cs_prev=(B, H), h_prev=(B, H), w=(I + H, 4 * H), wci=(H,),
                 wcf=(H,), wco=(H,), b=(4 * H,), w_ru=(I + H, 2 * H), w_c=(I + H, H),
                 b_ru=(2 * H,), b_c=(H,), w_i=(I, 3 * H), w_h=(H, 3 * H), b_i=(3 * H,),
                 b_h=(3 * H,))
    fwd = GRAD_OPS[grad_op]
    defs = {d[0]: d for d in _core.op_defs()}
    cell = fwd in ("GRUBlockCell", "LSTMBlockCell")
    attrs = {"use_peephole": True} if "LSTM" in fwd else {}
    fwd_in = {}
    for name in defs[fwd][1]:
        if name == "seq_len_max":
            fwd_in[name] = T
        elif name != "seq_lengths":
            shape = sizes[name][1:] if (cell and name == "x") else sizes[name]
            fwd_in[name] = rand(rng, *shape)
    fwd_attrs = dict(attrs, cell_clip=0.4) if attrs else {}
    out = op_fn(fwd)(**fwd_in, **fwd_attrs)
    host = {}
    for name in defs[grad_op][1]:
        if name == "seq_lengths":
            continue
        if name in fwd_in:
            host[name] = fwd_in[name]
        elif name in out._fields:
            host[name] = getattr(out, name)
        else:  # an incoming gradient: cs_grad, h_grad, d_h
            host[name] = rand(rng, *out.h.shape)
    grad_attrs = dict(attrs, cell_clip=0.4) if grad_op == "gradients.LSTMBlockCell" else attrs
    dev = {k: blockrnn.to_device(v) if isinstance(v, np.ndarray) else v for k, v in host.items()}
    assert_close(op_fn(grad_op)(**dev, **grad_attrs), op_fn(grad_op)(**host, **grad_attrs), 1e-12)
