"""torch.func's transforms over blockrnn.torch modules, as over torch.nn's: grad, vjp, jacrev,
per-example gradients (vmap of grad), model ensembles (vmap over stacked parameters),
gradients of gradients, and forward mode (jvp, jacfwd, hessian), through
torch.func.functional_call; and forward mode through torch.autograd.forward_ad's dual tensors
and gradcheck.

Oracles: torch.nn itself for the variants it has (float64, 1e-12: the same formulas summed in
another order, ~1e-15 observed on O(1) values, as in test_torch_modules.py); for TensorFlow's
variants (peepholes, forget_bias, the reset-before GRU, cell_clip) the module's own gradient
from torch.autograd.grad, the library's backward, which test_torch_modules.py checks against
float64 finite differences (the transforms compute theirs with torch operations: a different
route to the same numbers)."""
import pytest

torch = pytest.importorskip("torch")
import blockrnn.torch as brt  # noqa: E402
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vjp, vmap  # noqa: E402

F64 = 1e-12
I, H, T, B = 3, 4, 4, 3

# (mode, constructor arguments) torch.nn has too
SHARED = [("LSTM", {}), ("GRU", {}), ("LSTM", dict(num_layers=2, bidirectional=True)),
          ("GRU", dict(num_layers=2, bidirectional=True, bias=False))]
# TensorFlow's variants: blockrnn only
TF_ONLY = [("LSTM", dict(use_peephole=True, forget_bias=0.5)), ("GRU", dict(reset_after=False)),
           ("LSTM", dict(cell_clip=0.2, num_layers=2))]


def _pair(mode, kw):
    torch.manual_seed(7)
    ref = getattr(torch.nn, mode)(I, H, **kw).double()
    mine = getattr(brt, mode)(I, H, **kw).double()
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def _params(m):
    return {k: v.detach() for k, v in m.named_parameters()}


def _final_h(state):
    return state[0] if isinstance(state, tuple) else state


def _loss_fn(m):
    """A scalar of every output (y and the final hidden state), weighted so that no gradient
    is a plain sum."""
    def loss(params, x):
        y, state = functional_call(m, params, (x,))
        w = torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view(y.shape)
        return (y * w).sum() + (_final_h(state) ** 2).sum()
    return loss


def _assert_close(got, want, tol=F64):
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            torch.testing.assert_close(got[k], want[k], atol=tol, rtol=0, msg=k)
    else:
        torch.testing.assert_close(got, want, atol=tol, rtol=0)


@pytest.mark.parametrize("mode, kw", SHARED)
def test_reverse_mode_transforms_match_torch_nn(mode, kw):
    ref, mine = _pair(mode, kw)
    x = torch.randn(T, B, I, dtype=torch.float64)
    D = 2 if kw.get("bidirectional") else 1
    cot = torch.randn(T, B, D * H, dtype=torch.float64)
    results = []
    for m in (ref, mine):
        p, loss = _params(m), _loss_fn(m)

        def y_of(x, m=m, p=p):
            return functional_call(m, p, (x,))[0]
        _, pull = vjp(y_of, x)
        results.append({
            "grad params": grad(loss)(p, x),
            "grad x": grad(loss, argnums=1)(p, x),
            "vjp": pull(cot)[0],
            "jacrev": jacrev(lambda x: y_of(x).sum(0))(x),
        })
    for k in results[0]:
        _assert_close(results[1][k], results[0][k])


@pytest.mark.parametrize("mode, kw", SHARED)
def test_per_example_gradients_are_each_example_s_gradient(mode, kw):
    # vmap over the batch of grad (Opacus-style per-example gradients): each entry is
    # torch.nn's gradient of that example alone
    ref, mine = _pair(mode, kw)
    x = torch.randn(T, B, I, dtype=torch.float64)
    loss = _loss_fn(mine)
    got = vmap(grad(loss), in_dims=(None, 1))(_params(mine), x.unsqueeze(2))
    ref_loss = _loss_fn(ref)
    for b in range(B):
        want = grad(ref_loss)(_params(ref), x[:, b:b + 1])
        _assert_close({k: v[b] for k, v in got.items()}, want)


@pytest.mark.parametrize("mode, kw", SHARED[:2])
def test_gradients_of_gradients_match_torch_nn(mode, kw):
    ref, mine = _pair(mode, kw)
    x = torch.randn(T, B, I, dtype=torch.float64)
    out = []
    for m in (ref, mine):
        p, loss = _params(m), _loss_fn(m)
        # d/dx of a function of dL/dx, and d/dW_hh of the norm of dL/dW_ih
        out.append((grad(lambda x: (grad(loss, argnums=1)(p, x) ** 2).sum())(x),
                    grad(lambda w: (grad(loss)({**p, "weight_hh_l0": w}, x)["weight_ih_l0"]
                                    ** 2).sum())(p["weight_hh_l0"])))
    for got, want in zip(out[1], out[0]):
        _assert_close(got, want)


