"""blockrnn.torch's plans and weights: gradients in torch.nn's memory layout, weights packed
once per change of the parameters (blockrnn.torch.ops.weight_packs()), the plan cache keyed by
value (NaN included), bounded, and sized to the calls, and lengths of any integer dtype.

Tolerances: float64 against torch.nn at 1e-12 (the reason is in test_torch_modules.py's
header: the same formulas summed in another order, ~1e-15 observed on O(1) values)."""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import blockrnn.torch as brt  # noqa: E402
from blockrnn.torch import _ops  # noqa: E402

F64 = 1e-12
I, H, T, B = 4, 3, 5, 2

VARIANTS = [("LSTM", {}), ("LSTM", dict(bias=False)), ("LSTM", dict(forget_bias=0.5)),
            ("LSTM", dict(use_peephole=True)), ("GRU", {}), ("GRU", dict(bias=False)),
            ("GRU", dict(reset_after=False))]


def _module(mode, **kw):
    torch.manual_seed(5)
    return getattr(brt, mode)(I, H, num_layers=2, bidirectional=True, **kw).double()


def _pair(mode):
    torch.manual_seed(5)
    ref = getattr(torch.nn, mode)(I, H, num_layers=2, bidirectional=True).double()
    mine = getattr(brt, mode)(I, H, num_layers=2, bidirectional=True).double()
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def _loss(m, x):
    out = m(x)[0]
    return (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)).sum()


@pytest.mark.parametrize("mode, kw", VARIANTS)
def test_weight_gradients_have_torch_nn_s_layout(mode, kw):
    m = _module(mode, **kw)
    x = torch.randn(T, B, I, dtype=torch.float64)
    grads = torch.autograd.grad(_loss(m, x), list(m.parameters()))
    for (name, p), g in zip(m.named_parameters(), grads):
        assert g.is_contiguous(), name
        assert g.stride() == p.stride(), name
        g.view(-1)  # raised on the transposed views before


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_weight_gradient_strides_equal_torch_nn_s(mode):
    ref, mine = _pair(mode)
    x = torch.randn(T, B, I, dtype=torch.float64)
    want = torch.autograd.grad(_loss(ref, x), list(ref.parameters()))
    got = torch.autograd.grad(_loss(mine, x), list(mine.parameters()))
    for w, g in zip(want, got):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g, w, atol=F64, rtol=0)


@pytest.mark.parametrize("mode, kw", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_an_input_without_grad_changes_no_other_gradient(mode, kw, dtype):
    # x that needs no gradient (a model's data): the backward skips the input-gradient products
    # (torch.nn computes none either); every other gradient keeps its bits
    m = _module(mode, **kw).to(dtype)
    x = torch.randn(T, B, I, dtype=torch.float64).to(dtype)
    h0 = torch.randn(2 * 2, B, H, dtype=torch.float64).to(dtype).requires_grad_()

    def grads(x):
        out, hn = m(x, (h0, h0) if mode == "LSTM" else h0)
        hn = hn[0] if mode == "LSTM" else hn
        w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)
        loss = (out * w).sum() + hn.sum()
        return torch.autograd.grad(loss, [h0, *m.parameters()])

    xr = x.clone().requires_grad_()
    with_x = grads(xr)
    without = grads(x)
    for a, b in zip(with_x, without):
        assert torch.equal(a, b)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("x_wanted, states_wanted", [(False, True), (True, False),
                                                      (False, False)])
