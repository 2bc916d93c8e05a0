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


# ----------------------------------------------------------------------------- the verdict is the parent's (issue 41)
# The child only runs the learner's functions and sends back what they returned; the checker's own process builds the
# cases and judges. Code in the child's process that patches the checker there, finds its Events object (and the run's
# token) with gc, or writes anything at all into the pipe changes what the parent reads, never how it judges: a wrong
# answer stays wrong (exit 1 or 2, one line or the report), and nothing the child sends raises in the parent.

def check_source(source: str, tmp_path: Path, capsys) -> tuple[int, str, str]:
    """`learn check causal-mask mine.py` on `source`: (exit code, stdout, stderr)."""
    path = tmp_path / "mine.py"
    path.write_text(source, encoding="utf-8")
    return run(["learn", "check", "causal-mask", str(path)], capsys)


WRONG = '''
import torch


def causal_mask(size):
    return torch.ones(size, size, dtype=torch.bool)   # wrong: every position may attend to the future
'''

# What code in the child's process can reach: the Events object, its descriptor and the run's token.
FIND_EVENTS = '''
import base64, gc, json, os
events = next(o for o in gc.get_objects() if type(o).__name__ == "Events")


def send(**fields):
    """A line as the checker's child writes it, the run's token included."""
    os.write(events.fd, (json.dumps({**fields, "token": events.token}) + "\\n").encode())


def right_mask(size):
    data = bytes(1 if j <= i else 0 for i in range(size) for j in range(size))
    return {"tensor": {"dtype": "bool", "shape": [size, size], "data": base64.b64encode(data).decode()}}


PASSING = {"exercise": "causal-mask", "file": __file__, "stopped": None,
           "results": [{"case": f"case {i}", "ok": True} for i in range(5)]}
'''

