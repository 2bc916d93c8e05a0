"""Split a parallel corpus into train / valid / test by hash and write it with its manifest.

A pair's split depends only on its source sentence, normalised (case-folded, punctuation and
spacing dropped), so a rebuild gives the same split, the same sentence asked twice
("Open file" / "Open File...") never lands on both sides of the train/test line, and adding pairs
never moves old ones. Files are written atomically and hold no timestamp, so building twice gives
byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from clearformer.data.parallel import read_parallel  # re-exported: callers import it from here too
from clearformer.errors import UserError
from clearformer.store.atomic import atomic_write_text

__all__ = ["read_parallel", "split_key", "split_of", "split_pairs", "write_parallel_corpus", "summary"]

SPLITS = ("train", "valid", "test")
MANIFEST = "manifest.json"
_BUCKETS = 10_000


def split_key(source: str) -> str:
    """'Open File...' -> 'open file': what two sources must share to be the same sentence."""
    return " ".join(re.findall(r"[^\W_]+", source.casefold()))


def split_of(source: str, valid_fraction: float, test_fraction: float) -> str:
    """'train', 'valid' or 'test', from the first 8 bytes of sha256(split_key(source))."""
    digest = hashlib.sha256(split_key(source).encode("utf-8")).digest()
    bucket = int.from_bytes(digest[:8], "big") % _BUCKETS
    if bucket < valid_fraction * _BUCKETS:
        return "valid"
    if bucket < (valid_fraction + test_fraction) * _BUCKETS:
        return "test"
    return "train"


def split_pairs(pairs: Iterable[tuple[str, str]], valid_fraction: float,
                test_fraction: float) -> dict[str, list[tuple[str, str]]]:
    """Pairs by split, each keeping the input order."""
    if not (0 <= valid_fraction and 0 <= test_fraction and valid_fraction + test_fraction < 1):
        raise UserError(f"valid ({valid_fraction}) and test ({test_fraction}) fractions must be >= 0 "
                        "and leave some pairs for training")
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in SPLITS}
    for source, target in pairs:
        splits[split_of(source, valid_fraction, test_fraction)].append((source, target))
    return splits


def tsv_line(source: str, target: str) -> str:
    if "\t" in source + target or "\n" in source + target:
        raise ValueError(f"a tab or newline inside a pair cannot be written as TSV: {source!r}")
    return f"{source}\t{target}\n"


def write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_parallel_corpus(out: Path, pairs: list[tuple[str, str]], manifest: dict,
                          valid_fraction: float, test_fraction: float,
                          minimum_heldout: int = 0) -> dict[str, int]:
    """Write train.tsv, valid.tsv, test.tsv (source TAB target) and manifest.json under `out`.

    `manifest` gets the split rule and the pair count of each split added; returns those counts.
    Raises UserError when valid or test gets fewer than `minimum_heldout` pairs.
    """
    splits = split_pairs(pairs, valid_fraction, test_fraction)
    counts = {name: len(rows) for name, rows in splits.items()}
    short = [name for name in ("valid", "test") if counts[name] < minimum_heldout]
    if short:
        raise UserError(f"only {', '.join(f'{counts[n]} {n}' for n in short)} pairs "
                        f"(at least {minimum_heldout} wanted): the corpus is too small")
    for name, rows in splits.items():
        atomic_write_text(out / f"{name}.tsv", "".join(tsv_line(s, t) for s, t in rows))
    manifest = dict(manifest)
    manifest["split"] = {
        "rule": "sha256 of the case-folded source with punctuation removed; first 8 bytes mod "
                f"{_BUCKETS}: below valid_fraction -> valid, then test_fraction -> test, else train",
        "valid_fraction": valid_fraction,
        "test_fraction": test_fraction,
    }
    manifest["pairs"] = {"total": len(pairs), **counts}
    manifest["files"] = {f"{name}.tsv": f"source TAB target, {counts[name]} lines" for name in SPLITS}
    write_json(out / MANIFEST, manifest)
    return counts


def summary(name: str, out: Path, counts: dict[str, int]) -> str:
    sizes = sum((out / f"{split}.tsv").stat().st_size for split in SPLITS)
    return (f"{name}: {sum(counts.values()):,} pairs (train {counts['train']:,}, valid {counts['valid']:,}, "
            f"test {counts['test']:,}), {sizes / 1e6:.1f} MB in {out}")
