"""TensorFlow's crash reports as regression tests (SPEC §10, A3; issue 7).

Every input behind a TensorFlow crash report about the LSTM block ops (a CHECK failure, an abort,
a segfault, an out-of-bounds read) is replayed here against blockrnn, which must answer with a
clean `blockrnn.InvalidArgumentError` (a ValueError) naming the op and the argument, or, where
the input is valid under SPEC A3, with correctly shaped outputs. Nothing here may crash.

The inputs are rebuilt from the shapes, dtypes and attrs of each issue's reproducer (several are
GPU-only in TensorFlow; their inputs are replayed on our CPU library anyway). Where a reproducer
draws values with tf.random.uniform, seeded numpy values of the same shape and dtype stand in;
`saturate_cast(uniform int64 in [0, 64))` to half becomes integer-valued float16. The C++ twin
of this file is tests/cpp/test_tf_crash_inputs.cc. Shape letters: T time, B batch, I input size,
H cell size.
"""
import re

import numpy as np
import pytest

import blockrnn

CELL_GATES = ["i", "cs", "f", "o", "ci", "co"]
SEQ_STEPS = ["i", "cs", "f", "o", "ci", "co", "h", "cs_grad", "h_grad"]
SEQ_FWD = ["BlockLSTM", "BlockLSTMV2"]
SEQ_GRAD = ["BlockLSTMGrad", "BlockLSTMGradV2"]
CELL_BWD = ["LSTMBlockCellGrad", "gradients.LSTMBlockCell"]


def op_fn(op):
    if op.startswith("gradients."):
        return getattr(blockrnn.gradients, op.split(".", 1)[1])
    return getattr(blockrnn.raw_ops, op)


def expect_invalid(op, kwargs, fragment):
    """The call must raise InvalidArgumentError (a ValueError) whose message starts with the op
    name and contains `fragment`, which names the offending argument."""
    assert issubclass(blockrnn.InvalidArgumentError, ValueError)
    with pytest.raises(blockrnn.InvalidArgumentError) as e:
        op_fn(op)(**kwargs)
    message = str(e.value)
    assert isinstance(e.value, ValueError)
    assert re.match(re.escape(op + ": "), message), message
    assert fragment in message, f"{message!r} lacks {fragment!r}"


def uniform(rng, shape, dtype=np.float32):
    """Like tf.random.uniform(shape, dtype): values in [0, 1)."""
    return rng.uniform(0.0, 1.0, size=shape).astype(dtype)


def small_ints(rng, shape, dtype=np.float16):
    """Like tf.saturate_cast(tf.random.uniform(shape, 0, 64, tf.int64), dtype)."""
    return rng.integers(0, 64, size=shape).astype(dtype)


def seq_attrs(op, use_peephole=False, forget_bias=1.0, cell_clip=3.0):
    if op == "BlockLSTM":
        return dict(forget_bias=forget_bias, cell_clip=cell_clip, use_peephole=use_peephole)
    if op == "BlockLSTMV2":
        return dict(cell_clip=cell_clip, use_peephole=use_peephole)
    return dict(use_peephole=use_peephole)  # required on the grads


def seq_inputs(rng, op, T, B, I, H, seq_len_max=None, dtype=np.float32, draw=uniform):
    """Consistent inputs of a sequence op (the per-step tensors too for the grads)."""
    kw = dict(seq_len_max=np.int64(T if seq_len_max is None else seq_len_max),
              x=draw(rng, (T, B, I), dtype), cs_prev=draw(rng, (B, H), dtype),
              h_prev=draw(rng, (B, H), dtype), w=draw(rng, (I + H, 4 * H), dtype),
              wci=draw(rng, (H,), dtype), wcf=draw(rng, (H,), dtype),
              wco=draw(rng, (H,), dtype), b=draw(rng, (4 * H,), dtype))
    if op in SEQ_GRAD:
        kw.update({n: draw(rng, (T, B, H), dtype) for n in SEQ_STEPS})
    return kw


