"""Debian packages without installing them: `apt-get download` into a cache, read with `dpkg-deb`.

`dpkg-deb --fsys-tarfile` streams a package's files as a tar archive, which `tarfile` reads member
by member: nothing is unpacked to disk and nothing needs root.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError

_NOT_FOUND = ("Unable to locate package", "has no installation candidate", "Can't select candidate version",
              "No packages found")


@dataclass(frozen=True)
class DebInfo:
    package: str
    version: str
    architecture: str
    path: Path


def require_tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UserError(f"{name} not found: {why}")
    return path


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def deb_info(path: Path) -> DebInfo:
    """Package, Version and Architecture from the package's control file."""
    dpkg_deb = require_tool("dpkg-deb", "it reads the downloaded .deb packages (install dpkg)")
    result = subprocess.run([dpkg_deb, "--field", str(path), "Package", "Version", "Architecture"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError(f"{path}: not a readable .deb package ({_last_line(result.stderr)})")
    fields = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    return DebInfo(fields.get("Package", ""), fields.get("Version", ""), fields.get("Architecture", ""), path)


def iter_files(path: Path, wanted: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each regular file in the package whose name (like 'usr/share/...') is wanted."""
    dpkg_deb = require_tool("dpkg-deb", "it reads the downloaded .deb packages (install dpkg)")
    process = subprocess.Popen([dpkg_deb, "--fsys-tarfile", str(path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    finished = False
    try:
        with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
            for member in archive:
                name = member.name.removeprefix("./")
                if member.isfile() and wanted(name):
                    yield name, archive.extractfile(member).read()
        finished = True
    except tarfile.TarError as error:
        raise UserError(f"{path}: cannot read the package's files ({error})") from error
    finally:
        if not finished:  # the reader stopped early or failed: do not leave dpkg-deb behind
            process.kill()
        process.stdout.close()
        stderr = process.stderr.read().decode(errors="replace")
        process.stderr.close()
        status = process.wait()
    if status != 0:
        raise UserError(f"{path}: dpkg-deb failed ({_last_line(stderr)})")


def doc_link(path: Path, package: str) -> str | None:
    """The package whose /usr/share/doc folder this one links to (gcc-12-locales -> gcc-12-base), if any."""
    dpkg_deb = require_tool("dpkg-deb", "it reads the downloaded .deb packages (install dpkg)")
    listing = subprocess.run([dpkg_deb, "--contents", str(path)], capture_output=True, text=True).stdout
    match = re.search(rf"\./usr/share/doc/{re.escape(package)} -> (?:\.\./)?([\w.+-]+)/?$", listing, re.M)
    return match.group(1) if match else None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def cached_debs(folder: Path) -> dict[str, Path]:
    """package name -> cached .deb (if several versions are there, the last file name in sorted order)."""
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("*.deb")):
        found[path.name.split("_", 1)[0]] = path
    return found


def apt_download(packages: list[str], folder: Path, log: Callable[[str], None] = print) -> dict[str, Path]:
    """Make sure a .deb of each package is in `folder`; returns package -> path for those available.

    Packages already there are not downloaded again. `apt-get download` fetches the candidate
    version of the configured release without installing anything; when it cannot find a package
    (missing or stale package lists), `apt-get update` runs once and the download is tried again.
    """
    folder.mkdir(parents=True, exist_ok=True)
    missing = [name for name in packages if name not in cached_debs(folder)]
    if missing:
        apt_get = require_tool("apt-get", "the en-fr-software corpus is built from Debian packages; "
                                          "build it on Debian or Ubuntu, or pass your own corpus with "
                                          "`clearformer data build custom`")
        log(f"downloading {len(missing)} package(s) with apt-get download: {' '.join(missing)}")
        result = _run_download(apt_get, missing, folder)
        if result.returncode != 0 and any(marker in result.stderr for marker in _NOT_FOUND):
            log("apt-get cannot find some packages: running apt-get update once")
            update = subprocess.run([apt_get, "update"], capture_output=True, text=True)
            if update.returncode != 0:
                raise UserError(f"apt-get update failed: {_last_line(update.stderr)}")
            result = _run_download(apt_get, missing, folder)
        if result.returncode != 0:
            # One bad name makes apt-get download nothing: fetch the others one by one.
            for name in missing:
                single = _run_download(apt_get, [name], folder)
                if single.returncode != 0:
                    log(f"warning: {name} not downloaded: {_last_line(single.stderr)}")
    available = cached_debs(folder)
    return {name: available[name] for name in packages if name in available}


def _run_download(apt_get: str, names: list[str], folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([apt_get, "download", *names], cwd=folder, capture_output=True, text=True)


def copyright_licence(text: str, catalogue_path: str = "po/fr.po") -> str:
    """The licence a debian/copyright file gives to a translation catalogue.

    Machine-readable (DEP-5) files: the last `Files:` stanza whose patterns match `catalogue_path`
    (usually `Files: *`), as the format specifies. Free-form files: their `License:` line if they
    have one, else the licences the text names (also when no stanza covers the catalogue).
    """
    stanzas = [stanza for stanza in re.split(r"\n\s*\n", text) if stanza.strip()]
    licence, has_files_stanzas = None, False
    for stanza in stanzas:
        files = re.search(r"^Files:(.*(?:\n[ \t].*)*)", stanza, re.M)
        found = re.search(r"^License:[ \t]*(\S.*)$", stanza, re.M)
        has_files_stanzas = has_files_stanzas or files is not None
        if files and found and any(fnmatch.fnmatchcase(catalogue_path, pattern)
                                   for pattern in files.group(1).split()):
            licence = found.group(1).strip()
    if licence:
        return licence
    found = re.search(r"^License:[ \t]*(\S.*)$", text, re.M)
    if found and not has_files_stanzas:  # a free-form file with one licence line
        return found.group(1).strip()
    names = [(r"GNU Lesser General Public License|\bLGPL", "LGPL"),
             (r"GNU General Public License|\bGPL", "GPL"),
             (r"Mozilla Public License|\bMPL", "MPL"), (r"Apache License", "Apache"),
             (r"\bBSD\b", "BSD"), (r"public domain", "public domain")]
    mentioned = [short for pattern, short in names if re.search(pattern, text, re.I)]
    return "free-form copyright file naming: " + (", ".join(mentioned) or "no known licence")
