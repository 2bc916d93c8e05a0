"""Catalogue fidelity: polib's reader and writer against clearformer's (catalog/reading.py, catalog/writing.py).

    python benchmarks/catalogue_fidelity.py [--django FOLDER]     (default: apt-get download python3-django)

On every catalogue of Debian's python3-django (1,182 .po files): how many come back byte for byte when read and
written unchanged; filled by a stand-in translator (each input back after a word), how many keep every byte
outside the filled entries and the header, and pass `msgfmt --check`. Then the time to read and write one
catalogue holding a 5 MB msgid, polib against clearformer, alternating, in this process. Appends a section to
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "catalog"))

from fidelity_support import WHEN, marked, outside  # noqa: E402

from clearformer.catalog.fill import CatalogueSettings, fill_catalogue  # noqa: E402
from clearformer.catalog.reading import read_catalogue  # noqa: E402
from clearformer.catalog.writing import catalogue_text  # noqa: E402


def django_catalogues(folder: Path | None, work: Path) -> tuple[list[Path], str]:
    if folder is None:
        subprocess.run(["apt-get", "download", "python3-django"], cwd=work, check=True, capture_output=True)
        deb = next(work.glob("python3-django_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "root")], check=True)
        folder, name = work / "root", deb.name
    else:
        name = str(folder)
    return sorted(folder.rglob("*.po")), name


def polib_text(path: Path) -> str:
    po = polib.pofile(str(path), wrapwidth=78)
    return po.__unicode__()


def msgfmt_ok(text: str, scratch: Path) -> bool:
    scratch.write_text(text, encoding="utf-8")
    return subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(scratch)],
                          capture_output=True).returncode == 0


def fidelity(catalogues: list[Path], scratch: Path) -> dict[str, int]:
    counts = dict.fromkeys(("catalogues", "polib_same", "ours_same", "filled_outside_same", "filled_msgfmt_ok",
                            "polib_unchanged_msgfmt_ok"), 0)
    for path in catalogues:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
        counts["catalogues"] += 1
        old = polib_text(path)
        counts["polib_same"] += old.encode("utf-8") == raw
        counts["polib_unchanged_msgfmt_ok"] += msgfmt_ok(old, scratch)
        po = read_catalogue(path)
        counts["ours_same"] += catalogue_text(po).encode("utf-8") == raw
        keys = {(e.msgctxt, e.msgid) for e in po if not e.obsolete and e.msgid and not e.translated()
                and not (e.msgstr_plural and not e.msgid_plural)}
        fill_catalogue(po, CatalogueSettings(language=po.metadata.get("Language") or "fr"), str(path), marked,
                       now=WHEN)
        filled = catalogue_text(po)
        counts["filled_outside_same"] += outside(filled, keys) == outside(text, keys)
        counts["filled_msgfmt_ok"] += msgfmt_ok(filled, scratch)
    return counts


def big_message_seconds(work: Path, rounds: int = 3) -> dict[str, float]:
    path = work / "big.po"
    path.write_text('msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid ""\n'
                    + "".join(f'"{"word " * 15}"\n' for _ in range(70_000)) + 'msgstr ""\n', encoding="utf-8")
    best = {"polib": float("inf"), "clearformer": float("inf")}
    for _ in range(rounds):  # alternating, best of `rounds`
        for name, run in (("polib", polib_text), ("clearformer", lambda p: catalogue_text(read_catalogue(p)))):
            started = time.perf_counter()
            run(path)
            best[name] = min(best[name], time.perf_counter() - started)
    best["bytes"] = path.stat().st_size
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--django", type=Path, help="a folder holding Django's .po files (default: apt-get download)")
    parser.add_argument("--no-write", action="store_true", help="print, do not append to BENCHMARKS.md")
    args = parser.parse_args()
    if shutil.which("msgfmt") is None:
        sys.exit("GNU gettext's msgfmt is needed (scripts/install-gettext.sh)")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        catalogues, source = django_catalogues(args.django, work)
        counts = fidelity(catalogues, work / "scratch.po")
        big = big_message_seconds(work)
    load = os.getloadavg()[0]
    n = counts["catalogues"]
    polib_ok, ours = counts["polib_unchanged_msgfmt_ok"], counts["ours_same"]
    outside_same = counts["filled_outside_same"]
    big_row = f"one msgid of 70,000 lines ({big['bytes'] / 1e6:.1f} MB): read and write, best of 3, alternating"
    section = f"""
## Catalogue fidelity (translate --po): polib's reader and writer against catalog/reading.py and writing.py

`python benchmarks/catalogue_fidelity.py` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()},
Python {platform.python_version()}, polib {polib.__version__}; the machine was shared (load average {load:.1f}).
Material: the {n} catalogues of {source} (Debian's python3-django). "Filled": every untranslated entry
filled by a stand-in translator (its input back after a word), as `translate --po` fills it.

| | polib (before) | clearformer |
|---|---|---|
| read and written unchanged: the same bytes | {counts['polib_same']} of {n} | {counts['ours_same']} of {n} |
| read and written unchanged: msgfmt --check passes | {polib_ok} of {n} | {ours} of {n} (the same bytes) |
| filled: every byte outside the filled entries and the header as it was | | {outside_same} of {n} |
| filled: msgfmt --check --use-fuzzy passes | | {counts['filled_msgfmt_ok']} of {n} |
| {big_row} | {big['polib']:.2f} s | {big['clearformer']:.2f} s |
"""
    print(section)
    if not args.no_write:
        with open(ROOT / "BENCHMARKS.md", "a", encoding="utf-8") as stream:
            stream.write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
