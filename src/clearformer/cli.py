"""The `clearformer` command: one entry point, one subcommand module per job.

Each module in COMMAND_MODULES has `register(subparsers)`, which adds its subcommand(s) and sets
`func` on them; `func(args)` returns the exit code. Errors a user can cause are raised as
`UserError` (or another known error type) and printed as one line, without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import signal
import sys
import threading

from clearformer.errors import Stopped, UserError
from clearformer.store import lock as runlock
from clearformer.store.cachedir import cache_dir, remove_temporary_folders
from clearformer.store.output import StandardOutput

COMMAND_MODULES = [
    "clearformer.commands.info",
    "clearformer.commands.explain",
    "clearformer.commands.check",
    "clearformer.commands.train",
    "clearformer.commands.translate",
    "clearformer.commands.evaluate",
    "clearformer.commands.neighbors",
    "clearformer.commands.average",
    "clearformer.commands.data",
    "clearformer.commands.lm",
    "clearformer.commands.serve",
    "clearformer.commands.export",
    "clearformer.commands.import_model",
    "clearformer.commands.claims",
    "clearformer.commands.learn",
    "clearformer.commands.lens",
    "clearformer.commands.patch",
    "clearformer.commands.attribute",
    "clearformer.commands.confidence",
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
    global _interrupted, _signal
    words = sys.argv[1:] if argv is None else argv
    _interrupted, _signal = False, signal.SIGINT
    previous = install_interrupt_handler()
    try:
        return run(argv)
    except BaseException as error:
        # A Ctrl-C that lands inside a C extension's import comes out as another error (an ImportError
        # "initialization failed"): the handler's flag says it was the user.
        if not (_interrupted or isinstance(error, KeyboardInterrupt)):
            raise
        name = next((word for word in words if not word.startswith("-")), "")
        what = "terminated (SIGTERM)" if _signal == signal.SIGTERM else "interrupted"
        print(f"clearformer {name}: {what}".replace("  ", " "), file=sys.stderr)
        code = 128 + int(_signal)  # 130 for Ctrl-C, 143 for SIGTERM
        if _interrupted:
            # A real signal: torch or matplotlib may be half made, and the interpreter's clean-up can then
            # crash after the message; leave at once (the kernel drops the run folder's lock).
            sys.stdout.flush()
            sys.stderr.flush()
            remove_temporary_folders()
            os._exit(code)
        return code
    finally:
        runlock.release_all()
        for signum, handler in (previous or {}).items():
            signal.signal(signum, handler)


_interrupted = False
_deferred = False  # True while torch is imported: a KeyboardInterrupt raised inside its C++ import aborts


_signal = signal.SIGINT  # the signal that interrupted (SIGTERM ends a command as Ctrl-C does, exit 143)


def _on_interrupt(signum, frame) -> None:
    global _interrupted, _signal
    _interrupted, _signal = True, signum
    if not _deferred:
        raise KeyboardInterrupt


def install_interrupt_handler() -> dict | None:
    """Python's own behaviour on Ctrl-C (KeyboardInterrupt), and the same on SIGTERM, remembering which came;
    {signal: previous handler} to restore, None off the main thread. Training catches both itself and stops
    after the step with a checkpoint (train/stopping.py)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = {}
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is default:
            previous[signum] = signal.signal(signum, _on_interrupt)
    return previous


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
    stdout = sys.stdout
    sys.stdout = StandardOutput(stdout)  # a full disk behind stdout: one line (store/output.py)
    try:
        reject_non_finite(args)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # now, where a failure is one line, not at exit
        return code
    except Stopped as stop:  # SIGTERM or Ctrl-C, the work saved: how to continue (said by process 0 only)
        if str(stop):
            print(f"clearformer {args.command}: {stop}", file=sys.stderr)
        return stop.exit_code
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
    finally:
        sys.stdout = stdout


def reject_non_finite(args: argparse.Namespace) -> None:
    """A UserError naming the first float on a parsed command line that is NaN or infinite: the net under
    flags no options object holds (argparse's `float` accepts "nan" and "inf"; an options object's own
    check says the same words: clearformer/options.py)."""
    for name, value in sorted(vars(args).items()):
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"--{name.replace('_', '-')} must be a finite number, not {value}")


def use_cache_folder() -> None:
    """matplotlib keeps its font cache in clearformer's cache folder (docs/reliability.md), not ~/.matplotlib."""
    if "MPLCONFIGDIR" not in os.environ:
        folder = cache_dir("matplotlib")
        if folder is not None:
            os.environ["MPLCONFIGDIR"] = str(folder)
    # Importing torch._dynamo (torch.optim's first step does) makes TORCHINDUCTOR_CACHE_DIR, or else
    # $TMPDIR/torchinductor_USER, even in a command that never compiles: point it into the cache (with the
    # cache off, a temporary folder removed at exit), as store/cachedir.py's use_for_compiled_code does.
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir("inductor"))


if __name__ == "__main__":
    sys.exit(main())