def test_the_grad_op_returns_no_gradient_that_is_not_wanted(mode, x_wanted, states_wanted):
    # x_grad_wanted=False skips the input-gradient products, states_grad_wanted=False the first
    # step's recurrent products (h0_grad, c0_grad); the gradients returned are bit for bit the
    # full call's.
    ref, mine = _pair(mode)
    x = torch.randn(T, B, I, dtype=torch.float64)
    h0 = torch.randn(4, B, H, dtype=torch.float64)
    lstm = mode == "LSTM"
    c0 = torch.randn(4, B, H, dtype=torch.float64) if lstm else None
    params = list(mine.parameters())
    attrs = ("lstm_v2" if lstm else "gru_reset_after", 2, True, True, 0.0, 0.0, False)
    lens = torch.tensor([T, 1, T - 1])[:B]
    y, hn, cn, reserve = brt.ops.nn_rnn(x, h0, c0, params, lens, None, *attrs)
    gy, ghn = torch.randn_like(y), torch.randn_like(hn)
    gcn = torch.randn_like(cn) if lstm else None
    full = brt.ops.nn_rnn_grad(x, h0, c0, params, lens, None, reserve, gy, ghn, gcn, *attrs)
    part = brt.ops.nn_rnn_grad(x, h0, c0, params, lens, None, reserve, gy, ghn, gcn, *attrs,
                               x_grad_wanted=x_wanted, states_grad_wanted=states_wanted)
    assert full[0].shape == x.shape and part[0].shape == (x.shape if x_wanted else (0,))
    assert part[1].shape == (h0.shape if states_wanted else (0,))
    assert part[2].shape == (h0.shape if states_wanted and lstm else (0,))
    kept = [k for k in range(len(full)) if part[k].numel() > 0]
    assert kept[-len(params):] == list(range(3, 3 + len(params)))
    for k in kept:
        assert torch.equal(full[k], part[k])


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_initial_states_without_gradient_give_the_same_parameter_gradients(mode):
    # torch.nn's zero initial states need no gradient, and the backward then computes none
    # (states_grad_wanted=False); the parameters' gradients are those of a call whose given
    # initial states require one, bit for bit.
    ref, mine = _pair(mode)
    x = torch.randn(T, B, I, dtype=torch.float64)
    grads = []
    for wanted in (True, False):
        h0 = torch.randn(4, B, H, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        h0.requires_grad_(wanted)
        hx = (h0, h0.detach().clone().requires_grad_(wanted)) if mode == "LSTM" else h0
        out, _ = mine(x, hx)
        grads.append(torch.autograd.grad(out.square().sum(), list(mine.parameters())))
        if wanted:
            hn_grad = torch.autograd.grad(mine(x, hx)[0].sum(), h0)[0]
            assert hn_grad.abs().sum() > 0
    for a, b in zip(*grads):
        assert torch.equal(a, b)


@pytest.mark.parametrize("mode, kw", VARIANTS)
def test_unchanged_parameters_are_not_packed_again(mode, kw):
    m = _module(mode, **kw)
    x = torch.randn(T, B, I, dtype=torch.float64)
    _loss(m, x).backward()  # the first call packs
    before = _ops.weight_packs()
    for _ in range(3):  # forward and backward, three steps, no parameter changed
        _loss(m, x).backward()
    with torch.no_grad():
        m(x)
    assert _ops.weight_packs() == before


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_optimiser_step_repacks_once_and_matches_torch_nn(mode):
    ref, mine = _pair(mode)
    x = torch.randn(T, B, I, dtype=torch.float64)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5)
    opt_mine = torch.optim.SGD(mine.parameters(), lr=0.5)
    for step in range(3):
        for m, opt in ((ref, opt_ref), (mine, opt_mine)):
            opt.zero_grad()
            _loss(m, x).backward()
        packs = _ops.weight_packs()
        opt_ref.step()
        opt_mine.step()  # in place: the versions change
        _loss(mine, x).backward()  # forward repacks once, its backward reuses the pack
        assert _ops.weight_packs() == packs + 1, step
        torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)


def test_writes_the_version_counter_misses_are_seen():
    # .data writes (gradcheck perturbs parameters that way) and swaps bypass the version
    # counter; the plan compares the values too and repacks.
    ref, mine = _pair("LSTM")
    x = torch.randn(T, B, I, dtype=torch.float64)
    mine(x)
    for m in (ref, mine):
        m.weight_hh_l0.data.mul_(2)
    torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)
    new = torch.randn_like(ref.weight_ih_l1)
    for m in (ref, mine):
        m.weight_ih_l1.data = new.clone()
    torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)
    halved = {k: v * 0.5 for k, v in ref.state_dict().items()}
    for m in (ref, mine):
        m.load_state_dict(halved)
    torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)


def test_a_data_write_after_a_repack_is_seen():
    # a repack writes the new stamp's copy of the values over the previous one's (in place):
    # a later .data write must still differ from it
    ref, mine = _pair("GRU")
    x = torch.randn(T, B, I, dtype=torch.float64)
    for m in (ref, mine):
        with torch.no_grad():
            m.weight_ih_l0.add_(0.25)  # the version counter: a repack, the stamp rewritten
    torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)
    for m in (ref, mine):
        m.weight_ih_l0.data.mul_(-1)  # no version change: only the values show it
    torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)


