"""bfloat16 (numpy arrays of ml_dtypes.bfloat16, torch.bfloat16 tensors) on every op, through
blockrnn.layers and through blockrnn.torch.

bfloat16 is computed as float16 is: the inputs are widened to float32 once per call, the float32
kernels run (recurrent state and sums in float32) and each stored output is rounded once to
bfloat16, to nearest even (docs/design.md) -- except that the fast path of BlockLSTM(V2),
BlockGRU and their grads multiplies bfloat16 operands (h[t-1], d_gates, … rounded for the
products; sums in float32). Its unit roundoff is u = 2^-8 (an 8-bit significand).

Tolerances:
- each op against float64 on the same (bfloat16) values: the table's rule
  (tests/data/op_table.json, docs/tolerances.md): float32's accumulation term, plus 2u·|ref|
  for the one rounding of each output (and of a grad op's inputs), plus on the rows with
  bfloat16 products 2^-7·(P·T + 1)·max(1, max|ref|) (2^-7 per product, P·T + 1 of them in
  sequence).
- blockrnn.torch in bfloat16 against torch.nn in float32 on the same bfloat16-representable
  values, normwise (‖a − b‖ / ‖b‖) and in the largest element (max|a − b| / max|b|):
  forward 2L·u for L layers: each layer rounds its output once (u) and passes the layer below's
  rounding on with a gain at most 1 (weights in ±1/√H, activation slopes ≤ 1); gradients 4L·u:
  each layer's backward reads its forward's stored activations (each off by u) and the rounded
  upstream gradient (u), and rounds its own outputs (u), and the layers chain. float32's own
  differences (torch's GEMM order against ours, ~1e-6) are far below.
"""
import subprocess
import sys

import numpy as np
import pytest

import blockrnn
from optable import OPS, ROWS, derived_tolerance, make_call, op_function, random_dims

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
U = 2.0 ** -8



def _to64(kw):
    return {k: (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype == BF16 else v)
            for k, v in kw.items()}


def _close(a, b, tol, what):
    a, b = a.astype(np.float64), np.asarray(b, np.float64)
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    bound = tol["rtol"] * np.abs(b) + tol["atol"] * scale
    bad = np.flatnonzero(~(np.abs(a - b) <= bound))
    assert bad.size == 0, (f"{what}: element {bad[0]}: {a.flat[bad[0]]} vs {b.flat[bad[0]]} "
                           f"(rtol {tol['rtol']}, atol {tol['atol']}·{scale})")
    ref2 = float(np.sum(b * b))
    nmse = float(np.sum((a - b) ** 2)) / ref2 if ref2 > 0 else float(np.sum((a - b) ** 2))
    assert nmse <= tol["nmse"], f"{what}: NMSE {nmse} above {tol['nmse']}"


@pytest.mark.parametrize("op", [r.op for r in OPS])
def test_every_op_against_float64(op):
    row = ROWS[op]
    rng = np.random.default_rng(7)
    for _ in range(3):
        dims = random_dims(row, rng)
        T, _, I, H, _ = dims
        # The table's rule (op_table.json): float32 accumulation over K = I + H terms and T
        # steps, plus bfloat16's storage rounding (2u = 2^-7) in rtol, plus the bfloat16
        # products (2^-7 each, P·T + 1 in sequence) in atol on the rows that use them.
        tol = derived_tolerance("bfloat16", I + H, T, op)
        kw, attrs, _ = make_call(row, dims, BF16, rng)
        assert all(v.dtype == BF16 for k, v in kw.items() if k != "seq_len_max")
        got = op_function(op)(**kw, **attrs)
        want = op_function(op)(**_to64(kw), **attrs)
        for name, g, w in zip(got._fields, got, want):
            assert g.dtype == BF16, (op, name, g.dtype)
            _close(g, w, tol, f"{op} {name} {dims}")


