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

The child sends JSON lines through a pipe (`ready`, `stage`, `case`, `result`, `done`: learn/child.py), each
with a token of this run (read from the job file, which the child deletes before the learner's code runs); the
parent reads at most MAX_EVENTS_BYTES (stopping the child past it) and keeps only lines with the token
(`EventReader`). The child only runs the learner's code and sends what it returned: the verdict is the parent's
(learn/verdict.py, learn/check.py), so the token is defence in depth, not what a pass rests on (code in the child
can find it in its own memory). Where `unshare` works the child is PID 1 of its own PID namespace
(`pid_namespace_prefix`); in any case a watchdog process of its own session ends the child's tree and removes the
temporary folder if the checker itself is killed or stopped (`start_watchdog`). A child that dies, is killed or
exits early leaves the last stage it reached, which is how the parent names what the learner's code was doing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
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
        # utf-8-sig: a BOM (as some Windows editors save) is read as Python reads it, not as a character
        return data.decode("utf-8-sig")
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
    damaged: bool = False            # the pipe held a line that is not the child's JSON (no token, not JSON)
    oversized: bool = False          # the child sent more than the parent reads (it was stopped there)
    limit: int = MAX_EVENTS_BYTES    # the bytes of events the parent reads

    def last(self, kind: str) -> dict | None:
        found = [e for e in self.events if e.get("event") == kind]
        return found[-1] if found else None

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


def pid_namespace_prefix() -> list[str]:
    """`unshare --pid --fork --kill-child --mount-proc` where it works (root, or user namespaces allowed): the
    child is then PID 1 of a namespace of its own, so the kernel kills everything the learner's code started
    when it ends (a setsid'd orphan included), and the learner's code cannot address the checker (its parent
    has no PID there) to kill or stop it. [] where it does not work (then the group kill, the subreaper and
    the watchdog remain). Probed once per process."""
    global _NAMESPACE
    if _NAMESPACE is None:
        command = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
        try:
            works = subprocess.run([*command, "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            works = False
        _NAMESPACE = command if works else []
    return _NAMESPACE


_NAMESPACE: list[str] | None = None


def start_watchdog(pid: int, seconds: float, folder: str) -> tuple[subprocess.Popen, int]:
    """A process of its own (its own session, not below the child) that kills the child's group and what is
    below it, and removes the checker's temporary folder, after `seconds` or as soon as the checker ends
    without saying it is done (killed or stopped by the learner's code: the write end of its pipe closes, or
    the time runs out). Returns (the watchdog, the write end to close when done)."""
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    watchdog = subprocess.Popen([sys.executable, "-m", "clearformer.learn.processes", str(pid), str(seconds),
                                 folder, str(read_end)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, pass_fds=(read_end,), start_new_session=True)
    os.close(read_end)
    return watchdog, write_end


def run_child(job: dict, timeout: float, quiet: bool = True, limit: int = MAX_EVENTS_BYTES) -> ChildRun:
    """Run `job` (a JSON object for learn/child.py) in a child process under the limits above; `limit`: the bytes
    of events read (MAX_EVENTS_BYTES; the capstone's module outputs need more, learn/capstone_judge.py)."""
    folder = tempfile.mkdtemp(prefix="clearformer-learn-")
    try:
        return run_in(folder, job, timeout, quiet, limit)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_in(folder: str, job: dict, timeout: float, quiet: bool, limit: int = MAX_EVENTS_BYTES) -> ChildRun:
    """`run_child` with its temporary folder: the job file there, the events through a pipe (not a file the
    learner's code could open by its name), each line carrying a token the child reads once from the job
    file, which it deletes before the learner's code runs."""
    job_path = Path(folder) / "job.json"
    token = secrets.token_hex(16)
    events_read, events_write = os.pipe()
    job = {**job, "events_fd": events_write, "token": token, "memory": LEARNER_MEMORY_BYTES, "timeout": timeout}
    job_path.write_text(json.dumps(job), encoding="utf-8")
    output = subprocess.DEVNULL if quiet else None
    try:
        process = subprocess.Popen([*pid_namespace_prefix(), sys.executable, "-m", "clearformer.learn.child",
                                    str(job_path)], stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                                   start_new_session=True, pass_fds=(events_write,),
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        os.close(events_write)
    watchdog, alive = start_watchdog(process.pid, STARTUP_SECONDS + timeout + 30, folder)
    reader = EventReader(events_read, token, limit)
    run = ChildRun(limit=limit)
    started, ready_at = time.monotonic(), None
    try:
        while not _exited(process.pid):
            now = time.monotonic()
            reader.pump(run)
            if run.oversized:   # nothing past the limit is read: the rest of the run could not be judged
                break
            if ready_at is None:
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
        os.write(alive, b"done")  # the watchdog ends without killing anything
        os.close(alive)
        watchdog.wait()
    run.returncode = process.returncode
    reader.pump(run, final=True)
    os.close(events_read)
    return run


class EventReader:
    """The child's event lines from the pipe, at most `limit` bytes (past it the run is `oversized` and the parent
    stops it). A line that is not a JSON object, or lacks the run's token, marks the run damaged and is not kept.
    Lines are parsed once each, as they complete; a JSON nesting too deep to parse is a damaged line too."""

    def __init__(self, handle: int, token: str, limit: int = MAX_EVENTS_BYTES) -> None:
        self.handle, self.token, self.limit = handle, token, limit
        self.read, self.partial = 0, b""
        os.set_blocking(handle, False)

    def pump(self, run: ChildRun, final: bool = False) -> None:
        while not run.oversized:
            try:
                chunk = os.read(self.handle, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.read += len(chunk)
            if self.read > self.limit:
                run.oversized = True
                chunk = chunk[: len(chunk) - (self.read - self.limit)]
            *lines, self.partial = (self.partial + chunk).split(b"\n")
            for line in lines:
                self.keep(line, run)
        if final and not run.oversized and self.partial.strip():
            self.keep(self.partial, run)
            self.partial = b""

    def keep(self, line: bytes, run: ChildRun) -> None:
        if not line.strip():
            return
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past Python's stack
            run.damaged = True
            return
        if isinstance(event, dict) and event.pop("token", None) == self.token and isinstance(event.get("event"), str):
            run.events.append(event)
        else:
            run.damaged = True
