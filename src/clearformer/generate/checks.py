"""What every translation is checked for before a front shows it: the post-check, as `Note`s.

The search keeps placeholders exact and forbids stray digits where numerals stand in (generate/constraints.py),
but a check of the written text is what a reader can trust: each function here reads a source, the
translation the user gets (placeholders restored) and, where known, how the source was masked and whether the
search had to put a placeholder in where the model would have ended. Each finding is a `Note`
(generate/result.py), which each front shows its own way (a warning line in `translate`, fuzzy and a
`# clearformer:` comment in a catalogue, a field in the API); nothing found is moved or dropped silently.

    foreign_tokens      a numeral, tag or placeholder in the translation that the source lacks
    missing_placeholders  a placeholder of the source not in the translation; one the search could not place
    unwritable          "⁇" (or <unk>) in the translation: a span the model could not write
    dropped_sentences   the source has more sentences than the translation ("Connection timed out. Please try
                        again later." -> only the second)
    copied              the translation is the source unchanged (a sentence of two words or more)

`check(source, output, masked, forced)` runs them all; `translations(pieces, outputs, forced)` turns the
pieces of a batch of inputs (generate/source.py `Pieces`) into one `Translation` per input.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from clearformer.generate.result import Note, NoteKind, Translation
from clearformer.tokenize.placeholders import RESERVED_PATTERN, Masked, find
from clearformer.tokenize.sentences import split_sentences

_NUMBER = re.compile(r"\d+")
_UNWRITTEN = ("⁇", "<unk>")
_WORD = re.compile(r"[^\W\d_]{2,}")


def _shown(items: Sequence[str]) -> str:
    return ", ".join(repr(item) for item in dict.fromkeys(items))


def tokens(text: str) -> Counter:
    """The placeholders and tags of a text (tokenize/placeholders.py `find`), and its reserved tokens ｟ph{i}｠."""
    return Counter(find(RESERVED_PATTERN.sub(" ", text))) + Counter(m.group(0) for m in RESERVED_PATTERN.finditer(text))


def foreign_tokens(source: str, output: str) -> list[Note]:
    """A numeral of the translation that is no part of a number of the source ("150" for "15", a stand-in's
    "1"), and a placeholder or tag the translation holds more often than the source."""
    numbers = _NUMBER.findall(source)
    numerals = [n for n in _NUMBER.findall(RESERVED_PATTERN.sub(" ", output)) if not any(n in m for m in numbers)]
    notes = []
    if numerals:
        notes.append(Note(NoteKind.FOREIGN_TOKEN, f"numeral(s) {_shown(numerals)} in the translation are not in "
                                                  f"the source"))
    extra = tokens(output) - tokens(source)
    if extra:
        notes.append(Note(NoteKind.FOREIGN_TOKEN, f"placeholder(s) or tag(s) {_shown(list(extra.elements()))} in "
                                                  f"the translation are not in the source"))
    return notes


def masked_spans(masked: Masked | None) -> Counter:
    """What masking took out of a source (placeholders by every pattern the run uses, spans carried through),
    without the numerals a stand-in slot skipped (tokenize/standins.py `assign`)."""
    if masked is None:
        return Counter()
    return Counter(o for index, o in enumerate(masked.originals)
                   if not (index < len(masked.spelled) and o == masked.spelled[index]))


def missing_placeholders(source: str, output: str, forced: bool = False, masked: Masked | None = None) -> list[Note]:
    """A placeholder or tag of the source the translation lacks (and any span masking took out, `masked`);
    `forced`: the search put one in where the model would have ended (its place was not the model's choice)."""
    notes = []
    missing = tokens(source) - tokens(output)
    missing += Counter({span: n - output.count(span) for span, n in masked_spans(masked).items()
                        if output.count(span) < n and span not in missing})
    if missing:
        notes.append(Note(NoteKind.PLACEHOLDER_NOT_PLACED, f"placeholder(s) or tag(s) {_shown(list(missing))} of "
                                                            f"the source are missing from the translation"))
    if forced:
        notes.append(Note(NoteKind.PLACEHOLDER_NOT_PLACED, "the model did not place every placeholder: the search "
                                                           "put one where the model ended its sentence; check its "
                                                           "place"))
    return notes


def unwritable(source: str, output: str) -> list[Note]:
    """"⁇" or <unk> in the translation (and not in the source): a span the model could not write."""
    found = [mark for mark in _UNWRITTEN if mark in output and mark not in source]
    if not found:
        return []
    return [Note(NoteKind.UNWRITABLE_SPAN, f"the translation holds {_shown(found)}: characters of the source the "
                                           f"model cannot write")]


def dropped_sentences(source: str, output: str) -> list[Note]:
    """The source has more sentences than the translation (tokenize/sentences.py's rule on both)."""
    had, has = len(split_sentences(source)), len(split_sentences(output))
    if had < 2 or has >= had:
        return []
    return [Note(NoteKind.SENTENCE_DROPPED, f"the source has {had} sentences, the translation {has}: a sentence "
                                            f"may be missing")]


def copied(source: str, output: str) -> list[Note]:
    """The translation is the source unchanged, for a source of two words or more."""
    if " ".join(output.split()) != " ".join(source.split()) or len(_WORD.findall(source)) < 2:
        return []
    return [Note(NoteKind.SOURCE_COPIED, "the translation is the source unchanged")]


def check(source: str, output: str, masked: Masked | None = None, forced: bool = False) -> tuple[Note, ...]:
    """Every check of one translated sentence; `masked`: the source as the model read it (its placeholders
    as ｟ph{i}｠, tokenize/placeholders.py), whose placeholders were restored in `output`."""
    if not output.strip() or not source.strip():  # nothing written, or no source text to compare with
        return ()
    return tuple(foreign_tokens(source, output) + missing_placeholders(source, output, forced, masked)
                 + unwritable(source, output) + dropped_sentences(source, output) + copied(source, output))


def translations(texts: Sequence[str], owners: Sequence[int], count: int, outputs: Sequence[str],
                 masks: Sequence[Masked] | None = None, forced: Sequence[bool] | None = None,
                 given: dict[int, tuple[Note, ...]] | None = None) -> list[Translation]:
    """The pieces of `count` inputs (`texts[i]` translated as `outputs[i]`, placeholders restored, belonging to
    input `owners[i]`) -> one `Translation` per input: the pieces' texts joined by a space, each piece's notes
    (prefixed "sentence k of n: " when the input was cut into sentences); `given[i]`: piece i's notes, found
    already (a piece translated again sentence by sentence: generate/translator.py)."""
    parts: list[list[int]] = [[] for _ in range(count)]
    for index, owner in enumerate(owners):
        parts[owner].append(index)
    result = []
    for indices in parts:
        notes = []
        for number, index in enumerate(indices, start=1):
            found = given[index] if given and index in given else check(
                texts[index], outputs[index], masks[index] if masks else None, bool(forced[index]) if forced else False)
            where = f"sentence {number} of {len(indices)}: " if len(indices) > 1 else ""
            notes += [Note(note.kind, where + note.detail) for note in found]
        text = " ".join(outputs[index] for index in indices if outputs[index])
        result.append(Translation(text, tuple(dict.fromkeys(notes))))
    return result
