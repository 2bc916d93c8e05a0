"""The test suite's time on this machine: the README's test command, timed, with where the time goes.

    python -m benchmarks.suite_time                 # the whole suite (pyproject's -n 2); writes its section
    python -m benchmarks.suite_time --no-write -- tests/hostile   # any pytest arguments after --

Issue 50 asks for the whole suite under 10 minutes on 2 cores. This runs `python -m pytest` as the README does,
with `--durations=0` (every test's setup, call and teardown), and reports the wall time, the CPU time the suite's
processes used (theirs and their children's: getrusage), how much of the machine stood idle meanwhile (from
/proc/stat: a core idle while a worker waits for a child, a browser or a sleep), and the summed test time per
folder and for the longest files (tests/conftest.py LONGEST_FILES is ordered from such a run). The 1-minute load
average before and after says whether anything else shared the cores.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.report import ROOT, markdown_table, write_section

DURATION = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(tests/\S+?)::")
OUTCOME = re.compile(r"^=*\s*(\d+ passed.*?) in [\d.]+s")


def cpu_ticks() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine since boot (/proc/stat's first line)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)  # idle + iowait


def run_suite(pytest_args: list[str]) -> dict:
    """The suite's output, wall seconds, its processes' CPU seconds and the machine's idle share meanwhile."""
    load_before = os.getloadavg()[0]
    idle0, total0 = cpu_ticks()
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "--durations=0", "--durations-min=0", *pytest_args],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - began
    idle1, total1 = cpu_ticks()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"output": done.stdout + done.stderr, "code": done.returncode, "wall": wall,
            "cpu": usage.ru_utime + usage.ru_stime, "idle": (idle1 - idle0) / max(total1 - total0, 1),
            "load": (load_before, os.getloadavg()[0])}


def summed(output: str) -> tuple[collections.Counter, collections.Counter]:
    """(seconds per test file, seconds per folder): setup + call + teardown, as --durations printed them."""
    files: collections.Counter = collections.Counter()
    for line in output.splitlines():
        match = DURATION.match(line)
        if match:
            files[match.group(3)] += float(match.group(1))
    folders: collections.Counter = collections.Counter()
    for name, seconds in files.items():
        folders[name.split("/")[1]] += seconds
    return files, folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=12, help="how many of the longest files to list")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest (default: none, the README's)")
    args = parser.parse_args()
    result = run_suite(args.pytest_args)
    outcome = [m.group(1) for m in map(OUTCOME.match, result["output"].splitlines()) if m]
    files, folders = summed(result["output"])
    total = sum(files.values())
    summary = (f"exit {result['code']}: {outcome[-1] if outcome else 'no outcome line'}; wall {result['wall']:.0f} s, "
               f"CPU {result['cpu']:.0f} s ({result['cpu'] / result['wall']:.2f} cores busy on average), the "
               f"machine idle {100 * result['idle']:.0f}% of the time; tests' summed time {total:.0f} s")
    print(summary)
    if result["code"] != 0:
        print(result["output"][-3000:])
    if args.no_write or result["code"] != 0:
        return
    body = (f"`python -m pytest` (pyproject: `-n 2 --dist loadfile`, the longest files first) run by this script with "
            f"`--durations=0`; 1-minute load average {result['load'][0]:.1f} before, {result['load'][1]:.1f} after. "
            f"{summary}. Summed times count each test's setup, call and teardown; two workers share them, so the wall "
            f"time is about half the sum.\n\n"
            + markdown_table(["folder", "summed seconds", "share"],
                             [[name, f"{seconds:.0f}", f"{100 * seconds / total:.0f}%"]
                              for name, seconds in folders.most_common()])
            + "\n\n" + markdown_table(["longest files", "summed seconds"],
                                      [[name, f"{seconds:.0f}"] for name, seconds in files.most_common(args.files)]))
    write_section("suite_time", "The test suite's time on this machine", body)


if __name__ == "__main__":
    main()
