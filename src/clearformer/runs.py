"""Where runs live: `runs/<name>/` under the current directory (or $CLEARFORMER_RUNS), and which is latest.

`train` without `--out` writes to runs/<preset> and marks it as the latest (runs/LATEST), so `translate`,
`explain`, `evaluate` and `serve` find it without a `--checkpoint` option. A run written elsewhere
(`--out DIR` outside runs/) leaves runs/LATEST alone: nothing is written outside --out. The pointer is
followed only when the user names no checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

from clearformer.atomic import atomic_write_text
from clearformer.errors import UserError


def runs_root() -> Path:
    return Path(os.environ.get("CLEARFORMER_RUNS", "runs"))


def default_run_dir(name: str) -> Path:
    """The directory a run called `name` (usually the preset) writes to: runs/<name>."""
    return runs_root() / name


def mark_latest(checkpoint: Path) -> None:
    """Record `checkpoint` as the one commands use when given no --checkpoint, if it lives under runs/.

    A checkpoint elsewhere is not marked: `train --out X` must not change what a later `translate` in
    another directory picks up, nor write anything outside X.
    """
    checkpoint = Path(checkpoint).resolve()
    if checkpoint.is_relative_to(runs_root().resolve()):
        atomic_write_text(runs_root() / "LATEST", str(checkpoint) + "\n")


def latest_checkpoint() -> Path:
    """The checkpoint the last `clearformer train` wrote; a UserError if there is none."""
    marker = runs_root() / "LATEST"
    if not marker.exists():
        raise UserError("no trained model yet: run `clearformer train --preset toy-translate` "
                        "or pass --checkpoint DIR")
    path = Path(marker.read_text(encoding="utf-8").strip())
    if not path.is_dir():
        raise UserError(f"{marker}: points to {path}, which no longer exists; pass --checkpoint DIR")
    return path


def resolve_checkpoint(option: str | None) -> Path:
    """--checkpoint DIR if given, else the latest run."""
    return Path(option) if option else latest_checkpoint()