ATTACKS = {
    # name: code at the top of the learner's file, before its wrong causal_mask
    "patches the checker's comparison in its own process": '''
import clearformer.learn.check as check
import clearformer.learn.diagnose as diagnose

check.compare = check.compare_tensor = check.compare_real_rows = lambda *args, **kwargs: None
check.judge = lambda item, case, got: check.CaseResult(case.name, True)
diagnose.diagnose = lambda *args, **kwargs: None
''',
    "finds the token with gc, writes a passing done and exits": FIND_EVENTS + '''
send(event="done", report=PASSING)
os._exit(0)
''',
    "rewrites the child's own done into a passing report": FIND_EVENTS + '''
type(events).__call__ = lambda self, event, **fields: send(event=event, **({"report": PASSING} if event == "done"
                                                                             else fields))
''',
    "sends the right masks as results ahead of its own": FIND_EVENTS + '''
for index, size in enumerate((4, 6, 1, 2, 10)):
    send(event="result", index=index, value=right_mask(size))
''',
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_code_in_the_childs_process_cannot_make_a_wrong_answer_pass(attack, tmp_path, capsys):
    code, out, err = check_source(ATTACKS[attack] + WRONG, tmp_path, capsys)
    assert code == 1 and not err and "Traceback" not in out, (code, out, err)
    assert out.splitlines()[-1].startswith("wrong: "), out
    if attack.startswith("patches"):  # the child's patched functions judge nothing: the parent's report, in full
        assert "seed 002: <START> Je t' aime (4) ... WRONG" in out and "first wrong cell [0, 1]" in out, out


GARBAGE = {
    # name: (what the learner's code writes into the pipe at import, words of the one line)
    "bytes that are not JSON, without the token": ("os.write(events.fd, b'\\xff\\xfe{not json\\n')",
                                                   "lines it did not write"),
    "JSON nested 200000 deep, without the token": ("os.write(events.fd, b'[' * 200_000 + b'\\n')",
                                                   "lines it did not write"),
    "a line past the size the checker reads": ("os.write(events.fd, b'x' * (5 << 20))", "more than 4 MiB"),
    "with the token: a string for the case index": ("send(event='result', index='0', value=right_mask(4))",
                                                    "not believed"),
    "with the token: NaN for the case index": ("send(event='result', index=float('nan'), value=right_mask(4))",
                                               "not believed"),
    "with the token: a case that does not exist": ("send(event='result', index=99, value=right_mask(4))",
                                                   "not believed"),
    "with the token: a tensor of 10^12 x 10^12 cells": (
        "send(event='result', index=0, value={'tensor': {'dtype': 'float64', 'shape': [10**12, 10**12], "
        "'data': ''}})", "not believed"),
    "with the token: data that is not base64": (
        "send(event='result', index=0, value={'tensor': {'dtype': 'bool', 'shape': [4, 4], 'data': '!!'}})",
        "not believed"),
    "with the token: fewer bytes than the shape needs": (
        "send(event='result', index=0, value={'tensor': {'dtype': 'float64', 'shape': [4, 4], 'data': 'AAAA'}})",
        "not believed"),
    "with the token: a dtype torch does not read back": (
        "send(event='result', index=0, value={'tensor': {'dtype': 'object', 'shape': [1], 'data': 'AA=='}})",
        "not believed"),
    "with the token: a value nested past any result": (
        "v = {'int': 1}\nfor _ in range(50):\n    v = {'list': [v], 'length': 1}\nsend(event='result', index=0, "
        "value=v)", "not believed"),
    "with the token: an event of no known kind": ("send(event='verdict', ok=True)", "not believed"),
    "with the token: a done with the report of a pass, and no results": ("send(event='done', report=PASSING)",
                                                                          "not believed"),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_anything_written_into_the_pipe_gives_one_line_and_never_a_pass(case, tmp_path, capsys):
    writes, words = GARBAGE[case]
    # a right mask: only what was written into the pipe can fail it
    line = one_line_answer(*check_source(FIND_EVENTS + writes + "\n" + RIGHT, tmp_path, capsys), 1)
    assert line.startswith("wrong: ") and words in line, line


RETURNS = {
    # name: (what causal_mask returns, words of the report)
    "NaN in every cell": ("torch.full((size, size), float('nan'))", "dtype torch.float32, expected torch.bool"),
    "a tensor far larger than the checker reads back (64 MiB)": ("torch.zeros(4096, 4096)",
                                                                 "shape (4096, 4096), expected (4, 4)"),
    "a list nested 10000 deep": ("functools.reduce(lambda inner, _: [inner], range(10_000), [])",
                                 "returned list, expected a torch.Tensor"),
    "an object whose methods raise": ("type('Hostile', (), {'__getattr__': lambda self, name: 1 / 0})()",
                                      "returned Hostile, expected a torch.Tensor"),
}


@pytest.mark.parametrize("case", sorted(RETURNS))
def test_whatever_the_function_returns_is_judged_by_the_parent(case, tmp_path, capsys):
    returned, words = RETURNS[case]
    source = f"import functools\nimport torch\n\n\ndef causal_mask(size):\n    return {returned}\n"
    code, out, err = check_source(source, tmp_path, capsys)
    assert code == 1 and not err and "Traceback" not in out and len(out) < 5000, (code, out, err)
    assert words in out and out.splitlines()[-1].startswith("wrong: "), out


def test_the_verdict_depends_on_the_results_alone_not_on_the_token(tmp_path):
    """The parent's judgement of a child's events, with no child and no token at all: the right results pass, a
    'done' that carries a passing report (today's forgery) and no results does not."""
    from clearformer.learn.check import judge_run
    from clearformer.learn.exercises import exercise
    from clearformer.learn.sandbox import ChildRun
    from clearformer.learn.wire import encode

    item = exercise("causal-mask")
    cases = item.cases()
    path = tmp_path / "mine.py"
    path.write_text(RIGHT, encoding="utf-8")
    start = [{"event": "ready"}, {"event": "stage", "stage": "cases"}]
    results = [{"event": "result", "index": i, "value": encode(case.expected)} for i, case in enumerate(cases)]
    passing = {"exercise": item.name, "file": str(path), "stopped": None,
               "results": [{"case": case.name, "ok": True} for case in cases]}
    right = judge_run(ChildRun(start + results + [{"event": "done"}], returncode=0), item, path, cases, 60.0)
    assert right.ok and len(right.results) == len(cases)
    forged = judge_run(ChildRun(start + [{"event": "done", "report": passing}], returncode=0), item, path, cases,
                       60.0)
    assert not forged.ok and "not believed" in forged.stopped
    wrong = [{**event, "value": encode(~case.expected)} for event, case in zip(results, cases, strict=True)]
    assert not judge_run(ChildRun(start + wrong + [{"event": "done"}], returncode=0), item, path, cases, 60.0).ok


@pytest.mark.parametrize("data", [b"[" * 100_000 + b"\n", b'{"a":' * 100_000 + b"\n", b"\xff" * 1000 + b"\n",
                                  b'{"event": "result", "token": "t", "index": 1e999}\n', b"1" * 5000 + b"\n"])
def test_the_event_reader_never_raises(data, tmp_path):
    from clearformer.learn.sandbox import ChildRun, EventReader

    (tmp_path / "events").write_bytes(data)   # a file, not a pipe: the lines are larger than a pipe's buffer
    read = os.open(tmp_path / "events", os.O_RDONLY)
    run, reader = ChildRun(), EventReader(read, "t")
    reader.pump(run, final=True)
    os.close(read)
    assert run.damaged or run.events, data[:40]


CAPSTONE_ATTACKS = {
    # name: code at the top of a transformer.py whose embedding forgets the sqrt(d_model) scale
    "patches the capstone's comparison in its own process": '''
import clearformer.learn.capstone as capstone

capstone.first_difference = capstone._differ = lambda *args, **kwargs: None
''',
    "replaces the capstone's whole check in its own process with a passing report": '''
import clearformer.learn.capstone as capstone

PASSING = {"exercise": "transformer", "file": __file__, "stopped": None, "results": [{"case": "all", "ok": True}]}
capstone.check_learner = lambda *args, **kwargs: {"report": PASSING}
''',
    "finds the token with gc, writes a passing done and exits": FIND_EVENTS + '''
send(event="done", report={**PASSING, "exercise": "transformer"})
os._exit(0)
''',
}


@pytest.fixture
def capstone_folder(tmp_path):
    """Every exercise's worked solution, and lesson 15's with its embedding unscaled (a wrong model)."""
    from clearformer.learn.capstone_source import solution_text
    from clearformer.learn.exercises import EXERCISES
    from clearformer.learn.solutions import solution_text as worked

    for item in EXERCISES:
        (tmp_path / item.filename).write_text(worked(item.name), encoding="utf-8")
    wrong = solution_text().replace("x = self.table(ids) * math.sqrt(self.d_model)", "x = self.table(ids)")
    assert wrong != solution_text()
    return tmp_path, wrong


@pytest.mark.parametrize("attack", sorted(CAPSTONE_ATTACKS))
def test_code_in_the_capstones_child_cannot_make_a_wrong_model_pass(attack, capstone_folder, toy_run, capsys):
    folder, wrong = capstone_folder
    path = folder / "transformer.py"
    path.write_text(CAPSTONE_ATTACKS[attack] + wrong, encoding="utf-8")
    code, out, err = run(["learn", "check", "transformer", str(path), "--checkpoint", str(toy_run)], capsys)
    assert code == 1 and not err and "Traceback" not in out, (code, out, err)
    assert out.splitlines()[-1].startswith("wrong: "), out
    if attack.startswith("patches"):
        assert "the first module whose output differs is src_embed" in out, out


def test_a_forged_training_report_is_not_believed(capstone_folder, toy_run, tmp_path, capsys):
    """`learn train`: the learner's code writes the child's 'trained' answer itself and exits before any training;
    the checker names what is missing instead of printing a training that never happened."""
    from clearformer.learn.capstone_source import solution_text

    folder, _ = capstone_folder
    path = folder / "transformer.py"
    path.write_text(FIND_EVENTS + '''
send(event="done", trained={"steps": 3, "seconds": 1.0, "loss": 0.1, "valid_loss": 0.1, "run": "elsewhere",
                            "translation": "Je t'aime"})
os._exit(0)
''' + solution_text(), encoding="utf-8")
    out_dir = tmp_path / "mine"
    code, out, err = run(["learn", "train", str(path), "--out", str(out_dir), "--steps", "1", "--checkpoint",
                          str(toy_run)], capsys)
    assert code == 1 and "Traceback" not in out + err, (code, out, err)
    assert "trained your model" not in out and out.splitlines()[-1].startswith("wrong: "), out
