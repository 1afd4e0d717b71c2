"""torch.library.opcheck on every blockrnn custom op and a small torch.compile, in a process
without TensorFlow (run by test_torch_modules.py; see the reason there)."""
import torch

import blockrnn.torch as brt

F32 = 2e-5  # float32 against torch.nn: see test_torch_modules.py


def _opcheck_cases():
    g = torch.Generator().manual_seed(11)
    r = lambda *s: torch.randn(*s, dtype=torch.float64, generator=g)  # noqa: E731
    t, b, i, h = 3, 2, 3, 4
    x = r(t, b, i)
    return [
        (brt.ops.lstm, (x, r(b, h), r(b, h), r(i + h, 4 * h), r(h), r(h), r(h), r(4 * h), 0.0,
                        0.0, False, False)),
        (brt.ops.lstm, (x, r(b, h), r(b, h), r(i + h, 4 * h), r(h), r(h), r(h), r(4 * h), 1.0,
                        0.5, True, True)),
        (brt.ops.gru_reset_after, (x, r(b, h), r(i, 3 * h), r(h, 3 * h), r(3 * h), r(3 * h))),
        (brt.ops.gru_reset_before, (x, r(b, h), r(i + h, 2 * h), r(i + h, h), r(2 * h), r(h))),
        # a transposed (strided) weight, as the modules pass it
        (brt.ops.gru_reset_after, (x, r(b, h), r(3 * h, i).t(), r(3 * h, h).t(), r(3 * h),
                                   r(3 * h))),
    ] + ([] if not brt.ops.HAS_SEQ_LENGTHS else [
        (brt.ops.lstm, (x, r(b, h), r(b, h), r(i + h, 4 * h), r(h), r(h), r(h), r(4 * h), 0.0,
                        0.0, False, False, torch.tensor([3, 1]))),
        (brt.ops.gru_reset_after, (x, r(b, h), r(i, 3 * h), r(h, 3 * h), r(3 * h), r(3 * h),
                                   torch.tensor([2, 3]))),
        (brt.ops.gru_reset_before, (x, r(b, h), r(i + h, 2 * h), r(i + h, h), r(2 * h), r(h),
                                    torch.tensor([0, 3]))),
    ])


def check_ops():
    for op, args in _opcheck_cases():
        args = tuple(a.requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_leaf
                     and a.is_floating_point() else a for a in args)
        torch.library.opcheck(op, args)


def test_torch_compile():
    torch.manual_seed(0)
    m = brt.GRU(4, 5, num_layers=2, bidirectional=True)
    ref = torch.nn.GRU(4, 5, num_layers=2, bidirectional=True)
    ref.load_state_dict(m.state_dict())
    x = torch.randn(6, 3, 4)
    cm = torch.compile(m, backend="aot_eager", fullgraph=True)
    out, h = cm(x)
    out.sum().backward()
    g = [p.grad.clone() for p in m.parameters()]
    r_out, r_h = ref(x)
    r_out.sum().backward()
    torch.testing.assert_close(out, r_out, atol=F32, rtol=0)
    torch.testing.assert_close(h, r_h, atol=F32, rtol=0)
    for a, p in zip(g, ref.parameters()):
        torch.testing.assert_close(a, p.grad, atol=F32, rtol=0)




if __name__ == "__main__":
    check_ops()
    test_torch_compile()
    print("opcheck and torch.compile: ok")
