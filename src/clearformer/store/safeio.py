"""Reading what a user hands in: every file or stream bounded while it is read, every JSON document bounded in depth.

`stat()` says 0 bytes for a device (/dev/zero), a FIFO or stdin, so a size checked before reading bounds
nothing there; these readers count the bytes as they arrive and stop one byte past the limit. Every
problem is a one-line `UserError` naming the file: missing, a folder, unreadable, too large, not UTF-8,
not JSON, nested too deeply. The limits are in clearformer.limits.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from clearformer.errors import UserError
from clearformer.limits import MAX_JSON_DEPTH, MAX_JSON_FILE_BYTES

CHUNK_BYTES = 1024 * 1024


def megabytes(size: int) -> str:
    return f"{size / 1024 / 1024:g} MiB" if size >= 1024 * 1024 else f"{size:,} bytes"


def read_stream(stream: BinaryIO, limit: int, name: str) -> bytes:
    """At most `limit` bytes of a binary stream, read in chunks; a UserError naming `name` if there are more."""
    chunks, total = [], 0
    while True:
        try:
            chunk = stream.read(min(CHUNK_BYTES, limit + 1 - total))
        except OSError as error:
            raise UserError(f"{name}: unreadable ({error.strerror or error})") from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise UserError(f"{name}: larger than {megabytes(limit)}, the most clearformer reads here "
                            f"(clearformer.limits)")


def read_bytes(path: str | Path, limit: int, missing: str = "no such file") -> bytes:
    """The bytes of the file at `path` (a regular file, device, FIFO, or a link to one), at most `limit`."""
    with opened(path, missing) as stream:
        return read_stream(stream, limit, str(path))


@contextmanager
def opened(path: str | Path, missing: str = "no such file") -> Iterator[BinaryIO]:
    """The file at `path` as an unbuffered binary stream, for a reader that reads it in bounded parts (read it
    with `read_stream`); one-line errors for a missing, folder or unreadable path."""
    path = Path(path)
    try:
        # A FIFO waits for its writer here, as `cat` would (Ctrl-C ends the wait with one line).
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{path}: {missing}") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a file") from None
    except OSError as error:
        raise UserError(f"{path}: unreadable ({error.strerror or error})") from None
    try:
        if stat.S_ISDIR(os.fstat(handle).st_mode):
            raise UserError(f"{path}: is a directory, not a file")
        with os.fdopen(handle, "rb", buffering=0, closefd=False) as stream:
            yield stream
    finally:
        os.close(handle)


def decode_utf8(data: bytes, name: str) -> str:
    """UTF-8 bytes as text; bytes that are not UTF-8 are a UserError naming `name` and the line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UserError(f"{name}:{line}: not UTF-8 text") from None


def read_text(path: str | Path, limit: int, missing: str = "no such file") -> str:
    """The UTF-8 text of the file at `path`, at most `limit` bytes."""
    return decode_utf8(read_bytes(path, limit, missing), str(path))


def loads_json(text: str | bytes, name: str, max_depth: int = MAX_JSON_DEPTH):
    """The JSON value in `text`; a UserError naming `name` if it is not JSON or nests deeper than `max_depth`."""
    if isinstance(text, bytes):
        text = decode_utf8(text, name)
    deepest = nesting_depth(text)
    if deepest > max_depth:
        raise UserError(f"{name}: damaged (JSON nested {deepest} deep; clearformer reads at most {max_depth})")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{name}: damaged (not valid JSON: {error.msg}, line {error.lineno})") from None
    except (ValueError, RecursionError) as error:  # e.g. an integer of more than 4,300 digits
        raise UserError(f"{name}: damaged (unusable JSON: {str(error).splitlines()[0][:120]})") from None


def nesting_depth(text: str) -> int:
    """The deepest nesting of [ and { in a JSON text, outside its strings (without parsing it)."""
    depth = deepest = 0
    for token in STRUCTURE.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


# A whole string (skipped: brackets inside it do not nest) or one bracket; linear in the text.
STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def read_json(path: str | Path, limit: int = MAX_JSON_FILE_BYTES, missing: str = "no such file"):
    """The JSON value in the file at `path`: bounded in bytes and depth, one-line errors naming the file."""
    return loads_json(read_bytes(path, limit, missing), str(path))


def read_json_object(path: str | Path, missing: str = "no such file", *, limit: int = MAX_JSON_FILE_BYTES) -> dict:
    """The JSON object in the file at `path` (bounded, as `read_json`); "`path`: <missing>" if absent, and a
    one-line error naming the file for anything that is not a JSON object. The one function of the name."""
    data = read_json(path, limit, missing)
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a JSON object")
    return data
