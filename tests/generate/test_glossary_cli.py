"""`translate --glossary` on text and on `--po`, and `translate --po --memory`: through the command line, on a
saved checkpoint (the word vocabulary of gen_helpers.SENTENCES, random weights: it never writes a term alone)."""

from __future__ import annotations

import json

import polib

from clearformer.cli import main


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_translate_glossary_puts_each_term_in(checkpoint, tmp_path, capsys):
    glossary = tmp_path / "terms.csv"
    glossary.write_text("source,target\ndog,le chat\nbread,musique\n", encoding="utf-8")
    code, free, _ = run_cli(["translate", "the dog sleeps", "we eat bread", "--checkpoint", str(checkpoint)], capsys)
    assert code == 0 and "le chat" not in free.split("\n")[0]
    code, out, err = run_cli(["translate", "the dog sleeps", "we eat bread", "--checkpoint", str(checkpoint),
                              "--glossary", str(glossary), "--beam", "3"], capsys)
    assert code == 0 and "glossary" not in err  # (a random model may write <unk>: the post-check says so)
    first, second = out.split("\n")[:2]
    assert "le chat" in first and "musique" in second


def test_a_term_not_placed_is_a_warning_line(checkpoint, tmp_path, capsys):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tnous mangeons du pain le chat\n", encoding="utf-8")
    code, out, err = run_cli(["translate", "the dog sleeps", "--checkpoint", str(checkpoint), "--glossary",
                              str(glossary), "--max-extra", "0"], capsys)
    assert code == 0 and out.count("\n") == 1
    assert "warning: glossary term not used: 'dog' -> 'nous mangeons du pain le chat'" in err


