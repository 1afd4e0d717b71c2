"""Reading the checkpoint of `blockrnn train` (checkpoint.safetensors, docs/training.md) in
Python: the character language model it holds, as blockrnn.layers.LSTM / GRU layers between
the embedding and the softmax. This is the demo's code, not the library's: it knows the
checkpoint's layout, and reads the file with the library's safetensors reader
(blockrnn.load_tensor_file).

    import sys; sys.path.insert(0, "tools/train")
    from char_checkpoint import load_char_model
    model = load_char_model("out/checkpoint.safetensors")
    logits, state = model.forward(ids)              # ids [T, B] -> logits [T, B, V]

Run as a script it prints the greedy continuation of a prime, as
`blockrnn sample --temperature 0` does:

    python tools/train/char_checkpoint.py out/checkpoint.safetensors --prime "And God" --length 60
"""
import argparse
import sys

import numpy as np

import blockrnn
from blockrnn.layers import GRU, LSTM


class CharModel:
    """The character language model `blockrnn train` trains: embedding [V, D] → layers
    (LSTM with forget_bias 1 or GRU) → logits = h·softmax_w + softmax_b, softmax_w [H, V].
    `vocabulary` holds the V symbols as bytes (id k is vocabulary[k]); `metadata` is the
    checkpoint's __metadata__ (strings)."""

    def __init__(self, embedding, layers, softmax_w, softmax_b, vocabulary, metadata):
        self.embedding, self.layers = embedding, layers
        self.softmax_w, self.softmax_b = softmax_w, softmax_b
        self.vocabulary, self.metadata = vocabulary, metadata

    def forward(self, ids, state=None):
        """ids [T, B] ints in [0, V); state: one layer state per layer (None: zeros).
        Returns (logits [T, B, V], the final state of every layer)."""
        x = self.embedding[np.asarray(ids)]
        state = [None] * len(self.layers) if state is None else state
        new_state = []
        for layer, s in zip(self.layers, state):
            x, s = layer.forward(x, s)
            new_state.append(s)
        return x @ self.softmax_w + self.softmax_b, new_state


def _checkpoint_error(path, message):
    return blockrnn.InvalidArgumentError(f"{path}: {message}")


def load_char_model(path):
    """The CharModel of a checkpoint written by `blockrnn train` (checkpoint.safetensors).
    Raises InvalidArgumentError (a ValueError) naming the file for a file that is not one
    (format, version, metadata, missing tensor or shape); the sizes the metadata declares must
    be those of the file's tensors before any layer is made."""
    tensors, meta = blockrnn.load_tensor_file(path)
    if any(a.dtype != np.float32 for a in tensors.values()):
        raise _checkpoint_error(path, "every tensor of a checkpoint must be F32")
    if meta.get("format") != "blockrnn-char-lm" or meta.get("format_version") != "1":
        raise _checkpoint_error(path, f"not a version 1 blockrnn-char-lm checkpoint (metadata "
                                      f"format={meta.get('format')!r}, "
                                      f"format_version={meta.get('format_version')!r})")

    def get(name, rank):
        if name not in tensors:
            raise _checkpoint_error(path, f"tensor {name!r} is missing")
        if tensors[name].ndim != rank:
            raise _checkpoint_error(path, f"tensor {name!r} must have rank {rank}, got shape "
                                          f"{list(tensors[name].shape)}")
        return tensors[name]

    def field(name, convert):
        try:
            return convert(meta[name])
        except KeyError:
            raise _checkpoint_error(path, f"metadata {name!r} is missing") from None
        except ValueError:
            raise _checkpoint_error(path, f"metadata {name!r} must be a number, got "
                                          f"{meta[name]!r}") from None

    embedding, softmax_w = get("embedding", 2), get("softmax.w", 2)
    hidden, n_layers = field("hidden", int), field("layers", int)
    cell = meta.get("cell")
    if cell not in ("lstm", "gru"):
        raise _checkpoint_error(path, f"metadata 'cell' must be 'lstm' or 'gru', got {cell!r}")
    in_file = {name.split(".")[1] for name in tensors if name.startswith("layers.")}
    if hidden != softmax_w.shape[0] or in_file != {str(l) for l in range(len(in_file))} or \
            n_layers != len(in_file):
        raise _checkpoint_error(path, f"metadata hidden={hidden}, layers={n_layers} do not match "
                                      f"the tensors (softmax.w {list(softmax_w.shape)}, "
                                      f"{len(in_file)} layers)")
    layers = []
    for l in range(n_layers):
        input_size = embedding.shape[1] if l == 0 else hidden
        if cell == "lstm":
            layer = LSTM(input_size, hidden, forget_bias=field("forget_bias", float))
        else:
            layer = GRU(input_size, hidden)
        for name in layer._PARAMS:
            expected = getattr(layer, name).shape
            value = get(f"layers.{l}.{name}", len(expected))
            if value.shape != expected:
                raise _checkpoint_error(path, f"tensor 'layers.{l}.{name}' has shape "
                                              f"{value.shape}, expected {expected}")
            setattr(layer, name, value)
        layers.append(layer)
    try:
        vocabulary = field("vocabulary", str).encode("latin-1")
    except UnicodeEncodeError:
        raise _checkpoint_error(path, "metadata 'vocabulary' must hold latin-1 symbols") from None
    return CharModel(embedding, layers, softmax_w, get("softmax.b", 1), vocabulary, meta)


def greedy(model, prime, length):
    """`prime` (bytes of the vocabulary) followed by `length` symbols, each the most likely
    next one."""
    ids = [model.vocabulary.index(c) for c in prime]
    logits, state = model.forward(np.array(ids)[:, None])
    text = bytearray(prime)
    for _ in range(length):
        k = int(np.argmax(logits[-1, 0]))
        text.append(model.vocabulary[k])
        logits, state = model.forward(np.array([[k]]), state)
    return bytes(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--prime", default="\n")
    parser.add_argument("--length", type=int, default=200)
    args = parser.parse_args(argv)
    model = load_char_model(args.checkpoint)
    prime = args.prime.encode("latin-1")
    missing = [chr(c) for c in prime if c not in model.vocabulary]
    if missing:
        parser.error(f"--prime: {missing[0]!r} is not in the checkpoint's vocabulary")
    sys.stdout.write(greedy(model, prime, args.length).decode("latin-1") + "\n")


if __name__ == "__main__":
    main()
