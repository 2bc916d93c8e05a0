"""Held-out software messages for the confidence benchmark: packages OUTSIDE every recipe.

The recipes' packages (clearformer.data.software.PACKAGES, LibreOffice per language) made the corpora the
models saw or were fitted on; these other Debian packages' catalogues did not. Each is fetched with
`apt-get download` (no install) and read and cleaned as the recipe reads its own (`package_pairs`); a
message whose English is in the recipe corpus of that language is left out, so none was seen.

    python benchmarks/confidence_data.py --target pt_BR --corpus /work/prep/data/en-pt-software --out heldout.tsv
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from pathlib import Path

from clearformer.data.deb import apt_download
from clearformer.data.software import package_pairs, packages_for

# Debian packages with gettext catalogues, none in the recipe (checked by `held_out_packages`).
HELD_OUT = (
    "nautilus-data", "gedit-common", "transmission-common", "thunar-data", "gparted", "synaptic",
    "rhythmbox-data", "totem-common", "pidgin-data", "filezilla-common", "hexchat-common", "mousepad", "meld",
    "gnome-calculator", "xfce4-panel",
)


def held_out_packages(target: str) -> tuple[str, ...]:
    recipe = set(packages_for(target))
    overlap = recipe.intersection(HELD_OUT)
    if overlap:
        raise SystemExit(f"held-out packages in the recipe: {sorted(overlap)}")
    return HELD_OUT


def corpus_sources(corpus: Path) -> set[str]:
    seen = set()
    for split in ("train.tsv", "valid.tsv", "test.tsv"):
        with open(corpus / split, encoding="utf-8") as lines:
            seen.update(line.split("\t", 1)[0] for line in lines)
    return seen


def build(target: str, corpus: Path, debs: Path, count: int, seed: int) -> list[tuple[str, str, str]]:
    """(package, English, translation) for `count` messages drawn evenly from the held-out packages."""
    found = apt_download(list(held_out_packages(target)), debs)
    seen = corpus_sources(corpus)
    by_package: dict[str, list[tuple[str, str]]] = {}
    for package, path in sorted(found.items()):
        pairs, _ = package_pairs(path, Counter(), target)
        fresh = [pair for pair in dict.fromkeys(pairs) if pair[0] not in seen and len(pair[0].split()) <= 40]
        unique = list({source: (source, text) for source, text in fresh}.values())
        if unique:
            by_package[package] = unique
    rng = random.Random(seed)
    for pairs in by_package.values():
        rng.shuffle(pairs)
    rows: list[tuple[str, str, str]] = []
    taken = set()
    while len(rows) < count and any(by_package.values()):
        for package, pairs in by_package.items():  # round robin: no one package dominates
            while pairs and len(rows) < count:
                source, text = pairs.pop()
                if source not in taken:
                    taken.add(source)
                    rows.append((package, source, text))
                    break
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--corpus", type=Path, required=True, help="the recipe corpus of that language")
    parser.add_argument("--debs", type=Path, default=Path("/tmp/confidence/debs"))
    parser.add_argument("--count", type=int, default=1250)
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = build(args.target, args.corpus, args.debs, args.count, args.seed)
    args.out.write_text("".join(f"{source}\t{text}\t{package}\n" for package, source, text in rows),
                        encoding="utf-8")
    print(f"{len(rows)} messages from {len({row[0] for row in rows})} packages -> {args.out}")


if __name__ == "__main__":
    main()
