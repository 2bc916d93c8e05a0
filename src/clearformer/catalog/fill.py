"""A gettext catalogue filled by a translation model: what `clearformer translate --po` does to the file.

    po = read_catalogue(path)                     catalog/reading.py: gettext's grammar into polib objects
                                                  (what msgfmt refuses: one line, FILE:LINE)
    plan = plan_catalogue(po, settings, masks)    every text to translate, each line of each untranslated
                                                  entry, its accelerator taken out, its placeholders masked
    plan.fill(translations)                       the entries filled, marked fuzzy; the header updated
    catalogue_text(po)                            catalog/writing.py: the file's own text, only what was
                                                  filled rewritten (every other entry byte for byte)

Rules (docs/catalogs.md):
- an entry is filled when its msgstr (or one of its msgstr[n]) is empty and it is not obsolete; what a
  translator wrote is never changed; each filled entry gets the `fuzzy` flag, for review;
- msgid_plural: the model translates the singular and the plural source, and each msgstr[n] the header's
  Plural-Forms asks for gets one of them (catalog/plurals.py says which);
- each line of a message is translated on its own (a help text's layout, its leading and trailing newlines
  and spaces stay as they were: `msgfmt --check` wants the same newlines at both ends);
- placeholders: the directives of the entry's format flag (catalog/formats.py) and every placeholder the
  masking knows are masked before the model and restored after, exactly; what the model wrote between them
  is escaped as the format writes literals (a French "100 %" -> "100 %%" in a c-format entry);
- accelerators (catalog/accelerators.py) are taken out before and put back after;
- a line the model cannot read (every word unknown, longer than its maximum length), or writes nothing for, is
  copied from the source, and the entry says so in a translator comment;
- the header (catalog/header.py) gets PO-Revision-Date and X-Generator, and a template (.pot) gets the
  Language, the target language's Plural-Forms and charset UTF-8, its `#, fuzzy` dropped (as msginit gives
  them); the file is written in UTF-8.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import polib

from clearformer.catalog.accelerators import Stripped, detect_mark, put_mark, strip_mark
from clearformer.catalog.formats import Format, entry_formats, escape_literals, format_patterns, repair_placeholders
from clearformer.catalog.header import catalogue_plural_forms, update_header
from clearformer.catalog.plurals import PluralForms
from clearformer.catalog.reading import read_catalogue as read_catalogue  # re-exported: what callers import
from clearformer.catalog.writing import catalogue_text as catalogue_text
from clearformer.generate.result import Note
from clearformer.limits import MAX_SENTENCE_CHARS
from clearformer.tokenize.placeholders import Masked, PlaceholderError, mask, mask_target, restore

COMMENT = "clearformer:"  # the prefix of the translator comments this module adds


@dataclass(frozen=True)
class CatalogueSettings:
    """How to fill: the target `language` (for a template's header; None: the catalogue's own), the
    accelerator mark ("auto": the catalogue's convention, "none", or one of _ & ~), whether the model reads
    masked placeholders (its tokenizer's `mask_placeholders` fact) and the extra patterns it masks."""

    language: str | None = None
    accelerator: str = "auto"
    model_masks: bool = True
    model_patterns: tuple[str, ...] = ()
    # msgctxts that change a translation (a glossary's terms restricted to one: clearformer/glossary.py): a line
    # of an entry in one of them is its own model input, translated with that context's terms
    contexts: frozenset[str] = frozenset()


def needs_filling(entry: polib.POEntry) -> bool:
    """Untranslated (an empty msgstr, or an empty msgstr[n]) and not obsolete; the header never. An entry with
    an empty msgid_plural and msgstr[n] (gettext accepts it) has no plural source to translate, and msgfmt
    checks every msgstr[n] against that empty one: it is left as it is."""
    if entry.obsolete or not entry.msgid or (entry.msgstr_plural and not entry.msgid_plural):
        return False
    if is_plural(entry):
        return not entry.msgstr_plural or any(not text for text in entry.msgstr_plural.values())
    return not entry.msgstr


def is_plural(entry: polib.POEntry) -> bool:
    return bool(entry.msgid_plural or entry.msgstr_plural)


@dataclass
class Line:
    """One line of a source text: `lead` + core + `trail`, the core without its accelerator (`stripped`),
    its placeholders masked (`masked`, by the entry's `formats`); `job` indexes the plan's texts (None: a
    blank line, or a `copied` one, whose `lead` is the whole line)."""

    lead: str
    trail: str
    stripped: Stripped = field(default_factory=lambda: Stripped(""))
    masked: Masked = field(default_factory=lambda: Masked(""))
    formats: tuple[Format, ...] = ()
    patterns: tuple[str, ...] = ()
    job: int | None = None
    copied: bool = False  # a line masking cannot take, copied from the source
    glued: bool = False  # a part of the line before it, after a run of two spaces or more (a column): no newline


@dataclass
class Slot:
    """An entry to fill: the lines of its msgid and (plural entries) its msgid_plural, and the msgstr[n] that
    get the singular's translation (`one_forms`, catalog/plurals.py)."""

    entry: polib.POEntry
    singular: list[Line]
    plural: list[Line] | None = None
    one_forms: frozenset[int] = frozenset()


@dataclass
class Outcome:
    """What filling did: entries filled, lines copied from the source, accelerators not on their letter."""

    filled: int = 0
    copied: int = 0
    moved_accelerators: int = 0
    untranslated: int = 0  # entries under --min-confidence, left empty (clearformer.quality.fronts)
    noted: int = 0  # entries with a note of the post-check (generate/checks.py)


@dataclass
class Plan:
    """Every text the model must translate (`texts`, each once), and where each translation goes."""

    po: polib.POFile
    settings: CatalogueSettings
    plural_forms: PluralForms | None
    mark: str | None
    slots: list[Slot] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)  # each text's msgctxt where it is one of settings.contexts
    found: Sequence[Sequence[Note]] | None = None  # what the post-check found in each translation (`fill`)
    found_comments: set[str] = field(default_factory=set)

    def fill(self, translations: Sequence[str | None], now: datetime | None = None,
             found: Sequence[Sequence[Note]] | None = None) -> Outcome:
        """Put the translations (one per text; None: the model could not read it, and an empty one: the source
        is copied) in the entries, mark them fuzzy, update the header. `found[i]`: what the post-check found in
        translation i (generate/checks.py), each a `# clearformer:` comment on the entries it fills."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        self.found = found
        outcome = Outcome()
        for slot in self.slots:
            notes: list[str] = []
            singular = self._assemble(slot.singular, translations, notes)
            entry = slot.entry
            if slot.plural is None:
                entry.msgstr = singular
            else:
                plural = self._assemble(slot.plural, translations, notes)
                one = slot.one_forms
                for form in range(self.plural_forms.count):
                    if not entry.msgstr_plural.get(form):
                        entry.msgstr_plural[form] = singular if form in one else plural
                for form in [f for f, text in entry.msgstr_plural.items() if f >= self.plural_forms.count and not text]:
                    del entry.msgstr_plural[form]  # a template's msgstr[1] in a one-form language
            if "fuzzy" not in entry.flags:
                entry.flags.insert(0, "fuzzy")  # first, where msgmerge writes it
            if notes:
                entry.tcomment = "\n".join(filter(None, [entry.tcomment, *dict.fromkeys(notes)]))
            outcome.filled += 1
            outcome.copied += sum("copied" in note for note in notes)
            outcome.moved_accelerators += sum("accelerator" in note for note in notes)
            outcome.noted += bool(set(notes) & self.found_comments)
        update_header(self.po, self.settings, self.plural_forms, now)
        return outcome

    def _assemble(self, lines: list[Line], translations: Sequence[str | None], notes: list[str]) -> str:
        out = []
        for line in lines:
            if line.glued and out:  # a column of the line before: its text joins it, after the spaces it kept
                out[-1] += self._assemble([replace(line, glued=False)], translations, notes)
                continue
            if line.copied:
                notes.append(f"{COMMENT} a line the model cannot read was copied from the source")
            if line.job is None:
                out.append(line.lead + line.trail)
                continue
            translated = translations[line.job]
            if translated is None or not translated.strip():
                why = "the model cannot read" if translated is None else "the model wrote nothing for"
                notes.append(f"{COMMENT} a line {why} was copied from the source")
                out.append(line.lead + line.stripped.original() + line.trail)
                continue
            if self.found is not None:
                comments = [f"{COMMENT} {note.detail}" for note in self.found[line.job]]
                self.found_comments.update(comments)
                notes += comments
            if not self.settings.model_masks:  # find the source's placeholders in what the model wrote
                translated = mask_target(translated, line.masked.originals, line.patterns)
            translated, changed = repair_placeholders(translated, line.masked.originals, line.formats)
            if changed:
                notes.append(f"{COMMENT} the model did not copy every placeholder: missing ones were put at the "
                             f"end, extra ones dropped: check their place")
            translated, same_letter = put_mark(line.stripped, translated)
            if not same_letter:
                notes.append(f"{COMMENT} accelerator {line.stripped.mark}{line.stripped.letter} of the source is "
                             f"not on the same letter (the letter is not in the translation): check it")
            text = restore(line.masked, escape_literals(translated, line.formats))
            out.append(line.lead + text + line.trail)
        return "\n".join(out)


def plan_catalogue(po: polib.POFile, settings: CatalogueSettings, where: str) -> Plan:
    """Every entry to fill, cut into lines, each line's model input collected once (`Plan.texts`)."""
    mark = resolve_mark(po, settings.accelerator)
    slots_entries = [entry for entry in po if needs_filling(entry)]
    plural_forms = catalogue_plural_forms(po, settings, where) if any(map(is_plural, slots_entries)) else None
    plan = Plan(po, settings, plural_forms, mark)
    index: dict[tuple[str, str], int] = {}
    for entry in slots_entries:
        formats = entry_formats(entry.flags)
        context = entry.msgctxt if entry.msgctxt in settings.contexts else ""
        singular = plan_lines(entry.msgid, formats, mark, settings, plan, index, context)
        plural = plan_lines(entry.msgid_plural, formats, mark, settings, plan, index, context) \
            if is_plural(entry) else None
        one_forms = plural_forms.singular_forms(same_placeholders(singular, plural)) if plural is not None \
            else frozenset()
        plan.slots.append(Slot(entry, singular, plural, one_forms))
    return plan


def same_placeholders(singular: list[Line], plural: list[Line]) -> bool:
    """Whether a msgid and its msgid_plural hold the same placeholders ("%d file", "%d files"; not "an hour
    ago", "%(count)s hours ago")."""
    def held(lines: list[Line]) -> list[str]:
        return sorted(original for line in lines for original in line.masked.originals)
    return held(singular) == held(plural)


def plan_lines(text: str, formats: tuple[Format, ...], mark: str | None, settings: CatalogueSettings,
               plan: Plan, index: dict[tuple[str, str], int], context: str = "") -> list[Line]:
    """The lines of a source text, each stripped of its accelerator and masked; new model inputs are appended
    to `plan.texts`, with their `context` (`index`: (input, context) -> its position, so a repeated line is
    translated once per context that changes it)."""
    patterns = format_patterns(formats) + settings.model_patterns
    lines = []
    for raw, glued in columns(text):
        core = raw.strip()
        if not core:
            lines.append(Line(raw, ""))
            continue
        if len(core) > MAX_SENTENCE_CHARS:  # no model reads it (generate/source.py): copied, without masking 5 MB
            lines.append(Line(raw, "", stripped=Stripped(raw), copied=True))
            continue
        lead, trail = raw[: len(raw) - len(raw.lstrip())], raw[len(raw.rstrip()):]
        stripped = strip_mark(core, mark)
        try:
            masked = mask(stripped.text, patterns)
        except PlaceholderError:  # more placeholders than reserved tokens: no model can copy them all
            lines.append(Line(raw, "", stripped=Stripped(raw), copied=True))
            continue
        model_input = masked.text if settings.model_masks else stripped.text
        if (model_input, context) not in index:
            index[model_input, context] = len(plan.texts)
            plan.texts.append(model_input)
            plan.contexts.append(context)
        lines.append(Line(lead, trail, stripped, masked, formats, patterns, index[model_input, context],
                          glued=glued))
    return lines


_COLUMN = re.compile(r"(?<=\S)( {2,}|\t+)(?=\S)")


def columns(text: str) -> list[tuple[str, bool]]:
    """The lines of a text, each cut after its runs of two spaces or more (or tabs) between words: a help
    text's columns ("-h, --help   show this help") are translated apart and the spaces between them kept as
    they were, never squeezed to one. -> (part, whether it continues the line before: no newline)."""
    parts = []
    for line in text.split("\n"):
        start, glued = 0, False
        for run in _COLUMN.finditer(line):
            parts.append((line[start:run.end()], glued))
            start, glued = run.end(), True
        parts.append((line[start:], glued))
    return parts


def resolve_mark(po: polib.POFile, accelerator: str) -> str | None:
    if accelerator == "none":
        return None
    if accelerator != "auto":
        return accelerator
    return detect_mark((entry.msgid, entry.msgstr) for entry in po if not entry.obsolete and not entry.msgid_plural)


def fill_catalogue(po: polib.POFile, settings: CatalogueSettings, where: str,
                   translate: Callable[[list[str]], list[str | None]], now: datetime | None = None) -> Outcome:
    """Plan, translate every text with `translate` (texts -> translations, None for one it cannot read), fill."""
    plan = plan_catalogue(po, settings, where)
    return plan.fill(translate(plan.texts), now)
