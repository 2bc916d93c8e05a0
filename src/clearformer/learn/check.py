"""`clearformer learn check NAME FILE`: run the learner's function on every case, compare with clearformer.

Two halves. In clearformer's process, `check_file` reads the file (bounded, no NUL byte: sandbox.py)
and runs the rest in a child process under a hard time and memory limit (`learn/sandbox.py`,
`learn/child.py`). In the child, `load_functions` compiles and imports the file and `run_cases` calls
the learner's function(s) on every case and compares each result with clearformer's own module to 1e-5.

Verdicts. Exit 0: every case matches. Exit 1, a wrong answer: a case differs (its first wrong cell,
expected and got, and where the symptom has a known cause a sentence naming it: `learn/diagnose.py`),
or the learner's function raised (anything, BaseException and SystemExit included: named with the
learner's file and line), ran past the time limit, or ended the process. Exit 2, an unusable file:
missing, too large, a NUL byte, a syntax error, no such function, its top-level code failing, or the
starter left as it was (NotImplementedError). A case the Transformer's own masks never create (a query
with every key blocked) is compared on the other rows only: a difference there is a note, not a failure.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.learn.cases import Case
from clearformer.learn.diagnose import diagnose, diagnose_error, edge_note
from clearformer.learn.exercises import Exercise
from clearformer.learn.sandbox import check_timeout, read_source, run_child

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
    stopped: str | None = None   # the learner's code ran past the time limit or ended the process

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(r.ok for r in self.results)


def report_from_dict(data: dict) -> Report:
    results = []
    for item in data.get("results", []):
        mismatch = item.get("mismatch")
        if mismatch is not None:
            mismatch = Mismatch(**{**mismatch, "cell": tuple(mismatch.get("cell") or ())})
        results.append(CaseResult(**{**item, "mismatch": mismatch}))
    return Report(data["exercise"], data["file"], results, data.get("stopped"))


# ----------------------------------------------------------------------------- loading the learner's file (child)


def load_module(path: Path, source: str, what: str):
    """Compile and import the learner's file; UserError (exit 2) when it cannot be used."""
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as error:
        raise UserError(f"{path}:{error.lineno}: syntax error: {error.msg}") from None
    except (ValueError, MemoryError, RecursionError) as error:
        raise UserError(f"{path}: cannot be compiled ({type(error).__name__})") from None
    folder = str(path.resolve().parent)
    if folder not in sys.path:   # `from attention import ...`: the learner's other exercise files
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_loader(f"clearformer_learner_{uuid.uuid4().hex}", loader=None,
                                           origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    try:
        exec(code, module.__dict__)
    except BaseException as error:  # the learner's top-level code: its failure, in one line
        where = learner_line(error, path)
        raise UserError(f"{where}: importing it raised {describe(error)}{hint_for_import(error, what)}") from None
    return module


def hint_for_import(error: BaseException, what: str) -> str:
    if isinstance(error, ModuleNotFoundError) and what == "transformer":
        return (f" (the capstone imports your exercise files from its folder: write them with "
                f"`clearformer learn exercise {error.name}` or `clearformer learn solution {error.name}`)"
                if error.name else "")
    return ""


def load_functions(item: Exercise, path: Path, source: str) -> dict:
    module = load_module(path, source, item.name)
    found = {}
    for name in item.functions:
        function = getattr(module, name, None)
        if not callable(function):
            raise UserError(f"{path} defines no function {name}() (`clearformer learn exercise {item.name}` "
                            "writes its signature)")
        found[name] = function
    return found


def describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # a learner's exception whose __str__ fails
        text = ""
    text = text.splitlines()[0] if text.strip() else ""
    if len(text) > QUOTED:
        text = text[:QUOTED] + "..."
    return type(error).__name__ + (f": {text}" if text else "")


def learner_line(error: BaseException, path: Path) -> str:
    """'FILE:LINE' of the innermost frame of the learner's files in the error's traceback (else 'FILE'): `path`,
    or an exercise file beside it that `path` imports (the capstone's attention.py), named as the learner would."""
    target = str(path)
    try:
        folder = path.resolve().parent
    except OSError:
        folder = None
    where = None
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == target:
            where = f"{path}:{frame.lineno}"
        elif folder is not None and frame.filename.endswith(".py") and Path(frame.filename).parent == folder:
            where = f"{path.with_name(Path(frame.filename).name)}:{frame.lineno}"
    return where or str(path)


def learner_source_line(error: BaseException, path: Path, source: str) -> str:
    """The text of that line ('' when there is none)."""
    where = learner_line(error, path)
    if where == str(path):
        return ""
    number = int(where.rsplit(":", 1)[1])
    lines = source.splitlines()
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""


# ----------------------------------------------------------------------------- comparing


def call(item: Exercise, functions: dict, case: Case):
    if item.name == "heads":
        x, heads = case.args
        return functions["split_heads"](x.clone(), heads), functions["merge_heads"](case.info["heads"].clone())
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
    return functions[item.function](*args)


def compare_tensor(expected: torch.Tensor, got, part: str) -> Mismatch | None:
    if not isinstance(got, torch.Tensor):
        return Mismatch(part, f"returned {type(got).__name__}, expected a torch.Tensor")
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
            return Mismatch("", f"returned {type(got).__name__}, expected a list of token ids (ints)")
        if list(got) == expected:
            return None
        pairs = enumerate(zip(expected, got, strict=False))
        first = next((i for i, (a, b) in pairs if a != b), min(len(expected), len(got)))
        return Mismatch("", f"ids {list(got)}, expected {expected}", (first,),
                        expected[first] if first < len(expected) else None, got[first] if first < len(got) else None)
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return Mismatch("", f"returned {type(got).__name__}, expected a tuple ({', '.join(case.outputs)})")
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


def run_cases(item: Exercise, functions: dict, path: Path, source: str, cases: list[Case], emit=None) -> Report:
    """Every case on the learner's function(s); `emit(event, **fields)` says which case runs (the child's log)."""
    report = Report(item.name, str(path))
    for index, case in enumerate(cases):
        if emit is not None:
            emit("case", index=index, name=case.name)
        try:
            got = call(item, functions, case)
        except NotImplementedError as error:
            if index == 0 and learner_line(error, path) != str(path):
                raise UserError(f"{path}: {item.function}() is not implemented yet (it raises "
                                "NotImplementedError)") from None
            got = error
        except BaseException as error:  # anything the learner's code raises is its wrong answer
            got = error
        if isinstance(got, BaseException):
            where = learner_line(got, path)
            function = _failing_function(item, got, path)
            message = f"{where}: {function}() raised {describe(got)}"
            report.results.append(CaseResult(case.name, False, Mismatch("", message),
                                             diagnose_error(item.name, case, got,
                                                            learner_source_line(got, path, source))))
            continue
        report.results.append(judge(item, case, got))
    return report


def _failing_function(item: Exercise, error: BaseException, path: Path) -> str:
    names = [frame.name for frame in traceback.extract_tb(error.__traceback__) if frame.filename == str(path)]
    known = [name for name in names if name in item.functions]
    return known[0] if known else item.function


# ----------------------------------------------------------------------------- the parent's side


def check_file(item: Exercise, path: Path, timeout: float = 60.0) -> Report:
    """Every case of `item` on the function(s) in `path`, in a child process; UserError when unusable."""
    check_timeout(timeout)
    read_source(path)  # missing, too large, a NUL byte: refused before a child starts
    run = run_child({"kind": "check", "exercise": item.name, "path": str(path)}, timeout)
    return report_of(run, item, path, timeout)


def report_of(run, item: Exercise, path: Path, timeout: float) -> Report:
    done = run.done
    if done is not None and not run.damaged:
        if "unusable" in done:
            raise UserError(str(done["unusable"]))
        if "internal" in done:
            raise UserError(f"{path}: the checker itself failed ({done['internal']}); please report it")
        if "report" in done:
            return report_from_dict(done["report"])
    if run.startup_timed_out:
        raise UserError(f"{path}: the checker did not start within its time (a loaded machine?); try again")
    stage = run.last("stage")
    case = run.last("case")
    if stage is None or stage.get("stage") != "cases" or case is None:
        if run.timed_out:
            raise UserError(f"{path}: importing it still running after {timeout:g} s (top-level code that never "
                            "ends?); `--timeout SECONDS` sets the limit")
        raise UserError(f"{path}: importing it ended the checker's process ({run.ended()})")
    report = Report(item.name, str(path))
    if run.timed_out:
        report.stopped = (f"{path}: {item.function}() still running after {timeout:g} s on case "
                          f"{case.get('name')!r} (an endless loop?): stopped; `--timeout SECONDS` sets the limit")
    elif run.damaged:
        report.stopped = f"{path}: the checker's report was overwritten while case {case.get('name')!r} ran"
    else:
        report.stopped = (f"{path}: {item.function}() ended the checker's process on case {case.get('name')!r} "
                          f"({run.ended()}): a function must return its result")
    return report


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


def report_dict(report: Report) -> dict:
    return asdict(report)


def check_here(item: Exercise, path: Path) -> Report:
    """The same checks in this process, without the child's limits: for clearformer's own tests, which run
    trusted files (the solutions and the planted bugs) by the hundred; `check_file` is what users get."""
    source = read_source(path)
    functions = load_functions(item, path, source)
    return run_cases(item, functions, path, source, item.cases())
