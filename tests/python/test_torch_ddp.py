"""examples/ddp_train.py under torchrun with 2 processes (gloo, CPU): both ranks end with
identical parameters, equal to one process trained on the whole global batch.

Tolerance: the ranks are compared bitwise (DDP gives both the same averaged gradient and SGD
is deterministic). Against one process: 1e-12 absolute in float64. Each rank's gradient is the
mean over its half of the batch and gloo's allreduce sums the two halves before dividing by 2,
whereas one process sums over the whole batch in one pass: the same terms in another order,
~1e-16 relative per gradient, carried through 4 SGD steps on O(0.1) parameters (measured
2e-16). float64 keeps the check far below any real error (a wrong partition or a missing
average changes parameters by ~1e-3).
"""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "ddp_train.py")
ARGS = ["--steps", "4", "--batch", "8", "--seq-len", "16", "--embed", "16", "--hidden", "32",
        "--layers", "2", "--dtype", "float64", "--threads", "1"]


def test_ddp_two_processes_match_one(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", BLOCKRNN_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node=2", SCRIPT, *ARGS, "--save", str(tmp_path / "ddp")],
                   check=True, env=env, cwd=tmp_path, timeout=300)
    subprocess.run([sys.executable, SCRIPT, *ARGS, "--save", str(tmp_path / "one")],
                   check=True, env=env, cwd=tmp_path, timeout=300)
    r0 = torch.load(tmp_path / "ddp.rank0.pt")
    r1 = torch.load(tmp_path / "ddp.rank1.pt")
    one = torch.load(tmp_path / "one.rank0.pt")
    assert r0.keys() == r1.keys() == one.keys()
    assert any(k.startswith("rnn.weight_ih_l1") for k in r0)
    for k in r0:
        assert torch.equal(r0[k], r1[k]), f"{k}: ranks differ"
        torch.testing.assert_close(r0[k], one[k], atol=1e-12, rtol=0, msg=k)
