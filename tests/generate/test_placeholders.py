"""Placeholders (issue 13): found in text, kept as single SentencePiece pieces, copied exactly by
the decoding constraint, scored by `evaluate` with the length ratio by reference length."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest
import torch
from gen_helpers import random_model

from clearformer.errors import UserError
from clearformer.evaluate import length_buckets, score_corpus
from clearformer.generate import DecodingOptions, search_tokens
from clearformer.generate.beam import beam_search
from clearformer.generate.constraints import PlaceholderConstraint
from clearformer.generate.greedy import greedy_decode
from clearformer.tokenize.placeholders import find, frequent_placeholders, placeholder_score, same_placeholders
from clearformer.tokenize.subword import JSON_FILE, SentencePieceTokenizer


@pytest.mark.parametrize("text, expected", [
    ("Delete %d files from %s?", ["%d", "%s"]),
    ("%1$s of %2$s, %5.2f%%, %ld, %zu", ["%1$s", "%2$s", "%5.2f", "%ld", "%zu"]),
    ("Hello %(name)s, see {0} and {} and {user.name} and ${HOME}", ["%(name)s", "{0}", "{}", "{user.name}",
                                                                   "${HOME}"]),
    ("Press %MOD1+%MOD2 in %PRODUCTNAME; GCC says %qs; Qt says %1", ["%MOD1", "%MOD2", "%PRODUCTNAME", "%qs",
                                                                      "%1"]),
    ("<b>Bold</b> and <a href=\"x\">link</a><br/>", ["<b>", "</b>", "<a href=\"x\">", "</a>", "<br/>"]),
    ("Tom &amp; Jerry &#160; line\\nbreak", ["&amp;", "&#160;", "\\n"]),
    ("Usage: cp <file> <dir>; 50 % done", []),  # usage metavariables are words; "50 %" is text
    # Side by side: a closing % that starts the next placeholder belongs to it (GCC's "%r%s", "%qs%qD"),
    # else masking would restore "%r%" and drop the "s"; a closing % before text closes a %-word.
    ("%r%s:%d:%R in %qs%qD, %r%.2f", ["%r", "%s", "%d", "%R", "%qs", "%qD", "%r", "%.2f"]),
    ("Run %PRODUCTNAME% now, %NAME%.", ["%PRODUCTNAME%", "%NAME%"]),
])
def test_find(text, expected):
    assert find(text) == expected


def test_score_counts_multisets_and_only_sentences_with_placeholders():
    sources = ["%s of %d", "no placeholder", "{0} and {0}", "%1 %2"]
    translations = ["%d sur %s", "rien", "{0} et", "%2 %1"]
    score = placeholder_score(sources, translations)
    assert (score.kept, score.total) == (2, 3)  # order is free, a dropped {0} is not
    assert same_placeholders("%s %s", "%s %s") and not same_placeholders("%s", "%s %s")
    assert placeholder_score(["plain"], ["texte"]).share == 1.0


def test_frequent_placeholders_by_count_without_whitespace():
    sentences = ["%s a", "%s b", "%s c", "%d a", "%d b", "%d c", "{0} once", '<a href="x">', '<a href="x">',
                 '<a href="x">']
    assert frequent_placeholders(sentences, min_count=3) == ["%d", "%s"]
    assert frequent_placeholders(sentences, min_count=1, limit=1) == ["%d"]


SENTENCES = ["Delete %d files from %s now", "Le fichier %s est %d fois plus grand", "open {0} and %s",
             "Supprimer %d fichiers de %s", "ouvrir {0} et %s"] * 40


@pytest.fixture(scope="module")
def tokenizer() -> SentencePieceTokenizer:
    return SentencePieceTokenizer.train(SENTENCES, vocab_size=300, placeholders=frequent_placeholders(SENTENCES))


def test_placeholders_are_single_pieces_and_survive_save_load(tokenizer, tmp_path):
    assert set(tokenizer.placeholders) == {"%s", "%d", "{0}"}
    assert "%s" in tokenizer.tokenize("x%sy") and "{0}" in tokenizer.tokenize("a {0} b")
    tokenizer.save(tmp_path)
    again = SentencePieceTokenizer.load(tmp_path)
    assert again.placeholder_ids == tokenizer.placeholder_ids and len(again.placeholder_ids) == 3


def test_a_tokenizer_saved_before_placeholders_loads_without_them(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    info = json.loads((tmp_path / JSON_FILE).read_text())
    del info["placeholders"]
    (tmp_path / JSON_FILE).write_text(json.dumps(info))
    assert SentencePieceTokenizer.load(tmp_path).placeholder_ids == ()
    info["placeholders"] = "%s"
    (tmp_path / JSON_FILE).write_text(json.dumps(info))
    with pytest.raises(UserError, match="must be a list of strings"):
        SentencePieceTokenizer.load(tmp_path)
    info["placeholders"] = ["%s", "%NOT_A_PIECE"]
    (tmp_path / JSON_FILE).write_text(json.dumps(info))
    with pytest.raises(UserError, match=r"tokenizer\.json: the SentencePiece model lacks .*%NOT_A_PIECE"):
        SentencePieceTokenizer.load(tmp_path)


PIECES = (5, 6, 7)  # token ids treated as placeholder pieces in the random model's vocabulary


def random_sources(count: int, seed: int) -> torch.Tensor:
    """(count, 6) random sources over ids 4..29, most holding one to three placeholder pieces."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(4, 30, (count, 6), generator=generator)


