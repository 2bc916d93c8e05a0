"""Files at fixed names inside a folder: opened, never followed.

clearformer creates or rewrites some files at names it chooses itself inside a folder: a run's
`.clearformer-lock` and `.clearformer-run`, `runs/LATEST`, the CTranslate2 export's files and its
manifest, the cache's `matmul_peak.json`, the notebooks of `learn --notebooks DIR`. Whatever stands at
such a name must be a regular file clearformer may replace, or nothing: a symbolic link is never
followed (writing through it would change the file it points to), a FIFO is never waited on (opening
it would hang), a folder or a device is never replaced. Anything else is a one-line `UserError` naming
the path and what stands there.

    check_fixed(path)            absent or a regular file, else UserError (before an atomic replace)
    open_fixed(path, flags)      os.open without following a link or waiting on a FIFO, then fstat:
                                 a regular file's descriptor, else UserError
    read_fixed(path, limit)      the bytes of such a file, at most `limit` (None when it is absent)
    write_fixed(path, data)      check_fixed, then an atomic replace (a rename never follows a link)
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.safeio import megabytes

KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def what_stands(mode: int) -> str:
    """'a symbolic link', 'a folder', 'a FIFO', ... for an lstat mode that is not a regular file."""
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def refusal(path: Path, what: str) -> UserError:
    return UserError(f"{path}: {what} stands where clearformer keeps its own file; clearformer never writes "
                     f"through it: move it away")


def check_fixed(path: str | Path) -> None:
    """Nothing, or a regular file, at `path` (not followed); else a UserError naming it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise UserError(f"{path}: a file stands where its folder should be") from None
    except OSError as error:
        raise UserError(f"{path}: cannot be checked ({error.strerror or error})") from None
    if not stat.S_ISREG(mode):
        raise refusal(Path(path), what_stands(mode))


def open_fixed(path: str | Path, flags: int, mode: int = 0o644, single_link: bool = False) -> int:
    """os.open(`path`, `flags`) that never follows a symbolic link and never waits on a FIFO; the
    descriptor of a regular file (`single_link`: one with no other hard link, for a file rewritten in
    place), else a UserError naming `path`. FileNotFoundError passes through (absent is allowed)."""
    path = Path(path)
    try:
        handle = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EWOULDBLOCK):
            try:  # what stands there, for the message
                raise refusal(path, what_stands(os.lstat(path).st_mode)) from None
            except OSError:
                pass
        if error.errno == errno.ENOTDIR:
            raise UserError(f"{path}: a file stands where its folder should be") from None
        raise UserError(f"{path}: cannot be opened ({error.strerror or error})") from None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode):
            raise refusal(path, what_stands(status.st_mode))
        if single_link and status.st_nlink > 1:
            raise refusal(path, f"a file with {status.st_nlink} hard links")
        os.set_blocking(handle, True)
    except BaseException:
        os.close(handle)
        raise
    return handle


def read_fixed(path: str | Path, limit: int) -> bytes | None:
    """The bytes of the regular file at `path` (never through a link or from a FIFO), at most `limit`;
    None when nothing is there."""
    try:
        handle = open_fixed(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        data = os.read(handle, limit + 1)
        while len(data) <= limit:
            more = os.read(handle, limit + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as error:
        raise UserError(f"{path}: unreadable ({error.strerror or error})") from None
    finally:
        os.close(handle)
    if len(data) > limit:
        raise UserError(f"{path}: larger than {megabytes(limit)}, the most clearformer reads here")
    return data


def write_fixed(path: str | Path, data: str | bytes) -> None:
    """Replace the file at `path` atomically (store/atomic.py: a rename, which never follows a link) after
    checking that what stands there is a regular file or nothing; every failure is a UserError naming it."""
    path = Path(path)
    check_fixed(path)
    try:
        if isinstance(data, str):
            atomic_write_text(path, data)
        else:
            atomic_write_bytes(path, data)
    except OSError as error:
        if isinstance(error, (NotADirectoryError, FileExistsError)) and not path.parent.is_dir():
            raise UserError(f"{path}: a file stands where its folder should be") from None
        raise UserError(f"{path}: cannot be written ({error.strerror or error})") from None
