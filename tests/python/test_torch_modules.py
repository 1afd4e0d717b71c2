"""blockrnn.torch.LSTM / GRU against torch.nn.LSTM / torch.nn.GRU themselves, TensorFlow for the
TF-only variants (GRU reset_after=False, LSTM peepholes / forget_bias / cell_clip), gradcheck,
opcheck and torch.compile.

Tolerances (docs/tolerances.md style):
- float64 against torch.nn: 1e-12. Same formulas, different summation order (blockrnn's GEMMs
  vs torch's MKL/oneDNN); observed differences are ~1e-15 on O(1) values.
- float32 against torch.nn: 2e-5 absolute. Values are O(1); each gate pre-activation sums
  I+H <= 16 products and the gradients accumulate over T <= 6 steps and B examples, in
  another order than torch's, so a few hundred float32 ulps (eps 1.2e-7) are expected.
- against TensorFlow's GRUBlockCell / BlockLSTM: float32 (TF registers no float64 kernel for
  them), 2e-5 for the same reason as float32 against torch.nn. Keras GRU in float64: 1e-12.
"""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import blockrnn.torch as brt  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

F64 = 1e-12
F32 = 2e-5

I, H, B, T = 4, 5, 3, 6


def _pair(mode, dtype=torch.float64, **kw):
    torch.manual_seed(1234)
    ref = (torch.nn.LSTM if mode == "LSTM" else torch.nn.GRU)(I, H, **kw).to(dtype)
    mine = (brt.LSTM if mode == "LSTM" else brt.GRU)(I, H, **kw).to(dtype)
    # Non-trivial biases so that both bias sets matter.
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def _inputs(kind, batch_first, dtype, L, D, mode, with_hx, gen):
    lengths = torch.tensor([T, 2, 4])  # unequal, unsorted
    x = torch.randn(B, T, I, dtype=dtype, generator=gen)
    if not batch_first:
        x = x.transpose(0, 1).contiguous()
    hx = None
    if with_hx:
        hx = [torch.randn(L * D, B, H, dtype=dtype, generator=gen)
              for _ in range(2 if mode == "LSTM" else 1)]
    return x, lengths, hx


def _run(m, kind, x, lengths, hx, mode, batch_first):
    x = x.detach().clone().requires_grad_(True)
    hx_leaf = None if hx is None else [h.detach().clone().requires_grad_(True) for h in hx]
    inp = x
    if kind == "packed_sorted":
        order = torch.argsort(lengths, descending=True)
        xs = x.index_select(0 if batch_first else 1, order)
        inp = pack_padded_sequence(xs, lengths[order], batch_first=batch_first,
                                   enforce_sorted=True)
        if hx_leaf is not None:
            # the sorted batch's initial state
            hx_use = [h.index_select(1, order) for h in hx_leaf]
        else:
            hx_use = None
    elif kind == "packed_unsorted":
        inp = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
        hx_use = hx_leaf
    else:
        hx_use = hx_leaf
    if hx_use is not None:
        hx_use = tuple(hx_use) if mode == "LSTM" else hx_use[0]
    out, st = m(inp, hx_use)
    out_t = out.data if kind.startswith("packed") else out
    states = list(st) if mode == "LSTM" else [st]
    gen = torch.Generator().manual_seed(7)
    loss = (out_t * torch.randn(out_t.shape, dtype=out_t.dtype, generator=gen)).sum()
    for s in states:
        loss = loss + (s * torch.randn(s.shape, dtype=s.dtype, generator=gen)).sum()
    loss.backward()
    grads = {"x": x.grad}
    if hx_leaf is not None:
        for k, h in enumerate(hx_leaf):
            grads[f"hx{k}"] = h.grad
    for n, p in m.named_parameters():
        grads[n] = p.grad
    return out, out_t, states, grads


def _compare(ref_res, my_res, tol, kind):
    r_out, r_t, r_states, r_grads = ref_res
    m_out, m_t, m_states, m_grads = my_res
    assert m_t.shape == r_t.shape and m_t.dtype == r_t.dtype
    torch.testing.assert_close(m_t, r_t, atol=tol, rtol=0)
    if kind.startswith("packed"):
        assert torch.equal(m_out.batch_sizes, r_out.batch_sizes)
        for a, b in ((m_out.sorted_indices, r_out.sorted_indices),
                     (m_out.unsorted_indices, r_out.unsorted_indices)):
            assert (a is None and b is None) or torch.equal(a, b)
    assert len(m_states) == len(r_states)
    for a, b in zip(m_states, r_states):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=tol, rtol=0)
    assert m_grads.keys() == r_grads.keys()
    for k in r_grads:
        assert m_grads[k] is not None, k
        torch.testing.assert_close(m_grads[k], r_grads[k], atol=tol, rtol=0, msg=k)


