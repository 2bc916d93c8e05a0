"""Where runs live: `runs/<name>/` under the current directory (or $CLEARFORMER_RUNS), and which is latest.

The "latest run" pointer is the file `runs/LATEST` ($CLEARFORMER_RUNS/LATEST). `train`, `import marian`
and `average` write it only for a run inside runs/ (`train`'s default `runs/<preset>`, an `--out`
inside runs/, `average`'s default RUN/averaged of a run there): `--out DIR` anywhere else writes
nothing outside DIR (`mark_latest_if_default`). `lm train` and `lm import` never write it.
`translate`, `explain`, `evaluate`, `neighbors` and `serve` follow the pointer only when the user names
no `--checkpoint`. The toy model the lessons read lives in the cache, never here (learn/toy.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from clearformer.errors import UserError
from clearformer.limits import MAX_POINTER_FILE_BYTES
from clearformer.store.fixed import check_fixed, read_fixed, write_fixed
from clearformer.store.safeio import decode_utf8


def runs_root() -> Path:
    return Path(os.environ.get("CLEARFORMER_RUNS", "runs"))


def default_run_dir(name: str) -> Path:
    """The directory a run called `name` (usually the preset) writes to: runs/<name>."""
    return runs_root() / name


def mark_latest(checkpoint: Path) -> None:
    """Record `checkpoint` as the one commands use when given no --checkpoint."""
    write_fixed(runs_root() / "LATEST", str(Path(checkpoint).resolve()) + "\n")  # never through a link


def in_default_place(run_dir: Path) -> bool:
    """A run inside runs/ (`runs/<preset>`, `average`'s `runs/<run>/averaged`): the places LATEST follows."""
    run, root = Path(run_dir).resolve(), runs_root().resolve()
    return run != root and run.is_relative_to(root)


def mark_latest_if_default(run_dir: Path) -> bool:
    """Point runs/LATEST at `run_dir` if the run lives in runs/ (its default place); True if written."""
    if not in_default_place(run_dir):
        return False
    mark_latest(run_dir)
    return True


def check_latest_if_default(run_dir: Path) -> None:
    """Before a run that will write runs/LATEST: what stands there must be a regular file or nothing."""
    if in_default_place(run_dir):
        check_fixed(runs_root() / "LATEST")


def latest_checkpoint() -> Path:
    """The checkpoint the last `clearformer train` wrote; a UserError if there is none."""
    marker = runs_root() / "LATEST"
    if not os.path.lexists(marker):
        raise UserError("no trained model yet: run `clearformer train --preset toy-translate` "
                        "or pass --checkpoint DIR")
    try:  # a link or a FIFO at runs/LATEST is refused, never followed or waited on (store/fixed.py)
        path = Path(decode_utf8(read_fixed(marker, MAX_POINTER_FILE_BYTES) or b"", str(marker)).strip())
    except UserError as error:
        raise UserError(f"{error}; pass --checkpoint DIR (or train again to rewrite runs/LATEST)") from None
    if not path.is_dir():
        raise UserError(f"{marker}: points to {path}, which no longer exists; pass --checkpoint DIR")
    return path


def resolve_checkpoint(option: str | None) -> Path:
    """--checkpoint DIR if given, else the latest run."""
    return Path(option) if option else latest_checkpoint()
