"""The en-X-software corpora: English -> X pairs from the X gettext catalogues of Debian packages.

Software translators write short, careful, consistent sentences ("Save the file?" -> "Enregistrer
le fichier ?"), and Debian ships them compiled in `.mo` files: seventeen packages give about
100,000 clean French pairs. Package versions drift with point releases; the manifest records the exact
versions, file hashes and licences that went into a build.

The recipe is one for every language (`clearformer data build software --target pt_BR`): the same
seventeen packages (LibreOffice's translations come one package per language, libreoffice-l10n-pt-br;
the others hold every language), the catalogues of exactly the target locale (`.../pt_BR/LC_MESSAGES/
*.mo`: no fallback from pt_BR to pt or back, see docs/adapt.md), the same cleaning, splits and
manifest. `en-fr-software` (`--target fr`, or the recipe's old name) is the corpus it always was:
same pairs, same splits, same manifest (tests/data/test_data_software_targets.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from clearformer.data.corpus import MANIFEST, summary, write_parallel_corpus
from clearformer.data.deb import apt_download, copyright_licence, deb_info, doc_link, iter_files, sha256_file
from clearformer.data.gettext_clean import clean_messages
from clearformer.data.mo import MoError, read_mo
from clearformer.errors import UserError
from clearformer.store.safeio import read_json_object

NAME = "en-fr-software"  # the French corpus (`--target fr`); other targets: corpus_name(target)
PACKAGES = (
    "libreoffice-l10n-fr", "gcc-12-locales", "freeciv-data", "inkscape", "gimp-data", "krita-l10n",
    "vlc-l10n", "evolution-common", "gnucash-common", "cinnamon-l10n", "util-linux-locales",
    "libgtk-3-common", "kdevelop-l10n", "k3b-i18n", "gnome-control-center-data", "libc-l10n",
    "aptitude-common",
)
MIN_PAIRS = 90_000  # French: all seventeen packages (fewer means downloads failed)
# Any other target: a language that some packages do not translate still makes a corpus, if one worth training on.
MIN_PAIRS_OTHER = 10_000
VALID_FRACTION = TEST_FRACTION = 0.015
MIN_HELDOUT = 1_000
DEFAULT_TARGET = "fr"
# The recipe's two smallest packages that hold many locales' catalogues (0.7 and 1.2 MB): fetched first, they say
# whether the packages translate into a target at all (check_locale_translated).
PROBES = ("libc-l10n", "util-linux-locales")
_LOCALE_FOLDER = re.compile(r"/([^/]+)/LC_MESSAGES/[^/]+\.mo$")
# A gettext locale as Debian's folders spell it: fr, pt_BR, sr@latin, zh_CN, ast.
LOCALE = re.compile(r"^[a-z]{2,3}(?:_[A-Z]{2})?(?:@[a-z]+)?$")
LANGUAGE_NAMES = {"fr": "French", "pt_BR": "Brazilian Portuguese", "pt": "European Portuguese", "de": "German",
                  "es": "Spanish", "it": "Italian", "nl": "Dutch", "pl": "Polish", "ru": "Russian",
                  "ja": "Japanese", "zh_CN": "Simplified Chinese", "zh_TW": "Traditional Chinese"}


def check_target(target: str) -> str:
    """A target locale as the catalogues' folders spell it, or a one-line UserError."""
    if not LOCALE.match(target):
        raise UserError(f"--target {target!r}: give a gettext locale as Debian's catalogue folders spell it, "
                        "e.g. fr, de, es, pt_BR, zh_CN")
    return target


def check_locale_translated(target: str, packages: tuple[str, ...], folder: Path, log: Callable[[str], None]) -> None:
    """Before the recipe's ~100 MB download: do its packages translate into `target` at all? The two smallest
    packages that hold many locales are fetched first (`PROBES`, about 2 MB), and LibreOffice's package for the
    language is asked of apt (no download); neither: one line listing the locales they do hold."""
    probes = [name for name in PROBES if name in packages]
    fetched = apt_download(probes, folder, log)
    if not fetched:
        return  # nothing could be probed (apt says why above): the build reports what it finds
    locales: set[str] = set()
    for path in fetched.values():
        for name, _ in iter_files(path, lambda name: bool(_LOCALE_FOLDER.search(name))):
            locales.add(_LOCALE_FOLDER.search(name).group(1))
    if target in locales or package_known(packages_for(target)[0]):
        return
    raise UserError(f"--target {target!r}: no catalogue for it in {', '.join(fetched)}, and no package "
                    f"{packages_for(target)[0]}: Debian's packages do not translate into {target!r}; they do "
                    f"into {', '.join(sorted(locales))}")


def package_known(name: str) -> bool:
    """Whether apt knows the package (its lists, no download)."""
    apt_cache = shutil.which("apt-cache")
    if apt_cache is None:
        return False
    found = subprocess.run([apt_cache, "show", "--no-all-versions", name], capture_output=True, text=True)
    return found.returncode == 0 and bool(found.stdout.strip())


def corpus_name(target: str) -> str:
    """fr -> en-fr-software, pt_BR -> en-pt-software (the language; the manifest keeps the exact locale)."""
    return f"en-{re.split(r'[_@]', target)[0]}-software"


def packages_for(target: str) -> tuple[str, ...]:
    """The recipe's packages for `target`: LibreOffice's translations are one package per language."""
    libreoffice = "libreoffice-l10n-" + target.split("@")[0].lower().replace("_", "-")
    return tuple(libreoffice if name == "libreoffice-l10n-fr" else name for name in PACKAGES)


