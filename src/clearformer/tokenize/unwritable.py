"""Spans a vocabulary cannot write, carried through translation like placeholders.

A production vocabulary (Firefox's students, Marian's opus-mt) has no piece for some characters of software
strings: `<`, `#`, `{`, `~` read as <unk> and come out as "⁇" or not at all ("-C <dir>" -> "-C  ⁇ dir>"), and
SentencePiece's normaliser writes "…" as "..." . Such a span is masked as one more placeholder (a reserved
token, or a numeral standing in for one: tokenize/standins.py), so decoding copies it exactly and restoring
puts its own characters back. A run that does not mask placeholders is left as it is.

`unwritable_spans(tokenizer, text)`: the maximal runs of characters the vocabulary cannot write (a character's
pieces decoded back differ from it), or, for a word vocabulary, its unknown words; `carry_unwritable` masks them
in a sentence already masked, as long as the reserved tokens (or stand-ins) last.

A typographic apostrophe between two letters ("don’t", "GNOME’s") is no span: it is part of a word's spelling,
which the translation replaces. Carried, it was owed, read as a numeral inside a word ("don" "1" "t"), and the
search put it where the model ended ("... nesta pasta’": BENCHMARKS.md, "Trust: corruptions ..."). The model
reads it as the ASCII apostrophe it knows (`SPELLING`); as a quote (‘%s’) it is carried.
"""

from __future__ import annotations

import re
import weakref

from clearformer.tokenize.placeholders import RESERVED_PATTERN, Masked, PlaceholderError, mask, restore

_WRITES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> {character: writable}
SPELLING = {"’": "'", "‘": "'", "ʼ": "'"}  # apostrophes inside a word, as a vocabulary without them reads them


def writes(tokenizer, character: str) -> bool:
    """Whether the vocabulary writes `character` back as itself (ASCII letters, digits and spaces always do)."""
    if character.isspace() or (character.isascii() and character.isalnum()):
        return True
    known = _WRITES.setdefault(tokenizer, {})
    if character not in known:
        ids = tokenizer.encode(character)
        known[character] = bool(ids) and tokenizer.unk_id not in ids and tokenizer.decode(ids).strip() == character
    return known[character]


def read_apostrophes(tokenizer, text: str) -> str:
    """`text` with each apostrophe between two letters that the vocabulary cannot write (`SPELLING`) as the ASCII
    one it can ("don’t" -> "don't")."""
    if not any(character in text for character in SPELLING):
        return text
    return "".join(SPELLING[character] if character in SPELLING and 0 < index < len(text) - 1
                   and text[index - 1].isalpha() and text[index + 1].isalpha()
                   and not writes(tokenizer, character) and writes(tokenizer, SPELLING[character]) else character
                   for index, character in enumerate(text))


def unwritable_spans(tokenizer, text: str) -> list[str]:
    """The spans of `text` the vocabulary cannot write, in order (each distinct span once; an apostrophe inside a
    word is none: `read_apostrophes`)."""
    if tokenizer.kind == "words":
        return list(dict.fromkeys(tokenizer.unknown_words(text)))
    text = read_apostrophes(tokenizer, text)
    spans, run = [], []
    for character in text:
        if writes(tokenizer, character):
            if run:
                spans.append("".join(run))
                run.clear()
        else:
            run.append(character)
    if run:
        spans.append("".join(run))
    return list(dict.fromkeys(spans))


def span_pattern(span: str) -> str:
    """A span as a masking pattern; a word's span only as a whole word (an unknown "re" not inside "there")."""
    before = r"(?<!\w)" if span[:1].isalnum() else ""
    after = r"(?!\w)" if span[-1:].isalnum() else ""
    return before + re.escape(span) + after


def carry_unwritable(tokenizer, masked: Masked, limit: int) -> Masked:
    """`masked` with every span the vocabulary cannot write masked too (numbered in the order of the text);
    unchanged when there is none, or when they would need more than `limit` reserved tokens in all. An apostrophe
    inside a word is read as the ASCII one (`read_apostrophes`)."""
    if tokenizer.kind != "words":
        masked = Masked(read_apostrophes(tokenizer, masked.text), masked.originals, masked.spelled)
    spans = unwritable_spans(tokenizer, RESERVED_PATTERN.sub(" ", masked.text))
    if not spans:
        return masked
    try:
        again = mask(masked.text, tuple(span_pattern(span) for span in spans), limit)
    except PlaceholderError:  # no room left: the placeholders come first
        return masked
    return Masked(again.text, tuple(restore(masked, original) for original in again.originals), masked.spelled)
