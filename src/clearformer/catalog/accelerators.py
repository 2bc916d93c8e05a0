"""Keyboard accelerators: `_File` (GTK), `&File` (Qt, KDE), `~File` (LibreOffice).

The mark is not part of a word the model knows ("_Enregistrer" is no French word), so it is taken out
of the source before translating and put back in the translation: before the same letter when the
translation has it (case-insensitive, a word's first letter preferred: "_Open" -> "_Ouvrir", "_Save" ->
"Enregi_strer"), else before its first letter ("_Quit" -> "_Fermer"), and then the entry gets a translator
comment saying so (the translator checks that no two items of a menu share a key).

Which character marks accelerators is the catalogue's convention: `detect_mark` reads it from the
translated entries (a msgid and its msgstr each with one mark of the same character), else from the
msgids (the character that marks at least `MIN_MARKED` of them), else none.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from clearformer.tokenize.placeholders import RESERVED_PATTERN

MARKS = ("_", "&", "~")
MIN_MARKED = 3  # msgids with one mark of a character before it is taken for the catalogue's convention


def mark_pattern(mark: str) -> re.Pattern:
    """One accelerator mark: the character before a letter or digit, not doubled (`&&`, `__` are literal),
    not inside a word (`file_name`), and for & not an entity (`&amp;`)."""
    entity = r"(?![A-Za-z]+;|#\d+;|#x[0-9A-Fa-f]+;)" if mark == "&" else ""
    return re.compile(rf"(?<![\w{re.escape(mark)}]){re.escape(mark)}{entity}(?=[^\W_])")


def marks_in(text: str, mark: str) -> int:
    return len(mark_pattern(mark).findall(text))


def detect_mark(pairs: Iterable[tuple[str, str]]) -> str | None:
    """The catalogue's accelerator character from its (msgid, msgstr) pairs (msgstr "" when untranslated)."""
    confirmed, marked = Counter(), Counter()
    for msgid, msgstr in pairs:
        for mark in MARKS:
            if marks_in(msgid, mark) == 1:
                marked[mark] += 1
                if msgstr and marks_in(msgstr, mark) == 1:
                    confirmed[mark] += 1
    if confirmed:
        return confirmed.most_common(1)[0][0]
    mark, count = (marked.most_common(1) or [(None, 0)])[0]
    return mark if count >= MIN_MARKED else None


@dataclass(frozen=True)
class Stripped:
    """A source without its accelerator: `text`, the mark taken out ("" when none), the letter it stood
    before and where (its index in `text`)."""

    text: str
    mark: str = ""
    letter: str = ""
    at: int = 0

    def original(self) -> str:
        """The text as it was, its mark included."""
        return self.text[:self.at] + self.mark + self.text[self.at:]


def strip_mark(text: str, mark: str | None) -> Stripped:
    """`text` without its one accelerator mark (a text with none, or several, is left as it is)."""
    if not mark:
        return Stripped(text)
    matches = list(mark_pattern(mark).finditer(text))
    if len(matches) != 1:
        return Stripped(text)
    at = matches[0].start()
    return Stripped(text[:at] + text[at + 1:], mark, text[at + 1], at)


def put_mark(stripped: Stripped, masked_translation: str) -> tuple[str, bool]:
    """The translation (placeholders still ｟ph{i}｠ tokens) with the mark put back: (text, whether it is
    on the same letter). A translation without any letter outside the tokens gets no mark."""
    if not stripped.mark:
        return masked_translation, True
    inside = [range(m.start(), m.end()) for m in RESERVED_PATTERN.finditer(masked_translation)]

    def free(i: int) -> bool:
        return masked_translation[i].isalnum() and not any(i in span for span in inside)

    letter = stripped.letter.lower()
    same = [i for i, c in enumerate(masked_translation) if c.lower() == letter and free(i)]
    word_starts = [i for i in same if i == 0 or not masked_translation[i - 1].isalnum()]
    if same:
        at = (word_starts or same)[0]
    else:
        at = next((i for i in range(len(masked_translation)) if free(i)), None)
        if at is None:
            return masked_translation, False
    return masked_translation[:at] + stripped.mark + masked_translation[at:], bool(same)
