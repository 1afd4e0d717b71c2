"""python -m blockrnn.convert SRC OUT: a Keras .keras / .h5 file, a torch state_dict (.pt) or a
TensorFlow checkpoint of TensorFlow's LSTM / GRU cells to a blockrnn model file (docs/model-format.md). Prints the model and what was not converted;
exit status 1 with the reason when the source cannot be converted exactly."""
import argparse
import sys
import warnings

from .. import InvalidArgumentError
from . import convert


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m blockrnn.convert",
        description="Convert a Keras (.keras, .h5) or PyTorch (state_dict .pt) recurrent "
                    "model to a blockrnn model file (safetensors).")
    parser.add_argument("src", help="the source model file")
    parser.add_argument("out", help="the blockrnn model file to write (.safetensors)")
    parser.add_argument("--gru-reset-before", action="store_true",
                        help="a torch GRU state_dict is blockrnn.torch.GRU(reset_after=False)")
    tf = parser.add_argument_group("TensorFlow checkpoints")
    tf.add_argument("--scope", action="append", metavar="SCOPE[,BACKWARD_SCOPE]",
                    help="a layer's cell scope, input layer first (repeat per layer; "
                         "'fw,bw' for a bidirectional layer, concatenated); default: the "
                         "checkpoint's only cell")
    tf.add_argument("--forget-bias", type=float, default=None,
                    help="the LSTM cells' forget_bias (required: checkpoints do not record it)")
    tf.add_argument("--cell-clip", type=float, default=None,
                    help="the LSTM cells' cell_clip (default: no clipping)")
    args = parser.parse_args(argv)
    scopes = None if args.scope is None else [
        tuple(s.split(",")) if "," in s else s for s in args.scope]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # not_converted is printed with the summary
            model = convert(args.src, args.out, reset_after=not args.gru_reset_before,
                            scopes=scopes, forget_bias=args.forget_bias,
                            cell_clip=args.cell_clip)
    except InvalidArgumentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(model.summary())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
