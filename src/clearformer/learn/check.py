"""`clearformer learn check NAME FILE`: run the learner's function on every case, compare with clearformer.

Two processes. The child (`learn/sandbox.py` starts it, `learn/child.py`, `learn/learner.py`) imports the file
and calls the learner's function(s) on every case under a hard time and memory limit, and sends back what each
call returned or raised, as plain data (`learn/wire.py`). This process (`check_file`), which never imports the
learner's file, builds the same cases itself, reads what came back as untrusted data (`learn/verdict.py`) and
compares each result with clearformer's own module to 1e-5 (`judge_run`): code in the child's process can change
what it sends, never how it is judged, and a wrong answer it sends is judged wrong.

Verdicts. Exit 0: every case matches. Exit 1, a wrong answer: a case differs (its first wrong cell,
expected and got, and where the symptom has a known cause a sentence naming it: `learn/diagnose.py`),
or the learner's function raised (anything, BaseException and SystemExit included: named with the
learner's file and line), ran past the time limit, ended the process, or something not the checker's was
written into its report (one line each). Exit 2, an unusable file: missing, too large, a NUL byte, a syntax
error, no such function, its top-level code failing, or the starter left as it was (NotImplementedError). A case
the Transformer's own masks never create (a query with every key blocked) is compared on the other rows only: a
difference there is a note, not a failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.learn.cases import Case
from clearformer.learn.diagnose import diagnose, diagnose_error, edge_note
from clearformer.learn.exercises import Exercise
from clearformer.learn.sandbox import ChildRun, check_timeout, read_source, run_child
from clearformer.learn.verdict import missing, results_of
from clearformer.learn.wire import Malformed, Raised, Unsent, decode, read_raised, type_name

TOLERANCE = 1e-5
QUOTED = 200  # characters of a learner's exception message shown


@dataclass
class Mismatch:
    part: str                 # which output ("weights", "split_heads(x, n_heads)", or "" for a single one)
    message: str              # what differs: a shape, a type, the first wrong cell, or what the code raised
    cell: tuple = ()
    expected: float | None = None
    got: float | None = None


@dataclass
class CaseResult:
    case: str
    ok: bool
    mismatch: Mismatch | None = None
    diagnosis: str | None = None
    note: str | None = None   # a passing case's remark (an edge case the Transformer never meets)


@dataclass
class Report:
    exercise: str
    file: str
    results: list[CaseResult] = field(default_factory=list)
    stopped: str | None = None   # past the time limit, the process ended, or what came back is not believed

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(r.ok for r in self.results)


# ----------------------------------------------------------------------------- comparing


def compare_tensor(expected: torch.Tensor, got, part: str) -> Mismatch | None:
    if isinstance(got, Unsent):  # a tensor whose cells did not come back: its shape says enough, or it is wrong
        if got.shape != tuple(expected.shape):
            return Mismatch(part, f"shape {got.shape}, expected {tuple(expected.shape)}")
        return Mismatch(part, f"a tensor the checker could not read back ({got.why}, dtype {got.dtype})")
    if not isinstance(got, torch.Tensor):
        return Mismatch(part, f"returned {type_name(got)}, expected a torch.Tensor")
    if tuple(got.shape) != tuple(expected.shape):
        return Mismatch(part, f"shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
    if expected.dtype == torch.bool:
        if got.dtype != torch.bool:
            if torch.equal(got.to(torch.bool), expected) and bool(((got == 0) | (got == 1)).all()):
                return Mismatch(part, f"right cells but dtype {got.dtype}: return a boolean tensor (True = may "
                                      "attend), e.g. with .bool()")
            return Mismatch(part, f"dtype {got.dtype}, expected torch.bool (True = may attend)")
        wrong = (got != expected).nonzero()
    else:
        if got.is_complex() or got.dtype == torch.bool:
            return Mismatch(part, f"dtype {got.dtype}, expected real numbers")
        if not expected.is_floating_point() and got.is_floating_point():  # indices: a float one indexes nothing
            return Mismatch(part, f"dtype {got.dtype}, expected integer indices ({expected.dtype}): a float index "
                                  "cannot pick a row (x[index] raises); use // on the integer positions")
        value = got.detach().to(torch.float64)
        target = expected.to(torch.float64)
        bad = ~((value - target).abs() <= TOLERANCE + TOLERANCE * target.abs())
        bad |= torch.isnan(value) != torch.isnan(target)
        wrong = bad.nonzero()
    if wrong.shape[0] == 0:
        return None
    read = bool if expected.dtype == torch.bool else float
    if expected.numel() == 1:  # a scalar (the loss): the two numbers say it all
        index = tuple(0 for _ in expected.shape)
        return Mismatch(part, f"expected {_fmt(read(expected[index]))}, got {_fmt(read(got[index]))}")
    index = tuple(int(i) for i in wrong[0])
    return Mismatch(part, f"{wrong.shape[0]} of {expected.numel()} cells differ", index,
                    read(expected[index]), read(got[index]))


def compare(case: Case, got) -> Mismatch | None:
    expected = case.expected
    if isinstance(expected, list):  # token ids
        if isinstance(got, torch.Tensor):
            got = got.tolist()
        if isinstance(got, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in got):
            return Mismatch("", "returned a list of tensors, expected a list of token ids (ints): .argmax() "
                                "returns a 0-d tensor; keep int(logits.argmax())")
        if not isinstance(got, (list, tuple)) or not all(isinstance(t, int) for t in got):
            return Mismatch("", f"returned {type_name(got)}, expected a list of token ids (ints)")
        if list(got) == expected:
            return None
        pairs = enumerate(zip(expected, got, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), min(len(expected), len(got)))
        return Mismatch("", f"ids {list(got)}, expected {expected}", (first,),
                        expected[first] if first < len(expected) else None, got[first] if first < len(got) else None)
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return Mismatch("", f"returned {type_name(got)}, expected a tuple ({', '.join(case.outputs)})")
        for i in case.order or range(len(expected)):
            mismatch = compare_tensor(expected[i], got[i], case.outputs[i])
            if mismatch:
                return mismatch
        return None
    return compare_tensor(expected, got, "")


def compare_real_rows(case: Case, got) -> Mismatch | None:
    """Attention on a case with a query that may attend to nothing: compare the other rows only."""
    rows = case.info["rows_with_a_key"]                  # (batch, heads, q_len) bool
    pieces = tuple(t[rows] if isinstance(t, torch.Tensor) and t.shape[:3] == rows.shape else t for t in got)
    trimmed = Case(case.name, case.args, tuple(t[rows] for t in case.expected), case.outputs, case.info, case.order)
    return compare(trimmed, pieces)


def judge(item: Exercise, case: Case, got) -> CaseResult:
    mismatch = compare(case, got)
    if mismatch is None:
        return CaseResult(case.name, True)
    if "rows_with_a_key" in case.info and isinstance(got, (tuple, list)) and len(got) == 2 \
            and compare_real_rows(case, got) is None:
        return CaseResult(case.name, True, note=edge_note(case, got))
    return CaseResult(case.name, False, mismatch, diagnose(item.name, case, got, mismatch))


# ----------------------------------------------------------------------------- the checker's side


def check_file(item: Exercise, path: Path, timeout: float = 60.0) -> Report:
    """Every case of `item` on the function(s) in `path`, run in a child process and judged here; UserError when
    the file is unusable."""
    check_timeout(timeout)
    read_source(path)  # missing, too large, a NUL byte: refused before a child starts
    cases = item.cases()  # the expected values: computed here, before the learner's code runs anywhere
    run = run_child({"kind": "check", "exercise": item.name, "path": str(path)}, timeout)
    return judge_run(run, item, path, cases, timeout)


def judge_run(run: ChildRun, item: Exercise, path: Path, cases: list[Case], timeout: float) -> Report:
    """The report on a child's run: each case's result (sent back as data) compared with `cases`' expected values,
    or the one line that says why there is none. The child's own word on anything is never taken."""
    names = [case.name for case in cases]
    results = results_of(run, path, timeout, names, f"{item.function}()")
    report = Report(item.name, str(path))
    try:
        if results.stopped is None:
            first = results.by_case.get(0)
            if first is not None and "raised" in first and starter_raised(read_raised(first["raised"]), path):
                raise UserError(f"{path}: {item.function}() is not implemented yet (it raises NotImplementedError)")
            results.stopped = missing(results, path, names)
        if results.stopped is not None:
            report.stopped = results.stopped
            return report
        report.results = [judge_result(item, case, results.by_case[index]) for index, case in enumerate(cases)]
    except Malformed as error:
        report.results, report.stopped = [], f"{path}: the checker's report holds {error}: not believed"
    return report