# Every combination with biases, plus bias=False on the largest configurations (the bias-free
# path only changes which parameters exist; ~100 cases keep the file's runtime modest).
CASES = list(itertools.product(["LSTM", "GRU"], [1, 2], [False, True], [False, True],
                               ["tensor", "packed_sorted", "packed_unsorted"], [False, True],
                               [True]))
CASES += list(itertools.product(["LSTM", "GRU"], [2], [True], [False, True],
                                ["tensor", "packed_unsorted"], [True], [False]))


@pytest.mark.parametrize("mode,L,bidi,batch_first,kind,with_hx,bias", CASES)
def test_against_torch_nn_float64(mode, L, bidi, batch_first, kind, with_hx, bias):
    D = 2 if bidi else 1
    ref, mine = _pair(mode, num_layers=L, bidirectional=bidi, batch_first=batch_first,
                      bias=bias)
    gen = torch.Generator().manual_seed(99)
    x, lengths, hx = _inputs(kind, batch_first, torch.float64, L, D, mode, with_hx, gen)
    want = _run(ref, kind, x, lengths, hx, mode, batch_first)
    _compare(want, _run(mine, kind, x, lengths, hx, mode, batch_first), F64, kind)
    if kind.startswith("packed") and brt.ops.HAS_SEQ_LENGTHS:
        # the padded fallback too (the run above passed the lengths to the ops)
        from blockrnn.torch import _modules
        _modules.USE_SEQ_LENGTHS = False
        try:
            for p in mine.parameters():
                p.grad = None
            _compare(want, _run(mine, kind, x, lengths, hx, mode, batch_first), F64, kind)
        finally:
            _modules.USE_SEQ_LENGTHS = True


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("kind", ["tensor", "packed_unsorted"])
def test_against_torch_nn_float32(mode, kind):
    ref, mine = _pair(mode, torch.float32, num_layers=2, bidirectional=True)
    gen = torch.Generator().manual_seed(5)
    x, lengths, hx = _inputs(kind, False, torch.float32, 2, 2, mode, True, gen)
    _compare(_run(ref, kind, x, lengths, hx, mode, False),
             _run(mine, kind, x, lengths, hx, mode, False), F32, kind)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched(mode, batch_first):
    ref, mine = _pair(mode, num_layers=2, bidirectional=True, batch_first=batch_first)
    x = torch.randn(T, I, dtype=torch.float64)
    hx = torch.randn(4, H, dtype=torch.float64)
    args = (hx, hx * 0.5) if mode == "LSTM" else hx
    for with_hx in (False, True):
        r = ref(x, args) if with_hx else ref(x)
        m = mine(x, args) if with_hx else mine(x)
        assert m[0].shape == r[0].shape == (T, 2 * H)
        torch.testing.assert_close(m[0], r[0], atol=F64, rtol=0)
        rs = r[1] if mode == "LSTM" else (r[1],)
        ms = m[1] if mode == "LSTM" else (m[1],)
        for a, b in zip(ms, rs):
            assert a.shape == b.shape == (4, H)
            torch.testing.assert_close(a, b, atol=F64, rtol=0)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_state_dict_both_ways_and_names(mode):
    kw = dict(num_layers=2, bidirectional=True, bias=True)
    ref, mine = _pair(mode, **kw)
    assert list(dict(mine.named_parameters()).keys()) == list(dict(ref.named_parameters()).keys())
    for (n1, p1), (n2, p2) in zip(mine.named_parameters(), ref.named_parameters()):
        assert p1.shape == p2.shape
    other = (torch.nn.LSTM if mode == "LSTM" else torch.nn.GRU)(I, H, **kw).double()
    other.load_state_dict(mine.state_dict())
    for a, b in zip(other.parameters(), mine.parameters()):
        assert torch.equal(a, b)
    nobias = (brt.LSTM if mode == "LSTM" else brt.GRU)(I, H, bias=False)
    assert not any("bias" in n for n, _ in nobias.named_parameters())


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_dropout_between_layers(mode):
    # p = 1 zeroes the whole input of layer 2 in both implementations: deterministic.
    ref, mine = _pair(mode, num_layers=2, dropout=1.0)
    x = torch.randn(T, B, I, dtype=torch.float64)
    ref.train(), mine.train()
    torch.testing.assert_close(mine(x)[0], ref(x)[0], atol=F64, rtol=0)
    # No dropout after the last layer: a 1-layer module ignores it (torch warns, as we do).
    with pytest.warns(UserWarning):
        one = (brt.LSTM if mode == "LSTM" else brt.GRU)(I, H, dropout=0.7).double()
    one.train()
    a = one(x)[0]
    torch.testing.assert_close(one(x)[0], a, atol=0, rtol=0)
    # Training-only, and p = 0.5 does change the second layer's input.
    two = (brt.LSTM if mode == "LSTM" else brt.GRU)(I, H, num_layers=2, dropout=0.5).double()
    two.eval()
    e1, e2 = two(x)[0], two(x)[0]
    assert torch.equal(e1, e2)
    two.train()
    torch.manual_seed(0)
    assert not torch.allclose(two(x)[0], e1)


