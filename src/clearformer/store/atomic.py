"""Atomic file writes: a reader, or a run killed mid-write, sees the old file or the new one, never half.

Every file clearformer writes for a user (configs, weights, tokenizers, metrics, plots, pages) goes
through these functions: write a temporary file in the same directory, fsync it, then rename it over
the target (a rename within one directory is atomic on POSIX). A file that replaces another keeps its mode,
owner and group (as far as this user may give them).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

TEMPORARY_PREFIX = "."  # temporaries are hidden files: ".<name>.<pid>-<random>"


def atomic_write(path: str | Path, write: Callable[[str], None], overwrite: bool = True) -> None:
    """Call write(temporary_path) for a temporary file beside `path`, then rename it over `path`.

    overwrite=False: FileExistsError if `path` exists, also if it appeared while writing (the new file
    is published with a hard link, which never replaces a name)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The PID in the name lets the next run tell a killed writer's leftover from a live write (train/rundir.py).
    handle, temporary = tempfile.mkstemp(prefix=f"{TEMPORARY_PREFIX}{path.name}.{os.getpid()}-", dir=path.parent)
    os.close(handle)
    try:
        write(temporary)
        keep_mode_and_owner(temporary, path)
        with open(temporary, "rb") as stream:
            os.fsync(stream.fileno())
        if overwrite:
            _refuse_special(path)
            os.replace(temporary, path)
        else:
            _publish_new(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def keep_mode_and_owner(temporary: str, path: Path) -> None:
    """A file that replaces another keeps its permissions and, as far as this user may give them, its owner and
    group (a 0600 catalogue stays 0600 after `translate --po --in-place`); a new file gets the permissions the
    umask gives (mkstemp makes 0600)."""
    try:
        old = os.stat(path)
    except OSError:  # nothing there (or not ours to look at): a new file
        os.chmod(temporary, 0o666 & ~_umask())
        return
    if not stat.S_ISREG(old.st_mode):
        os.chmod(temporary, 0o666 & ~_umask())
        return
    try:  # the owner first: chown may clear the set-user-ID bit that chmod then puts back
        os.chown(temporary, old.st_uid, old.st_gid)
    except PermissionError:
        try:
            os.chown(temporary, -1, old.st_gid)  # a group this user is in; the owner stays this user
        except PermissionError:
            pass
    os.chmod(temporary, stat.S_IMODE(old.st_mode))


def _refuse_special(path: Path) -> None:
    """A rename replaces whatever has the name: a link, a device, a FIFO would become this file. Only a regular
    file (or nothing) is ever replaced (store/output.py writes a device as a stream instead)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise OSError(errno.EEXIST, "not a regular file; clearformer never replaces it", str(path))


def _publish_new(temporary: str, path: Path) -> None:
    """Give the finished `temporary` the name `path` only if no file has it (then drop the temporary name)."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise FileExistsError(f"{path} exists") from None
    except OSError:  # a file system without hard links: check, then rename
        if os.path.lexists(path):
            raise FileExistsError(f"{path} exists") from None
        os.replace(temporary, path)
        return
    os.unlink(temporary)


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str, overwrite: bool = True) -> None:
    atomic_write(path, lambda temporary: Path(temporary).write_text(text, encoding="utf-8"), overwrite)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    atomic_write(path, lambda temporary: Path(temporary).write_bytes(data))
