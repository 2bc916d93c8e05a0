"""Issue 41, root 3: a user's placeholder patterns are checked when given (compiled with the built-ins) and
matched within a CPU bound per input; more placeholders than reserved tokens is one line, never a silent drop.

The runaway pattern is `(a|aa)+$`: the `regex` package survives `(a+)+$` and `(a|a)*b` (issue 41's
examples) by its own safeguards, but not this one (measured: over 6 s on 31 a's).
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from conftest import one_line, run_child

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

RUNAWAY = "(a|aa)+$"
A_LINE = "a" * 60 + "b"


@pytest.fixture(scope="module")
def masking_run(tmp_path_factory):
    """A toy run that masks placeholders, with the runaway user pattern in its tokenizer.json (2 steps)."""
    from clearformer.cli import main

    run = tmp_path_factory.mktemp("hostile-mask") / "mask"
    assert main(["train", "--out", str(run), "--steps", "2", "--eval-every", "2", "--bleu-sentences", "2",
                 "--mask-placeholders", "--placeholder-pattern", RUNAWAY, "--quiet"]) == 0
    return run


@pytest.mark.parametrize("patterns, named", [(["(?i)love"], "(?i)love"),
                                             (["(?P<x>a)", "(?P<x>b)"], "(?P<x>b)"),
                                             (["x|"], "x|"),
                                             (["(unclosed"], "(unclosed")])
def test_a_pattern_that_cannot_be_joined_is_refused_when_given(patterns, named, in_process):
    argv = ["train", "--out", "run", "--steps", "2", "--mask-placeholders"]
    for pattern in patterns:
        argv += ["--placeholder-pattern", pattern]
    code, _, err = in_process(*argv)
    assert code == 2 and repr(named) in one_line(err)


@pytest.mark.parametrize("pattern", ["(?i)love", ["(?P<x>a)", "(?P<x>b)"]])
def test_a_tokenizer_json_with_such_a_pattern_is_one_line(pattern, masking_run, tmp_path, in_process):
    run = tmp_path / "run"
    shutil.copytree(masking_run, run, ignore=shutil.ignore_patterns(".clearformer-lock"))
    tokenizer = json.loads((run / "tokenizer.json").read_text())
    tokenizer["placeholder_patterns"] = pattern if isinstance(pattern, list) else [pattern]
    (run / "tokenizer.json").write_text(json.dumps(tokenizer))
    code, _, err = in_process("translate", "I love you", "--checkpoint", run)
    line = one_line(err)
    assert code == 2 and "tokenizer.json" in line and "cannot be joined" in line


def test_translate_with_a_runaway_pattern_ends_in_one_line_naming_it_and_the_line(masking_run, tmp_path):
    (tmp_path / "in.txt").write_text("I love you\n" + A_LINE + "\n")
    outcome = run_child("translate runaway pattern", ["translate", "--file", "in.txt", "--checkpoint",
                                                      str(masking_run)], tmp_path, seconds=90)
    line = one_line(outcome)
    assert "in.txt:2" in line and repr(RUNAWAY) in line and "aaaa" in line, line


def test_training_on_a_corpus_line_the_pattern_runs_away_on_is_one_line(tmp_path):
    pairs = "".join(f"I love the cat {i}\tJ'aime le chat {i}\n" for i in range(30)) + f"{A_LINE}\t{A_LINE}\n"
    (tmp_path / "pairs.tsv").write_text(pairs)
    outcome = run_child("train runaway pattern", ["train", "--tsv", "pairs.tsv", "--out", "run", "--steps", "2",
                                                  "--mask-placeholders", "--placeholder-pattern", RUNAWAY,
                                                  "--quiet"], tmp_path, seconds=90)
    line = one_line(outcome)
    assert "training pair" in line and repr(RUNAWAY) in line, line


def test_more_placeholders_than_reserved_tokens_is_one_line_naming_the_limit(masking_run, in_process):
    code, out, err = in_process("translate", "I love " + " ".join(["%s"] * 40), "--checkpoint", masking_run)
    assert code == 2 and out == "" and "40 placeholders" in one_line(err) and "32 reserved tokens" in err


def test_thirty_two_placeholders_all_come_back(masking_run, in_process):
    sentence = "I love " + " ".join(f"%{i}$s" for i in range(1, 33))
    code, out, err = in_process("translate", sentence, "--checkpoint", masking_run)
    assert code == 0, err
    assert all(out.count(f"%{i}$s") == 1 for i in range(1, 33)), out  # the copy constraint: each exactly once


def test_the_server_masks_off_the_event_loop_and_answers_400(masking_run, monkeypatch):
    from fastapi.testclient import TestClient

    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import Explainer, load

    estimate = Explainer.estimate
    loops = []

    def recording(self, *args):
        try:
            loops.append(asyncio.get_running_loop())
        except RuntimeError:
            loops.append(None)  # no event loop in this thread: a worker thread
        return estimate(self, *args)

    monkeypatch.setattr(Explainer, "estimate", recording)
    client = TestClient(create_app(load(masking_run)), base_url="http://127.0.0.1:8000",
                        raise_server_exceptions=False)
    response = client.post("/api/explain", json={"sentence": A_LINE})
    assert response.status_code == 400, response.text
    assert repr(RUNAWAY) in response.json()["error"] and "\n" not in response.json()["error"]
    assert loops == [None]
