"""`clearformer learn check NAME FILE`: run the learner's function on every case, compare with clearformer.

The file is imported from its path (importlib) in this process, under a time limit. Anything that
makes it unusable (no such file, a syntax error, a missing function, an exception while importing
or running it, the time limit) is a `UserError`: one line, exit 2, no traceback. Otherwise every
case is compared with the expected result to 1e-5; the first case that differs is reported with
its first wrong cell (expected and got, as `clearformer check` reports a hand-worked example) and,
where the difference has a known cause, a sentence that names it (`learn/diagnose.py`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.learn.cases import Case
from clearformer.learn.diagnose import diagnose
from clearformer.learn.exercises import Exercise

TOLERANCE = 1e-5


@dataclass
class Mismatch:
    part: str                 # which output ("weights", "split_heads(x, n_heads)", or "" for a single one)
    message: str              # what differs: a shape, a type, or the first wrong cell
    cell: tuple = ()
    expected: float | None = None
    got: float | None = None


@dataclass
class CaseResult:
    case: str
    ok: bool
    mismatch: Mismatch | None = None
    diagnosis: str | None = None


@dataclass
class Report:
    exercise: str
    file: str
    results: list[CaseResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


# ----------------------------------------------------------------------------- loading the learner's file


def load_functions(item: Exercise, path: Path) -> dict:
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if not path.is_file():
        raise UserError(f"{path}: not a file")
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    try:
        compile(source, str(path), "exec")
    except SyntaxError as error:
        raise UserError(f"{path}:{error.lineno}: syntax error: {error.msg}") from None
    spec = importlib.util.spec_from_file_location(f"clearformer_learner_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:  # the learner's top-level code: its failure, in one line
        raise UserError(f"{path}: importing it raised {_describe(error)}") from None
    found = {}
    for name in item.functions:
        function = getattr(module, name, None)
        if not callable(function):
            raise UserError(f"{path} defines no function {name}() (`clearformer learn exercise {item.name}` "
                            "writes its signature)")
        found[name] = function
    return found


def _describe(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return type(error).__name__ + (f": {text[:200]}" if text else "")


class TimeUp(BaseException):
    """The time limit ran out (a BaseException, so the learner's `except Exception` cannot swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float, path: Path):
    """Raise UserError after `seconds` (only where signals can be used: the main thread, POSIX)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def expired(signum, frame):
        raise TimeUp

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except TimeUp:
        raise UserError(f"{path}: still running after {seconds:g} s (an endless loop?); "
                        "`--timeout SECONDS` sets the limit") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ----------------------------------------------------------------------------- comparing


def call(item: Exercise, functions: dict, case: Case):
    if item.name == "heads":
        x, heads = case.args
        return functions["split_heads"](x.clone(), heads), functions["merge_heads"](case.info["split"].clone())
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
        value = got.detach().to(torch.float64)
        target = expected.to(torch.float64)
        bad = ~((value - target).abs() <= TOLERANCE + TOLERANCE * target.abs())
        bad |= torch.isnan(value) != torch.isnan(target)
        wrong = bad.nonzero()
    if wrong.shape[0] == 0:
        return None
    index = tuple(int(i) for i in wrong[0])
    read = bool if expected.dtype == torch.bool else float
    return Mismatch(part, f"{wrong.shape[0]} of {expected.numel()} cells differ", index,
                    read(expected[index]), read(got[index]))


def compare(case: Case, got) -> Mismatch | None:
    expected = case.expected
    if isinstance(expected, list):  # token ids
        if isinstance(got, torch.Tensor):
            got = got.tolist()
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


def check_file(item: Exercise, path: Path, timeout: float = 60.0) -> Report:
    """Every case of `item` on the function(s) in `path`; UserError when the file is unusable."""
    report = Report(item.name, str(path))
    checked = item.cases()
    with time_limit(timeout, path):  # the file's own top-level code runs under the limit too
        functions = load_functions(item, path)
        for case in checked:
            try:
                got = call(item, functions, case)
            except NotImplementedError:
                raise UserError(f"{path}: {item.function}() is not implemented yet (it raises "
                                "NotImplementedError)") from None
            except UserError:
                raise
            except (Exception, SystemExit) as error:  # the learner's code failed (or quit): one line, the case
                raise UserError(f"{path}: {item.function}() raised {_describe(error)} on case "
                                f"{case.name!r}") from None
            mismatch = compare(case, got)
            result = CaseResult(case.name, mismatch is None, mismatch)
            if mismatch is not None:
                result.diagnosis = diagnose(item.name, case, got, mismatch)
            report.results.append(result)
    return report


# ----------------------------------------------------------------------------- printing


def _cell(index: tuple) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def format_report(report: Report) -> str:
    lines = [f"{report.file}: exercise {report.exercise}"]
    for result in report.results:
        if result.ok:
            lines.append(f"  {result.case} ... OK")
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

