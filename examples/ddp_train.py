#!/usr/bin/env python3
"""A character language model trained with blockrnn.torch modules under PyTorch's
DistributedDataParallel (gloo backend, CPU).

    # 2 processes on this machine
    torchrun --standalone --nproc_per_node=2 examples/ddp_train.py --steps 200
    # one process (no torchrun): the same model on the whole global batch
    .venv/bin/python examples/ddp_train.py --steps 200
    # several machines: see docs/torch.md (torchrun --nnodes/--rdzv-endpoint)

Model: Embedding(V, D) -> blockrnn.torch.LSTM or GRU (num_layers, dropout between layers)
-> Linear(H, V), cross-entropy on the next character, SGD. The global batch has --batch
streams; with W processes, rank r trains on streams [r*B/W, (r+1)*B/W). The loss of each rank
is the mean over its own streams, and DDP averages gradients over ranks, so W processes compute
the gradient of the mean over the whole global batch, as one process does.

Stream b starts at floor(b * N / batch) in the corpus (a ring of N characters); step s reads
seq_len + 1 characters from (start_b + s * seq_len) mod N. The recurrent state is reset every
step (no state is carried between steps), so each step is independent of the partitioning.
"""
import argparse
import os
import pathlib
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import blockrnn
import blockrnn.torch as brt

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "tools/train/data/corpus.txt"


class CharLM(nn.Module):
    def __init__(self, vocab, embed, hidden, num_layers, cell, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        rnn = brt.LSTM if cell == "lstm" else brt.GRU
        self.rnn = rnn(embed, hidden, num_layers=num_layers, dropout=dropout)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):  # ids [T, B] -> logits [T, B, V]
        out, _ = self.rnn(self.embed(ids))
        return self.head(out)


def batch_ids(data, step, seq_len, batch, streams):
    """[seq_len + 1, len(streams)] character ids of the given streams of a global batch."""
    n = len(data)
    starts = np.array([(b * n) // batch + step * seq_len for b in streams])
    idx = (starts[None, :] + np.arange(seq_len + 1)[:, None]) % n
    return torch.from_numpy(data[idx])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    p.add_argument("--batch", type=int, default=32, help="global batch (streams), all ranks")
    for flag, default in dict(steps=200, seq_len=32, embed=32, hidden=128, layers=2).items():
        p.add_argument("--" + flag.replace("_", "-"), type=int, default=default)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--threads", type=int, default=1,
                   help="threads per process, for both torch and blockrnn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--corpus", default=str(CORPUS))
    p.add_argument("--save", default=None,
                   help="write the final parameters to SAVE.rank<r>.pt on every rank")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    blockrnn.set_num_threads(args.threads)
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must be divisible by the world size {world}")

    text = pathlib.Path(args.corpus).read_bytes()
    vocab = sorted(set(text))
    lut = np.zeros(256, np.int64)
    lut[vocab] = np.arange(len(vocab))
    data = lut[np.frombuffer(text, np.uint8)]

    dtype = getattr(torch, args.dtype)
    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    model = CharLM(len(vocab), args.embed, args.hidden, args.layers, args.cell,
                   args.dropout).to(dtype)
    net = nn.parallel.DistributedDataParallel(model) if distributed else model
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    per_rank = args.batch // world
    streams = range(rank * per_rank, (rank + 1) * per_rank)
    torch.manual_seed(args.seed + 1 + rank)  # dropout masks differ per rank

    t0 = time.perf_counter()
    for step in range(args.steps):
        ids = batch_ids(data, step, args.seq_len, args.batch, streams)
        logits = net(ids[:-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP: gradients averaged over ranks (gloo allreduce) here
        nn.utils.clip_grad_norm_(net.parameters(), 5.0)
        opt.step()
        if rank == 0 and (step % 50 == 0 or step == args.steps - 1):
            print(f"step {step:5d}  loss {loss.item():.4f} (rank 0's streams)  "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    if args.save:
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()},
                   f"{args.save}.rank{rank}.pt")
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
