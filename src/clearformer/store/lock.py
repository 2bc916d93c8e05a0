"""Run folders are owned: one writer at a time, proved to be clearformer's before anything in them is removed.

    RUN/.clearformer-lock   an exclusive flock held while a command writes RUN (train, lm train, --resume,
                            --overwrite, import marian, lm import gpt2, average, export); it holds the
                            writer's PID and command line, which a second writer's one-line error names.
                            The kernel drops the lock when its process ends, also on SIGKILL.
    RUN/.clearformer-run    the marker: every run folder clearformer creates gets it first. `--overwrite`
                            removes a folder's run files only when the marker is there: never a folder
                            that is not a run.

Folders that can never be a run (`/`, the home folder itself, system folders) are refused as an output.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import sys
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.fixed import check_fixed, open_fixed, write_fixed

LOCK_FILE = ".clearformer-lock"
MARKER_FILE = ".clearformer-run"
# Every name a run folder may hold: what training (translation or LM), import, average and evaluate write.
RUN_ENTRIES = frozenset({
    "checkpoints", "model.safetensors", "config.json", "meta.json", "tokenizer.json", "tokenizer.model",
    "metrics.csv", "curve.png", "summary.json", "train_state.json", "train_state.safetensors",
    "source.spm", "target.spm", "vocab.json", "merges.txt", "averaged", LOCK_FILE, MARKER_FILE,
    "shortlist.bin", "MODEL_LICENSE.txt", "provenance.json", "engine_tokenizer.json",  # import firefox / marian-bin
    "confidence.json"})  # clearformer confidence fit (quality/estimator.py)
# Also `hypotheses.<split>.txt` from evaluate, and atomic temporaries (train/rundir.py).
SYSTEM_FOLDERS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin",
                  "/sys", "/usr", "/var", "/tmp", "/home", "/opt", "/srv", "/mnt", "/media")

_held: dict[str, int] = {}  # resolved folder -> the open lock file's descriptor (this process's locks)


def holder_text() -> str:
    return f"PID {os.getpid()}: clearformer {' '.join(sys.argv[1:])}"[:300]


def refuse_system_folder(folder: Path, option: str = "--out", kind: str = "a run folder",
                         example: str = "runs/NAME") -> None:
    """A UserError for an output that is `/`, the home folder itself or a system folder."""
    resolved = Path(os.path.realpath(folder))
    home = Path(os.path.realpath(os.path.expanduser("~")))
    if str(resolved) in SYSTEM_FOLDERS or resolved == home:
        raise UserError(f"{option} {folder}: {resolved} is a system or home folder, not {kind}; "
                        f"name a new folder (e.g. {example})")


def acquire(folder: str | Path, option: str = "--out") -> None:
    """Take `folder`'s lock (creating the folder), or a UserError naming the process that holds it.

    Re-entrant within a process (a command that claims its folder twice holds it once)."""
    folder = Path(folder)
    refuse_system_folder(folder, option)
    key = os.path.realpath(folder)
    if key in _held:
        return
    refuse_foreign(folder, option)  # before the lock file is made: a user's folder is left as it was
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # never through a link, never a FIFO, never a file with another name elsewhere (store/fixed.py)
        handle = open_fixed(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644, single_link=True)
    except FileExistsError:
        raise UserError(f"{option} {folder}: a file, not a folder") from None
    except OSError as error:
        raise UserError(f"{option} {folder}: cannot write there ({error.strerror or error})") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(handle, 400, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(handle)
        raise UserError(f"{folder} is in use by {holder}; wait for it to finish "
                        f"(or choose another {option})") from None
    os.ftruncate(handle, 0)
    os.pwrite(handle, (holder_text() + "\n").encode("utf-8", "replace"), 0)
    _held[key] = handle


def refuse_foreign(folder: Path, option: str = "--out") -> None:
    """A UserError for a folder holding entries no clearformer run writes (a user's files, a Hugging Face
    model): clearformer never writes into one, with or without --overwrite."""
    if folder.is_dir() and not (folder / LOCK_FILE).exists() and not is_empty(folder) \
            and not is_clearformer_run(folder):
        check_fixed(folder / MARKER_FILE)  # a link, FIFO or folder at the marker's name: said as such
        shown = ", ".join(foreign_entries(folder)[:5]) or "files"
        raise UserError(f"{option} {folder}: holds files that are not a clearformer run's ({shown}); "
                        f"choose a new or empty folder")


def holds(folder: str | Path) -> bool:
    """Whether this process holds `folder`'s lock."""
    return os.path.realpath(folder) in _held


