"""`clearformer translate --po`: every untranslated entry filled and fuzzy, the rest kept, `msgfmt --check` passing."""

from __future__ import annotations

from datetime import datetime, timezone

import polib
import pytest
from catalog_support import TEMPLATE, msgfmt_check

from clearformer.catalog.accelerators import detect_mark, put_mark, strip_mark
from clearformer.catalog.fill import CatalogueSettings, fill_catalogue, read_catalogue
from clearformer.catalog.formats import FORMATS, escape_literals, repair_placeholders
from clearformer.catalog.plurals import PLURAL_FORMS, language_plural_forms, parse_plural_forms
from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.tokenize.placeholders import mask

# ----------------------------------------------------------------------------- the parts


@pytest.mark.parametrize(("language", "singular"), [("fr", {0}), ("en", {0}), ("ru", {0}), ("pl", {0}),
                                                    ("ja", set()), ("ar", {1}), ("sl", {0})])
def test_the_form_of_one_gets_the_singular(language, singular):
    forms = parse_plural_forms(PLURAL_FORMS[language], "x.po")
    assert forms.singular_forms() == singular
    assert language_plural_forms(f"{language}_XX") == PLURAL_FORMS[language]


@pytest.mark.parametrize("header", ["nplurals=2; plural=n >", "nplurals=2; plural=(n+2);", "nplurals=x;",
                                    "nplurals=2; plural=__import__('os')"])
def test_a_plural_forms_header_gettext_would_refuse_is_one_line(header):
    with pytest.raises(UserError, match="Plural-Forms"):
        parse_plural_forms(header, "x.po")


def test_c_format_masks_every_directive_and_escapes_the_models_percent():
    c = (FORMATS["c-format"],)
    masked = mask("100%% of %'d files in %<PRId64> %-5.2lf", tuple(FORMATS["c-format"].patterns))
    assert masked.originals == ("%%", "%'d", "%<PRId64>", "%-5.2lf")
    assert escape_literals("à 100 % ｟ph0｠ {x}", c) == "à 100 %% ｟ph0｠ {x}"
    brace = (FORMATS["python-brace-format"],)
    assert escape_literals("{ ｟ph0｠ }", brace) == "{{ ｟ph0｠ }}"
    assert escape_literals("l'image", (FORMATS["java-format"],)) == "l''image"


def test_placeholders_are_repaired_to_exactly_the_sources_in_the_formats_order():
    c = (FORMATS["c-format"],)
    assert repair_placeholders("a ｟ph1｠ b ｟ph0｠", ("%s", "%d"), c) == ("a ｟ph0｠ b ｟ph1｠", False)
    assert repair_placeholders("a ｟ph1｠ b ｟ph0｠", ("%2$s", "%1$d"), c) == ("a ｟ph1｠ b ｟ph0｠", False)
    assert repair_placeholders("a ｟ph0｠ ｟ph0｠ ｟ph5｠", ("%s", "%d"), c) == ("a ｟ph0｠ ｟ph1｠", True)


def test_accelerators_follow_the_catalogues_convention():
    assert detect_mark([("_Open", ""), ("_Save", ""), ("_Quit", ""), ("file_name", "")]) == "_"
    assert detect_mark([("&Open", "&Ouvrir"), ("Tom &amp; Jerry", "")]) == "&"
    assert detect_mark([("_Open", ""), ("a b", "")]) is None  # one marked msgid is no convention
    stripped = strip_mark("_Save as", "_")
    assert (stripped.text, stripped.letter, stripped.original()) == ("Save as", "S", "_Save as")
    assert put_mark(stripped, "Enregistrer sous") == ("Enregistrer _sous", True)
    assert put_mark(strip_mark("_Quit", "_"), "｟ph0｠ Fermer") == ("｟ph0｠ _Fermer", False)
    assert strip_mark("a && b, __x, Tom &amp; Jerry", "&").mark == ""


# ----------------------------------------------------------------------------- a whole catalogue


def fill(path, translate, language="fr", masks=True):
    po = read_catalogue(path)
    settings = CatalogueSettings(language=language, model_masks=masks)
    outcome = fill_catalogue(po, settings, str(path), translate, now=datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc))
    return po, outcome