def catalogue_pattern(target: str) -> re.Pattern:
    """The catalogues of exactly this locale: `.../pt_BR/LC_MESSAGES/x.mo` (not pt's, not pt_PT's)."""
    return re.compile(rf"/{re.escape(target)}/LC_MESSAGES/[^/]+\.mo$")


def package_pairs(path: Path, counts: Counter, target: str = DEFAULT_TARGET) -> tuple[list[tuple[str, str]], dict]:
    """The cleaned pairs of every `target` catalogue in one .deb (French by default), and its manifest entry."""
    info = deb_info(path)
    doc = f"usr/share/doc/{info.package}/copyright"
    pairs, catalogues, copyright_text = [], [], None
    wanted = catalogue_pattern(target)
    for name, data in iter_files(path, lambda name: bool(wanted.search(name)) or name == doc):
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
        "licence": copyright_licence(copyright_text, f"po/{target}.po") if copyright_text else None,
        "licence_from": f"/{doc}" if copyright_text else None,
    }
    return pairs, entry


def _linked_licence(entry: dict, path: Path, fetch: Callable[[str], Path | None] | None, target: str) -> None:
    """A package whose doc folder links to another's (gcc-12-locales -> gcc-12-base): read that copyright."""
    linked = doc_link(path, entry["package"])
    target = fetch(linked) if (linked and fetch) else None
    if target is None:
        entry["licence"] = f"see /usr/share/doc/{linked}/copyright" if linked else "no copyright file found"
        return
    doc = f"usr/share/doc/{linked}/copyright"
    for _, data in iter_files(target, lambda name: name == doc):
        entry["licence"] = copyright_licence(data.decode("utf-8", errors="replace"), f"po/{target}.po")
        entry["licence_from"] = f"/{doc} (package {deb_info(target).package} {deb_info(target).version})"


def build_from_debs(debs: list[Path], out: Path, log: Callable[[str], None] = print,
                    fetch: Callable[[str], Path | None] | None = None, min_pairs: int = MIN_PAIRS,
                    min_heldout: int = MIN_HELDOUT, target: str = DEFAULT_TARGET, failed: int = 0) -> dict[str, int]:
    """Read, clean, deduplicate and write the pairs of these packages' `target` catalogues, in this order."""
    counts: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    pairs: list[tuple[str, str]] = []
    packages = []
    for path in debs:
        package_clean, entry = package_pairs(path, counts, target)
        if entry["licence"] is None:
            _linked_licence(entry, path, fetch, target)
        fresh = [pair for pair in dict.fromkeys(package_clean) if pair not in seen]
        seen.update(fresh)
        pairs.extend(fresh)
        counts["duplicates_removed"] += len(package_clean) - len(fresh)
        entry["new_pairs"] = len(fresh)
        packages.append(entry)
        log(f"  {entry['package']} {entry['version']}: {len(entry['catalogues'])} catalogue(s), "
            f"{len(fresh):,} new pairs")
    if len(pairs) < min_pairs:
        why = (f"{failed} package(s) could not be downloaded: see the warnings above" if failed else
               f"the packages hold {sum(len(p['catalogues']) for p in packages)} {target} catalogue(s): too few "
               f"translations into {target} to train on")
        raise UserError(f"only {len(pairs):,} pairs from {len(debs)} package(s); at least {min_pairs:,} "
                        f"are needed ({why})", exit_code=1)
    language = LANGUAGE_NAMES.get(target, target)
    manifest = {
        "name": corpus_name(target),
        "system": _system_release(),
        "description": f"English -> {language} pairs from the {language} gettext catalogues (msgid -> msgstr "
                       f"of the {target} .mo files) of Debian packages",
        "source": "Debian packages fetched with `apt-get download` (no install), read with dpkg-deb",
        "languages": {"source": "en", "target": target},
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


def check_same_target(out: Path, target: str) -> None:
    """A corpus folder built for another locale is never replaced silently (pt and pt_BR share en-pt-software)."""
    manifest = out / MANIFEST
    if not manifest.exists():
        return
    built = read_json_object(manifest).get("languages")
    built_target = built.get("target") if isinstance(built, dict) else None
    if built_target != target:
        raise UserError(f"{out}: holds a corpus built for {built_target!r}, not {target!r}; give another --out "
                        "(or remove that folder)")


def build(out: Path, downloads: Path, log: Callable[[str], None] = print,
          target: str = DEFAULT_TARGET) -> dict[str, int]:
    """`clearformer data build software --target X` (en-fr-software: X = fr): download (once), then build."""
    started = time.perf_counter()
    check_target(target)
    check_same_target(out, target)
    packages = packages_for(target)
    folder = downloads / "debian"
    check_locale_translated(target, packages, folder, log)
    available = apt_download(list(packages), folder, log)
    absent = [name for name in packages if name not in available]
    if absent:
        log(f"warning: {len(absent)} package(s) unavailable: {' '.join(absent)}")
    log(f"reading the {LANGUAGE_NAMES.get(target, target)} catalogues of {len(available)} packages in {folder}")

    def fetch(name: str) -> Path | None:
        return apt_download([name], folder, log).get(name)

    min_pairs = MIN_PAIRS if target == DEFAULT_TARGET else MIN_PAIRS_OTHER
    counts = build_from_debs([available[name] for name in packages if name in available], out, log, fetch,
                             min_pairs=min_pairs, target=target, failed=len(absent))
    log(summary(corpus_name(target), out, counts) + f" ({time.perf_counter() - started:.0f} s)")
    return counts
