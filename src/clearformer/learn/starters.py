"""The exercise files lesson 15 imports, and which of them are still the untouched starter.

The capstone (`transformer.py`) imports the learner's exercise files from its folder. A file that is still
exactly what `clearformer learn exercise NAME` (or an earlier lesson's notebook) wrote is not the learner's
work: the check names it before it runs anything (instead of a NotImplementedError deep in the model), and
lesson 15's notebook replaces it with the worked solution (`session.write_missing_solutions`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from clearformer.learn.exercises import EXERCISES, Exercise, starter_text
from clearformer.learn.sandbox import read_source


def imported_exercises(source: str) -> list[Exercise]:
    """The exercises whose files `source` imports (`from attention import ...`), in the exercises' order."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # the check's own import names the syntax error
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return [item for item in EXERCISES if item.filename.removesuffix(".py") in modules]


def is_untouched_starter(item: Exercise, path: Path) -> bool:
    """Whether `path` holds exactly the starter of `item` (what `learn exercise NAME` writes)."""
    try:
        return path.is_file() and read_source(path) == starter_text(item)
    except Exception:  # unreadable: the check's import says why
        return False


def untouched_starters(capstone: Path, source: str) -> list[tuple[Exercise, Path]]:
    """(exercise, file) for each file `capstone` imports that is still its untouched starter."""
    folder = capstone.parent
    return [(item, folder / item.filename) for item in imported_exercises(source)
            if is_untouched_starter(item, folder / item.filename)]


def starter_advice(item: Exercise, path: Path) -> str:
    return (f"{path} is still the untouched starter of `clearformer learn exercise {item.name}`: fill its blocks, "
            f"or `clearformer learn solution {item.name}` writes a worked one")