@pytest.mark.parametrize("mode, kw", SHARED)
def test_forward_mode_transforms_match_torch_nn(mode, kw):
    ref, mine = _pair(mode, kw)
    x = torch.randn(T, B, I, dtype=torch.float64)
    tx = torch.randn_like(x)
    out = []
    for m in (ref, mine):
        p = _params(m)
        tw = torch.randn_like(p["weight_hh_l0"], generator=torch.Generator().manual_seed(3))

        def y_of(x, w, m=m, p=p):
            return functional_call(m, {**p, "weight_hh_l0": w}, (x,))[0]
        out.append({
            "jvp": jvp(y_of, (x, p["weight_hh_l0"]), (tx, tw))[1],
            "jacfwd": jacfwd(lambda x: y_of(x, p["weight_hh_l0"]).sum())(x),
            "hessian": hessian(lambda b: _loss_fn(m)({**p, "bias_hh_l0": b}, x))(p["bias_hh_l0"])
            if kw.get("bias", True) else None,
        })
    for k in out[0]:
        if out[0][k] is not None:
            _assert_close(out[1][k], out[0][k])


@pytest.mark.parametrize("mode, kw", TF_ONLY)
def test_tf_variants_transforms_give_the_module_s_gradient(mode, kw):
    torch.manual_seed(9)
    m = getattr(brt, mode)(I, H, **kw).double()
    x = torch.randn(T, B, I, dtype=torch.float64)
    p, loss = _params(m), _loss_fn(m)
    got = grad(loss, argnums=(0, 1))(p, x)
    xs = x.clone().requires_grad_()
    want = torch.autograd.grad(loss(dict(m.named_parameters()), xs), [*m.parameters(), xs])
    _assert_close(got[0], dict(zip(p, want[:-1])))
    _assert_close(got[1], want[-1])
    per_example = vmap(grad(loss), in_dims=(None, 1))(p, x.unsqueeze(2))
    for b in range(B):
        _assert_close({k: v[b] for k, v in per_example.items()}, grad(loss)(p, x[:, b:b + 1]))


def test_tf_variant_forward_mode_is_its_reverse_mode_transposed():
    # <J·t, c> = <t, Jᵀ·c>: jvp and vjp of the same function agree (peepholes, forget_bias)
    torch.manual_seed(13)
    m = brt.LSTM(I, H, use_peephole=True, forget_bias=0.5).double()
    p = _params(m)
    x, t = torch.randn(T, B, I, dtype=torch.float64), torch.randn(T, B, I, dtype=torch.float64)
    c = torch.randn(T, B, H, dtype=torch.float64)

    def y_of(x):
        return functional_call(m, p, (x,))[0]
    forward = (jvp(y_of, (x,), (t,))[1] * c).sum()
    backward = (vjp(y_of, x)[1](c)[0] * t).sum()
    torch.testing.assert_close(forward, backward, atol=F64, rtol=0)


def test_forward_mode_with_cell_clip_is_refused_by_name():
    m = brt.LSTM(I, H, cell_clip=0.2).double()
    x = torch.randn(T, B, I, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="cell_clip > 0"):
        jvp(lambda x: functional_call(m, _params(m), (x,))[0], (x,), (torch.ones_like(x),))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_an_ensemble_vmapped_over_stacked_parameters_is_each_model(mode):
    # torch.func's model ensembling: one module's code over the stacked parameters of several
    import copy
    torch.manual_seed(17)
    models = [getattr(brt, mode)(I, H, num_layers=2).double() for _ in range(3)]
    params, buffers = torch.func.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    x = torch.randn(T, B, I, dtype=torch.float64)

    def y_of(p, b, x):
        return functional_call(base, (p, b), (x,))[0]
    got = vmap(y_of, in_dims=(0, 0, None))(params, buffers, x)
    for k, m in enumerate(models):
        torch.testing.assert_close(got[k], m(x)[0], atol=0, rtol=0)  # the same library call
    grads = vmap(grad(lambda p, b, x: (y_of(p, b, x) ** 2).sum()), in_dims=(0, 0, None))(
        params, buffers, x)
    for k, m in enumerate(models):
        want = torch.autograd.grad((m(x)[0] ** 2).sum(), list(m.parameters()))
        _assert_close({n: g[k] for n, g in grads.items()}, dict(zip(params, want)))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_forward_ad_dual_tensors_match_torch_nn(mode):
    # torch.autograd.forward_ad (dual tensors, no torch.func): the modules' jvp takes the
    # tangent in reverse mode twice there, since dual levels do not nest
    import torch.autograd.forward_ad as fwAD
    ref, mine = _pair(mode, dict(num_layers=2, bidirectional=True))
    x = torch.randn(T, B, I, dtype=torch.float64)
    t = torch.randn_like(x)
    out = []
    for m in (ref, mine):
        with fwAD.dual_level():
            y, state = m(fwAD.make_dual(x, t))
            out.append((fwAD.unpack_dual(y).tangent, fwAD.unpack_dual(_final_h(state)).tangent))
    _assert_close(out[1][0], out[0][0])
    _assert_close(out[1][1], out[0][1])


@pytest.mark.parametrize("mode, kw", [("LSTM", dict(use_peephole=True)), ("GRU", {}),
                                      ("GRU", dict(reset_after=False))])
def test_gradcheck_with_forward_ad(mode, kw):
    torch.manual_seed(19)
    m = getattr(brt, mode)(2, 2, **kw).double()
    x = torch.randn(3, 2, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: m(x)[0], (x,), check_forward_ad=True,
                                    check_batched_forward_grad=True)
