"""msgctxt with Firefox's en-pt student (issue 48): transmission-gtk's "Seeding" (context "Gerund", a torrent's
state) came out "Verificação". A team's glossary term restricted to that context decides it there, and an entry
without the context keeps the model's own translation (clearformer/glossary.py `in_context`)."""

from __future__ import annotations

import polib

from clearformer.cli import main

CATALOGUE = '''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Language: pt_BR\\n"

msgctxt "Gerund"
msgid "Seeding"
msgstr ""

msgid "Seeding"
msgstr ""
'''


def test_a_context_term_decides_the_entry_of_its_context_only(firefox_runs, tmp_path):
    po, terms, out, free = (tmp_path / name for name in ("pt.po", "terms.csv", "out.po", "free.po"))
    po.write_text(CATALOGUE, encoding="utf-8")
    terms.write_text("Seeding,Semeando,Gerund\n", encoding="utf-8")
    common = ["translate", "--checkpoint", str(firefox_runs["en-pt"]), "--po", str(po), "--no-memory"]
    assert main([*common, "--out", str(free)]) == 0
    assert main([*common, "--out", str(out), "--glossary", str(terms)]) == 0
    filled = {entry.msgctxt: entry.msgstr for entry in polib.pofile(str(out))}
    alone = {entry.msgctxt: entry.msgstr for entry in polib.pofile(str(free))}
    assert filled["Gerund"] == "Semeando" and alone["Gerund"] != "Semeando"
    assert filled[None] == alone[None]


def test_a_context_term_replaces_the_models_word_once(firefox_runs, tmp_path):
    """transmission-gtk's "Adding" and "Downloading" (context "Gerund") came out "Adição Adicionando" and "O
    Baixando" (issue 48): the model's own word was written in pieces too short to trigger the term ("▁A" "dição")
    or after an article ("O download"), so the term was added at the end or glued after the article. The model's
    opening of its own rendering gives way to the term where the term opens the source (generate/glossary.py)."""
    po, terms, out = (tmp_path / name for name in ("pt.po", "terms.csv", "out.po"))
    po.write_text(CATALOGUE.split("msgctxt")[0] + 'msgctxt "Gerund"\nmsgid "Adding"\nmsgstr ""\n\n'
                  'msgctxt "Gerund"\nmsgid "Downloading"\nmsgstr ""\n', encoding="utf-8")
    terms.write_text("Adding,Adicionando,Gerund\nDownloading,Baixando,Gerund\n", encoding="utf-8")
    for search in ([], ["--beam", "4"]):
        assert main(["translate", "--checkpoint", str(firefox_runs["en-pt"]), "--po", str(po), "--no-memory",
                     "--out", str(out), "--glossary", str(terms), "--overwrite", *search]) == 0
        filled = {entry.msgid: entry.msgstr for entry in polib.pofile(str(out))}
        assert filled == {"Adding": "Adicionando", "Downloading": "Baixando"}, search