@pytest.mark.parametrize("op", ["LSTMBlockCell", "BlockLSTMGrad", "BlockGRU"])
def test_strided_and_list_inputs_give_the_same_bits(op):
    row = ROWS[op]
    kw, attrs, _ = make_call(row, (3, 5, 6, 7, 3), BF16, np.random.default_rng(2))
    want = op_function(op)(**kw, **attrs)
    # Fortran order and every other element of a larger array: gathered by the core.
    for relayout in (np.asfortranarray, lambda v: np.repeat(v, 2, axis=-1)[..., ::2]):
        args = {k: relayout(v) if np.ndim(v) else v for k, v in kw.items()}
        got = op_function(op)(**args, **attrs)
        for name, g, w in zip(want._fields, got, want):
            assert g.dtype == BF16
            np.testing.assert_array_equal(g.view(np.uint16), w.view(np.uint16), err_msg=name)
    # A list of numbers among bfloat16 arrays takes bfloat16 (as lists do with float16).
    first = next(k for k in kw if k != "seq_len_max" and k != "x")
    args = dict(kw, **{first: kw[first].astype(np.float64).tolist()})
    got = op_function(op)(**args, **attrs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.uint16), w.view(np.uint16))


def test_rounding_of_outputs_is_to_nearest_even_from_float32():
    """Today bfloat16 is float32's result rounded once: the bfloat16 outputs are exactly
    ml_dtypes' round-to-nearest-even of the float32 op on the widened inputs."""
    row = ROWS["GRUBlockCell"]
    kw, attrs, _ = make_call(row, (1, 9, 17, 33, 1), BF16, np.random.default_rng(4))
    got = op_function("GRUBlockCell")(**kw, **attrs)
    f32 = op_function("GRUBlockCell")(**{k: v.astype(np.float32) for k, v in kw.items()},
                                      **attrs)
    for g, w in zip(got, f32):
        np.testing.assert_array_equal(g.view(np.uint16), w.astype(BF16).view(np.uint16))


def test_attrs_are_rounded_to_bfloat16():
    """forget_bias and cell_clip are converted to the op's dtype first, as TensorFlow's kernel
    does (T(forget_bias)): a bfloat16 op adds bfloat16(0.1) and clips at bfloat16(0.7) (with 0.1
    and 0.7 themselves, 53 of these outputs would round differently)."""
    row = ROWS["LSTMBlockCell"]
    kw, _, _ = make_call(row, (1, 64, 5, 7, 1), BF16, np.random.default_rng(8))
    kw["cs_prev"] = (kw["cs_prev"].astype(np.float32) * 3).astype(BF16)
    got = op_function("LSTMBlockCell")(**kw, forget_bias=0.1, cell_clip=0.7)
    f32 = op_function("LSTMBlockCell")(**{k: v.astype(np.float32) for k, v in kw.items()},
                                       forget_bias=float(BF16.type(0.1)),
                                       cell_clip=float(BF16.type(0.7)))
    for g, w in zip(got, f32):
        np.testing.assert_array_equal(g.view(np.uint16), w.astype(BF16).view(np.uint16))
    assert np.any(np.abs(got.cs.astype(np.float32)) == np.float32(BF16.type(0.7)))


@pytest.mark.parametrize("op", ["BlockLSTM", "BlockLSTMGrad", "BlockGRUGrad", "LSTMBlockCell"])
def test_same_bits_at_one_and_two_threads(op):
    row = ROWS[op]
    kw, attrs, _ = make_call(row, (5, 64, 96, 128, 5), BF16, np.random.default_rng(21))
    saved = blockrnn.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            blockrnn.set_num_threads(n)
            results.append(op_function(op)(**kw, **attrs))
    finally:
        blockrnn.set_num_threads(saved)
    for name, a, b in zip(results[0]._fields, *results):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16), err_msg=name)


