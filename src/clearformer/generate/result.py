"""What a translation comes back as: its text, and what its reader must know about it.

Every front (`translate`, `translate --po`, `serve`, `evaluate`, the Python API) receives one `Translation`
per input from the one translator, so what a check found on the way (a placeholder the search could not place,
a sentence of the source missing from the output, a glossary term not used) reaches the user in each front's
own way, never silently: a warning line in `translate`, the fuzzy flag and a `# clearformer:` comment in a
catalogue, a field in the API's answer.

    Translation(text, notes=(Note(NoteKind.SENTENCE_DROPPED, "..."),), confidence=0.42)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class NoteKind(enum.Enum):
    """What a note is about; each front decides how to show it (its `detail` is the line a person reads)."""

    PLACEHOLDER_NOT_PLACED = "placeholder not placed"  # the search could not put a source placeholder in
    FOREIGN_TOKEN = "foreign token"  # a numeral, tag or placeholder in the output that the source lacks
    UNWRITABLE_SPAN = "unwritable span"  # source characters the vocabulary cannot write, not carried through
    SENTENCE_DROPPED = "sentence dropped"  # a sentence of the source has nothing in the output
    SOURCE_COPIED = "source copied"  # the output is the source unchanged
    UNREADABLE = "unreadable"  # the model could not read the input (every word unknown, too long): not translated
    GLOSSARY_TERM_MISSING = "glossary term missing"  # a glossary term of the source whose target term is absent
    LOW_CONFIDENCE = "low confidence"  # under the caller's threshold


@dataclass(frozen=True)
class Note:
    """One thing a reader of the translation must know: `kind`, and `detail`, one line naming the span."""

    kind: NoteKind
    detail: str

    def __str__(self) -> str:
        return self.detail


@dataclass(frozen=True)
class WordConfidence:
    """A word of the translation (as written, placeholders restored) and its confidence in [0, 1]."""

    word: str
    confidence: float


@dataclass(frozen=True)
class Translation:
    """One input's translation: the `text` (placeholders restored, sentences joined), the `notes` of what the
    checks found, and, where the caller asked for them, the sentence's `confidence` in [0, 1], its `words`'
    confidences, and the search's distinct `alternatives` (best first, the text itself not among them)."""

    text: str
    notes: tuple[Note, ...] = ()
    confidence: float | None = None
    words: tuple[WordConfidence, ...] = ()
    alternatives: tuple[str, ...] = field(default=())

    @property
    def trusted(self) -> bool:
        """No check found anything: the text can be used as it is (a catalogue entry still gets fuzzy)."""
        return not self.notes

    def noted(self, *notes: Note) -> Translation:
        """This translation with more notes (a note already there is not repeated)."""
        return replace(self, notes=tuple(dict.fromkeys(self.notes + notes)))
