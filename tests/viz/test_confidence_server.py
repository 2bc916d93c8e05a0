"""The page's confidence (serve/confidence.py): the payload the server sends with a translation's walkthrough.

Its numbers are those `translate --confidence --format json` prints (quality/fronts.py `as_json` of the one
translator's record), every word carries the steps of its pieces, and the step of its weakest piece is the step
the lens and the attribution the page opens show that piece at (greedy and beam)."""

from __future__ import annotations

import json
import shutil

import pytest
from test_viz_server import local_client

from clearformer.explain.why import lens_report
from clearformer.generate import DecodingOptions
from clearformer.quality.estimate import Confidence
from clearformer.quality.estimator import WEIGHTS_FILE, Weights
from clearformer.quality.fronts import as_json
from clearformer.serve.app import create_app
from clearformer.serve.explainer import load

SENTENCE = "I love you"


def build_wordy(tiny_checkpoint, directory):
    """The tiny random checkpoint with <eos> made unlikely (its output bias -20): on every seed it writes
    words up to its length limit (with <eos> as likely as the rest, one seed's model ends at once and leaves
    nothing to colour)."""
    import torch

    from clearformer.load import load_model
    from clearformer.store.checkpoint import save_model

    model, tokenizer, _ = load_model(tiny_checkpoint)
    with torch.no_grad():
        model.output.linear.bias[tokenizer.eos_id] = -20.0
    save_model(directory, model, tokenizer, {"note": "random weights, <eos> unlikely, for tests"})
    return directory


@pytest.fixture(scope="module")
def wordy_checkpoint(tiny_checkpoint, tmp_path_factory):
    return build_wordy(tiny_checkpoint, tmp_path_factory.mktemp("confidence") / "wordy")


@pytest.fixture(scope="module")
def loaded(wordy_checkpoint):
    return load(wordy_checkpoint)


def translated(loaded, text: str, options: DecodingOptions, weights=None) -> dict:
    """What `translate --confidence --format json` prints for `text` (its one line), by its own functions."""
    [record] = loaded.translator.translate([text], options, confidence=Confidence(weights))
    return as_json(record)


def why(loaded, tool: str, sentence: str, beam: int, method: str = "") -> dict:
    """The lens or the attribution the page opens for `sentence` (POST /api/why's own answer, serve/why.py: the
    server's decoding rules and the run's, the page's beam)."""
    from clearformer.serve.explainer import Explainer
    from clearformer.serve.why import why_answer

    return json.loads(why_answer(Explainer(loaded), tool, "sentence", sentence, "", method, beam))


def check_words(loaded, payload: dict, options: DecodingOptions) -> None:
    """Every word's steps are its pieces' positions; its weakest step is where the lens and attribution the page
    opens for its sentence chose that piece."""
    for index, sentence in enumerate(payload["sentences"]):
        words = [w for w in payload["words"] if w["sentence"] == index]
        chosen = [step["chosen"] for step in why(loaded, "lens", sentence, options.beam)["steps"]]
        steps = [t for w in words for t in w["steps"]]
        assert steps == list(range(len(steps)))  # every output piece (<eos> aside), in order, once
        attribution = why(loaded, "attribute", sentence, options.beam, "attention")
        for word in words:
            assert word["weakest"] in word["steps"]
            assert chosen[word["weakest"]] == word["weakest_piece"]
            assert attribution["target_tokens"][word["weakest"]] == word["weakest_piece"]
            # a word's confidence is the geometric mean of its pieces' probabilities: never under its weakest's
            assert word["weakest_probability"] <= word["confidence"] + 1e-4
            if len(word["steps"]) == 1:
                assert abs(word["weakest_probability"] - word["confidence"]) <= 1e-4


@pytest.mark.parametrize("beam", [1, 3])
def test_payload_is_translate_format_json_with_steps(loaded, beam):
    options = DecodingOptions(beam=beam).check()
    payload = loaded.confidence(SENTENCE, options)
    expected = translated(loaded, SENTENCE, options)
    assert payload["confidence"] == expected["confidence"]
    assert [(w["word"], w["confidence"]) for w in payload["words"]] == [
        (w["word"], w["confidence"]) for w in expected["words"]]
    assert payload["beam"] == beam and payload["linked"] and payload["sentences"] == [SENTENCE]
    assert len(payload["words"]) >= 2
    assert payload["fitted"] is False and "no fitted confidence weights" in payload["about"]
    assert 0 < payload["threshold"] < 1
    check_words(loaded, payload, options)


@pytest.mark.slow  # seconds: -m 'not slow' skips it (pyproject)
def test_payload_of_an_input_cut_into_sentences(loaded):
    text = " ".join(["I love you the cat ."] * 6)  # 36 words: `translate` cuts it into its sentences
    options = DecodingOptions().check()
    payload = loaded.confidence(text, options)
    assert len(payload["sentences"]) > 1
    expected = translated(loaded, text, options)
    assert [w["confidence"] for w in payload["words"]] == [w["confidence"] for w in expected["words"]]
    assert {w["sentence"] for w in payload["words"]} == set(range(len(payload["sentences"])))
    check_words(loaded, payload, options)


