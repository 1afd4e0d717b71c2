"""Converters of trained recurrent models to blockrnn model files (docs/model-format.md).

    import blockrnn.convert as bc
    model = bc.from_keras_file("model.keras")      # .keras or legacy .h5; no TensorFlow needed
    model = bc.from_keras(keras_model)             # a live Keras model or layer
    model = bc.from_torch(torch_module)            # torch.nn.LSTM / GRU, blockrnn.torch, state_dict
    model = bc.from_tf_checkpoint("ckpt", forget_bias=1.0)  # TF LSTMCell/GRUCell variables
    model.save("model.safetensors")

or from a shell: `python -m blockrnn.convert SRC OUT`. Each returns a blockrnn.model.Model; a
setting the ops cannot compute raises ConversionError (an InvalidArgumentError) naming the
layer and the setting. See docs/bring-your-model.md.
"""
from .keras import (ConversionError, check_keras_rnn_config, from_keras, from_keras_file,
                    keras_gru_weights, keras_lstm_weights)


def from_torch(module, *, reset_after=True):
    from .torch import from_torch as _from_torch
    return _from_torch(module, reset_after=reset_after)


def from_tf_checkpoint(path, scopes=None, *, forget_bias=None, cell_clip=None,
                       merge="concat"):
    from .tf import from_tf_checkpoint as _from_tf_checkpoint
    return _from_tf_checkpoint(path, scopes, forget_bias=forget_bias, cell_clip=cell_clip,
                               merge=merge)


from_tf_checkpoint.__doc__ = """The Model of TensorFlow LSTM / GRU cells (LSTMCell,
LSTMBlockCell, GRUCell, GRUBlockCell variable names) in a checkpoint; needs TensorFlow (see
blockrnn.convert.tf.from_tf_checkpoint)."""

from_torch.__doc__ = """The Model of a torch.nn.LSTM / GRU, a blockrnn.torch module or a
state_dict (see blockrnn.convert.torch.from_torch)."""


def convert(src, out=None, *, reset_after=True, scopes=None, forget_bias=None,
            cell_clip=None):
    """Converts the file `src` (.keras, .h5, a torch state_dict saved with torch.save as
    .pt / .pth, or a TensorFlow checkpoint: a prefix with a .index file, or its directory) and
    writes the model file `out` when given. Returns the Model. scopes, forget_bias and
    cell_clip are for TensorFlow checkpoints (see from_tf_checkpoint)."""
    import os

    src_path = os.fspath(src)
    ext = os.path.splitext(src_path)[1].lower()
    if os.path.isdir(src_path) or os.path.exists(src_path + ".index"):
        model = from_tf_checkpoint(src_path, scopes, forget_bias=forget_bias,
                                   cell_clip=cell_clip)
    elif ext in (".keras", ".h5", ".hdf5"):
        model = from_keras_file(src)
    elif ext in (".pt", ".pth", ".bin"):
        import torch
        try:
            obj = torch.load(src, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises many types for a file it cannot read safely
            raise ConversionError(f"{src}: cannot read as a torch state_dict with "
                                  f"weights_only=True ({type(e).__name__}: {e}); save "
                                  f"module.state_dict(), not the module") from None
        model = from_torch(obj, reset_after=reset_after)
        model.source["file"] = os.path.basename(os.fspath(src))
    else:
        raise ConversionError(f"{src}: unknown extension {ext!r}: expected .keras, .h5 "
                              f"(Keras), .pt / .pth (a torch state_dict) or a TensorFlow "
                              f"checkpoint prefix (with its .index file)")
    if out is not None:
        model.save(out)
    return model


__all__ = ["ConversionError", "convert", "from_keras", "from_keras_file", "from_torch",
           "from_tf_checkpoint",
           "keras_lstm_weights", "keras_gru_weights", "check_keras_rnn_config"]
