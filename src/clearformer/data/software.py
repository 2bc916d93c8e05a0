"""The en-fr-software corpus: English -> French pairs from the French gettext catalogues of Debian packages.

Software translators write short, careful, consistent sentences ("Save the file?" -> "Enregistrer
le fichier ?"), and Debian ships them compiled in `.mo` files: seventeen packages give about
100,000 clean pairs. Package versions drift with point releases; the manifest records the exact
versions, file hashes and licences that went into a build.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from clearformer.data.corpus import summary, write_parallel_corpus
from clearformer.data.deb import apt_download, copyright_licence, deb_info, doc_link, iter_files, sha256_file
from clearformer.data.gettext_clean import clean_messages
from clearformer.data.mo import MoError, read_mo
from clearformer.errors import UserError

NAME = "en-fr-software"
PACKAGES = (
    "libreoffice-l10n-fr", "gcc-12-locales", "freeciv-data", "inkscape", "gimp-data", "krita-l10n",
    "vlc-l10n", "evolution-common", "gnucash-common", "cinnamon-l10n", "util-linux-locales",
    "libgtk-3-common", "kdevelop-l10n", "k3b-i18n", "gnome-control-center-data", "libc-l10n",
    "aptitude-common",
)
MIN_PAIRS = 90_000
VALID_FRACTION = TEST_FRACTION = 0.015
MIN_HELDOUT = 1_000
_FRENCH_CATALOGUE = re.compile(r"/fr/LC_MESSAGES/[^/]+\.mo$")


def package_pairs(path: Path, counts: Counter) -> tuple[list[tuple[str, str]], dict]:
    """The cleaned pairs of every French catalogue in one .deb, and its manifest entry."""
    info = deb_info(path)
    doc = f"usr/share/doc/{info.package}/copyright"
    pairs, catalogues, copyright_text = [], [], None
    for name, data in iter_files(path, lambda name: bool(_FRENCH_CATALOGUE.search(name)) or name == doc):
        if name == doc:
            copyright_text = data.decode("utf-8", errors="replace")
            continue
        try:
            catalogue = read_mo(data)
        except MoError as error:
            raise UserError(f"{path}: {name}: {error}") from error
        counts["undecodable"] += catalogue.undecodable
        pairs.extend(clean_messages(catalogue.entries, counts))
        catalogues.append(name.rsplit("/", 1)[-1])
    entry = {
        "package": info.package, "version": info.version, "architecture": info.architecture,
        "file": path.name, "sha256": sha256_file(path), "catalogues": catalogues,
        "licence": copyright_licence(copyright_text) if copyright_text else None,
        "licence_from": f"/{doc}" if copyright_text else None,
    }
    return pairs, entry


def _linked_licence(entry: dict, path: Path, fetch: Callable[[str], Path | None] | None) -> None:
    """A package whose doc folder links to another's (gcc-12-locales -> gcc-12-base): read that copyright."""
    linked = doc_link(path, entry["package"])
    target = fetch(linked) if (linked and fetch) else None
    if target is None:
        entry["licence"] = f"see /usr/share/doc/{linked}/copyright" if linked else "no copyright file found"
        return
    doc = f"usr/share/doc/{linked}/copyright"
    for _, data in iter_files(target, lambda name: name == doc):
        entry["licence"] = copyright_licence(data.decode("utf-8", errors="replace"))
        entry["licence_from"] = f"/{doc} (package {deb_info(target).package} {deb_info(target).version})"


def build_from_debs(debs: list[Path], out: Path, log: Callable[[str], None] = print,
                    fetch: Callable[[str], Path | None] | None = None, min_pairs: int = MIN_PAIRS,
                    min_heldout: int = MIN_HELDOUT) -> dict[str, int]:
    """Read, clean, deduplicate and write the pairs of these packages, in this order."""
    counts: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    pairs: list[tuple[str, str]] = []
    packages = []
    for path in debs:
        package_clean, entry = package_pairs(path, counts)
        if entry["licence"] is None:
            _linked_licence(entry, path, fetch)
        fresh = [pair for pair in dict.fromkeys(package_clean) if pair not in seen]
        seen.update(fresh)
        pairs.extend(fresh)
        counts["duplicates_removed"] += len(package_clean) - len(fresh)
        entry["new_pairs"] = len(fresh)
        packages.append(entry)
        log(f"  {entry['package']} {entry['version']}: {len(entry['catalogues'])} catalogue(s), "
            f"{len(fresh):,} new pairs")
    if len(pairs) < min_pairs:
        raise UserError(f"only {len(pairs):,} pairs from {len(debs)} package(s); at least {min_pairs:,} "
                        "are needed (see the warnings above for packages that could not be downloaded)",
                        exit_code=1)
    manifest = {
        "name": NAME,
        "system": _system_release(),
        "description": "English -> French pairs from the French gettext catalogues (msgid -> msgstr "
                       "of the fr .mo files) of Debian packages",
        "source": "Debian packages fetched with `apt-get download` (no install), read with dpkg-deb",
        "languages": {"source": "en", "target": "fr"},
        "packages": packages,
        "cleaning": {key: counts[key] for key in sorted(counts)},
    }
    result = write_parallel_corpus(out, pairs, manifest, VALID_FRACTION, TEST_FRACTION, min_heldout)
    log(f"cleaning: {counts['messages']:,} messages; dropped {counts['dropped_markup']:,} with markup, "
        f"{counts['dropped_identical']:,} identical, {counts['dropped_no_words']:,} without words, "
        f"{counts['duplicates_removed']:,} duplicates; {counts['accelerators_removed']:,} accelerators "
        f"removed; {counts['paragraphs_split']:,} paragraphs split")
    return result


def _system_release() -> str:
    """'Debian GNU/Linux 12 (bookworm)': the release whose package versions `apt-get download` fetched."""
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    found = re.search(r'^PRETTY_NAME="?([^"\n]*)"?$', text, re.M)
    return found.group(1) if found else "unknown"


def build(out: Path, downloads: Path, log: Callable[[str], None] = print) -> dict[str, int]:
    """`clearformer data build en-fr-software`: download (once) the packages, then build."""
    started = time.perf_counter()
    folder = downloads / "debian"
    available = apt_download(list(PACKAGES), folder, log)
    absent = [name for name in PACKAGES if name not in available]
    if absent:
        log(f"warning: {len(absent)} package(s) unavailable: {' '.join(absent)}")
    log(f"reading the French catalogues of {len(available)} packages in {folder}")

    def fetch(name: str) -> Path | None:
        return apt_download([name], folder, log).get(name)

    counts = build_from_debs([available[name] for name in PACKAGES if name in available], out, log, fetch)
    log(summary(NAME, out, counts) + f" ({time.perf_counter() - started:.0f} s)")
    return counts