def test_a_template_is_filled_as_msginit_and_msgmerge_would_leave_it(template, tmp_path):
    """Every model output the rules must survive: a literal % and braces, dropped and doubled placeholders,
    nothing at all (copied)."""
    outputs = iter(["à 100 % { }", "｟ph0｠ ｟ph0｠ %s", "", "Ouvrir"] * 50)
    po, outcome = fill(template, lambda texts: [next(outputs) or None for _ in texts])
    out = tmp_path / "fr.po"
    out.write_text(po.__unicode__(), encoding="utf-8")
    assert msgfmt_check(out).returncode == 0, msgfmt_check(out).stderr
    filled = polib.pofile(str(out))
    assert filled.metadata["Language"] == "fr"
    assert filled.metadata["Plural-Forms"] == "nplurals=2; plural=(n > 1);"
    assert filled.metadata["Content-Type"] == "text/plain; charset=UTF-8"
    assert filled.metadata["PO-Revision-Date"] == "2026-01-02 03:04+0000"
    assert filled.metadata["X-Generator"].startswith("clearformer ")
    assert not filled.metadata_is_fuzzy
    live = [e for e in filled if not e.obsolete]
    assert all(e.translated() or e.fuzzy for e in live)
    kept = filled.find("Hello")
    assert kept.msgstr == "Salut" and not kept.fuzzy  # a translator's work is never touched
    assert [e.msgid for e in filled.obsolete_entries()] == ["old message"]
    assert not filled.obsolete_entries()[0].msgstr
    menu = filled.find("_Open the file", msgctxt="menu")
    assert menu.occurrences == [("src/menu.c", "3")] and menu.fuzzy
    plural = filled.find("%d file")
    assert sorted(plural.msgstr_plural) == [0, 1] and all(plural.msgstr_plural.values())
    assert plural.flags[0] == "fuzzy" and "c-format" in plural.flags
    deleted = filled.find("Delete %d files from %s?")
    assert deleted.comment == "TRANSLATORS: the file's name" and deleted.occurrences == [("src/main.c", "10")]
    layout = filled.find("\nthe cat sleeps\n  I love you")
    assert layout.msgstr.startswith("\n") and "\n  " in layout.msgstr
    assert outcome.filled == len(live) - 1


def test_a_line_with_more_placeholders_than_reserved_tokens_is_copied_and_said(tmp_path):
    path = tmp_path / "many.po"
    many = " ".join(f"%{i + 1}$s" for i in range(40))
    path.write_text(TEMPLATE + f'\n#, c-format\nmsgid "{many}"\nmsgstr ""\n', encoding="utf-8")
    po, outcome = fill(path, lambda texts: ["x" for _ in texts])
    entry = po.find(many)
    assert entry.msgstr == many and entry.fuzzy and "copied from the source" in entry.tcomment
    assert outcome.copied == 1
    po, outcome = fill(path, lambda texts: [" " for _ in texts])  # the model wrote nothing: copied, and said
    assert po.find("_Quit").msgstr == "_Quit" and "the model wrote nothing" in po.find("_Quit").tcomment


def test_the_singular_and_the_plural_go_to_the_forms_of_the_header(tmp_path):
    path = tmp_path / "ru.po"
    path.write_text(TEMPLATE.replace('"Language: \\n"', '"Language: ru\\n"'), encoding="utf-8")
    po, _ = fill(path, lambda texts: [f"T({text})" for text in texts], language="fr")
    entry = po.find("%d file")
    assert po.metadata["Language"] == "ru" and po.metadata["Plural-Forms"] == PLURAL_FORMS["ru"]
    assert entry.msgstr_plural == {0: "T(%d file)", 1: "T(%d files)", 2: "T(%d files)"}
    path.write_text(TEMPLATE, encoding="utf-8")
    po, _ = fill(path, lambda texts: [f"T({text})" for text in texts], language="ja")
    assert po.find("%d file").msgstr_plural == {0: "T(%d files)"}  # one form, for every number
    out = tmp_path / "ja.po"
    out.write_text(po.__unicode__(), encoding="utf-8")
    assert msgfmt_check(out).returncode == 0, msgfmt_check(out).stderr


