"""Issue 41, root 1: the why tools ask the model what it has (model/layered.py's `LayeredModel`), and on a model
without layers to read (the GRU baseline, `train --arch rnn`) refuse in one line naming its kind; /api/why
answers 400 with that line, before anything is queued."""

from __future__ import annotations

import pytest
from conftest import one_line

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

GRU = "the GRU baseline (train --arch rnn)"


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory):
    from clearformer.cli import main

    run = tmp_path_factory.mktemp("hostile-gru") / "gru"
    assert main(["train", "--arch", "rnn", "--out", str(run), "--steps", "2", "--eval-every", "2",
                 "--bleu-sentences", "2", "--quiet"]) == 0
    return run


@pytest.mark.parametrize("argv", [["lens", "I love you"], ["patch", "I love you", "I like you"],
                                  ["attribute", "I love you", "--steps", "4"],
                                  ["attribute", "I love you", "--method", "attention"],
                                  ["lens", "I love you", "--format", "json", "-o", "out.json"]])
def test_the_why_tools_on_a_gru_run_are_one_line_naming_the_model(argv, gru_run, tmp_path, in_process):
    code, out, err = in_process(*argv, "--checkpoint", gru_run)
    line = one_line(err)
    assert code == 2 and out == "" and GRU in line and "reads a Transformer's layers" in line, line
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("body", [{"tool": "lens", "sentence": "I love you"},
                                  {"tool": "patch", "sentence": "I love you", "corrupted": "I like you"},
                                  {"tool": "attribute", "sentence": "I love you"}])
def test_api_why_on_a_gru_run_is_400_with_that_line(body, gru_run):
    from fastapi.testclient import TestClient

    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    client = TestClient(create_app(load(gru_run)), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    response = client.post("/api/why", json=body)
    assert response.status_code == 400, response.text
    assert GRU in response.json()["error"] and "\n" not in response.json()["error"]


def test_the_transformer_and_the_language_model_implement_the_interface_the_gru_does_not(toy_run, lm_run, gru_run):
    from clearformer.load import load_model
    from clearformer.model.layered import LayeredModel

    kinds = {name: isinstance(load_model(run)[0], LayeredModel)
             for name, run in (("transformer", toy_run), ("lm", lm_run), ("gru", gru_run))}
    assert kinds == {"transformer": True, "lm": True, "gru": False}
