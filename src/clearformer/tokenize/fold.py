"""Training targets in a vocabulary that cannot write every character of them.

A vocabulary made elsewhere (Firefox's students, Marian's opus-mt) lacks characters a new corpus uses:
Firefox's English->Portuguese vocabulary has no curly quotes and no capital Í, Ú, Â, Ã or Ç, which
en-pt-software's targets hold (docs/adapt.md). A target piece <unk> teaches the model to write
<unk>, which decodes as " ⁇ ": fine-tuned on those targets, Firefox's student began writing
'em  ⁇ %s ⁇ ' where the catalogue has 'em “%s”'. So each such character of a training target is
folded to the nearest one the vocabulary can write, when there is one:

    typographic marks to their ASCII forms   “ ” „ « »  ->  "      ‘ ’ ‚  ->  '      – —  ->  -
    a letter to its base letter              Í -> I   Ç -> C   (Unicode's decomposition, marks dropped)

and kept (an <unk>) when there is none. Only targets are folded, and only in runs started from another
(`train --init`; a vocabulary built from the corpus lacks none of its characters): sources stay as the model
reads them when it translates, so a run's decoding of a source is what its engine's would be.
"""

from __future__ import annotations

import unicodedata
from collections import Counter

from clearformer.tokenize.protocol import Tokenizer

TYPOGRAPHIC = {"“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"', "″": '"',
               "‘": "'", "’": "'", "‚": "'", "‛": "'", "′": "'",
               "–": "-", "—": "-", "‐": "-", "‑": "-", "−": "-", "…": "..."}


def base_letters(character: str) -> str:
    """The character without its diacritics ("Í" -> "I"; "" for a mark alone)."""
    return "".join(c for c in unicodedata.normalize("NFKD", character) if not unicodedata.combining(c))


class TargetFold:
    """Folds each character of a target that the tokenizer writes as <unk> to the nearest one it can write.
    Each character is checked once (`encode_target_text` of it alone); `folded` counts what was replaced."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.table: dict[int, str] = {}
        self.checked: set[str] = set()
        self.folded: Counter[str] = Counter()

    def writes(self, text: str) -> bool:
        return self.tokenizer.unk_id not in self.tokenizer.encode_target_text(text)

    def __call__(self, target: str) -> str:
        for character in set(target) - self.checked:
            self.checked.add(character)
            if character.isspace() or self.writes(character):
                continue
            for nearest in (TYPOGRAPHIC.get(character), base_letters(character)):
                if nearest and nearest != character and self.writes(nearest):
                    self.table[ord(character)] = nearest
                    break
        folded = target.translate(self.table)
        if folded != target:
            self.folded.update(c for c in target if ord(c) in self.table)
        return folded

    def summary(self) -> str:
        """One line on what was folded ("" when nothing was)."""
        if not self.folded:
            return ""
        most = ", ".join(f"{c} -> {self.table[ord(c)]} ({n:,})" for c, n in self.folded.most_common(6))
        return (f"{sum(self.folded.values()):,} characters of the targets the vocabulary cannot write folded to "
                f"the nearest it can: {most}")
