"""The learner's code runs in a child process, never in clearformer's: `learn check` and `learn train`.

The parent (this module) reads nothing of the learner's file but its size and bytes (bounded: a NUL
byte or a file over MAX_SOURCE_BYTES is refused with its line before any child starts), then runs
`python -m clearformer.learn.child JOB` in a new session (its own process group) and waits:

  * a hard time limit: the learner's time starts when the child reports `ready` (torch imported, the
    cases built); past `timeout` seconds the whole process group is killed with SIGKILL (not asked:
    a loop that catches every exception, ignores signals or switches an alarm off ends all the same);
  * a memory limit: the child sets RLIMIT_AS to what it uses after importing torch plus
    LEARNER_MEMORY_BYTES before it loads the file, so an allocation fails inside the learner's code;
  * whatever the child leaves behind (a process it forked) is killed with its process group, before
    the child is reaped, so the group id cannot have been reused;
  * what the learner's code prints goes to /dev/null (`learn check`): the answer is one report,
    whatever the code prints.

The child writes JSON lines into an events file (`ready`, `stage`, `case`, then `done` with the result);
the parent reads at most MAX_EVENTS_BYTES of it. A child that dies, is killed or exits early leaves
the last stage it reached, which is how the parent names what the learner's code was doing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from clearformer.errors import UserError
from clearformer.learn.processes import kill_descendants
from clearformer.limits import MAX_LEARNER_SOURCE_BYTES
from clearformer.store.safeio import read_bytes

MAX_SOURCE_BYTES = MAX_LEARNER_SOURCE_BYTES   # a learner's file: a few hundred lines; 1 MiB is far above any
MAX_TIMEOUT_SECONDS = 3600.0            # `--timeout`: (0, one hour]
LEARNER_MEMORY_BYTES = 2 * 1024**3      # address space the learner's code may add to the child's
STARTUP_SECONDS = 300.0                 # importing torch and building the cases (a loaded laptop)
MAX_EVENTS_BYTES = 4 * 1024 * 1024
POLL_SECONDS = 0.02


def check_timeout(seconds: float) -> float:
    """`--timeout`: a finite number of seconds in (0, MAX_TIMEOUT_SECONDS]; a UserError otherwise."""
    if not (0 < seconds <= MAX_TIMEOUT_SECONDS):  # also false for NaN
        raise UserError(f"--timeout {seconds:g}: give a number of seconds above 0 and at most "
                        f"{MAX_TIMEOUT_SECONDS:g}")
    return seconds


def read_source(path: Path) -> str:
    """The learner's file as text: at most MAX_SOURCE_BYTES, UTF-8, no NUL byte (named by its line)."""
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if not path.is_file():
        raise UserError(f"{path}: not a file")
    data = read_bytes(path, MAX_SOURCE_BYTES)
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise UserError(f"{path}:{line}: a NUL byte: not Python source text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 text") from None


@dataclass
class ChildRun:
    """What came back from the child: its events, and how it ended."""

    events: list[dict] = field(default_factory=list)
    returncode: int | None = None
    timed_out: bool = False          # killed at the learner's time limit
    startup_timed_out: bool = False  # killed before it was ready (not the learner's time)
    damaged: bool = False            # the events file held something that is not the child's JSON

    def last(self, kind: str) -> dict | None:
        found = [e for e in self.events if e.get("event") == kind]
        return found[-1] if found else None

    @property
    def done(self) -> dict | None:
        return self.last("done")

    def ended(self) -> str:
        """How the process ended, in words (for a child that did not report)."""
        code = self.returncode
        if code is None:
            return "it was stopped"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the process was killed by {name}"
        return f"the process exited with code {code} before reporting (os._exit or a crash)"


def _read_events(path: Path, run: ChildRun) -> None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_EVENTS_BYTES + 1)
    except OSError:
        run.damaged = True
        return
    if len(data) > MAX_EVENTS_BYTES:
        run.damaged = True
        data = data[:MAX_EVENTS_BYTES]
    events = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            run.damaged = True
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            run.damaged = True
    run.events = events


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int) -> bool:
    """True once the child has exited (left as a zombie: not reaped, so its group id stays ours)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def run_child(job: dict, timeout: float, quiet: bool = True) -> ChildRun:
    """Run `job` (a JSON object for learn/child.py) in a child process under the limits above."""
    with tempfile.TemporaryDirectory(prefix="clearformer-learn-") as folder:
        job_path, events_path = Path(folder) / "job.json", Path(folder) / "events.jsonl"
        job = {**job, "events": str(events_path), "memory": LEARNER_MEMORY_BYTES, "timeout": timeout}
        job_path.write_text(json.dumps(job), encoding="utf-8")
        events_path.touch()
        output = subprocess.DEVNULL if quiet else None
        process = subprocess.Popen([sys.executable, "-m", "clearformer.learn.child", str(job_path)],
                                   stdin=subprocess.DEVNULL, stdout=output, stderr=output, start_new_session=True,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        run = ChildRun()
        started, ready_at = time.monotonic(), None
        try:
            while not _exited(process.pid):
                now = time.monotonic()
                if ready_at is None:
                    _read_events(events_path, run)
                    if run.last("ready"):
                        ready_at = now
                    elif now - started > STARTUP_SECONDS:
                        run.startup_timed_out = True
                        break
                elif now - ready_at > timeout:
                    run.timed_out = True
                    break
                time.sleep(POLL_SECONDS)
        finally:
            kill_descendants(process.pid)  # whatever it started, in its group or not (it adopts orphans)
            _kill_group(process.pid)   # the child, if still running, and anything it forked
            process.wait()
        run.returncode = process.returncode
        _read_events(events_path, run)
        return run
