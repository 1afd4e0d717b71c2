"""python -m blockrnn.convert SRC OUT: a Keras .keras / .h5 file or a torch state_dict (.pt)
to a blockrnn model file (docs/model-format.md). Prints the model and what was not converted;
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
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # not_converted is printed with the summary
            model = convert(args.src, args.out, reset_after=not args.gru_reset_before)
    except InvalidArgumentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(model.summary())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
