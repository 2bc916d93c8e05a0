"""One Jupyter notebook per lesson, generated from `learn/lessons.py` (the one source of the lessons).

`clearformer learn --notebooks DIR` writes them; the repository's notebooks/ folder holds the
generated files, and a test holds them equal to what this module generates, then executes every
one with nbclient. Each notebook: the concept, the snippet (the same source the terminal lesson
runs), the lesson's steps on your sentence (a Walkthrough, shown inline as the offline page) and the
question with a cell that checks your answer.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from clearformer.errors import UserError
from clearformer.learn.lessons import LESSONS, Lesson
from clearformer.learn.snippets import PREAMBLE
from clearformer.learn.toy import DEFAULT_SENTENCE
from clearformer.learn.why import NOTEBOOK, why_notebook_text
from clearformer.store.atomic import atomic_write_text

KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def notebook_name(item: Lesson) -> str:
    return f"lesson-{item.number:02d}-{item.slug}.ipynb"


def build_notebook(item: Lesson) -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell(f"# Lesson {item.number}: {item.title}\n\n{item.concept}\n\n"
                          f"*Seeds: {item.seeds}. Generated from `src/clearformer/learn/lessons.py` by "
                          f"`clearformer learn --notebooks notebooks`; the terminal version is "
                          f"`clearformer learn {item.number}`.*"),
        new_markdown_cell("## See it work\n\nclearformer's own modules on the seeds' test data:"),
        new_code_cell(PREAMBLE + item.snippet.rstrip("\n")),
        new_markdown_cell("## On your sentence\n\nThe trained toy model (`runs/toy-translate`, trained once if it "
                          "is missing) translates your sentence under the recorder, as `clearformer explain` does. "
                          "Change the sentence and run the cells again."),
        new_code_cell("from clearformer.learn.session import open_lesson\n\n"
                      f"lesson = open_lesson({item.number}, sentence={DEFAULT_SENTENCE!r})\n"
                      "lesson.steps()"),
        new_markdown_cell("## Question"),
        new_code_cell("print(lesson.question.text())"),
        new_code_cell("answer = None  # your answer: a number, or a choice's letter\nlesson.check(answer)"),
    ]
    for index, cell in enumerate(cells):
        cell["id"] = f"lesson-{item.number:02d}-{index}"
    notebook = new_notebook(cells=cells, metadata={"kernelspec": KERNEL, "language_info": {"name": "python"}})
    return notebook


def notebook_text(item: Lesson) -> str:
    return nbformat.writes(build_notebook(item))


def write_notebooks(folder: Path, overwrite: bool = False) -> list[Path]:
    """Write every lesson's notebook into `folder`; refuse to replace one unless `overwrite`."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is not a folder")
    paths = [folder / notebook_name(item) for item in LESSONS]
    existing = [p.name for p in paths if p.exists()]
    if existing and not overwrite:
        raise UserError(f"{folder} already holds {existing[0]}" + (f" and {len(existing) - 1} more" if
                                                                   len(existing) > 1 else "")
                        + ": pass --overwrite to replace them")
    folder.mkdir(parents=True, exist_ok=True)
    for item, path in zip(LESSONS, paths, strict=True):
        atomic_write_text(path, notebook_text(item))
    if overwrite or not (folder / NOTEBOOK).exists():  # the part after the lessons (learn/why.py)
        atomic_write_text(folder / NOTEBOOK, why_notebook_text())
    return paths
