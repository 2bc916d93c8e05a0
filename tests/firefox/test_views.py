"""Every view on Firefox's en-pt student, as a user runs it on the imported run: translate (and --ablate,
--shortlist off, --beam), evaluate, explain (terminal with the SSRU's steps, JSON, --html, --beam), lens,
patch, attribute, serve and info."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clearformer.cli import main


@pytest.fixture()
def run(firefox_runs, monkeypatch, tmp_path):
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    return str(firefox_runs["en-pt"])


def output(capsys, argv: list[str]) -> str:
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_translate_and_its_switches(run, engine, capsys):
    assert output(capsys, ["translate", "I love you.", "--checkpoint", run]).strip() == \
        engine("en-pt").translate("I love you.")
    assert output(capsys, ["translate", "I love you.", "--checkpoint", run, "--shortlist", "off"]).strip()
    assert output(capsys, ["translate", "I love you.", "--checkpoint", run, "--beam", "4"]).strip()
    ablated = output(capsys, ["translate", "The cat is on the table.", "--checkpoint", run, "--ablate",
                              "decoder.layers.0.cross_attention.head.0"])
    assert ablated.strip()


def test_explain_shows_the_ssru_as_steps_with_their_equations(run, capsys, tmp_path):
    out = output(capsys, ["explain", "I love you.", "--checkpoint", run])
    for title, formula in (("SSRU forget gate", "f_t = σ(x_t · W_f + b_f)"),
                           ("SSRU cell", "c_t = f_t ⊙ c_(t-1) + (1 − f_t) ⊙ x̃_t")):
        assert title in out and formula in out
    walk = json.loads(output(capsys, ["explain", "I love you.", "--checkpoint", run, "--format", "json"]))
    titles = {step["title"] for step in walk["steps"]}
    assert {"SSRU candidate", "SSRU forget gate", "SSRU cell", "SSRU output", "Start vector"} <= titles
    assert walk["source_tokens"][-1] == "</s>" and walk["result"] == "Eu te amo."
    positions = [step for step in walk["steps"] if step["name"] == "src_embed.positions.PE"]
    assert positions and "10000^(i/(d/2-1))" in positions[0]["formula"]  # Marian's sinusoid, not the paper's
    page = tmp_path / "page.html"
    output(capsys, ["explain", "I love you.", "--checkpoint", run, "--html", str(page)])
    assert "SSRU forget gate" in page.read_text(encoding="utf-8")
    beam = output(capsys, ["explain", "I love you.", "--checkpoint", run, "--beam", "3"])
    assert "Eu te amo." in beam


def test_lens_patch_attribute(run, capsys):
    lens = output(capsys, ["lens", "I love you.", "--checkpoint", run])
    assert "▁Eu" in lens
    patch = output(capsys, ["patch", "I love you.", "I love them.", "--checkpoint", run])
    assert "decoder.layers.1.cross_attention" in patch
    attribute = output(capsys, ["attribute", "I love you.", "--checkpoint", run])
    assert "alignments" in attribute or "▁love" in attribute


def test_evaluate_and_info(run, capsys, tmp_path):
    split = tmp_path / "test.tsv"
    split.write_text("I love you.\tEu te amo.\nThe cat is on the table.\tO gato está na mesa.\n", encoding="utf-8")
    out = output(capsys, ["evaluate", "--checkpoint", run, "--data", str(split), "--output", str(tmp_path / "h")])
    assert "BLEU" in out and "100.0" in out
    info = output(capsys, ["info", "--checkpoint", run])
    assert "16,907,265" in info and "layers=6+2" in info and "SSRU" in info


def test_serve_explains_it(run):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    client = TestClient(create_app(load(run)), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    response = client.post("/api/explain", json={"sentence": "I love you."})
    assert response.status_code == 200
    walk = response.json()
    assert walk["result"] == "Eu te amo." and any(step["title"] == "SSRU cell" for step in walk["steps"])


def test_the_position_figure_names_marians_sinusoid(run):
    """`explain --plots` draws the table the model adds: Marian's (every sine, then every cosine; timescales from
    1 to 10000), recognised from the recorded values, not called a learned table."""
    from clearformer.explain.plots import positional_encoding_figure, sinusoid_of
    from clearformer.explain.translation import explain_translation
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(run)
    walk = explain_translation(model, tokenizer, "I love you.")
    recorded = next(step for step in walk.steps if step.name == "src_embed.positions.PE")
    assert sinusoid_of(np.asarray(recorded.matrices[0].values, dtype=float)) == ("halves", "tensor2tensor")
    figure = positional_encoding_figure(walk)
    assert "i/(d/2-1)" in figure._suptitle.get_text()
