"""The one way a command writes a file the user named (`--output`/`-o`, `--html`, a claim's `--out` files).

`check_output(path, option)` runs before any work and says what the path is; `write_output(target, data)`
writes it. What stands at the path decides how (docs/reliability.md, "Output files"):

    nothing                  a new file, written atomically (store/atomic.py) in a folder that must exist
    a regular file           replaced atomically, if the caller allows replacing and the file is the
                             user's own (same owner, one hard link): a rename never changes another name
    /dev/stdout, /dev/fd/N   the process's own descriptor N, written as a stream (never reopened: a reopen
                             of a redirected stdout would truncate what the shell already wrote)
    a character device       opened for writing without creating or truncating, written as a stream
                             (/dev/null, a terminal): a rename over it would turn the device into a file
    a symbolic link          refused: writing through it changes a file the user did not name, replacing
                             it loses the link (a link to a character device is written as that device)
    a folder, a FIFO, a      refused: a FIFO would wait for a reader forever; the others cannot be a file
    socket, a block device
    a missing folder, a      refused before any work, in one line naming the path
    read-only place

Every refusal and every failure is one `UserError` line naming the option and the path.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write

# The names by which a process reaches its own open descriptors (Linux; /dev/fd on the BSDs and macOS).
DESCRIPTOR_NAME = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/thread-self/fd)/(\d+)$")
STANDARD_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}


@dataclass(frozen=True)
class OutputTarget:
    """Where a command's output goes, decided before any work: a `descriptor` (a stream of this process),
    a `device` path (a character device written as a stream), or `path` written atomically."""

    path: Path
    option: str
    overwrite: bool
    descriptor: int | None = None
    device: bool = False

    @property
    def is_stream(self) -> bool:
        return self.descriptor is not None or self.device


def refuse(option: str, path: Path, why: str) -> UserError:
    return UserError(f"{option} {path}: {why}")


def check_output(path: str | Path, option: str = "--output", overwrite: bool = True,
                 exists_hint: str = "pass --overwrite to replace it, or choose another file") -> OutputTarget:
    """What `path` is and how it will be written; a one-line UserError for anything that cannot be written
    safely (see the module docstring). overwrite=False refuses an existing regular file with `exists_hint`."""
    path = Path(path)
    descriptor = stream_descriptor(path)
    if descriptor is not None:
        try:
            os.fstat(descriptor)
        except OSError:
            raise refuse(option, path, f"descriptor {descriptor} is not open in this process") from None
        return OutputTarget(path, option, overwrite, descriptor=descriptor)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        check_folder(path, option)
        return OutputTarget(path, option, overwrite)
    except NotADirectoryError:
        raise refuse(option, path, f"{first_file_parent(path)} is a file, not a folder") from None
    except OSError as error:
        raise refuse(option, path, f"cannot be checked ({error.strerror or error})") from None
    mode = status.st_mode
    if stat.S_ISLNK(mode):
        try:
            if stat.S_ISCHR(os.stat(path).st_mode):
                return device_target(path, option, overwrite)
        except OSError:
            pass
        raise refuse(option, path, f"is a symbolic link (to {os.readlink(path)}); clearformer neither writes "
                                   f"through a link nor replaces it: name the file itself")
    if stat.S_ISCHR(mode):
        return device_target(path, option, overwrite)
    if stat.S_ISDIR(mode):
        raise refuse(option, path, "is a folder; give a file name")
    if stat.S_ISFIFO(mode):
        raise refuse(option, path, "is a FIFO; writing would wait for a reader: give a file name")
    if not stat.S_ISREG(mode):
        raise refuse(option, path, f"is {'a socket' if stat.S_ISSOCK(mode) else 'a device'}, not a file")
    check_replaceable(path, option, status, overwrite, exists_hint)
    return OutputTarget(path, option, overwrite)


def stream_descriptor(path: Path) -> int | None:
    """N for /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N; None for any other name."""
    name = os.path.normpath(str(path))
    if name in STANDARD_NAMES:
        return STANDARD_NAMES[name]
    match = DESCRIPTOR_NAME.match(name)
    return int(match.group(1)) if match else None


def device_target(path: Path, option: str, overwrite: bool) -> OutputTarget:
    """A character device, checked writable now (O_NONBLOCK: a terminal or a modem line never waits here)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)))
    except OSError as error:
        raise refuse(option, path, f"a device that cannot be written ({error.strerror or error})") from None
    return OutputTarget(path, option, overwrite, device=True)


