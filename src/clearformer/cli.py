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
import signal
import sys
import threading

from clearformer.errors import UserError
from clearformer.limits import check_command_line
from clearformer.store import lock as runlock
from clearformer.store.cachedir import cache_dir, remove_temporary_folders
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
    "clearformer.commands.learn",
    "clearformer.commands.lens",
    "clearformer.commands.patch",
    "clearformer.commands.attribute",
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
    global _interrupted
    words = sys.argv[1:] if argv is None else argv
    _interrupted = False
    previous = install_interrupt_handler()
    try:
        return run(argv)
    except BaseException as error:
        # A Ctrl-C that lands inside a C extension's import comes out as another error (an ImportError
        # "initialization failed"): the handler's flag says it was the user.
        if not (_interrupted or isinstance(error, KeyboardInterrupt)):
            raise
        name = next((word for word in words if not word.startswith("-")), "")
        print(f"clearformer {name}: interrupted".replace("  ", " "), file=sys.stderr)
        if _interrupted:
            # A real signal: torch or matplotlib may be half made, and the interpreter's clean-up can then
            # crash after the message; leave at once (the kernel drops the run folder's lock).
            sys.stdout.flush()
            sys.stderr.flush()
            remove_temporary_folders()
            os._exit(130)
        return 130
    finally:
        runlock.release_all()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


_interrupted = False
_deferred = False  # True while torch is imported: a KeyboardInterrupt raised inside its C++ import aborts


def _on_interrupt(signum, frame) -> None:
    global _interrupted
    _interrupted = True
    if not _deferred:
        raise KeyboardInterrupt


def install_interrupt_handler():
    """Python's own behaviour (KeyboardInterrupt), remembering that it happened; None off the main thread."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    return signal.signal(signal.SIGINT, _on_interrupt)


def run(argv: list[str] | None) -> int:
    global _deferred
    use_cache_folder()
    _deferred = True  # a Ctrl-C now is acted on once the imports are done (a second or two)
    try:
        parser = build_parser()
    finally:
        _deferred = False
    if _interrupted:
        raise KeyboardInterrupt
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
    except MemoryError:
        print(f"clearformer {args.command}: error: out of memory (see the limits in docs/reliability.md)",
              file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `clearformer ... | head` closed the pipe: not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def use_cache_folder() -> None:
    """matplotlib keeps its font cache in clearformer's cache folder (docs/reliability.md), not ~/.matplotlib."""
    if "MPLCONFIGDIR" not in os.environ:
        folder = cache_dir("matplotlib")
        if folder is not None:
            os.environ["MPLCONFIGDIR"] = str(folder)


if __name__ == "__main__":
    sys.exit(main())
