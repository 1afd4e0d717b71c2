"""Arrays in device memory given to blockrnn's Python ops and torch modules: this package computes
on the CPU only, so a CUDA array (a torch CUDA tensor, CuPy, Numba: anything exposing
`__cuda_array_interface__` or a CUDA `__dlpack_device__`) is refused by name with a clear message,
never copied to the host behind the caller's back and never a crash.

No GPU is needed: the device arrays here are stand-ins that describe CUDA memory the way those
libraries do, and whose host conversion (`__array__`) would copy silently if it were ever called
(it records the call, and the tests check it was not)."""
import numpy as np
import pytest

import blockrnn
from blockrnn import raw_ops

NO_CUDA = "this build of blockrnn has no CUDA backend"
# A build with the CUDA backend takes these arrays instead (test_cuda_arrays.py).
cpu_only = pytest.mark.skipif(blockrnn.has_cuda(),
                              reason="a build with the CUDA backend (test_cuda_arrays.py)")


class CudaArrayInterface:
    """CuPy's and Numba's protocol; `__array__` copies to the host, as Numba's device arrays do."""

    def __init__(self, host):
        self.host = np.asarray(host)
        self.copied = False
        self.__cuda_array_interface__ = {
            "shape": self.host.shape, "typestr": self.host.dtype.str, "data": (0xdead0000, False),
            "version": 3, "strides": None}

    def __array__(self, dtype=None, copy=None):
        self.copied = True
        return self.host


class DLPackOn:
    """A DLPack producer on device type `kind` (2: CUDA, 10: ROCm, 1: CPU, 3: CUDA pinned host)."""

    def __init__(self, host, kind):
        self.host = np.asarray(host)
        self.kind = kind
        self.copied = False

    def __dlpack_device__(self):
        return (self.kind, 0)

    def __dlpack__(self, stream=None, **kwargs):
        return self.host.__dlpack__()

    def __array__(self, dtype=None, copy=None):
        self.copied = True
        return self.host


def gru_cell_inputs(dtype=np.float32):
    rng = np.random.default_rng(0)
    B, I, H = 2, 3, 4
    u = lambda *s: rng.uniform(-1, 1, s).astype(dtype)
    return dict(x=u(B, I), h_prev=u(B, H), w_ru=u(I + H, 2 * H), w_c=u(I + H, H), b_ru=u(2 * H),
                b_c=u(H))


@cpu_only
@pytest.mark.parametrize("arg", ["x", "w_ru", "b_c"])
def test_cuda_array_interface_is_refused_by_name(arg):
    kw = gru_cell_inputs()
    dev = CudaArrayInterface(kw[arg])
    kw[arg] = dev
    with pytest.raises(blockrnn.UnimplementedError) as e:
        raw_ops.GRUBlockCell(**kw)
    assert str(e.value).startswith(f"GRUBlockCell: {arg} is on a CUDA device; {NO_CUDA}")
    assert not dev.copied


@cpu_only
def test_cuda_dlpack_is_refused_in_gradients_and_sequence_ops():
    kw = gru_cell_inputs()
    out = raw_ops.GRUBlockCell(**kw)
    d_h = DLPackOn(np.ones_like(out.h), kind=2)
    with pytest.raises(NotImplementedError, match=f"gradients.GRUBlockCell: d_h is on a CUDA "
                                                  f"device; {NO_CUDA}"):
        blockrnn.gradients.GRUBlockCell(**kw, r=out.r, u=out.u, c=out.c, d_h=d_h)
    assert not d_h.copied
    # CUDA managed memory (DLPack type 13) is refused too: the ops never read device allocations.
    x = DLPackOn(np.zeros((3, 2, 3), np.float32), kind=13)
    with pytest.raises(blockrnn.UnimplementedError, match=f"BlockGRU: x is on a CUDA managed "
                                                          f"device; {NO_CUDA}"):
        raw_ops.BlockGRU(seq_len_max=3, x=x, h_prev=kw["h_prev"], w_ru=kw["w_ru"],
                         w_c=kw["w_c"], b_ru=kw["b_ru"], b_c=kw["b_c"])


def test_other_devices_are_refused_as_cpu_only():
    kw = gru_cell_inputs()
    kw["x"] = DLPackOn(kw["x"], kind=10)
    with pytest.raises(blockrnn.UnimplementedError,
                       match="GRUBlockCell: x is on a ROCm device; blockrnn computes on the CPU "
                             "only"):
        raw_ops.GRUBlockCell(**kw)


@pytest.mark.parametrize("kind", [1, 3])
def test_host_readable_dlpack_arrays_still_work(kind):
    # DLPack CPU and CUDA pinned host memory are readable by the CPU: converted as before.
    kw = gru_cell_inputs()
    expect = raw_ops.GRUBlockCell(**kw)
    kw["x"] = DLPackOn(kw["x"], kind=kind)
    got = raw_ops.GRUBlockCell(**kw)
    np.testing.assert_array_equal(got.h, expect.h)


torch = pytest.importorskip("torch")


class FakeCudaTensor(torch.Tensor):
    """A tensor whose device is cuda:0 without a GPU (torch's wrapper subclass: metadata only).
    Any operation on its data raises, so a test passes only if the refusal comes first."""

    @staticmethod
    def __new__(cls, shape, dtype=torch.float32):
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype, device="cuda")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"FakeCudaTensor: {func} reached the data")


@cpu_only
def test_torch_cuda_tensor_refused_by_raw_ops():
    kw = gru_cell_inputs()
    kw["h_prev"] = FakeCudaTensor((2, 4))
    with pytest.raises(blockrnn.UnimplementedError,
                       match=f"GRUBlockCell: h_prev is on a CUDA device; {NO_CUDA}"):
        raw_ops.GRUBlockCell(**kw)


@cpu_only
def test_torch_modules_refuse_cuda_tensors():
    import blockrnn.torch as brt
    for module in (brt.LSTM(4, 5), brt.GRU(4, 5)):
        with pytest.raises(NotImplementedError,
                           match=f"blockrnn.torch.(LSTM|GRU): input is on a CUDA device; "
                                 f"{NO_CUDA}"):
            module(FakeCudaTensor((3, 2, 4)))


@cpu_only
def test_torch_functional_ops_refuse_cuda_tensors():
    from blockrnn.torch import _ops
    with pytest.raises(NotImplementedError,
                       match=f"blockrnn.torch: BlockLSTM: x is on a CUDA device; {NO_CUDA}"):
        _ops._np(FakeCudaTensor((3, 2, 4)), "BlockLSTM", "x")