@pytest.mark.parametrize("mode, kw", VARIANTS)
@pytest.mark.parametrize("sizes", [(I, H), (1, H), (I, 1), (1, 1)])
def test_gradients_of_one_call_survive_the_next(mode, kw, sizes):
    # the library writes the weight gradients into buffers of the plan that the next backward
    # reuses; what a backward returned must be copies, including where a size-1 dimension
    # makes a transposed view contiguous (and .contiguous() would return the view itself)
    torch.manual_seed(7)
    m = getattr(brt, mode)(*sizes, num_layers=2, bidirectional=True, **kw).double()
    x = torch.randn(T, B, sizes[0], dtype=torch.float64)
    first = [g.clone() for g in torch.autograd.grad(_loss(m, x), list(m.parameters()))]
    kept = torch.autograd.grad(_loss(m, x), list(m.parameters()))
    torch.autograd.grad(_loss(m, 2 * x + 1), list(m.parameters()))  # other gradients
    for (name, _), f, k in zip(m.named_parameters(), first, kept):
        assert torch.equal(f, k), name


def test_nan_cell_clip_keeps_one_plan():
    _ops.clear_plans()
    m = brt.LSTM(I, H, cell_clip=float("nan"))
    x = torch.randn(T, B, I)
    m(x)[0].sum().backward()
    packs = _ops.weight_packs()
    for _ in range(20):
        m(x)[0].sum().backward()
    assert _ops.cached_plans() == 1
    assert _ops.weight_packs() == packs
    # NaN clips nothing (TensorFlow's cell_clip > 0 test): the unclipped LSTM's result
    plain = brt.LSTM(I, H)
    plain.load_state_dict(m.state_dict())
    torch.testing.assert_close(m(x)[0], plain(x)[0], atol=0, rtol=0)


def test_plan_cache_is_bounded():
    _ops.clear_plans()
    x = torch.randn(T, B, I)
    for k in range(3 * _ops.MAX_PLANS):
        brt.LSTM(I, H, cell_clip=1.0 + k)(x)
        assert _ops.cached_plans() <= _ops.MAX_PLANS
    assert _ops.cached_plans() == _ops.MAX_PLANS


def test_two_modules_of_one_configuration_keep_a_plan_each():
    a, b = brt.GRU(I, H), brt.GRU(I, H)
    x = torch.randn(T, B, I)
    a(x), b(x)
    packs = _ops.weight_packs()
    for _ in range(3):
        a(x), b(x)
    assert _ops.weight_packs() == packs


def _plan_sizes():
    return sorted((p.T, p.B) for p in _ops._PLANS.values())


def test_plans_are_sized_to_the_calls_not_to_the_maxima():
    _ops.clear_plans()
    m = brt.GRU(2, 2)
    m(torch.randn(4000, 1, 2))
    m(torch.randn(10, 512, 2))
    # one plan of the second call's size, not 4000 x 512
    assert _plan_sizes() == [(10, 512)]
    # nearby shapes (varying lengths) share one grown plan
    m(torch.randn(12, 512, 2))
    m(torch.randn(11, 500, 2))
    assert _plan_sizes() == [(12, 512)]


def test_lengths_of_any_integer_dtype_as_pack_padded_sequence_takes():
    x = torch.randn(T, B, I, dtype=torch.float64)
    h0 = torch.zeros(1, B, H, dtype=torch.float64)
    m = _module("GRU")
    params = m._stack_params()[:4]
    args = (x, h0, None, params)
    attrs = ("gru_reset_after", 1, False, True, 0.0, 0.0, False)
    want = _ops.nn_rnn(*args, torch.tensor([5, 2]), None, *attrs)[0]
    for dtype in (torch.int32, torch.int16, torch.uint8):
        got = _ops.nn_rnn(*args, torch.tensor([5, 2], dtype=dtype), None, *attrs)[0]
        torch.testing.assert_close(got, want, atol=0, rtol=0)
    for bad in (torch.tensor([5.0, 2.0]), torch.tensor([True, False])):
        with pytest.raises(TypeError, match=r"blockrnn::nn_rnn: seq_lengths must be an integer "
                                            r"CPU tensor"):
            _ops.nn_rnn(*args, bad, None, *attrs)
    w = torch.zeros(I + H, 4 * H, dtype=torch.float64)
    z = torch.zeros(4 * H, dtype=torch.float64)
    hb = torch.zeros(B, H, dtype=torch.float64)
    want = _ops.lstm(x, hb, hb, w, hb[0], hb[0], hb[0], z, 0.0, 0.0, False, False,
                     torch.tensor([5, 2]))
    got = _ops.lstm(x, hb, hb, w, hb[0], hb[0], hb[0], z, 0.0, 0.0, False, False,
                    torch.tensor([5, 2], dtype=torch.int32))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    with pytest.raises(TypeError, match=r"blockrnn::lstm \(BlockLSTMV2\): seq_lengths must be "
                                        r"an integer CPU tensor"):
        _ops.lstm(x, hb, hb, w, hb[0], hb[0], hb[0], z, 0.0, 0.0, False, False,
                  torch.tensor([5.0, 2.0]))


