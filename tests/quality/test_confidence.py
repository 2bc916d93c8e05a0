"""The confidence (clearformer.quality): Bergamot's word features reproduced, the forced pass equal to the
search's own scores, the fitted weights' JSON, and the fronts (`translate --confidence`, `--format json`,
`--po` comments and `--min-confidence`, `confidence fit`)."""

from __future__ import annotations

import json
import math

import polib
import pytest
import torch

from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.generate import DecodingOptions
from clearformer.generate.beam import beam_search
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import search_tokens
from clearformer.generate.translator import pad_batch
from clearformer.load import load_model
from clearformer.quality.estimator import Weights, fit
from clearformer.quality.evidence import Evidence, read_evidence
from clearformer.quality.features import FEATURES, bergamot_score, word_features, word_groups
from clearformer.quality.fitting import auc_bad, spearman


class Pieces:
    """A SentencePiece-like vocabulary: id -> piece, "▁" beginning a word; id 2 is <eos>."""

    eos_id = 2
    table = {3: "▁Não", 4: "▁foi", 5: "▁poss", 6: "í", 7: "vel", 8: "▁abrir", 2: "</s>"}

    def id_to_token(self, index: int) -> str:
        return self.table[index]


def evidence_of(pieces, log_probs) -> Evidence:
    t = len(pieces)
    return Evidence((1,), tuple(pieces), torch.tensor(log_probs), torch.zeros(t), torch.zeros(t), torch.zeros(0, t),
                    torch.zeros(0, t), torch.zeros(t, 1))


def test_word_features_are_bergamots_map_bpe_to_words():
    # Não foi poss|í|vel abrir </s>: bergamot-translator's mapBPEToWords, by hand.
    log_probs = [-0.1, -0.8, -0.3, -1.2, -0.6, -0.05, -0.4]
    evidence = evidence_of([3, 4, 5, 6, 7, 8, 2], log_probs)
    groups = word_groups(Pieces(), evidence.pieces, "▁")
    assert groups == [(0,), (1,), (2, 3, 4), (5,)]
    words, overall = word_features(evidence, groups)
    assert [w.count for w in words] == [1, 1, 3, 1]
    assert words[2].mean == pytest.approx((-0.3 - 1.2 - 0.6) / 3) and words[2].min == pytest.approx(-1.2)
    assert overall == pytest.approx(sum(log_probs[:-1]) / 6)  # <eos> left out, as the C++ loop stops before it
    # UnsupervisedQE: the sentence is the mean of its words' means (here as a probability)
    assert bergamot_score(words) == pytest.approx(math.exp((-0.1 - 0.8 - 0.7 - 0.05) / 4))


def test_a_word_level_tokenizer_makes_every_token_a_word():
    evidence = evidence_of([3, 4, 5, 2], [-1.0, -2.0, -3.0, -0.5])
    assert word_groups(Pieces(), evidence.pieces, "") == [(0,), (1,), (2,)]


@pytest.mark.parametrize("beam", [1, 3])
def test_the_forced_pass_gives_the_searchs_own_log_probabilities(word_run, beam):
    model, tokenizer, _ = load_model(word_run)
    model = model.double()
    options = DecodingOptions(beam=beam, alpha=0.0, brevity=0.0, placeholders="free", repeats="free",
                              with_scores=True, min_length=0).check()
    tokens = search_tokens(model, tokenizer, options)
    sources = [tokenizer.encode("Open the file") + [tokens.eos_id], tokenizer.encode("Quit") + [tokens.eos_id]]
    search = greedy_decode if beam == 1 else beam_search
    decoded = search(model, pad_batch(sources, tokens.pad_id), options, tokens)
    evidence = read_evidence(model, tokens, sources, decoded.sequences())
    for seen, score, length in zip(evidence, decoded.scores.tolist(), decoded.lengths.tolist(), strict=True):
        ended = seen.pieces[-1] == tokens.eos_id and length == len(seen.pieces)
        total = seen.log_probs.sum() if ended else seen.log_probs[:-1].sum()  # a search cut at its limit has no <eos>
        assert float(total) == pytest.approx(score, rel=1e-5)  # the search sums in float32
        assert seen.attention.shape == (len(seen.pieces), len(seen.source))
        assert torch.allclose(seen.attention.sum(-1), torch.ones(len(seen.pieces), dtype=seen.attention.dtype),
                              atol=1e-5)
        assert seen.lens.shape == (len(model.decoder_layers()) - 1, len(seen.pieces))


def test_fitted_weights_order_as_their_target_and_round_trip_through_json(tmp_path):
    torch.manual_seed(0)
    rows = torch.randn(200, len(FEATURES), dtype=torch.float64)
    quality = torch.sigmoid(2 * rows[:, 0] - rows[:, 8])
    weights = fit(rows, quality)
    scores = [weights.score(row) for row in rows.tolist()]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert spearman(scores, quality.tolist()) > 0.95
    weights.save(tmp_path / "confidence.json")
    again = Weights.from_dict(json.loads((tmp_path / "confidence.json").read_text()), "confidence.json")
    assert [again.score(row) for row in rows.tolist()[:5]] == pytest.approx(scores[:5])