def cell_inputs(rng, op, B, I, H, dtype=np.float32, draw=uniform):
    """Consistent inputs of a cell op (the gates and upstream gradients too for the grads)."""
    kw = dict(x=draw(rng, (B, I), dtype), cs_prev=draw(rng, (B, H), dtype),
              h_prev=draw(rng, (B, H), dtype), w=draw(rng, (I + H, 4 * H), dtype),
              wci=draw(rng, (H,), dtype), wcf=draw(rng, (H,), dtype),
              wco=draw(rng, (H,), dtype), b=draw(rng, (4 * H,), dtype))
    if op != "LSTMBlockCell":
        kw.update({n: draw(rng, (B, H), dtype) for n in CELL_GATES + ["cs_grad", "h_grad"]})
    return kw


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", SEQ_FWD + SEQ_GRAD)
def test_tf_58175_non_scalar_seq_len_max(op):
    """tensorflow/tensorflow#58175: BlockLSTM (on GPU) CHECK-failed on a non-scalar seq_len_max.

    Reproducer: seq_len_max int64 of shape [13, 11, 0]; x float32 [1, 3, 15]; cs_prev and h_prev
    [3, 0]; w [15, 0]; wci, wcf, wco, b [0]; forget_bias -121.23, cell_clip -106.82,
    use_peephole False. TF fixed it with a scalar check (PR #59202). Ours: seq_len_max is
    checked first, on the forward ops and the grads alike."""
    rng = np.random.default_rng(58175)
    kw = seq_inputs(rng, op, T=1, B=3, I=15, H=0)
    kw["seq_len_max"] = rng.integers(0, 64, size=(13, 11, 0)).astype(np.int64)
    kw.update(seq_attrs(op, forget_bias=-121.22699269620765, cell_clip=-106.82307555235684))
    expect_invalid(op, kw, "seq_len_max must be a scalar (rank 0), got shape [13, 11, 0]")
    # A rank-1 seq_len_max with one element is not a scalar either.
    kw["seq_len_max"] = np.array([1], np.int64)
    expect_invalid(op, kw, "seq_len_max must be a scalar (rank 0), got shape [1]")


@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("seq_len_max", [0, 1])
@pytest.mark.parametrize("op", SEQ_FWD)
def test_tf_58176_zero_cell_size(op, seq_len_max, use_peephole, path):
    """tensorflow/tensorflow#58176: another BlockLSTM CHECK failure on GPU, zero cell size.

    Reproducer (same shapes as #58175): x float32 [1, 3, 15]; cs_prev and h_prev [3, 0];
    w [15, 0]; wci, wcf, wco, b [0]; forget_bias -121.23, cell_clip -106.82. Its seq_len_max is
    #58175's non-scalar one (covered there); the distinct trigger is H = 0, which cuBLAS
    rejects on TF's GPU path. VALID under SPEC A3: BlockLSTM(V2) accepts H = 0 with otherwise
    consistent shapes and returns empty [T, B, 0] outputs, so this asserts success."""
    rng = np.random.default_rng(58176)
    kw = seq_inputs(rng, op, T=1, B=3, I=15, H=0, seq_len_max=seq_len_max)
    kw.update(seq_attrs(op, use_peephole, -121.22699269620765, -106.82307555235684))
    out = op_fn(op)(**kw)
    assert out._fields == ("i", "cs", "f", "o", "ci", "co", "h")
    for name, v in zip(out._fields, out):
        assert v.shape == (1, 3, 0) and v.dtype == np.float32, name


@pytest.mark.parametrize("B,H", [(2, 0), (0, 4), (0, 0)])
@pytest.mark.parametrize("op", ["LSTMBlockCell"] + CELL_BWD)
def test_tf_58270_empty_cs_prev(op, B, H):
    """tensorflow/tensorflow#58270: LSTMBlockCell with an empty cs_prev crashed (cuBLAS illegal
    leading dimension on GPU).

    Reproducer: float16 integer values in [0, 64); x [2, 16]; cs_prev and h_prev [2, 0];
    w [16, 0]; wci [5]; wcf [16]; forget_bias 112.67, cell_clip 67.12, use_peephole False.
    (wco and b are cut off in the issue text; any rank-1 vectors do, since emptiness is checked
    before the vector lengths.) TF fixed it with "cs_prev_tensor is empty" (PR #59534). Ours,
    per SPEC A3: LSTMBlockCell(Grad) reject B = 0 or H = 0 with "cs_prev is empty"; the batch-0
    variants and the grads are covered as well."""
    rng = np.random.default_rng(58270)
    kw = cell_inputs(rng, op, B, 16, H, np.float16, small_ints)
    if (B, H) == (2, 0):  # the issue's own peephole vectors
        kw.update(wci=small_ints(rng, (5,)), wcf=small_ints(rng, (16,)),
                  wco=small_ints(rng, (16,)), b=small_ints(rng, (0,)))
    if op == "LSTMBlockCell":
        kw.update(forget_bias=112.66590343649887, cell_clip=67.12389445926587,
                  use_peephole=False)
    else:
        kw.update(use_peephole=False)
    expect_invalid(op, kw, f"cs_prev is empty, got shape [{B}, {H}]")


