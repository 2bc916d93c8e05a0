"""A run folder holds one run: claim it before training, refuse to mix two runs, sweep up killed writers' litter.

`claim_run_folder(run_dir, resume, overwrite)` is what `train` and `lm train` call before they write:

- it takes an exclusive lock on RUN/.clearformer.lock (released by the kernel when the process ends, even on
  SIGKILL), so two processes never train into one folder at once;
- holding the lock, it removes the temporaries a killed process left behind: clearformer's own patterns only
  (`checkpoints/.tmp-step-*`, `checkpoints/.old-step-*`, and atomic.py's `.<name>.<8 random>` files), only
  inside RUN, and only once no live clearformer process can own them (the lock proves that);
- a folder that already holds a run must be continued (`--resume`) or replaced (`--overwrite`, which moves
  the old folder aside to RUN.replaced-<UTC time> first: nothing is deleted, nothing is mixed).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from clearformer.errors import UserError

LOCK_FILE = ".clearformer.lock"
# Files and folders whose presence means "a run lives here" (translation runs and language-model runs).
RUN_MARKERS = ("model.safetensors", "meta.json", "config.json", "metrics.csv", "checkpoints",
               "train_state.json", "train_state.safetensors")
# atomic.py's temporaries: "." + target name + "." + the 8 characters tempfile.mkstemp adds.
ATOMIC_TEMPORARY = re.compile(r"^\.[^/]+\.[A-Za-z0-9_]{8}$")
# save_step_checkpoint's folders: .tmp-step-NNNNNNNN-PID (being written), .old-step-NNNNNNNN-PID (being swapped).
STEP_TEMPORARY = re.compile(r"^\.(tmp|old)-step-\d+-\d+$")
PLOT_TEMPORARY = re.compile(r"^\.[^/]+\.tmp\.png$")


def holds_run(run_dir: Path) -> bool:
    return any((Path(run_dir) / name).exists() for name in RUN_MARKERS)


@contextlib.contextmanager
def claim_run_folder(run_dir: str | Path, resume: bool, overwrite: bool = False) -> Iterator[Path]:
    """Lock RUN for this process, check it may be written, sweep stale temporaries; yields RUN."""
    run_dir = Path(run_dir)
    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other: continue the run, or replace it")
    if os.environ.get("RANK", "0") != "0":
        # Under torchrun every process runs `train`; rank 0 (the one that writes) claims the folder for all.
        yield run_dir
        return
    if holds_run(run_dir) and not resume:
        if not overwrite:
            raise UserError(f"{run_dir}: already holds a run; add --resume to continue it or --overwrite "
                            "to replace it (the old one is moved aside)")
        moved = move_aside(run_dir)
        print(f"--overwrite: moved the previous run to {moved}", flush=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    with _locked(run_dir):
        if holds_run(run_dir):
            remove_stale_temporaries(run_dir)
        yield run_dir


def move_aside(run_dir: Path) -> Path:
    """Rename RUN to RUN.replaced-<UTC time> (a sibling; a rename, so nothing is copied or lost)."""
    if run_dir.resolve() == Path.cwd().resolve():
        raise UserError(f"{run_dir}: --overwrite cannot move the current directory aside; use another --out")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    target = run_dir.with_name(f"{run_dir.name}.replaced-{stamp}")
    number = 1
    while target.exists():
        number += 1
        target = run_dir.with_name(f"{run_dir.name}.replaced-{stamp}-{number}")
    try:
        os.replace(run_dir, target)
    except OSError as error:
        raise UserError(f"{run_dir}: cannot move the old run aside ({error.strerror})") from None
    return target


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    path = run_dir / LOCK_FILE
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            raise UserError(f"{run_dir}: in use by a running clearformer process (pid {owner}); "
                            "wait for it or use another --out") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete killed writers' temporaries in RUN (call only while holding RUN's lock); returns them."""
    removed = []
    checkpoints = run_dir / "checkpoints"
    folders = [run_dir, checkpoints]
    if checkpoints.is_dir():
        folders += [child for child in checkpoints.iterdir() if child.is_dir() and not child.is_symlink()]
    for folder in folders:
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if _is_stale_temporary(entry, folder == checkpoints):
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def _is_stale_temporary(entry: Path, in_checkpoints: bool) -> bool:
    if entry.is_symlink() or entry.name == LOCK_FILE:
        return False
    if in_checkpoints and entry.is_dir() and STEP_TEMPORARY.match(entry.name):
        return not _alive(int(entry.name.rsplit("-", 1)[1]))
    if entry.is_file() and (ATOMIC_TEMPORARY.match(entry.name) or PLOT_TEMPORARY.match(entry.name)):
        return True  # no PID in the name, but the lock shows no clearformer process is writing RUN
    return False


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # our own leftovers from an earlier run in this process (tests, notebooks)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
