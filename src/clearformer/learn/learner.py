"""The child's side of `learn check`: load the learner's file and call its functions on the cases. Nothing here judges.

This runs in the child process (learn/child.py), the only process that imports the learner's file. `run_cases`
sends, case by case, what the learner's function returned (learn/wire.py: plain data) or what it raised (its
class, message, and the learner's file and line); the checker compares with the expected values it computes
itself (learn/check.py). Code in this process can change anything here, which changes what is sent, never how it
is judged.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
import uuid
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.learn import wire
from clearformer.learn.cases import Case
from clearformer.learn.exercises import Exercise

QUOTED = 200  # characters of a learner's exception message shown


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


def raised(error: BaseException, path: Path, source: str, function: str = "") -> dict:
    """What the learner's code raised, for the checker (learn/wire.py's record): where, in which function."""
    return wire.raised_record(error, learner_line(error, path), function, learner_source_line(error, path, source))


# ----------------------------------------------------------------------------- running the cases


def call(item: Exercise, functions: dict, case: Case):
    if item.name == "heads":
        x, heads = case.args
        return functions["split_heads"](x.clone(), heads), functions["merge_heads"](case.info["heads"].clone())
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
    return functions[item.function](*args)


def outcome(item: Exercise, functions: dict, path: Path, source: str, case: Case) -> dict:
    """{"value": what the function returned} or {"raised": what it raised}, as plain data (learn/wire.py). Reading
    the value back runs the learner's code too (a tensor subclass, a list's __len__): what that raises is the
    learner's error as well."""
    try:
        return {"value": wire.encode(call(item, functions, case))}
    except BaseException as error:  # anything the learner's code raises is its wrong answer
        return {"raised": raised(error, path, source, failing_function(item, error, path))}


def run_cases(item: Exercise, functions: dict, path: Path, source: str, cases: list[Case], emit) -> None:
    """Every case on the learner's function(s): `emit("case", index=i)` before it (what the learner's code was
    running, should it never return), `emit("result", index=i, ...)` after it. A starter still raising
    NotImplementedError on the first case stops there: the checker calls the file unusable."""
    for index, case in enumerate(cases):
        emit("case", index=index)
        result = outcome(item, functions, path, source, case)
        emit("result", index=index, **result)
        if index == 0 and not_implemented(result.get("raised"), path):
            return


def not_implemented(record: dict | None, path: Path) -> bool:
    """A NotImplementedError raised in the learner's files (the starter's `raise NotImplementedError`)."""
    return record is not None and "NotImplementedError" in record["classes"] and record["where"] != str(path)


def failing_function(item: Exercise, error: BaseException, path: Path) -> str:
    names = [frame.name for frame in traceback.extract_tb(error.__traceback__) if frame.filename == str(path)]
    known = [name for name in names if name in item.functions]
    return known[0] if known else item.function