@pytest.mark.parametrize("op", CELL_BWD)
def test_tf_66763_rank1_x_cell_grad(op):
    """tensorflow/tensorflow#66763: LSTMBlockCellGrad aborted on a rank-1 x.

    Reproducer: x float32 zeros [17]; every other input (cs_prev, h_prev, w, wci, wcf, wco, b,
    i, cs, f, o, ci, co, cs_grad, h_grad) float32 [28, 29] filled with 0.837607;
    use_peephole False. Closed as stale in TF. Ours: ranks are checked before any dimension is
    read, x first."""
    kw = {n: np.full((28, 29), 0.837607, np.float32)
          for n in ["cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"] + CELL_GATES
          + ["cs_grad", "h_grad"]}
    kw.update(x=np.zeros((17,), np.float32), use_peephole=False)
    expect_invalid(op, kw, "x must be rank 2, got rank 1 (shape [17])")


def test_tf_66762_rank1_x_cell():
    """tensorflow/tensorflow#66762 (the forward twin of #66763): LSTMBlockCell aborted on
    x [0], cs_prev [0], h_prev [0, 0], w [0], wci [0, 0], wcf/wco/b [28, 29] (float32;
    forget_bias 1, cell_clip 0, use_peephole False). Ours: "x must be rank 2"."""
    f = lambda shape: np.full(shape, 0.837607, np.float32)  # noqa: E731
    kw = dict(x=f((0,)), cs_prev=f((0,)), h_prev=f((0, 0)), w=f((0,)), wci=f((0, 0)),
              wcf=f((28, 29)), wco=f((28, 29)), b=f((28, 29)), forget_bias=1.0, cell_clip=0.0,
              use_peephole=False)
    expect_invalid("LSTMBlockCell", kw, "x must be rank 2, got rank 1 (shape [0])")


@pytest.mark.parametrize("op", SEQ_GRAD)
def test_tf_90915_grad_zero_cell_size_half(op):
    """tensorflow/tensorflow#90915: BlockLSTMGrad and BlockLSTMGradV2 aborted on float16 inputs
    with zero cell size.

    Reproducer: seq_len_max 10 (a Python int); float16 integer values in [0, 64); x [10, 2, 16];
    cs_prev and h_prev [2, 0]; w [16, 0] (the rest is cut off in the issue text; completed
    consistently with H = 0: peepholes and b [0], per-step tensors [10, 2, 0]). Closed as stale
    in TF. Ours, per SPEC A3: BlockLSTMGrad(V2) reject H = 0 (H comes from w, whose column count
    must be a positive multiple of 4)."""
    rng = np.random.default_rng(90915)
    kw = seq_inputs(rng, op, T=10, B=2, I=16, H=0, dtype=np.float16, draw=small_ints)
    kw.update(seq_len_max=10, use_peephole=False)
    expect_invalid(op, kw, "w must have a positive multiple of 4 columns (4 * cell_size), "
                           "got shape [16, 0]")
    expect_invalid(op, dict(kw, use_peephole=True), "w must have a positive multiple of 4")
    # w with columns that are not a multiple of 4 is rejected the same way.
    expect_invalid(op, dict(kw, w=small_ints(rng, (16, 6))),
                   "w must have a positive multiple of 4 columns (4 * cell_size), got shape "
                   "[16, 6]")


