"""A reader for gettext's compiled catalogues (`.mo`), after the format GNU gettext documents.

Layout (all numbers 32-bit, in the byte order the magic number reveals):

    offset 0   magic 0x950412de
           4   revision (major version 0 or 1)
           8   N, the number of strings
          12   O, offset of the table of original strings: N x (length, offset)
          16   T, offset of the table of translations:     N x (length, offset)

An original is `[context EOT] msgid [NUL msgid_plural]`; its translation is the plural forms
joined by NUL. The entry with an empty msgid is the header, whose `Content-Type` names the charset.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

MAGIC = 0x950412DE
CONTEXT_SEPARATOR = "\x04"
PLURAL_SEPARATOR = "\x00"


class MoError(ValueError):
    """The bytes are not a readable .mo file (bad magic, truncated tables)."""


@dataclass(frozen=True)
class MoEntry:
    """One message: `msgstr` holds one string, or one per plural form when `msgid_plural` is set."""

    msgid: str
    msgstr: tuple[str, ...]
    context: str | None = None
    msgid_plural: str | None = None


@dataclass
class MoCatalogue:
    """A catalogue's header fields, its messages (header excluded) and how many could not be decoded."""

    headers: dict[str, str]
    entries: list[MoEntry]
    undecodable: int = 0


def _string_table(data: bytes, order: str, offset: int, count: int) -> list[bytes]:
    end = offset + 8 * count
    if offset < 20 or end > len(data):
        raise MoError(f"string table at {offset} runs past the end of the file ({len(data)} bytes)")
    strings = []
    for length, start in struct.iter_unpack(order + "2I", data[offset:end]):
        if start + length > len(data):
            raise MoError(f"string at {start} (+{length}) runs past the end of the file")
        strings.append(data[start:start + length])
    return strings


def parse_headers(text: str) -> dict[str, str]:
    """'Content-Type: text/plain; charset=UTF-8\\n...' -> {'Content-Type': 'text/plain; charset=UTF-8'}"""
    headers = {}
    for line in text.split("\n"):
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip()] = value.strip()
    return headers


def charset_of(headers: dict[str, str]) -> str:
    match = re.search(r"charset=([\w.:-]+)", headers.get("Content-Type", ""))
    charset = match.group(1) if match else "UTF-8"
    return "UTF-8" if charset.upper() == "CHARSET" else charset  # an unfilled template header


def read_mo(data: bytes) -> MoCatalogue:
    """Parse the bytes of a .mo file into its header and entries (see the module docstring)."""
    if len(data) < 20:
        raise MoError(f"too short for a .mo file ({len(data)} bytes)")
    for order in "<>":
        if struct.unpack(order + "I", data[:4])[0] == MAGIC:
            break
    else:
        raise MoError(f"bad magic number {data[:4].hex()} (not a .mo file)")
    revision, count, originals_at, translations_at = struct.unpack(order + "4I", data[4:20])
    if revision >> 16 > 1:
        raise MoError(f"unknown .mo revision {revision >> 16}")
    originals = _string_table(data, order, originals_at, count)
    translations = _string_table(data, order, translations_at, count)

    headers: dict[str, str] = {}
    for original, translation in zip(originals, translations, strict=True):
        if original == b"":
            headers = parse_headers(translation.decode("utf-8", errors="replace"))
    charset = charset_of(headers)
    try:
        "".encode(charset)
    except LookupError as error:
        raise MoError(f"unknown charset {charset!r} in the header") from error

    catalogue = MoCatalogue(headers=headers, entries=[])
    for original, translation in zip(originals, translations, strict=True):
        if original == b"":
            continue
        try:
            key, text = original.decode(charset), translation.decode(charset)
        except UnicodeDecodeError:
            catalogue.undecodable += 1
            continue
        context = None
        if CONTEXT_SEPARATOR in key:
            context, key = key.split(CONTEXT_SEPARATOR, 1)
        msgid, _, plural = key.partition(PLURAL_SEPARATOR)
        catalogue.entries.append(MoEntry(
            msgid=msgid,
            msgstr=tuple(text.split(PLURAL_SEPARATOR)),
            context=context,
            msgid_plural=plural if PLURAL_SEPARATOR in key else None,
        ))
    return catalogue


def write_mo(entries: list[MoEntry], charset: str = "UTF-8", big_endian: bool = False) -> bytes:
    """The inverse of `read_mo` (no hash table, which readers may ignore): for tests and tools.

    The header entry is written first, then the entries sorted by their original bytes, as msgfmt does.
    """
    def original(entry: MoEntry) -> bytes:
        key = entry.msgid
        if entry.msgid_plural is not None:
            key += PLURAL_SEPARATOR + entry.msgid_plural
        if entry.context is not None:
            key = entry.context + CONTEXT_SEPARATOR + key
        return key.encode(charset)

    header = f"Content-Type: text/plain; charset={charset}\nPlural-Forms: nplurals=2; plural=(n > 1);\n"
    pairs = sorted((original(e), PLURAL_SEPARATOR.join(e.msgstr).encode(charset)) for e in entries)
    pairs.insert(0, (b"", header.encode("ascii")))
    order = ">" if big_endian else "<"
    count = len(pairs)
    originals_at = 28
    translations_at = originals_at + 8 * count
    blob_at = translations_at + 8 * count
    tables, blob = [b"", b""], bytearray()
    for column in (0, 1):
        for pair in pairs:
            tables[column] += struct.pack(order + "2I", len(pair[column]), blob_at + len(blob))
            blob += pair[column] + b"\x00"
    head = struct.pack(order + "7I", MAGIC, 0, count, originals_at, translations_at, 0, blob_at)
    return head + tables[0] + tables[1] + bytes(blob)
