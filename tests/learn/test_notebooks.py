"""The notebooks: generated from the lessons (the committed ones are exactly that), and every one executes.

All notebooks run in one kernel (started once: importing torch is most of a notebook's time), each
after `%reset -f`, so a notebook cannot lean on names an earlier one defined.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from clearformer.explain.examples import run_example
from clearformer.learn.exercises import EXERCISES
from clearformer.learn.lessons import LESSONS
from clearformer.learn.notebooks import TABLE_ONLY, notebook_name, notebook_text, write_notebooks
from clearformer.learn.snippets import run_snippet
from clearformer.learn.why import NOTEBOOK as WHY_NOTEBOOK

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def test_the_committed_notebooks_are_the_generated_ones():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted([*(notebook_name(item) for item in LESSONS),
                                                                         WHY_NOTEBOOK])  # learn/why.py's
    for item in LESSONS:
        assert (NOTEBOOKS / notebook_name(item)).read_text(encoding="utf-8") == notebook_text(item), (
            f"{notebook_name(item)} is stale: run `clearformer learn --notebooks notebooks --overwrite`")


def test_writing_notebooks_never_replaces_without_overwrite(tmp_path, capsys):
    from clearformer.cli import main

    assert main(["learn", "--notebooks", str(tmp_path / "nb")]) == 0
    first = tmp_path / "nb" / notebook_name(LESSONS[0])
    first.write_text("mine", encoding="utf-8")
    assert main(["learn", "--notebooks", str(tmp_path / "nb")]) == 2
    assert "--overwrite" in capsys.readouterr().err and first.read_text(encoding="utf-8") == "mine"
    assert len(write_notebooks(tmp_path / "nb", overwrite=True)) == len(LESSONS)


def page_inside(fragment: str) -> str:
    match = re.fullmatch(r'<iframe srcdoc="(.*?)" sandbox="allow-scripts".*</iframe>', fragment, re.DOTALL)
    assert match, fragment[:200]
    return html.unescape(match.group(1))


def test_a_walkthrough_renders_inline_from_the_pages_own_code_offline():
    walk = run_example("i-love-you")[0]
    fragment = walk._repr_html_()
    page = page_inside(fragment)
    assert page.startswith("<!doctype html>") and '<script type="application/json" id="cf-data">' in page
    assert "Clearformer" in page and "cf-lesson" in page           # walkthrough.js and lessons.js, inlined
    assert not REMOTE.search(fragment) and not REMOTE.search(page)
    assert "<script src=" not in page and "<link rel=\"stylesheet\"" not in page


@pytest.fixture(scope="module")
def kernel(toy_runs, tmp_path_factory):
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")  # the session's sandbox (CLEARFORMER_CACHE: the toy model)
    manager.start_kernel(cwd=str(tmp_path_factory.mktemp("kernel")), env=dict(os.environ))
    yield manager
    manager.shutdown_kernel(now=True)


def test_a_notebook_executes_from_an_empty_folder_with_no_model(tmp_path):
    """As a newcomer opens one: the kernel starts in an empty folder, no toy model anywhere; the notebook
    trains it (in a child process: the kernel's gradients are off) into the cache and runs to its end."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    (tmp_path / "here").mkdir()
    env = {**os.environ, "CLEARFORMER_CACHE": str(tmp_path / "cache"), "CLEARFORMER_RUNS": str(tmp_path / "runs")}
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path / "here"), env=env)
    try:
        notebook = nbformat.reads(notebook_text(LESSONS[3]), as_version=4)
        NotebookClient(notebook, km=manager, timeout=300, kernel_name="python3").execute()
    finally:
        manager.shutdown_kernel(now=True)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not any(o.output_type == "error" for o in outputs)
    assert "training one into" in "".join(o.get("text", "") for o in outputs)
    assert (tmp_path / "cache" / "toy-translate" / "model.safetensors").exists()
    # Nothing but the lesson's own exercise: its starter file, written by the exercise cell for the learner.
    assert not (tmp_path / "runs").exists()
    assert [p.name for p in (tmp_path / "here").iterdir()] == ["attention.py"]


def test_every_notebook_executes(kernel):
    from nbclient import NotebookClient

    for item in LESSONS:
        notebook = nbformat.reads(notebook_text(item), as_version=4)
        notebook.cells.insert(0, new_code_cell("%reset -f"))
        NotebookClient(notebook, km=kernel, timeout=180, kernel_name="python3").execute()
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        outputs = [cell.outputs for cell in code]
        assert not any(o.output_type == "error" for cell in outputs for o in cell), item.number
        snippet_text = "".join(o.text for o in outputs[1] if o.output_type == "stream")
        assert snippet_text == run_snippet(item.snippet).output, item.number   # the same code, the same output
        if item.extra.get("show") in TABLE_ONLY:   # lessons 13, 16: another model reads the sentence (its table)
            table = "".join(o.text for o in outputs[2] if o.output_type == "stream")
            assert ("BEFORE the causal mask" if item.number == 13 else "The SSRU of decoder layer 0") in table
        else:
            shown = [o for o in outputs[2] if o.output_type == "execute_result"]
            assert shown and "text/html" in shown[0].data, item.number
            page = page_inside(shown[0].data["text/html"])
            assert f"Lesson {item.number}: " in page and not REMOTE.search(page)
        asked = next(i for i, cell in enumerate(code) if "lesson.question.text()" in cell.source)
        assert asked > 2 and all("lesson.extra()" not in cell.source for cell in code[asked:])  # the table first
        question = "".join(o.text for o in outputs[asked] if o.output_type == "stream")
        assert "Answer with" in question
        assert "Put your answer in `answer`" in "".join(o.text for o in outputs[asked + 1] if o.output_type == "stream")
        if not any(e.lesson == item.number for e in EXERCISES) and item.number != 15:   # its exercise, named last
            assert f"clearformer learn exercise {item.exercise}" in notebook.cells[-1].source
        last = "".join(o.get("text", "") for o in outputs[-1] if o.output_type == "stream")
        if item.number == 15:      # the skeleton, checked and trained in place: its blocks are not written yet
            assert "raised NotImplementedError" in last, last
        elif any(e.lesson == item.number for e in EXERCISES):   # the starter, checked in place by the same checker
            assert "is not implemented yet" in last, last