@pytest.mark.parametrize("arg", SEQ_STEPS)
@pytest.mark.parametrize("op", SEQ_GRAD)
def test_tf_104847_rank2_step_tensors(op, arg):
    """tensorflow/tensorflow#104847: BlockLSTMGrad CHECK-failed on CPU with rank-2 gate tensors.

    Reproducer: seq_len_max int64 1; x float32 [[[1.0]]] ([1, 1, 1]); cs_prev, h_prev and w
    [[1.0]] ([1, 1]); wci, wcf, wco and b [1.0]; the per-step tensors [[1.0]], rank 2 instead of
    3. Ours: every per-step tensor (i, cs, f, o, ci, co, h and, which TF never checked,
    cs_grad and h_grad) must be rank 3, and ranks are checked before dimensions (so the
    inconsistent w and b are not what is reported)."""
    one = lambda shape: np.ones(shape, np.float32)  # noqa: E731
    kw = dict(seq_len_max=np.int64(1), x=one((1, 1, 1)), cs_prev=one((1, 1)), h_prev=one((1, 1)),
              w=one((1, 1)), wci=one((1,)), wcf=one((1,)), wco=one((1,)), b=one((1,)),
              use_peephole=False)
    # The reproducer itself: all nine per-step tensors rank 2; i is checked first.
    kw.update({n: one((1, 1)) for n in SEQ_STEPS})
    if arg == "i":
        expect_invalid(op, kw, "i must be rank 3, got rank 2 (shape [1, 1])")
    # Only `arg` rank 2, everything else consistent (T = B = I = H = 1).
    kw.update(w=one((2, 4)), b=one((4,)))
    kw.update({n: one((1, 1, 1)) for n in SEQ_STEPS})
    kw[arg] = one((1, 1))
    expect_invalid(op, kw, f"{arg} must be rank 3, got rank 2 (shape [1, 1])")
    kw[arg] = one((1,))
    expect_invalid(op, kw, f"{arg} must be rank 3, got rank 1 (shape [1])")


@pytest.mark.parametrize("op", SEQ_GRAD)
def test_tf_106407_grad_seq_len_max_above_time(op):
    """tensorflow/tensorflow#106407: BlockLSTMGradV2 segfaulted when seq_len_max exceeded the
    time dimension of its inputs.

    Reproducer: seq_len_max 3; batch 2, input 4, cell 5; x float32 normal [2, 2, 4] (time 2);
    cs_prev and h_prev [2, 5]; w [9, 20]; wci, wcf [5] (cut off after that; completed
    consistently). Fixed in TF by PRs #125038/#125400. Ours: seq_len_max must be in [0, T]; if
    instead the per-step tensors have seq_len_max steps while x has fewer, the time mismatch is
    reported."""
    rng = np.random.default_rng(106407)
    normal = lambda r, shape, dtype: r.standard_normal(shape).astype(dtype)  # noqa: E731
    kw = seq_inputs(rng, op, T=2, B=2, I=4, H=5, seq_len_max=3, draw=normal)
    kw.update(use_peephole=False)
    expect_invalid(op, kw, "seq_len_max must be between 0 and 2 (time_len of x), got 3")
    expect_invalid(op, dict(kw, use_peephole=True), "seq_len_max must be between 0 and 2")
    # The per-step tensors built for 3 steps, x for 2.
    steps = {n: normal(rng, (3, 2, 5), np.float32) for n in SEQ_STEPS}
    expect_invalid(op, dict(kw, **steps),
                   "i must have shape [2, 2, 5] (time_len, batch_size, cell_size), got [3, 2, 5]")