def _gradcheck_inputs(mode):
    torch.manual_seed(3)
    x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    return x


@pytest.mark.parametrize("mode,extra", [("LSTM", {}),
                                        # no cell_clip: TensorFlow's BlockLSTMGrad (which
                                        # blockrnn follows) ignores the clip, so finite
                                        # differences disagree there by design; the clip's
                                        # gradient is checked against TensorFlow below.
                                        ("LSTM", dict(use_peephole=True, forget_bias=0.7)),
                                        ("GRU", {}), ("GRU", dict(reset_after=False))])
def test_gradcheck_float64(mode, extra):
    cls = brt.LSTM if mode == "LSTM" else brt.GRU
    torch.manual_seed(3)
    m = cls(3, 2, num_layers=2, bidirectional=True, **extra).double()
    x = torch.randn(3, 2, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(4, 2, 2, dtype=torch.float64, requires_grad=True)
    params = list(m.parameters())

    def f(x, h0, *ps):
        with torch.nn.utils.stateless._reparametrize_module(
                m, dict(zip([n for n, _ in m.named_parameters()], ps))):
            if mode == "LSTM":
                out, (h, c) = m(x, (h0, h0 * 0.5))
                return out, h, c
            out, h = m(x, h0)
            return out, h

    assert torch.autograd.gradcheck(f, (x, h0, *[p.detach().requires_grad_(True)
                                                  for p in params]), eps=1e-6, atol=1e-7)


def test_opcheck_and_compile_in_fresh_process():
    # torch.library.opcheck and torch.compile import triton, whose LLVM clashes with
    # TensorFlow's in one process ("Option ... registered more than once", abort); the rest of
    # this suite imports TensorFlow, so these run in a fresh interpreter.
    script = os.path.join(os.path.dirname(__file__), "torch_opcheck_compile.py")
    subprocess.run([sys.executable, script], check=True, timeout=300)


def test_float16_runs_like_float32():
    # float16 is stored in half and computed in float32 (docs/ops.md), so it equals the float32
    # module run on the same (half-representable) values up to the rounding of each stored
    # output to half: 1e-3 relative to O(1) values.
    torch.manual_seed(0)
    m32 = brt.LSTM(4, 5, num_layers=2)
    m16 = brt.LSTM(4, 5, num_layers=2).half()
    m32.load_state_dict({k: v.half().float() for k, v in m16.state_dict().items()})
    x = torch.randn(6, 3, 4).half()
    o16, _ = m16(x)
    o32, _ = m32(x.float())
    assert o16.dtype == torch.float16
    torch.testing.assert_close(o16.float(), o32, atol=5e-3, rtol=0)


def test_errors():
    with pytest.raises(ValueError, match="proj_size"):
        brt.LSTM(4, 5, proj_size=2)
    m = brt.LSTM(4, 5)
    with pytest.raises(RuntimeError, match="input_size"):
        m(torch.randn(3, 2, 6))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size"):
        m(torch.randn(3, 2, 4), (torch.zeros(1, 3, 5), torch.zeros(1, 3, 5)))
    with pytest.raises(ValueError, match="RNN input dtype"):  # torch.nn's: test_torch_errors.py
        m(torch.randn(3, 2, 4, dtype=torch.float64))
    with pytest.raises(NotImplementedError, match="CPU only"):
        m(torch.randn(3, 2, 4, device="meta"))
    with pytest.raises(ValueError, match="2D or 3D"):
        m(torch.randn(3, 2, 4, 1))


def test_core_package_does_not_import_torch():
    code = ("import sys, blockrnn, blockrnn.raw_ops, blockrnn.layers, blockrnn.gradients; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- against TensorFlow

tf = None


def _tf():
    global tf
    if tf is None:
        tf = pytest.importorskip("tensorflow")
    return tf


def test_gru_reset_before_vs_tf_gru_block_cell():
    # Forward against tf.raw_ops.GRUBlockCell step by step (TensorFlow registers no gradient
    # for GRUBlockCell; the gradients are checked against Keras' GRU(reset_after=False) below).
    tf = _tf()
    torch.manual_seed(4)
    m = brt.GRU(I, H, reset_after=False)
    x = torch.randn(T, B, I)
    h0 = torch.randn(1, B, H)
    with torch.no_grad():
        out, hn = m(x, h0)
    # The documented mapping (docs/torch.md).
    sd = {k: v.numpy() for k, v in m.state_dict().items()}
    w_ru = np.concatenate([sd["weight_ih_l0"][:2 * H].T, sd["weight_hh_l0"][:2 * H].T], 0)
    w_c = np.concatenate([sd["weight_ih_l0"][2 * H:].T, sd["weight_hh_l0"][2 * H:].T], 0)
    b_ru = sd["bias_ih_l0"][:2 * H] + sd["bias_hh_l0"][:2 * H]
    b_c = sd["bias_ih_l0"][2 * H:] + sd["bias_hh_l0"][2 * H:]
    h = h0.numpy()[0]
    for t in range(T):
        h = tf.raw_ops.GRUBlockCell(x=x.numpy()[t], h_prev=h, w_ru=w_ru, w_c=w_c, b_ru=b_ru,
                                    b_c=b_c)[3].numpy()
        np.testing.assert_allclose(out.numpy()[t], h, atol=F32, rtol=0)
    np.testing.assert_allclose(hn.numpy()[0], h, atol=F32, rtol=0)


@pytest.mark.parametrize("reset_after", [False, True])
def test_gru_keras_conversion(reset_after):
    tf = _tf()
    keras = tf.keras
    rng = np.random.default_rng(8)
    layer = keras.layers.GRU(H, reset_after=reset_after, return_sequences=True,
                             return_state=True, dtype="float64")
    xb = rng.standard_normal((B, T, I))
    layer.build((B, T, I))
    kernel, rec, bias = [rng.standard_normal(v.shape) * 0.5 for v in layer.weights]
    layer.set_weights([kernel, rec, bias])
    tx = tf.constant(xb)
    wo = rng.standard_normal((B, T, H))
    with tf.GradientTape() as tape:
        tape.watch(tx)
        k_out, k_h = layer(tx)
        loss = tf.reduce_sum(k_out * wo)
    gx, gk, grk, gb = tape.gradient(loss, [tx] + list(layer.weights))
    m = brt.GRU(I, H, batch_first=True, reset_after=reset_after).double()
    m.load_state_dict(brt.gru_weights_from_keras(kernel, rec, bias))
    x = torch.from_numpy(xb).requires_grad_(True)
    out, hn = m(x)
    (out * torch.from_numpy(wo)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), k_out.numpy(), atol=F64, rtol=0)
    np.testing.assert_allclose(hn.detach().numpy()[0], k_h.numpy(), atol=F64, rtol=0)
    np.testing.assert_allclose(x.grad.numpy(), gx.numpy(), atol=F64, rtol=0)
    # parameter gradients, mapped to Keras' layout by the same conversion
    grads = {k: p.grad for k, p in m.named_parameters()}
    gm = brt.GRU(I, H, reset_after=reset_after).double()
    with torch.no_grad():
        for k, p in gm.named_parameters():
            p.copy_(grads[k])
    k_g, r_g, b_g = brt.gru_weights_to_keras(gm)
    np.testing.assert_allclose(k_g, gk.numpy(), atol=F64, rtol=0)
    np.testing.assert_allclose(r_g, grk.numpy(), atol=F64, rtol=0)
    if reset_after:
        np.testing.assert_allclose(b_g, gb.numpy(), atol=F64, rtol=0)
    else:  # bias_ih and bias_hh both receive Keras' bias gradient; to_keras sums them
        np.testing.assert_allclose(b_g, 2 * gb.numpy(), atol=F64, rtol=0)
    k2, r2, b2 = brt.gru_weights_to_keras(m)
    np.testing.assert_allclose(k2, kernel, atol=0, rtol=0)
    np.testing.assert_allclose(r2, rec, atol=0, rtol=0)
    np.testing.assert_allclose(b2, bias, atol=0 if reset_after else 1e-15, rtol=0)


@pytest.mark.parametrize("peep,fb,clip", [(True, 1.0, 0.8), (False, 1.0, None),
                                          (True, 0.0, 0.5), (False, 0.3, 1.5)])
def test_lstm_tf_extras_vs_tf_block_lstm(peep, fb, clip):
    tf = _tf()
    torch.manual_seed(6)
    m = brt.LSTM(I, H, use_peephole=peep, forget_bias=fb, cell_clip=clip)
    if peep:
        assert {"weight_ci_l0", "weight_cf_l0", "weight_co_l0"} <= set(m.state_dict())
    x = torch.randn(T, B, I, requires_grad=True)
    h0 = torch.randn(1, B, H, requires_grad=True)
    c0 = torch.randn(1, B, H, requires_grad=True)
    out, (hn, cn) = m(x, (h0, c0))
    w = torch.randn(T, B, H)
    wc = torch.randn(B, H)
    ((out * w).sum() + (cn[0] * wc).sum()).backward()
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    perm = np.concatenate([np.arange(0, H), np.arange(2 * H, 3 * H), np.arange(H, 2 * H),
                           np.arange(3 * H, 4 * H)])  # torch i,f,g,o -> TF i,c,f,o
    wtf = np.concatenate([sd["weight_ih_l0"][perm].T, sd["weight_hh_l0"][perm].T], 0)
    btf = (sd["bias_ih_l0"] + sd["bias_hh_l0"])[perm]
    zeros = np.zeros(H, np.float32)
    peeps = [sd[f"weight_{g}_l0"] if peep else zeros for g in ("ci", "cf", "co")]
    tv = [tf.Variable(a) for a in [wtf, *peeps, btf]]
    tx, th, tc = (tf.constant(a.detach().numpy()) for a in (x, h0[0], c0[0]))
    with tf.GradientTape() as tape:
        tape.watch([tx, th, tc])
        res = tf.raw_ops.BlockLSTM(seq_len_max=np.int64(T), x=tx, cs_prev=tc, h_prev=th,
                                   w=tv[0], wci=tv[1], wcf=tv[2], wco=tv[3], b=tv[4],
                                   forget_bias=fb, cell_clip=-1.0 if clip is None else clip,
                                   use_peephole=peep)
        loss = tf.reduce_sum(res.h * w.numpy()) + tf.reduce_sum(res.cs[-1] * wc.numpy())
    grads = tape.gradient(loss, [tx, th, tc] + tv)
    np.testing.assert_allclose(out.detach().numpy(), res.h.numpy(), atol=F32, rtol=0)
    np.testing.assert_allclose(cn.detach().numpy()[0], res.cs.numpy()[-1], atol=F32, rtol=0)
    for mine, theirs in ((x.grad, grads[0]), (h0.grad[0], grads[1]), (c0.grad[0], grads[2])):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), atol=F32, rtol=0)
    g = {k: p.grad.numpy() for k, p in m.named_parameters()}
    np.testing.assert_allclose(np.concatenate([g["weight_ih_l0"][perm].T,
                                               g["weight_hh_l0"][perm].T]), grads[3].numpy(),
                               atol=F32, rtol=0)
    if peep:
        for k, gg in zip(("ci", "cf", "co"), grads[4:7]):
            np.testing.assert_allclose(g[f"weight_{k}_l0"], gg.numpy(), atol=F32, rtol=0)
    for k in ("bias_ih_l0", "bias_hh_l0"):
        np.testing.assert_allclose(g[k][perm], grads[7].numpy(), atol=F32, rtol=0)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_bitwise_same_across_blockrnn_thread_counts(mode):
    import blockrnn
    torch.manual_seed(2)
    m = (brt.LSTM if mode == "LSTM" else brt.GRU)(8, 16, num_layers=2, bidirectional=True)
    x = torch.randn(7, 5, 8)
    saved = blockrnn.get_num_threads()
    res = []
    try:
        for n in (1, 2, 3):
            blockrnn.set_num_threads(n)
            m.zero_grad()
            out, _ = m(x)
            out.sum().backward()
            res.append([out.detach().clone()] + [p.grad.clone() for p in m.parameters()])
    finally:
        blockrnn.set_num_threads(saved)
    for other in res[1:]:
        for a, b in zip(res[0], other):
            assert torch.equal(a, b)
