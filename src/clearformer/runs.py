"""Where runs live: `runs/<name>/` under the current directory (or $CLEARFORMER_RUNS), and which is latest.

`train` marks the checkpoint it writes as the latest, so `translate`, `explain`, `evaluate`
and `serve` find it without a `--checkpoint` option.
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
    """Record `checkpoint` as the one commands use when given no --checkpoint."""
    atomic_write_text(runs_root() / "LATEST", str(Path(checkpoint).resolve()) + "\n")


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
