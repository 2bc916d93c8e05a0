"""Issue 48, catalogue fidelity: a catalogue comes back byte for byte, except the entries clearformer filled and
the header (PO-Revision-Date, X-Generator); real catalogues (tests/catalog/real/README.md) and one that holds what
a careless writer loses (fidelity_support.KEEPSAKE); every output passes GNU msgfmt --check."""

from __future__ import annotations

import gettext
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from catalog_support import msgfmt_check
from fidelity_support import KEEPSAKE, WHEN, fill_text, marked, outside

from clearformer.catalog.fill import CatalogueSettings, fill_catalogue
from clearformer.catalog.reading import parse_catalogue, read_catalogue
from clearformer.catalog.writing import catalogue_text, render_field
from clearformer.cli import main

REAL = Path(__file__).parent / "real"
CATALOGUES = sorted(p.name for p in REAL.iterdir() if p.suffix in (".po", ".pot"))


def material(name: str) -> str:
    return KEEPSAKE if name == "keepsake" else (REAL / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["keepsake", *CATALOGUES])
def test_a_catalogue_read_and_written_back_is_the_same_bytes(name, tmp_path):
    path = tmp_path / "in.po"
    path.write_text(material(name), encoding="utf-8")
    assert msgfmt_check(path).returncode == 0  # valid gettext, as msgfmt reads it
    assert catalogue_text(read_catalogue(path)).encode("utf-8") == path.read_bytes()


@pytest.mark.parametrize("name", ["keepsake", *CATALOGUES])
def test_filling_rewrites_only_the_filled_entries_and_the_header(name, tmp_path):
    text = material(name)
    filled, keys = fill_text(text)
    assert keys, "the material has entries to fill"
    assert outside(filled, keys) == outside(text, keys)  # every other byte as it was
    out = tmp_path / "out.po"
    out.write_text(filled, encoding="utf-8")
    check = msgfmt_check(out)
    assert check.returncode == 0, check.stderr
    po = read_catalogue(out)
    for entry in po:
        if (entry.msgctxt, entry.msgid) in keys:
            assert entry.fuzzy and (entry.msgstr or all(entry.msgstr_plural.values())), entry
    assert po.metadata["PO-Revision-Date"] == "2026-01-02 03:04+0000"


def test_valid_escapes_and_an_obsolete_entrys_previous_msgid_survive():
    filled, _ = fill_text(KEEPSAKE)
    assert r'msgid "\x41 and \101 and A\a"' in filled and r'msgstr "\x41 et \101 et A\a"' in filled
    assert "#~| msgid \"Quit now\"\n#~ msgid \"Quit\"" in filled
    assert "msgstr \"Ouvrir  le fichier\"" in filled  # a translator's double space
    po = parse_catalogue(KEEPSAKE.encode(), "x.po")
    assert po.find("A and A and A\a").msgstr == "A et A et A\a"  # the escapes read as gettext reads them
    assert po.find("Quit", include_obsolete_entries=True).previous_msgid == "Quit now"
    assert po.find("Open the file").previous_msgid == "Open the old file"


def test_crlf_line_ends_and_a_file_without_a_final_newline_are_kept(tmp_path):
    text = KEEPSAKE.replace("\n", "\r\n").rstrip("\r\n")
    filled, keys = fill_text(text)
    assert outside(filled, keys) == outside(text, keys)
    assert "\n" not in filled.replace("\r\n", "")  # what clearformer wrote uses the file's line ends too
    out = tmp_path / "crlf.po"
    out.write_bytes(filled.encode())
    assert msgfmt_check(out).returncode == 0


def test_a_filled_entry_is_written_as_msgcat_writes_it():
    assert render_field("msgstr", "short") == ['msgstr "short"']
    long = "word " * 30
    lines = render_field("msgstr", long)
    assert lines[0] == 'msgstr ""' and all(len(line) <= 79 for line in lines)
    assert "".join(line[1:-1] for line in lines[1:]) == long
    assert render_field("msgstr", 'a\nb "c"\\') == ['msgstr ""', '"a\\n"', '"b \\"c\\"\\\\"']


