"""A glossary: the project's terms, and where they occur in a source sentence.

    glossary = read_glossary("terms.csv")          CSV `source,target` (a header row is optional) or TBX,
                                                   read by translate-toolkit; a .tsv as Weblate renders one
    glossary = parse_tsv("file\\tficheiro\\n...")   Weblate's form: one `source<TAB>target` per line
    glossary.find("Save the File")                 -> [TermMatch(term=Term("file", "ficheiro"), start=9, end=13)]
    glossary.missing(source, translation)          the terms of `source` whose target `translation` lacks
    glossary.in_context("torrent state")           the terms for a catalogue entry of that msgctxt

A term may be restricted to a context (gettext's msgctxt): a third column `context` in a CSV or TSV, a TBX note or
description of type "context" (`<descrip type="context">torrent state</descrip>`, as translate-toolkit reads it).
`Seeding,Semeando,torrent state` applies only to the entries of msgctxt "torrent state", where it wins over an
unrestricted "Seeding" term; a glossary used without a context (`translate`, the API) holds the unrestricted
terms only (BENCHMARKS.md, "Trust: msgctxt").

A term matches on word boundaries, whatever its case ("File", "FILE" and "file" are one term), longest first
(with "file manager" and "file" both in the glossary, "the file manager" matches the longer one only). Where
a term's target is used the decoder decides (generate/glossary.py): this module only reads and matches.

Weblate passes a glossary to the machine-translation services that take one (its `glossary_support`) as this
tab-separated text, one term per line, forbidden terms left out (weblate/glossary/models.py,
`render_glossary_units_tsv`); the API's `glossary` field takes the same text (serve/).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from clearformer.errors import UserError
from clearformer.limits import MAX_TEXT_FILE_BYTES, shorten
from clearformer.store import safeio

MAX_TERMS = 100_000  # a glossary is a list of terms, not a corpus: more is refused with one line
MAX_TERM_CHARS = 200
# An inflected term still counts as the term: a word of STEM_LETTERS letters or more may change its last letter
# and add up to INFLECTION more ("primeiro" -> "primeiras", "arquivo" -> "arquivos"; not "arquiteto"), a
# shorter one only add them ("cor" -> "cores").
INFLECTION, STEM_LETTERS = 2, 5


@dataclass(frozen=True)
class Term:
    """One glossary entry: the `source` term and the `target` term a translation of it must use."""

    source: str
    target: str
    context: str = ""  # a msgctxt: the term applies to that context's entries only ("": to every text)


@dataclass(frozen=True)
class TermMatch:
    """A term found in a source text at [start, end)."""

    term: Term
    start: int
    end: int


@dataclass(frozen=True)
class Glossary:
    """The terms of one glossary, in file order (the first entry of a source term wins)."""

    terms: tuple[Term, ...]
    name: str = "glossary"

    @cached_property
    def _by_source(self) -> dict[str, Term]:
        by_source: dict[str, Term] = {}
        for term in self.terms:
            if not term.context:
                by_source.setdefault(term.source.casefold(), term)
        return by_source

    @property
    def contexts(self) -> frozenset[str]:
        """The contexts some term is restricted to."""
        return frozenset(term.context for term in self.terms if term.context)

    def in_context(self, context: str) -> Glossary:
        """The terms for a text of msgctxt `context`: that context's terms first (they win), then the unrestricted
        ones, as one glossary without restrictions."""
        ordered = [t for t in self.terms if context and t.context == context] + [t for t in self.terms
                                                                                 if not t.context]
        return Glossary(tuple(Term(t.source, t.target) for t in ordered), self.name)

    @cached_property
    def _by_head(self) -> dict[str, list[str]]:
        """Source terms (case-folded) by their first word (or first character, for a term that does not start
        with a word character), longest first: a text is matched in one pass, however many terms there are."""
        heads: dict[str, list[str]] = {}
        for source in self._by_source:
            heads.setdefault(head_of(source), []).append(source)
        for group in heads.values():
            group.sort(key=len, reverse=True)
        return heads

    def __len__(self) -> int:
        return len(self.terms)

    def find(self, text: str) -> list[TermMatch]:
        """The terms occurring in `text`, in order, non-overlapping, longest first (word boundaries, any case)."""
        if not self.terms:
            return []
        folded, found, end = text.casefold(), [], 0
        if len(folded) != len(text):  # a character whose case folding changes its length: positions would drift
            folded = text.lower()
        for start in _STARTS.finditer(folded):
            at = start.start()
            if at < end:
                continue
            for source in self._by_head.get(head_of(folded[at:]), ()):
                stop = at + len(source)
                if folded.startswith(source, at) and not (source[-1].isalnum() and stop < len(folded)
                                                          and (folded[stop].isalnum() or folded[stop] == "_")):
                    found.append(TermMatch(self._by_source[source], at, stop))
                    end = stop
                    break
        return found

    def terms_in(self, text: str) -> list[Term]:
        """The distinct terms of `text`, in order of first occurrence."""
        return list(dict.fromkeys(match.term for match in self.find(text)))

    def missing(self, source: str, translation: str) -> list[Term]:
        """The terms of `source` whose target does not occur in `translation` (word boundaries, any case)."""
        return [term for term in self.terms_in(source) if not uses(translation, term.target)]


_STARTS = re.compile(r"(?<!\w)\w|[^\w\s]")  # where a term may start: a word's first letter, or a symbol
_HEAD = re.compile(r"\w+|[^\w\s]")


def head_of(text: str) -> str:
    """The first word of `text` (or its first symbol): the key terms are looked up by."""
    found = _HEAD.match(text)
    return found.group(0) if found else text[:1]


def inflected(word: str) -> str:
    """A pattern for `word` and its inflections: a word of STEM_LETTERS letters or more may change its last
    letter and add up to INFLECTION more ("primeiro": "primeira", "primeiros"; "arquivo": "arquivos"), a
    shorter one only add them ("cor": "cores"); anything else is matched as written."""
    if not word.isalpha():
        return re.escape(word)
    if len(word) >= STEM_LETTERS:
        return re.escape(word[:-1]) + rf"\w{{0,{INFLECTION + 1}}}"
    return re.escape(word) + rf"\w{{0,{INFLECTION}}}"


def inflection_pattern(target: str) -> re.Pattern:
    """The target term, each of its words inflected (`inflected`), on word boundaries, in any case."""
    words = target.split()
    body = r"\s+".join(inflected(word) for word in words)
    left = r"(?<!\w)" if target[:1].isalnum() else ""
    right = r"(?!\w)" if target[-1:].isalnum() else ""
    return re.compile(left + body + right, re.IGNORECASE)


def uses(text: str, target: str) -> bool:
    """Whether `text` holds the target term `target` or an inflection of it (`inflected`: the model may inflect
    a term for its sentence, "a primeira página" for "primeiro"), on word boundaries, in any case."""
    return inflection_pattern(target).search(text) is not None


def clean_terms(pairs, name: str) -> Glossary:
    """(source, target, where[, context]) tuples -> a Glossary; a blank side skips the entry (an untranslated
    term); too many terms, or one too long, is a one-line UserError naming `where`."""
    terms = []
    for source, target, where, *context in pairs:
        source, target = " ".join(str(source or "").split()), " ".join(str(target or "").split())
        if not source or not target:
            continue
        if len(source) > MAX_TERM_CHARS or len(target) > MAX_TERM_CHARS:
            raise UserError(f"{where}: term longer than {MAX_TERM_CHARS} characters ({shorten(source)!r}); "
                            f"a glossary holds terms, not sentences")
        terms.append(Term(source, target, str(context[0] or "").strip() if context else ""))
        if len(terms) > MAX_TERMS:
            raise UserError(f"{name}: more than {MAX_TERMS:,} terms")
    return Glossary(tuple(terms), name)


def parse_tsv(text: str, name: str = "glossary") -> Glossary:
    """Weblate's glossary text: one `source<TAB>target` per line (a line without a tab is an error); a third
    column, where there is one, is the term's context."""
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if "\t" not in line:
            raise UserError(f"{name}:{number}: not `source<TAB>target` (Weblate's glossary format)")
        source, target, *context = line.split("\t")
        pairs.append((source, target, f"{name}:{number}", context[0] if context else ""))
    return clean_terms(pairs, name)