_OPCHECK_NN_RNN = r"""
import torch
import blockrnn.torch as brt
from blockrnn.torch import _ops

torch.manual_seed(2)
x = torch.randn(4, 3, 3, dtype=torch.float64, requires_grad=True)
for mode, kw in [("LSTM", dict(use_peephole=True, forget_bias=0.5)), ("LSTM", dict(bias=False)),
                 ("GRU", dict(reset_after=False)), ("GRU", {})]:
    m = getattr(brt, mode)(3, 2, num_layers=2, bidirectional=True, **kw).double()
    smode, fb, clip, peep = m._stack_mode()
    h0 = torch.randn(4, 3, 2, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(4, 3, 2, dtype=torch.float64, requires_grad=True) if mode == "LSTM" else None
    args = (x, h0, c0, m._stack_params(), torch.tensor([4, 1, 3]), None, smode, 2, True, m.bias,
            fb, clip, peep)
    torch.library.opcheck(_ops.nn_rnn, args)
    y, h_n, c_n, reserve = _ops.nn_rnn(*args)
    flat = torch.cat([p.detach().reshape(-1) for p in m._stack_params()])
    # (the grad ops have no gradient of their own: opcheck them on plain tensors)
    c0 = None if c0 is None else c0.detach()
    torch.library.opcheck(_ops.rnn_grad_flat, (x.detach(), h0.detach(), c0, flat, args[4],
                                               None, reserve.detach(),
                                               torch.randn_like(y), torch.randn_like(h_n),
                                               torch.randn_like(c_n) if c0 is not None else None,
                                               "nn", *args[6:]))
print("ok")
"""


def test_nn_rnn_opcheck_in_fresh_process():
    res = subprocess.run([sys.executable, "-c", _OPCHECK_NN_RNN], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr


# ------------------------------------------------------------------ vmap, batched gradients

@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_is_grads_batched_matches_torch_nn(mode):
    ref, mine = _pair(mode)
    x = torch.randn(T, B, I, dtype=torch.float64, requires_grad=True)
    v = torch.randn(4, T, B, 2 * H, dtype=torch.float64)
    want = torch.autograd.grad(ref(x)[0], [x, *ref.parameters()], v, is_grads_batched=True)
    got = torch.autograd.grad(mine(x)[0], [x, *mine.parameters()], v, is_grads_batched=True)
    for w, g in zip(want, got):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w, atol=F64, rtol=0)
    # each batch entry is the plain gradient of its vector
    plain = torch.autograd.grad(mine(x)[0], [x, *mine.parameters()], v[2])
    for g, p in zip(got, plain):
        torch.testing.assert_close(g[2], p, atol=F64, rtol=0)


@pytest.mark.parametrize("mode, kw", [("LSTM", dict(use_peephole=True, forget_bias=0.5)),
                                      ("LSTM", dict(bias=False)),
                                      ("GRU", dict(reset_after=False))])
def test_gradcheck_with_batched_grad(mode, kw):
    torch.manual_seed(3)
    m = getattr(brt, mode)(3, 2, num_layers=2, bidirectional=True, **kw).double()
    names = [n for n, _ in m.named_parameters()]
    x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 1])

    def f(x, *ps):
        with torch.nn.utils.stateless._reparametrize_module(m, dict(zip(names, ps))):
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths)
            out, state = m(packed)
            return out.data, (state[0] if mode == "LSTM" else state)

    params = [p.detach().requires_grad_(True) for p in m.parameters()]
    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-7,
                                    check_batched_grad=True)


def test_vmap_of_the_forward_is_the_loop():
    m = _module("LSTM")
    xs = torch.randn(3, T, B, I, dtype=torch.float64)
    got = torch.vmap(lambda x: m(x)[0])(xs)
    want = torch.stack([m(x)[0] for x in xs])
    torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("mode, kw", VARIANTS)