def release(folder: str | Path) -> None:
    handle = _held.pop(os.path.realpath(folder), None)
    if handle is not None:
        os.close(handle)  # closing the last descriptor drops the flock


def release_all() -> None:
    for key in list(_held):
        release(key)


def write_marker(folder: Path, kind: str) -> None:
    """Mark `folder` as a clearformer run (what --overwrite later checks)."""
    marker = Path(folder) / MARKER_FILE
    check_fixed(marker)
    if not marker.exists():
        write_fixed(marker, json.dumps({"clearformer": "run", "kind": kind}) + "\n")


def is_run_entry(name: str) -> bool:
    return name in RUN_ENTRIES or (name.startswith("hypotheses.") and name.endswith(".txt")) or name.startswith(".")


def foreign_entries(folder: Path) -> list[str]:
    """The entries of `folder` that no clearformer run writes (hidden names are left to the sweep)."""
    try:
        return sorted(entry.name for entry in Path(folder).iterdir() if not is_run_entry(entry.name))
    except OSError:
        return []


def is_clearformer_run(folder: Path) -> bool:
    """Whether `folder` is a run clearformer wrote: its marker, a regular file (a link or a FIFO at its name
    proves nothing). Every folder clearformer writes a run into gets the marker first."""
    return stat.S_ISREG(_lstat_mode(Path(folder) / MARKER_FILE))


def _lstat_mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def is_empty(folder: Path) -> bool:
    """No entries but (maybe) a lock file."""
    try:
        return all(entry.name == LOCK_FILE for entry in Path(folder).iterdir())
    except OSError:
        return True


def remove_run(folder: Path) -> None:
    """Delete what a run wrote in `folder` (the caller has proved it a run): never the lock, never other files."""
    for name in sorted(RUN_ENTRIES - {LOCK_FILE, MARKER_FILE}):
        path = Path(folder) / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def claim_output(folder: str | Path, overwrite: bool, kind: str, option: str = "--out") -> Path:
    """Own `folder` for a command that writes a whole run (import, lm import, average): locked, new or
    empty, or (with --overwrite) a clearformer run whose files are removed first. Marked as a run."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{option} {folder}: a file, not a folder")
    existed = folder.exists()
    acquire(folder, option)
    if existed and not is_empty(folder):
        if not is_clearformer_run(folder):
            check_fixed(folder / MARKER_FILE)
            shown = ", ".join(foreign_entries(folder)[:5]) or "files"
            raise UserError(f"{option} {folder}: holds files that are not a clearformer run's ({shown}); "
                            f"choose a new or empty folder")
        if not overwrite:
            raise UserError(f"{option} {folder} already holds a run: add --overwrite to replace it, "
                            f"or choose another {option}")
        remove_run(folder)
    write_marker(folder, kind)
    return folder


@contextlib.contextmanager
def owned_output(folder: str | Path, overwrite: bool, kind: str, option: str = "--out"):
    """claim_output(...) for the duration of a `with` block; a folder this call created is removed again
    if the block fails (a failed import leaves nothing behind), and the lock is released at the end."""
    folder = Path(folder)
    created = not folder.exists()
    claim_output(folder, overwrite, kind, option)
    try:
        yield folder
    except BaseException:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        release(folder)
