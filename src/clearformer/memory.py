"""A translation memory: what the translators already wrote, reused before the model writes anything.

    memory = read_memory(["old-fr.po", "project.tmx"], target_language="fr")   catalogues (.po) and TMX
    memory = memory.plus(catalogue_memory(po))       the catalogue's own translated entries (the default)
    memory.lookup("Enter a valid URL.")              -> Match(source, target, score=100.0 | fuzzy score, origin)
    outcome = fill_from_memory(po, memory)           exact matches filled verbatim; fuzzy ones filled (marked
                                                     fuzzy, their score in a `# clearformer:` comment) where
                                                     they score >= `threshold`; the rest is left to the model

Exact means the same msgid and the same msgctxt: the same text in another context ("Seeding" of a torrent state,
"Seeding" the verb) is at most a fuzzy match (OTHER_CONTEXT), which fills an entry marked fuzzy or is offered.
Fuzzy matching is translate-toolkit's (`translate.search.match.matcher`: Levenshtein similarity of the source
texts, in percent, RapidFuzz when installed), as Pootle and Virtaal use it. A fuzzy match is used only where its
source has the same placeholders and numbers as the entry's (its target would otherwise carry the wrong ones), and
only from `threshold` up: below, the model's translation scored better on a real catalogue kept apart
(BENCHMARKS.md, "Translation memory"). An entry whose match is not used still names it in its comment, for the
translator to take.
Plural entries are filled from an exact match with the same number of forms only.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polib

from clearformer.catalog.fill import COMMENT, needs_filling, read_catalogue
from clearformer.errors import UserError
from clearformer.limits import MAX_TEXT_FILE_BYTES, shorten
from clearformer.store import safeio
from clearformer.tokenize.placeholders import find

MIN_SIMILARITY = 75  # percent: a weaker fuzzy match is not shown (translate-toolkit's own default)
# A fuzzy match fills an entry from this score up (below it, the model): BENCHMARKS.md, "Translation memory".
DEFAULT_THRESHOLD = 90
_NUMBER = re.compile(r"\d+")
OTHER_CONTEXT = 99.0  # percent: the same text under another msgctxt is no exact match


@dataclass(frozen=True)
class Unit:
    """One remembered translation: `source` -> `target` (`plural`: the msgstr[n] forms, when it has them)."""

    source: str
    target: str
    context: str = ""
    plural: tuple[str, ...] = ()
    origin: str = ""


@dataclass(frozen=True)
class Match:
    """A unit found for a source text, with its similarity `score` in percent (100: the same text)."""

    unit: Unit
    score: float

    @property
    def exact(self) -> bool:
        return self.score >= 100.0


@dataclass
class Memory:
    """Remembered units; looked up exactly (by source text) and fuzzily (translate-toolkit's matcher)."""

    units: list[Unit] = field(default_factory=list)
    _index: dict[str, list[Unit]] | None = field(default=None, init=False, repr=False)
    _fuzzy: object = field(default=None, init=False, repr=False)  # translate-toolkit's matcher, built once
    _fuzzy_units: dict[str, Unit] = field(default_factory=dict, init=False, repr=False)

    def plus(self, other: Memory) -> Memory:
        return Memory(self.units + other.units)

    def __len__(self) -> int:
        return len(self.units)

    def exact(self, source: str, context: str = "") -> Unit | None:
        """The unit with this very source and context."""
        return next((unit for unit in self._by_source().get(source, []) if unit.context == context), None)

    def _by_source(self) -> dict[str, list[Unit]]:
        if self._index is None:  # units are not changed after the first lookup (`plus` makes a new memory)
            self._index = {}
            for unit in self.units:
                self._index.setdefault(unit.source, []).append(unit)
        return self._index

    def lookup(self, source: str, context: str = "") -> Match | None:
        """The best match for `source`: exact (score 100), else the best fuzzy one from MIN_SIMILARITY, or None."""
        unit = self.exact(source, context)
        if unit is not None:
            return Match(unit, 100.0)
        matcher = self._matcher()
        if matcher is None:
            return None
        candidates = matcher.matches(source)
        if not candidates:
            return None
        best = candidates[0]
        score = float(str(best.getnotes()).strip().rstrip("%") or 0)
        unit = self._fuzzy_units[best.getid()]
        return Match(unit, min(score, OTHER_CONTEXT) if unit.context != context else score)

    def _matcher(self):
        if self._fuzzy is None and self.units:
            import logging

            from translate.search import match
            from translate.storage import pypo

            logging.getLogger("translate.search.lshtein").setLevel(logging.ERROR)  # "RapidFuzz not found"
            store = pypo.pofile()
            for number, unit in enumerate(self.units):
                added = store.addsourceunit(unit.source)
                added.target = unit.target
                added.setid(str(number))
                self._fuzzy_units[added.getid()] = unit
            self._fuzzy = match.matcher(store, max_candidates=1, min_similarity=MIN_SIMILARITY, max_length=2000)
        return self._fuzzy


def catalogue_memory(po: polib.POFile, origin: str = "the catalogue") -> Memory:
    """The translated entries of a catalogue (not fuzzy, not obsolete, not the header) as a memory."""
    units = []
    for entry in po:
        if entry.obsolete or not entry.msgid or "fuzzy" in entry.flags or needs_filling(entry):
            continue
        plural = tuple(entry.msgstr_plural[key] for key in sorted(entry.msgstr_plural)) if entry.msgid_plural else ()
        units.append(Unit(entry.msgid, entry.msgstr or (plural[0] if plural else ""), entry.msgctxt or "",
                          plural, origin))
    return Memory(units)


def read_tmx(path: Path, target_language: str | None) -> Memory:
    """A TMX file's units (translate-toolkit's tmx store), the target in `target_language` (None: the file's)."""
    from translate.storage import tmx

    data = safeio.read_bytes(path, MAX_TEXT_FILE_BYTES)
    try:
        store = tmx.tmxfile(io.BytesIO(data), targetlanguage=target_language)
    except Exception as error:  # lxml's own error: not TMX
        raise UserError(f"{path}: not a readable TMX file ({shorten(str(error))})") from None
    return Memory([Unit(str(unit.source), str(unit.target), origin=path.name) for unit in store.units
                   if unit.source and unit.target])


def read_memory(paths: Iterable[str | Path], target_language: str | None = None) -> Memory:
    """Memories from files: gettext catalogues (.po) and TMX (.tmx)."""
    memory = Memory()
    for path in map(Path, paths):
        suffix = path.suffix.lower()
        if suffix == ".po":
            memory = memory.plus(catalogue_memory(read_catalogue(path), path.name))
        elif suffix == ".tmx":
            memory = memory.plus(read_tmx(path, target_language))
        else:
            raise UserError(f"{path}: a memory is a gettext catalogue (.po) or a TMX file (.tmx)")
    return memory


def same_fixed_parts(source: str, other: str) -> bool:
    """Whether two sources hold the same placeholders and numbers (a match's target then carries the right ones)."""
    return sorted(find(source)) == sorted(find(other)) and \
        sorted(_NUMBER.findall(source)) == sorted(_NUMBER.findall(other))


@dataclass
class MemoryOutcome:
    """What the memory did to a catalogue: entries filled exactly, filled from a fuzzy match, and offered
    (a match named in the comment of an entry the model fills)."""

    exact: int = 0
    fuzzy: int = 0
    offered: int = 0
    offers: dict[int, Match] = field(default_factory=dict)  # id(entry) -> the match its comment names


def comment_line(match: Match, used: bool) -> str:
    """The `# clearformer:` line naming a memory match and its score."""
    where = f" ({match.unit.origin})" if match.unit.origin else ""
    if used:
        return f"{COMMENT} from memory, {match.score:.0f}% match for {match.unit.source!r}{where}"
    return (f"{COMMENT} memory suggests {match.unit.target!r} ({match.score:.0f}% match for "
            f"{match.unit.source!r}{where})")


def add_comment(entry: polib.POEntry, line: str) -> None:
    entry.tcomment = f"{entry.tcomment}\n{line}" if entry.tcomment else line


def fill_from_memory(po: polib.POFile, memory: Memory, threshold: float = DEFAULT_THRESHOLD) -> MemoryOutcome:
    """Fill the entries of `po` that need it from `memory`, in place (see the module docstring): exact matches
    verbatim (not fuzzy: a translator wrote them for this very text), fuzzy matches from `threshold` up with the
    fuzzy flag and their score in a comment; the entries left for the model are in `outcome.offers` when a
    weaker match exists (the front adds its comment once the model has filled the entry)."""
    outcome = MemoryOutcome()
    if not len(memory):
        return outcome
    for entry in po:
        if not needs_filling(entry):
            continue
        match = memory.lookup(entry.msgid, entry.msgctxt or "")
        if match is None:
            continue
        if entry.msgid_plural:
            if match.exact and match.unit.plural and len(match.unit.plural) == max(len(entry.msgstr_plural), 1):
                entry.msgstr_plural = dict(enumerate(match.unit.plural))
                add_comment(entry, comment_line(match, True))
                outcome.exact += 1
            continue
        if match.exact:
            entry.msgstr = match.unit.target
            add_comment(entry, comment_line(match, True))
            outcome.exact += 1
        elif match.score >= threshold and same_fixed_parts(entry.msgid, match.unit.source):
            entry.msgstr = match.unit.target
            if "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")
            add_comment(entry, comment_line(match, True))
            outcome.fuzzy += 1
        else:
            outcome.offers[id(entry)] = match
            outcome.offered += 1
    return outcome


def comment_offers(po: polib.POFile, outcome: MemoryOutcome, entries: Sequence[polib.POEntry] | None = None) -> None:
    """Name each offered match in its entry's comment (after the model filled it)."""
    for entry in entries if entries is not None else po:
        match = outcome.offers.get(id(entry))
        if match is not None:
            add_comment(entry, comment_line(match, False))