def test_nan_stays_nan_and_the_mix_is_refused():
    row = ROWS["GRUBlockCell"]
    kw, attrs, _ = make_call(row, (1, 2, 3, 4, 1), BF16, np.random.default_rng(5))
    kw["x"] = kw["x"].copy()
    kw["x"][0, 0] = np.nan
    out = op_function("GRUBlockCell")(**kw, **attrs)
    assert np.isnan(out.h.astype(np.float32)[0]).all()
    assert not np.isnan(out.h.astype(np.float32)[1]).any()
    with pytest.raises(blockrnn.InvalidArgumentError,
                       match="GRUBlockCell: h_prev must have the dtype of x \\(bfloat16\\), "
                             "got float32"):
        op_function("GRUBlockCell")(**dict(kw, h_prev=kw["h_prev"].astype(np.float32)))


# ------------------------------------------------------------------------------ blockrnn.torch


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("L", [1, 2])
def test_torch_module_against_torch_nn_float32(mode, L):
    torch = pytest.importorskip("torch")
    import blockrnn.torch as brt
    torch.manual_seed(0)
    I, H, T, B = 16, 24, 7, 5
    ref = (torch.nn.LSTM if mode == "LSTM" else torch.nn.GRU)(I, H, num_layers=L)
    ref.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in ref.state_dict().items()})
    mine = (brt.LSTM if mode == "LSTM" else brt.GRU)(I, H, num_layers=L).to(torch.bfloat16)
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(T, B, I).to(torch.bfloat16)
    xb = x.clone().requires_grad_(True)
    xf = x.float().requires_grad_(True)
    out_b, state_b = mine(xb)
    out_f, state_f = ref(xf)
    assert out_b.dtype == torch.bfloat16
    upstream = torch.randn(T, B, H).to(torch.bfloat16)
    (out_b * upstream).sum().backward()
    (out_f * upstream.float()).sum().backward()

    def check(a, b, bound, what):
        a, b = a.double(), b.double()
        assert ((a - b).norm() / b.norm()).item() <= bound, what
        assert ((a - b).abs().max() / b.abs().max()).item() <= bound, what

    check(out_b, out_f, 2 * L * U, "output")
    finals_b = state_b if mode == "LSTM" else (state_b,)
    finals_f = state_f if mode == "LSTM" else (state_f,)
    for k, (a, b) in enumerate(zip(finals_b, finals_f)):
        assert a.dtype == torch.bfloat16
        check(a, b, 2 * L * U, f"final state {k}")
    check(xb.grad, xf.grad, 4 * L * U, "x grad")
    for (name, p), q in zip(mine.named_parameters(), ref.parameters()):
        assert p.grad.dtype == torch.bfloat16, name
        check(p.grad, q.grad, 4 * L * U, f"{name} grad")


# ------------------------------------------------------------------------ blockrnn.layers


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_python_layers_run_bfloat16_on_the_raw_ops(name):
    """blockrnn.layers in bfloat16 (by dtype or by name) run on the raw ops, as float16 does:
    the same bits as the raw ops on the layer's parameters, outputs and gradients bfloat16."""
    from blockrnn import layers, raw_ops
    kw = dict(use_peephole=True, cell_clip=0.7, forget_bias=0.5) if name == "LSTM" else {}
    layer = getattr(layers, name)(3, 4, dtype="bfloat16", seed=1, **kw)
    assert layer.dtype == BF16 and all(p.dtype == BF16 for p in layer.parameters().values())
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (5, 2, 3)).astype(BF16)
    g = rng.uniform(-1, 1, (5, 2, 4)).astype(BF16)
    h_seq, _ = layer.forward(x)
    dx, _ = layer.backward(g)
    T, z = np.int64(5), np.zeros((2, 4), BF16)
    if name == "LSTM":
        ref = raw_ops.BlockLSTM(seq_len_max=T, x=x, cs_prev=z, h_prev=z, **layer.parameters(),
                                forget_bias=0.5, cell_clip=0.7, use_peephole=True)
        gref = raw_ops.BlockLSTMGrad(seq_len_max=T, x=x, cs_prev=z, h_prev=z,
                                     **layer.parameters(), **ref._asdict(),
                                     cs_grad=np.zeros_like(g), h_grad=g, use_peephole=True)
        grads = {"w": gref.w_grad, "b": gref.b_grad, "wco": gref.wco_grad}
    else:
        ref = raw_ops.BlockGRU(seq_len_max=T, x=x, h_prev=z, **layer.parameters())
        gref = raw_ops.BlockGRUGrad(seq_len_max=T, x=x, h_prev=z, **layer.parameters(),
                                    **ref._asdict(), h_grad=g)
        grads = {"w_ru": gref.w_ru_grad, "b_c": gref.b_c_grad}
    assert h_seq.dtype == BF16 and dx.dtype == BF16
    np.testing.assert_array_equal(h_seq.view(np.uint16), ref.h.view(np.uint16))
    np.testing.assert_array_equal(dx.view(np.uint16), gref.x_grad.view(np.uint16))
    for k, v in grads.items():
        assert layer.grads[k].dtype == BF16, k
        np.testing.assert_array_equal(layer.grads[k].view(np.uint16), v.view(np.uint16), k)


