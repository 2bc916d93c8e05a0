"""`clearformer check FILE`: recompute a hand-worked self-attention example (explain/checker.py) and
print OK or each wrong cell. Exit 0: all right; 1: something is wrong; 2: the file is unusable."""

from __future__ import annotations

import argparse
import json

from clearformer.explain.checker import check_example, format_text


def run(args: argparse.Namespace) -> int:
    result = check_example(args.file)
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_text(result, args.file))
    return 0 if result.ok else 1


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "check", help="check a hand-worked self-attention example, step by step",
        description="Recompute every step of a worked self-attention example (JSON) and print OK or each "
                    "wrong cell with the claimed and the expected value. Exit 0: all right; 1: something is "
                    "wrong; 2: the file is unusable. Examples: examples/seed-*.json.")
    parser.add_argument("file", metavar="FILE", help="the example, JSON (see examples/)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    parser.set_defaults(func=run)
