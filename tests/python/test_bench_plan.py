"""bench/blockrnn_rnn.py --plan times the layer object on the one-shot ops' work: its calls must
compute what the ops compute (the same bits), or the blockrnn_plan row of bench/compare.py
would time something else."""
import importlib.util
import pathlib

import numpy as np
import pytest

import blockrnn

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "blockrnn_rnn.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("blockrnn_rnn", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("op", ["block_lstm", "block_gru"])
def test_the_plan_calls_give_the_ops_bits(op):
    bench = load_bench()
    rng = np.random.default_rng(7)
    T, B, I, H = 5, 3, 4, 6
    f = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    h_grad = f(T, B, H)
    ops = blockrnn.raw_ops
    if op == "block_lstm":
        kw = dict(seq_len_max=np.int64(T), x=f(T, B, I), cs_prev=f(B, H), h_prev=f(B, H),
                  w=f(I + H, 4 * H), wci=f(H), wcf=f(H), wco=f(H), b=f(4 * H))
        cs_grad = f(T, B, H)
        want = ops.BlockLSTM(**kw, forget_bias=1.0, cell_clip=-1.0, use_peephole=False)
        want_grads = ops.BlockLSTMGrad(**kw, **want._asdict(), cs_grad=cs_grad, h_grad=h_grad,
                                       use_peephole=False)
    else:
        kw = dict(seq_len_max=np.int64(T), x=f(T, B, I), h_prev=f(B, H), w_ru=f(I + H, 2 * H),
                  w_c=f(I + H, H), b_ru=f(2 * H), b_c=f(H))
        cs_grad = None
        want = ops.BlockGRU(**kw)
        want_grads = ops.BlockGRUGrad(**kw, **want._asdict(), h_grad=h_grad)
    fwd, bwd = bench.plan_calls(op, kw, cs_grad, h_grad, T, B, I, H)
    for _ in range(2):  # the reused buffers, a second time
        outs = fwd()
        grads = bwd(outs)
        assert len(outs) == len(want) and len(grads) == len(want_grads)
        for name, got, expected in zip(want._fields + want_grads._fields, [*outs, *grads],
                                       [*want, *want_grads]):
            np.testing.assert_array_equal(got, expected, err_msg=name)
