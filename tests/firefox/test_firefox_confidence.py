"""The confidence on Firefox's student (an imported Marian model with an SSRU decoder): the forced pass reads
back the search's own log-probabilities, greedy and beam, and `translate --confidence` gives a number in
[0, 1] per sentence with the project's shipped fit (quality/shipped/, matched by the model file's sha256)."""

from __future__ import annotations

import json

import pytest

from clearformer.cli import main
from clearformer.generate import DecodingOptions
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import search_tokens
from clearformer.generate.translator import pad_batch
from clearformer.load import load_decoding_facts, load_model
from clearformer.quality.estimator import load_weights
from clearformer.quality.evidence import read_evidence
from clearformer.tokenize import encode_source

SOURCES = ["Could not open the file.", "Save changes to the document before closing?", "Quit"]


def test_the_forced_pass_reads_back_the_students_greedy_scores(firefox_runs):
    model, tokenizer, _ = load_model(firefox_runs["en-pt"])
    options = DecodingOptions(with_scores=True, brevity=0.0, shortlist="off").check()
    tokens = search_tokens(model, tokenizer, options, load_decoding_facts(firefox_runs["en-pt"], tokenizer))
    sources = [encode_source(tokenizer, s) for s in SOURCES]
    decoded = greedy_decode(model, pad_batch(sources, tokens.pad_id), options, tokens)
    evidence = read_evidence(model, tokens, sources, decoded.sequences())
    for seen, score in zip(evidence, decoded.scores.tolist(), strict=True):
        assert float(seen.log_probs.sum()) == pytest.approx(score, abs=1e-3)


@pytest.mark.parametrize("beam", ["1", "4"])
def test_translate_confidence_on_the_student(firefox_runs, capsys, beam):
    assert load_weights(firefox_runs["en-pt"]) is not None  # the shipped fit, matched by the model's sha256
    assert main(["translate", "--checkpoint", str(firefox_runs["en-pt"]), "--beam", beam, "--format", "json",
                 *SOURCES]) == 0
    captured = capsys.readouterr()
    answers = [json.loads(line) for line in captured.out.splitlines()]
    assert len(answers) == 3 and "no fitted confidence weights" not in captured.err
    for answer in answers:
        assert 0.0 <= answer["confidence"] <= 1.0
        assert " ".join(w["word"] for w in answer["words"]) == answer["text"]


def test_the_translators_shortlist_slice_does_not_change_the_confidence(firefox_runs):
    from clearformer.generate.translator import PyTorchTranslator
    from clearformer.quality.estimate import Confidence
    from clearformer.translator import load_translator

    sliced = load_translator(firefox_runs["en-pt"])  # opened as translate opens it: the shortlist as a slice
    rated = sliced.translate(SOURCES, DecodingOptions(), confidence=Confidence(None))
    model, tokenizer, _ = load_model(firefox_runs["en-pt"])
    facts = load_decoding_facts(firefox_runs["en-pt"], tokenizer)
    plain = PyTorchTranslator(model, tokenizer, facts=facts).translate(SOURCES, DecodingOptions(),
                                                                       confidence=Confidence(None))
    assert [r.text for r in rated] == [r.text for r in plain]
    assert [r.confidence for r in rated] == pytest.approx([r.confidence for r in plain], abs=1e-5)
