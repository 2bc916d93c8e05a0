"""Sentence splitting, one rule for the data and for translation.

The en-fr-software cleaning (data/gettext_clean.py, rule 6) cuts a paragraph of more than
LONG_PARAGRAPH_WORDS words into its sentences, so a model trained on it has seldom seen a long,
several-sentence input whole; `translate` and `evaluate` cut such an input the same way and join the
translations of its sentences (`generate.source.prepare_sources`).
"""

from __future__ import annotations

import re

LONG_PARAGRAPH_WORDS = 25
# A sentence ends at . ! ? or … (with closing quotes or brackets) before a space and a capital.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'»”’)\]]*\s+")
_SENTENCE_START = re.compile(r"[\"'«“(\[]?\s?([^\W\d_])")
_ABBREVIATIONS = {"e.g.", "i.e.", "etc.", "vs.", "Mr.", "Mrs.", "Dr.", "St.", "M.", "cf.", "ex.", "No.",
                  "env.", "p.", "c.-à-d."}


def split_sentences(text: str) -> list[str]:
    """'Open it. Then close it.' -> ['Open it.', 'Then close it.'] (abbreviations do not end one)."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        last_word = text[start:match.start()].rsplit(" ", 1)[-1]
        next_letter = _SENTENCE_START.match(text, match.end())
        if last_word in _ABBREVIATIONS or not (next_letter and next_letter.group(1).isupper()):
            continue
        pieces.append(text[start:match.start()] + match.group(0).strip())
        start = match.end()
    pieces.append(text[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def split_long(text: str, words: int = LONG_PARAGRAPH_WORDS) -> list[str]:
    """`text` cut into sentences when it has more than `words` words; otherwise [text]."""
    if len(text.split()) <= words:
        return [text]
    return split_sentences(text) or [text]