@pytest.mark.parametrize("fixture", ["masking_run", "plain_run"])
def test_the_command_fills_a_catalogue_msgfmt_accepts(fixture, template, tmp_path, capsys, request):
    run = request.getfixturevalue(fixture)
    out = tmp_path / "fr.po"
    before = template.read_bytes()
    assert main(["translate", "--checkpoint", str(run), "--po", str(template), "--out", str(out),
                 "--threads", "1"]) == 0
    assert "entries filled, marked fuzzy" in capsys.readouterr().err
    assert template.read_bytes() == before  # IN never written without --in-place
    check = msgfmt_check(out)
    assert check.returncode == 0, check.stderr
    filled = polib.pofile(str(out))
    assert not filled.untranslated_entries() and all(e.fuzzy for e in filled if e.msgid != "Hello" and not e.obsolete)
    for entry in filled.fuzzy_entries():  # every directive exactly (the model's literals escaped aside)
        for source, text in [(entry.msgid, entry.msgstr)] if not entry.msgid_plural else []:
            patterns = tuple(p for f in entry.flags if f in FORMATS for p in FORMATS[f].patterns)
            assert directives(source, patterns) == directives(text, patterns), (source, text)

    # an existing --out is refused; --overwrite replaces it; --in-place writes IN itself
    assert main(["translate", "--checkpoint", str(run), "--po", str(template), "--out", str(out)]) == 2
    assert "exists: pass --overwrite" in capsys.readouterr().err
    assert main(["translate", "--checkpoint", str(run), "--po", str(out), "--out", str(out), "--overwrite"]) == 2
    assert "would replace the input" in capsys.readouterr().err
    assert main(["translate", "--checkpoint", str(run), "--po", str(template), "--in-place"]) == 0
    assert msgfmt_check(template).returncode == 0


def directives(text: str, patterns: tuple[str, ...]) -> list[str]:
    return sorted(p for p in mask(text, patterns).originals if p not in ("%%", "{{", "}}", "''"))


def test_a_file_that_is_not_a_catalogue_is_one_line_with_its_line(masking_run, tmp_path, capsys):
    bad = tmp_path / "bad.po"
    bad.write_text('msgid "a"\nmsgstr "b"\n\nthis is not gettext\n', encoding="utf-8")
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"clearformer translate: error: {bad}:4: not a gettext catalogue (keyword 'this' unknown")
    assert len(err.splitlines()) == 1
    binary = tmp_path / "model.po"
    binary.write_bytes(b"\x00\xff\xfe binary")
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(binary)]) == 2
    assert f"{binary}:1: not UTF-8 text" in capsys.readouterr().err
    latin = tmp_path / "latin.po"
    latin.write_bytes(b'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "a"\nmsgstr "\xe9"\n')
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(latin)]) == 2
    assert f"{latin}:5: not UTF-8 text (the charset its header declares)" in capsys.readouterr().err


def test_the_journey_a_trained_toy_run_fills_a_template_msgfmt_accepts(toy_model, template, tmp_path, capsys):
    """The README's path: `clearformer train` (the toy preset), then `translate --po X.pot --out Y.po` with the
    run's own languages (its meta says toy: en -> fr)."""
    out = tmp_path / "fr.po"
    assert main(["translate", "--checkpoint", str(toy_model), "--po", str(template), "--out", str(out)]) == 0
    capsys.readouterr()
    check = msgfmt_check(out)
    assert check.returncode == 0, check.stderr
    filled = polib.pofile(str(out))
    assert filled.metadata["Language"] == "fr" and not filled.untranslated_entries()
    assert all(entry.fuzzy for entry in filled if not entry.obsolete and entry.msgid != "Hello")


def test_a_latin_1_catalogue_comes_back_in_utf_8_without_headers_it_did_not_need(masking_run, tmp_path, capsys):
    latin = tmp_path / "latin.po"
    latin.write_bytes(b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=ISO-8859-1\\n"\n"Language: fr\\n"\n\n'
                      b'msgid "the cat sleeps"\nmsgstr "le chat dort \xe9"\n\nmsgid "Open the file"\nmsgstr ""\n')
    out = tmp_path / "out.po"
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(latin), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith('msgid ""') and "charset=UTF-8" in text and "Plural-Forms" not in text
    assert 'msgstr "le chat dort \u00e9"' in text
    assert msgfmt_check(out).returncode == 0


@pytest.mark.parametrize("flag", [["--out", "x.po"], ["--in-place"], ["--overwrite"], ["--accelerator", "_"],
                                  ["--languages", "en:fr"]])
def test_the_catalogue_options_without_po_are_one_line(masking_run, flag, capsys):
    assert main(["translate", "--checkpoint", str(masking_run), "hello", *flag]) == 2
    err = capsys.readouterr().err.strip()
    hint = "; for text, use --output" if flag[0] == "--out" else ""
    assert err == f"clearformer translate: error: {flag[0]} applies to --po (a gettext catalogue){hint}"
