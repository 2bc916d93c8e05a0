"""Glossary files (clearformer/glossary.py): CSV, TBX and Weblate's TSV read by translate-toolkit's stores, terms
matched on word boundaries in any case, longest first; a bad file is one line."""

from __future__ import annotations

import pytest

from clearformer.errors import UserError
from clearformer.glossary import Glossary, Term, parse_tsv, read_glossary, uses

TBX = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE martif PUBLIC "ISO 12200:1999A//DTD MARTIF core (DXFcdV04)//EN" "TBXcdv04.dtd">
<martif type="TBX" xml:lang="en">
<text><body>
<termEntry id="1"><langSet xml:lang="en"><tig><term>file</term></tig></langSet>
<langSet xml:lang="pt-BR"><tig><term>arquivo</term></tig></langSet></termEntry>
<termEntry id="2"><langSet xml:lang="en"><tig><term>bookmark</term></tig></langSet>
<langSet xml:lang="pt-BR"><tig><term>marcador</term></tig></langSet></termEntry>
</body></text></martif>
"""


def test_csv_with_and_without_a_header(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text('file,fichier\n"open, now",ouvrir\nblank,\n', encoding="utf-8")
    assert read_glossary(plain).terms == (Term("file", "fichier"), Term("open, now", "ouvrir"))
    headed = tmp_path / "headed.csv"
    headed.write_text("source,target\nbookmark,marque-page\n", encoding="utf-8")
    assert read_glossary(headed).terms == (Term("bookmark", "marque-page"),)


def test_tbx_and_weblates_tsv(tmp_path):
    path = tmp_path / "terms.tbx"
    path.write_text(TBX, encoding="utf-8")
    assert read_glossary(path).terms == (Term("file", "arquivo"), Term("bookmark", "marcador"))
    tsv = tmp_path / "terms.tsv"
    tsv.write_text("file\tarquivo\nbookmark\tmarcador\n", encoding="utf-8")
    assert read_glossary(tsv).terms == read_glossary(path).terms
    assert parse_tsv("file\tarquivo\n\n").terms == (Term("file", "arquivo"),)


@pytest.mark.parametrize("name, content, message", [
    ("terms.txt", "file,fichier\n", "a glossary is a .csv"),
    ("terms.tbx", "<martif><text><body><termEntry>", "not a readable TBX glossary"),
    ("terms.tsv", "file fichier\n", "terms.tsv:1: not `source<TAB>target`"),
    ("terms.csv", "file," + "x" * 300 + "\n", "term longer than 200 characters"),
])
def test_a_bad_glossary_is_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message.replace("(", r"\(")) as caught:
        read_glossary(path)
    assert "\n" not in str(caught.value)


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_glossary(tmp_path / "none.csv")


def test_matching_word_boundaries_any_case_longest_first():
    glossary = Glossary((Term("file", "arquivo"), Term("file manager", "gerenciador de arquivos"),
                         Term("C++", "C++"), Term("%s file", "arquivo %s")))
    found = [(m.term.source, m.start) for m in glossary.find("The FILE MANAGER opened a file; profile C++ %s file")]
    assert found == [("file manager", 4), ("file", 26), ("C++", 40), ("%s file", 44)]
    assert glossary.find("profiles, files") == []
    assert glossary.missing("Open the file", "Abrir o Arquivo") == []
    assert glossary.missing("Open the file", "Abrir o documento") == [Term("file", "arquivo")]
    assert uses("Os arquivos", "arquivo") and not uses("arquivamento", "arquivo")


def test_a_term_restricted_to_a_context(tmp_path):
    """A third column (CSV, TSV) or a TBX description of type "context" restricts a term to the entries of that
    msgctxt (issue 48: "Seeding", context "torrent state"); used without a context, a glossary holds only the
    unrestricted terms."""
    csv = tmp_path / "terms.csv"
    csv.write_text("Seeding,Semeando,torrent state\nSeeding,Semear,Verb\nfile,arquivo,\n", encoding="utf-8")
    tbx = tmp_path / "terms.tbx"
    tbx.write_text(TBX.replace('<termEntry id="2">', '<termEntry id="2"><descrip type="context">Verb</descrip>'),
                   encoding="utf-8")
    glossary = read_glossary(csv)
    assert glossary.contexts == {"torrent state", "Verb"}
    assert [m.term.target for m in glossary.find("Seeding the file")] == ["arquivo"]
    assert [m.term.target for m in glossary.in_context("torrent state").find("Seeding the file")] == ["Semeando",
                                                                                                      "arquivo"]
    assert [m.term.target for m in glossary.in_context("Verb").find("Seeding")] == ["Semear"]
    assert read_glossary(tbx).terms[1] == Term("bookmark", "marcador", "Verb")
    assert parse_tsv("Seeding\tSemeando\ttorrent state\n").contexts == {"torrent state"}
    both = Glossary((Term("file", "ficheiro"), Term("file", "arquivo", "Brazil")))
    assert both.in_context("Brazil").find("file")[0].term.target == "arquivo"  # the context's term wins
    assert both.in_context("other").find("file")[0].term.target == "ficheiro"