def test_without_ml_dtypes_the_error_names_the_package():
    """Without ml_dtypes (hidden from import here) bfloat16 cannot be named: the error says what
    is missing instead of failing inside numpy or torch."""
    script = (
        "import sys\n"
        "sys.modules['ml_dtypes'] = None\n"
        "import pytest, numpy as np\n"
        "from blockrnn import layers\n"
        "with pytest.raises(ValueError, match='bfloat16 needs the ml_dtypes package'):\n"
        "    layers.GRU(3, 4, dtype='bfloat16')\n"
        "try:\n"
        "    import torch\n"
        "except ImportError:\n"
        "    raise SystemExit(0)\n"
        "from blockrnn.torch import _ops\n"
        "with pytest.raises(TypeError, match='blockrnn.torch: op: x is bfloat16, which needs "
        "the ml_dtypes package'):\n"
        "    _ops._np(torch.zeros(2, dtype=torch.bfloat16), 'op', 'x')\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


def test_memory_check_counts_the_float32_staging_as_for_float16(path):
    """The memory check adds the float32 copies of a 16-bit call's inputs and outputs: a
    bfloat16 call needs the bytes of the same float16 call (without the staging it would need 4
    bytes per input and output element less), and on the fast path also its bfloat16 product
    operands, named in the message: for BlockLSTM x rounded for the input projection ([S*B, I]:
    bfloat16 pairs on vdpbf16ps, else widened to float32) and two [B, H] float32 buffers for
    h[t-1] (tests/cpp/test_ops.cc, bf16_operand_bytes); the reference path has none."""
    import re
    T, B, I, H, S = 5, 64, 96, 128, 5
    needed, messages = {}, {}
    saved = blockrnn.get_memory_limit()
    try:
        blockrnn.set_memory_limit(1000)
        for dt in (np.float16, BF16):
            kw, attrs, _ = make_call(ROWS["BlockLSTM"], (T, B, I, H, S), dt,
                                     np.random.default_rng(0))
            with pytest.raises(blockrnn.ResourceExhaustedError) as e:
                op_function("BlockLSTM")(**kw, **attrs)
            name = np.dtype(dt).name
            messages[name] = str(e.value)
            needed[name] = int(re.search(r"\((\d+) bytes", messages[name]).group(1))
    finally:
        blockrnn.set_memory_limit(saved)
    # vdpbf16ps runs the products on the avx512 path of a CPU with AVX512_BF16
    with open("/proc/cpuinfo") as f:
        dp = blockrnn.get_isa() == "avx512" and " avx512_bf16" in f.read()
    x_floats = S * B * ((I + 1) // 2) if dp else S * B * I
    operands = 0 if path else (x_floats + 2 * B * H) * 4
    assert needed["bfloat16"] == needed["float16"] + operands, needed
    assert ("bfloat16 product operands up to" in messages["bfloat16"]) == (not path), messages