def test_a_babel_template_gets_a_header_plain_msgfmt_reads(tmp_path):
    """Issue 49: Babel's template keeps `#, fuzzy` on its header (charset=utf-8, no Plural-Forms): filled, the
    header is no longer fuzzy, so plain msgfmt (no --use-fuzzy) builds a .mo with the charset and plural forms."""
    source = REAL / "sphinx-babel.pot"
    filled, _ = fill_text(source.read_text(encoding="utf-8"), language="pt")
    out = tmp_path / "pt.po"
    out.write_text(filled, encoding="utf-8")
    header = filled[: filled.index('msgid ""')]
    assert "#, fuzzy" not in header and header.startswith("# Translations template for Sphinx.")
    po = read_catalogue(out)
    assert po.metadata["Language"] == "pt" and po.metadata["Plural-Forms"] == "nplurals=2; plural=(n != 1);"
    msgfmt = shutil.which("msgfmt")
    if msgfmt is None:
        pytest.skip("GNU gettext's msgfmt is missing: run scripts/install-gettext.sh")
    mo = tmp_path / "pt.mo"
    subprocess.run([msgfmt, "-o", str(mo), str(out)], check=True, capture_output=True)
    with open(mo, "rb") as stream:
        info = gettext.GNUTranslations(stream).info()
    assert info["content-type"] == "text/plain; charset=UTF-8" and info["language"] == "pt"
    assert info["plural-forms"] == "nplurals=2; plural=(n != 1);"


def test_a_java_format_apostrophe_quotes_and_the_arguments_stay_the_same(tmp_path):
    """Issue 51: in MessageFormat "It's {0} o'clock" has no argument (the apostrophes quote "s {0} o"): the msgstr
    keeps the quoted span whole and doubles the apostrophes the model writes, so msgfmt --check passes."""
    text = (KEEPSAKE + '\n#, java-format\nmsgid "It\'s {0} o\'clock"\nmsgstr ""\n\n#, java-format\n'
            'msgid "Delete {0} files from {1}? It\'\'s final"\nmsgstr ""\n')
    filled, _ = fill_text(text, translate=lambda texts: [f"l'heure {t} c'est" for t in texts])
    out = tmp_path / "java.po"
    out.write_text(filled, encoding="utf-8")
    check = msgfmt_check(out)
    assert check.returncode == 0, check.stderr
    po = read_catalogue(out)
    assert "'s {0} o'" in po.find("It's {0} o'clock").msgstr
    assert po.find("Delete {0} files from {1}? It''s final").msgstr.startswith("l''heure Delete {0}")


@pytest.mark.parametrize(("comment", "expected"), [
    ("# Converted from the old charset=ISO-8859-1 file\n", "Café crème à emporter"),
    ("", "Café crème à emporter"),
])
def test_only_the_headers_content_type_names_the_charset(comment, expected, tmp_path):
    """Issue 51: a `charset=` in a comment, or in a msgid of a file without a header, is text, not the charset."""
    body = f'{comment}msgid "Take away"\nmsgstr "{expected}"\n\nmsgid "the charset=KOI8-R field"\nmsgstr ""\n'
    if comment:
        body = comment + 'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n' + body[len(comment):]
    path = tmp_path / "cafe.po"
    path.write_text(body, encoding="utf-8")
    po = read_catalogue(path)
    assert po.find("Take away").msgstr == expected
    filled, keys = fill_text(body)
    assert outside(filled, keys) == outside(body, keys) and expected in filled


def test_in_place_and_overwrite_keep_the_catalogues_mode_and_group(masking_run, tmp_path, capsys):
    """Issue 48: a 0600 catalogue stays 0600 (and keeps its group) when clearformer replaces it."""
    path = tmp_path / "private.po"
    path.write_text(KEEPSAKE, encoding="utf-8")
    path.chmod(0o600)
    group = _another_group()
    if group is not None:
        os.chown(path, -1, group)
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(path), "--in-place"]) == 0
    assert path.stat().st_mode & 0o777 == 0o600
    assert group is None or path.stat().st_gid == group
    out = tmp_path / "out.po"
    out.write_text("", encoding="utf-8")
    out.chmod(0o640)
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(path), "--out", str(out),
                 "--overwrite"]) == 0
    assert out.stat().st_mode & 0o777 == 0o640
    capsys.readouterr()


def _another_group() -> int | None:
    """A group other than this process's that it may give a file (root: any; else one of its groups)."""
    groups = set(os.getgroups()) - {os.getegid()} if os.geteuid() != 0 else {os.getegid() + 1}
    return min(groups) if groups else None


