"""The en-fr-software recipe on tiny .deb packages built here with dpkg-deb; apt-get faked (no network)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clearformer.cli import main
from clearformer.data import software
from clearformer.data.deb import apt_download, copyright_licence, deb_info, iter_files
from clearformer.data.mo import MoEntry, write_mo
from clearformer.errors import UserError

needs_dpkg = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb not installed")

DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: test

Files: *
Copyright: 2024 Someone
License: GPL-2+

Files: po/*
Copyright: 2024 Translators
License: LGPL-2.1+

Files: icons/*
License: CC0-1.0
"""

FRENCH = [
    MoEntry("_Open", ("_Ouvrir",)), MoEntry("Close the window", ("Fermer la fenêtre",)),
    MoEntry("%d file", ("%d fichier", "%d fichiers"), msgid_plural="%d files"),
    MoEntry("<b>Bold</b>", ("<b>Gras</b>",)), MoEntry("Quit", ("Quitter",), context="menu"),
]


def make_deb(folder: Path, package: str, version: str, files: dict[str, bytes | str],
             links: dict[str, str] | None = None) -> Path:
    """A minimal binary package holding `files` (path -> content) and symbolic `links`."""
    root = folder / f"{package}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: all\nMaintainer: T <t@example.org>\n"
        "Description: test package\n", encoding="utf-8")
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    for name, target in (links or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / name)
    deb = folder / f"{package}_{version.replace(':', '%3a')}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)],
                   check=True, capture_output=True)
    return deb


def l10n_deb(folder: Path, package: str = "test-l10n", entries=None) -> Path:
    return make_deb(folder, package, "1:2.0-1", {
        "usr/share/locale/fr/LC_MESSAGES/app.mo": write_mo(entries or FRENCH),
        "usr/share/locale/de/LC_MESSAGES/app.mo": write_mo([MoEntry("Open", ("Öffnen",))]),
        f"usr/share/doc/{package}/copyright": DEP5,
    })


def read_tsvs(folder: Path) -> set[tuple[str, str]]:
    pairs = set()
    for split in ("train", "valid", "test"):
        for line in (folder / f"{split}.tsv").read_text(encoding="utf-8").splitlines():
            pairs.add(tuple(line.split("\t")))
    return pairs


def test_copyright_licence_follows_dep5_and_free_form():
    assert copyright_licence(DEP5) == "LGPL-2.1+"                       # the last matching stanza wins
    assert copyright_licence(DEP5.replace("po/*", "doc/*")) == "GPL-2+"  # only Files: * matches
    assert copyright_licence("Copyright 2001 X\nLicense: GNU GPL; some portions public domain.\n") == \
        "GNU GPL; some portions public domain."
    assert copyright_licence("This library is under the GNU Lesser General Public License 2.1.") == \
        "free-form copyright file naming: LGPL"


@needs_dpkg
def test_reads_only_french_catalogues_from_the_deb(tmp_path):
    deb = l10n_deb(tmp_path)
    info = deb_info(deb)
    assert (info.package, info.version, info.architecture) == ("test-l10n", "1:2.0-1", "all")
    names = [name for name, _ in iter_files(deb, lambda name: name.endswith(".mo"))]
    assert sorted(names) == ["usr/share/locale/de/LC_MESSAGES/app.mo",
                             "usr/share/locale/fr/LC_MESSAGES/app.mo"]


