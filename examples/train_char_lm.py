#!/usr/bin/env python3
"""Trains the character language model of `blockrnn train` in Python with blockrnn.layers:
embedding -> LSTM/GRU layers (BlockLSTM / BlockGRU and their grads) -> softmax, truncated
backpropagation through time with the state carried across batches, global gradient-norm
clipping and Adam. Everything but the recurrent layers is plain numpy.

    .venv/bin/python examples/train_char_lm.py                 # LSTM, 300 steps, ~1 minute
    .venv/bin/python examples/train_char_lm.py --cell gru --steps 500 --prime "And God"

Shape letters: T seq_len, B batch (parallel streams), V vocabulary, D embedding, H hidden.
Batching is the CLI's: the corpus is a ring, stream b starts at floor(b * N / B) and step s
reads T characters from (start_b + s * T) mod N, predicting each next character.
"""
import argparse
import pathlib
import sys
import time

import numpy as np

import blockrnn
from blockrnn.layers import GRU, LSTM

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "tools/train/data/corpus.txt"


class CharModel:
    """embedding E [V, D] -> layers -> logits = h·W + b, W [H, V]."""

    def __init__(self, vocab_size, embed, hidden, num_layers, cell, seed):
        rng = np.random.default_rng(seed)
        V, D, H = vocab_size, embed, hidden
        self.E = rng.uniform(-np.sqrt(3), np.sqrt(3), (V, D)).astype(np.float32)
        make = LSTM if cell == "lstm" else GRU
        self.layers = [make(D if k == 0 else H, H, seed=seed + 1 + k) for k in range(num_layers)]
        self.W = rng.uniform(-1 / np.sqrt(H), 1 / np.sqrt(H), (H, V)).astype(np.float32)
        self.b = np.zeros(V, np.float32)

    def params(self):
        """(name, array) pairs; the arrays are updated in place by the optimizer."""
        out = [("E", self.E), ("W", self.W), ("b", self.b)]
        for k, layer in enumerate(self.layers):
            out += [(f"layer{k}/{n}", a) for n, a in layer.parameters().items()]
        return out

    def forward(self, ids, states):
        """ids [T, B] -> logits [T, B, V]; returns the new states."""
        h = self.E[ids]                                      # [T, B, D]
        new_states = []
        for layer, state in zip(self.layers, states):
            h, final = layer.forward(h, state)
            new_states.append(final)
        self.h_top = h                                       # [T, B, H]
        return h @ self.W + self.b, new_states

    def backward(self, ids, dlogits):
        """dlogits [T, B, V] -> gradients by parameter name."""
        T, B, V = dlogits.shape
        H = self.W.shape[0]
        grads = {"W": self.h_top.reshape(-1, H).T @ dlogits.reshape(-1, V),  # [H, V]
                 "b": dlogits.sum(axis=(0, 1))}
        dh = dlogits @ self.W.T                                             # [T, B, H]
        for k in reversed(range(len(self.layers))):
            dh, _ = self.layers[k].backward(dh)  # truncated BPTT: the state gradient stops
            grads.update({f"layer{k}/{n}": g for n, g in self.layers[k].grads.items()})
        dE = np.zeros_like(self.E)
        np.add.at(dE, ids, dh)                                              # scatter-add
        grads["E"] = dE
        return grads


def softmax_xent(logits, targets):
    """Mean cross-entropy and its gradient w.r.t. logits [T, B, V]."""
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    n = targets.size
    picked = np.take_along_axis(p, targets[..., None], axis=-1)[..., 0]
    loss = -np.log(np.maximum(picked, 1e-30)).mean()
    np.put_along_axis(p, targets[..., None], picked[..., None] - 1, axis=-1)
    return float(loss), (p / n).astype(np.float32)


