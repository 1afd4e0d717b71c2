"""torch.jit.script of blockrnn.torch.LSTM / GRU, against torch.nn's modules: outputs, final
states and gradients for batched, unbatched and batch_first inputs with and without hx, save
and load, and the errors. (A scripted module takes Tensor inputs, not a PackedSequence: see
docs/torch.md. torch.nn.LSTM / GRU themselves script in this torch, but the scripted module has
no callable forward, so the reference is torch.nn's eager module.)

Tolerance: float64 at 1e-12, as in test_torch_modules.py (the same formulas summed in another
order; ~1e-15 observed on O(1) values)."""
import io
import warnings

import pytest

torch = pytest.importorskip("torch")
import blockrnn.torch as brt  # noqa: E402

F64 = 1e-12
I, H, T, B = 3, 4, 5, 2


def _script(m):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "torch.jit.script is deprecated"
        return torch.jit.script(m)


def _pair(mode, **kw):
    torch.manual_seed(4)
    ref = getattr(torch.nn, mode)(I, H, num_layers=2, bidirectional=True, **kw).double()
    mine = getattr(brt, mode)(I, H, num_layers=2, bidirectional=True, **kw).double()
    mine.load_state_dict(ref.state_dict())
    return ref, _script(mine)


def _hx(mode, batch):
    shape = (4, B, H) if batch else (4, H)
    h = torch.randn(*shape, dtype=torch.float64)
    return (h, torch.randn(*shape, dtype=torch.float64)) if mode == "LSTM" else h


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("unbatched", [False, True])
@pytest.mark.parametrize("with_hx", [False, True])
def test_scripted_matches_torch_nn(mode, batch_first, unbatched, with_hx):
    ref, mine = _pair(mode, batch_first=batch_first)
    torch.manual_seed(5)
    shape = (T, I) if unbatched else ((B, T, I) if batch_first else (T, B, I))
    x = torch.randn(*shape, dtype=torch.float64)
    hx = _hx(mode, not unbatched) if with_hx else None
    results = []
    for m in (ref, mine):
        xx = x.clone().requires_grad_(True)
        out, state = m(xx, hx)
        states = list(state) if mode == "LSTM" else [state]
        loss = (out * out).sum() + sum((s * s).sum() for s in states)
        grads = torch.autograd.grad(loss, [xx, *m.parameters()])
        results.append([out, *states, *grads])
    for w, g in zip(*results):
        assert g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g, w, atol=F64, rtol=0)


def test_scripted_lstm_extras_run_as_the_eager_module():
    torch.manual_seed(6)
    m = brt.LSTM(I, H, num_layers=2, use_peephole=True, cell_clip=0.8, forget_bias=0.5).double()
    x = torch.randn(T, B, I, dtype=torch.float64)
    want = m(x)
    got = _script(m)(x)
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)
    torch.testing.assert_close(got[1][1], want[1][1], atol=0, rtol=0)


def test_scripted_training_step_follows_the_parameters():
    ref, mine = _pair("GRU")
    x = torch.randn(T, B, I, dtype=torch.float64)
    for m in (ref, mine):
        opt = torch.optim.SGD(m.parameters(), lr=0.3)
        for _ in range(2):
            opt.zero_grad()
            m(x)[0].sum().backward()
            opt.step()
    torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)


def test_scripted_save_and_load():
    _, mine = _pair("LSTM")
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "torch.jit.save is deprecated"
        torch.jit.save(mine, buf)
        buf.seek(0)
        loaded = torch.jit.load(buf)
    x = torch.randn(T, B, I, dtype=torch.float64)
    torch.testing.assert_close(loaded(x)[0], mine(x)[0], atol=0, rtol=0)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_scripted_errors_carry_torch_nn_s_message(mode):
    ref, mine = _pair(mode)
    for bad in (torch.zeros(1, T, B, I, dtype=torch.float64),  # 4-D
                torch.zeros(T, B, I + 1, dtype=torch.float64),  # input_size
                torch.zeros(0, B, I, dtype=torch.float64)):  # zero length
        errors = []
        for m in (ref, mine):
            with pytest.raises(Exception) as e:
                m(bad)
            errors.append(e.value)
        # TorchScript reports the error as its own (torch.jit.Error, with the scripted source
        # and the original type's name): torch.nn's type and message inside
        assert isinstance(errors[1], torch.jit.Error)
        assert f"{type(errors[0]).__name__}: {errors[0]}" in str(errors[1])
