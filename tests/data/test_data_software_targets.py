"""`data build software --target X`: the en-fr-software recipe for any locale, and French unchanged.

The French path is held against the code before the recipe was generalised: the fixture package below
was built by that code (main at a19e8ae, `software.build_from_debs`) and its split files' SHA-256 and
manifest are written here; the generalised code must give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_data_deb import DEP5, make_deb, needs_dpkg

from clearformer.cli import main
from clearformer.data import software
from clearformer.data.mo import MoEntry, write_mo
from clearformer.errors import UserError

# What the pre-generalisation code wrote for `fixture_deb` (sha256 of each split file, its line count).
FRENCH_BEFORE = {
    "train.tsv": ("b960aa2ff6c4166627309db22bced873c9403961d2edfba385160d85af8a9cdb", 296),
    "valid.tsv": ("740d2b8fe3fd63be4aa886afaf0602d45b3966f2c249850b720922c0990982d8", 4),
    "test.tsv": ("b22b692babfafd52e774d5dcf1b14bced476eb2b204216b3944d4895a32a8a28", 4),
}
FRENCH_MANIFEST_BEFORE = {
    "name": "en-fr-software",
    "description": "English -> French pairs from the French gettext catalogues (msgid -> msgstr of the fr .mo "
                   "files) of Debian packages",
    "source": "Debian packages fetched with `apt-get download` (no install), read with dpkg-deb",
    "languages": {"source": "en", "target": "fr"},
    "packages": [{"package": "fixture-l10n", "version": "1.0", "architecture": "all",
                  "file": "fixture-l10n_1.0_all.deb", "catalogues": ["lo.mo", "app.mo"], "licence": "LGPL-2.1+",
                  "licence_from": "/usr/share/doc/fixture-l10n/copyright", "new_pairs": 304}],
}


def fixture_deb(folder: Path) -> Path:
    """One package with fr, fr_CA, pt, pt_BR catalogues (LibreOffice's folder layout among them)."""
    french = [MoEntry(f"Open file number {i}", (f"Ouvrir le fichier numéro {i}",)) for i in range(300)]
    french += [MoEntry("_Save %s", ("_Enregistrer %s",)),
               MoEntry("%d file", ("%d fichier", "%d fichiers"), msgid_plural="%d files"),
               MoEntry("<b>x</b>", ("<b>y</b>",))]
    brazilian = [MoEntry(f"Open file number {i}", (f"Abrir o arquivo número {i}",)) for i in range(200)]
    european = [MoEntry(f"Open file number {i}", (f"Abrir o ficheiro número {i}",)) for i in range(200)]
    return make_deb(folder, "fixture-l10n", "1.0", {
        "usr/share/locale/fr/LC_MESSAGES/app.mo": write_mo(french),
        "usr/lib/libreoffice/program/resource/fr/LC_MESSAGES/lo.mo":
            write_mo([MoEntry("Insert ~Table", ("Insérer un ~tableau",))]),
        "usr/share/locale/pt_BR/LC_MESSAGES/app.mo": write_mo(brazilian),
        "usr/share/locale/pt/LC_MESSAGES/app.mo": write_mo(european),
        "usr/share/locale/fr_CA/LC_MESSAGES/app.mo": write_mo([MoEntry("Color", ("Couleur CA",))]),
        "usr/share/doc/fixture-l10n/copyright": DEP5})


def manifest_without_machine(out: Path) -> dict:
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    for entry in manifest["packages"]:
        entry.pop("sha256")  # the fixture .deb is rebuilt (new timestamps) by every test run
    return {key: manifest[key] for key in FRENCH_MANIFEST_BEFORE}


@needs_dpkg
@pytest.mark.parametrize("target", [None, "fr"])
def test_french_gives_the_bytes_the_code_before_gave(tmp_path, target):
    out = tmp_path / "out"
    extra = {} if target is None else {"target": target}
    software.build_from_debs([fixture_deb(tmp_path)], out, log=lambda _: None, min_pairs=1, min_heldout=0, **extra)
    for name, (digest, lines) in FRENCH_BEFORE.items():
        data = (out / name).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), data.count(b"\n")) == (digest, lines), name
    assert manifest_without_machine(out) == FRENCH_MANIFEST_BEFORE


