"""`learn check` on hostile learner files (issue 33.6): the learner's code runs in a child process with a hard
time limit, a memory limit and a bounded file; whatever it does, the command answers with its verdict in one
line (or its report) and an exit code, and leaves nothing running.

The checker's child is the process under limits here (learn/sandbox.py); the command itself runs in-process
through cli.main, so each case costs one child (one torch import).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import run_child  # at collection: a later `import conftest` may find another folder's

from clearformer.cli import main

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

RIGHT = '''
import torch

def causal_mask(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool))
'''

HOSTILE = {
    # name: (source, exit code, words of the one line, extra --timeout)
    "a loop that swallows every exception and ignores SIGALRM and SIGTERM, with the alarm off": ('''
import signal

def causal_mask(size):
    for name in ("SIGALRM", "SIGTERM", "SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    signal.alarm(0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
''', 1, "causal_mask() still running after 2 s on case", "2"),
    "a long native call (catastrophic regex)": ('''
import re

def causal_mask(size):
    re.match(r"(a+)+$", "a" * 64 + "b")
''', 1, "still running after 2 s", "2"),
    "os._exit(0) inside the function": ('''
import os

def causal_mask(size):
    os._exit(0)
''', 1, "ended the checker's process on case", None),
    "endless top-level code": ('''
while True:
    pass
''', 2, "importing it still running after 2 s", "2"),
    "SystemExit at import": ('''
raise SystemExit(0)
''', 2, "importing it raised SystemExit", None),
    "os._exit at import": ('''
import os
os._exit(3)
''', 2, "importing it ended the checker's process (the process exited with code 3", None),
}


def run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_answer(code: int, out: str, err: str, expected_code: int) -> str:
    assert code == expected_code, (code, out, err)
    text = err if expected_code == 2 else out
    assert text.count("\n") == 1 and "Traceback" not in out + err, (out, err)
    return text


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_code_gets_one_line_and_its_exit_code(case, tmp_path, capsys):
    source, expected_code, words, timeout = HOSTILE[case]
    path = tmp_path / "mine.py"
    path.write_text(source, encoding="utf-8")
    began = time.monotonic()
    argv = ["learn", "check", "causal-mask", str(path)] + (["--timeout", timeout] if timeout else [])
    line = one_line_answer(*run(argv, capsys), expected_code)
    assert words in line, line
    assert time.monotonic() - began < 120


def test_a_raise_of_anything_is_a_wrong_answer_naming_the_file_and_line(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("class Mine(BaseException):\n    pass\n\ndef causal_mask(size):\n    raise Mine('no')\n",
                    encoding="utf-8")
    code, out, err = run(["learn", "check", "causal-mask", str(path)], capsys)
    assert code == 1 and not err and "Traceback" not in out
    assert f"{path}:5: causal_mask() raised Mine: no" in out
    assert out.splitlines()[-1].startswith("wrong: ")


def test_megabytes_of_printing_leave_one_report(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("import sys\nprint('x' * 5_000_000)\n" + RIGHT.replace(
        "    return", "    sys.stdout.write('y' * 5_000_000)\n    sys.stderr.write('z' * 5_000_000)\n    return"),
        encoding="utf-8")
    code, out, err = run(["learn", "check", "causal-mask", str(path)], capsys)
    assert code == 0 and not err and len(out) < 2000 and out.splitlines()[-1].startswith("all right: ")


def beating(heartbeat: Path, seconds: float = 0.6) -> bool:
    """True while a process still appends to `heartbeat` (a PID would not do: in the checker's own PID
    namespace a learner's process has a PID of that namespace)."""
    for _ in range(100):
        if heartbeat.exists() and heartbeat.stat().st_size:
            break
        time.sleep(0.05)
    size = heartbeat.stat().st_size
    time.sleep(seconds)
    return heartbeat.stat().st_size != size


LOOP = """
            while True:
                with open({heartbeat!r}, "a") as beat:
                    beat.write("x")
                time.sleep(0.05)
"""


def test_a_process_the_learner_forks_does_not_outlive_the_command(tmp_path, capsys):
    heartbeat = tmp_path / "beat"
    path = tmp_path / "mine.py"
    path.write_text(f'''import os, time
import torch

def causal_mask(size):
    if not os.path.exists({str(heartbeat)!r}):
        pid = os.fork()
        if pid == 0:{LOOP.format(heartbeat=str(heartbeat))}
    return torch.tril(torch.ones(size, size, dtype=torch.bool))
''', encoding="utf-8")
    code, out, _ = run(["learn", "check", "causal-mask", str(path)], capsys)
    assert code == 0, out
    assert not beating(heartbeat)     # killed with the checker's process group


def test_a_process_that_leaves_the_group_does_not_outlive_the_command(tmp_path, capsys):
    """A double fork with setsid: the grandchild is in a session of its own and its parent is gone, so the
    group kill cannot reach it; the checker's child adopts it (learn/child.py) and kills it."""
    heartbeat = tmp_path / "beat"
    deeper_loop = LOOP.format(heartbeat=str(heartbeat)).replace("\n" + " " * 12, "\n" + " " * 16)
    path = tmp_path / "mine.py"
    path.write_text(f'''import os, time
import torch

def causal_mask(size):
    if not os.path.exists({str(heartbeat)!r}):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:{deeper_loop}
            os._exit(0)
        time.sleep(0.5)
    return torch.tril(torch.ones(size, size, dtype=torch.bool))
''', encoding="utf-8")
    code, out, _ = run(["learn", "check", "causal-mask", str(path)], capsys)
    assert code == 0, out
    assert not beating(heartbeat), "a process outlived the check"


@pytest.mark.parametrize("how", ["setsid then the checker's child exits", "kill the parent, loop",
                                 "stop the parent, loop"])
def test_a_learner_that_escapes_or_attacks_the_checker_is_ended(how, tmp_path):
    """Issue 41: the orphan of a child that exited, a learner that kills or stops its parent and loops: all
    ended within the time limit by a mechanism that does not need the parent (the child's own PID
    namespace where `unshare` works, else the watchdog), and no $TMPDIR/clearformer-learn-* is left."""
    heartbeat = tmp_path / "beat"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    attack = {"setsid then the checker's child exits":
              "if os.fork() == 0:\n        os.setsid()\n        loop()\n    time.sleep(0.3)\n    os._exit(0)",
              "kill the parent, loop": "os.kill(os.getppid(), signal.SIGKILL)\n    loop()",
              "stop the parent, loop": "os.kill(os.getppid(), signal.SIGSTOP)\n    loop()"}[how]
    path = tmp_path / "mine.py"
    path.write_text(f"import os, signal, time\n\ndef loop():\n    while True:\n"
                    f"        with open({str(heartbeat)!r}, 'a') as beat:\n            beat.write('x')\n"
                    f"        time.sleep(0.05)\n\ndef causal_mask(size):\n    {attack}\n", encoding="utf-8")
    started = time.monotonic()
    try:
        outcome = run_child(f"learn check: {how}", ["learn", "check", "causal-mask", str(path), "--timeout", "5"],
                            tmp_path, env={"TMPDIR": str(temporary)}, seconds=100)
        ended = outcome.code
    except AssertionError:  # the checker itself was stopped or killed: what matters is what it left
        ended = None
    assert time.monotonic() - started < 100
    assert not heartbeat.exists() or not beating(heartbeat), f"{how}: the learner's loop outlived the check ({ended})"
    time.sleep(0.5)
    assert not [p.name for p in temporary.iterdir() if p.name.startswith("clearformer-learn-")]


def test_a_report_forged_by_the_learners_code_is_not_believed(tmp_path, capsys):
    """The learner's code writes a well-formed passing report where the events go (every descriptor it has,
    and the job file's path): the answer is still the real check's."""
    path = tmp_path / "mine.py"
    path.write_text('''import json, os
forged = json.dumps({"event": "done", "report": {"exercise": "causal-mask", "file": __file__, "results": [],
                                                "stopped": None}}).encode() + b"\\n"  # a passing report
for fd in range(3, 256):
    try:
        os.write(fd, forged)
    except OSError:
        pass
os._exit(0)  # before the real check could report


def causal_mask(size):
    import torch
    return torch.ones(size, size, dtype=torch.bool)   # wrong: attends to the future
''', encoding="utf-8")
    code, out, err = run(["learn", "check", "causal-mask", str(path)], capsys)
    assert code != 0 and "Traceback" not in out + err, (code, out, err)


def test_a_file_saved_with_a_bom_is_read_as_python_reads_it(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_bytes("\ufeffimport torch\n\ndef causal_mask(size):\n    return torch.tril(torch.ones(size, size, "
                     "dtype=torch.bool))\n".encode("utf-8"))
    code, out, err = run(["learn", "check", "causal-mask", str(path)], capsys)
    assert code == 0, (out, err)


def running(pid: int) -> bool:
    """True while `pid` runs (a zombie, killed but not yet reaped by whatever adopted it, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_memory_is_bounded(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("import torch\n\ndef causal_mask(size):\n    hog = torch.ones(1 << 36)\n    return hog\n",
                    encoding="utf-8")
    code, out, _ = run(["learn", "check", "causal-mask", str(path)], capsys)
    assert code == 1 and f"{path}:4: causal_mask() raised" in out and "memory" in out


@pytest.mark.parametrize("value", ["1e300", "nan", "inf", "-1", "0", "abc"])
def test_an_unusable_timeout_is_refused_in_one_line(value, tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text(RIGHT, encoding="utf-8")
    line = one_line_answer(*run(["learn", "check", "causal-mask", str(path), "--timeout", value], capsys), 2)
    assert "--timeout" in line


def test_a_nul_byte_is_named_by_its_line(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_bytes(b"import torch\n\nx = 1\x00\n")
    line = one_line_answer(*run(["learn", "check", "causal-mask", str(path)], capsys), 2)
    assert f"{path}:3: a NUL byte" in line


def test_a_huge_file_is_refused_before_it_is_read(tmp_path, capsys):
    path = tmp_path / "mine.py"
    with open(path, "wb") as handle:
        handle.truncate(100 * 1024 * 1024)      # 100 MB (sparse)
    line = one_line_answer(*run(["learn", "check", "causal-mask", str(path)], capsys), 2)
    assert "larger than 1 MiB" in line


def test_a_fifo_and_a_folder_are_not_files(tmp_path, capsys):
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        line = one_line_answer(*run(["learn", "check", "causal-mask", str(path)], capsys), 2)
        assert "not a file" in line
