"""The options every command spells and means the same way: --checkpoint, --device, --threads, --seed.

    --checkpoint DIR   the model folder to load (translate, evaluate, explain, neighbors, serve, info,
                       lm generate, lm explain; `--model DIR` is a hidden alias kept for old scripts)
    --device NAME      cpu, cuda, cuda:N or auto (train, lm train, lm generate)
    --threads N        at most N CPU threads for torch, N >= 1 (default: torch's choice)

The options of one concern (decoding, sampling, a training run's loop...) are options objects that make
their own flags (clearformer/options.py); these are the flags of no object.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from clearformer.devices import resolve_device
from clearformer.errors import UserError
from clearformer.limits import MAX_THREADS
from clearformer.options import check_value


def add_checkpoint(parser, default: str | None = None, model_alias: bool = False) -> None:
    where = f"default {default}" if default else "default: the latest run"
    parser.add_argument("--checkpoint", metavar="DIR", default=default, help=f"checkpoint directory ({where})")
    if model_alias:  # the LM commands called it --model before; scripts still pass it
        parser.add_argument("--model", dest="checkpoint", metavar="DIR", default=argparse.SUPPRESS,
                            help=argparse.SUPPRESS)


def add_device(parser, default: str | None = "cpu") -> None:
    parser.add_argument("--device", default=default, help="cpu, cuda, cuda:N or auto (default cpu)")


def add_threads(parser) -> None:
    parser.add_argument("--threads", type=int, metavar="N", help="at most N CPU threads (default: torch's choice)")


def check_threads(threads: int | None) -> None:
    check_value("--threads", threads, at_least=1, at_most=MAX_THREADS)


def apply_threads(threads: int | None) -> None:
    """Validate --threads and give torch that many threads (None: leave torch's choice)."""
    check_threads(threads)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def device(name: str):
    """The torch device --device names, or a one-line error."""
    return resolve_device(name)


def check_not_input(output: Path | None, source: str | Path | None, option: str) -> None:
    """An --output that is the input file (the same file, also through a link or another spelling) would
    replace what is being read: a one-line error before any work."""
    if output is None or source is None:
        return
    source = Path(source)
    try:
        same = output.exists() and source.exists() and os.path.samefile(output, source)
    except OSError:
        same = False
    if same or output.resolve() == source.resolve():
        raise UserError(f"--output {output} is the {option} file: it would replace the input; "
                        f"write to another file")
