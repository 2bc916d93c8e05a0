"""The results of `clearformer claims` runs, for the live page: each claim's figure and JSON, if it was run.

`clearformer claims N [--quick]` writes claimN-<name>[-quick].json and .png into a folder (default
./claims). The server reads the files it finds there once, at start, under those fixed names only
(no other path is ever opened, none is taken from a request; only regular files, never a symbolic
link), and serves them at /claims/<name>.
The page then links them next to the claim's link under the step it belongs to. A claim's full
result is preferred to its quick one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from clearformer.claims.common import result_paths
from clearformer.claims.registry import CLAIMS

MAX_FILE_BYTES = 8 * 1024 * 1024  # a claim's figure is some 100 kB; anything much larger is not one
MEDIA_TYPES = {".png": "image/png", ".json": "application/json"}


def read_claim_results(directory: Path | None) -> tuple[dict[str, bytes], dict[str, dict[str, str]]]:
    """(files by name, index) for the claims' results in `directory`: the index maps a claim number
    ("2") to {"figure": "claims/<png>", "json": "claims/<json>"}, relative to the page."""
    files: dict[str, bytes] = {}
    index: dict[str, dict[str, str]] = {}
    if directory is None or not Path(directory).is_dir():
        return files, index
    for entry in CLAIMS:
        for quick in (False, True):
            paths = result_paths(Path(directory), entry.number, entry.slug, quick)
            contents = [_read(path) for path in paths]
            if str(entry.number) in index or any(content is None for content in contents):
                continue
            for path, content in zip(paths, contents, strict=True):
                files[path.name] = content
            index[str(entry.number)] = {"json": f"claims/{paths[0].name}", "figure": f"claims/{paths[1].name}"}
    return files, index


def _read(path: Path) -> bytes | None:
    """The bytes of a regular file of at most MAX_FILE_BYTES directly inside its folder, or None.

    A symbolic link is never followed (O_NOFOLLOW), so a link in the claims folder to /etc/passwd or
    to a device serves nothing; the size is counted while reading."""
    if path.name in ("", ".", "..") or path.is_symlink():
        return None
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
        return data if len(data) <= MAX_FILE_BYTES else None
    except OSError:
        return None
    finally:
        os.close(handle)
