"""The `clearformer` command: one entry point, one subcommand module per job.

Each module in COMMAND_MODULES has `register(subparsers)`, which adds its subcommand(s) and sets
`func` on them; `func(args)` returns the exit code. Errors a user can cause are raised as
`UserError` (or another known error type) and printed as one line, without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

from clearformer.errors import UserError
from clearformer.limits import check_command_line
from clearformer.validation import reject_non_finite

COMMAND_MODULES = [
    "clearformer.commands.info",
    "clearformer.commands.explain",
    "clearformer.explain.checker",
    "clearformer.commands.train",
    "clearformer.commands.translate",
    "clearformer.commands.evaluate",
    "clearformer.commands.neighbors",
    "clearformer.commands.average",
    "clearformer.data.cli",
    "clearformer.commands.lm",
    "clearformer.commands.serve",
    "clearformer.commands.export",
    "clearformer.commands.import_model",
    "clearformer.commands.claims",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clearformer",
        description="The Transformer of 'Attention Is All You Need': train, translate, and see every step.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; Ctrl-C at any moment, also while torch is still being imported, is one line and 130."""
    words = sys.argv[1:] if argv is None else argv
    try:
        return run(argv)
    except KeyboardInterrupt:
        name = next((word for word in words if not word.startswith("-")), "")
        print(f"clearformer {name}: interrupted".replace("  ", " "), file=sys.stderr)
        return 130
    finally:
        from clearformer.train import lock

        lock.release_all()


def run(argv: list[str] | None) -> int:
    use_cache_folder()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        reject_non_finite(args)
        check_command_line(args)
        return int(args.func(args) or 0)
    except UserError as error:
        print(f"clearformer {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"clearformer {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `clearformer ... | head` closed the pipe: not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def use_cache_folder() -> None:
    """matplotlib keeps its font cache in clearformer's cache folder (docs/reliability.md), not ~/.matplotlib."""
    from clearformer.cache import cache_dir

    if "MPLCONFIGDIR" not in os.environ:
        folder = cache_dir("matplotlib")
        if folder is not None:
            os.environ["MPLCONFIGDIR"] = str(folder)


if __name__ == "__main__":
    sys.exit(main())