def piece_counts(ids) -> Counter:
    return Counter(int(i) for i in ids if int(i) in PIECES)


@pytest.mark.parametrize("decode", ["greedy", "beam"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_the_constraint_copies_every_piece_exactly(decode, norm_first):
    model = random_model(30, seed=3, norm_first=norm_first)
    src = random_sources(24, seed=4)

    def run(piece_ids):
        tokens = replace(search_tokens(model), placeholder_ids=tuple(piece_ids or ()))
        if decode == "greedy":
            return greedy_decode(model, src, DecodingOptions(max_extra=20), tokens)
        return beam_search(model, src, DecodingOptions(beam=3, max_extra=20), tokens)

    free, constrained = run(None), run(PIECES)
    changed = 0
    for row, (loose, exact) in enumerate(zip(free.sequences(), constrained.sequences(), strict=True)):
        wanted = piece_counts(src[row])
        produced = piece_counts(exact)
        # None invented, none doubled, none dropped: also a row that ran to its length limit wrote its
        # owed placeholders in the last steps it had.
        assert produced == wanted
        changed += loose != exact
    assert changed > 0  # the random model does not copy on its own: the constraint did the work


def test_a_sentence_without_pieces_invents_none_alone_as_in_any_batch():
    """A sentence bound by the rule (issue 48) writes no placeholder piece, whether its batch has pieces or not:
    its translation alone equals its translation beside a sentence that holds them."""
    src = torch.tensor([[8, 9, 10, 11]])
    assert PlaceholderConstraint.for_batch(src, (), eos_id=3) is None
    constraint = PlaceholderConstraint.for_batch(src, PIECES, eos_id=3)
    assert constraint is not None and not bool(constraint.remaining.any())
    free = PlaceholderConstraint.for_batch(src, PIECES, eos_id=3, owing=[False])
    assert free is None  # numerals standing in, no placeholder: nothing to bind
    model = random_model(30, seed=3)
    tokens = replace(search_tokens(model), placeholder_ids=tuple(PIECES))
    alone = greedy_decode(model, src, DecodingOptions(), tokens).sequences()
    assert not set(alone[0]) & set(PIECES)
    beside = torch.tensor([[8, 9, 10, 11, 0], [PIECES[0], 8, 9, 10, 11]])
    assert greedy_decode(model, beside, DecodingOptions(), tokens).sequences()[0] == alone[0]


def test_length_buckets_by_reference_length():
    references = ["a b c", "one two three four five six", " ".join(["w"] * 31)]
    hypotheses = ["a b c", "one two three", " ".join(["w"] * 31)]
    buckets = {b.name: b for b in length_buckets(hypotheses, references)}
    assert buckets["0-4"].sentences == 1 and buckets["0-4"].ratio == 1.0
    assert buckets["5-9"].ratio == 0.5 and buckets["30+"].sentences == 1
    result = score_corpus(hypotheses, references, sources=["%s", "plain", "x"])
    assert result.ratio == pytest.approx((3 + 3 + 31) / (3 + 6 + 31))
    assert result.placeholders.total == 1 and result.placeholders.kept == 0
    assert "length ratio" in result.summary() and "placeholders kept exactly: 0.0% (0/1" in result.summary()


def test_a_row_that_would_end_gets_its_owed_placeholder_instead():
    constraint = PlaceholderConstraint(torch.tensor([[5, 9, 3], [9, 9, 3]]), torch.tensor(PIECES), eos_id=3)
    logits = torch.zeros(2, 12)
    logits[:, 3] = 5.0  # both rows want <eos>
    logits[0, 5], logits[0, 6] = 1.0, 2.0  # row 0 owes piece 5; piece 6 is not in its source
    out = constraint(logits.clone())
    assert int(out[0].argmax()) == 5 and torch.isinf(out[0, 3]) and torch.isinf(out[0, 6])
    assert torch.isinf(out[0, 9])  # only the owed placeholder is left for that step
    assert int(out[1].argmax()) == 3  # row 1 owes nothing: it may end


def test_a_row_with_only_room_for_its_owed_placeholders_writes_them():
    src = torch.tensor([[5, 6, 9, 3], [5, 9, 9, 3]])
    constraint = PlaceholderConstraint(src, torch.tensor(PIECES), eos_id=3, limits=torch.tensor([10, 10]))
    logits = torch.zeros(2, 12)
    logits[:, 9] = 5.0  # both rows would rather write word 9 again
    logits[:, 6] = 1.0
    assert constraint(logits.clone(), t=7)[:, 9].tolist() == [5.0, 5.0]  # 3 tokens left: room enough
    out = constraint(logits.clone(), t=8)  # 2 tokens left: row 0 owes 2, row 1 owes 1
    assert int(out[0].argmax()) == 6 and torch.isinf(out[0, 9]) and not torch.isinf(out[0, 5])
    assert int(out[1].argmax()) == 9  # row 1 still has a token to spare
    out = constraint(logits.clone(), t=9)  # the last token: row 1 must write its piece 5 now
    assert int(out[1].argmax()) == 5


MARKS = (10, 11)  # the toy vocabulary's sentence-final punctuation pieces ("." and "...")


def test_an_owed_placeholder_comes_before_the_final_punctuation():
    """The source's final punctuation ends the sentence as <eos> does (issue 48: "The document is not %s valid." ->
    "O documento não é válido. %s"): while a placeholder is owed, the last sentence-final mark the source has gives
    way to it; a mark inside the line (the source's first sentence), or in a source that does not end with one,
    does not; a run of marks ("...") is one mark."""
    src = torch.tensor([[8, 5, 9, 10, 3, 0, 0], [8, 10, 9, 5, 11, 11, 3], [8, 10, 5, 9, 3, 0, 0]])
    constraint = PlaceholderConstraint.for_batch(src, PIECES, eos_id=3, final_marks=MARKS, pad_id=0)

    def step(wanted: list[int]) -> list[int]:
        logits = torch.zeros(3, 12)
        logits[torch.arange(3), torch.tensor(wanted)] = 5.0
        logits[:, 5] = 1.0  # each row's owed placeholder
        chosen = constraint(logits, 0).argmax(dim=1)
        constraint.chose(chosen)
        return chosen.tolist()

    # row 0 ends with "." (one mark): the placeholder first; row 1 has two: its first "." is inside the line;
    # row 2 does not end with a mark: its "." is text
    assert step([10, 10, 10]) == [5, 10, 10]
    assert constraint.forced.tolist() == [True, False, False]
    assert step([10, 9, 9]) == [10, 9, 9]  # row 0 paid: its mark comes
    assert step([3, 11, 11]) == [3, 5, 11]  # row 1's "..." is its last mark: the placeholder first
    assert step([3, 11, 3]) == [3, 11, 5]  # paid, the mark comes; row 2 owes at <eos> as before


def test_final_punctuation_pieces_of_a_vocabulary():
    from clearformer.generate.constraints import final_mark_pieces
    from clearformer.tokenize import WordTokenizer

    tokenizer = WordTokenizer.build(["Saved . Really ?", "loading from %s ...", "Error : 3.5 files ( a ) ."])
    marks = {tokenizer.id_to_token(index) for index in final_mark_pieces(tokenizer)}
    assert {".", "?", ":", ")"} <= marks <= {".", "?", "...", ":", ")"}  # not "3.5", "%s", "(" or a word


def test_either_form_of_a_stand_in_slot_pays_for_it():
    """sphinx's "%s() (%s class method)": the source's second stand-in is the attached "2" of "(2"; the model wrote
    the spaced "▁2" ("classe %s)") and was forbidden it, so it closed the parenthesis and the search put the
    placeholder after it (issue 48). The forms of one slot (tokenize/standins.py) pay for each other, once."""
    src = torch.tensor([[8, 6, 9, 3]])  # piece 6: slot {5, 6}'s attached form
    constraint = PlaceholderConstraint.for_batch(src, PIECES, eos_id=3, slots=[frozenset({5, 6})])
    logits = torch.zeros(1, 12)
    logits[0, 5] = 4.0  # the model prefers the spaced form
    out = constraint(logits.clone(), 0)
    assert int(out.argmax()) == 5 and torch.isinf(out[0, 7])  # 7: not in the source
    constraint.chose(torch.tensor([5]))
    out = constraint(logits.clone(), 1)
    assert torch.isinf(out[0, 5]) and torch.isinf(out[0, 6])  # paid: neither form again
    assert int(constraint.owed()[0]) == 0