@needs_dpkg
def test_pt_BR_reads_exactly_its_own_catalogues(tmp_path):
    out = tmp_path / "out"
    software.build_from_debs([fixture_deb(tmp_path)], out, log=lambda _: None, min_pairs=1, min_heldout=0,
                             target="pt_BR")
    targets = [line.split("\t")[1] for split in ("train", "valid", "test")
               for line in (out / f"{split}.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(targets) == 200 and all("arquivo" in text for text in targets)  # no pt (ficheiro), no fr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["name"] == "en-pt-software" and manifest["languages"] == {"source": "en", "target": "pt_BR"}
    assert manifest["description"].startswith("English -> Brazilian Portuguese pairs")
    assert manifest["packages"][0]["catalogues"] == ["app.mo"]


def test_names_packages_and_locales():
    assert software.corpus_name("fr") == software.NAME == "en-fr-software"
    assert software.corpus_name("pt_BR") == "en-pt-software" and software.corpus_name("sr@latin") == "en-sr-software"
    assert software.packages_for("fr") == software.PACKAGES
    assert software.packages_for("pt_BR")[0] == "libreoffice-l10n-pt-br"
    assert software.packages_for("pt_BR")[1:] == software.PACKAGES[1:]
    assert software.catalogue_pattern("pt").search("usr/share/locale/pt/LC_MESSAGES/a.mo")
    assert not software.catalogue_pattern("pt").search("usr/share/locale/pt_BR/LC_MESSAGES/a.mo")
    for bad in ("pt-br", "../fr", "FR", "", "fr/LC_MESSAGES"):
        with pytest.raises(UserError, match="--target"):
            software.check_target(bad)


def test_a_folder_built_for_another_locale_is_not_replaced(tmp_path):
    out = tmp_path / "en-pt-software"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"languages": {"source": "en", "target": "pt"}}))
    with pytest.raises(UserError, match="built for 'pt', not 'pt_BR'"):
        software.build(out, tmp_path / "downloads", log=lambda _: None, target="pt_BR")


@pytest.mark.parametrize("argv, message", [
    (["data", "build", "software"], "software needs --target LOCALE"),
    (["data", "build", "en-fr-bible", "--target", "de"], "--target only applies to"),
    (["data", "build", "software", "--target", "pt-BR"], "--target 'pt-BR': give a gettext locale"),
])
def test_target_errors_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.setenv("CLEARFORMER_DATA", str(tmp_path / "data"))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("clearformer data: error: ") and message in err and "\n" not in err


@needs_dpkg
@pytest.mark.parametrize(("target", "refused"), [("xx", True), ("pt_BR", False), ("ast", False)])
def test_a_locale_no_package_translates_is_refused_before_the_big_download(target, refused, tmp_path, monkeypatch):
    """Issue 51: `--target xx` downloaded 96 MB of 16 packages, then pointed at warnings that did not exist. The
    recipe's two smallest many-language packages are fetched first (about 2 MB) and their catalogues' locales,
    with LibreOffice's per-language package, say whether any package translates into the target."""
    debs = tmp_path / "made"
    debs.mkdir()
    probe = make_deb(debs, "libc-l10n", "1.0", {
        "usr/share/locale/pt_BR/LC_MESSAGES/libc.mo": write_mo([MoEntry("Open", ("Abrir",))]),
        "usr/share/locale/de/LC_MESSAGES/libc.mo": write_mo([MoEntry("Open", ("Öffnen",))])})
    requested: list[list[str]] = []

    def fake_download(names, folder, log=print):
        requested.append(list(names))
        return {name: probe for name in names if name == "libc-l10n" or len(names) > 2}

    monkeypatch.setattr(software, "apt_download", fake_download)
    monkeypatch.setattr(software, "package_known", lambda name: name == "libreoffice-l10n-ast")
    logged: list[str] = []
    if refused:
        with pytest.raises(UserError) as error:
            software.build(tmp_path / "out", tmp_path / "downloads", log=logged.append, target=target)
        message = str(error.value)
        assert "'xx'" in message and "de, pt_BR" in message and "\n" not in message
        assert requested == [["libc-l10n", "util-linux-locales"]]  # nothing else was downloaded
    else:
        with pytest.raises(UserError) as error:  # the fake downloads give too few pairs: the build's own error
            software.build(tmp_path / "out", tmp_path / "downloads", log=logged.append, target=target)
        assert len(requested) == 2 and len(requested[1]) == len(software.PACKAGES)
        assert "warnings above" not in str(error.value)  # no package failed: no warning to point at
