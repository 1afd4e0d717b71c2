"""blockrnn.torch.LSTM / GRU raise torch.nn.LSTM / GRU's own errors: each bad argument is given
to both, and the exception type and message must be the same (code written for torch.nn
catches and matches them unchanged). Where blockrnn cannot compute what torch.nn does
(LSTM proj_size > 0) or torch.nn's error is an accident of its backend, the error is
blockrnn's own, named and tested here too."""
import warnings

import pytest

torch = pytest.importorskip("torch")
import blockrnn.torch as brt  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402

I, H = 3, 5


def _error(fn):
    """(type, message) of what fn raises; None when it returns."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except Exception as e:  # noqa: BLE001 - the point is to compare any exception
        return type(e), str(e)
    return None


CONSTRUCTOR_CASES = {
    "bias=0": dict(bias=0),
    "bias=1": dict(bias=1),
    "bias='True'": dict(bias="True"),
    "batch_first=0": dict(batch_first=0),
    "batch_first=1": dict(batch_first=1),
    "batch_first='False'": dict(batch_first="False"),
    "input_size=0": dict(input_size=0),
    "input_size=-1": dict(input_size=-1),
    "input_size=2.0": dict(input_size=2.0),
    "hidden_size=0": dict(hidden_size=0),
    "hidden_size=-3": dict(hidden_size=-3),
    "hidden_size='5'": dict(hidden_size="5"),
    "num_layers=0": dict(num_layers=0),
    "num_layers=-1": dict(num_layers=-1),
    "num_layers=1.5": dict(num_layers=1.5),
    "num_layers='2'": dict(num_layers="2"),
    "dropout=-0.1": dict(dropout=-0.1),
    "dropout=1.5": dict(dropout=1.5),
    "dropout=True": dict(dropout=True),
    "dropout='0.1'": dict(dropout="0.1"),
    "dropout='x'": dict(dropout="x"),
    "dropout=None": dict(dropout=None),
    "dropout=nan": dict(dropout=float("nan")),
    "dropout=inf": dict(dropout=float("inf")),
    "num_layers=2.0": dict(num_layers=2.0),
    "num_layers=None": dict(num_layers=None),
    "input_size=None": dict(input_size=None),
    "hidden_size=2.5": dict(hidden_size=2.5),
    "proj_size='1'": dict(proj_size="1"),
    "proj_size=None": dict(proj_size=None),
    "proj_size=7": dict(proj_size=7),
    "dtype=int64": dict(dtype=torch.int64),
    "dtype=complex64": dict(dtype=torch.complex64),
    "proj_size=-1": dict(proj_size=-1),
    "proj_size=5": dict(proj_size=5),
    "proj_size=0": dict(proj_size=0),
    "proj_size=2": dict(proj_size=2),  # GRU only here; LSTM: test_lstm_proj_size_refused
}


# torch.nn.LSTM computes projections (proj_size=2); blockrnn refuses them:
# test_lstm_proj_size_refused.
@pytest.mark.parametrize("mode, case", [(m, c) for m in ("LSTM", "GRU")
                                        for c in sorted(CONSTRUCTOR_CASES)
                                        if (m, c) != ("LSTM", "proj_size=2")])
def test_constructor_errors_are_torch_nn_s(mode, case):
    kw = dict(input_size=I, hidden_size=H)
    kw.update(CONSTRUCTOR_CASES[case])
    want = _error(lambda: getattr(torch.nn, mode)(**kw))
    got = _error(lambda: getattr(brt, mode)(**kw))
    assert got == want


def test_valid_odd_arguments_accepted_as_torch_nn_does():
    # torch.nn takes bools as ints and any truthy bidirectional; so does blockrnn.torch.
    for kw in (dict(input_size=True), dict(num_layers=True), dict(bidirectional=0),
               dict(bidirectional="x"), dict(dropout=0), dict(dropout=1)):
        args = dict(input_size=I, hidden_size=H)
        args.update(kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dropout=1 with one layer: the warning
            ref = torch.nn.LSTM(**args)
            mine = brt.LSTM(**args)
        assert [n for n, _ in mine.named_parameters()] == [n for n, _ in ref.named_parameters()]


def test_dropout_warning_is_torch_nn_s():
    with pytest.warns(UserWarning) as want:
        torch.nn.GRU(I, H, dropout=0.5)
    with pytest.warns(UserWarning) as got:
        brt.GRU(I, H, dropout=0.5)
    assert [str(w.message) for w in got] == [str(w.message) for w in want]


def test_lstm_proj_size_refused():
    # torch.nn.LSTM computes projections; blockrnn refuses them with the ValueError torch.nn
    # raises for an unsupported argument value (torch.nn.GRU's proj_size)
    with pytest.raises(ValueError, match=r"blockrnn\.torch\.LSTM: proj_size=2 .*not "
                                         r"supported"):
        brt.LSTM(I, H, proj_size=2)


@pytest.mark.parametrize("value, typename", [(2.0, "float"), (True, "bool")])
def test_lstm_proj_size_type_refused(value, typename):
    # torch.nn.LSTM: a TypeError from torch.empty on the parameter's shape; blockrnn's names it
    assert _error(lambda: torch.nn.LSTM(I, H, proj_size=value))[0] is TypeError
    with pytest.raises(TypeError, match=rf"blockrnn\.torch\.LSTM: proj_size should be of type "
                                        rf"int, got: {typename}"):
        brt.LSTM(I, H, proj_size=value)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("args, kwargs", [((I,), {}), ((I, H), dict(foo=1)),
                                          ((I, H), dict(nonlinearity="relu")),
                                          ((I, H, 1, True, False, 0.0, False, 0, "cpu",
                                            torch.float32, 9), {})],
                         ids=["missing hidden_size", "unknown keyword", "nonlinearity",
                              "too many positional"])
def test_python_argument_errors_are_torch_nn_s(mode, args, kwargs):
    # Python's own errors name the function: RNNBase.__init__ as torch.nn's
    want = _error(lambda: getattr(torch.nn, mode)(*args, **kwargs))
    got = _error(lambda: getattr(brt, mode)(*args, **kwargs))
    assert got == want


def test_torch_nn_errors_carry_a_note_naming_the_module():
    with pytest.raises(TypeError) as e:
        brt.GRU(I, H, bias=1)
    assert any("blockrnn.torch.GRU" in n for n in e.value.__notes__)


@pytest.mark.parametrize("arg, value, typename", [("use_peephole", 1, "int"),
                                                  ("cell_clip", "a", "str"),
                                                  ("cell_clip", True, "bool"),
                                                  ("forget_bias", None, "NoneType")])
def test_lstm_extras_type_checked(arg, value, typename):
    with pytest.raises(TypeError, match=rf"blockrnn\.torch\.LSTM: {arg} should be .*got: "
                                        rf"{typename}"):
        brt.LSTM(I, H, **{arg: value})
    with pytest.raises(TypeError, match=r"blockrnn\.torch\.GRU: reset_after should be of type "
                                        r"bool, got: int"):
        brt.GRU(I, H, reset_after=1)


def _z(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype)


def _forward_cases(lstm):
    def hx(*shape, dtype=torch.float32):
        return (_z(*shape, dtype=dtype), _z(*shape, dtype=dtype)) if lstm else \
            _z(*shape, dtype=dtype)
    cases = {
        "x float64": lambda m: m(_z(4, 2, I, dtype=torch.float64)),
        "x float16": lambda m: m(_z(4, 2, I, dtype=torch.float16)),
        "x int64": lambda m: m(_z(4, 2, I, dtype=torch.int64)),
        "x 1-D": lambda m: m(_z(I)),
        "x 4-D": lambda m: m(_z(1, 4, 2, I)),
        "x input_size 4": lambda m: m(_z(4, 2, I + 1)),
        "T = 0": lambda m: m(_z(0, 2, I)),
        "T = 0 unbatched": lambda m: m(_z(0, I)),
        "T = 0, B = 0": lambda m: m(_z(0, 0, I)),
        "x bfloat16": lambda m: m(_z(4, 2, I, dtype=torch.bfloat16)),
        "x complex64": lambda m: m(_z(4, 2, I, dtype=torch.complex64)),
        "x 0-D": lambda m: m(torch.tensor(1.0)),
        "hx L*D 3 for 2": lambda m: m(_z(4, 2, I), hx(3, 2, H)),
        "hx hidden 6 for 5": lambda m: m(_z(4, 2, I), hx(2, 2, H + 1)),
        "hx 4-D": lambda m: m(_z(4, 2, I), hx(1, 2, 2, H)),
        "unbatched, hx L*D 3 for 2": lambda m: m(_z(4, I), hx(3, H)),
        "unbatched input_size 4": lambda m: m(_z(4, I + 1)),
        "x not contiguous": lambda m: m(_z(2, 4, I).transpose(0, 1)),
        "hx batch 3 for 2": lambda m: m(_z(4, 2, I), hx(2, 3, H)),
        "hx 2-D, batched x": lambda m: m(_z(4, 2, I), hx(2, H)),
        "hx 3-D, unbatched x": lambda m: m(_z(4, I), hx(2, 1, H)),
        "packed, int32 lengths": lambda m: m(pack_padded_sequence(
            _z(4, 2, I), torch.tensor([4, 2], dtype=torch.int32))),
    }
    if lstm:
        cases["hx a single tensor"] = lambda m: m(_z(4, 2, I), _z(2, 2, H))
        cases["hx three states"] = lambda m: m(_z(4, 2, I), (_z(2, 2, H),) * 3)
        cases["hx one state"] = lambda m: m(_z(4, 2, I), (_z(2, 2, H),))
        cases["hx a list"] = lambda m: m(_z(4, 2, I), [_z(2, 2, H), _z(2, 2, H)])
        cases["c_0 batch 3 for 2"] = lambda m: m(_z(4, 2, I), (_z(2, 2, H), _z(2, 3, H)))
        cases["c_0 2-D"] = lambda m: m(_z(4, 2, I), (_z(2, 2, H), _z(2, H)))
    else:
        # torch.nn.LSTM's packed path skips these checks (its backend fails later with
        # messages of its own); torch.nn.GRU's makes them, and blockrnn makes them for both.
        cases["packed float64"] = lambda m: m(pack_padded_sequence(
            _z(4, 2, I, dtype=torch.float64), [4, 2]))
        cases["packed, hx batch 3 for 2"] = lambda m: m(
            pack_padded_sequence(_z(4, 2, I), [4, 2]), hx(2, 3, H))
        cases["packed input_size 4"] = lambda m: m(pack_padded_sequence(_z(4, 2, I + 1),
                                                                        [4, 2]))
    return cases


FORWARD_CASES = [(mode, name) for mode in ("LSTM", "GRU")
                 for name in sorted(_forward_cases(mode == "LSTM"))]


@pytest.mark.parametrize("mode, case", FORWARD_CASES)
def test_forward_errors_are_torch_nn_s(mode, case):
    torch.manual_seed(0)
    ref = getattr(torch.nn, mode)(I, H, num_layers=2)
    mine = getattr(brt, mode)(I, H, num_layers=2)
    mine.load_state_dict(ref.state_dict())
    call = _forward_cases(mode == "LSTM")[case]
    want = _error(lambda: call(ref))
    got = _error(lambda: call(mine))
    assert got == want


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_empty_batch_runs_as_torch_nn(mode):
    ref = getattr(torch.nn, mode)(I, H)
    mine = getattr(brt, mode)(I, H)
    out, _ = mine(_z(4, 0, I))
    assert out.shape == ref(_z(4, 0, I))[0].shape == (4, 0, H)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_packed_float64_refused_clearly(mode):
    # torch.nn.LSTM's packed path fails inside its backend ("mat1 and mat2 must have the same
    # dtype"); blockrnn raises torch.nn.GRU's ValueError for both modules.
    m = getattr(brt, mode)(I, H)
    with pytest.raises(ValueError, match=r"RNN input dtype \(torch.float64\) does not match "
                                         r"weight dtype \(torch.float32\)"):
        m(pack_padded_sequence(_z(4, 2, I, dtype=torch.float64), [4, 2]))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_hx_dtype_refused_clearly(mode):
    # torch.nn's backend fails with messages of its own ("get_mkldnn_dtype: unsupported data
    # type", "mat1 and mat2 must have the same dtype"): the same exception type, a clearer text.
    m = getattr(brt, mode)(I, H)
    h = _z(1, 2, H, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=rf"blockrnn\.torch\.{mode}: hx must have the "
                                           r"input's dtype torch.float32, got torch.float64"):
        m(_z(4, 2, I), (h, h) if mode == "LSTM" else h)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_non_tensor_input_refused_clearly(mode):
    # torch.nn: AttributeError "'list' object has no attribute 'dim'"
    with pytest.raises(TypeError, match=rf"blockrnn\.torch\.{mode}: input must be a Tensor or "
                                        r"a PackedSequence, got list"):
        getattr(brt, mode)(I, H)([1, 2])


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_double_backward_on_the_per_op_path_refused_clearly(mode, monkeypatch):
    # The stack ops take double backward (test_torch_double_backward.py); the per-op path
    # (float16, and the padded fallback used here) does not: its backward ops have no autograd
    # formula, and torch refuses to differentiate them, naming the op (no silent zeros).
    import blockrnn.torch._modules as mods
    monkeypatch.setattr(mods, "USE_SEQ_LENGTHS", False)
    m = getattr(brt, mode)(I, H).double()
    x = torch.randn(4, 2, I, dtype=torch.float64, requires_grad=True)
    out = m(pack_padded_sequence(x, [4, 2]))[0].data
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    op = "lstm_grad" if mode == "LSTM" else "gru_reset_after_grad"
    with pytest.raises(RuntimeError, match=rf"Trying to backward through "
                                           rf"blockrnn\.{op}\.default but no autograd "
                                           r"formula was registered"):
        torch.autograd.grad(g.sum(), x)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
@pytest.mark.parametrize("kw, shape", [(dict(batch_first=True), (2, 0, I)),
                                       (dict(batch_first=True), (0, I)),
                                       (dict(bidirectional=True), (0, 2, I))],
                         ids=["batch_first", "batch_first unbatched", "bidirectional"])
def test_zero_length_sequence_is_torch_nn_s(mode, kw, shape):
    want = _error(lambda: getattr(torch.nn, mode)(I, H, **kw)(_z(*shape)))
    got = _error(lambda: getattr(brt, mode)(I, H, **kw)(_z(*shape)))
    assert want is not None and got == want
