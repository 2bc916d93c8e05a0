"""The child process of `learn check` and `learn train`: `python -m clearformer.learn.child JOB`.

The only process that imports the learner's file. It runs the learner's code on the cases and sends back what the
code returned or raised, as plain data (learn/wire.py); it judges nothing: the checker that started it computes
the expected values itself and compares (learn/check.py, learn/capstone_judge.py), and reads every line from
here as untrusted (learn/verdict.py), since the learner's code runs in this process and can write any of them.

JOB is a JSON file written by `learn/sandbox.py`: {"kind": "check" | "transformer" | "train", the
learner's "path", "events_fd" and "token": the pipe this process reports into, "memory": the bytes the learner's code
may add to the address space}. The events are JSON lines written straight to the file's descriptor
(whatever the learner does to sys.stdout): "ready" (imports done, cases built, limits set: the
learner's time starts), "stage" ("import", then "cases"), "case" {index} (before each case: what ran, should it never
return), "result" {index, and "value" or "raised" or the capstone's fields} (after it), then "done" (empty; or
"unusable" with the one-line reason, "internal" for clearformer's own failure). The process ends with os._exit, so
nothing the learner registered (atexit, threads) runs after the report.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

from clearformer.errors import UserError
from clearformer.learn.processes import adopt_orphans, kill_descendants


class Events:
    """The pipe to the checker (an inherited descriptor, made close-on-exec here); every line carries the run's
    token, which the learner's code cannot read from the job file (deleted before it runs). The token keeps out
    lines written by any other process; code in this one can find it in memory, so the checker's verdict never
    rests on it (it judges the results, learn/verdict.py)."""

    def __init__(self, fd: int, token: str) -> None:
        self.fd, self.token = fd, token
        os.set_inheritable(fd, False)

    def __call__(self, event: str, **fields) -> None:
        line = memoryview((json.dumps({"event": event, **fields, "token": self.token}) + "\n").encode("utf-8"))
        while line:  # a result can be larger than the pipe's buffer: write until all of it is in
            line = line[os.write(self.fd, line):]


def limit_memory(extra: int) -> None:
    """RLIMIT_AS = the address space in use now (torch imported) + `extra` bytes."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            used = int(handle.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return
    limit = used + extra
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard if hard != resource.RLIM_INFINITY else limit))


def limit_files() -> None:
    """Files the learner's code writes: at most 64 MiB each (then SIGXFSZ ends the process)."""
    size = 64 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def run_check(job: dict, emit) -> dict:
    from clearformer.learn.exercises import exercise
    from clearformer.learn.learner import load_functions, run_cases
    from clearformer.learn.sandbox import read_source

    item = exercise(job["exercise"])
    path = Path(job["path"])
    source = read_source(path)
    cases = item.cases()
    limit_memory(job["memory"])
    limit_files()
    emit("ready")
    emit("stage", stage="import")
    functions = load_functions(item, path, source)
    emit("stage", stage="cases")
    run_cases(item, functions, path, source, cases, emit)
    return {}


def run_capstone(job: dict, emit) -> dict:
    from clearformer.learn import capstone

    return capstone.child_job(job, emit, lambda: (limit_memory(job["memory"]), limit_files()))


JOBS = {"check": run_check, "transformer": run_capstone, "train": run_capstone}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    Path(argv[0]).unlink()  # the token in it is not for the learner's code to read
    adopt_orphans()
    emit = Events(job["events_fd"], job["token"])
    try:
        result = JOBS[job["kind"]](job, emit)
    except UserError as error:
        result = {"unusable": str(error)}
    except BaseException as error:  # clearformer's own failure (not the learner's: that is reported above)
        result = {"internal": f"{type(error).__name__}: {str(error)[:200]}"}
    try:
        emit("done", **result)
    finally:
        kill_descendants(os.getpid())  # nothing the learner started outlives the check
        os._exit(0)


if __name__ == "__main__":
    main()