def test_payload_with_fitted_weights(wordy_checkpoint, tmp_path):
    run = shutil.copytree(wordy_checkpoint, tmp_path / "fitted")
    weights = Weights(("bergamot", "min_log_prob"), (-1.0, -2.0), (0.5, 1.0), (1.5, 0.5), 0.25,
                      {"pairs": str(tmp_path / "valid.tsv")})
    weights.save(run / WEIGHTS_FILE)
    fitted = load(run)
    options = DecodingOptions().check()
    payload = fitted.confidence(SENTENCE, options)
    assert payload["fitted"] is True
    assert payload["confidence"] == translated(fitted, SENTENCE, options, weights)["confidence"]
    assert "fitted" in payload["about"] and "valid.tsv" in payload["about"] and str(tmp_path) not in payload["about"]


@pytest.fixture(scope="module")
def client(wordy_checkpoint):
    return local_client(create_app(load(wordy_checkpoint)))


@pytest.mark.slow
def test_routes_send_it(client, loaded):
    explained = client.post("/api/explain", json={"sentence": SENTENCE}).json()
    assert explained["confidence"] == loaded.confidence(SENTENCE, DecodingOptions().check())
    beam = client.post("/api/whatif", json={"sentence": SENTENCE, "beam": 2}).json()
    assert beam["confidence"] == loaded.confidence(SENTENCE, DecodingOptions(beam=2).check())
    ablated = client.post("/api/whatif", json={"sentence": SENTENCE,
                                               "ablate": ["decoder.layers.0.cross_attention.head.0"]}).json()
    assert ablated["confidence"]["linked"] is False and "interventions" in ablated["confidence"]["unlinked"]
    lens = client.post("/api/why", json={"tool": "lens", "sentence": SENTENCE, "beam": 2}).json()
    assert lens["steps"] == lens_report(*loaded_pair(loaded), SENTENCE,
                                        options=DecodingOptions(beam=2).check())["steps"]
    refused = client.post("/api/why", json={"tool": "patch", "sentence": SENTENCE, "corrupted": "I love cat",
                                            "beam": 2})
    assert refused.status_code == 400 and "beam applies to" in refused.json()["error"]
    example = client.post("/api/explain", json={"example": "i-love-you"}).json()
    assert "confidence" not in example  # a seed example is not a translation of the loaded model


def loaded_pair(loaded):
    return loaded.model, loaded.tokenizer


def test_payload_of_the_gru_baseline(tmp_path):
    """A model without layers to read (the GRU baseline) gets its confidence (the forced pass reads no lens and no
    cross-attention), and its words say why they do not link to the lens and attribution."""
    import torch
    from seeds import seed

    from clearformer.config import ModelConfig
    from clearformer.model.build import build_model
    from clearformer.store.checkpoint import save_model
    from clearformer.tokenize import SPECIALS, WordTokenizer

    tokenizer = WordTokenizer(list(SPECIALS) + "I love you the cat Je t' aime le chat".split())
    tokenizer.source_eos = True
    torch.manual_seed(seed(0))
    model = build_model(ModelConfig(src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                                    n_encoder_layers=1, n_decoder_layers=1, max_len=12, architecture="rnn"))
    gru = load(save_model(tmp_path / "gru", model, tokenizer, {"note": "random weights, for tests"}))
    options = DecodingOptions().check()
    payload = gru.confidence(SENTENCE, options)
    expected = translated(gru, SENTENCE, options)
    assert payload["confidence"] == expected["confidence"]
    assert [w["confidence"] for w in payload["words"]] == [w["confidence"] for w in expected["words"]]
    assert payload["linked"] is False and "GRU baseline" in payload["unlinked"]


@pytest.mark.slow
@pytest.mark.parametrize("beam", [1, 2])
def test_what_if_confidence_is_translate_ablate_format_json(wordy_checkpoint, capsys, monkeypatch, tmp_path, beam):
    """A what-if rerun's confidence is `translate --ablate NAME --beam K --format json`'s (the command run here)."""
    from clearformer.cli import main
    from clearformer.serve.explainer import Explainer
    from clearformer.serve.whatif import whatif_answer

    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    name = "decoder.layers.0.cross_attention.head.0"
    assert main(["translate", "--checkpoint", str(wordy_checkpoint), "--ablate", name, "--beam", str(beam),
                 "--format", "json", SENTENCE]) == 0
    expected = json.loads(capsys.readouterr().out.splitlines()[0])
    page = json.loads(whatif_answer(Explainer(load(wordy_checkpoint)), "sentence", SENTENCE, (name,), beam))
    assert page["confidence"]["confidence"] == expected["confidence"]
    assert [(w["word"], w["confidence"]) for w in page["confidence"]["words"]] == [
        (w["word"], w["confidence"]) for w in expected["words"]]
    assert page["confidence"]["linked"] is False
