"""The Python package on a GPU (docs/cuda.md, "Python"): run by `scripts/gpu_runbook.sh verify`
with the extension built by `scripts/gpu_runbook.sh build` (BLOCKRNN_PYTHON_CUDA=ON) on
PYTHONPATH. A plain script, not pytest: the GPU machine has torch but nothing can be installed.

Checks, each one line PASS or FAIL (exit 1 on any FAIL, and when a check could not run):
  - the build: blockrnn has its CUDA backend and sees a device;
  - raw ops on torch CUDA tensors (float64, float32, float16) against the same ops on the CPU:
    a cell op and its gradient, BlockLSTMV2 + BlockLSTMGradV2, BlockGRU, BlockGRUResetAfter;
    outputs are torch tensors on the inputs' device;
  - the caller's stream: the same op inside `torch.cuda.stream(s)` (a non-default stream) gives
    the same bits;
  - blockrnn.to_device / DeviceArray: __cuda_array_interface__ and DLPack (torch.from_dlpack)
    read back what the CPU computes;
  - blockrnn.torch.LSTM / GRU on CUDA tensors, forward and backward, against the same modules on
    the CPU (float64);
  - a mixed host/device call is refused by name.
`--no-torch` leaves out what needs torch with CUDA (for a dry run on the host emulation).
"""
import sys
import traceback

import numpy as np

import blockrnn
from blockrnn import _core, gradients, raw_ops

RESULTS = []


def check(name):
    def wrap(fn):
        try:
            fn()
            RESULTS.append((name, True, ""))
            print(f"PASS {name}", flush=True)
        except Exception as e:  # every failure is reported, then the next check runs
            RESULTS.append((name, False, str(e)))
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
        return fn
    return wrap


def rand(rng, *shape, dtype=np.float64):
    return rng.uniform(-0.5, 0.5, shape).astype(dtype)


TOL = {np.float64: 1e-10, np.float32: 1e-4, np.float16: 3e-3}


