"""A translation that drops a sentence of its source is made again sentence by sentence (issue 48): the input is
cut as a long input is (generate/source.py `prepare_sources`), each sentence searched as every piece is, and the
joined translation kept where it no longer drops one; elsewhere the first translation stays, with its note.

The model drops by construction: a table of next-token probabilities (tests/generate/gen_helpers.py `TableModel`)
that writes one short sentence whatever its source, so a source of two sentences always loses one in one pass."""

from __future__ import annotations

import pytest
import torch
from gen_helpers import TableModel

from clearformer.generate import DecodingOptions
from clearformer.generate.result import NoteKind
from clearformer.generate.translator import PyTorchTranslator
from clearformer.tokenize.words import WordTokenizer

SOURCE = "Open the file. Close the window."
WORDS = ["Open the file .", "Close the window .", "Ouvrir le fichier .", "fermer"]


def one_sentence_model(tokenizer: WordTokenizer, path: list[str]) -> TableModel:
    """Writes `path` (then <eos>) whatever the source: each token's successor is the next one of the path."""
    table = torch.full((len(tokenizer), len(tokenizer)), 1e-6, dtype=torch.float64)
    previous = tokenizer.bos_id
    for word in path:
        table[previous, tokenizer.token_to_id(word)] = 1.0
        previous = tokenizer.token_to_id(word)
    table[previous, tokenizer.eos_id] = 1.0
    return TableModel(table / table.sum(dim=1, keepdim=True), max_len=64)


@pytest.fixture(scope="module")
def tokenizer() -> WordTokenizer:
    return WordTokenizer.build(WORDS)


@pytest.mark.parametrize("beam", [1, 4])
def test_a_dropped_sentence_is_translated_again_sentence_by_sentence(tokenizer, beam):
    translator = PyTorchTranslator(one_sentence_model(tokenizer, ["Ouvrir", "le", "fichier", "."]), tokenizer)
    options = DecodingOptions(beam=beam, brevity=0.0)
    [short] = translator.translate(["Open the file."], options)
    assert short.text == "Ouvrir le fichier." and not short.notes  # one sentence: nothing to retry
    [result, alone] = translator.translate([SOURCE, "Close the window."], options)
    assert result.text == "Ouvrir le fichier. Ouvrir le fichier." and not result.notes, result
    assert alone.text == "Ouvrir le fichier."  # its batch neighbour is not retried with it


def test_a_retry_that_still_drops_keeps_the_first_translation_and_its_note(tokenizer):
    translator = PyTorchTranslator(one_sentence_model(tokenizer, ["fermer"]), tokenizer)
    [result] = translator.translate([SOURCE], DecodingOptions(brevity=0.0))
    assert result.text == "fermer"  # "fermer fermer" would still be one sentence
    assert [note.kind for note in result.notes] == [NoteKind.SENTENCE_DROPPED]