# (id, op, T, B, I, H, {input: shape replacing the consistent one}, message fragment)
MISMATCH_112746 = [
    # The reproducer: x with batch 0, every other input with batch 2.
    ("x_batch0", "BlockLSTMGrad", 3, 2, 4, 5, {"x": (3, 0, 4)},
     "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"),
    # The PR's sweep: x batch 2, the others batch 0 (or 1) also crashed or misread.
    ("others_batch0", "BlockLSTMGrad", 3, 0, 4, 5, {"x": (3, 2, 4)},
     "cs_prev must have shape [2, 5] (batch_size, cell_size), got [0, 5]"),
    ("x_batch1_others_2", "BlockLSTMGrad", 3, 2, 4, 5, {"x": (3, 1, 4)},
     "cs_prev must have shape [1, 5]"),
    ("h_prev_batch", "BlockLSTMGrad", 3, 2, 4, 5, {"h_prev": (0, 5)},
     "h_prev must have shape [2, 5] (batch_size, cell_size), got [0, 5]"),
    ("i_time1", "BlockLSTMGrad", 3, 2, 4, 5, {"i": (1, 2, 5)},
     "i must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [1, 2, 5]"),
    ("h_batch0", "BlockLSTMGrad", 3, 2, 4, 5, {"h": (3, 0, 5)},
     "h must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [3, 0, 5]"),
    ("cs_grad_time", "BlockLSTMGrad", 3, 2, 4, 5, {"cs_grad": (2, 2, 5)},
     "cs_grad must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [2, 2, 5]"),
    ("h_grad_cell", "BlockLSTMGrad", 3, 2, 4, 5, {"h_grad": (3, 2, 4)},
     "h_grad must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [3, 2, 4]"),
    ("v2_x_batch0", "BlockLSTMGradV2", 3, 2, 4, 5, {"x": (3, 0, 4)},
     "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"),
    ("v2_co_time1", "BlockLSTMGradV2", 3, 2, 4, 5, {"co": (1, 2, 5)},
     "co must have shape [3, 2, 5] (time_len, batch_size, cell_size), got [1, 2, 5]"),
    # The forward ops: x's batch against the states.
    ("fwd_x_batch0", "BlockLSTM", 3, 2, 4, 5, {"x": (3, 0, 4)},
     "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"),
    ("fwd_v2_h_prev_batch", "BlockLSTMV2", 3, 2, 4, 5, {"h_prev": (3, 5)},
     "h_prev must have shape [2, 5] (batch_size, cell_size), got [3, 5]"),
    # The issue's second crash: LSTMBlockCellGrad with an empty, rank-1 x.
    ("cell_grad_x_empty", "LSTMBlockCellGrad", None, 2, 4, 5, {"x": (0,)},
     "x must be rank 2, got rank 1 (shape [0])"),
    ("cell_backward_x_empty", "gradients.LSTMBlockCell", None, 2, 4, 5, {"x": (0,)},
     "x must be rank 2, got rank 1 (shape [0])"),
    ("cell_grad_x_batch0", "LSTMBlockCellGrad", None, 2, 4, 5, {"x": (0, 4)},
     "cs_prev must have shape [0, 5] (batch_size, cell_size), got [2, 5]"),
    ("cell_grad_i_batch", "LSTMBlockCellGrad", None, 2, 4, 5, {"i": (3, 5)},
     "i must have shape [2, 5] (batch_size, cell_size), got [3, 5]"),
]


@pytest.mark.parametrize("case", MISMATCH_112746, ids=[c[0] for c in MISMATCH_112746])
def test_tf_112746_batch_time_mismatch(case):
    """tensorflow/tensorflow#112746: BlockLSTMGrad crashed (or silently computed garbage) when x
    and the other inputs disagreed on batch or time, and LSTMBlockCellGrad crashed on an empty x.

    Reproducer: seq_len_max 3, batch 2, input 4, cell 5; x float32 normal [3, 0, 4] (batch 0)
    while cs_prev, h_prev and the rest have batch 2; also x = tf.constant([]) for
    LSTMBlockCellGrad. PR #126028 (open) adds the checks; its sweep also found x/others batch
    (1|2, 0) and a per-step tensor with time 1 crashing. Ours: every input's batch, time and
    cell dimensions are checked against x and w/cs_prev (SPEC A3, §8.3)."""
    _, op, T, B, I, H, bad, fragment = case
    rng = np.random.default_rng(112746)
    normal = lambda r, shape, dtype: r.standard_normal(shape).astype(dtype)  # noqa: E731
    if T is None:
        kw = cell_inputs(rng, op, B, I, H, draw=normal)
    else:
        kw = seq_inputs(rng, op, T, B, I, H, draw=normal)
    kw.update({n: normal(rng, shape, np.float32) for n, shape in bad.items()})
    if op in SEQ_FWD:
        kw.update(seq_attrs(op))
    else:
        kw.update(use_peephole=False)
    expect_invalid(op, kw, fragment)


