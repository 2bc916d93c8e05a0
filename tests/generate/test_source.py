"""generate/source.py: the one check of a source sentence (translate, explain, serve agree); the
source's <eos>, when the run appends one, counts toward the model's maximum length."""

from __future__ import annotations

import pytest

from clearformer.errors import UserError
from clearformer.generate.source import check_source
from clearformer.tokenize import SPECIALS, WordTokenizer

TOKENIZER = WordTokenizer(list(SPECIALS) + "I love you the cat".split())


def tokenizer(source_eos: bool) -> WordTokenizer:
    """The tokenizer of a run trained with or without <eos> after every source."""
    words = WordTokenizer(list(SPECIALS) + "I love you the cat".split())
    words.source_eos = source_eos
    return words


@pytest.mark.parametrize("source_eos", [False, True])
def test_the_length_limit_counts_the_sources_eos(source_eos):
    fits = " ".join(["cat"] * (6 - int(source_eos)))
    ids = check_source(tokenizer(source_eos), fits, 6)
    assert len(ids) == 6 and (ids[-1] == TOKENIZER.eos_id) == source_eos
    with pytest.raises(UserError, match=r"sentence of 7 tokens.* is longer than the model's maximum length \(6\)"):
        check_source(tokenizer(source_eos), fits + " cat", 6)


@pytest.mark.parametrize("text, message", [("", "empty sentence"), ("   ", "empty sentence"),
                                           ("zebra okapi", "every word is unknown"),
                                           ("cat \udcff", "not UTF-8 text")])
@pytest.mark.parametrize("source_eos", [False, True])
def test_bad_sentences_are_one_line_errors_naming_the_place(text, message, source_eos):
    with pytest.raises(UserError, match=f"^input.txt:2: {message}"):
        check_source(tokenizer(source_eos), text, 10, where="input.txt:2")


def test_unknown_words_among_known_ones_are_a_warning():
    warnings = []
    assert check_source(TOKENIZER, "I love zebras", 10, warn=warnings.append) == TOKENIZER.encode("I love zebras")
    assert warnings == ["unknown word(s) translated as <unk>: zebras"]