@pytest.mark.parametrize("change, message", [({"format": "x"}, "not a clearformer confidence file"),
                                             ({"features": ["nope"]}, "known feature names"),
                                             ({"stds": [0.0]}, "stds must be positive"),
                                             ({"means": ["a"]}, "means must hold 1 finite numbers")])
def test_a_bad_weights_file_is_one_line(change, message):
    data = {**Weights(("bergamot",), (0.0,), (1.0,), (1.0,), 0.0).to_dict(), **change}
    with pytest.raises(UserError, match=message):
        Weights.from_dict(data, "confidence.json")


def test_spearman_and_auc_on_known_orders():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([4, 3, 2, 1], [10, 20, 30, 40]) == pytest.approx(-1.0)
    assert auc_bad([0.1, 0.2, 0.8, 0.9], [10, 30, 60, 90]) == pytest.approx(1.0)  # bad ones score lowest
    assert auc_bad([0.5, 0.5, 0.5, 0.5], [10, 30, 60, 90]) == pytest.approx(0.5)  # ties count half
    assert auc_bad([0.9, 0.1, 0.8, 0.2], [10, 30, 60, 90]) == pytest.approx(0.5)


def test_translate_confidence_prints_a_tab_and_a_number_in_0_1(word_run, capsys):
    assert main(["translate", "--checkpoint", str(word_run), "--confidence", "Open the file",
                 "Delete %d files from %s?"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 2
    for line in lines:
        text, confidence = line.rsplit("\t", 1)
        assert 0.0 <= float(confidence) <= 1.0
    assert "no fitted confidence weights" in captured.err  # the fallback says so


def test_format_json_gives_the_words_with_theirs(word_run, capsys):
    assert main(["translate", "--checkpoint", str(word_run), "--format", "json", "--beam", "3",
                 "Delete %d files from %s?"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert 0.0 <= answer["confidence"] <= 1.0 and answer["words"]
    # the words as written, in order (a word-level tokenizer's detokenizer may glue some: "t'" "aime")
    assert "".join(w["word"] for w in answer["words"]).replace(" ", "") == answer["text"].replace(" ", "")
    assert all(0.0 <= w["confidence"] <= 1.0 for w in answer["words"])


@pytest.mark.parametrize("argv, message", [(["--min-confidence", "0.5", "Hello"], "applies to --po"),
                                           (["--min-confidence", "2", "--po", "x.po"], "between 0 and 1")])
def test_bad_confidence_options_are_one_line(word_run, capsys, argv, message):
    assert main(["translate", "--checkpoint", str(word_run), *argv]) == 2
    assert message in capsys.readouterr().err


def test_po_writes_the_confidence_and_leaves_low_entries_untranslated(word_run, tmp_path, capsys):
    template = tmp_path / "app.pot"
    template.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
                        'msgid "Open the file"\nmsgstr ""\n\nmsgid "Quit"\nmsgstr ""\n', encoding="utf-8")
    out = tmp_path / "fr.po"
    assert main(["translate", "--checkpoint", str(word_run), "--po", str(template), "--out", str(out),
                 "--confidence"]) == 0
    entries = [e for e in polib.pofile(str(out)) if e.msgid]
    scores = []
    for entry in entries:
        comment = [line for line in entry.tcomment.splitlines() if line.startswith("clearformer: confidence ")]
        assert len(comment) == 1 and entry.msgstr and "fuzzy" in entry.flags
        scores.append(float(comment[0].split()[2].rstrip(",")))
    threshold = max(scores) + 0.001  # every entry under it
    out2 = tmp_path / "fr2.po"
    assert main(["translate", "--checkpoint", str(word_run), "--po", str(template), "--out", str(out2),
                 "--min-confidence", str(threshold)]) == 0
    for entry in (e for e in polib.pofile(str(out2)) if e.msgid):
        assert entry.msgstr == "" and "fuzzy" not in entry.flags
        assert "left untranslated" in " ".join(entry.tcomment.split())  # polib wraps comments
    assert "0 entries filled" in capsys.readouterr().err.splitlines()[-1]


def test_confidence_fit_writes_json_the_translator_reads(word_run, pairs_file, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(word_run, run)
    assert main(["confidence", "fit", "--checkpoint", str(run), "--pairs", str(pairs_file)]) == 0
    data = json.loads((run / "confidence.json").read_text())
    assert data["format"] == "clearformer-confidence-1" and data["features"] == list(FEATURES)
    assert main(["confidence", "fit", "--checkpoint", str(run), "--pairs", str(pairs_file)]) == 2
    assert "--overwrite" in capsys.readouterr().err  # never replaced silently
    assert main(["translate", "--checkpoint", str(run), "--confidence", "Open the file"]) == 0
    captured = capsys.readouterr()
    assert 0.0 <= float(captured.out.rsplit("\t", 1)[1]) <= 1.0
    assert "no fitted confidence weights" not in captured.err
    assert main(["confidence", "measure", "--checkpoint", str(run), "--pairs", str(pairs_file)]) == 0
    assert "fitted" in capsys.readouterr().out