@pytest.mark.parametrize("op", SEQ_GRAD)
def test_tf_112746_consistent_zero_batch_is_valid(op, path):
    """tensorflow/tensorflow#112746 (the counterpart the fix keeps working): a CONSISTENT zero
    batch (x [3, 0, 4], states [0, 5], per-step tensors [3, 0, 5]) is VALID per SPEC A3/§8.3
    (B = 0 works): the grads succeed, x_grad and the state gradients are empty, and the weight
    gradients are correctly shaped zeros."""
    rng = np.random.default_rng(1127460)
    kw = seq_inputs(rng, op, T=3, B=0, I=4, H=5)
    for use_peephole in (False, True):
        g = op_fn(op)(**kw, use_peephole=use_peephole)
        want = dict(x_grad=(3, 0, 4), cs_prev_grad=(0, 5), h_prev_grad=(0, 5), w_grad=(9, 20),
                    wci_grad=(5,), wcf_grad=(5,), wco_grad=(5,), b_grad=(20,))
        assert g._fields == tuple(want)
        for name, shape in want.items():
            v = getattr(g, name)
            assert v.shape == shape and v.dtype == np.float32, name
            assert not np.any(v), name  # no step contributes anything


@pytest.mark.parametrize("arg", ["x", "cs_prev"])
def test_tf_113069_rank1_cell_input(arg):
    """tensorflow/tensorflow#113069: LSTMBlockCell read dim_size(1) of x and cs_prev before
    checking their ranks, so a rank-1 x (or cs_prev) aborted the process.

    Reproducer (PR #124034): float16; x [0.1, 0.2] (rank 1); cs_prev [[0.5, 0.6]];
    h_prev [[0.7, 0.8]]; w [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]]; wci [0.1, 0.2];
    wcf [0.3, 0.4]; wco [0.5, 0.6]; b [0.1, 0.2, 0.3, 0.4]; attrs at their defaults. Ours:
    ranks first ("x must be rank 2"), before the inconsistent w and b are looked at."""
    h = lambda v: np.array(v, np.float16)  # noqa: E731
    kw = dict(x=h([0.1, 0.2]), cs_prev=h([[0.5, 0.6]]), h_prev=h([[0.7, 0.8]]),
              w=h([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]]), wci=h([0.1, 0.2]),
              wcf=h([0.3, 0.4]), wco=h([0.5, 0.6]), b=h([0.1, 0.2, 0.3, 0.4]))
    if arg == "cs_prev":
        kw.update(x=h([[0.1, 0.2]]), cs_prev=h([0.5, 0.6]))
    expect_invalid("LSTMBlockCell", kw, f"{arg} must be rank 2, got rank 1 (shape [2])")


@pytest.mark.parametrize("arg", ["x", "cs_prev"])
@pytest.mark.parametrize("op", CELL_BWD)
def test_tf_113071_rank1_cell_grad_input(op, arg):
    """tensorflow/tensorflow#113071: LSTMBlockCellGrad read dim_size(1) of x before any rank
    check, so a rank-1 x aborted the process.

    Reproducer (PR #124034, the gradient twin of #113069): float16, x [0.1, 0.2] (rank 1),
    cs_prev/h_prev [1, 2], w [4, 2], peepholes [2], b [4], the gates and upstream gradients
    [1, 2]; use_peephole False. Ours: "x must be rank 2" (and the same for cs_prev) from
    LSTMBlockCellGrad and from gradients.LSTMBlockCell."""
    h = lambda v: np.array(v, np.float16)  # noqa: E731
    kw = dict(x=h([0.1, 0.2]), cs_prev=h([[0.5, 0.6]]), h_prev=h([[0.7, 0.8]]),
              w=h([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]]), wci=h([0.1, 0.2]),
              wcf=h([0.3, 0.4]), wco=h([0.5, 0.6]), b=h([0.1, 0.2, 0.3, 0.4]),
              use_peephole=False)
    kw.update({n: h([[0.25, 0.75]]) for n in CELL_GATES + ["cs_grad", "h_grad"]})
    if arg == "cs_prev":
        kw.update(x=h([[0.1, 0.2]]), cs_prev=h([0.5, 0.6]))
    expect_invalid(op, kw, f"{arg} must be rank 2, got rank 1 (shape [2])")


