"""What the catalogue-fidelity tests share: a catalogue msgfmt accepts that holds what a careless writer loses,
a translator that writes something msgfmt must accept, and `outside`: a catalogue's text without its header and
the given entries (what must come back byte for byte)."""

from __future__ import annotations

from datetime import datetime, timezone

from clearformer.catalog.fill import CatalogueSettings, fill_catalogue, needs_filling
from clearformer.catalog.reading import parse_catalogue
from clearformer.catalog.writing import catalogue_text

# Valid gettext that polib's reader or writer changes: escapes (\x41, \101, \a), an obsolete entry's #~| previous
# msgid, #| previous msgids, a msgid split where its author split it, tabs and two strings on one keyword's line,
# a plural entry with an empty msgid_plural, a translated entry with an odd layout, comments between entries.
KEEPSAKE = r'''# A translator's catalogue, as msgmerge and a careful person left it.
msgid ""
msgstr ""
"Project-Id-Version: keepsake 1.0\n"
"PO-Revision-Date: 2024-03-04 05:06+0100\n"
"Language: fr\n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=2; plural=(n > 1);\n"

#. the letter A written three ways
msgid "\x41 and \101 and A\a"
msgstr "\x41 et \101 et A\a"

#, c-format
msgid "\x41 file: %s"
msgstr ""

#: src/a.c:1
#, fuzzy
#| msgid "Open the old file"
msgid "Open the file"
msgstr "Ouvrir  le fichier"

msgid	"two "   "strings"
msgstr ""

msgid ""
"a help text\n"
"  on two lines\n"
msgstr ""

#, c-format
msgid "%d file"
msgid_plural ""
msgstr[0] ""
msgstr[1] ""

msgid "Save"
msgstr "Enregistrer"
# a comment between entries stays where it is

#~| msgid "Quit now"
#~ msgid "Quit"
#~ msgstr "Quitter"
'''

WHEN = datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc)


def marked(texts: list[str]) -> list[str]:
    """A translator that writes every (masked) input back after a word of its own: the placeholders stay."""
    return [f"TR {text}" for text in texts]


def fill_text(text: str, language: str = "fr", translate=marked) -> tuple[str, set]:
    """(the filled catalogue's text, the (msgctxt, msgid) keys of the entries filled)."""
    po = parse_catalogue(text.encode("utf-8"), "x.po")
    keys = {(entry.msgctxt, entry.msgid) for entry in po if needs_filling(entry)}
    fill_catalogue(po, CatalogueSettings(language=language), "x.po", translate, now=WHEN)
    return catalogue_text(po), keys


def outside(text: str, keys: set, po=None) -> str:
    """`text` without its header and the entries whose (msgctxt, msgid) is in `keys` (each entry from its
    first comment to the end of its last msgstr). po: the catalogue already read from `text`, before any change
    (else `text` is parsed here)."""
    po = parse_catalogue(text.encode("utf-8"), "x.po") if po is None else po
    spans = [po.source.raw[None]] if None in po.source.raw else []
    spans += [po.source.raw[id(entry)] for entry in po if (entry.msgctxt, entry.msgid) in keys]
    pieces, position = [], 0
    for raw in sorted(spans, key=lambda raw: raw.start):
        pieces.append(text[position:raw.start])
        position = raw.end
        if raw is po.source.raw.get(None):  # the header and the blank lines after it (one it did not have)
            position += len(text[position:]) - len(text[position:].lstrip("\r\n"))
    return "".join(pieces) + text[position:]