def test_the_command_fills_a_real_catalogue_byte_faithfully(masking_run, tmp_path, capsys):
    source = REAL / "django-lb.po"
    out = tmp_path / "lb.po"
    assert main(["translate", "--checkpoint", str(masking_run), "--po", str(source), "--out", str(out)]) == 0
    capsys.readouterr()
    text = source.read_text(encoding="utf-8")
    po = read_catalogue(source)
    keys = {(e.msgctxt, e.msgid) for e in po if not e.obsolete and e.msgid and not e.translated()}
    filled = out.read_text(encoding="utf-8")
    assert outside(filled, keys) == outside(text, keys)
    assert msgfmt_check(out).returncode == 0


def _django_catalogues(tmp_path_factory) -> list[Path]:
    """Every catalogue of Debian's python3-django, fetched with apt-get download (a slow test's material)."""
    apt, dpkg = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if not apt or not dpkg:
        pytest.skip("apt-get and dpkg-deb are needed to fetch Debian's python3-django")
    folder = tmp_path_factory.mktemp("django-deb")
    fetched = subprocess.run([apt, "download", "python3-django"], cwd=folder, capture_output=True, text=True,
                             timeout=600)
    debs = list(folder.glob("python3-django_*.deb"))
    if fetched.returncode != 0 or not debs:
        pytest.skip(f"apt-get download python3-django failed: {fetched.stderr.strip()[-300:]}")
    subprocess.run([dpkg, "-x", str(debs[0]), str(folder / "root")], check=True)
    return sorted((folder / "root").rglob("*.po"))


@pytest.mark.slow
def test_every_catalogue_of_a_debian_package_round_trips(tmp_path_factory):
    """All of python3-django's catalogues (1,182 in Debian 12): read and written back, the same bytes; filled,
    the same bytes outside the filled entries and the header, and msgfmt --check passes."""
    catalogues = _django_catalogues(tmp_path_factory)
    assert len(catalogues) > 100
    out = tmp_path_factory.mktemp("django-filled") / "out.po"
    for path in catalogues:
        text = path.read_text(encoding="utf-8")
        po = read_catalogue(path)
        assert catalogue_text(po) == text, path
        settings = CatalogueSettings(language=po.metadata.get("Language") or "fr")
        keys = {(e.msgctxt, e.msgid) for e in po if not e.obsolete and e.msgid and not e.translated()
                and not (e.msgstr_plural and not e.msgid_plural)}
        before = outside(text, keys, po)  # from the catalogue as read (its spans are the text's)
        fill_catalogue(po, settings, str(path), marked, now=WHEN)
        filled = catalogue_text(po)
        assert outside(filled, keys) == before, path
        out.write_text(filled, encoding="utf-8")
        check = msgfmt_check(out)
        assert check.returncode == 0, (path, check.stderr)


def test_a_singular_without_the_plurals_placeholder_goes_only_to_a_form_of_one_alone(tmp_path):
    """Django's Croatian "an hour ago" / "%(count)s hours ago": form 0 is 1, 21, 31..., so it gets the plural's
    translation (msgfmt --check wants %(count)s there); "%d file" / "%d files" keeps the singular in form 0."""
    header = KEEPSAKE[: KEEPSAKE.index("#. the letter")].replace(
        "nplurals=2; plural=(n > 1);", "nplurals=3; plural=n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
        "(n%100<10 || n%100>=20) ? 1 : 2;")
    text = header + ('#, python-format\nmsgid "an hour ago"\nmsgid_plural "%(count)s hours ago"\nmsgstr[0] ""\n'
                     'msgstr[1] ""\nmsgstr[2] ""\n\n#, c-format\nmsgid "%d file"\nmsgid_plural "%d files"\n'
                     'msgstr[0] ""\nmsgstr[1] ""\nmsgstr[2] ""\n')
    filled, _ = fill_text(text, language="hr")
    out = tmp_path / "hr.po"
    out.write_text(filled, encoding="utf-8")
    assert msgfmt_check(out).returncode == 0, msgfmt_check(out).stderr
    po = read_catalogue(out)
    assert po.find("an hour ago").msgstr_plural[0] == "TR %(count)s hours ago"
    assert po.find("%d file").msgstr_plural[0] == "TR %d file"


def test_a_template_with_plurals_and_no_known_language_names_the_flag(template):
    """Issue 49: an imported run records no languages; the error named 'the target language' literally."""
    from clearformer.errors import UserError

    po = read_catalogue(template)
    with pytest.raises(UserError) as error:
        fill_catalogue(po, CatalogueSettings(language=None), str(template), marked, now=WHEN)
    assert "--languages SRC:TGT" in str(error.value) and "the target language'" not in str(error.value)
