"""The glossary decoding rule (generate/glossary.py): every term of a source is written, whole, in the variant its
place asks for, by greedy decoding and beam search alike; a term that cannot be placed is a note, never dropped."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from gen_helpers import SENTENCES, random_model

from clearformer.generate import DecodingOptions, beam_search, greedy_decode, search_tokens
from clearformer.generate.glossary import (
    GlossaryConstraint,
    TermBatch,
    TermPieces,
    glossary_notes,
    plan_terms,
    term_pieces,
    word_starts,
)
from clearformer.generate.result import NoteKind
from clearformer.generate.translator import PyTorchTranslator
from clearformer.glossary import Glossary, Term, parse_tsv
from clearformer.tokenize import WordTokenizer

EOS = 3


def one_term(pieces=(5, 6), initial=(7, 6), triggers=(9,)) -> TermPieces:
    return TermPieces(Term("x", "y"), (tuple(pieces), tuple(initial)), tuple(triggers))


def rule(*plans, ends=(), limits=None) -> GlossaryConstraint:
    return GlossaryConstraint(TermBatch(tuple(plans), tuple(ends)), EOS, limits)


def test_a_term_started_is_written_whole():
    constraint = rule((one_term(),))
    constraint.chose(torch.tensor([4]))  # a first word: the next one is mid-sentence
    logits = torch.zeros(1, 12)
    logits[0, 5] = 3.0  # the model itself starts the term
    assert int(constraint(logits.clone(), 1).argmax()) == 5
    constraint.chose(torch.tensor([5]))
    logits = torch.zeros(1, 12)
    logits[0, 10] = 9.0  # it would rather go elsewhere: the term's second piece comes
    out = constraint(logits.clone(), 2)
    assert int(out.argmax()) == 6 and torch.isinf(out[0, 10])
    constraint.chose(torch.tensor([6]))
    assert not bool(constraint.owed.any())  # whole: nothing owed, the rule lets go
    logits = torch.zeros(1, 12)
    logits[0, EOS] = 5.0
    assert int(constraint(logits.clone(), 3).argmax()) == EOS


def test_eos_waits_for_an_owed_term_and_the_sentence_start_takes_the_capital():
    constraint = rule((one_term(),))
    logits = torch.zeros(1, 12)
    logits[0, EOS] = 5.0
    out = constraint(logits.clone(), 0)
    assert int(out.argmax()) == 7  # step 0 starts a sentence: the capitalised variant's first piece
    constraint.chose(torch.tensor([4]))
    out = constraint(logits.clone(), 1)
    assert int(out.argmax()) == 5 and torch.isinf(out[0, EOS])  # mid-sentence: as written


def test_after_a_sentence_end_the_capitalised_variant_starts():
    constraint = rule((one_term(),), ends=(11,))
    constraint.chose(torch.tensor([11]))  # "." : the next word starts a sentence
    logits = torch.zeros(1, 12)
    logits[0, 9] = 4.0  # the model's own word for the term (a trigger)
    out = constraint(logits.clone(), 1)
    assert int(out.argmax()) == 7 and torch.isinf(out[0, 9])


def test_the_models_own_word_gives_way_to_the_glossarys():
    constraint = rule((one_term(),))
    constraint.chose(torch.tensor([4]))
    logits = torch.zeros(1, 12)
    logits[0, 9], logits[0, 5] = 4.0, -2.0  # the trigger is best, the term's piece far below
    out = constraint(logits.clone(), 1)
    assert torch.isinf(out[0, 9]) and int(out.argmax()) == 5 and float(out[0, 5]) == 4.0


def test_a_row_with_only_room_for_its_term_writes_it():
    constraint = rule((one_term(),), limits=torch.tensor([6]))
    constraint.chose(torch.tensor([4]))
    logits = torch.zeros(1, 12)
    logits[0, 8] = 5.0
    assert int(constraint(logits.clone(), 3).argmax()) == 8  # 3 left, 2 owed: room enough
    assert int(constraint(logits.clone(), 4).argmax()) == 5  # 2 left: the term now


def test_select_follows_the_hypotheses():
    constraint = rule((one_term(),), (one_term((8,), (8,), ()),))
    constraint.chose(torch.tensor([4, 8]))  # row 1 wrote its one-piece term
    constraint.select(torch.tensor([1, 1, 0]))
    assert constraint.owed[:, 0].tolist() == [False, False, True]


@pytest.fixture(scope="module")
def tokenizer() -> WordTokenizer:
    return WordTokenizer.build(SENTENCES)


def test_term_pieces_and_plans(tokenizer):
    term = Term("dog", "le chat")
    pieces = term_pieces(tokenizer, term, rendering="tu aimes la musique", starts=word_starts(tokenizer))
    assert pieces.variants[0] == tuple(tokenizer.encode("le chat"))
    assert pieces.variants[1] == pieces.variants[0]  # "Le" is not in the vocabulary: as written at a start too
    assert tokenizer.token_to_id("musique") in pieces.triggers and tokenizer.token_to_id("la") not in pieces.triggers
    assert term_pieces(tokenizer, Term("dog", "Hund")) is None  # unwritable: left to the notes
    glossary = Glossary((term, Term("bread", "musique")))
    plans = plan_terms(tokenizer, glossary, ["the DOG sleeps", "we eat bread", "I love you"], {})
    assert [[p.term.target for p in plan] for plan in plans] == [["le chat"], ["musique"], []]


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_term_is_written_greedy_and_beam(tokenizer, beam, seed):
    """A random model never writes the terms on its own; with the glossary every translation holds each term
    of its source, whole, in a mixed batch with sentences that owe none."""
    model = random_model(len(tokenizer), seed=seed)
    glossary = parse_tsv("dog\tle chat\nbread\tmusique\nlove\tnous mangeons du pain\n")
    sources = ["the dog sleeps", "we eat bread", "I love the cat", "I love you", "you like music ."]
    options = DecodingOptions(beam=beam, max_extra=12)
    translator = PyTorchTranslator(model, tokenizer)
    free = [t.text for t in translator.translate(sources, options)]
    records = translator.translate(sources, options, glossary=glossary)
    held = [t.text for t in records]
    for source, loose, text, record in zip(sources, free, held, records, strict=True):
        for term in glossary.terms_in(source):
            assert term.target in text, (source, text)
        # (a random model may write <unk> or a foreign numeral: the post-check's notes, generate/checks.py)
        assert glossary_notes(glossary, source, text) == ()
        assert not [note for note in record.notes if note.kind is NoteKind.GLOSSARY_TERM_MISSING]
        if not glossary.terms_in(source):
            assert text == loose  # a sentence owing nothing decodes as without the glossary
    assert free != held


def test_a_term_with_no_room_is_a_note(tokenizer):
    """Its length limit comes before the term: the translation says so (never silently dropped)."""
    model = random_model(len(tokenizer), seed=0)
    glossary = parse_tsv("dog\tnous mangeons du pain le chat\n")
    record = PyTorchTranslator(model, tokenizer).translate(["the dog sleeps"], DecodingOptions(max_new=3),
                                                           glossary=glossary)[0]
    notes = glossary_notes(glossary, "the dog sleeps", record.text)
    assert [note.kind for note in notes] == [NoteKind.GLOSSARY_TERM_MISSING] and record.notes == notes
    assert "'dog' -> 'nous mangeons du pain le chat'" in notes[0].detail


def test_no_term_in_the_batch_costs_nothing(tokenizer):
    model = random_model(len(tokenizer), seed=0)
    src = torch.tensor([tokenizer.encode("I love you")])
    tokens = replace(search_tokens(model, tokenizer), terms=TermBatch(((),)))
    assert greedy_decode(model, src, DecodingOptions(), tokens).sequences() == \
        greedy_decode(model, src, DecodingOptions(), search_tokens(model, tokenizer)).sequences()
    assert beam_search(model, src, DecodingOptions(beam=3), tokens).sequences() == \
        beam_search(model, src, DecodingOptions(beam=3), search_tokens(model, tokenizer)).sequences()


def test_the_opening_of_the_models_rendering_gives_way_where_the_term_opens_the_source():
    """transmission-gtk's "Adding" -> "Adição Adicionando", "Downloading" -> "O Baixando" (issue 48): the model
    opened its own rendering with a piece too short to trigger ("▁A" of "▁A" "dição", the article "▁O"), so the term
    came after it. The rendering's first piece (an anchor) triggers at the first step only; later it is a word
    like any other."""
    term = replace(one_term(triggers=(9,)), anchors=(8,))
    constraint = rule((term,))
    logits = torch.zeros(1, 12)
    logits[0, 8] = 4.0  # the model opens with its own rendering's first piece
    out = constraint(logits.clone(), 0)
    assert int(out.argmax()) == 7 and torch.isinf(out[0, 8])  # the term instead, capitalised at the start
    later = rule((term,))
    later.chose(torch.tensor([4]))
    out = later(logits.clone(), 1)
    assert int(out.argmax()) == 8  # mid-sentence the anchor ("o", "a") is no trigger


def test_anchors_are_planned_only_where_the_term_opens_the_source(tokenizer):
    glossary = Glossary((Term("dog", "le chat"),))
    opened, inside = plan_terms(tokenizer, glossary, ["Dog sleeps", "the dog sleeps"], {"dog": ("la musique",)})
    assert opened[0].anchors == (tokenizer.token_to_id("la"),) and inside[0].anchors == ()
    assert opened[0].triggers == inside[0].triggers