def test_float16_weight_gradients_have_torch_nn_s_layout(mode, kw):
    # float16 runs layer by layer on the one-shot ops; its gradients are contiguous too
    m = _module(mode, **kw).half()
    x = torch.randn(T, B, I).half()
    grads = torch.autograd.grad(_loss(m, x), list(m.parameters()))
    for (name, p), g in zip(m.named_parameters(), grads):
        assert g.dtype == torch.float16 and g.stride() == p.stride(), name


def _fill_sizes(fn):
    """The element counts of the tensors that torch fills (zeros) while fn runs."""
    with torch.profiler.profile(record_shapes=True) as prof:
        fn()
    sizes = []
    for event in prof.events():
        if event.name in ("aten::fill_", "aten::zero_") and event.input_shapes:
            shape = event.input_shapes[0]
            sizes.append(int(torch.tensor(shape).prod()) if shape else 1)
    return sizes


@pytest.mark.parametrize("mode, used", [("LSTM", "y"), ("LSTM", "h_n"), ("LSTM", "c_n"),
                                        ("LSTM", "h_n c_n"), ("GRU", "y"), ("GRU", "h_n")])
def test_a_loss_that_leaves_outputs_unused_gets_torch_nn_s_gradients(mode, used):
    # The gradients of outputs the loss leaves unused reach the backward as None: the stack
    # op's reserve (its fourth output, never differentiated) is not filled with zeros at each
    # backward, and a missing y, h_n or c_n gradient is a zero the backward makes itself.
    ref, mine = _pair(mode)
    torch.manual_seed(11)
    x = torch.randn(T, B, I, dtype=torch.float64)
    h0 = torch.randn(4, B, H, dtype=torch.float64)
    states = (h0, torch.randn(4, B, H, dtype=torch.float64)) if mode == "LSTM" else h0

    def grads(m):
        xs = x.clone().requires_grad_()
        st = tuple(s.clone().requires_grad_() for s in states) if mode == "LSTM" else \
            states.clone().requires_grad_()
        y, final = m(xs, st)
        h_n, c_n = final if mode == "LSTM" else (final, None)
        parts = {"y": y, "h_n": h_n, "c_n": c_n}
        loss = sum((parts[k] * torch.linspace(-1, 1, parts[k].numel(), dtype=y.dtype)
                    .view(parts[k].shape)).sum() for k in used.split())
        inputs = [xs, *(st if mode == "LSTM" else (st,)), *m.parameters()]
        out = []
        sizes = _fill_sizes(lambda: out.extend(torch.autograd.grad(loss, inputs)))
        return out, sizes, y.numel()

    want, _, _ = grads(ref)
    got, sizes, y_elems = grads(mine)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, atol=F64, rtol=0)
    # nothing larger than y is filled: the reserve (every step's gates) is not
    assert all(n <= y_elems for n in sizes), (sizes, y_elems)


@pytest.mark.parametrize("op", ["lstm", "gru_reset_after", "gru_reset_before"])
def test_the_sequence_ops_fill_no_zero_gradients_for_outputs_they_never_read(op):
    # The one-op autograd reads the gradients of cs and h (LSTM) or h (GRU) only; the other
    # outputs' (i, f, o, ci, co; r, u, n, hn or c) are never read, so none is made as zeros.
    torch.manual_seed(3)
    r = lambda *shape: torch.randn(*shape, dtype=torch.float64, requires_grad=True)  # noqa: E731
    x = r(T, B, I)
    if op == "lstm":
        outs = brt.ops.lstm(x, r(B, H), r(B, H), r(I + H, 4 * H), r(H), r(H), r(H), r(4 * H),
                            1.0, -1.0, True, True)
        used = [outs[1], outs[6]]  # cs, h
    elif op == "gru_reset_after":
        outs = brt.ops.gru_reset_after(x, r(B, H), r(I, 3 * H), r(H, 3 * H), r(3 * H),
                                       r(3 * H))
        used = [outs[-1]]
    else:
        outs = brt.ops.gru_reset_before(x, r(B, H), r(I + H, 2 * H), r(I + H, H), r(2 * H),
                                        r(H))
        used = [outs[-1]]
    loss = sum((t * torch.linspace(-1, 1, t.numel(), dtype=t.dtype).view(t.shape)).sum()
               for t in used)
    sizes = _fill_sizes(lambda: torch.autograd.grad(loss, [x]))
    assert all(n < T * B * H for n in sizes), sizes