def first_file_parent(path: Path) -> Path:
    """The first of `path`'s parents that exists and is not a folder (what stops a path under a file)."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return path.parent


def check_folder(path: Path, option: str) -> None:
    """The folder of a new file exists and takes a new file (tried: a read-only mount, a folder without write
    permission and /sys all say no here, also for root, where permission bits alone would say yes)."""
    folder = path.parent
    if not folder.exists():
        file_parent = first_file_parent(path)
        if file_parent.exists() and not file_parent.is_dir():
            raise refuse(option, path, f"{file_parent} is a file, not a folder")
        raise refuse(option, path, f"the folder {folder} does not exist (clearformer does not create it)")
    if not folder.is_dir():
        raise refuse(option, path, f"{folder} is a file, not a folder")
    try:
        handle, probe = tempfile.mkstemp(prefix=f".{path.name}.probe-", dir=folder)
    except OSError as error:
        raise refuse(option, path, f"cannot write in {folder} ({error.strerror or error})") from None
    os.close(handle)
    os.unlink(probe)


def check_replaceable(path: Path, option: str, status: os.stat_result, overwrite: bool, exists_hint: str) -> None:
    """An existing regular file may be replaced when allowed, when it is the user's own and has no other name."""
    if not overwrite:
        raise UserError(f"{path} exists: {exists_hint}")
    if status.st_uid != os.geteuid():
        raise refuse(option, path, f"belongs to another user (uid {status.st_uid}); clearformer replaces only "
                                   f"files of its own user")
    if status.st_nlink > 1:
        raise refuse(option, path, f"has {status.st_nlink} hard links; replacing it would part them: "
                                   f"give another file name")
    check_folder(path, option)


def write_output(target: OutputTarget, data: str | bytes) -> None:
    """Write `data` where `target` says: a stream, or an atomic replace of a regular file (checked again now:
    what stands there may have changed while the command worked)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if target.descriptor is not None:
        sys.stdout.flush()  # what the command printed before comes first
        sys.stderr.flush()
        write_stream(target, target.descriptor, payload)
        return
    if target.device:
        try:
            handle = os.open(target.path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as error:
            raise refuse(target.option, target.path, f"cannot be written ({error.strerror or error})") from None
        try:
            write_stream(target, handle, payload)
        finally:
            os.close(handle)
        return
    again = check_output(target.path, target.option, target.overwrite)
    if again.is_stream:  # a device appeared at the name since the check: written as one, never replaced
        write_output(again, payload)
        return
    try:
        atomic_write(target.path, lambda temporary: Path(temporary).write_bytes(payload),
                     overwrite=target.overwrite)
    except FileExistsError:
        raise UserError(f"{target.path} exists: pass --overwrite to replace it, or choose another file") from None
    except OSError as error:
        raise refuse(target.option, target.path, f"cannot be written ({error.strerror or error})") from None


def write_stream(target: OutputTarget, handle: int, payload: bytes) -> None:
    """Every byte of `payload` to the open descriptor `handle`; a closed pipe or a full disk in one line."""
    view = memoryview(payload)
    try:
        while view:
            written = os.write(handle, view)
            view = view[written:]
    except OSError as error:
        if error.errno == errno.EPIPE:
            raise refuse(target.option, target.path, "the reader closed the stream") from None
        raise refuse(target.option, target.path, f"cannot be written ({error.strerror or error})") from None


class StandardOutput(io.TextIOBase):
    """A command's `sys.stdout` (cli.py puts it there): what the command writes goes to `stream`; a write or a
    flush the system refuses (a full disk, `> /dev/full`, a quota, an I/O error) is one UserError line naming
    standard output, exit 1, and the descriptor is pointed at /dev/null, so that the interpreter's own flush at
    exit does not fail again. A closed pipe (`| head`) stays a BrokenPipeError: cli.py says nothing of it."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        return self._guarded(self.stream.write, text)

    def flush(self) -> None:
        self._guarded(self.stream.flush)

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return self.stream.encoding

    @property
    def errors(self) -> str | None:
        return self.stream.errors

    @property
    def buffer(self):
        return self.stream.buffer

    def _guarded(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as error:
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
            except (OSError, ValueError, io.UnsupportedOperation):  # a stream without a descriptor (a test's)
                pass
            raise UserError(f"standard output: cannot be written ({error.strerror or error})", exit_code=1) from None
