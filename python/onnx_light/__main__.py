"""``python -m onnx_light info MODEL``: prints a summary of a model."""

import argparse
import sys

import onnx_light


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m onnx_light", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("info", help="summarize a model")
    i.add_argument("model")
    args = p.parse_args(argv)
    try:
        print(onnx_light.info(args.model))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
