"""The run folder rules: one run per folder, no litter from killed processes, nothing written outside it.

    train --out DIR              DIR must not hold a run yet (a one-line error names --resume and --overwrite);
                                 a run stopped before its first checkpoint holds nothing to keep: started again
    train --out DIR --resume     continues the run in DIR
    train --out DIR --overwrite  deletes the run files in DIR (only those a run writes), then starts afresh

The run holds DIR's lock while it writes (a second writer gets a one-line error naming it) and marks DIR
as a run (store/lock.py); a folder holding files that are not a run's is refused, with or without
--overwrite. At every start, temporaries that a killed process left in DIR (step folders being written,
`checkpoints/.tmp-step-NNNNNNNN-PID/`, and clearformer.store.atomic's `.<name>.PID-<random>` files of the names
a run writes) are removed when their process is gone. Nothing else, and nothing outside DIR, is touched.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from clearformer.errors import UserError
from clearformer.load import read_config
from clearformer.store import lock
from clearformer.store.checkpoint import CONFIG_FILE
from clearformer.store.fixed import check_fixed
from clearformer.train import state

# The files whose presence means "a run lives here".
RUN_MARKERS = ("model.safetensors", "checkpoints", "metrics.csv", "train_state.json")

STEP_TEMPORARY = re.compile(r"^\.(?:tmp|old)-step-\d{8}-(\d+)$")  # train/state.py's step folders in flight
# clearformer.store.atomic's temporaries of the files a run writes: .<name>.<pid>-<8 of mkstemp's [a-z0-9_]>
WRITTEN_NAMES = sorted(lock.RUN_ENTRIES | {"optimizer.safetensors", "trainer_state.json"})
ATOMIC_TEMPORARY = re.compile(r"^\.(?:" + "|".join(re.escape(n) for n in WRITTEN_NAMES) + r"|hypotheses\.\w+\.txt)"
                              r"\.(\d+)-[a-z0-9_]{8}$")


def holds_run(run_dir: Path) -> bool:
    return any((Path(run_dir) / name).exists() for name in RUN_MARKERS)


def never_checkpointed(run_dir: Path) -> bool:
    """A run clearformer started that was stopped (killed) before its first checkpoint and model: it holds
    nothing worth keeping (only what clearformer wrote at its start), so `train` starts it again."""
    run_dir = Path(run_dir)
    return (lock.is_clearformer_run(run_dir) and not state.step_checkpoints(run_dir)
            and not any((run_dir / name).exists() for name in ("model.safetensors", "train_state.json")))


def no_checkpoint(run_dir: Path, command: str = "train") -> UserError:
    """`--resume` of a folder without a step checkpoint: what to do instead (tests/hostile runs the advice)."""
    run_dir = Path(run_dir)
    if run_dir.is_dir() and never_checkpointed(run_dir):
        return UserError(f"{run_dir} was stopped before its first checkpoint: nothing to resume; start it again "
                         f"with `clearformer {command} --out {run_dir}` (and the options you gave it)")
    if not (run_dir / "model.safetensors").exists():
        return UserError(f"{run_dir / 'checkpoints'}: no checkpoint to resume from; start a run there with "
                         f"`clearformer {command} --out {run_dir}`")
    return UserError(f"{run_dir / 'checkpoints'}: no checkpoint to resume from (the run has a model but no step "
                     f"checkpoint); replace it with `clearformer {command} --out {run_dir} --overwrite`")


def claim(run_dir: Path, resume: bool, overwrite: bool, command: str = "train") -> None:
    """Make `run_dir` this run's folder: refuse to mix two runs, clear it on --overwrite, sweep temporaries.
    A run stopped before its first checkpoint is started again (`never_checkpointed`)."""
    run_dir = Path(run_dir)
    if resume and overwrite:
        raise UserError("--resume and --overwrite exclude each other: continue the run or replace it")
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--out {run_dir}: a file, not a folder")
    if resume and os.path.lexists(run_dir / CONFIG_FILE):
        read_config(run_dir)  # the run's own config.json (format, fields): one line before anything is written
    existed = run_dir.exists()
    lock.acquire(run_dir)
    if existed and not lock.is_empty(run_dir) and not lock.is_clearformer_run(run_dir):
        check_fixed(run_dir / lock.MARKER_FILE)  # a link, FIFO or folder at the marker's name: said as such
        shown = ", ".join(lock.foreign_entries(run_dir)[:5]) or "files"
        raise UserError(f"--out {run_dir}: holds files that are not a clearformer run's ({shown}); "
                        "choose a new or empty folder")
    if not resume and holds_run(run_dir):
        if not overwrite and never_checkpointed(run_dir):
            print(f"clearformer {command}: {run_dir} was stopped before its first checkpoint: starting it again",
                  flush=True)
        elif not overwrite and state.step_checkpoints(run_dir):
            raise UserError(f"--out {run_dir} already holds a run: continue it with `clearformer {command} --out "
                            f"{run_dir} --resume`, or replace it with --overwrite (or choose another --out)")
        elif not overwrite:
            raise UserError(f"--out {run_dir} already holds a model but no checkpoint to resume from: replace it "
                            f"with `clearformer {command} --out {run_dir} --overwrite` (or choose another --out)")
        lock.remove_run(run_dir)
    lock.write_marker(run_dir, "training")
    remove_stale_temporaries(run_dir)


def process_alive(pid: int) -> bool:
    if pid == os.getpid():  # this process has written nothing yet: a temporary with its PID is a dead one's
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # exists but is not ours (or cannot be asked): leave its files alone
    return True


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete temporaries of dead processes in run_dir, run_dir/checkpoints and its step folders."""
    run_dir = Path(run_dir)
    checkpoints = run_dir / "checkpoints"
    folders = [run_dir, checkpoints]
    if checkpoints.is_dir():
        folders += [p for p in checkpoints.iterdir() if p.is_dir() and not p.name.startswith(".")]
    removed = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if _stale(path, folder == checkpoints):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def _stale(path: Path, in_checkpoints: bool) -> bool:
    name = path.name
    if in_checkpoints and (match := STEP_TEMPORARY.match(name)):
        return path.is_dir() and not process_alive(int(match.group(1)))
    if path.is_dir():
        return False
    if match := ATOMIC_TEMPORARY.match(name):
        return not process_alive(int(match.group(1)))
    return False