def read_glossary(path: str | Path) -> Glossary:
    """A glossary file: .tbx (TermBase eXchange), .csv (`source,target`, a header row optional) or .tsv, read
    by translate-toolkit's stores (tbx, csvl10n); anything else, or a file they cannot read, is one line."""
    path = Path(path)
    data = safeio.read_bytes(path, MAX_TEXT_FILE_BYTES)
    suffix = path.suffix.lower()
    if suffix == ".tsv":
        try:
            return parse_tsv(data.decode("utf-8"), str(path))
        except UnicodeDecodeError:
            raise UserError(f"{path}: not UTF-8 text") from None
    if suffix not in (".csv", ".tbx"):
        raise UserError(f"{path}: a glossary is a .csv (source,target), .tbx or .tsv file")
    try:
        if suffix == ".tbx":
            from translate.storage import tbx

            store = tbx.tbxfile(io.BytesIO(data))
        else:
            from translate.storage import csvl10n

            store = csvl10n.csvfile(io.BytesIO(data), fieldnames=["source", "target", "context"])
    except UserError:
        raise
    except Exception as error:  # lxml's or csv's own error: the file is not what its name says
        raise UserError(f"{path}: not a readable {suffix[1:].upper()} glossary ({shorten(str(error))})") from None
    units = [unit for unit in store.units if not unit.isheader()]
    if suffix == ".csv" and units and (units[0].source, units[0].target) == ("source", "target"):
        units = units[1:]
    return clean_terms(((unit.source, unit.target, f"{path}:{index}", unit_context(unit))
                        for index, unit in enumerate(units, start=1)), str(path))


def unit_context(unit) -> str:
    """A glossary unit's context: a CSV's third column (translate-toolkit's `getcontext`), or a TBX note or
    description of type "context"."""
    from translate.storage import tbx

    if isinstance(unit, tbx.tbxunit):
        notes = [note for note in unit.get_common_notes(source=True) if "context" in (note.category, note.origin)]
        return notes[0].text if notes else ""
    return unit.getcontext() or ""
