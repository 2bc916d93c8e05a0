"""What the post-check found reaches each front (issue 48): a `# clearformer:` comment on the catalogue entry it
fills (the LibreTranslate answer carries them in its "notes": serve/libretranslate.py); columns of a help text
keep their spaces."""

from __future__ import annotations

import polib

from clearformer.catalog.fill import CatalogueSettings, catalogue_text, plan_catalogue
from clearformer.generate.result import Note, NoteKind

DROPPED = Note(NoteKind.SENTENCE_DROPPED, "the source has 2 sentences, the translation 1: a sentence may be missing")


def catalogue(*msgids: str) -> polib.POFile:
    po = polib.POFile(wrapwidth=78)
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "pt_BR"}
    for msgid in msgids:
        po.append(polib.POEntry(msgid=msgid, msgstr=""))
    po.append(polib.POEntry(msgid="Kept", msgstr="Mantido"))
    return po


def test_a_note_is_a_comment_on_the_entry_it_fills_and_the_entry_is_fuzzy():
    po = catalogue("Connection timed out. Please try again later.", "Open")
    plan = plan_catalogue(po, CatalogueSettings(), "test.po")
    outcome = plan.fill(["Por favor, tente novamente mais tarde.", "Abrir"], found=[(DROPPED,), ()])
    first, second, kept = po
    assert first.tcomment == f"clearformer: {DROPPED.detail}" and "fuzzy" in first.flags
    assert not second.tcomment and outcome.noted == 1
    assert kept.msgstr == "Mantido" and not kept.tcomment and "fuzzy" not in kept.flags
    assert "# clearformer: the source has 2 sentences" in catalogue_text(po)  # (polib wraps a long comment)


def test_columns_are_translated_apart_and_keep_their_spaces():
    po = catalogue("-h, --help     show this help")
    plan = plan_catalogue(po, CatalogueSettings(), "test.po")
    assert plan.texts == ["-h, --help", "show this help"]
    plan.fill(["-h, --help", "mostrar esta ajuda"])
    assert po[0].msgstr == "-h, --help     mostrar esta ajuda"
