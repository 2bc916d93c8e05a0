"""The "why did it say that" part of the course (learn/why.py): its committed notebook is the generated one, and it
runs on the toy model, the learner's sentence through the lens, patching and attribution."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from clearformer.learn.why import NOTEBOOK, why_notebook_text, why_on_sentence

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_the_committed_notebook_is_the_generated_one():
    assert (NOTEBOOKS / NOTEBOOK).read_text(encoding="utf-8") == why_notebook_text(), (
        f"{NOTEBOOK} is stale: run `clearformer learn --notebooks notebooks --overwrite`")
    # it reads the cache's toy model (learn/toy.py), never a run under runs/: it says so
    assert "runs/toy-translate" not in why_notebook_text() and "toy-translate/" in why_notebook_text()


def test_why_on_the_learners_sentence(toy_runs):
    why = why_on_sentence("I love you", "I love music")
    assert {"lens", "patch", "attribute"} == set(why)
    restored = {p["name"]: p["restored"] for p in why["patch"]["points"]}
    assert abs(restored["encoder.output"] - 1) < 1e-6
    assert why["attribute"]["alignments"]


def test_the_notebook_executes(toy_runs, tmp_path):
    from nbclient import NotebookClient

    notebook = nbformat.reads(why_notebook_text(), as_version=4)
    os.environ["CLEARFORMER_RUNS"] = str(toy_runs)  # the kernel inherits it (the fixture's env is per test)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                   ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not any(o.output_type == "error" for o in outputs)
    assert "translation:" in "".join(o.get("text", "") for o in outputs)
