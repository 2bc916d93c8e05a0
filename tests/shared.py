"""A folder the test session builds once, whatever the number of xdist workers (`built_once`).

pytest -n 2 runs two worker processes, and a session-scoped fixture runs once in EACH worker that needs it: a
model trained or imported by a fixture was built twice. `built_once` builds it once in the session's shared
temporary folder (the parent of the workers' own: pytest-N/shared, or the session's base folder with -n 0),
the first worker that asks holding a file lock while the other waits, and gives each worker its own copy, as
private as the folder the fixture built itself before (a test may write next to a run, a command may leave a
lock in it). A build that fails leaves no `.done` mark: the next worker that asks builds it again (and fails
by its own name). Everything stays under pytest's temporary folder, never in the checkout or the user's cache.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock  # torch's own dependency


def session_folder(tmp_path_factory) -> Path:
    """The folder every worker of this session shares (pytest-N): the parent of a worker's base folder."""
    base = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # also inherited by a pytest a test starts: hence the name
    return base.parent if worker and base.name.endswith(f"-{worker}") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object], into: Path | None = None) -> Path:
    """`into` (default: a new temporary folder of this worker's / NAME), a copy of session_folder/shared/NAME,
    which `build(folder)` made in the first worker that asked."""
    root = session_folder(tmp_path_factory) / "shared"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            build(folder)
            done.touch()
    into = into or tmp_path_factory.mktemp(name) / name
    shutil.copytree(folder, into, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".clearformer-lock"))
    return into