def test_a_bad_glossary_is_one_line_before_any_work(checkpoint, tmp_path, capsys):
    glossary = tmp_path / "terms.txt"
    glossary.write_text("dog,chat\n", encoding="utf-8")
    code, out, err = run_cli(["translate", "the dog sleeps", "--checkpoint", str(checkpoint), "--glossary",
                              str(glossary)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "a glossary is a .csv" in err


CATALOGUE = '''msgid ""
msgstr ""
"Language: fr\\n"
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=2; plural=(n > 1);\\n"

msgid "I love you"
msgstr "Je t'aime"

msgid "the dog sleeps"
msgstr ""

msgid "we eat bread"
msgstr ""

msgctxt "menu"
msgid "I love you"
msgstr ""
'''


def written(folder, name: str, text: str):
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_po_memory_and_glossary(checkpoint, tmp_path, capsys):
    po, glossary = written(tmp_path, "fr.po", CATALOGUE), written(tmp_path, "terms.csv", "dog,le chat\n")
    memory = written(tmp_path, "old.po", 'msgid "we eat bread"\nmsgstr "nous mangeons du pain"\n')
    out = tmp_path / "out.po"
    code, _, err = run_cli(["translate", "--po", str(po), "--out", str(out), "--checkpoint", str(checkpoint),
                            "--memory", str(memory), "--glossary", str(glossary)], capsys)
    assert code == 0, err
    filled = {(e.msgctxt, e.msgid): e for e in polib.pofile(str(out))}
    exact = filled[(None, "we eat bread")]  # from --memory: verbatim, not fuzzy
    assert exact.msgstr == "nous mangeons du pain" and "fuzzy" not in exact.flags
    assert "clearformer: from memory, 100% match" in exact.tcomment
    own = filled[("menu", "I love you")]  # the catalogue's own entry, in another context: no exact match (issue 48)
    assert own.msgstr == "Je t'aime" and "(the catalogue)" in own.tcomment and "fuzzy" in own.flags
    assert "from memory, 99% match" in own.tcomment
    term = filled[(None, "the dog sleeps")]  # the model, with the glossary's term
    assert "le chat" in term.msgstr and "fuzzy" in term.flags
    assert "1 entry filled from memory exactly" in err
    code, _, err = run_cli(["translate", "--po", str(po), "--out", str(tmp_path / "none.po"), "--checkpoint",
                            str(checkpoint), "--no-memory"], capsys)
    assert code == 0 and polib.pofile(str(tmp_path / "none.po")).find("I love you", msgctxt="menu").msgstr != "" \
        and "from memory" not in err


def test_memory_options_refused_without_po(checkpoint, tmp_path, capsys):
    code, _, err = run_cli(["translate", "I love you", "--checkpoint", str(checkpoint), "--memory", "x.po"], capsys)
    assert code == 2 and "--memory applies to --po" in err
    memory = tmp_path / "old.pot"
    memory.write_text('msgid "x"\nmsgstr ""\n', encoding="utf-8")
    po = tmp_path / "fr.po"
    po.write_text(CATALOGUE, encoding="utf-8")
    code, _, err = run_cli(["translate", "--po", str(po), "--checkpoint", str(checkpoint), "--memory", str(memory)],
                           capsys)
    assert code == 2 and "a memory is a gettext catalogue (.po) or a TMX file" in err


def test_explain_shows_where_a_term_decided_the_token(checkpoint, tmp_path, capsys):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tle chat\n", encoding="utf-8")
    code, out, err = run_cli(["explain", "the dog sleeps", "--checkpoint", str(checkpoint), "--glossary",
                              str(glossary)], capsys)
    assert code == 0, err
    assert "for a glossary term" in out and "le chat" in out.split("RESULT")[-1]
    code, out, _ = run_cli(["explain", "the dog sleeps", "--checkpoint", str(checkpoint), "--glossary",
                            str(glossary), "--format", "json"], capsys)
    forced = json.loads(out)["glossary_forced"]
    assert forced and {"step", "token"} <= set(forced[0])


def test_po_names_a_term_not_placed_in_a_comment(checkpoint, tmp_path, capsys):
    po = written(tmp_path, "fr.po", CATALOGUE)
    glossary = written(tmp_path, "terms.tsv", "dog\tnous mangeons du pain le chat\n")
    out = tmp_path / "out.po"
    code, _, err = run_cli(["translate", "--po", str(po), "--out", str(out), "--checkpoint", str(checkpoint),
                            "--glossary", str(glossary), "--max-extra", "0", "--no-memory"], capsys)
    assert code == 0 and "1 glossary term(s) not used" in err
    entry = polib.pofile(str(out)).find("the dog sleeps")
    assert "fuzzy" in entry.flags
    comment = " ".join(entry.tcomment.split())  # a long comment is wrapped at 78 columns
    assert "clearformer: glossary term not used: 'dog' -> 'nous mangeons du pain le chat'" in comment


CONTEXTS = '''msgid ""
msgstr ""
"Language: fr\\n"
"Content-Type: text/plain; charset=UTF-8\\n"

msgctxt "pet state"
msgid "the dog sleeps"
msgstr ""

msgid "the dog sleeps"
msgstr ""

msgctxt "other"
msgid "the dog sleeps"
msgstr ""
'''


def test_a_glossary_term_restricted_to_a_msgctxt_applies_there_only(checkpoint, tmp_path, capsys):
    """"Seeding" (context: torrent state) came out "Verificação" (issue 48): a team's glossary entry
    `Seeding,Semeando,torrent state` must decide it there, and nowhere else (a CSV's third column, a TSV's)."""
    po = written(tmp_path, "fr.po", CONTEXTS)
    for name, text in (("terms.csv", "dog,le chat,pet state\n"), ("terms.tsv", "dog\tle chat\tpet state\n")):
        out = tmp_path / f"out-{name}.po"
        code, _, err = run_cli(["translate", "--po", str(po), "--out", str(out), "--checkpoint", str(checkpoint),
                                "--glossary", str(written(tmp_path, name, text)), "--no-memory"], capsys)
        assert code == 0, err
        filled = {e.msgctxt: e.msgstr for e in polib.pofile(str(out))}
        assert "le chat" in filled["pet state"], filled
        assert "le chat" not in filled[None] and filled[None] == filled["other"], filled
