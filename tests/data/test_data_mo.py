"""The .mo reader against Python's own gettext (a peer implementation) and against msgfmt's output."""

from __future__ import annotations

import gettext
import io
import shutil
import struct
import subprocess

import pytest

from clearformer.data.mo import MoEntry, MoError, read_mo, write_mo

ENTRIES = [
    MoEntry("File", ("Fichier",)),
    MoEntry("%d file", ("%d fichier", "%d fichiers"), msgid_plural="%d files"),
    MoEntry("Open", ("Ouvrir",), context="menu"),
    MoEntry("Open", ("Ouvert",), context="state"),
    MoEntry("Élément", ("Élément",)),
]


@pytest.mark.parametrize("big_endian", [False, True])
def test_round_trip_and_python_gettext_agree(big_endian):
    data = write_mo(ENTRIES, big_endian=big_endian)
    catalogue = read_mo(data)
    assert sorted(catalogue.entries, key=repr) == sorted(ENTRIES, key=repr)
    assert catalogue.headers["Content-Type"] == "text/plain; charset=UTF-8"
    # The peer: the standard library's reader sees the same messages in the same bytes.
    peer = gettext.GNUTranslations(io.BytesIO(data))
    assert peer.gettext("File") == "Fichier"
    assert peer.ngettext("%d file", "%d files", 1) == "%d fichier"
    assert peer.ngettext("%d file", "%d files", 5) == "%d fichiers"
    assert peer.pgettext("menu", "Open") == "Ouvrir"
    assert peer.pgettext("state", "Open") == "Ouvert"


def test_charset_from_header_decodes_latin1():
    data = write_mo([MoEntry("Quit", ("Quitter l'éditeur",))], charset="ISO-8859-1")
    assert "é".encode("latin-1") in data
    assert read_mo(data).entries == [MoEntry("Quit", ("Quitter l'éditeur",))]


def test_undecodable_entries_are_counted_not_fatal():
    data = bytearray(write_mo([MoEntry("Good", ("Bon",)), MoEntry("Bad", ("Xauvais",))]))
    data[data.index(b"Xauvais")] = 0xFF  # not UTF-8
    catalogue = read_mo(bytes(data))
    assert catalogue.entries == [MoEntry("Good", ("Bon",))]
    assert catalogue.undecodable == 1


def test_bad_files_raise_mo_error():
    with pytest.raises(MoError, match="magic"):
        read_mo(b"\x00" * 40)
    with pytest.raises(MoError, match="too short"):
        read_mo(b"\xde\x12\x04\x95")
    truncated = struct.pack("<5I", 0x950412DE, 0, 1000, 28, 8028)
    with pytest.raises(MoError, match="past the end"):
        read_mo(truncated)


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="msgfmt (gettext) not installed")
def test_reads_what_msgfmt_writes(tmp_path):
    po = tmp_path / "fr.po"
    po.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
        '"Plural-Forms: nplurals=2; plural=(n > 1);\\n"\n\n'
        'msgctxt "menu"\nmsgid "_Open"\nmsgstr "_Ouvrir"\n\n'
        'msgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] "%d fichier"\nmsgstr[1] "%d fichiers"\n',
        encoding="utf-8")
    subprocess.run(["msgfmt", "-o", str(tmp_path / "fr.mo"), str(po)], check=True)
    entries = read_mo((tmp_path / "fr.mo").read_bytes()).entries
    assert sorted(entries, key=repr) == sorted([
        MoEntry("_Open", ("_Ouvrir",), context="menu"),
        MoEntry("%d file", ("%d fichier", "%d fichiers"), msgid_plural="%d files"),
    ], key=repr)