@pytest.mark.parametrize("seq_len_max", [-1, 4, 10, -(2**63), 2**63 - 1])
@pytest.mark.parametrize("op", SEQ_FWD + SEQ_GRAD)
def test_tf_124974_seq_len_max_out_of_range(op, seq_len_max):
    """tensorflow/tensorflow#124974: BlockLSTMGrad aborted in Tensor::Slice ("limit <=
    dim0_size (10 vs. 2)") when seq_len_max exceeded a tensor's time dimension; a negative
    seq_len_max crashed the same way, and BlockLSTM had the same pattern.

    Reproducer: seq_len_max 10; float16 zeros; x [10, 2, 16]; cs_prev and h_prev [2, 0];
    w [16, 0] (cut off after that). Fixed in TF by a range check (PRs #125038, #125400). Ours:
    0 <= seq_len_max <= T on all four sequence ops ("seq_len_max must be between 0 and T"),
    here with otherwise consistent float16 inputs and T = 3; the issue's own inputs follow."""
    rng = np.random.default_rng(124974)
    kw = seq_inputs(rng, op, T=3, B=2, I=16, H=4, seq_len_max=seq_len_max, dtype=np.float16)
    kw.update(seq_attrs(op))
    expect_invalid(op, kw, f"seq_len_max must be between 0 and 3 (time_len of x), got "
                           f"{seq_len_max}")


@pytest.mark.parametrize("op", SEQ_GRAD)
def test_tf_124974_issue_inputs(op):
    """tensorflow/tensorflow#124974, the issue's own inputs: seq_len_max 10, float16 zeros,
    x [10, 2, 16], cs_prev and h_prev [2, 0], w [16, 0], completed with peepholes and b [0] and
    per-step tensors of time 2 (the slice that failed had 2 steps). Ours: H = 0 is rejected
    first (w needs a positive multiple of 4 columns); with H = 4 the time mismatch of the
    per-step tensors is reported; with everything of time 2, seq_len_max is."""
    z = lambda shape: np.zeros(shape, np.float16)  # noqa: E731
    kw = dict(seq_len_max=10, x=z((10, 2, 16)), cs_prev=z((2, 0)), h_prev=z((2, 0)),
              w=z((16, 0)), wci=z((0,)), wcf=z((0,)), wco=z((0,)), b=z((0,)),
              use_peephole=False)
    kw.update({n: z((2, 2, 0)) for n in SEQ_STEPS})
    expect_invalid(op, kw, "w must have a positive multiple of 4 columns")
    kw.update(cs_prev=z((2, 4)), h_prev=z((2, 4)), w=z((20, 16)), wci=z((4,)), wcf=z((4,)),
              wco=z((4,)), b=z((16,)))
    kw.update({n: z((2, 2, 4)) for n in SEQ_STEPS})
    expect_invalid(op, kw, "i must have shape [10, 2, 4] (time_len, batch_size, cell_size), "
                           "got [2, 2, 4]")
    kw["x"] = z((2, 2, 16))
    expect_invalid(op, kw, "seq_len_max must be between 0 and 2 (time_len of x), got 10")


ALL_LSTM_OPS = ["LSTMBlockCell", "LSTMBlockCellGrad", "gradients.LSTMBlockCell", "BlockLSTM",
                "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2"]


@pytest.mark.parametrize("length", [0, 3])
@pytest.mark.parametrize("use_peephole", [False, True])
@pytest.mark.parametrize("peephole", ["wci", "wcf", "wco"])
@pytest.mark.parametrize("op", ALL_LSTM_OPS)
def test_short_peephole(op, peephole, use_peephole, length):
    """A peephole vector shorter than H made TF's kernels read (LSTMBlockCell, BlockLSTM with
    use_peephole) or write (LSTMBlockCellGrad's wc*_grad, sized like the input) out of bounds
    (SPEC §5.3, §6.3, §8.3). Ours, like newer TF: every peephole must be [H] on every LSTM op,
    even with use_peephole false, and the error names it."""
    rng = np.random.default_rng(5)
    H = 4
    if op.startswith("Block"):
        kw = seq_inputs(rng, op, T=3, B=2, I=3, H=H)
        kw.update(seq_attrs(op, use_peephole))
    else:
        kw = cell_inputs(rng, op, B=2, I=3, H=H)
        kw.update(use_peephole=use_peephole)
    kw[peephole] = uniform(rng, (length,))
    expect_invalid(op, kw, f"{peephole} must have shape [{H}] (cell_size), got [{length}]")