@needs_dpkg
def test_build_from_debs_writes_clean_pairs_and_manifest_identically_twice(tmp_path):
    first = l10n_deb(tmp_path)
    # A second package repeating one pair and adding one; its doc folder links to a base package.
    base = make_deb(tmp_path, "test-base", "1.0", {"usr/share/doc/test-base/copyright": DEP5})
    extra = make_deb(tmp_path, "test-extra", "3.1", {
        "usr/share/locale/fr/LC_MESSAGES/extra.mo": write_mo([MoEntry("_Open", ("_Ouvrir",)),
                                                               MoEntry("Help", ("Aide",))])},
        links={"usr/share/doc/test-extra": "test-base"})
    fetched = []

    def fetch(name):
        fetched.append(name)
        return base

    outputs = []
    for run in ("a", "b"):
        out = tmp_path / f"out-{run}"
        software.build_from_debs([first, extra], out, log=lambda _: None, fetch=fetch, min_pairs=1,
                                 min_heldout=0)
        outputs.append({path.name: path.read_bytes() for path in sorted(out.iterdir())})
    assert outputs[0] == outputs[1]
    assert fetched == ["test-base", "test-base"]

    out = tmp_path / "out-a"
    assert read_tsvs(out) == {("Open", "Ouvrir"), ("Close the window", "Fermer la fenêtre"),
                              ("%d file", "%d fichier"), ("%d files", "%d fichiers"), ("Quit", "Quitter"),
                              ("Help", "Aide")}
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    first_entry, extra_entry = manifest["packages"]
    assert (first_entry["package"], first_entry["version"], first_entry["licence"]) == \
        ("test-l10n", "1:2.0-1", "LGPL-2.1+")
    assert first_entry["catalogues"] == ["app.mo"] and first_entry["new_pairs"] == 5
    assert extra_entry["licence"] == "LGPL-2.1+" and "test-base" in extra_entry["licence_from"]
    assert manifest["cleaning"]["duplicates_removed"] == 1
    assert manifest["cleaning"]["dropped_markup"] == 1
    assert manifest["pairs"]["total"] == 6


@needs_dpkg
def test_too_few_pairs_is_a_one_line_error(tmp_path):
    with pytest.raises(UserError, match="only 5 pairs from 1 package"):
        software.build_from_debs([l10n_deb(tmp_path)], tmp_path / "out", log=lambda _: None, min_pairs=10)


FAKE_APT = """#!/bin/sh
echo "$@" >> "$FAKE_APT_STATE/calls"
case "$1" in
  update) touch "$FAKE_APT_STATE/updated"; exit 0;;
  download)
    shift
    if [ ! -f "$FAKE_APT_STATE/updated" ]; then echo "E: Unable to locate package $1" >&2; exit 100; fi
    for p in "$@"; do
      if [ ! -f "$FAKE_APT_REPO/$p.deb" ]; then echo "E: Unable to locate package $p" >&2; exit 100; fi
    done
    for p in "$@"; do cp "$FAKE_APT_REPO/$p.deb" "./${p}_1.0_all.deb"; done;;
esac
"""


@needs_dpkg
def test_apt_download_updates_once_when_a_package_is_not_found_then_uses_the_cache(tmp_path, monkeypatch):
    bin_dir, repo, state = tmp_path / "bin", tmp_path / "repo", tmp_path / "state"
    for folder in (bin_dir, repo, state):
        folder.mkdir()
    (bin_dir / "apt-get").write_text(FAKE_APT)
    (bin_dir / "apt-get").chmod(0o755)
    shutil.copy(l10n_deb(tmp_path), repo / "test-l10n.deb")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_APT_STATE", str(state))
    monkeypatch.setenv("FAKE_APT_REPO", str(repo))
    messages = []

    cache = tmp_path / "cache"
    found = apt_download(["test-l10n", "no-such-package"], cache, log=messages.append)
    assert list(found) == ["test-l10n"] and found["test-l10n"].parent == cache
    calls = (state / "calls").read_text().splitlines()
    assert calls.count("update") == 1
    assert any("no-such-package not downloaded" in message for message in messages)

    apt_download(["test-l10n"], cache, log=messages.append)  # cached: apt-get is not called again
    assert (state / "calls").read_text().splitlines() == calls


def test_missing_apt_get_is_a_one_line_cli_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLEARFORMER_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there: no apt-get
    assert main(["data", "build", "en-fr-software"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("clearformer data: error: apt-get not found") and "\n" not in err
