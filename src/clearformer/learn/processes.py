"""The processes a learner's code starts, found and ended: the checker's child adopts every orphan of
its tree (`adopt_orphans`), and both it and the checker kill whatever is below it (`kill_descendants`),
in its process group or not (learn/child.py, learn/sandbox.py)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def adopt_orphans() -> None:
    """Make this process the subreaper of whatever the learner's code starts: a process that leaves the
    process group (setsid) and outlives its parent is re-parented here, not to init, so that the end of
    this process, or the checker's kill, still finds it (`kill_descendants`). Linux only; elsewhere
    the checker's process-group kill is what remains."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, ...), read from /proc; [] without /proc."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if entry.name.isdigit():
            try:
                with open(os.path.join(entry.path, "stat"), encoding="ascii", errors="replace") as handle:
                    parents[int(entry.name)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # ended while we read
    found, frontier = [], {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - set(found)
        found.extend(frontier)
    return found


def kill_descendants(pid: int) -> None:
    """SIGKILL every process below `pid`, again until none is left (one may fork while we kill)."""
    for _ in range(5):
        below = descendants(pid)
        if not below:
            return
        for child in below:
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def watchdog(pid: int, seconds: float, folder: str, alive: int) -> None:
    """`python -m clearformer.learn.processes PID SECONDS FOLDER FD` (learn/sandbox.py's start_watchdog): wait
    until the checker writes "done" on FD (then nothing to do), or FD closes without it (the checker was
    killed), or SECONDS pass (the checker was stopped, or hangs); then SIGKILL the child's group and what is
    below it, and remove the checker's temporary FOLDER. Needs nothing of the checker's life."""
    deadline = time.monotonic() + seconds
    said = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([alive], [], [], max(0.0, min(1.0, deadline - time.monotonic())))
        if ready:
            chunk = os.read(alive, 16)
            said += chunk
            if said.startswith(b"done"):
                return
            if not chunk:
                break
    kill_descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    watchdog(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