def close(name, got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
    err = np.max(np.abs(got - want) / (1 + np.abs(want))) if got.size else 0.0
    if not err <= tol:
        raise AssertionError(f"{name}: max relative error {err:.3g} > {tol:g}")


def cases(rng, dtype):
    T, B, I, H = 7, 5, 6, 8
    gru = dict(x=rand(rng, B, I, dtype=dtype), h_prev=rand(rng, B, H, dtype=dtype),
               w_ru=rand(rng, I + H, 2 * H, dtype=dtype), w_c=rand(rng, I + H, H, dtype=dtype),
               b_ru=rand(rng, 2 * H, dtype=dtype), b_c=rand(rng, H, dtype=dtype))
    lstm = dict(seq_len_max=T, x=rand(rng, T, B, I, dtype=dtype),
                cs_prev=rand(rng, B, H, dtype=dtype), h_prev=rand(rng, B, H, dtype=dtype),
                w=rand(rng, I + H, 4 * H, dtype=dtype), wci=rand(rng, H, dtype=dtype),
                wcf=rand(rng, H, dtype=dtype), wco=rand(rng, H, dtype=dtype),
                b=rand(rng, 4 * H, dtype=dtype))
    bgru = dict(gru, seq_len_max=T, x=rand(rng, T, B, I, dtype=dtype))
    ra = dict(seq_len_max=T, x=rand(rng, T, B, I, dtype=dtype),
              h_prev=rand(rng, B, H, dtype=dtype), w_i=rand(rng, I, 3 * H, dtype=dtype),
              w_h=rand(rng, H, 3 * H, dtype=dtype), b_i=rand(rng, 3 * H, dtype=dtype),
              b_h=rand(rng, 3 * H, dtype=dtype))
    return gru, lstm, bgru, ra


def compare(op, name, host, to_dev, from_dev, tol, **attrs):
    want = op(**host, **attrs)
    dev = {k: (v if k == "seq_len_max" else to_dev(v)) for k, v in host.items()}
    got = op(**dev, **attrs)
    for field, g, w in zip(want._fields, got, want):
        close(f"{name}.{field}", from_dev(g), w, tol)
    return want, got


def device_array_checks():
    @check("DeviceArray: raw ops on blockrnn.to_device arrays, float64")
    def _():
        rng = np.random.default_rng(1)
        gru, lstm, _b, _r = cases(rng, np.float64)
        compare(raw_ops.GRUBlockCell, "GRUBlockCell", gru, blockrnn.to_device, lambda a: a.get(),
                1e-10)
        want, _g = compare(raw_ops.BlockLSTMV2, "BlockLSTMV2", lstm, blockrnn.to_device,
                           lambda a: a.get(), 1e-10, use_peephole=True)
        grad = dict(lstm, i=want.i, cs=want.cs, f=want.f, o=want.o, ci=want.ci, co=want.co,
                    h=want.h, cs_grad=rand(rng, *want.h.shape), h_grad=rand(rng, *want.h.shape))
        compare(raw_ops.BlockLSTMGradV2, "BlockLSTMGradV2", grad, blockrnn.to_device,
                lambda a: a.get(), 1e-10, use_peephole=True)

    @check("refusal: a host array among device arrays is named")
    def _():
        rng = np.random.default_rng(2)
        gru = cases(rng, np.float32)[0]
        dev = {k: blockrnn.to_device(v) for k, v in gru.items()}
        dev["w_c"] = gru["w_c"]
        try:
            raw_ops.GRUBlockCell(**dev)
        except blockrnn.InvalidArgumentError as e:
            if "w_c is in host memory" not in str(e):
                raise
        else:
            raise AssertionError("a mixed call was accepted")


def torch_checks():
    import torch
    import blockrnn.torch as bt

    dev = torch.device("cuda", 0)
    to_dev = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731

    def from_dev(t):
        if not isinstance(t, torch.Tensor) or t.device != dev:
            raise AssertionError(f"an output is {type(t).__name__} on "
                                 f"{getattr(t, 'device', '?')}, expected a tensor on {dev}")
        return t.cpu().numpy()

    for dtype in (np.float64, np.float32, np.float16):
        @check(f"raw ops on torch CUDA tensors, {np.dtype(dtype).name}")
        def _(dtype=dtype):
            rng = np.random.default_rng(3)
            tol = TOL[dtype]
            gru, lstm, bgru, ra = cases(rng, dtype)
            want, _g = compare(raw_ops.GRUBlockCell, "GRUBlockCell", gru, to_dev, from_dev, tol)
            compare(gradients.GRUBlockCell, "gradients.GRUBlockCell",
                    dict(gru, r=want.r, u=want.u, c=want.c, d_h=rand(rng, *want.h.shape,
                                                                       dtype=dtype)),
                    to_dev, from_dev, tol)
            want, _g = compare(raw_ops.BlockLSTMV2, "BlockLSTMV2", lstm, to_dev, from_dev, tol,
                               cell_clip=0.4, use_peephole=True)
            grad = dict(lstm, i=want.i, cs=want.cs, f=want.f, o=want.o, ci=want.ci, co=want.co,
                        h=want.h, cs_grad=rand(rng, *want.h.shape, dtype=dtype),
                        h_grad=rand(rng, *want.h.shape, dtype=dtype))
            compare(raw_ops.BlockLSTMGradV2, "BlockLSTMGradV2", grad, to_dev, from_dev, tol,
                    use_peephole=True)
            compare(raw_ops.BlockGRU, "BlockGRU", bgru, to_dev, from_dev, tol)
            compare(raw_ops.BlockGRUResetAfter, "BlockGRUResetAfter", ra, to_dev, from_dev, tol)

    @check("the caller's stream: torch.cuda.stream(s) gives the default stream's bits")
    def _():
        rng = np.random.default_rng(4)
        lstm = cases(rng, np.float32)[1]
        args = {k: (v if k == "seq_len_max" else to_dev(v)) for k, v in lstm.items()}
        base = raw_ops.BlockLSTMV2(**args)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            other = raw_ops.BlockLSTMV2(**args)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        for field, a, b in zip(base._fields, base, other):
            if not torch.equal(a, b):
                raise AssertionError(f"{field} differs on a non-default stream")

    @check("DLPack and the CUDA array interface: torch reads DeviceArray outputs")
    def _():
        rng = np.random.default_rng(5)
        gru = cases(rng, np.float64)[0]
        out = raw_ops.GRUBlockCell(**{k: blockrnn.to_device(v) for k, v in gru.items()})
        want = raw_ops.GRUBlockCell(**gru)
        close("from_dlpack(h)", torch.from_dlpack(out.h).cpu().numpy(), want.h, 1e-10)
        close("as_tensor(h)", torch.as_tensor(out.h, device=dev).cpu().numpy(), want.h, 1e-10)

    for mode in ("LSTM", "GRU"):
        @check(f"blockrnn.torch.{mode} on CUDA tensors, forward and backward, float64")
        def _(mode=mode):
            torch.manual_seed(0)
            cpu = getattr(bt, mode)(6, 8, num_layers=2, bidirectional=True).double()
            gpu = getattr(bt, mode)(6, 8, num_layers=2, bidirectional=True).double()
            gpu.load_state_dict(cpu.state_dict())
            gpu = gpu.to(dev)
            x = torch.randn(9, 4, 6, dtype=torch.float64)
            xc, xg = x.clone().requires_grad_(), x.to(dev).requires_grad_()
            yc, _s = cpu(xc)
            yg, _s = gpu(xg)
            if yg.device != dev:
                raise AssertionError(f"output on {yg.device}")
            close("y", yg.detach().cpu().numpy(), yc.detach().numpy(), 1e-10)
            g = torch.randn_like(yc)
            yc.backward(g)
            yg.backward(g.to(dev))
            close("x.grad", xg.grad.cpu().numpy(), xc.grad.numpy(), 1e-10)
            for (n, pc), (_n, pg) in zip(cpu.named_parameters(), gpu.named_parameters()):
                close(f"{n}.grad", pg.grad.cpu().numpy(), pc.grad.numpy(), 1e-10)


def main():
    no_torch = "--no-torch" in sys.argv

    @check("build: blockrnn has its CUDA backend and sees a device")
    def _():
        if not blockrnn.has_cuda():
            raise AssertionError(f"blockrnn {blockrnn.__file__} is a CPU-only build")
        n = _core.cuda_device_count()
        if n < 1:
            raise AssertionError(f"backend {_core.cuda_backend}: no CUDA device")
        print(f"  backend {_core.cuda_backend}, {n} device(s), blockrnn at {blockrnn.__file__}")

    if not RESULTS[-1][1]:
        return 1
    device_array_checks()
    if no_torch:
        print("torch checks left out (--no-torch)")
    else:
        try:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("torch.cuda.is_available() is False")
        except Exception as e:
            print(f"FAIL torch with CUDA: {e}")
            return 1
        torch_checks()
    failed = [n for n, ok, _m in RESULTS if not ok]
    print(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
