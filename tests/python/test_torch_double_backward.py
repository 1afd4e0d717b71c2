"""Double backward through blockrnn.torch.LSTM / GRU: gradients of gradients.

A backward run with create_graph=True computes the stack's gradients as a differentiable torch
graph (blockrnn.torch._differentiable) instead of the library's backward. Checked here: those
first-order gradients equal the library's (so the graph computes the same function), and
gradgradcheck in float64 on small shapes (2 layers, bidirectional, per-example lengths, both
GRU variants, peepholes, forget_bias, an active cell_clip, dropout), and a gradient penalty
against torch.nn itself."""
import pytest

torch = pytest.importorskip("torch")
import blockrnn.torch as brt  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

I, H, T, B = 2, 2, 3, 2

CONFIGS = {
    "LSTM": (brt.LSTM, {}),
    "LSTM peephole clip": (brt.LSTM, dict(use_peephole=True, cell_clip=0.3)),
    "LSTM forget_bias peephole clip": (brt.LSTM, dict(use_peephole=True, cell_clip=0.3,
                                                      forget_bias=0.7)),
    "LSTM no bias": (brt.LSTM, dict(bias=False)),
    "GRU": (brt.GRU, {}),
    "GRU reset_before": (brt.GRU, dict(reset_after=False)),
}


def _setup(name, dropout=0.0, seed=0):
    cls, kw = CONFIGS[name]
    torch.manual_seed(seed)
    m = cls(I, H, num_layers=2, bidirectional=True, dropout=dropout, **kw).double()
    lstm = cls is brt.LSTM
    x = torch.randn(T, B, I, dtype=torch.float64, requires_grad=True)
    states = [torch.randn(4, B, H, dtype=torch.float64, requires_grad=True)
              for _ in range(2 if lstm else 1)]
    return m, lstm, x, states


def _fn(m, lstm, n_states, lengths):
    """(x, *states, *params) -> (output, *final states); the parameters are the module's own
    tensors (gradcheck perturbs them in place), dropout masks drawn from a fixed seed."""
    def f(x, *rest):
        torch.manual_seed(1)
        hx = tuple(rest[:n_states]) if lstm else rest[0]
        inp = x if lengths is None else pack_padded_sequence(x, lengths)
        out, st = m(inp, hx)
        out = out if lengths is None else out.data
        return (out, *(st if lstm else (st,)))
    return f


@pytest.mark.parametrize("lengths", [None, [3, 1]], ids=["plain", "packed"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_first_order_gradients_of_the_graph_are_the_library_s(name, lengths):
    m, lstm, x, states = _setup(name, dropout=0.4)
    f = _fn(m, lstm, len(states), lengths)
    inputs = [x, *states, *m.parameters()]

    def loss():
        outs = f(*inputs)
        return sum((o * o).sum() * (k + 1) for k, o in enumerate(outs))
    lib = torch.autograd.grad(loss(), inputs)
    graph = torch.autograd.grad(loss(), inputs, create_graph=True)
    assert all(g.grad_fn is not None for g in graph)  # the graph route was taken
    for a, b in zip(lib, graph):
        # the same float64 terms summed in another order (the library's blocked products
        # against torch's): a few units of rounding of values of order 1
        torch.testing.assert_close(b, a, rtol=0, atol=1e-13)
    if "clip" in name:  # the clip is active: some cell state sits on the bound
        c_n = f(*inputs)[2]
        assert (c_n.abs() == 0.3).any()


@pytest.mark.parametrize("lengths", [None, [3, 1]], ids=["plain", "packed"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_gradgradcheck(name, lengths):
    m, lstm, x, states = _setup(name, dropout=0.4)
    f = _fn(m, lstm, len(states), lengths)
    # fast_mode: the second derivative against finite differences of the first along random
    # directions (the full Jacobian takes minutes per case on this small machine); float64,
    # gradcheck's default tolerances
    assert torch.autograd.gradgradcheck(f, (x, *states, *m.parameters()), fast_mode=True)


@pytest.mark.parametrize("name", ["LSTM peephole clip", "GRU reset_before"])
def test_gradgradcheck_full_jacobian(name):
    m, lstm, x, states = _setup(name)
    f = _fn(m, lstm, len(states), [3, 1])
    assert torch.autograd.gradgradcheck(f, (x, *states, *m.parameters()))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_gradient_penalty_matches_torch_nn(mode):
    # a gradient penalty (the gradient of |d out / d x|^2), a nonlinear use of the first
    # gradient, against torch.nn's own double backward
    torch.manual_seed(0)
    ref = getattr(torch.nn, mode)(I, H, num_layers=2, bidirectional=True).double()
    mine = getattr(brt, mode)(I, H, num_layers=2, bidirectional=True).double()
    mine.load_state_dict(ref.state_dict())
    x0 = torch.randn(T, B, I, dtype=torch.float64)
    grads = []
    for m in (ref, mine):
        x = x0.clone().requires_grad_(True)
        out = m(x)[0]
        (gx,) = torch.autograd.grad((out * out).sum(), x, create_graph=True)
        penalty = (gx * gx).sum()
        grads.append(torch.autograd.grad(penalty, [x, *m.parameters()]))
    for a, b in zip(*grads):
        # float64; torch.nn's and blockrnn's first gradients differ by rounding (1e-15), and
        # the second derivative sums products of them
        torch.testing.assert_close(b, a, rtol=0, atol=1e-12)


def test_ops_layout_double_backward():
    # blockrnn::rnn (the ops' layout) takes the same route
    torch.manual_seed(0)
    m = brt.GRU(I, H, reset_after=False).double()
    from blockrnn.torch import _ops
    params = [p.detach().clone().requires_grad_(True)
              for p in _ops.nn_to_ops_layout("gru", H, *m._layer_params(0, 0)[:4])]
    x = torch.randn(T, B, I, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(1, B, H, dtype=torch.float64, requires_grad=True)

    def f(x, h0, *params):
        y, h_n, _, _ = torch.ops.blockrnn.rnn(x, h0, None, list(params), None, None, "gru", 1,
                                              False, 0.0, 0.0, False)
        return y, h_n
    assert torch.autograd.gradgradcheck(f, (x, h0, *params))