def starter_raised(error: Raised, path: Path) -> bool:
    """A NotImplementedError from the learner's files: the starter's `raise NotImplementedError` still there."""
    return error.isa("NotImplementedError") and error.where != str(path)


def judge_result(item: Exercise, case: Case, event: dict) -> CaseResult:
    """One case: the value the learner's function returned, compared; or what it raised, named."""
    fields = set(event) - {"event", "index"}
    if fields == {"value"}:
        return judge(item, case, decode(event["value"]))
    if fields != {"raised"}:
        raise Malformed(f"a result for case {event.get('index')} that is neither a value nor an exception")
    error = read_raised(event["raised"])
    function = error.function if error.function in item.functions else item.function
    message = f"{error.where}: {function}() raised {error.describe(QUOTED)}"
    return CaseResult(case.name, False, Mismatch("", message), diagnose_error(item.name, case, error))


# ----------------------------------------------------------------------------- printing


def _cell(index: tuple) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def format_report(report: Report) -> str:
    if report.stopped is not None:   # the process was stopped: one line
        return f"wrong: {report.stopped}\n"
    lines = [f"{report.file}: exercise {report.exercise}"]
    for result in report.results:
        if result.ok:
            lines.append(f"  {result.case} ... OK" + (f"\n    note: {result.note}" if result.note else ""))
            continue
        m = result.mismatch
        part = f"{m.part}: " if m.part else ""
        lines.append(f"  {result.case} ... WRONG")
        lines.append(f"    {part}{m.message}")
        if m.cell:
            lines.append(f"    first wrong cell {_cell(m.cell)}: expected {_fmt(m.expected)}, got {_fmt(m.got)}")
        if result.diagnosis:
            lines.append(f"    what differs: {result.diagnosis}")
    bad = [r for r in report.results if not r.ok]
    if not bad:
        lines.append(f"all right: {len(report.results)} cases match clearformer's own module to {TOLERANCE:g}")
    else:
        lines.append(f"wrong: {len(bad)} of {len(report.results)} cases differ, the first: {bad[0].case}")
    return "\n".join(lines) + "\n"


def _fmt(value) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.6g}"


def check_here(item: Exercise, path: Path) -> Report:
    """The same check in this process, without the child's limits: for clearformer's own tests, which run trusted
    files (the solutions and the planted bugs) by the hundred. The learner's side (learn/learner.py) and the
    checker's (`judge_run`) talk through the same JSON lines as across the pipe; `check_file` is what users get."""
    from clearformer.learn.learner import load_functions, run_cases

    source = read_source(path)
    functions = load_functions(item, path, source)
    lines = []
    run_cases(item, functions, path, source, item.cases(),
              lambda event, **fields: lines.append(json.loads(json.dumps({"event": event, **fields}))))
    events = [{"event": "ready"}, {"event": "stage", "stage": "cases"}, *lines, {"event": "done"}]
    return judge_run(ChildRun(events, returncode=0), item, path, item.cases(), 60.0)