class Adam:
    def __init__(self, lr, beta1=0.9, beta2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps, self.t = lr, beta1, beta2, eps, 0
        self.m, self.v = {}, {}

    def step(self, params, grads):
        self.t += 1
        for name, p in params:
            g = grads[name]
            m = self.m.setdefault(name, np.zeros_like(p))
            v = self.v.setdefault(name, np.zeros_like(p))
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            m_hat = m / (1 - self.b1 ** self.t)
            v_hat = v / (1 - self.b2 ** self.t)
            p -= (self.lr * m_hat / (np.sqrt(v_hat) + self.eps)).astype(p.dtype)


def clip_global_norm(grads, max_norm):
    norm = float(np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values())))
    if norm > max_norm:
        for g in grads.values():
            g *= max_norm / norm
    return norm


def sample(model, symbols, prime, length, temperature, rng):
    index = {c: i for i, c in enumerate(symbols)}
    states = [None] * len(model.layers)
    ids = np.array([[index[c]] for c in (prime or "\n")], dtype=np.int64)  # [T, 1]
    logits, states = model.forward(ids, states)
    out = []
    for _ in range(length):
        z = logits[-1, 0].astype(np.float64) / max(temperature, 1e-6)
        p = np.exp(z - z.max())
        k = int(rng.choice(len(p), p=p / p.sum()))
        out.append(symbols[k])
        logits, states = model.forward(np.array([[k]]), states)
    return prime + "".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    # Sizes and counts, each at least 1 (checked below).
    sizes = dict(hidden=128, layers=1, embed=32, steps=300, batch=32, seq_len=64, threads=1)
    for name, default in sizes.items():
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--clip", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", type=pathlib.Path, default=CORPUS)
    ap.add_argument("--sample-length", type=int, default=300)
    ap.add_argument("--prime", default="")
    ap.add_argument("--temperature", type=float, default=0.6)
    args = ap.parse_args(argv)
    for name in sizes:
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")

    text = args.corpus.read_bytes().decode("latin-1")
    if len(text) < args.seq_len + 1:
        ap.error(f"the corpus has {len(text)} characters; need at least --seq-len + 1")
    symbols = sorted(set(text))
    unknown = sorted(set(args.prime) - set(symbols))
    if unknown:
        ap.error(f"--prime has characters not in the corpus: {''.join(unknown)!r}")
    index = {c: i for i, c in enumerate(symbols)}
    data = np.array([index[c] for c in text], dtype=np.int64)
    N, T, B = len(data), args.seq_len, args.batch
    blockrnn.set_num_threads(args.threads)

    model = CharModel(len(symbols), args.embed, args.hidden, args.layers, args.cell, args.seed)
    params = model.params()
    adam = Adam(args.lr)
    starts = np.arange(B) * N // B
    offsets = np.arange(T + 1)[:, None]
    states = [None] * args.layers
    print(f"{args.cell}: {args.layers} x {args.hidden} hidden, vocabulary {len(symbols)}, "
          f"{sum(p.size for _, p in params)} parameters; {N} characters")
    t0 = time.perf_counter()
    every = max(1, args.steps // 10)
    for step in range(args.steps):
        window = data[(starts[None, :] + step * T + offsets) % N]   # [T+1, B]
        ids, targets = window[:-1], window[1:]
        logits, states = model.forward(ids, states)
        loss, dlogits = softmax_xent(logits, targets)
        grads = model.backward(ids, dlogits)
        norm = clip_global_norm(grads, args.clip)
        adam.step(params, grads)
        if step == 0 or (step + 1) % every == 0:
            elapsed = time.perf_counter() - t0
            print(f"step {step + 1:5d}  loss {loss:.4f}  grad norm {norm:7.3f}  "
                  f"{(step + 1) * B * T / elapsed:8.0f} char/s")
    rng = np.random.default_rng(args.seed)
    print("sample:")
    print(sample(model, symbols, args.prime, args.sample_length, args.temperature, rng))
    return 0


if __name__ == "__main__":
    sys.exit(main())
