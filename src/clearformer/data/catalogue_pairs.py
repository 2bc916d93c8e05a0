"""A translated gettext catalogue as training pairs: a team's own translations, to adapt a model to them.

    train --init runs/firefox-en-pt --data fr.po --minutes 5       (train/corpus.py `load_splits`)

The pairs are what `translate --po` would have translated and what the translators wrote for it
(catalog/fill.py): the translated entries only (not fuzzy, not obsolete, not the header); each line of a
message paired with the same line of its translation when both have as many lines (a help text's layout),
else the whole message on one line; the accelerator mark (the catalogue's convention, `detect_mark`) taken
out of both sides; a plural entry gives its singular with msgstr[0] and its plural with the last form;
placeholders are left as they are (a run that masks them masks both sides when it trains, as for any corpus).
A pair repeated is kept once.
"""

from __future__ import annotations

from pathlib import Path

import polib

from clearformer.catalog.accelerators import detect_mark, strip_mark
from clearformer.catalog.fill import needs_filling, read_catalogue
from clearformer.errors import UserError


def translated_entries(po: polib.POFile) -> list[polib.POEntry]:
    """The entries a translator finished: a translation, not fuzzy, not obsolete, not the header."""
    return [entry for entry in po if entry.msgid and not entry.obsolete and "fuzzy" not in entry.flags
            and not needs_filling(entry)]


def entry_texts(entry: polib.POEntry) -> list[tuple[str, str]]:
    """(source, translation) messages of one entry: the singular, and the plural with its last form."""
    if not entry.msgid_plural:
        return [(entry.msgid, entry.msgstr)]
    forms = [entry.msgstr_plural[key] for key in sorted(entry.msgstr_plural)]
    return [(entry.msgid, forms[0]), (entry.msgid_plural, forms[-1])] if len(forms) > 1 else \
        [(entry.msgid, forms[0])]


def message_pairs(source: str, target: str, mark: str | None) -> list[tuple[str, str]]:
    """One message's pairs: line by line when both sides have as many lines, else the whole message."""
    source_lines, target_lines = source.split("\n"), target.split("\n")
    if len(source_lines) != len(target_lines):
        source_lines, target_lines = [" ".join(source.split())], [" ".join(target.split())]
    pairs = []
    for left, right in zip(source_lines, target_lines, strict=True):
        left, right = strip_mark(left.strip(), mark).text, strip_mark(right.strip(), mark).text
        if left and right:
            pairs.append((left, right))
    return pairs


def catalogue_pairs(po: polib.POFile) -> list[tuple[str, str]]:
    """Every pair of a catalogue's translated entries (see the module docstring), each once, in file order."""
    entries = translated_entries(po)
    mark = detect_mark((entry.msgid, entry.msgstr) for entry in entries)
    pairs: dict[tuple[str, str], None] = {}
    for entry in entries:
        for source, target in entry_texts(entry):
            pairs.update(dict.fromkeys(message_pairs(source, target, mark)))
    return list(pairs)


def is_catalogue(path: str | Path | None) -> bool:
    """Whether --data names a gettext catalogue (.po) rather than a corpus folder."""
    return path is not None and Path(path).suffix.lower() == ".po"


def read_catalogue_pairs(path: str | Path) -> list[tuple[str, str]]:
    """The training pairs of the catalogue at `path` (.po); one with no translated entry is a one-line error."""
    pairs = catalogue_pairs(read_catalogue(Path(path)))
    if len(pairs) < 2:
        raise UserError(f"{path}: {len(pairs)} translated entr{'y' if len(pairs) == 1 else 'ies'}; training from "
                        f"a catalogue needs its translations (at least 2: one to train on, one to validate)")
    return pairs
